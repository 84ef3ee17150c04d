/*
 * p3d/job.h — the job: mesh and rank arithmetic, model (placement/policy/mesh.c, placement/cost/).
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
    int mem_reserve_set;    /* 1: --mem-reserve given (mem_reserve_bytes, may be 0) */
    double mem_reserve_bytes; /* headroom kept free per GPU; unset: cost model default */
} p3d_job;

void p3d_job_init(p3d_job *j); /* defaults: all dims 1, default order */

/* When job->mesh.size[P3D_DIM_DP] is 0 ("what is left"), sets it to
 * gpus / (tp*cp*ep*pp); fails with a clear message when that does not divide.
 * When dp was given, checks world <= gpus. */
int p3d_job_resolve_dp(p3d_job *job, size_t gpus, char **err);

/* Model presets ("gpt3-175b", "llama2-70b", "llama3-8b", ...): fills *m.
 * Fails naming the known presets. (placement/cost/cost_model.c) */
int p3d_model_preset(const char *name, p3d_model *m, char **err);

#ifdef __cplusplus
}
#endif
#endif
