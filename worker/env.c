/* SPDX-License-Identifier: BSD-3-Clause */
/* env.c - the rank environment the launcher hands every worker.
 * Names are torchrun's plus par3drun's own (see docs/worker.md). */
#include "worker.h"
#include "../placement/util/decimal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const p3dw_dim_name[P3DW_NALL] = {"tp", "pp", "dp", "ep", "etp", "edp"};

static int get_int(const char *name, int *out, int dflt, int required)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        if (required) {
            fprintf(stderr,
                    "p3d-worker: environment variable %s is not set "
                    "(start the worker under par3drun, or set it)\n",
                    name);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    unsigned long long v;
    if (p3d_decimal(s, INT_MAX, &v) < 0) { /* " 1", "+1" are not ranks */
        fprintf(stderr, "p3d-worker: %s: expected a non-negative integer in plain decimal digits\n", name);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int p3dw_env_batch(p3dw_opts *o)
{
    int B = o->global_batch, m = o->micro_batches;
    if (get_int("P3D_GLOBAL_BATCH", &B, B, 0) || get_int("P3D_MICRO_BATCHES", &m, m, 0))
        return -1;
    if (B < 1 || B > (1 << 24) || m < 1 || m > (1 << 20)) {
        fprintf(stderr, "p3d-worker: P3D_GLOBAL_BATCH=%d / P3D_MICRO_BATCHES=%d: expected 1..%d and 1..%d\n", B, m,
                1 << 24, 1 << 20);
        return -1;
    }
    o->global_batch = B;
    o->micro_batches = m;
    return 0;
}

int p3dw_parse_list(const char *s, int **out)
{
    int n = 0, cap = 8, rc = -1;
    int *v = malloc(cap * sizeof *v);
    const char *p = s;
    if (!v)
        goto out;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT_MAX || (*end && *end != ','))
            goto out;
        if (n == cap) {
            int *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv)
                goto out;
            v = nv;
            cap *= 2;
        }
        v[n++] = (int)x;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            goto out; /* trailing comma */
    }
    if (n == 0)
        goto out;
    *out = v;
    v = NULL;
    rc = n;
out:
    free(v);
    return rc;
}

int p3dw_env_read(p3dw_env *e, int need_mesh)
{
    static const char *const rank_var[P3DW_NALL] = {"P3D_TP_RANK", "P3D_PP_RANK",  "P3D_DP_RANK",
                                                    "P3D_EP_RANK", "P3D_ETP_RANK", "P3D_EDP_RANK"};
    static const char *const size_var[P3DW_NALL] = {"P3D_TP_SIZE", "P3D_PP_SIZE",  "P3D_DP_SIZE",
                                                    "P3D_EP_SIZE", "P3D_ETP_SIZE", "P3D_EDP_SIZE"};
    static const char *const group_var[P3DW_NALL] = {"P3D_TP_GROUP", "P3D_PP_GROUP",  "P3D_DP_GROUP",
                                                     "P3D_EP_GROUP", "P3D_ETP_GROUP", "P3D_EDP_GROUP"};
    memset(e, 0, sizeof *e);
    if (get_int("RANK", &e->rank, 0, 1) || get_int("WORLD_SIZE", &e->world, 0, 1) ||
        get_int("LOCAL_RANK", &e->local_rank, 0, 0) || get_int("LOCAL_WORLD_SIZE", &e->local_world, 1, 0) ||
        get_int("NODE_RANK", &e->node_rank, 0, 0) || get_int("MASTER_PORT", &e->master_port, 0, 1))
        return -1;
    if (e->world < 1 || e->rank >= e->world) {
        fprintf(stderr, "p3d-worker: RANK=%d WORLD_SIZE=%d: expected 0 <= RANK < WORLD_SIZE\n", e->rank, e->world);
        return -1;
    }
    if (e->master_port < 1 || e->master_port > 65535) {
        fprintf(stderr, "p3d-worker: MASTER_PORT=%d: expected 1-65535\n", e->master_port);
        return -1;
    }
    /* The fencing token (docs/launch.md "Fencing"): absent means a first
     * start; anything but digits would make generations incomparable. */
    const char *gen = getenv("P3D_GENERATION");
    unsigned long long g = 0;
    if (gen && p3d_decimal(gen, 999999999, &g) < 0) {
        fprintf(stderr, "p3d-worker: P3D_GENERATION: expected the job's generation, plain "
                        "decimal digits (0-999999999)\n");
        return -1;
    }
    e->generation = (long)g;
    const char *ma = getenv("MASTER_ADDR");
    snprintf(e->master_addr, sizeof e->master_addr, "%s", ma && *ma ? ma : "127.0.0.1");
    const char *job = getenv("P3D_JOB_ID");
    snprintf(e->job_id, sizeof e->job_id, "%s", job ? job : "");
    /* the node's name as par3drun's cluster knows it (an emulated node
     * shares this host's name), else this host's */
    const char *node = getenv("P3D_NODE");
    if (node && *node)
        snprintf(e->node, sizeof e->node, "%s", node);
    else if (gethostname(e->node, sizeof e->node) < 0 || !e->node[0])
        snprintf(e->node, sizeof e->node, "node%d", e->node_rank);
    e->node[sizeof e->node - 1] = 0;
    for (char *p = e->node; *p; p++) /* printed in the table and the JSON as is */
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e || *p == '"' || *p == '\\')
            *p = '?';

    const char *cp = getenv("P3D_CP_SIZE");
    if (cp && strcmp(cp, "1") != 0 && *cp) {
        fprintf(stderr,
                "p3d-worker: P3D_CP_SIZE=%s: the bundled worker has no context "
                "parallelism; run it with --cp 1\n",
                cp);
        return -1;
    }
    for (int d = 0; d < P3DW_NALL; d++) {
        /* Without the launcher's mesh variables (a plain torchrun-style
         * environment) the world is one data-parallel group; without the
         * expert grid's, ep is 1, etp is tp and edp is dp (Megatron's
         * defaults). */
        int dflt_size = d == P3DW_DP ? e->world : 1;
        int dflt_rank = d == P3DW_DP ? e->rank : 0;
        if (d == P3DW_ETP || d == P3DW_EDP) {
            dflt_size = e->size[d == P3DW_ETP ? P3DW_TP : P3DW_DP];
            dflt_rank = e->coord[d == P3DW_ETP ? P3DW_TP : P3DW_DP];
        }
        if (get_int(rank_var[d], &e->coord[d], dflt_rank, need_mesh && d < P3DW_NDIM) ||
            get_int(size_var[d], &e->size[d], dflt_size, need_mesh && d < P3DW_NDIM))
            return -1;
        if (e->size[d] < 1 || e->coord[d] >= e->size[d]) {
            fprintf(stderr, "p3d-worker: %s=%d %s=%d: expected 0 <= rank < size\n", rank_var[d], e->coord[d],
                    size_var[d], e->size[d]);
            return -1;
        }
        const char *g = getenv(group_var[d]);
        if (g && *g) {
            e->ngroup[d] = p3dw_parse_list(g, &e->group[d]);
            if (e->ngroup[d] < 0) {
                fprintf(stderr, "p3d-worker: %s='%s': expected comma-separated ranks\n", group_var[d], g);
                e->ngroup[d] = 0;
                return -1;
            }
        }
    }
    if ((long)e->size[0] * e->size[1] * e->size[2] != e->world) {
        fprintf(stderr, "p3d-worker: P3D_TP_SIZE*P3D_PP_SIZE*P3D_DP_SIZE = %d*%d*%d != WORLD_SIZE=%d\n", e->size[0],
                e->size[1], e->size[2], e->world);
        return -1;
    }
    if ((long)e->size[P3DW_ETP] * e->size[P3DW_EP] * e->size[P3DW_EDP] * e->size[P3DW_PP] != e->world) {
        fprintf(stderr,
                "p3d-worker: P3D_ETP_SIZE*P3D_EP_SIZE*P3D_EDP_SIZE*P3D_PP_SIZE = "
                "%d*%d*%d*%d != WORLD_SIZE=%d (the expert grid must cover the world)\n",
                e->size[P3DW_ETP], e->size[P3DW_EP], e->size[P3DW_EDP], e->size[P3DW_PP], e->world);
        return -1;
    }
    return 0;
}

void p3dw_env_free(p3dw_env *e)
{
    for (int d = 0; d < P3DW_NALL; d++) {
        free(e->group[d]);
        e->group[d] = NULL;
    }
}
