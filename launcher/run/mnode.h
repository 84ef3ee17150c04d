/*
 * mnode.h — the multi-node flow's internal interface (mnode.c: the flow,
 * mnode_place.c: the placement on the gathered cluster).
 */
#ifndef P3D_MNODE_H
#define P3D_MNODE_H

#include "launch.h"
#include "rdzv.h"

/* Leader: the cluster from every node's gathered record (g, topologies
 * taken), placed, checked and encoded as the CPLACE frame (rdzv.h). st
 * (may be NULL) gets the sizes and the placement time. 0 or -1. */
int p3d_mnode_place(const p3d_opts *o, const p3d_rdzv *r, p3d_gather *g, int n, p3d_wbuf *frame,
                    p3d_tree_stats *st, char **err);

/* Every node: the agent's cluster: every node's name, and only this
 * node's topology t (taken) — the only one an agent reads. Checks that the
 * leader placed on this node's topology hash. 0 or -1. */
int p3d_mnode_local_cluster(const p3d_opts *o, p3d_node *t, const p3d_place_msg *pm, int me, p3d_cluster **out,
                            char **err);

#endif
