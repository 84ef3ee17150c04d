/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reshape_internal.h — what the shrink, the grow and their check share
 * (reshape.c, reshape_grow.c, reshape_check.c; p3d/elastic.h is the API).
 */
#ifndef P3D_RESHAPE_INTERNAL_H
#define P3D_RESHAPE_INTERNAL_H

#include "p3d/elastic.h"

/* A tensor-parallel group's place in a replica: its (cp, pp) as one index,
 * cp fastest. A replica is made of ncp*npp such units. */
static inline int rs_unit(const p3d_mesh *m, const int coord[P3D_NDIMS])
{
    return coord[P3D_DIM_PP] * p3d_mesh_size(m, P3D_DIM_CP) + coord[P3D_DIM_CP];
}

/* The old mesh with dp set to ndp, resolved (edp derived again). */
int rs_mesh(const p3d_mesh *old, int ndp, p3d_mesh *out, char **err);

/* A new placement of mesh nm whose rank r runs on (node[r], gpu[r]):
 * coordinates from the mesh, local ranks by rank on each node; policy and
 * source copied from old. NULL when out of memory. Caller frees with
 * p3d_placement_free(). */
p3d_placement *rs_build(const p3d_placement *old, const p3d_mesh *nm, const int *node, const int *gpu);

/* The new rank of the GPU at coord (tp, cp, pp of coord) in replica dp. */
int rs_rank(const p3d_mesh *nm, const int coord[P3D_NDIMS], int dp);

/* The lost GPUs as one bit per GPU of the cluster (a shrink may lose
 * thousands: a list searched per rank would be quadratic). */
typedef struct rs_lostmap {
    size_t *base; /* [nnodes + 1]: node i's first bit */
    unsigned char *bit;
} rs_lostmap;

/* 0, or -1 when out of memory. Free with rs_lostmap_free. */
int rs_lostmap_make(const p3d_cluster *c, const p3d_gpuref *lost, size_t n, rs_lostmap *m);
int rs_lostmap_has(const rs_lostmap *m, int node, int gpu);
void rs_lostmap_free(rs_lostmap *m);

/* The reshape that keeps the old replicas keep[0..n) (old dp indices, in
 * their new dp order) and drops the rest: out->pl, from, dropped filled,
 * out->width left as the caller set it. 0, or -1 when out of memory. */
int rs_keep(const p3d_placement *pl, const int *keep, int n, p3d_reshape *out);

#endif
