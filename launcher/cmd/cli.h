/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli.h — par3drun's command line: one table (cli.c) lists every option, its
 * help, its type and its bounds; parsing fills a p3d_opts.
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
