/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/cost.h — the cost model and plan search (placement/cost/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_COST_H
#define P3D_COST_H

#include "p3d/cluster.h"
#include "p3d/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Cost model (placement/cost/)     — estimates, formulas in                  */
/* docs/cost-model.md. Pure functions of the job and the link classes.       */
/* ------------------------------------------------------------------------ */

/* How each dimension's traffic spreads over link classes: n[d][l] counts the
 * hops of class l over all of dimension d's groups. For pp: the hops between
 * consecutive stages (plus last -> first with interleaved 1F1B); for a
 * collective (tp, cp, ep, dp): the hops of each group's ring, members in
 * topology order (rack, NVLink domain, node, GPU) as NCCL builds its rings.
 * check_links.c counts them for a placement, plan derives them for a
 * layout. A new dimension only needs its row filled; the cost model reads
 * n[d] for whatever dimension it costs. */
typedef struct p3d_hops {
    long n[P3D_NDIMS][P3D_LINK_COUNT];
} p3d_hops;

/* What a GPU family sustains (docs/cost-model.md, "Compute time"). */
typedef struct p3d_gpu_perf {
    double hbm_tbps; /* memory bandwidth, TB/s (data sheet) */
    double gemm_max; /* fraction of peak a large bf16 GEMM sustains */
    double m0;       /* GEMM rows (tokens) at which efficiency halves */
    double n0;       /* GEMM width or depth at which efficiency halves */
    double attn_eff; /* fraction of peak fused (flash) attention sustains */
} p3d_gpu_perf;

typedef struct p3d_cost {
    /* memory per GPU, bytes */
    double mem_weights, mem_grads, mem_optim, mem_act, mem_total, gpu_mem;
    int fits; /* mem_total <= gpu_mem */
    /* traffic per GPU per step, bytes; the link class each dimension uses */
    double tp_bytes_layer, tp_bytes_step, pp_bytes_boundary, pp_bytes_step, dp_bytes_step;
    p3d_link link[P3D_NDIMS];
    double tp_time, pp_time, dp_time;              /* seconds per step at those links */
    double cp_bytes_layer, cp_bytes_step, cp_time; /* context parallelism (ring attention) */
    double bubble;                                 /* idle fraction */
    double flops_step;                             /* whole job, per iteration */
    double compute_time, step_time, mfu;
    double tflops; /* sustained TFLOP/s per GPU assumed */
    /* appended by the cost model (docs/cost-model.md names each formula) */
    const char *gpu_mem_source;                        /* "topology", "--gpu-mem" or "default" (static string) */
    int micro_batch_size, micro_batches, global_batch; /* b, m, B as used */
    int micro_batches_assumed;                         /* 1 when m was not given and 4*pp was assumed */
    int layers_per_stage;                              /* ceil(L/pp); uneven stages: the fullest stage's */
    /* stages' layers (uneven: --decoder-first/last-pipeline-num-layers;
     * even: all ceil(L/pp)) and memory per GPU of the first, the second
     * (the fullest middle one) and the last stage; mem_total is their
     * maximum (even stages: the first's, Megatron's estimator) */
    int uneven; /* --decoder-first/last-pipeline-num-layers given */
    int stage_layers[3];
    double stage_mem[3];
    double mem_layer_states, mem_layer_act; /* one layer's states; its activations per micro-batch held */
    int inflight;                           /* micro-batches the first stage holds (1F1B) */
    double params_per_gpu;                  /* psi = P/(tp*pp) */
    double act_layer;                       /* activation bytes per layer per micro-batch */
    double link_gbps[P3D_NDIMS];            /* per-direction GB/s used for each dimension */
    double bubble_overhead;                 /* (p-1)/(v*m): bubble time relative to ideal */
    double flops_model;                     /* model FLOPs per iteration (no recompute), for MFU */
    double peak_tflops;                     /* peak TFLOP/s per GPU the MFU is relative to */
    int seq_parallel;                       /* 1: sequence parallelism assumed (tp > 1) */
    double stage_imbalance;                 /* slowest stage's work / average stage's (LM head) */
    const char *gpu_name;                   /* GPU the FLOP/s figures are for ("H100", ...; static) */
    const char *tflops_source;              /* "--tflops", "topology" or "default" (static) */
    double dp_overlap;                      /* seconds of DP all-reduce hidden behind backward */
    double dp_exposed;                      /* dp_time - dp_overlap: what the step waits for */
    double pp_latency;                      /* seconds of per-message latency inside pp_time */
    /* headroom: memory kept free for what the model does not count (CUDA
     * context, NCCL buffers, fragmentation); fits needs mem_total <=
     * gpu_mem - mem_reserve */
    double mem_reserve;
    const char *mem_reserve_source; /* "--mem-reserve" or "default" (static) */
    int fits_raw;                   /* mem_total <= gpu_mem (without the reserve) */
    /* mixture of experts (moe = 1; all zero for a dense model): routed
     * expert weights are sharded over etp*ep (and pp) and reduced over
     * edp; the EP all-to-alls sit on the critical path like TP's */
    int moe;
    int moe_layers_per_stage;                      /* MoE layers of the fullest stage */
    double params_expert;                          /* routed expert parameters, whole model */
    double params_expert_per_gpu;                  /* params_expert / (etp*ep*pp), part of params_per_gpu */
    double params_active;                          /* parameters one token uses (FLOPs), whole model */
    double ep_bytes_layer, ep_bytes_step, ep_time; /* EP dispatch + combine all-to-alls */
    double edp_bytes_step, edp_time;               /* expert gradient all-reduce over edp */
    /* the hops each dimension's traffic takes (zero when not known: then
     * the worst link carries all of it) */
    p3d_hops hops;
    int has_hops;
    /* memory as Megatron-LM's estimator counts it (docs/cost-model.md,
     * "Memory"): the most loaded shard (the first stage, with the
     * embedding; with pp = 1 and untied embeddings also the output layer) */
    double params_shard;        /* parameters on that shard */
    double params_shard_expert; /* of which routed experts (over etp*ep) */
    double bytes_per_param;     /* weights + grads + optimizer bytes per non-expert parameter */
    int grad_bytes;             /* main-gradient bytes (4: fp32, Megatron's default; 2: --grad-reduce-in-bf16) */
    double mem_act_embed;       /* the embedding's (and with pp = 1 the output layer's) share of mem_act */
    const char *act_formula;    /* which published activation formula mem_act follows (static) */
    double mem_act_megatron;    /* mem_act as Megatron's estimator counts it */
    double mem_act_moe;         /* par3drun's addition: MoE tokens' dispatched copies (mem_act's rest) */
    /* compute time from GEMM shapes (docs/cost-model.md, "Compute time"):
     * seconds per micro-batch on one GPU, forward + backward + recompute */
    double t_layer;                                 /* one layer (an MoE layer for MoE models) */
    double t_head;                                  /* the output layer and the loss (last stage) */
    double gemm_eff;                                /* FLOP-weighted GEMM efficiency of a layer (fraction of peak) */
    double t_layer_gemm, t_layer_attn, t_layer_mem; /* t_layer's parts */
} p3d_cost;

/* Fills *out; needs job->has_model. link[] gives the worst link class each
 * dimension's groups cross (from an analysis or a hypothetical layout).
 * Every hop is then assumed to be on that worst link. */
int p3d_cost_eval(const p3d_cluster *c, const p3d_job *job, const p3d_link link[P3D_NDIMS], p3d_cost *out, char **err);
/* The same with the hops each dimension really takes (NULL: as above):
 * pipeline traffic is costed hop by hop on each hop's own class; a ring
 * collective moves in lockstep, so its slowest hop (link[d]) paces it. */
int p3d_cost_eval_hops(const p3d_cluster *c, const p3d_job *job, const p3d_link link[P3D_NDIMS], const p3d_hops *hops,
                       p3d_cost *out, char **err);
/* Memory kept free per GPU of gpu_mem bytes when --mem-reserve is not
 * given: 5% of it or P3D_MEM_RESERVE_MIN, whichever is larger. */
double p3d_cost_default_reserve(double gpu_mem);

/* Defaults of the cost model (docs/cost-model.md says where each comes from). */
/* sustained bf16 TFLOP/s per H100 (the sustained default of any GPU is
 * peak x 400/989) */
#define P3D_DEFAULT_TFLOPS 400.0
#define P3D_PEAK_TFLOPS 989.0     /* H100 SXM dense bf16 peak */
#define P3D_DEFAULT_GPU_MEM 80e9  /* bytes, when neither topology nor --gpu-mem says */
#define P3D_MEM_RESERVE_FRAC 0.05 /* default headroom: 5% of the GPU's memory ... */
#define P3D_MEM_RESERVE_MIN 3e9   /* ... or 3 GB, whichever is larger */

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
 * `zero` with psi parameters per GPU, data-parallel size d, dtype bytes w
 * and main-gradient bytes gb: w + gb + K bytes per parameter, K = 12 (fp32
 * main params and Adam's two moments) for 16-bit training, 8 for fp32;
 * ZeRO-1 (Megatron's distributed optimizer) divides K by d, ZeRO-2 also
 * the gradients, ZeRO-3 everything. w = 2, gb = 4: Megatron's 18 bytes,
 * 6 + 12/d with the distributed optimizer. */
/* Layers of the first, a middle and the last pipeline stage (even, or
 * Megatron's --decoder-first/last-pipeline-num-layers first/last, 0 =
 * unset); -1 with *err when Megatron would refuse them. */
int p3d_cost_stage_layers(int L, int p, int v, int first, int last, int out[3], char **err);
void p3d_cost_model_states(double psi, int d, int zero, int w, int gb, double *weights, double *grads, double *optim);
/* Activation bytes per layer per micro-batch (Korthikanti et al. 2022), 16-bit,
 * for an MLP of 4h. */
double p3d_cost_act_layer(int s, int b, int h, int a, int t, int seq_parallel, int recompute);
/* The same for an MLP of f: with sequence parallelism (or t = 1) Megatron's
 * sbh(18 + 4f/h) (+ 5as/h without recompute) / t; without, sbh(10 + 24/t)
 * (+ 5as/(ht)); full recompute keeps 2sbh (/t with SP). */
double p3d_cost_act_layer_f(int s, int b, int h, int a, int f, int t, int seq_parallel, int recompute);

/* Activation bytes of one MoE layer per micro-batch (16-bit; cp not
 * applied): Korthikanti's layer with its MLP part (19sbh/t) replaced by the
 * router input 2sbh/t and, per routed and shared copy of a token, its
 * dispatched input (2h, gathered over etp) and the SwiGLU gate, up and
 * product outputs (6f, split over etp). */
double p3d_cost_act_moe_layer(int s, int b, int h, int a, int t, int seq_parallel, int recompute, int copies, int f,
                              int etp);

/* Where a model's parameters sit, in Megatron-LM's estimator's terms
 * (placement/cost/model_params.c): per layer, attention (TP-sharded), the
 * dense MLP, the shared and the routed experts (all, and the top-k a
 * token uses), the two norms and the router (replicated); whole-model
 * sums; the embedding (V*h, once; twice in total when untied). */
typedef struct p3d_model_counts {
    double attn, dense_mlp, shared_mlp, routed, routed_active, norms, router;
    double final_norm, embedding;
    int dense_layers, moe_layers;
    double tp_block, replicated_block, expert_block; /* the layers, whole model */
    double total, active, matmul;                    /* matmul: weights a token passes through, no embeddings */
    double scale;                                    /* --params / the architecture's own count (1 without --params) */
} p3d_model_counts;
int p3d_model_count(const p3d_model *m, p3d_model_counts *c, char **err);
/* --ffn-hidden-size, or Megatron's default for the model (4h; 8h/3 to 64 with SwiGLU). */
int p3d_model_ffn(const p3d_model *m);
/* Training FLOPs per iteration: factor 96 (full recompute) or 72 (none). */
double p3d_cost_flops(double factor, double B, int s, int L, int h, int V);
/* Idle fraction of wall time: (p-1)/(v*m+p-1); v = 1 gives (p-1)/(m+p-1). */
double p3d_cost_bubble(int p, int m, int v);
/* Training FLOPs per iteration with W matmul weights per token:
 * factor * B * s * (W/12 + L*s*h/6 + h*V/16); W = 12*L*h^2 gives
 * p3d_cost_flops. */
double p3d_cost_flops_w(double factor, double B, int s, int L, int h, int V, double W);
/* EP all-to-all bytes per GPU per MoE layer per micro-batch: n_a2a (4:
 * dispatch and combine, forward and backward; 6 with full recompute)
 * all-to-alls of the GPU's b*s/(cp*t) tokens, each sent to top_k experts,
 * h elements of w bytes, of which (ep-1)/ep leave the GPU. */
double p3d_cost_ep_bytes_layer(int b, int s, int h, int top_k, int t, int cp, int ep, int w, int recompute);

/* The GPU the estimates are for (the slowest known family of the cluster,
 * H100 when none is known), its memory (--gpu-mem, topology, 80 GB) and
 * the reserve kept free. */
typedef struct p3d_gpu_info {
    const char *name; /* static */
    double peak_tflops, mem, reserve;
    p3d_gpu_perf perf;
    int known;
} p3d_gpu_info;
void p3d_cost_gpu(const p3d_cluster *c, const p3d_job *job, p3d_gpu_info *g);

/* Serving (plan --inference; placement/cost/plan_infer.c, docs/plan.md
 * "Inference"); p3d_infer_opts is in p3d/job.h. */
/* The serving report for the cluster (text, or JSON when json): replica
 * layouts (tp inside an NVLink domain, pp across nodes only when a replica
 * does not fit one), memory = weights + KV cache, TTFT, TPOT, tokens/s per
 * GPU. *fits = 0 when no replica fits. NULL with *err on bad input. */
char *p3d_infer_report(const p3d_cluster *c, const p3d_job *job, const p3d_infer_opts *io, int json, int *fits,
                       char **err);

/* Efficiency of a bf16 GEMM of M x N x K on a GPU of family g: the
 * ceiling times M/(M+m0) N/(N+n0) K/(K+n0). */
/* One serving replica of tp x pp GPUs (the dry run with --inference),
 * costed by the functions plan --inference ranks its layouts with. Bytes
 * per GPU, seconds, tokens/s per GPU; io's defaults filled in. */
typedef struct p3d_infer_cost {
    int tp, pp, replicas, fits;
    int context, prompt, batch;   /* as used (defaults filled in) */
    double kv_per_token;          /* bytes of K and V cache per token, whole model */
    double weights, kv, total;    /* per GPU */
    double gpu_mem, reserve;      /* what a GPU holds, what is kept free */
    double ttft, tpot, tok_s_gpu; /* seconds, seconds, tokens/s per GPU */
    const char *gpu_name;         /* static */
} p3d_infer_cost;
/* 0, or -1 with *err on bad input (a prompt longer than the context, no
 * model). replicas = gpus / (tp * pp). */
int p3d_infer_layout(const p3d_cluster *c, const p3d_job *job, int tp, int pp, int gpus, p3d_infer_cost *out,
                     char **err);

double p3d_gemm_eff(const p3d_gpu_perf *g, double M, double N, double K);
/* Seconds per micro-batch on one GPU of a layer and of the output layer
 * (forward, backward, recompute); fills out->t_layer, t_head, gemm_eff
 * and the parts. b: micro-batch size; t, cp, ep, etp: the mesh. */
void p3d_compute_times(const p3d_gpu_perf *g, double peak_tflops, const p3d_model *md, const p3d_model_counts *mc,
                       int b, int t, int cp, int ep, int etp, int recompute, int w, p3d_cost *out);

/* ------------------------------------------------------------------------ */
/* Plan: search tp/cp/pp/dp/micro-batching/interleaving layouts (plan*.c,        */
/* docs/plan.md). Link classes are derived from the cluster's shape, not     */
/* from running a policy.                                                    */
/* ------------------------------------------------------------------------ */

#define P3D_PLAN_ZERO_DEFAULT (-1) /* ZeRO-1 when dp > 1, else 0 */
#define P3D_PLAN_ZERO_SEARCH (-2)  /* try stages 0..3 */

enum {
    P3D_PLAN_REJ_MEMORY = 0,
    P3D_PLAN_REJ_NVLINK,
    P3D_PLAN_REJ_BATCH,
    P3D_PLAN_REJ_HEADS,
    P3D_PLAN_REJ_LAYERS,
    P3D_PLAN_REJ_HEADROOM,
    P3D_PLAN_REJ_SEQ,
    P3D_PLAN_NREJ
};

/* Sequences at least this long make plan search cp (context parallelism)
 * when --cp does not pin it. */
#define P3D_PLAN_CP_MIN_SEQ 16384

/* What the user fixed; 0 = search it. */
typedef struct p3d_plan_pins {
    int tp, pp, cp, ep, micro_batch, virtual_stages;
    int etp;
} p3d_plan_pins;

typedef struct p3d_plan_row {
    int tp, pp, dp, micro_batch, micro_batches, zero;
    int cp, virtual_stages;
    int ep, etp, edp; /* expert grid (1, tp, dp for a dense model) */
    p3d_cost cost;
    /* placed = 1 (set by `par3drun plan`, which can run policies): cost is
     * the dry run's own estimate of the placement `policy` makes of this
     * row, the one its run line gives; its checks' error and warning
     * counts and the warning codes (comma-separated). placed = 0: cost is
     * plan's own, from link classes derived from the cluster's shape. */
    int placed, nerrors, nwarnings;
    char policy[32];
    char warned[96];
} p3d_plan_row;

typedef struct p3d_plan {
    p3d_job job;                /* the request (mesh sizes unused) */
    int zero_mode;              /* 0..3 or P3D_PLAN_ZERO_* */
    const char *cluster_source; /* borrowed from the cluster */
    int nodes, gpus_per_node, gpus, nracks, nodes_per_rack;
    int nvl_gpus;                     /* GPUs per NVLink domain inside a node */
    int mnnvl_gpus;                   /* GPUs per multi-node NVLink domain, 0 none */
    p3d_link intra_link;              /* class inside a node beyond its NVLink domain */
    double link_gbps[P3D_LINK_COUNT]; /* as the cost model uses them */
    size_t searched;                  /* mesh shapes (tp, pp, dp) considered */
    size_t rejected[P3D_PLAN_NREJ];   /* shapes dropped, by the first rule they break */
    size_t variants;                  /* (b, m, ZeRO) variants evaluated for the rest */
    p3d_plan_row *rows;               /* variants that fit, best (fastest) first */
    size_t nrows;
    int has_misfit; /* closest layout that did not fit memory */
    p3d_plan_row misfit;
    int cluster_is_topology;     /* cluster_source is one node's --topology */
    p3d_plan_pins pins;          /* as asked */
    int racks_unknown;           /* the cluster names no racks: one assumed */
    int searched_cp, searched_v; /* 1: cp / virtual stages were searched */
    int searched_ep;             /* 1: ep (and etp) were searched (MoE model) */
    size_t headroom_variants;    /* variants that fit the GPU but not with the reserve */
    int has_headroom_drop;       /* the fastest of them */
    p3d_plan_row headroom_drop;
    /* The bundled policies placed on the best layout (filled by a caller
     * that can run policies: `par3drun plan`). best_policy: the one whose
     * dry-run estimate is fastest (it goes into the run line unless it is
     * the default, megatron); policy_note: what that comparison found,
     * with the reason when megatron is not the fastest. Empty: not run. */
    char best_policy[64];
    char policy_note[1024];
    /* --exclude (borrowed) and --spares as asked: the plan is for the
     * nodes left, and the run line repeats both (set by `par3drun plan`) */
    const char *exclude;
    int spares;
} p3d_plan;

/* Searches every layout using all of the cluster's GPUs. job needs a model
 * and a global batch; micro_batch_size / micro_batches fix b / m when set.
 * Caller frees with p3d_plan_free(). */
int p3d_plan_search(const p3d_cluster *c, const p3d_job *job, int zero_mode, p3d_plan **out, char **err);
/* The same with some dimensions pinned (pins NULL: none). */
int p3d_plan_search_pinned(const p3d_cluster *c, const p3d_job *job, int zero_mode, const p3d_plan_pins *pins,
                           p3d_plan **out, char **err);
void p3d_plan_free(p3d_plan *pl);
/* Places rows: place(ctx, row, err) for the best variant of each of the
 * first k mesh shapes; it fills row->placed (with row->cost the dry run's
 * estimate of that placement, and policy / nerrors / nwarnings / warned),
 * leaves row->placed 0 when no placement could be made, and returns -1
 * only for a failure that ends the plan (*err set). The rows are then
 * ordered: the placed ones without an error-level check by their placed
 * estimate (ties as the search breaks them), then the placed ones with
 * one, then every other row in its former order. So the first row is the
 * fastest placement the run line can give (docs/plan.md). */
typedef int (*p3d_plan_place_fn)(void *ctx, p3d_plan_row *row, char **err);
int p3d_plan_place(p3d_plan *pl, int k, p3d_plan_place_fn place, void *ctx, char **err);
/* Reports of the best `top` layouts with why each wins or loses; caller frees. */
char *p3d_plan_text(const p3d_plan *pl, int top);
char *p3d_plan_json(const p3d_plan *pl, int top);
/* Why no layout was kept (pl->nrows == 0): the memory verdict with the GPU
 * size when some shape passed the hard rules, else the rules every shape
 * broke, with counts. One sentence without trailing newline; malloc'd. */
char *p3d_plan_none_reason(const p3d_plan *pl);

#ifdef __cplusplus
}
#endif
#endif
