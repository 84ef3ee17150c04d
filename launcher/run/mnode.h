/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode.h — the multi-node flow's internal interface (mnode.c: the flow,
 * mnode_place.c: the placement on the gathered cluster).
 */
#ifndef P3D_MNODE_H
#define P3D_MNODE_H

#include "launch.h"
#include "rdzv.h"
#include "plan.h"

/* Runs this node's part of a multi-node job; returns its exit code. */
int p3d_mnode_launch(const p3d_opts *o, p3d_rdzv *r);

/* Leader: the cluster from every node's gathered record (g, topologies
 * taken), placed, checked and encoded as the CPLACE frame (rdzv.h). st
 * (may be NULL) gets the sizes and the placement time. A node whose record
 * says it failed its --health-check is excluded and uses up a spare. 0,
 * -1, or -2 when failed health checks leave the job short (or the
 * leader's own failed): nothing may start. */
int p3d_mnode_place(const p3d_opts *o, const p3d_rdzv *r, p3d_gather *g, int n, p3d_wbuf *frame, p3d_tree_stats *st,
                    char **err);

/* A gathered record's health_how that starts so: the node was excluded by
 * the leader's --preflight verdict (mnode_preflight.c), not by its own
 * --health-check. */
#define P3D_MNODE_PF_PREFIX "--preflight: "

/* Where node rank i's rank 0 would meet (MASTER_ADDR/PORT, NCCL port):
 * kept by the leader for a placement made again (a replaced node). */
typedef struct p3d_mpeer {
    char *addr;
    int master_port, nccl_port;
    int failover_port; /* 0: none (rdzv_failover.h) */
} p3d_mpeer;

/* p3d_mnode_place that also hands back the placement (*keep, for
 * p3d_place_replace; free with p3d_plan_result_free) and every node's
 * p3d_mpeer (*peers, n of them; free with p3d_mpeer_free). preflight:
 * the --preflight figures as the report's "preflight" object (NULL: none);
 * they travel in the placement's verbatim tail, so that placement.json
 * holds them on every node. */
int p3d_mnode_place_keep(const p3d_opts *o, const p3d_rdzv *r, p3d_gather *g, int n, p3d_wbuf *frame,
                         p3d_tree_stats *st, p3d_plan_result *keep, p3d_mpeer **peers, const char *preflight,
                         char **err);
void p3d_mpeer_free(p3d_mpeer *p, int n);

/* The CPLACE frame of placement res (JSON json) for job job_id: rank 0's
 * node (peers) gives MASTER_ADDR and the ports unless the options do. */
int p3d_mnode_encode(const p3d_opts *o, const char *job_id, const p3d_plan_result *res, const p3d_mpeer *peers,
                     const char *json, p3d_wbuf *frame, int *compact, char **err);

/* Every node: the agent's cluster: every node's name, and only this
 * node's topology t (taken) — the only one an agent reads. Checks that the
 * leader placed on this node's topology hash. 0 or -1. */
int p3d_mnode_local_cluster(const p3d_opts *o, p3d_node *t, const p3d_place_msg *pm, int me, p3d_cluster **out,
                            char **err);

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

#endif
