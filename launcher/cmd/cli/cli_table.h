/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli_table.h — cmd/ internal: the one table of par3drun's options
 * (cli_table.c) that cli.c parses with and prints --help from.
 */
#ifndef P3D_CLI_TABLE_H
#define P3D_CLI_TABLE_H

#include "opts.h"

#include <stddef.h>

typedef enum { T_FLAG, T_INT, T_DOUBLE, T_STR, T_STRV, T_NOFLAG } opt_type;

/* Which commands accept an option (bit mask of 1 << p3d_cmd). */
#define C_LAUNCH (1u << P3D_CMD_LAUNCH)
#define C_DRY (1u << P3D_CMD_DRYRUN)
#define C_TOPO (1u << P3D_CMD_TOPO)
#define C_PLAN (1u << P3D_CMD_PLAN)
#define C_PF (1u << P3D_CMD_PREFLIGHT)
#define C_PLACE (C_LAUNCH | C_DRY | C_PF)
#define C_CLUSTER (1u << P3D_CMD_CLUSTER)
#define C_STATUS (1u << P3D_CMD_STATUS)
#define C_RUNS (1u << P3D_CMD_RUNS)
#define C_ALL (C_LAUNCH | C_DRY | C_TOPO | C_PLAN | C_CLUSTER | C_PF)

typedef struct opt_row {
    const char *name; /* without the leading "--" */
    opt_type type;
    size_t off;       /* offset in p3d_opts */
    size_t count_off; /* T_STRV: offset of the size_t count */
    double min, max;  /* bounds for numbers */
    unsigned cmds;
    const char *metavar;
    const char *help;
} opt_row;

#define OFF(f) offsetof(p3d_opts, f)
#define NOB 0, 0

/* --help's groups: a group begins at the row named first. */
typedef struct cli_group {
    const char *first;
    const char *title;
} cli_group;

#define P3D_CLI_MAX_ROWS 512
extern const opt_row p3d_cli_rows[];
extern const size_t p3d_cli_nrows;
extern const cli_group p3d_cli_groups[];
extern const size_t p3d_cli_ngroups;

#endif
