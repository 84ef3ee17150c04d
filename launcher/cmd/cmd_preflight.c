/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_preflight.c — `par3drun preflight`: place the job as a launch would,
 * benchmark every node it uses (spares too) with preflight.c, print one
 * row per node and exit: 0 every node passed, 1 one or more excluded,
 * 2 bad input (run/preflight.c, run/preflight_apply.c).
 */
#include "commands.h"
#include "plan.h"
#include "preflight.h"
#include "termsafe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int p3d_cmd_preflight(const p3d_opts *o)
{
    char *err = NULL;
    int rc = P3D_EXIT_BADINPUT, *nodes = NULL, n;
    const char **names = NULL;
    p3d_plan_result r;
    p3d_preflight pf = {0};
    memset(&r, 0, sizeof r);
    const char *fmt = o->format ? o->format : "text";
    if (strcmp(fmt, "text") && strcmp(fmt, "json")) {
        p3d_err(&err, "--format: preflight writes text or json, got '%s'", fmt);
        return p3d_fail_input(err);
    }
    if (o->emulate && !o->cluster) {
        p3d_err(&err, "--emulate runs the nodes of a cluster file on this host: give --cluster FILE");
        return p3d_fail_input(err);
    }
    if (p3d_place(o, &r, &err) < 0)
        return p3d_fail_input(err);
    if ((n = p3d_preflight_nodes(o, &r, &nodes, &names, &err)) < 0) {
        rc = p3d_fail_input(err);
        goto out;
    }
    if (p3d_preflight_run(o, names, n, &pf, &err) < 0) {
        fprintf(stderr, "par3drun: ");
        p3d_term_fputs(err ? err : "out of memory", stderr);
        fputc('\n', stderr);
        free(err);
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    FILE *f = o->output ? fopen(o->output, "w") : stdout;
    if (!f) {
        p3d_err(&err, "--output %s: cannot create it", o->output);
        rc = p3d_fail_input(err);
        goto out;
    }
    if (!strcmp(fmt, "json")) {
        char *j = p3d_preflight_json(&pf);
        fprintf(f, "%s\n", j ? j : "null");
        free(j);
    } else {
        p3d_preflight_table(&pf, f);
    }
    int bad = o->output ? fclose(f) != 0 : fflush(stdout) != 0;
    rc = bad ? P3D_EXIT_FAIL : pf.nexcluded ? P3D_EXIT_FAIL : P3D_EXIT_OK;
out:
    p3d_preflight_free(&pf);
    free(nodes);
    free(names);
    p3d_plan_result_free(&r);
    return rc;
}
