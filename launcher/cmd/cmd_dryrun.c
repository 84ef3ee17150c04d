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
#include "say.h"
#include "termsafe.h"
#include "plan.h"
#include "preflight.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int p3d_cmd_dryrun(const p3d_opts *o)
{
    int rc = P3D_EXIT_BADINPUT;
    char *err = NULL, *pf_json = NULL, *w_text = NULL, *w_json = NULL;
    const char *fmt = o->format ? o->format : "text";
    p3d_plan_result r;
    memset(&r, 0, sizeof r);
    /* every format streamed (no whole-world string): report and write are one stage */
    int (*fn)(const p3d_report_in *, FILE *) = NULL;
    if (!strcmp(fmt, "text"))
        fn = p3d_report_text_to;
    else if (!strcmp(fmt, "json"))
        fn = p3d_report_json_to;
    else if (!strcmp(fmt, "svg"))
        fn = p3d_report_svg_to;
    else if (!strcmp(fmt, "html"))
        fn = p3d_report_html_to;
    else {
        p3d_err(&err, "--format: expected text, json, svg or html, got '%s'", fmt);
        return p3d_fail_input(err);
    }
    if (p3d_place(o, &r, &err) < 0)
        return p3d_fail_input(err);
    /* --preflight: the table for people, the figures in the JSON report
     * (stdout stays the report's alone unless it is text on stdout) */
    if (o->preflight &&
        (rc = p3d_preflight_apply(o, &r, -1, 0, !strcmp(fmt, "text") && !o->output ? stdout : stderr, &pf_json)))
        goto out;
    rc = P3D_EXIT_BADINPUT;
    if (o->verbose && r.base_err)
        fprintf(stderr, "par3drun: no naive baseline: %s\n", p3d_tesc(r.base_err));
    /* up front: another policy's estimate beats this one (or what auto chose) */
    char note[512];
    p3d_place_policy_note(&r, note, sizeof note);
    if (note[0])
        p3d_note("note: %s", p3d_tesc(note));
    p3d_report_in in = p3d_plan_report_in(&r);
    in.preflight_json = pf_json;
    /* --min-dp: the widths it could shrink to, in the report */
    if (r.job.min_dp > 0 && p3d_widths_report(in.cluster, &r.job, r.pl, &w_text, &w_json, &err) < 0) {
        rc = p3d_fail_input(err);
        goto out;
    }
    in.widths_json = w_json;
    /* colour only for people: text, on a terminal, and never with NO_COLOR */
    const char *nc = getenv("NO_COLOR");
    in.color = !strcmp(fmt, "text") && !o->output && isatty(STDOUT_FILENO) && !(nc && *nc);
    double t0 = now();
    FILE *f = o->output ? fopen(o->output, "w") : stdout;
    if (!f) {
        char *m = NULL;
        p3d_err(&m, "--output %s: cannot create: %s", o->output, strerror(errno));
        rc = p3d_fail_input(m);
        goto out;
    }
    int bad = !o->output && note[0] && !strcmp(fmt, "text") && printf("note: %s\n\n", note) < 0;
    bad |= fn(&in, f) < 0;
    if (w_text && !strcmp(fmt, "text"))
        bad |= fprintf(f, "\n%s", w_text) < 0;
    bad |= o->output ? fclose(f) != 0 : fflush(stdout) != 0;
    double t_report = now() - t0;
    if (bad) {
        fprintf(stderr, "par3drun: %s%s: writing the %s report failed: %s\n", o->output ? "--output " : "",
                o->output ? p3d_tesc(o->output) : "stdout", fmt, strerror(errno));
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
    free(pf_json);
    free(w_text);
    free(w_json);
    p3d_plan_result_free(&r);
    return rc;
}
