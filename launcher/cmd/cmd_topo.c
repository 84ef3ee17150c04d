/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_topo.c — `par3drun topo [--topology SRC] [--format text|json]
 * [--output FILE]`: load one node's topology and print it.
 * Bad input (unreadable or malformed topology, unknown format, unwritable
 * output) is one line on stderr and exit 2.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

/* Colour only on a terminal, never with NO_COLOR, never into a file. */
static int want_color(const p3d_opts *o)
{
    const char *nc = getenv("NO_COLOR");
    return !o->output && !(nc && *nc) && isatty(STDOUT_FILENO);
}

int p3d_cmd_topo(const p3d_opts *o)
{
    int rc = P3D_EXIT_BADINPUT;
    char *err = NULL, *text = NULL;
    p3d_node *n = NULL;
    const char *fmt = o->format ? o->format : "text";
    int json = !strcmp(fmt, "json");
    if (!json && strcmp(fmt, "text")) {
        if (asprintf(&err, "--format %s: topo writes text or json", fmt) < 0)
            err = NULL;
        rc = p3d_fail_input(err);
        err = NULL;
        goto out;
    }
    if (p3d_topo_load(o->topology ? o->topology : "local", &n, &err) < 0 ||
        p3d_node_apply_allocation(&n, 0, &err) < 0) { /* notes say what the allocation excludes */
        rc = p3d_fail_input(err);
        err = NULL;
        goto out;
    }
    text = json ? p3d_topo_json(n) : p3d_topo_text(n, want_color(o));
    if (!text) {
        fprintf(stderr, "par3drun: out of memory\n");
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if (o->output) {
        FILE *f = fopen(o->output, "w");
        int bad = !f, e = errno;
        if (f) {
            bad = fputs(text, f) < 0;
            e = errno;
            bad |= fclose(f) != 0;
            if (bad && !e)
                e = errno;
        }
        if (bad) {
            if (asprintf(&err, "--output %s: cannot write: %s", o->output, strerror(e)) < 0)
                err = NULL;
            rc = p3d_fail_input(err);
            err = NULL;
            goto out;
        }
    } else if (fputs(text, stdout) < 0 || fflush(stdout) != 0) {
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    rc = P3D_EXIT_OK;
out:
    free(err);
    free(text);
    p3d_node_free(n);
    return rc;
}
