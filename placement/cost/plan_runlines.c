/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan_runlines.c — the chosen layout as the lines users paste
 * (docs/plan.md, "Run lines"): the model in Megatron-LM's argument names
 * (which par3drun takes too), Megatron-LM's arguments for the layout, and
 * torchtitan's (DeviceMesh) options. Sequence parallelism is written out,
 * never implied.
 */
#include "plan_report.h"

#include <math.h>
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
        /* shared experts x their size can pass an int (a config's figures are bounded one by one) */
        long long shared = m->moe_shared_ffn > 0 ? m->moe_shared_ffn : (long long)m->shared_experts * m->moe_ffn;
        if (shared > 0)
            p3d_sb_printf(b, " --moe-shared-expert-intermediate-size %lld", shared);
    }
}

/* Megatron-LM (pretrain_gpt.py) arguments for row r. */
void p3d_plan_megatron_line(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *r)
{
    const p3d_job *j = &pl->job;
    const p3d_model *m = &j->model;
    p3d_sb_printf(b, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d", r->tp, r->pp);
    if (r->virtual_stages > 1)
        p3d_sb_printf(b, " --num-layers-per-virtual-pipeline-stage %d", m->layers / (r->pp * r->virtual_stages));
    if (r->cp > 1)
        p3d_sb_printf(b, " --context-parallel-size %d", r->cp);
    if (m->experts > 0)
        p3d_sb_printf(b, " --expert-model-parallel-size %d --expert-tensor-parallel-size %d", r->ep, r->etp);
    if (r->tp > 1 && !j->no_seq_parallel)
        p3d_sb_puts(b, " --sequence-parallel");
    if (r->zero >= 1)
        p3d_sb_puts(b, " --use-distributed-optimizer");
    if (j->first_stage_layers)
        p3d_sb_printf(b, " --decoder-first-pipeline-num-layers %d", j->first_stage_layers);
    if (j->last_stage_layers)
        p3d_sb_printf(b, " --decoder-last-pipeline-num-layers %d", j->last_stage_layers);
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
    p3d_sb_printf(b, "--parallelism.tensor_parallel_degree %d --parallelism.pipeline_parallel_degree %d", r->tp, r->pp);
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
        p3d_sb_printf(b,
                      " --parallelism.pipeline_parallel_schedule %s --parallelism.pipeline_parallel_microbatch_size %d",
                      r->virtual_stages > 1 ? "Interleaved1F1B" : "1F1B", r->micro_batch);
    p3d_sb_printf(b, " --training.local_batch_size %d --training.global_batch_size %d --training.seq_len %d",
                  j->global_batch / (r->dp > 0 ? r->dp : 1), j->global_batch, j->model.seq_len);
    p3d_sb_printf(b, " --activation_checkpoint.mode %s",
                  j->recompute >= 2   ? "full"
                  : j->recompute == 1 ? "selective"
                                      : "none");
}

/* The fastest kept variant of best's shape (same tp, cp, pp, dp, ep, etp, v
 * and ZeRO) with micro-batch size bsz, or NULL. */
static const p3d_plan_row *variant_b(const p3d_plan *pl, const p3d_plan_row *best, int bsz)
{
    const p3d_plan_row *w = NULL;
    for (size_t i = 0; i < pl->nrows; i++) {
        const p3d_plan_row *r = &pl->rows[i];
        if (r->micro_batch != bsz || r->tp != best->tp || r->cp != best->cp || r->pp != best->pp || r->dp != best->dp ||
            r->ep != best->ep || r->etp != best->etp || r->virtual_stages != best->virtual_stages ||
            r->zero != best->zero)
            continue;
        if (!w || r->cost.step_time < w->cost.step_time)
            w = r;
    }
    return w;
}

void p3d_plan_micro_batch_note(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *best)
{
    const p3d_cost *c = &best->cost;
    if (pl->pins.micro_batch) {
        p3d_sb_printf(b, "micro-batch b=%d (--micro-batch)", best->micro_batch);
        return;
    }
    p3d_sb_printf(b, "micro-batch b=%d (m=%d) wins for this layout", best->micro_batch, best->micro_batches);
    const int cand[2] = {best->micro_batch / 2, best->micro_batch * 2};
    for (int k = 0; k < 2; k++) {
        if (cand[k] < 1)
            continue;
        const p3d_plan_row *o = variant_b(pl, best, cand[k]);
        if (!o) {
            p3d_sb_printf(b, "; b=%d is not among the layouts that fit (memory%s)", cand[k],
                          best->virtual_stages > 1 ? ", or m not a multiple of pp when interleaved" : "");
            continue;
        }
        const p3d_cost *x = &o->cost;
        p3d_sb_printf(b,
                      "; b=%d: %.2f s (%+.1f%%): GEMMs at %.0f%% of peak vs %.0f%%, bubble %.1f%% vs %.1f%%, "
                      "activations %.1f vs %.1f GB",
                      cand[k], x->step_time, c->step_time > 0 ? 100 * (x->step_time / c->step_time - 1) : 0,
                      100 * x->gemm_eff, 100 * c->gemm_eff, 100 * x->bubble, 100 * c->bubble, x->mem_act / 1e9,
                      c->mem_act / 1e9);
    }
}

/* Memory per GPU of stage k (0 first, 1 middle, 2 last) of c with
 * `layers` layers instead of c's: one layer's states and the activations
 * of the micro-batches that stage holds (1F1B) per layer moved. */
static double moved_mem(const p3d_cost *c, int k, int layers, int p, int m)
{
    int held = k == 0 ? (m < p ? m : p) : k == 1 ? (m < p - 1 ? m : p - 1) : 1;
    return c->stage_mem[k] + (layers - c->stage_layers[k]) * (c->mem_layer_states + c->mem_layer_act * held);
}

int p3d_plan_uneven(const p3d_plan *pl, const p3d_plan_row *best, p3d_plan_split *out)
{
    const p3d_cost *c = &best->cost;
    const int L = pl->job.model.layers, p = best->pp, m = best->micro_batches;
    memset(out, 0, sizeof *out);
    if (p < 2 || best->virtual_stages > 1 || c->t_layer <= 0)
        return 0;
    const int *now = c->stage_layers;
    double t_now = now[2] * c->t_layer + c->t_head, m_now = 0, limit = c->gpu_mem - c->mem_reserve;
    for (int k = 0; k < 2; k++)
        if (now[k] * c->t_layer > t_now)
            t_now = now[k] * c->t_layer;
    for (int k = 0; k < 3; k++)
        if ((k != 1 || p > 2) && c->stage_mem[k] > m_now)
            m_now = c->stage_mem[k];
    double t_keep = t_now, m_keep = m_now;
    /* every split Megatron accepts: F layers first, N last (0 = even share) */
    for (int f = 0; f <= L; f++)
        for (int n = 0; n <= L; n++) {
            int lay[3];
            if ((!f && !n) || p3d_cost_stage_layers(L, p, 1, f, n, lay, NULL) < 0)
                continue;
            double t = lay[2] * c->t_layer + c->t_head, mem = 0;
            for (int k = 0; k < 2; k++)
                if (lay[k] * c->t_layer > t)
                    t = lay[k] * c->t_layer;
            for (int k = 0; k < 3; k++) {
                double x = (k != 1 || p > 2) ? moved_mem(c, k, lay[k], p, m) : 0;
                if (x > mem)
                    mem = x;
            }
            /* faster, or as fast (0.05%) and lighter; and it must fit */
            int better = t < t_keep * 0.9995 || (t <= t_keep * 1.0005 && mem < m_keep);
            if (mem <= limit && better) {
                t_keep = t, m_keep = mem;
                out->first = f, out->last = n;
            }
        }
    if (!out->first && !out->last)
        return 0;
    out->saves = (t_now - t_keep) * m * (1.0 + c->bubble_overhead);
    out->mem_now = m_now;
    out->mem_new = m_keep;
    /* worth a line: 0.5% of the step, or 2% of the memory without losing time */
    return out->saves > 0.005 * c->step_time || (out->saves >= 0 && m_now - m_keep > 0.02 * m_now);
}
