/*
 * p3d/cluster.h — gather: nodes, racks, NVLink domains (placement/cluster/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_CLUSTER_H
#define P3D_CLUSTER_H

#include "p3d/topo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Cluster (placement/cluster/)                                              */
/* ------------------------------------------------------------------------ */

/* Expands a Slurm hostlist expression ("node[001-016,020]", "a[1-2]b[3-4]",
 * comma-separated lists). At most max names (0 = 4,194,304), checked before
 * anything is expanded. Caller frees with p3d_strv_free(). Syntax in
 * docs/cluster-file.md. */
int p3d_hostlist_expand(const char *expr, char ***names, size_t *n,
                        size_t max, char **err);
void p3d_strv_free(char **v, size_t n);
/* The inverse, for reports: "node[001-003,005],gpu7". Keeps the order, so
 * expanding the result gives back names[0..n). Caller frees; NULL only when
 * out of memory. */
char *p3d_hostlist_compress(char *const *names, size_t n);

typedef struct p3d_cnode {
    char *name;             /* hostname */
    const p3d_node *topo;   /* shared record, owned by the cluster */
    int rack;               /* index into cluster->racks */
    int nvl_domain;         /* index into cluster->nvl_domains, -1 none */
} p3d_cnode;

typedef struct p3d_cluster {
    char *source;           /* cluster file path, or NULL */
    char *slurm_topology;   /* topology.conf path when applied, or NULL */
    size_t nnodes;
    p3d_cnode *nodes;       /* in list order (the naive baseline's order) */
    size_t ntopos;
    p3d_node **topos;       /* unique topologies, shared by nodes */
    size_t nracks;
    char **racks;           /* rack names; a single "default" when none given */
    size_t nnvl_domains;
    char **nvl_domains;     /* multi-node NVLink domain names */
    int *rack_dist;         /* nracks*nracks switch hops (0 same, -1 no known
                               path), or NULL when unknown */
    double link_gbps[P3D_LINK_COUNT]; /* per-direction GB/s per link class */
    char **warnings;        /* things a report must show */
    size_t nwarnings;
    size_t nnodes_file;     /* nodes in the cluster file when an allocation
                               (SLURM_JOB_NODELIST) kept only some, else 0 */
} p3d_cluster;

/* Reads a cluster description JSON; topologies resolve relative to the
 * file, then among the bundled ones (P3D_TOPOLOGY_PATH / install dir).
 * Caller frees with p3d_cluster_free(). */
int p3d_cluster_load(const char *path, p3d_cluster **out, char **err);
/* A one-node cluster around a node record (takes ownership of node). */
int p3d_cluster_from_node(p3d_node *node, p3d_cluster **out, char **err);
/* Applies a Slurm topology.conf (tree: leaf switch = rack; block: block =
 * multi-node NVLink domain). Problems that do not stop it are warnings. */
int p3d_cluster_apply_slurm_topology(p3d_cluster *c, const char *path,
                                     char **err);
/* Keeps only the nodes named by a hostlist (SLURM_JOB_NODELIST), in the
 * hostlist's order. */
int p3d_cluster_restrict(p3d_cluster *c, const char *hostlist, char **err);
void p3d_cluster_free(p3d_cluster *c);
size_t p3d_cluster_gpus(const p3d_cluster *c);
/* Link class between (node a, gpu ga) and (node b, gpu gb). */
p3d_link p3d_cluster_link(const p3d_cluster *c, size_t a, int ga, size_t b,
                          int gb);
/* Appends a warning (copied). */
void p3d_cluster_warn(p3d_cluster *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));


/* Rank slots (placement/cluster/slots.c): gives every node exactly nslots slots
 * for --nproc-per-node. A node without GPUs gets nslots synthesized CPU
 * slots (model "CPU slot", no NVLink, NUMA unknown, a note saying so); a
 * node with GPUs keeps its first nslots GPUs in PCI order; asking for more
 * slots than a node has GPUs is an error (no oversubscription). Records
 * that already match are left alone. */
int p3d_cluster_set_slots(p3d_cluster *c, int nslots, char **err);

#ifdef __cplusplus
}
#endif
#endif
