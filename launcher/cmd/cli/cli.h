/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli.h — par3drun's command line, the public header of launcher/cmd/cli/,
 * below the commands: one table (cli_table.c) lists every option, its
 * help, its type and its bounds; parsing (cli.c) fills a p3d_opts, and
 * torchrun's command line (cli_torchrun.c) is read into the same.
 */
#ifndef P3D_CLI_H
#define P3D_CLI_H

#include <stddef.h>

#include "opts.h"
#include "p3d/p3d.h"


/* Parses argv. Returns 0, or -1 with a message in *err (usage error, exit 2). */
int p3d_cli_parse(int argc, char **argv, p3d_opts *o, char **err);
void p3d_cli_free(p3d_opts *o);
/* The --help text for a command (caller frees). */
char *p3d_cli_help(p3d_cmd cmd);

#endif
