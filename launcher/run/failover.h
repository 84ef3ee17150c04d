/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * failover.h — who succeeds a lost leader (docs/multinode.md, "When the
 * leader dies"): the bounded successor list the leader sends, and the
 * choice a node makes from it. Pure: no socket, no clock; the controller
 * (controller.h, TAKEOVER) decides the job's fate, this only says whom to
 * reach.
 */
#ifndef P3D_FAILOVER_H
#define P3D_FAILOVER_H

#include "place.h"
#include "wire.h"

/* The first max (at most P3D_FAILOVER_CANDIDATES) node ranks that may
 * succeed: ascending, the leader and the lost nodes (lost[i] != 0; NULL:
 * none) left out, spares included. Writes them to out; returns how many. */
int p3d_failover_candidates(int nnodes, int leader, const unsigned char *lost, int *out, int max);

/* The successor list for generation gen: the candidates above with the
 * address and failover port every node told the leader (addr[i], port[i]
 * by node rank; a node without a port, 0, is no candidate: it cannot be
 * reached). 0, or -1 when an address is over P3D_FAILOVER_ADDR_MAX. */
int p3d_failover_list(int nnodes, int leader, const unsigned char *lost, const char *const *addr, const int *port,
                      int gen, p3d_successors *out);

/* The candidate a node that lost the leader tries now: the first of s not
 * marked unreachable (tried[i] != 0 for s->c[i]; NULL: none tried). Its
 * index, or -1 when every candidate was tried (the node stops, exit 1). */
int p3d_failover_next(const p3d_successors *s, const unsigned char *tried);

/* The successor's plan (takeover.c): the plan result the old leader kept,
 * rebuilt from the compact placement every node holds (cplace, len: its
 * CPLACE body) and the options (the same on every node): the cluster with
 * every node's topology and role, the current placement, its checks.
 * *pm gets the decoded message (its pl moved into out). 0, or -1 with
 * *err (a placement sent as JSON carries no topologies: no takeover). Free
 * with p3d_plan_result_free and p3d_place_msg_free. */
/* The "preflight" object of the placement JSON a successor holds (the
 * leader's verdict on the nodes before the start), as compact JSON for the
 * placements it writes from now on; NULL when there is none (no
 * --preflight) or out of memory. Free with free(). */
char *p3d_takeover_preflight(const char *json, size_t len);
int p3d_takeover_plan(const p3d_opts *o, const unsigned char *cplace, size_t len, p3d_plan_result *out,
                      p3d_place_msg *pm, char **err);

/* More than half of members: what a successor needs before it acts (the
 * majority rule; the controller's TAKEOVER counts the same way). */
static inline int p3d_failover_majority(int rejoined, int members)
{
    return members > 0 && 2 * (long)rejoined > (long)members;
}

#endif
