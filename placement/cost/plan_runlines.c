/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan_runlines.c — the chosen layout as the lines users paste
 * (docs/plan.md, "Run lines"): the model in Megatron-LM's argument names
 * (which par3drun takes too), Megatron-LM's arguments for the layout, and
 * torchtitan's (DeviceMesh) options. Sequence parallelism is written out,
 * never implied.
 */
#include "plan_report.h"

#include <string.h>

void p3d_model_megatron_args(p3d_sb *b, const p3d_model *m)
{
    p3d_sb_printf(b, "--num-layers %d --hidden-size %d --ffn-hidden-size %d --num-attention-heads %d", m->layers,
                  m->hidden, p3d_model_ffn(m), m->heads);
    if (m->query_groups > 0 && m->query_groups != m->heads)
        p3d_sb_printf(b, " --group-query-attention --num-query-groups %d", m->query_groups);
    if (m->kv_channels > 0)
        p3d_sb_printf(b, " --kv-channels %d", m->kv_channels);
    if (m->swiglu)
        p3d_sb_puts(b, " --swiglu");
    if (m->untied)
        p3d_sb_puts(b, " --untie-embeddings-and-output-weights");
    if (m->rmsnorm)
        p3d_sb_puts(b, " --normalization RMSNorm");
    p3d_sb_printf(b, " --seq-length %d", m->seq_len);
    if (m->vocab > 0)
        p3d_sb_printf(b, " --padded-vocab-size %d", m->vocab);
    if (m->experts > 0) {
        p3d_sb_printf(b, " --num-experts %d --moe-router-topk %d --moe-ffn-hidden-size %d", m->experts, m->top_k,
                      m->moe_ffn);
        int shared = m->moe_shared_ffn > 0 ? m->moe_shared_ffn : m->shared_experts * m->moe_ffn;
        if (shared > 0)
            p3d_sb_printf(b, " --moe-shared-expert-intermediate-size %d", shared);
    }
}

/* Megatron-LM (pretrain_gpt.py) arguments for row r. */
void p3d_plan_megatron_line(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *r)
{
    const p3d_job *j = &pl->job;
    const p3d_model *m = &j->model;
    p3d_sb_printf(b, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d", r->tp, r->pp);
    if (r->virtual_stages > 1)
        p3d_sb_printf(b, " --num-layers-per-virtual-pipeline-stage %d",
                      m->layers / (r->pp * r->virtual_stages));
    if (r->cp > 1)
        p3d_sb_printf(b, " --context-parallel-size %d", r->cp);
    if (m->experts > 0)
        p3d_sb_printf(b, " --expert-model-parallel-size %d --expert-tensor-parallel-size %d", r->ep, r->etp);
    if (r->tp > 1 && !j->no_seq_parallel)
        p3d_sb_puts(b, " --sequence-parallel");
    if (r->zero >= 1)
        p3d_sb_puts(b, " --use-distributed-optimizer");
    p3d_sb_printf(b, " --micro-batch-size %d --global-batch-size %d", r->micro_batch, j->global_batch);
    if (j->recompute == 1)
        p3d_sb_puts(b, " --recompute-granularity selective");
    else if (j->recompute >= 2)
        p3d_sb_puts(b, " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
    p3d_sb_puts(b, j->dtype_bytes == 4 ? "" : " --bf16");
    if (j->grad_bf16)
        p3d_sb_puts(b, " --grad-reduce-in-bf16");
    p3d_sb_putc(b, ' ');
    p3d_model_megatron_args(b, m);
}

/* torchtitan's options (its DeviceMesh dimensions) for row r. torchtitan
 * shards optimizer state only with FSDP (ZeRO-3); ZeRO-0..2 become plain
 * replication over dp. */
void p3d_plan_torchtitan_line(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *r)
{
    const p3d_job *j = &pl->job;
    p3d_sb_printf(b, "--parallelism.tensor_parallel_degree %d --parallelism.pipeline_parallel_degree %d", r->tp,
                  r->pp);
    if (r->zero >= 3)
        p3d_sb_printf(b, " --parallelism.data_parallel_shard_degree %d", r->dp);
    else
        p3d_sb_printf(b, " --parallelism.data_parallel_replicate_degree %d --parallelism.data_parallel_shard_degree 1",
                      r->dp);
    if (r->cp > 1)
        p3d_sb_printf(b, " --parallelism.context_parallel_degree %d", r->cp);
    if (r->ep > 1)
        p3d_sb_printf(b, " --parallelism.expert_parallel_degree %d", r->ep);
    if (r->pp > 1)
        p3d_sb_printf(b, " --parallelism.pipeline_parallel_schedule %s --parallelism.pipeline_parallel_microbatch_size %d",
                      r->virtual_stages > 1 ? "Interleaved1F1B" : "1F1B", r->micro_batch);
    p3d_sb_printf(b, " --training.local_batch_size %d --training.global_batch_size %d --training.seq_len %d",
                  j->global_batch / (r->dp > 0 ? r->dp : 1), j->global_batch, j->model.seq_len);
    p3d_sb_printf(b, " --activation_checkpoint.mode %s",
                  j->recompute >= 2 ? "full" : j->recompute == 1 ? "selective" : "none");
}
