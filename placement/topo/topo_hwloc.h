/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_hwloc.h — the two halves of the hwloc topology source, private to
 * placement/topo: reading a loaded topology into the raw node record
 * (topo_hwloc_collect.c) and loading, caching and completing it
 * (topo_hwloc.c).
 */
#ifndef P3D_TOPO_HWLOC_H
#define P3D_TOPO_HWLOC_H

#include <hwloc.h>

#include "topo_cache.h"

/* Discovery's facts from the loaded topology t: everything the record
 * holds that comes from hwloc, before the NVML plugin, the notes and
 * p3d_node_finish (what the cache keeps). hostname NULL: hwloc's HostName.
 * source and kind name the record. Returns 0 with *out (caller frees with
 * p3d_node_free) and *x filled, or -1 with *err. */
int p3d_hwloc_collect_node(hwloc_topology_t t, const char *source, const char *kind, const char *hostname,
                           p3d_node **out, p3d_topo_extra *x, char **err);

#endif
