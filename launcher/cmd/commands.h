/* SPDX-License-Identifier: BSD-3-Clause */
/* commands.h — one entry point per par3drun command; each returns the
 * process exit code (P3D_EXIT_*, or a launched job's code). */
#ifndef P3D_COMMANDS_H
#define P3D_COMMANDS_H

#include "cli.h"
#include "say.h" /* p3d_fail_input: every bad-input exit */

#include <stdio.h>

int p3d_cmd_topo(const p3d_opts *o);      /* cmd_topo.c */
int p3d_cmd_dryrun(const p3d_opts *o);    /* cmd_dryrun.c */
int p3d_cmd_launch(const p3d_opts *o);    /* cmd_launch.c */
int p3d_cmd_agent(const p3d_opts *o);     /* cmd_launch.c: internal emulated agent */
int p3d_cmd_plan(const p3d_opts *o);      /* cmd_plan.c */
int p3d_cmd_cluster(const p3d_opts *o);   /* cmd_cluster.c */
int p3d_cmd_status(const p3d_opts *o);    /* cmd_status.c */
int p3d_cmd_preflight(const p3d_opts *o); /* cmd_preflight.c */
int p3d_cmd_runs(const p3d_opts *o);      /* cmd_runs.c */

#endif
