/* SPDX-License-Identifier: BSD-3-Clause */
/* groups.c - the worker forms its TP/PP/DP groups itself and checks them
 * against what the launcher promised.
 *
 * It does not assume a rank order: every rank publishes its (tp, pp, dp)
 * coordinates (allgather over the world), the mesh is checked to be a
 * bijection, and each group is a split whose colour is the coordinates of
 * the OTHER dimensions and whose key is the coordinate of its own.  The
 * members of my group, in key order, must equal P3D_<DIM>_GROUP.  The
 * expert grid's EP, ETP and EDP groups are split the same way over
 * (etp, ep, edp, pp) and checked against P3D_EP/ETP/EDP_GROUP. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_list(FILE *f, const int *v, int n)
{
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? "," : "", v[i]);
}

int p3dw_group_compare(int rank, const char *dim, const int *mine, int nmine, const int *env, int nenv)
{
    int same = nmine == nenv;
    for (int i = 0; same && i < nmine; i++)
        same = mine[i] == env[i];
    if (same)
        return 0;
    char up[8];
    snprintf(up, sizeof up, "%s", dim);
    for (char *p = up; *p; p++)
        *p = (char)(*p - 'a' + 'A');
    fprintf(stderr, "p3d-worker: rank %d: %s group mismatch: P3D_%s_GROUP=", rank, dim, up);
    print_list(stderr, env, nenv);
    fprintf(stderr, " but the split of the mesh coordinates gives ");
    print_list(stderr, mine, nmine);
    fprintf(stderr, " (launcher and worker disagree on the rank order)\n");
    return -1;
}

/* The expert grid's splits: EP, ETP and EDP groups vary their own
 * coordinate with the other two and pp fixed. */
static int expert_colour(const p3dw_env *e, int d)
{
    static const int dims[3] = {P3DW_ETP, P3DW_EP, P3DW_EDP};
    int colour = e->coord[P3DW_PP];
    for (int i = 2; i >= 0; i--)
        if (dims[i] != d)
            colour = colour * e->size[dims[i]] + e->coord[dims[i]];
    return colour;
}

int p3dw_groups_make(tcp_world *w, const p3dw_env *e, tcp_comm comm[P3DW_NALL], int moe)
{
    int rc = -1, n = e->world;
    int *all = malloc(sizeof(int) * P3DW_NDIM * (size_t)n);
    char *seen = calloc((size_t)n, 1);
    memset(comm, 0, sizeof(tcp_comm) * P3DW_NALL);
    if (!all || !seen)
        goto out;
    int mine[P3DW_NDIM];
    memcpy(mine, e->coord, sizeof mine);
    if (tcp_world_allgather(w, mine, all, sizeof mine))
        goto out;
    /* The coordinates must cover the mesh exactly once. */
    for (int r = 0; r < n; r++) {
        const int *c = all + P3DW_NDIM * r;
        int idx = c[0] + e->size[0] * (c[1] + e->size[1] * c[2]);
        if (c[0] >= e->size[0] || c[1] >= e->size[1] || c[2] >= e->size[2] || seen[idx]) {
            if (e->rank == 0)
                fprintf(stderr,
                        "p3d-worker: rank %d has coordinates tp=%d pp=%d dp=%d: %s "
                        "(mesh tp=%d pp=%d dp=%d)\n",
                        r, c[0], c[1], c[2], seen[idx] ? "used by another rank too" : "outside the mesh", e->size[0],
                        e->size[1], e->size[2]);
            goto out;
        }
        seen[idx] = 1;
    }
    for (int d = 0; d < P3DW_NDIM; d++) {
        int colour = 0;
        for (int o = P3DW_NDIM - 1; o >= 0; o--)
            if (o != d)
                colour = colour * e->size[o] + e->coord[o];
        if (tcp_comm_split(w, colour, e->coord[d], &comm[d]))
            goto out;
    }
    for (int d = P3DW_NDIM; d < P3DW_NALL; d++)
        if (tcp_comm_split(w, expert_colour(e, d), e->coord[d], &comm[d]))
            goto out;
    if (moe)
        tcp_comm_connect_all(&comm[P3DW_EP]);
    int bad = 0;
    static const char *const up[P3DW_NALL] = {"TP", "PP", "DP", "EP", "ETP", "EDP"};
    for (int d = 0; d < P3DW_NALL; d++) {
        if (comm[d].size != e->size[d] || comm[d].rank != e->coord[d]) {
            fprintf(stderr,
                    "p3d-worker: rank %d: %s group has %d members and I am #%d, but "
                    "P3D_%s_SIZE/RANK say %d and %d\n",
                    e->rank, p3dw_dim_name[d], comm[d].size, comm[d].rank, up[d], e->size[d], e->coord[d]);
            bad = 1;
        }
        if (e->group[d] &&
            p3dw_group_compare(e->rank, p3dw_dim_name[d], comm[d].members, comm[d].size, e->group[d], e->ngroup[d]))
            bad = 1;
    }
    /* Agree on the verdict so that every rank stops, not only the ones
     * that saw a difference (the others would wait for them forever). */
    int *verdicts = malloc(sizeof(int) * (size_t)n);
    if (!verdicts || tcp_world_allgather(w, &bad, verdicts, sizeof bad)) {
        free(verdicts);
        goto out;
    }
    for (int r = 0; r < n; r++)
        if (verdicts[r]) {
            if (!bad && e->rank == 0)
                fprintf(stderr, "p3d-worker: rank %d found a group mismatch; stopping\n", r);
            free(verdicts);
            goto out;
        }
    free(verdicts);
    if (tcp_world_connect(w))
        goto out;
    rc = 0;
out:
    if (rc)
        for (int d = 0; d < P3DW_NALL; d++)
            tcp_comm_free(&comm[d]);
    free(all);
    free(seen);
    return rc;
}
