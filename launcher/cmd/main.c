/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c — par3drun's entry: parse the command line, run one command. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "launch.h"
#include "ranks.h"
#include "say.h"
#include "termsafe.h"
#include "commands.h"

int main(int argc, char **argv)
{
    p3d_opts o;
    char *err = NULL;
    int rc;
    /* nothing this program says on stderr reaches the terminal raw */
    p3d_term_guard(&stderr);
    /* the options point into a copy: the original is a forked agent's title */
    argv = p3d_proctitle_init(argc, argv);
    if (p3d_cli_parse(argc, argv, &o, &err) < 0) {
        rc = p3d_fail_input(err);
        goto out;
    }
    if (o.help) {
        char *h = p3d_cli_help(o.cmd);
        fputs(h ? h : "", stdout);
        free(h);
        rc = P3D_EXIT_OK;
        goto out;
    }
    if (o.version) {
        printf("par3drun %s\n", P3D_VERSION);
        rc = P3D_EXIT_OK;
        goto out;
    }
    p3d_say_set_quiet(o.quiet);
    p3d_topo_cache_configure(!o.no_topo_cache, o.verbose);
    switch (o.cmd) {
    case P3D_CMD_TOPO: rc = p3d_cmd_topo(&o); break;
    case P3D_CMD_DRYRUN: rc = p3d_cmd_dryrun(&o); break;
    case P3D_CMD_PLAN: rc = p3d_cmd_plan(&o); break;
    case P3D_CMD_CLUSTER: rc = p3d_cmd_cluster(&o); break;
    case P3D_CMD_AGENT: rc = p3d_cmd_agent(&o); break;
    case P3D_CMD_STATUS: rc = p3d_cmd_status(&o); break;
    case P3D_CMD_PREFLIGHT: rc = p3d_cmd_preflight(&o); break;
    case P3D_CMD_RUNS: rc = p3d_cmd_runs(&o); break;
    default: rc = p3d_cmd_launch(&o); break;
    }
out:
    p3d_cli_free(&o);
    p3d_proctitle_done();
    return rc;
}
