/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/policy.h — place: running a Lua policy (placement/policy/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_POLICY_H
#define P3D_POLICY_H

#include "p3d/cluster.h"
#include "p3d/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Placement and policies (placement/policy/)                                */
/* ------------------------------------------------------------------------ */

typedef struct p3d_rank {
    int node;       /* index into cluster->nodes */
    int gpu;        /* GPU index on that node (PCI order) */
    int local_rank; /* position among the node's ranks, by rank */
    int coord[P3D_NDIMS];
} p3d_rank;

typedef struct p3d_placement {
    int world;
    p3d_rank *ranks; /* indexed by global rank */
    p3d_mesh mesh;
    char *policy;        /* policy name as reported ("megatron") */
    char *policy_source; /* path or URL it was read from */
    char **notes;        /* policy's explanations (rule degraded, ...) */
    size_t nnotes;
} p3d_placement;

/* Runs a Lua policy (bundled name, path or http(s) URL) on the cluster and
 * job, validates the result (bijection, coordinates vs order). Caller frees
 * with p3d_placement_free(). */
int p3d_policy_run(const char *policy, const char *sha256_pin, const p3d_cluster *c, const p3d_job *job,
                   p3d_placement **out, char **err);
void p3d_placement_free(p3d_placement *p);

/* Chooses job->spares hot spares among c's P3D_NODE_USE nodes and marks
 * them P3D_NODE_SPARE: the policy's spares(cluster, job) when it defines
 * one, else par3d.default_spares (policy NULL: always the default). The
 * hook sees only the usable nodes; its result must name exactly K distinct
 * ones and leave at least one (docs/policies.md "Choosing the spares"). */
int p3d_policy_pick_spares(const char *policy, const char *sha256_pin, p3d_cluster *c, const p3d_job *job, char **err);

/* Members of the group of dimension dim that contains rank r, ascending. */
int p3d_group_members(const p3d_mesh *m, int dim, int r, int *out, int cap);

#ifdef __cplusplus
}
#endif
#endif
