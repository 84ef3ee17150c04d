/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/check.h — check: validating and scoring a placement (placement/check/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_CHECK_H
#define P3D_CHECK_H

#include "p3d/policy.h"
#include "p3d/cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Checks and reports (placement/check/, placement/report/)                      */
/* ------------------------------------------------------------------------ */

typedef enum { P3D_SEV_INFO = 0, P3D_SEV_WARNING, P3D_SEV_ERROR } p3d_severity;

typedef struct p3d_check {
    p3d_severity severity;
    char code[48]; /* "TP_CROSSES_NODES", ... (docs/checks.md) */
    char *message; /* what happened, why it matters, what to do */
} p3d_check;

typedef struct p3d_dim_stats {
    int ngroups;
    int worst;                          /* p3d_link: worst class any group crosses */
    int groups_by_link[P3D_LINK_COUNT]; /* groups whose worst link is that class */
    int hops_by_link[P3D_LINK_COUNT];   /* hops of that class over all groups: pp the
                                          consecutive-stage hops, a collective its
                                          ring's (check_links.c); what the cost counts */
    int nvlink_ring_groups;             /* of groups_by_link[NV]: groups on one node that
                                          span NVLink cliques but close an NVLink
                                          ring (DGX-1 hybrid cube-mesh) */
} p3d_dim_stats;

typedef struct p3d_analysis {
    p3d_check *checks;
    size_t nchecks;
    int nerrors, nwarnings;
    p3d_dim_stats dim[P3D_NDIMS];
    int has_cost;
    p3d_cost cost;
    int has_infer; /* job->inference: the serving estimate of the layout */
    p3d_infer_cost infer;
} p3d_analysis;

/* Checks a placement against the cluster and the job and scores it. Caller
 * frees with p3d_analysis_free(). */
int p3d_analyze(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis **out, char **err);
void p3d_analysis_free(p3d_analysis *a);

/* Coordinate a placement leaves to the validator (partial mode). */
#define P3D_COORD_UNSET (-1)

/* The one validator of a placement (placement/check/check.c): world and
 * mesh as asked, every rank on an existing GPU, no GPU twice, every
 * coordinate what the order string gives (p3d_mesh_coord). With partial,
 * coordinates P3D_COORD_UNSET are accepted. Messages start with who. */
int p3d_placement_validate(const p3d_cluster *c, const p3d_mesh *mesh, const p3d_placement *pl, const char *who,
                           int partial, char **err);

#ifdef __cplusplus
}
#endif
#endif
