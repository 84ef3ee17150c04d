/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_internal.h — helpers shared by cluster_file.c and cluster_slurm.c
 * (private to placement/).
 */
#ifndef P3D_CLUSTER_INTERNAL_H
#define P3D_CLUSTER_INTERNAL_H

#include <stddef.h>

#include "p3d/p3d.h"
#include "read_file.h"

/* Biggest cluster file or topology.conf read, and most nodes in a cluster.
 * A 131,072-GPU cluster file is well under 1 MiB; the caps exist so a wrong
 * path (a disk image, /dev/zero) fails at once with a message. */
#define P3D_CLUSTER_MAX_FILE ((size_t)256 << 20)
#define P3D_CLUSTER_MAX_NODES ((size_t)1 << 20)

/* An empty cluster (no nodes, default link bandwidths). NULL when out of
 * memory. Caller frees with p3d_cluster_free(). */
p3d_cluster *p3d_cluster_new(void);

/* Appends name to *v (size *n, capacity *cap), taking ownership of name
 * (freed on failure). Returns the index, or -1 when out of memory. */
long p3d_strv_push(char ***v, size_t *n, size_t *cap, char *name);

/* Drops racks and NVLink domains no node uses and renumbers the rest in
 * order of first use by the node list (rack_dist follows). */
int p3d_cluster_compact(p3d_cluster *c, char **err);

#endif
