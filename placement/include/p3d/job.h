/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/job.h — the job: mesh and rank arithmetic, model (placement/mesh/mesh.c, placement/cost/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_JOB_H
#define P3D_JOB_H

#include "p3d/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Job, mesh and model                                                       */
/* ------------------------------------------------------------------------ */

/* Two grids share one order string (Megatron-LM's RankGenerator):
 *   dense (attention) grid  tp * cp * dp  * pp = world
 *   expert (MoE) grid       etp * ep * edp * pp = world
 * The expert grid takes the dense one's order with etp in tp's place, edp in
 * dp's place and cp of size 1; ep has size 1 in the dense grid. TP, CP, DP,
 * PP coordinates come from the dense grid, ETP, EP, EDP from the expert one
 * (PP is the same in both: a mesh whose pipelines differ is refused). */
enum { P3D_DIM_TP = 0, P3D_DIM_CP, P3D_DIM_EP, P3D_DIM_DP, P3D_DIM_PP, P3D_DIM_ETP, P3D_DIM_EDP, P3D_NDIMS };
/* The dimensions an order string names: tp, cp, ep, dp, pp. */
enum { P3D_NORDER = 5 };

/* "tp", "cp", "ep", "dp", "pp", "etp", "edp". */
const char *p3d_dim_name(int dim);

typedef struct p3d_mesh {
    /* tp cp ep dp pp as asked (>= 1); etp 0 = same as tp; edp is derived
     * (world / (etp*ep*pp)). p3d_mesh_resolve fills etp and edp in; the
     * functions below derive them the same way when they are still 0. */
    int size[P3D_NDIMS];
    /* order[0..P3D_NORDER-1]: the order string's dimensions, fastest-
     * varying first (dims left out appended); order[5], order[6] are ETP
     * and EDP, which take tp's and dp's place in the expert grid. */
    int order[P3D_NDIMS];
    char order_str[48]; /* the order string, lower-cased */
    /* Whose shape rules p3d_mesh_resolve applies (P3D_RULES_*): the
     * policy's declaration (`follows = "devicemesh"`), Megatron's when it
     * declares nothing. */
    int rules;
} p3d_mesh;

/* Shape rules. MEGATRON: what initialize_model_parallel refuses (below).
 * DEVICEMESH: what init_device_mesh refuses, i.e. nothing beyond sizes >= 1
 * and the order string naming every dimension of size > 1 (it is the
 * mesh_dim_names list); the expert grid exists only when EP is asked
 * (ep > 1 or etp != tp), and then only has to fit the world and keep the
 * dense pipeline groups (one pp dimension in both meshes). Every mesh
 * Megatron accepts, DeviceMesh accepts, with the same etp and edp. */
enum { P3D_RULES_MEGATRON = 0, P3D_RULES_DEVICEMESH = 1 };
/* "megatron", "devicemesh"; and back (-1 when unknown). */
const char *p3d_rules_name(int rules);
int p3d_rules_parse(const char *s);

/* Parses an order string ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", or any
 * permutation/subset, any case; missing dims are appended in default
 * order and must have size 1, which p3d_mesh_resolve checks). */
int p3d_mesh_set_order(p3d_mesh *m, const char *order, char **err);
/* Ranks in the mesh: tp*cp*dp*pp (the dense grid). -1 when too large. */
int p3d_mesh_world(const p3d_mesh *m);
/* Size of dim, etp and edp derived when not resolved yet. */
int p3d_mesh_size(const p3d_mesh *m, int dim);
/* Distance in ranks between neighbours along dim, in dim's grid. */
int p3d_mesh_stride(const p3d_mesh *m, int dim);
/* rank <-> coordinates: p3d_mesh_rank reads the dense coordinates (tp, cp,
 * dp, pp); p3d_mesh_coord fills all P3D_NDIMS. */
int p3d_mesh_rank(const p3d_mesh *m, const int coord[P3D_NDIMS]);
void p3d_mesh_coord(const p3d_mesh *m, int rank, int coord[P3D_NDIMS]);
/* Fills in etp (when 0) and edp, and refuses what m->rules refuses. Under
 * Megatron-LM's rules (initialize_model_parallel): a world the expert grid
 * does not divide, an order string leaving out a dimension of size > 1 in
 * either grid, an order that is not pp-last while pp > 1 and edp != dp,
 * dense and expert pipeline groups that differ. Under DeviceMesh's: see
 * P3D_RULES_DEVICEMESH. dp must be set. Idempotent. */
int p3d_mesh_resolve(p3d_mesh *m, char **err);
/* The same without refusing anything but sizes < 1 and a world too large:
 * etp and edp filled in, for callers that do not know the rules yet. */
int p3d_mesh_derive(p3d_mesh *m, char **err);

typedef struct p3d_model {
    char name[48];     /* preset name, "custom" or the --model-config file's name */
    double params;     /* parameter count P (all experts included): the
                             * architecture's own (p3d_model_finish) unless
                             * params_forced */
    int params_forced; /* 1: --params gave P; the layers' share is scaled to it */
    double published;  /* preset: the published total, 0 unknown (tests check P against it) */
    int layers, hidden, heads, seq_len, vocab;
    /* Mixture of experts (experts == 0: a dense model). Every MoE layer has
     * `experts` routed experts of moe_ffn each of which top_k serve each
     * token, plus shared experts that serve every token (moe_shared_ffn
     * wide in all, or shared_experts x moe_ffn when moe_shared_ffn is 0);
     * the first dense_layers layers are dense (docs/cost-model.md,
     * "Mixture of experts"). */
    int experts, top_k, moe_ffn, shared_experts, dense_layers;
    /* Architecture, in Megatron-LM's terms (0 = Megatron's default):
     * ffn: --ffn-hidden-size of every dense layer (4h; 8h/3 rounded down
     * to 64 with swiglu); query_groups: --num-query-groups (heads);
     * kv_channels: per-head size (hidden/heads); swiglu: gated MLP of three
     * matrices; untied: --untie-embeddings-and-output-weights; rmsnorm:
     * RMSNorm (h weights per norm) instead of LayerNorm (2h). */
    int ffn, query_groups, kv_channels, swiglu, untied, rmsnorm;
    int moe_shared_ffn; /* --moe-shared-expert-intermediate-size */
    /* Multi-latent attention (DeepSeek-V2/V3; mla = 1): q_lora_rank 0 =
     * a full query projection */
    int mla, q_lora_rank, kv_lora_rank, qk_head_dim, qk_rope_dim, v_head_dim;
    const char *config; /* the --model-config path it came from (borrowed), or NULL */
} p3d_model;

/* Serving (plan --inference and the dry run with it; placement/cost/
 * plan_infer.c, docs/plan.md "Inference"): context tokens per sequence
 * (prompt + output), prompt tokens, sequences in flight per replica;
 * 0 = the default (--seq-len, half the context, 32). */
typedef struct p3d_infer_opts {
    int context, prompt, batch;
} p3d_infer_opts;

typedef struct p3d_job {
    p3d_mesh mesh;
    int micro_batches;    /* m, 0 = unknown */
    int micro_batch_size; /* b, 0 = unknown */
    int global_batch;     /* B, 0 = unknown */
    int virtual_stages;   /* v, 1 = plain 1F1B */
    /* Megatron's --decoder-first/last-pipeline-num-layers (0 = even
     * stages): the other stages share the rest of the layers evenly */
    int first_stage_layers, last_stage_layers;
    int dtype_bytes;     /* 2 for bf16/fp16 */
    int zero;            /* ZeRO stage 0..3 */
    int recompute;       /* 0 none, 1 selective, 2 full */
    int no_seq_parallel; /* 1: --no-sequence-parallel (default: on when tp > 1) */
    int grad_bf16;       /* 1: --grad-reduce-in-bf16 (main gradients 2 bytes, not 4) */
    int has_model;
    p3d_model model;
    double gpu_mem_bytes;     /* override, 0 = from topology/default */
    double tflops;            /* sustained TFLOP/s per GPU, 0 = default (cost model) */
    int mem_reserve_set;      /* 1: --mem-reserve given (mem_reserve_bytes, may be 0) */
    double mem_reserve_bytes; /* headroom kept free per GPU; unset: cost model default */
    int spares;               /* --spares K (job.spares in a policy) */
    /* the elastic range (p3d/elastic.h): --min-dp D (or what torchrun's
     * --nnodes MIN:MAX means in replicas), 0 = not elastic; and
     * --batch-tolerance in percent (0: a width's batch must be exact) */
    int min_dp;
    double batch_tol_pct;
    int inference;                       /* 1: --inference: the dry run costs serving, not training */
    p3d_infer_opts serve;                /* --context-len, --prompt-len, --serve-batch */
    const struct p3d_previous *previous; /* a replacement: the placement
                               before the node loss (job.previous), or NULL */
} p3d_job;

/* The placement a replacement starts from (docs/policies.md, "Replacing a
 * lost node"): per rank the node name and GPU it ran on, and the nodes
 * that were lost with their rack and multi-node NVLink domain (NULL:
 * none). Everything is borrowed. */
typedef struct p3d_previous {
    int world;
    const char *const *node; /* [world] */
    const int *gpu;          /* [world] */
    int restart;             /* the restart this placement is for */
    size_t nfailed;
    const char *const *failed; /* [nfailed] node names */
    const char *const *failed_rack;
    const char *const *failed_nvl;
} p3d_previous;

void p3d_job_init(p3d_job *j); /* defaults: all dims 1, default order */

/* When job->mesh.size[P3D_DIM_DP] is 0 ("what is left"), sets it to
 * gpus / (tp*cp*pp); fails with a clear message when that does not divide.
 * When dp was given, checks world <= gpus. Then p3d_mesh_derive: the
 * policy, not read yet, declares whose rules hold, and the policy run
 * applies them (p3d_mesh_resolve). */
int p3d_job_resolve_dp(p3d_job *job, size_t gpus, char **err);
/* The same, saying the ranks' slots by their name (unit: "GPU", or "CPU
 * slot" on nodes without GPUs) and, when some GPUs are held back as
 * --spares, how many (spare_gpus on spare_nodes), so that a "larger than"
 * message says where the rest went. */
int p3d_job_resolve_dp_on(p3d_job *job, size_t gpus, const char *unit, size_t spare_gpus, int spare_nodes, char **err);

/* Model presets ("gpt3-175b", "llama2-70b", "llama3-8b", ...): fills *m.
 * Fails naming the known presets. (placement/cost/cost_model.c) */
int p3d_model_preset(const char *name, p3d_model *m, char **err);
/* Checks the architecture's figures and sets params to the count they give
 * (unless params_forced). Fails naming the figure that is out of range.
 * (placement/cost/model_params.c) */
int p3d_model_finish(p3d_model *m, char **err);
/* Reads a HuggingFace config.json (Llama, Mistral/Mixtral, Qwen2/Qwen2-MoE,
 * DeepSeek-V2/V3 keys; docs/cost-model.md, "Describing a model") into *m
 * (finished). Hostile input: every number bounded, messages name the file
 * and the key. (placement/cost/model_config.c) */
int p3d_model_config_load(const char *path, p3d_model *m, char **err);

#ifdef __cplusplus
}
#endif
#endif
