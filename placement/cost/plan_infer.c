/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan_infer.c — `par3drun plan --inference`: where to serve a model
 * (docs/plan.md, "Inference"). A replica is tp GPUs inside an NVLink domain,
 * times pp nodes only when it does not fit one domain; as many replicas as
 * the GPUs allow. Memory = bf16 weights + the KV cache of the sequences in
 * flight; time to first token from the prompt's FLOPs at the GEMM
 * efficiency of its shape, time per output token from the bytes each step
 * reads (weights and KV cache) at the GPU's memory bandwidth. Estimates,
 * like the training figures.
 */
#include "plan_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 32
#define HBM_SHARE 0.8        /* of the data sheet's bandwidth a decode step reaches */
#define TP_HOP_LATENCY 8e-6  /* per all-reduce of a decode step inside a node (NCCL, small messages) */
#define PP_HOP_LATENCY 10e-6 /* per stage boundary across nodes */

typedef struct {
    int tp, pp, replicas, fits;
    double weights, kv, total, ttft, tpot, tok_s_gpu;
} infer_row;

/* Bytes of K and V cache per token of a sequence (bf16): K and V of every
 * KV head of every layer; multi-latent attention keeps its compressed
 * latent and rope key instead. */
static double kv_per_token(const p3d_model *m)
{
    if (m->mla)
        return 2.0 * m->layers * ((double)m->kv_lora_rank + m->qk_rope_dim);
    double kv = m->kv_channels > 0 ? m->kv_channels : (double)m->hidden / m->heads;
    double g = m->query_groups > 0 ? m->query_groups : m->heads;
    return 2.0 * 2.0 * m->layers * g * kv;
}

static void eval_row(infer_row *r, const p3d_model *m, const p3d_model_counts *mc, const p3d_gpu_info *g,
                     const p3d_infer_opts *io, int gpus)
{
    const int n = r->tp * r->pp;
    const double kvt = kv_per_token(m), g_heads = m->query_groups > 0 ? m->query_groups : m->heads;
    /* KV heads split over tp; with more tp ranks than KV heads they repeat */
    double kv_split = m->mla ? 1.0 : (r->tp <= g_heads ? r->tp : g_heads);
    r->weights = 2.0 * m->params / n;
    r->kv = kvt * io->context * (double)io->batch / kv_split / r->pp;
    r->total = r->weights + r->kv;
    r->fits = r->total <= g->mem - g->reserve;
    r->replicas = gpus / n;
    const double peak = g->peak_tflops * 1e12, hbm = g->perf.hbm_tbps * 1e12 * HBM_SHARE;
    /* time to first token: one request's prompt, through the stages one
     * after the other, each on its tp GPUs */
    double P = io->prompt, h = m->hidden;
    /* the layers' matmuls for every prompt token, causal attention
     * (half of 4 P^2 h per layer), the logits of the last token */
    double flops = 2.0 * mc->matmul * P + 2.0 * m->layers * P * P * h + 2.0 * mc->embedding;
    double eff = p3d_gemm_eff(&g->perf, P, h / r->tp, h);
    r->ttft = flops / (r->tp * peak * eff) + r->pp * r->weights / hbm;
    /* time per output token: every step reads the GPU's weights (the
     * routed experts a step touches: all of them once the batch is large)
     * and the KV cache so far (on average half the output on top of the
     * prompt); the stages run one after the other */
    double ctx = io->prompt + (io->context - io->prompt) / 2.0;
    double read = r->weights + kvt * ctx * io->batch / kv_split / r->pp;
    double step_flops = 2.0 * (mc->matmul + mc->embedding) * io->batch / n;
    double stage = fmax(read / hbm, step_flops / (peak * p3d_gemm_eff(&g->perf, io->batch, h / r->tp, h)));
    if (r->tp > 1)
        stage += 2.0 * m->layers / r->pp * TP_HOP_LATENCY;
    r->tpot = r->pp * stage + (r->pp - 1) * PP_HOP_LATENCY;
    r->tok_s_gpu = io->batch / r->tpot / n;
}

/* Candidate replicas: tp a power of two inside the NVLink domain, pp only
 * with tp filling the domain (a replica spills over nodes only when it must). */
static size_t candidates(infer_row *rows, const p3d_plan *shape, const p3d_model *m)
{
    size_t n = 0;
    int dom = shape->nvl_gpus < shape->gpus_per_node ? shape->nvl_gpus : shape->gpus_per_node;
    if (shape->mnnvl_gpus > dom)
        dom = shape->mnnvl_gpus;
    for (int tp = 1; tp <= dom && n < MAX_ROWS; tp *= 2) {
        if (m->heads % tp || shape->gpus % tp)
            continue;
        rows[n++] = (infer_row){.tp = tp, .pp = 1};
        if (tp * 2 > dom)
            for (int pp = 2; tp * pp <= shape->gpus && n < MAX_ROWS; pp++)
                if (shape->gpus % (tp * pp) == 0 && m->layers >= pp)
                    rows[n++] = (infer_row){.tp = tp, .pp = pp};
    }
    return n;
}

static int row_cmp(const void *a, const void *b)
{
    const infer_row *x = a, *y = b;
    if (x->fits != y->fits)
        return y->fits - x->fits;
    if (x->tok_s_gpu != y->tok_s_gpu)
        return x->tok_s_gpu > y->tok_s_gpu ? -1 : 1;
    return x->tp * x->pp - y->tp * y->pp;
}

static void text_report(p3d_sb *b, const p3d_plan *shape, const p3d_model *m, const p3d_gpu_info *g,
                        const p3d_infer_opts *io, const infer_row *rows, size_t n)
{
    const double kvt = kv_per_token(m);
    p3d_sb_puts(b, "par3drun plan --inference: serving estimates (docs/plan.md, \"Inference\"), not measurements\n");
    p3d_sb_printf(b, "model    %s: %.1fB params, %d layers, hidden %d, %d heads, %d KV heads\n", m->name,
                  m->params / 1e9, m->layers, m->hidden, m->heads, m->query_groups > 0 ? m->query_groups : m->heads);
    p3d_sb_printf(b,
                  "cluster  %s: %d node%s x %d GPUs = %d GPUs, NVLink domain %d GPUs; %s, %.1f GB, %.1f GB kept free\n",
                  shape->cluster_source ? shape->cluster_source : "(cluster)", shape->nodes,
                  shape->nodes == 1 ? "" : "s", shape->gpus_per_node, shape->gpus,
                  shape->mnnvl_gpus > shape->nvl_gpus ? shape->mnnvl_gpus : shape->nvl_gpus, g->name, g->mem / 1e9,
                  g->reserve / 1e9);
    p3d_sb_printf(b,
                  "serving  %d sequences in flight per replica, context %d tokens (prompt %d); bf16 weights "
                  "%.1f GB, KV cache %.0f KB per token = %.1f GB per replica\n",
                  io->batch, io->context, io->prompt, 2.0 * m->params / 1e9, kvt / 1e3,
                  kvt * io->context * io->batch / 1e9);
    p3d_sb_puts(b, "\n #  tp  pp  replicas  mem/GPU GB  fits   TTFT ms  TPOT ms  tok/s/GPU\n");
    for (size_t i = 0; i < n && i < 6; i++) {
        const infer_row *r = &rows[i];
        p3d_sb_printf(b, "%2zu %3d %3d %9d %7.1f/%-4.0f %-5s %8.0f %8.1f %10.0f\n", i + 1, r->tp, r->pp, r->replicas,
                      r->total / 1e9, g->mem / 1e9, r->fits ? "yes" : "no", 1e3 * r->ttft, 1e3 * r->tpot, r->tok_s_gpu);
    }
    if (!rows[0].fits) {
        p3d_sb_puts(b, "\nno replica fits: give more GPUs per replica's memory (more nodes), a shorter --context-len "
                       "or a smaller --serve-batch\n");
        return;
    }
    const infer_row *r = &rows[0];
    p3d_sb_printf(b, "\nbest     tp=%d pp=%d x %d replica%s: ", r->tp, r->pp, r->replicas, r->replicas == 1 ? "" : "s");
    if (r->pp > 1)
        p3d_sb_printf(b, "pp=%d across nodes because %.1f GB per GPU would not fit one NVLink domain of %d; ", r->pp,
                      (r->weights * r->pp + r->kv * r->pp) / 1e9, r->tp);
    else
        p3d_sb_printf(b, "tp inside one NVLink domain, no pp (a replica fits %d GPU%s); ", r->tp,
                      r->tp == 1 ? "" : "s");
    p3d_sb_printf(b, "the most tokens/s per GPU (%.0f) of the layouts that fit", r->tok_s_gpu);
    for (size_t i = 1; i < n; i++)
        if (rows[i].fits && rows[i].tpot < r->tpot) {
            p3d_sb_printf(b, "; for latency tp=%d pp=%d gives %.1f ms per token at %.0f tokens/s per GPU", rows[i].tp,
                          rows[i].pp, 1e3 * rows[i].tpot, rows[i].tok_s_gpu);
            break;
        }
    p3d_sb_puts(b, ".\n");
}

static void json_report(p3d_sb *b, const p3d_model *m, const p3d_gpu_info *g, const p3d_infer_opts *io,
                        const infer_row *rows, size_t n)
{
    p3d_sb_puts(b, "{\"estimate\":true,\"inference\":true,\"model\":");
    p3d_sb_json_str(b, m->name);
    p3d_sb_printf(b, ",\"context\":%d,\"prompt\":%d,\"batch\":%d,\"gpu\":", io->context, io->prompt, io->batch);
    p3d_sb_json_str(b, g->name);
    p3d_sb_puts(b, ",\"gpu_mem\":");
    p3d_sb_json_num(b, g->mem);
    p3d_sb_puts(b, ",\"kv_bytes_per_token\":");
    p3d_sb_json_num(b, kv_per_token(m));
    p3d_sb_puts(b, ",\"layouts\":[");
    for (size_t i = 0; i < n; i++) {
        const infer_row *r = &rows[i];
        p3d_sb_printf(b, "%s{\"rank\":%zu,\"tp\":%d,\"pp\":%d,\"replicas\":%d,\"fits\":%s,\"weights\":", i ? "," : "",
                      i + 1, r->tp, r->pp, r->replicas, r->fits ? "true" : "false");
        p3d_sb_json_num(b, r->weights);
        p3d_sb_puts(b, ",\"kv_cache\":");
        p3d_sb_json_num(b, r->kv);
        p3d_sb_puts(b, ",\"total\":");
        p3d_sb_json_num(b, r->total);
        p3d_sb_puts(b, ",\"ttft_seconds\":");
        p3d_sb_json_num(b, r->ttft);
        p3d_sb_puts(b, ",\"tpot_seconds\":");
        p3d_sb_json_num(b, r->tpot);
        p3d_sb_puts(b, ",\"tokens_per_second_per_gpu\":");
        p3d_sb_json_num(b, r->tok_s_gpu);
        p3d_sb_putc(b, '}');
    }
    p3d_sb_puts(b, "]}\n");
}

/* The serving figures with their defaults: the context --seq-len, the
 * prompt half of it, 32 sequences. */
static int infer_defaults(const p3d_model *m, const p3d_infer_opts *io, p3d_infer_opts *o, char **err)
{
    *o = *io;
    if (o->context <= 0)
        o->context = m->seq_len;
    if (o->prompt <= 0)
        o->prompt = o->context / 2 > 0 ? o->context / 2 : 1;
    if (o->batch <= 0)
        o->batch = 32;
    if (o->prompt > o->context)
        return p3d_err(err, "--prompt-len %d is longer than --context-len %d", o->prompt, o->context);
    return 0;
}

int p3d_infer_layout(const p3d_cluster *c, const p3d_job *job, int tp, int pp, int gpus, p3d_infer_cost *out,
                     char **err)
{
    const p3d_model *m = &job->model;
    p3d_model_counts mc;
    p3d_infer_opts o;
    memset(out, 0, sizeof *out);
    if (!job->has_model)
        return p3d_err(err, "--inference needs a model (--model, --model-config or Megatron's arguments)");
    if (tp < 1 || pp < 1 || gpus < tp * pp)
        return p3d_err(err, "--inference: tp=%d pp=%d needs %d GPUs, %d given", tp, pp, tp * pp, gpus);
    if (p3d_model_count(m, &mc, err) < 0 || infer_defaults(m, &job->serve, &o, err) < 0)
        return -1;
    p3d_gpu_info g;
    p3d_cost_gpu(c, job, &g);
    infer_row r = {.tp = tp, .pp = pp};
    eval_row(&r, m, &mc, &g, &o, gpus);
    *out = (p3d_infer_cost){.tp = tp,
                            .pp = pp,
                            .replicas = r.replicas,
                            .fits = r.fits,
                            .context = o.context,
                            .prompt = o.prompt,
                            .batch = o.batch,
                            .kv_per_token = kv_per_token(m),
                            .weights = r.weights,
                            .kv = r.kv,
                            .total = r.total,
                            .gpu_mem = g.mem,
                            .reserve = g.reserve,
                            .ttft = r.ttft,
                            .tpot = r.tpot,
                            .tok_s_gpu = r.tok_s_gpu,
                            .gpu_name = g.name};
    return 0;
}

void p3d_infer_json(p3d_sb *b, const p3d_infer_cost *k)
{
    p3d_sb_printf(b, "{\"tp\":%d,\"pp\":%d,\"replicas\":%d,\"fits\":%s,\"context\":%d,\"prompt\":%d,\"batch\":%d",
                  k->tp, k->pp, k->replicas, k->fits ? "true" : "false", k->context, k->prompt, k->batch);
    static const char *const names[] = {"kv_bytes_per_token",
                                        "weights",
                                        "kv_cache",
                                        "total",
                                        "gpu_mem",
                                        "reserve",
                                        "ttft_seconds",
                                        "tpot_seconds",
                                        "tokens_per_second_per_gpu"};
    const double vals[] = {k->kv_per_token, k->weights, k->kv,   k->total,    k->gpu_mem,
                           k->reserve,      k->ttft,    k->tpot, k->tok_s_gpu};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        p3d_sb_printf(b, ",\"%s\":", names[i]);
        p3d_sb_json_num(b, vals[i]);
    }
    p3d_sb_puts(b, ",\"gpu\":");
    p3d_sb_json_str(b, k->gpu_name ? k->gpu_name : "H100");
    p3d_sb_putc(b, '}');
}

char *p3d_infer_report(const p3d_cluster *c, const p3d_job *job, const p3d_infer_opts *io, int json, int *fits,
                       char **err)
{
    p3d_plan shape;
    memset(&shape, 0, sizeof shape);
    *fits = 0;
    const p3d_model *m = &job->model;
    p3d_model_counts mc;
    if (p3d_model_count(m, &mc, err) < 0 || p3d_plan_cluster_shape(c, &shape, err) < 0)
        return NULL;
    p3d_infer_opts o;
    if (infer_defaults(m, io, &o, err) < 0)
        return NULL;
    p3d_gpu_info g;
    p3d_cost_gpu(c, job, &g);
    infer_row rows[MAX_ROWS];
    size_t n = candidates(rows, &shape, m);
    if (n == 0) {
        p3d_err(err, "plan --inference: no tp divides the model's %d heads and the %d GPUs", m->heads, shape.gpus);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        eval_row(&rows[i], m, &mc, &g, &o, shape.gpus);
    /* as many replicas as the GPUs allow: the smallest replica that fits,
     * then the most tokens/s per GPU among replicas of that size */
    qsort(rows, n, sizeof rows[0], row_cmp);
    int smallest = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].fits && (!smallest || rows[i].tp * rows[i].pp < smallest))
            smallest = rows[i].tp * rows[i].pp;
    for (size_t k = 0; smallest && k < n; k++)
        if (rows[k].fits && rows[k].tp * rows[k].pp == smallest) {
            infer_row first = rows[k]; /* to the front, the others keep their order */
            memmove(&rows[1], &rows[0], k * sizeof rows[0]);
            rows[0] = first;
            break;
        }
    *fits = rows[0].fits;
    p3d_sb b = {0};
    if (json)
        json_report(&b, m, &g, &o, rows, n);
    else
        text_report(&b, &shape, m, &g, &o, rows, n);
    return p3d_sb_finish(&b);
}
