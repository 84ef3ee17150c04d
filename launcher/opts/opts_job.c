/* SPDX-License-Identifier: BSD-3-Clause */
/* opts_job.c — turns the parsed options into a p3d_job (mesh, order, model). */
#include "opts.h"

#include <string.h>

/* Explicit figures (par3drun's or Megatron-LM's argument names) override
 * the preset's or the config's; without either they describe the whole
 * model. The parameter count follows from them (p3d_model_finish) unless
 * --params forces it. */
static int p3d_opts_model(const p3d_opts *o, p3d_job *job, char **err)
{
    p3d_model *md = &job->model;
    int any = o->params || o->layers || o->hidden || o->heads || o->seq_len || o->vocab || o->ffn || o->query_groups ||
              o->kv_channels || o->swiglu || o->untie || o->experts || o->topk || o->moe_ffn || o->moe_shared_ffn ||
              o->normalization;
    if (!any)
        return 0;
    if (!job->has_model) {
        strcpy(md->name, "custom");
        if (!o->layers || !o->hidden || !o->heads || !o->seq_len)
            return p3d_err(err, "a custom model needs --layers, --hidden, --heads and --seq-len (Megatron's "
                                "--num-layers --hidden-size --num-attention-heads --seq-length), or start from "
                                "a preset with --model or a config.json with --model-config");
    }
    if (o->params)
        md->params = o->params, md->params_forced = 1;
    if (o->layers)
        md->layers = o->layers;
    if (o->hidden)
        md->hidden = o->hidden;
    if (o->heads)
        md->heads = o->heads;
    if (o->seq_len)
        md->seq_len = o->seq_len;
    if (o->vocab)
        md->vocab = o->vocab;
    if (o->ffn)
        md->ffn = o->ffn;
    if (o->query_groups)
        md->query_groups = o->query_groups;
    if (o->kv_channels)
        md->kv_channels = o->kv_channels;
    if (o->swiglu)
        md->swiglu = 1;
    if (o->untie)
        md->untied = 1;
    if (o->normalization) {
        if (strcmp(o->normalization, "RMSNorm") && strcmp(o->normalization, "LayerNorm"))
            return p3d_err(err, "--normalization: expected RMSNorm or LayerNorm, got '%s'", o->normalization);
        md->rmsnorm = !strcmp(o->normalization, "RMSNorm");
    }
    if (o->experts)
        md->experts = o->experts;
    if (o->topk)
        md->top_k = o->topk;
    if (o->moe_ffn)
        md->moe_ffn = o->moe_ffn;
    if (o->moe_shared_ffn)
        md->moe_shared_ffn = o->moe_shared_ffn;
    if (md->experts > 0 && md->top_k == 0)
        md->top_k = md->experts < 2 ? md->experts : 2; /* Megatron's default top-k */
    if (md->experts > 0 && md->moe_ffn == 0)
        md->moe_ffn = p3d_model_ffn(md); /* Megatron: --moe-ffn-hidden-size defaults to the FFN size */
    job->has_model = 1;
    return p3d_model_finish(md, err);
}

int p3d_opts_job(const p3d_opts *o, p3d_job *job, char **err)
{
    p3d_job_init(job);
    p3d_mesh *m = &job->mesh;
    m->size[P3D_DIM_TP] = o->tp ? o->tp : 1;
    m->size[P3D_DIM_PP] = o->pp ? o->pp : 1;
    m->size[P3D_DIM_CP] = o->cp ? o->cp : 1;
    m->size[P3D_DIM_EP] = o->ep ? o->ep : 1;
    m->size[P3D_DIM_ETP] = o->etp; /* 0: same as tp (p3d_mesh_resolve) */
    m->size[P3D_DIM_DP] = o->dp;   /* 0: what is left, see p3d_job_resolve_dp */
    if (o->order && p3d_mesh_set_order(m, o->order, err) < 0)
        return -1;
    job->micro_batches = o->micro_batches;
    job->micro_batch_size = o->micro_batch;
    job->global_batch = o->global_batch;
    job->min_dp = o->min_dp;
    job->batch_tol_pct = o->batch_tolerance > 0 ? o->batch_tolerance : 0;
    job->virtual_stages = o->virtual_stages ? o->virtual_stages : 1;
    job->first_stage_layers = o->first_stage_layers;
    job->last_stage_layers = o->last_stage_layers;
    if (o->dtype) {
        if (!strcmp(o->dtype, "bf16") || !strcmp(o->dtype, "fp16"))
            job->dtype_bytes = 2;
        else if (!strcmp(o->dtype, "fp32"))
            job->dtype_bytes = 4;
        else
            return p3d_err(err, "--dtype: expected bf16, fp16 or fp32, got '%s'", o->dtype);
    }
    job->zero = o->zero < 0 ? 0 : o->zero;
    if (o->recompute) {
        if (!strcmp(o->recompute, "none"))
            job->recompute = 0;
        else if (!strcmp(o->recompute, "selective"))
            job->recompute = 1;
        else if (!strcmp(o->recompute, "full"))
            job->recompute = 2;
        else
            return p3d_err(err, "--recompute: expected none, selective or full, got '%s'", o->recompute);
    }
    job->gpu_mem_bytes = o->gpu_mem_gb * 1e9;
    if (o->mem_reserve_gb >= 0) {
        job->mem_reserve_set = 1;
        job->mem_reserve_bytes = o->mem_reserve_gb * 1e9;
    }
    job->tflops = o->tflops;
    job->no_seq_parallel = o->no_seq_parallel;
    job->grad_bf16 = o->grad_bf16;
    job->inference = o->inference;
    job->serve = (p3d_infer_opts){o->context_len, o->prompt_len, o->serve_batch};
    if (o->model && o->model_config)
        return p3d_err(err,
                       "--model %s and --model-config %s: give one of them (options such as "
                       "--seq-length then change what it says)",
                       o->model, o->model_config);
    if (o->model) {
        if (p3d_model_preset(o->model, &job->model, err) < 0)
            return -1;
        job->has_model = 1;
    }
    if (o->model_config) {
        if (p3d_model_config_load(o->model_config, &job->model, err) < 0)
            return -1;
        job->has_model = 1;
    }
    if (p3d_opts_model(o, job, err) < 0)
        return -1;
    const p3d_model *md = &job->model;
    if (job->has_model && md->seq_len <= 0)
        return p3d_err(err,
                       "%s: key \"max_position_embeddings\" missing: give the training sequence length "
                       "with --seq-length",
                       md->config ? md->config : "the model");
    /* expert parallelism splits the experts evenly (Megatron refuses the rest) */
    if (job->has_model && md->experts > 0 && o->ep > 0 && md->experts % o->ep)
        return p3d_err(err,
                       "--ep %d does not divide the %d experts of %s: every EP rank holds experts/ep of them "
                       "(choose a divisor of %d)",
                       o->ep, md->experts, md->name, md->experts);
    if (job->has_model && md->experts == 0 && o->ep > 1)
        return p3d_err(err,
                       "--ep %d: expert parallelism needs a mixture-of-experts model; %s is dense (MoE "
                       "presets: deepseek-v3, mixtral-8x22b)",
                       o->ep, md->name);
    return 0;
}
