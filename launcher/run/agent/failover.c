/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * failover.c — the successor list (failover.h). Bounded by construction:
 * whatever the job's size, at most P3D_FAILOVER_CANDIDATES candidates
 * travel and are tried, and picking them stops as soon as that many are
 * found (O(candidates + lost nodes before them), not O(nodes)).
 */
#include "agent.h"

#include <stdio.h>
#include <string.h>

int p3d_failover_candidates(int nnodes, int leader, const unsigned char *lost, int *out, int max)
{
    int k = 0;
    if (max > P3D_FAILOVER_CANDIDATES)
        max = P3D_FAILOVER_CANDIDATES;
    for (int i = 0; i < nnodes && k < max; i++)
        if (i != leader && !(lost && lost[i]))
            out[k++] = i;
    return k;
}

int p3d_failover_list(int nnodes, int leader, const unsigned char *lost, const char *const *addr, const int *port,
                      int gen, p3d_successors *out)
{
    memset(out, 0, sizeof *out);
    out->gen = gen;
    for (int i = 0; i < nnodes && out->n < P3D_FAILOVER_CANDIDATES; i++) {
        if (i == leader || (lost && lost[i]) || port[i] < 1 || port[i] > 65535 || !addr[i] || !addr[i][0])
            continue;
        if (strlen(addr[i]) > P3D_FAILOVER_ADDR_MAX)
            return -1;
        p3d_successor *c = &out->c[out->n++];
        c->node_rank = i;
        c->port = port[i];
        snprintf(c->addr, sizeof c->addr, "%s", addr[i]);
    }
    return 0;
}

int p3d_failover_next(const p3d_successors *s, const unsigned char *tried)
{
    for (int i = 0; i < s->n && i < P3D_FAILOVER_CANDIDATES; i++)
        if (!(tried && tried[i]))
            return i;
    return -1;
}
