/* SPDX-License-Identifier: BSD-3-Clause */
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
int p3d_hostlist_expand(const char *expr, char ***names, size_t *n, size_t max, char **err);
void p3d_strv_free(char **v, size_t n);
/* The inverse, for reports: "node[001-003,005],gpu7". Keeps the order, so
 * expanding the result gives back names[0..n). Caller frees; NULL only when
 * out of memory. */
char *p3d_hostlist_compress(char *const *names, size_t n);

typedef struct p3d_cnode {
    char *name;           /* hostname */
    const p3d_node *topo; /* shared record, owned by the cluster */
    int rack;             /* index into cluster->racks */
    int nvl_domain;       /* index into cluster->nvl_domains, -1 none */
    int role;             /* P3D_NODE_* (--spares, --exclude, a loss) */
} p3d_cnode;

/* What a node is for in a job (p3d_cnode.role). Only P3D_NODE_USE nodes
 * are given to a policy; a replacement (job.previous) also gets the spares,
 * marked `spare = true` in the policy's node table. */
enum {
    P3D_NODE_USE = 0,
    P3D_NODE_SPARE,    /* --spares: a hot spare, runs no rank yet */
    P3D_NODE_EXCLUDED, /* --exclude or a failed --health-check */
    P3D_NODE_LOST,     /* lost during the job: never used again */
};

typedef struct p3d_cluster {
    char *source;         /* cluster file path, or NULL */
    char *slurm_topology; /* topology.conf path when applied, or NULL */
    size_t nnodes;
    p3d_cnode *nodes; /* in list order (the naive baseline's order) */
    size_t ntopos;
    p3d_node **topos; /* unique topologies, shared by nodes */
    size_t nracks;
    char **racks; /* rack names; a single "default" when none given */
    size_t nnvl_domains;
    char **nvl_domains;               /* multi-node NVLink domain names */
    int *rack_dist;                   /* nracks*nracks switch hops (0 same, -1 no known
                               path), or NULL when unknown */
    double link_gbps[P3D_LINK_COUNT]; /* per-direction GB/s per link class */
    char **warnings;                  /* things a report must show */
    size_t nwarnings;
    size_t nnodes_file; /* nodes in the cluster file when an allocation
                               (SLURM_JOB_NODELIST) kept only some, else 0 */
} p3d_cluster;

/* Reads a cluster description JSON; topologies resolve relative to the
 * file, then among the bundled ones (P3D_TOPOLOGY_PATH / install dir).
 * Caller frees with p3d_cluster_free(). */
int p3d_cluster_load(const char *path, p3d_cluster **out, char **err);
/* The same; path may also be the JSON of `kubectl get nodes -o json` or
 * `aws ec2 describe-instance-topology` (docs/kubernetes.md), whose nodes
 * take topology (--topology; NULL: the documented table of bundled ones). */
int p3d_cluster_load_as(const char *path, const char *topology, p3d_cluster **out, char **err);
/* A one-node cluster around a node record (takes ownership of node). */
int p3d_cluster_from_node(p3d_node *node, p3d_cluster **out, char **err);
/* Applies a Slurm topology.conf (tree: leaf switch = rack; block: block =
 * multi-node NVLink domain). Problems that do not stop it are warnings. */
int p3d_cluster_apply_slurm_topology(p3d_cluster *c, const char *path, char **err);
/* Keeps only the nodes named by a hostlist (SLURM_JOB_NODELIST), in the
 * hostlist's order. */
int p3d_cluster_restrict(p3d_cluster *c, const char *hostlist, char **err);
void p3d_cluster_free(p3d_cluster *c);
size_t p3d_cluster_gpus(const p3d_cluster *c);
/* Link class between (node a, gpu ga) and (node b, gpu gb). */
p3d_link p3d_cluster_link(const p3d_cluster *c, size_t a, int ga, size_t b, int gb);
/* Appends a warning (copied). */
void p3d_cluster_warn(p3d_cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


/* Rank slots (placement/cluster/slots.c): gives every node exactly nslots slots
 * for --nproc-per-node. A node without GPUs gets nslots synthesized CPU
 * slots (model "CPU slot", no NVLink, NUMA unknown, a note saying so); a
 * node with GPUs keeps its first nslots GPUs in PCI order; asking for more
 * slots than a node has GPUs is an error (no oversubscription). Records
 * that already match are left alone. */
int p3d_cluster_set_slots(p3d_cluster *c, int nslots, char **err);

/* The allocation of this node (placement/cluster/alloc.c,
 * docs/cluster-file.md "Allocations"): which GPUs of the node record a job
 * may use, from SLURM_STEP_GPUS, else SLURM_JOB_GPUS, else an inherited
 * CUDA_VISIBLE_DEVICES (indices or GPU-UUIDs). */
typedef struct p3d_alloc {
    int active;     /* 0: nothing restricts the node's GPUs */
    char var[24];   /* the variable that set it */
    char *value;    /* its value */
    int n;          /* usable GPUs */
    int *gpu;       /* their indices in the node record, ascending */
    char **visible; /* the CUDA_VISIBLE_DEVICES entry naming each */
} p3d_alloc;

/* Reads the allocation from an environ-like "K=V" array against node
 * (pure: envp is never the process's unless the caller passes environ).
 * A node without GPUs gets active = 0. Caller frees with p3d_alloc_free. */
int p3d_alloc_from_env(char *const *envp, const p3d_node *node, p3d_alloc *out, char **err);
/* Replaces *n by a record of the usable GPUs only (each GPU's visible set,
 * a note naming what was excluded and why). nproc (--nproc-per-node, 0 =
 * not given) larger than the allocation is an error naming it. */
int p3d_alloc_apply(const p3d_alloc *a, p3d_node **n, int nproc, char **err);
void p3d_alloc_free(p3d_alloc *a);
/* Both, from the process environment: what the launch paths call where
 * they make this host's node record. */
int p3d_node_apply_allocation(p3d_node **n, int nproc, char **err);
/* The leaf switch of this node from Slurm's topology/tree address
 * (SLURM_TOPOLOGY_ADDR "spine1.leaf3.node17" with
 * SLURM_TOPOLOGY_ADDR_PATTERN "switch.switch.node" -> "leaf3"): the
 * component just above the node. malloc'd, NULL when there is none.
 * p3d_slurm_env_rack reads the process environment. */
char *p3d_slurm_addr_rack(char *const *envp);
char *p3d_slurm_env_rack(void);
/* Puts node i in the rack named rack[i] (NULL: unknown, "default"),
 * replacing the cluster's racks and switch distances. Does nothing when
 * every entry is NULL; warns when only some are. */
int p3d_cluster_set_racks(p3d_cluster *c, char *const *rack, char **err);
/* A new record with n's host (NUMA, cores, NICs, fabric) and k GPU slots,
 * zeroed and not yet finished. */
p3d_node *p3d_node_shell(const p3d_node *n, int k, char **err);
/* A new record of GPUs idx[0..k) of n (in that order), finished. */
p3d_node *p3d_node_subset(const p3d_node *n, const int *idx, int k, char **err);

#ifdef __cplusplus
}
#endif
#endif
