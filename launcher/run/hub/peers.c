/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * peers.c — which nodes do the same work: the peer groups the slow-node
 * detection compares within (controller_slow.c).
 *
 * Two nodes are peers when their ranks hold the same set of (pp, tp, cp,
 * ep) coordinates: the same work, for other DP replicas. A node's set is
 * sorted once, the nodes are sorted by their sets, and equal neighbours
 * share a group: O(world log world) for the whole job.
 */

#include "hub_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct peer_sort {
    const uint64_t *key; /* every node's sorted tuples, one after another */
    const int *off;      /* node i's tuples: key[off[i]..off[i+1]) */
} peer_sort;

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static int cmp_nodes(const void *x, const void *y, void *ctx)
{
    const peer_sort *s = ctx;
    int a = *(const int *)x, b = *(const int *)y;
    int la = s->off[a + 1] - s->off[a], lb = s->off[b + 1] - s->off[b];
    if (la != lb)
        return la < lb ? -1 : 1;
    for (int k = 0; k < la; k++)
        if (s->key[s->off[a] + k] != s->key[s->off[b] + k])
            return s->key[s->off[a] + k] < s->key[s->off[b] + k] ? -1 : 1;
    return 0;
}

static uint64_t tuple(const p3d_rank *k)
{
    return (uint64_t)(k->coord[P3D_DIM_PP] & 0xffff) << 48 | (uint64_t)(k->coord[P3D_DIM_TP] & 0xffff) << 32 |
           (uint64_t)(k->coord[P3D_DIM_CP] & 0xffff) << 16 | (uint64_t)(k->coord[P3D_DIM_EP] & 0xffff);
}

int p3d_peer_groups(const p3d_placement *pl, const int *nodes, int n, size_t ncluster, int *group,
                    char (*what)[P3D_PEER_WHAT])
{
    int rc = -1, world = pl->world;
    int *agent_of = malloc((ncluster + 1) * sizeof *agent_of);
    int *off = calloc((size_t)n + 2, sizeof *off);
    int *fill = calloc((size_t)n + 1, sizeof *fill);
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    int *lo = calloc((size_t)n + 1, sizeof *lo), *hi = calloc((size_t)n + 1, sizeof *hi);
    uint64_t *key = calloc((size_t)world + 1, sizeof *key);
    if (!agent_of || !off || !fill || !idx || !lo || !hi || !key)
        goto out;
    for (size_t i = 0; i < ncluster; i++)
        agent_of[i] = -1;
    for (int i = 0; i < n; i++) {
        if (nodes[i] >= 0 && (size_t)nodes[i] < ncluster)
            agent_of[nodes[i]] = i;
        lo[i] = 1 << 30;
        hi[i] = -1;
    }
    for (int r = 0; r < world; r++) {
        int nd = pl->ranks[r].node;
        int a = nd >= 0 && (size_t)nd < ncluster ? agent_of[nd] : -1;
        if (a >= 0)
            off[a + 1]++;
    }
    for (int i = 0; i < n; i++)
        off[i + 1] += off[i];
    for (int r = 0; r < world; r++) {
        int nd = pl->ranks[r].node;
        int a = nd >= 0 && (size_t)nd < ncluster ? agent_of[nd] : -1;
        if (a < 0)
            continue;
        key[off[a] + fill[a]++] = tuple(&pl->ranks[r]);
        int pp = pl->ranks[r].coord[P3D_DIM_PP];
        if (pp < lo[a])
            lo[a] = pp;
        if (pp > hi[a])
            hi[a] = pp;
    }
    for (int i = 0; i < n; i++) {
        qsort(key + off[i], (size_t)(off[i + 1] - off[i]), sizeof *key, cmp_u64);
        idx[i] = i;
    }
    peer_sort s = {key, off};
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_nodes, &s);
    int g = -1;
    for (int k = 0; k < n; k++) {
        int a = idx[k];
        if (off[a + 1] == off[a]) {
            group[a] = -1; /* no ranks (a spare) */
            what[a][0] = 0;
            continue;
        }
        if (k == 0 || cmp_nodes(&idx[k - 1], &a, &s) != 0)
            g++;
        group[a] = g;
        if (lo[a] == hi[a])
            snprintf(what[a], P3D_PEER_WHAT, "pp stage %d", lo[a]);
        else
            snprintf(what[a], P3D_PEER_WHAT, "pp stages %d-%d", lo[a], hi[a]);
    }
    rc = 0;
out:
    free(agent_of);
    free(off);
    free(fill);
    free(idx);
    free(lo);
    free(hi);
    free(key);
    return rc;
}
