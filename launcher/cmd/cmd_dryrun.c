/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_dryrun.c — `par3drun --dry-run`: place, check, report; start nothing.
 * Exit 0 when no check is an error, 2 on bad input or error-level checks
 * (the report is still printed so the user sees why).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "termsafe.h"
#include "place.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_all(FILE *f, const char *s)
{
    size_t n = strlen(s);
    return fwrite(s, 1, n, f) == n ? 0 : -1;
}

int p3d_cmd_dryrun(const p3d_opts *o)
{
    int rc = P3D_EXIT_BADINPUT;
    char *err = NULL, *report = NULL;
    const char *fmt = o->format ? o->format : "text";
    p3d_plan_result r;
    memset(&r, 0, sizeof r);
    char *(*fn)(const p3d_report_in *) = NULL;
    if (!strcmp(fmt, "text"))
        fn = p3d_report_text;
    else if (!strcmp(fmt, "json"))
        fn = p3d_report_json;
    else if (!strcmp(fmt, "svg"))
        fn = p3d_report_svg;
    else if (!strcmp(fmt, "html"))
        fn = p3d_report_html;
    else {
        p3d_err(&err, "--format: expected text, json, svg or html, got '%s'", fmt);
        return p3d_fail_input(err);
    }
    if (p3d_place(o, &r, &err) < 0)
        return p3d_fail_input(err);
    if (o->verbose && r.base_err)
        fprintf(stderr, "par3drun: no naive baseline: %s\n", p3d_tesc(r.base_err));
    /* up front: another policy's estimate beats this one (or what auto chose) */
    char note[512];
    p3d_place_policy_note(&r, note, sizeof note);
    if (note[0])
        fprintf(stderr, "par3drun: note: %s\n", p3d_tesc(note));
    p3d_report_in in = p3d_plan_report_in(&r);
    /* colour only for people: text, on a terminal, and never with NO_COLOR */
    const char *nc = getenv("NO_COLOR");
    in.color = !strcmp(fmt, "text") && !o->output && isatty(STDOUT_FILENO) && !(nc && *nc);
    double t0 = now();
    if (fn == p3d_report_json) {
        /* streamed (no whole-world string): report and write are one stage */
        FILE *f = o->output ? fopen(o->output, "w") : stdout;
        if (!f) {
            char *m = NULL;
            p3d_err(&m, "--output %s: cannot create: %s", o->output, strerror(errno));
            rc = p3d_fail_input(m);
            goto out;
        }
        int bad = p3d_report_json_to(&in, f) < 0;
        bad |= o->output ? fclose(f) != 0 : fflush(stdout) != 0;
        if (bad) {
            fprintf(stderr, "par3drun: %s%s: write failed: %s\n", o->output ? "--output " : "",
                    o->output ? p3d_tesc(o->output) : "stdout", strerror(errno));
            rc = P3D_EXIT_FAIL;
            goto out;
        }
    } else {
        report = fn(&in);
    }
    double t_report = now() - t0;
    if (!report && fn != p3d_report_json) {
        fprintf(stderr, "par3drun: out of memory while writing the %s report\n", fmt);
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if (fn == p3d_report_json) {
        /* written above */
    } else if (o->output) {
        FILE *f = fopen(o->output, "w");
        if (!f) {
            char *m = NULL;
            p3d_err(&m, "--output %s: cannot create: %s", o->output, strerror(errno));
            rc = p3d_fail_input(m);
            goto out;
        }
        int bad = write_all(f, report) < 0;
        bad |= fclose(f) != 0;
        if (bad) {
            fprintf(stderr, "par3drun: --output %s: write failed: %s\n", p3d_tesc(o->output), strerror(errno));
            rc = P3D_EXIT_FAIL;
            goto out;
        }
    } else if ((note[0] && !strcmp(fmt, "text") && printf("note: %s\n\n", note) < 0) || write_all(stdout, report) < 0 ||
               fflush(stdout) != 0) {
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if (o->verbose)
        fprintf(stderr,
                "par3drun: dry run: cluster+job %.3f s, policy %.3f s, checks %.3f s, baseline %.3f s, "
                "report %.3f s, write %.3f s\n",
                r.t_cluster, r.t_policy, r.t_check, r.t_baseline, t_report, now() - t0 - t_report);
    if (r.an->nerrors) {
        fprintf(stderr, "par3drun: the placement fails %d error-level check%s (see the report)\n", r.an->nerrors,
                r.an->nerrors == 1 ? "" : "s");
        rc = P3D_EXIT_BADINPUT;
    } else {
        rc = P3D_EXIT_OK;
    }
out:
    free(report);
    p3d_plan_result_free(&r);
    return rc;
}
