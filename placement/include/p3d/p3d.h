/*
 * p3d.h — the public API of libp3dplace, par3drun's placement library.
 *
 * Conventions (read once, they hold for every function below):
 *  - Functions that can fail return 0 on success and -1 on failure; on failure
 *    they store a malloc'd, one-line, user-facing message in *err (when err is
 *    not NULL) that names the file, the field or line, and what was expected.
 *    The caller frees it with free(). Bad input is never a crash.
 *  - "Caller frees with X_free()" is stated per function; X_free(NULL) is a no-op.
 *  - Nothing here prints to stdout/stderr; reports are returned as strings.
 *
 * The file is split into sections, one per concern; each concern lives in its
 * own placement/<concern>_*.c files.
 */
#ifndef P3D_P3D_H
#define P3D_P3D_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define P3D_VERSION "0.1.0"

/* Exit codes of the par3drun program (DESIGN.md "CLI"). */
#define P3D_EXIT_OK 0
#define P3D_EXIT_FAIL 1
#define P3D_EXIT_BADINPUT 2

/* Frees *pp and sets it to NULL. */
#define P3D_FREE(pp) do { free(*(pp)); *(pp) = NULL; } while (0)

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Formats a message into a fresh malloc'd *err (no-op when err is NULL).
 * Always returns -1 so callers can write `return p3d_err(err, ...)`. */
int p3d_err(char **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------------ */
/* Link classes, fastest first. Comparisons (<, >) are meaningful.          */
/* ------------------------------------------------------------------------ */

typedef enum p3d_link {
    P3D_LINK_SELF = 0,   /* same GPU */
    P3D_LINK_NVLINK,     /* NV#: NVLink / NVSwitch inside a node */
    P3D_LINK_MNNVL,      /* multi-node NVLink domain (GB200 NVL72, ...) */
    P3D_LINK_PIX,        /* one PCIe switch */
    P3D_LINK_PXB,        /* several PCIe switches, no host bridge */
    P3D_LINK_PHB,        /* through a PCIe host bridge */
    P3D_LINK_NODE,       /* across host bridges within one NUMA node */
    P3D_LINK_SYS,        /* across the SMP interconnect (sockets / NUMA) */
    P3D_LINK_RACK,       /* network, same rack (leaf switch) */
    P3D_LINK_XRACK,      /* network, across racks */
    P3D_LINK_COUNT
} p3d_link;

/* "X", "NV", "MNNVL", "PIX", "PXB", "PHB", "NODE", "SYS", "RACK", "XRACK". */
const char *p3d_link_name(p3d_link l);
/* Human description: "NVLink", "PCIe (one switch)", "network, across racks"... */
const char *p3d_link_desc(p3d_link l);

/* ------------------------------------------------------------------------ */
/* One node's topology (placement/topo_*.c, placement/node.c)                */
/* ------------------------------------------------------------------------ */

typedef struct p3d_gpu {
    int index;          /* position in PCI bus order on this node */
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
} p3d_gpu;

typedef struct p3d_nic {
    char name[32];      /* "mlx5_0", "efa0", "eth0" */
    char pci[32];
    char kind[16];      /* "ib", "efa", "eth", "other" */
    int numa;           /* -1 unknown */
} p3d_nic;

typedef struct p3d_node {
    char *hostname;     /* from the source, or the local hostname */
    char *source;       /* what it was read from, as given ("local", a path...) */
    char *source_kind;  /* "local", "hwloc-xml", "nvidia-smi", "synthetic" */
    int ngpus, nnics;
    int nnuma, npackages, ncores, npus;
    p3d_gpu *gpus;
    p3d_nic *nics;
    double *nvlink;           /* ngpus*ngpus GB/s (0 = no NVLink), symmetric */
    unsigned char *gg_class;  /* ngpus*ngpus p3d_link between GPUs */
    unsigned char *gn_class;  /* ngpus*nnics p3d_link GPU -> NIC */
    int ndomains;             /* NVLink domains: every GPU in exactly one */
    int nvlink_connected_not_clique; /* e.g. DGX-1 cube-mesh: noted in reports */
    char *fabric_uuid;        /* NVML GPU fabric cluster UUID, NULL if unknown */
    int fabric_clique;        /* NVML clique id, -1 unknown */
    char *notes;              /* newline-separated notes for reports, or NULL */
    char hash[17];            /* 16 hex digits over the node's facts */
} p3d_node;

/* Loads one node's topology. src: "local", "synthetic:STRING", or a path
 * to an hwloc XML or an `nvidia-smi topo -m` text (detected by content).
 * Caller frees *out with p3d_node_free(). */
int p3d_topo_load(const char *src, p3d_node **out, char **err);
void p3d_node_free(p3d_node *n);

/* Derives everything computed from the raw facts: validates the NVLink
 * matrix (size, symmetry, non-negative), NVLink domains, nearest NIC per GPU,
 * notes, hash. Every source calls it last. */
int p3d_node_finish(p3d_node *n, char **err);

/* GPU indices of domain d, sorted; returns count, fills out (cap entries). */
int p3d_node_domain_members(const p3d_node *n, int d, int *out, int cap);

/* Reports for `par3drun topo`; caller frees. */
char *p3d_topo_text(const p3d_node *n, int color);
char *p3d_topo_json(const p3d_node *n);

/* ------------------------------------------------------------------------ */
/* Cluster (placement/cluster_*.c, placement/hostlist.c, slurm_topo.c)       */
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

/* ------------------------------------------------------------------------ */
/* Job, mesh and model                                                       */
/* ------------------------------------------------------------------------ */

enum { P3D_DIM_TP = 0, P3D_DIM_CP, P3D_DIM_EP, P3D_DIM_DP, P3D_DIM_PP,
       P3D_NDIMS };

/* "tp", "cp", "ep", "dp", "pp". */
const char *p3d_dim_name(int dim);

typedef struct p3d_mesh {
    int size[P3D_NDIMS];    /* every entry >= 1 */
    int order[P3D_NDIMS];   /* dims, fastest-varying first */
    char order_str[48];     /* "tp-cp-ep-dp-pp" as given */
} p3d_mesh;

/* Parses an order string ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", or any
 * permutation/subset; missing dims are appended in default order). */
int p3d_mesh_set_order(p3d_mesh *m, const char *order, char **err);
int p3d_mesh_world(const p3d_mesh *m);
/* rank <-> coordinates under m->order. */
int p3d_mesh_rank(const p3d_mesh *m, const int coord[P3D_NDIMS]);
void p3d_mesh_coord(const p3d_mesh *m, int rank, int coord[P3D_NDIMS]);

typedef struct p3d_model {
    char name[48];          /* preset name or "custom" */
    double params;          /* parameter count P */
    int layers, hidden, heads, seq_len, vocab;
} p3d_model;

typedef struct p3d_job {
    p3d_mesh mesh;
    int micro_batches;      /* m, 0 = unknown */
    int micro_batch_size;   /* b, 0 = unknown */
    int global_batch;       /* B, 0 = unknown */
    int virtual_stages;     /* v, 1 = plain 1F1B */
    int dtype_bytes;        /* 2 for bf16/fp16 */
    int zero;               /* ZeRO stage 0..3 */
    int recompute;          /* 0 none, 1 selective, 2 full */
    int has_model;
    p3d_model model;
    double gpu_mem_bytes;   /* override, 0 = from topology/default */
    double tflops;          /* sustained TFLOP/s per GPU, 0 = default (cost model) */
} p3d_job;

void p3d_job_init(p3d_job *j); /* defaults: all dims 1, default order */

/* When job->mesh.size[P3D_DIM_DP] is 0 ("what is left"), sets it to
 * gpus / (tp*cp*ep*pp); fails with a clear message when that does not divide.
 * When dp was given, checks world <= gpus. */
int p3d_job_resolve_dp(p3d_job *job, size_t gpus, char **err);

/* Model presets ("gpt3-175b", "llama2-70b", "llama3-8b", ...): fills *m.
 * Fails naming the known presets. (placement/cost_model.c) */
int p3d_model_preset(const char *name, p3d_model *m, char **err);

/* ------------------------------------------------------------------------ */
/* Placement and policies (placement/policy_*.c, lua_*.c)                    */
/* ------------------------------------------------------------------------ */

typedef struct p3d_rank {
    int node;               /* index into cluster->nodes */
    int gpu;                /* GPU index on that node (PCI order) */
    int local_rank;         /* position among the node's ranks, by rank */
    int coord[P3D_NDIMS];
} p3d_rank;

typedef struct p3d_placement {
    int world;
    p3d_rank *ranks;        /* indexed by global rank */
    p3d_mesh mesh;
    char *policy;           /* policy name as reported ("megatron") */
    char *policy_source;    /* path or URL it was read from */
    char **notes;           /* policy's explanations (rule degraded, ...) */
    size_t nnotes;
} p3d_placement;

/* Runs a Lua policy (bundled name, path or http(s) URL) on the cluster and
 * job, validates the result (bijection, coordinates vs order). Caller frees
 * with p3d_placement_free(). */
int p3d_policy_run(const char *policy, const char *sha256_pin,
                   const p3d_cluster *c, const p3d_job *job,
                   p3d_placement **out, char **err);
void p3d_placement_free(p3d_placement *p);

/* Members of the group of dimension dim that contains rank r, ascending. */
int p3d_group_members(const p3d_mesh *m, int dim, int r, int *out, int cap);

/* ------------------------------------------------------------------------ */
/* Cost model (placement/cost_*.c) — estimates, formulas in DOMAIN.md and    */
/* docs/cost-model.md. Pure functions of the job and the link classes.       */
/* ------------------------------------------------------------------------ */

typedef struct p3d_cost {
    /* memory per GPU, bytes */
    double mem_weights, mem_grads, mem_optim, mem_act, mem_total, gpu_mem;
    int fits;                       /* mem_total <= gpu_mem */
    /* traffic per GPU per step, bytes; the link class each dimension uses */
    double tp_bytes_layer, tp_bytes_step, pp_bytes_boundary, pp_bytes_step,
        dp_bytes_step;
    p3d_link link[P3D_NDIMS];
    double tp_time, pp_time, dp_time; /* seconds per step at those links */
    double bubble;                  /* idle fraction */
    double flops_step;              /* whole job, per iteration */
    double compute_time, step_time, mfu;
    double tflops;                  /* sustained TFLOP/s per GPU assumed */
    /* appended by the cost model (docs/cost-model.md names each formula) */
    const char *gpu_mem_source;     /* "topology", "--gpu-mem" or "default" (static string) */
    int micro_batch_size, micro_batches, global_batch; /* b, m, B as used */
    int micro_batches_assumed;      /* 1 when m was not given and 4*pp was assumed */
    int layers_per_stage;           /* ceil(L/pp) */
    int inflight;                   /* micro-batches the first stage holds (1F1B) */
    double params_per_gpu;          /* psi = P/(tp*pp) */
    double act_layer;               /* activation bytes per layer per micro-batch */
    double link_gbps[P3D_NDIMS];    /* per-direction GB/s used for each dimension */
    double bubble_overhead;         /* (p-1)/(v*m): bubble time relative to ideal */
    double flops_model;             /* model FLOPs per iteration (no recompute), for MFU */
    double peak_tflops;             /* peak TFLOP/s per GPU the MFU is relative to */
    int seq_parallel;               /* 1: sequence parallelism assumed (tp > 1) */
    double stage_imbalance;         /* slowest stage's work / average stage's (LM head) */
    const char *gpu_name;           /* GPU the FLOP/s figures are for ("H100", ...; static) */
    const char *tflops_source;      /* "--tflops", "topology" or "default" (static) */
    double dp_overlap;              /* seconds of DP all-reduce hidden behind backward */
    double dp_exposed;              /* dp_time - dp_overlap: what the step waits for */
    double pp_latency;              /* seconds of per-message latency inside pp_time */
} p3d_cost;

/* Fills *out; needs job->has_model. link[] gives the worst link class each
 * dimension's groups cross (from an analysis or a hypothetical layout). */
int p3d_cost_eval(const p3d_cluster *c, const p3d_job *job,
                  const p3d_link link[P3D_NDIMS], p3d_cost *out, char **err);

/* Defaults of the cost model (docs/cost-model.md says where each comes from). */
#define P3D_DEFAULT_TFLOPS 400.0      /* sustained bf16 TFLOP/s per H100 (the sustained
                                       * default of any GPU is peak x 400/989) */
#define P3D_PEAK_TFLOPS 989.0         /* H100 SXM dense bf16 peak */
#define P3D_DEFAULT_GPU_MEM 80e9      /* bytes, when neither topology nor --gpu-mem says */

/* Per-direction GB/s of a link class when the cluster file gives none
 * (cluster->link_gbps[l] == 0). */
double p3d_link_default_gbps(p3d_link l);
/* The bandwidth the cost model uses: c->link_gbps[l] when > 0, else the
 * default. c may be NULL. */
double p3d_link_gbps(const p3d_cluster *c, p3d_link l);
/* Names of the bundled model presets, NULL-terminated (static). */
const char *const *p3d_model_preset_names(void);

/* The single formulas, exposed for tests and for plan's explanations. */
/* Model-state bytes per GPU (weights, grads, optimizer) for ZeRO stage
 * `zero` with psi parameters per GPU, data-parallel size d, dtype bytes w. */
void p3d_cost_model_states(double psi, int d, int zero, int w, double *weights,
                           double *grads, double *optim);
/* Activation bytes per layer per micro-batch (Korthikanti et al. 2022), 16-bit. */
double p3d_cost_act_layer(int s, int b, int h, int a, int t, int seq_parallel,
                          int recompute);
/* Training FLOPs per iteration: factor 96 (full recompute) or 72 (none). */
double p3d_cost_flops(double factor, double B, int s, int L, int h, int V);
/* Idle fraction of wall time: (p-1)/(v*m+p-1); v = 1 gives (p-1)/(m+p-1). */
double p3d_cost_bubble(int p, int m, int v);

/* ------------------------------------------------------------------------ */
/* Plan: search tp/pp/dp/micro-batching layouts (placement/plan*.c,          */
/* docs/plan.md). Link classes are derived from the cluster's shape, not     */
/* from running a policy.                                                    */
/* ------------------------------------------------------------------------ */

#define P3D_PLAN_ZERO_DEFAULT (-1) /* ZeRO-1 when dp > 1, else 0 */
#define P3D_PLAN_ZERO_SEARCH (-2)  /* try stages 0..3 */

enum { P3D_PLAN_REJ_MEMORY = 0, P3D_PLAN_REJ_NVLINK, P3D_PLAN_REJ_BATCH,
       P3D_PLAN_REJ_HEADS, P3D_PLAN_REJ_LAYERS, P3D_PLAN_NREJ };

typedef struct p3d_plan_row {
    int tp, pp, dp, micro_batch, micro_batches, zero;
    p3d_cost cost;
} p3d_plan_row;

typedef struct p3d_plan {
    p3d_job job;                 /* the request (mesh sizes unused) */
    int zero_mode;               /* 0..3 or P3D_PLAN_ZERO_* */
    const char *cluster_source;  /* borrowed from the cluster */
    int nodes, gpus_per_node, gpus, nracks, nodes_per_rack;
    int nvl_gpus;                /* GPUs per NVLink domain inside a node */
    int mnnvl_gpus;              /* GPUs per multi-node NVLink domain, 0 none */
    p3d_link intra_link;         /* class inside a node beyond its NVLink domain */
    double link_gbps[P3D_LINK_COUNT]; /* as the cost model uses them */
    size_t searched;             /* mesh shapes (tp, pp, dp) considered */
    size_t rejected[P3D_PLAN_NREJ]; /* shapes dropped, by the first rule they break */
    size_t variants;             /* (b, m, ZeRO) variants evaluated for the rest */
    p3d_plan_row *rows;          /* variants that fit, best (fastest) first */
    size_t nrows;
    int has_misfit;              /* closest layout that did not fit memory */
    p3d_plan_row misfit;
    int cluster_is_topology;     /* cluster_source is one node's --topology */
} p3d_plan;

/* Searches every layout using all of the cluster's GPUs. job needs a model
 * and a global batch; micro_batch_size / micro_batches fix b / m when set.
 * Caller frees with p3d_plan_free(). */
int p3d_plan_search(const p3d_cluster *c, const p3d_job *job, int zero_mode,
                    p3d_plan **out, char **err);
void p3d_plan_free(p3d_plan *pl);
/* Reports of the best `top` layouts with why each wins or loses; caller frees. */
char *p3d_plan_text(const p3d_plan *pl, int top);
char *p3d_plan_json(const p3d_plan *pl, int top);
/* Why no layout was kept (pl->nrows == 0): the memory verdict with the GPU
 * size when some shape passed the hard rules, else the rules every shape
 * broke, with counts. One sentence without trailing newline; malloc'd. */
char *p3d_plan_none_reason(const p3d_plan *pl);

/* ------------------------------------------------------------------------ */
/* Checks and reports (placement/check_*.c, report_*.c)                      */
/* ------------------------------------------------------------------------ */

typedef enum { P3D_SEV_INFO = 0, P3D_SEV_WARNING, P3D_SEV_ERROR } p3d_severity;

typedef struct p3d_check {
    p3d_severity severity;
    char code[48];          /* "TP_CROSSES_NODES", ... (docs/checks.md) */
    char *message;          /* what happened, why it matters, what to do */
} p3d_check;

typedef struct p3d_dim_stats {
    int ngroups;
    int worst;                       /* p3d_link: worst class any group crosses */
    int groups_by_link[P3D_LINK_COUNT]; /* groups whose worst link is that class */
} p3d_dim_stats;

typedef struct p3d_analysis {
    p3d_check *checks;
    size_t nchecks;
    int nerrors, nwarnings;
    p3d_dim_stats dim[P3D_NDIMS];
    int has_cost;
    p3d_cost cost;
} p3d_analysis;

/* Checks a placement against the cluster and the job and scores it. Caller
 * frees with p3d_analysis_free(). */
int p3d_analyze(const p3d_cluster *c, const p3d_job *job,
                const p3d_placement *pl, p3d_analysis **out, char **err);
void p3d_analysis_free(p3d_analysis *a);

/* What a report shows; the baseline (naive policy) may be NULL. */
typedef struct p3d_report_in {
    const p3d_cluster *cluster;
    const p3d_job *job;
    const p3d_placement *pl;
    const p3d_analysis *an;
    const p3d_placement *base_pl;
    const p3d_analysis *base_an;
    int color;
} p3d_report_in;

/* Reports; caller frees. Deterministic: same input, same bytes. */
char *p3d_report_text(const p3d_report_in *in);
char *p3d_report_json(const p3d_report_in *in);
char *p3d_report_svg(const p3d_report_in *in);
char *p3d_report_html(const p3d_report_in *in);

/* Rank slots (placement/slots.c): gives every node exactly nslots slots
 * for --nproc-per-node. A node without GPUs gets nslots synthesized CPU
 * slots (model "CPU slot", no NVLink, NUMA unknown, a note saying so); a
 * node with GPUs keeps its first nslots GPUs in PCI order; asking for more
 * slots than a node has GPUs is an error (no oversubscription). Records
 * that already match are left alone. */
int p3d_cluster_set_slots(p3d_cluster *c, int nslots, char **err);

/* Where bundled files live: P3D_DATA_DIR env, else the build/install dir. */
const char *p3d_data_dir(void);

#ifdef __cplusplus
}
#endif
#endif
