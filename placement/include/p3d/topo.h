/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/topo.h — discover: one node's topology (placement/topo/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_TOPO_H
#define P3D_TOPO_H

#include "p3d/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* One node's topology (placement/topo/)                                 */
/* ------------------------------------------------------------------------ */

typedef struct p3d_gpu {
    int index;          /* position in PCI bus order among the GPUs ranks
                           may use here (an allocation renumbers: alloc.c) */
    int phys;           /* position in PCI bus order on the whole node, the
                           index `par3drun topo` shows outside any
                           allocation; = index when none restricts it */
    char pci[32];       /* "0000:18:00.0" (lower case), "" when unknown */
    char model[64];     /* "NVIDIA H100 80GB HBM3" when known, else "" */
    char osdev[32];     /* "cuda0", "nvml3", "" for PCI-only GPUs */
    int numa;           /* lowest NUMA os_index of its locality, -1 unknown */
    int package;        /* package (socket) os_index, -1 unknown */
    char *cpus;         /* cpuset as a list string "0-19,40-59" (malloc'd) */
    int nearest_nic;    /* index into node->nics, -1 when the node has none */
    int nic_same_numa;  /* 1 when nearest_nic is on the GPU's NUMA node */
    int domain;         /* NVLink domain index on this node */
    uint64_t mem_bytes; /* device memory when known, else 0 */
    char uuid[48];      /* "GPU-8f6c...", "" when unknown (hwloc NVML osdev) */
    char visible[48];   /* CUDA_VISIBLE_DEVICES entry that names this GPU for
                           a child when an allocation set one (alloc.c), ""
                           = its index */
} p3d_gpu;

typedef struct p3d_nic {
    char name[32]; /* "mlx5_0", "efa0", "eth0" */
    char pci[32];
    char kind[16]; /* "ib", "efa", "eth", "other" */
    int numa;      /* -1 unknown */
} p3d_nic;

typedef struct p3d_node {
    char *hostname;    /* from the source, or the local hostname */
    char *source;      /* what it was read from, as given ("local", a path...) */
    char *source_kind; /* "local", "hwloc-xml", "nvidia-smi", "synthetic" */
    int ngpus, nnics;
    int nnuma, npackages, ncores, npus;
    p3d_gpu *gpus;
    p3d_nic *nics;
    double *nvlink;                  /* ngpus*ngpus GB/s (0 = no NVLink), symmetric */
    unsigned char *gg_class;         /* ngpus*ngpus p3d_link between GPUs */
    unsigned char *gn_class;         /* ngpus*nnics p3d_link GPU -> NIC */
    int ndomains;                    /* NVLink domains: every GPU in exactly one */
    int nvlink_connected_not_clique; /* e.g. DGX-1 cube-mesh: noted in reports */
    char *fabric_uuid;               /* NVML GPU fabric cluster UUID, NULL if unknown */
    int fabric_clique;               /* NVML clique id, -1 unknown */
    char *notes;                     /* newline-separated notes for reports, or NULL */
    char hash[17];                   /* 16 hex digits over the node's facts */
} p3d_node;

/* Loads one node's topology. src: "local", "synthetic:STRING", or a path
 * to an hwloc XML or an `nvidia-smi topo -m` text (detected by content).
 * Caller frees *out with p3d_node_free(). */
int p3d_topo_load(const char *src, p3d_node **out, char **err);
void p3d_node_free(p3d_node *n);

/* The local topology cache (docs/topology.md, "The topology cache"): used
 * by p3d_topo_load("local") unless turned off here (--no-topo-cache) or by
 * P3D_TOPO_CACHE=0; verbose says on stderr whether an entry was reused.
 * Call before the first load; without a call the environment decides. */
void p3d_topo_cache_configure(int enabled, int verbose);

/* Derives everything computed from the raw facts: validates the NVLink
 * matrix (size, symmetry, non-negative), NVLink domains, nearest NIC per GPU,
 * notes, hash. Every source calls it last. */
int p3d_node_finish(p3d_node *n, char **err);

/* GPU indices of domain d, sorted; returns count, fills out (cap entries). */
int p3d_node_domain_members(const p3d_node *n, int d, int *out, int cap);

/* Reports for `par3drun topo`; caller frees. */
char *p3d_topo_text(const p3d_node *n, int color);
char *p3d_topo_json(const p3d_node *n);

#ifdef __cplusplus
}
#endif
#endif
