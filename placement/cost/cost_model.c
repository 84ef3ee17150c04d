/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cost_model.c — model presets and the cost model: memory per GPU, traffic
 * per dimension, bubble, compute time, step time and MFU.
 *
 * Every figure is an estimate from a published closed-form formula
 * (docs/cost-model.md names each one and its source). Nothing here measures
 * anything; the point is to rank layouts and to make the cost of a bad
 * placement a number, not to predict a step time to the millisecond.
 */
#include "cost_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Link bandwidths                                                           */
/* ------------------------------------------------------------------------ */

/* Per-direction GB/s per GPU. NVLink: H100 SXM 900 GB/s bidirectional;
 * MNNVL: GB200 NVL72 1.8 TB/s bidirectional; PCIe Gen5 x16 ~64 GB/s per
 * direction, less once a transfer crosses host bridges or sockets (rough
 * figures; every new cluster starts from them, and a cluster file's
 * "link_gbps" overrides them);
 * network: NDR InfiniBand 400 Gb/s = 50 GB/s per NIC with one NIC per GPU
 * (DGX H100), and half of that across racks for a 2:1 oversubscribed spine. */
/* ------------------------------------------------------------------------ */
/* The single formulas                                                       */
/* ------------------------------------------------------------------------ */

/* Mixed-precision Adam as Megatron-LM counts it (theoretical_memory_usage.py:
 * bf16 params, fp32 main gradients, fp32 main params and Adam moments =
 * 18 bytes; ZeRO paper's stages for the sharding): w bytes of weights, gb
 * of main gradients, K = 12 of optimizer state for 16-bit training (fp32
 * main copy, momentum, variance), 8 for fp32 (no main copy). */
void p3d_cost_model_states(double psi, int d, int zero, int w, int gb, double *weights, double *grads, double *optim)
{
    double K = w >= 4 ? 8.0 : 12.0;
    double dd = d > 0 ? d : 1;
    *weights = w * psi / (zero >= 3 ? dd : 1);
    *grads = gb * psi / (zero >= 2 ? dd : 1);
    *optim = K * psi / (zero >= 1 ? dd : 1);
}

/* Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models", Table 2 (16-bit activations, bytes per layer):
 *   no parallelism        sbh(34 + 5as/h)
 *   tensor parallel       sbh(10 + 24/t + 5as/(ht))
 *   tensor + sequence par sbh(34 + 5as/h)/t
 *   selective recompute   drops the 5as/h term (attention scores recomputed)
 *   full recompute        keeps only the layer input, 2sbh (/t with SP). */
double p3d_cost_act_layer_f(int s, int b, int h, int a, int f, int t, int seq_parallel, int recompute)
{
    double sbh = (double)s * b * h;
    double attn = recompute >= 1 ? 0.0 : 5.0 * a * (double)s / h;
    if (t < 1)
        t = 1;
    if (recompute >= 2)
        return 2.0 * sbh / (seq_parallel ? t : 1);
    /* 34 = 18 + 4*4: Megatron's estimator writes the MLP's part as 4f/h;
     * with t = 1 it takes the other row (Megatron turns SP off there) */
    if (seq_parallel && t > 1)
        return sbh * (18.0 + 4.0 * f / h + attn) / t;
    return sbh * (10.0 + 24.0 / t + attn / t);
}

double p3d_cost_act_layer(int s, int b, int h, int a, int t, int seq_parallel, int recompute)
{
    return p3d_cost_act_layer_f(s, b, h, a, 4 * h, t, seq_parallel, recompute);
}

/* Narayanan et al. SC21, eq. (3): 96·B·s·L·h²·(1 + s/(6h) + V/(16Lh)) with
 * full recomputation (4 passes over the layers); 72 without (3 passes). */
double p3d_cost_flops(double factor, double B, int s, int L, int h, int V)
{
    double hh = (double)h * h;
    return factor * B * s * L * hh * (1.0 + (double)s / (6.0 * h) + (double)V / (16.0 * L * (double)h));
}

double p3d_cost_flops_w(double factor, double B, int s, int L, int h, int V, double W)
{
    return factor * B * s * (W / 12.0 + (double)L * s * h / 6.0 + (double)h * V / 16.0);
}

double p3d_cost_ep_bytes_layer(int b, int s, int h, int top_k, int t, int cp, int ep, int w, int recompute)
{
    if (ep <= 1)
        return 0;
    double tokens = (double)b * s / ((double)(cp > 0 ? cp : 1) * (t > 0 ? t : 1));
    int n = recompute >= 2 ? 6 : 4;
    return n * tokens * top_k * h * w * (ep - 1) / (double)ep;
}

double p3d_cost_act_moe_layer(int s, int b, int h, int a, int t, int seq_parallel, int recompute, int copies, int f,
                              int etp)
{
    if (t < 1)
        t = 1;
    if (etp < 1)
        etp = 1;
    double dense = p3d_cost_act_layer(s, b, h, a, t, seq_parallel, recompute);
    if (recompute >= 2)
        return dense; /* only the layer input is kept */
    double sb = (double)s * b;
    double mlp = 19.0 * sb * h / t;
    double moe = 2.0 * sb * h / t + sb * copies * (2.0 * h * etp + 6.0 * f) / t;
    return dense - mlp + moe;
}

double p3d_cost_bubble(int p, int m, int v)
{
    if (p <= 1 || m <= 0)
        return 0;
    if (v < 1)
        v = 1;
    return (double)(p - 1) / ((double)v * m + p - 1);
}

/* ------------------------------------------------------------------------ */
/* The whole estimate                                                        */
/* ------------------------------------------------------------------------ */

/* The smallest memory any GPU of the cluster reports, 0 when none does. */
static double cluster_gpu_mem(const p3d_cluster *c)
{
    double best = 0;
    if (!c)
        return 0;
    for (size_t i = 0; i < c->ntopos; i++) {
        const p3d_node *n = c->topos[i];
        for (int g = 0; n && g < n->ngpus; g++) {
            double mb = (double)n->gpus[g].mem_bytes;
            if (mb > 0 && (best == 0 || mb < best))
                best = mb;
        }
    }
    return best;
}

/* Dense 16-bit peak TFLOP/s by GPU family, matched as a substring of the
 * topology's model string, most specific first (vendor data sheets, dense,
 * no sparsity; V100 is fp16 on tensor cores, it has no bf16). */
static const struct {
    const char *match, *name;
    double peak;
    p3d_gpu_perf perf; /* docs/cost-model.md, "Compute time" */
} gpu_peaks[] = {
    /* HBM TB/s from the data sheets; GEMM ceiling, half-efficiency sizes
     * and attention efficiency calibrated (bench/plan-accuracy.sh) */
    {"GB200", "GB200", 2250, {8.0, 0.72, 96, 256, 0.45}},    {"B200", "B200", 2250, {8.0, 0.72, 96, 256, 0.45}},
    {"H200", "H200", 989, {4.8, 0.78, 64, 160, 0.50}},       {"H100", "H100", 989, {3.35, 0.78, 64, 160, 0.50}},
    {"H800", "H800", 989, {3.35, 0.78, 64, 160, 0.50}},      {"L40S", "L40S", 362, {0.86, 0.75, 32, 96, 0.45}},
    {"A100", "A100", 312, {2.04, 0.72, 32, 96, 0.18}},       {"A800", "A800", 312, {2.04, 0.72, 32, 96, 0.18}},
    {"A6000", "RTX A6000", 155, {0.77, 0.80, 32, 96, 0.45}}, {"V100", "V100", 125, {0.9, 0.80, 32, 96, 0.40}},
};

/* The GPU the FLOP/s figures are for: the slowest known family any GPU of
 * the cluster reports. *known = 0 when no GPU names a known family (then
 * H100 figures are assumed and the reports say so). */
static int cluster_gpu_family(const p3d_cluster *c, int *known)
{
    int best = -1;
    *known = 0;
    for (size_t i = 0; c && i < c->ntopos; i++) {
        const p3d_node *n = c->topos[i];
        for (int g = 0; n && g < n->ngpus; g++)
            for (size_t k = 0; k < sizeof gpu_peaks / sizeof gpu_peaks[0]; k++)
                if (strstr(n->gpus[g].model, gpu_peaks[k].match)) {
                    if (best < 0 || gpu_peaks[k].peak < gpu_peaks[best].peak)
                        best = (int)k;
                    break;
                }
    }
    if (best >= 0) {
        *known = 1;
        return best;
    }
    for (size_t k = 0; k < sizeof gpu_peaks / sizeof gpu_peaks[0]; k++)
        if (strcmp(gpu_peaks[k].name, "H100") == 0)
            return (int)k;
    return 0;
}

void p3d_cost_gpu(const p3d_cluster *c, const p3d_job *job, p3d_gpu_info *g)
{
    int known;
    int fam = cluster_gpu_family(c, &known);
    g->name = gpu_peaks[fam].name;
    g->peak_tflops = gpu_peaks[fam].peak;
    g->perf = gpu_peaks[fam].perf;
    g->known = known;
    double gm = cluster_gpu_mem(c);
    g->mem = job->gpu_mem_bytes > 0 ? job->gpu_mem_bytes : gm > 0 ? gm : P3D_DEFAULT_GPU_MEM;
    g->reserve = job->mem_reserve_set ? job->mem_reserve_bytes : p3d_cost_default_reserve(g->mem);
}

int p3d_batch_resolve(const p3d_job *job, p3d_batch *r, char **err)
{
    const int d = job->mesh.size[P3D_DIM_DP] > 0 ? job->mesh.size[P3D_DIM_DP] : 1;
    const int p = job->mesh.size[P3D_DIM_PP] > 0 ? job->mesh.size[P3D_DIM_PP] : 1;
    int b = job->micro_batch_size, m = job->micro_batches, B = job->global_batch;
    memset(r, 0, sizeof *r);
    /* Megatron's rule: B = d·b·m. Missing figures follow from the others;
     * with neither B nor m, m = 4·pp (keeps the 1F1B bubble near 20%). */
    if (B > 0 && m > 0 && b <= 0) {
        if (B % ((long long)d * m))
            return p3d_err(err,
                           "--global-batch %d is not a multiple of dp %d x --micro-batches %d = %lld, "
                           "so no micro-batch size follows from them",
                           B, d, m, (long long)d * m);
        b = B / (d * m);
        r->b_derived = 1;
    }
    if (b <= 0)
        b = 1;
    if (m <= 0) {
        if (B > 0) {
            if (B % ((long long)d * b))
                return p3d_err(err, "--global-batch %d is not a multiple of dp %d x micro-batch %d%s = %lld", B, d, b,
                               job->micro_batch_size > 0 ? "" : " (default)", (long long)d * b);
            m = B / (d * b);
            r->m_derived = 1;
        } else {
            m = 4 * p;
            r->m_assumed = 1;
        }
    }
    if (B <= 0)
        B = d * b * m;
    if ((long long)d * b * m != B)
        return p3d_err(err, "dp %d x micro-batch %d%s x --micro-batches %d = %lld samples, but --global-batch is %d", d,
                       b, job->micro_batch_size > 0 ? "" : " (default)", m, (long long)d * b * m, B);
    r->b = b, r->m = m, r->B = B;
    return 0;
}

/* One point-to-point message's latency per link class: NVLink/PCIe peers
 * about 2 us for a NCCL send/recv, a network hop (NIC, leaf switch) 5 us,
 * through the spine 8 us (two more switch hops). Rough published NCCL p2p
 * figures; they matter only when messages are small or many. */
static double p2p_latency(p3d_link l)
{
    switch (l) {
    case P3D_LINK_SELF: return 0;
    case P3D_LINK_RACK: return 5e-6;
    case P3D_LINK_XRACK: return 8e-6;
    default: return 2e-6;
    }
}

static double xfer_time(double bytes, double gbps)
{
    if (bytes <= 0)
        return 0;
    return gbps > 0 ? bytes / (gbps * 1e9) : INFINITY;
}

double p3d_cost_default_reserve(double gpu_mem)
{
    double r = P3D_MEM_RESERVE_FRAC * gpu_mem;
    return r > P3D_MEM_RESERVE_MIN ? r : P3D_MEM_RESERVE_MIN;
}

/* Share of dimension d's hops on each link class: from the hops when given,
 * else all of it on the worst link. */
static void hop_shares(const p3d_hops *hops, int d, p3d_link worst, double share[P3D_LINK_COUNT])
{
    long total = 0;
    for (int l = 0; l < P3D_LINK_COUNT; l++) {
        share[l] = 0;
        total += hops ? hops->n[d][l] : 0;
    }
    if (total <= 0) {
        share[worst] = 1;
        return;
    }
    for (int l = 0; l < P3D_LINK_COUNT; l++)
        share[l] = (double)hops->n[d][l] / (double)total;
}

/* Weights, gradients and optimizer state of the most loaded shard, as
 * Megatron-LM's estimator counts them (theoretical_memory_usage.py): the
 * first stage's layers and the embedding over tp, the norms and routers
 * whole, its routed experts over etp*ep; with pp = 1 and untied embeddings
 * the output layer too. A stage holds lps of the L layers (L/p when p
 * divides L, as Megatron requires). The dense part's optimizer state is
 * sharded over dp (x cp), the experts' over the expert data-parallel size
 * (docs/cost-model.md, "Memory"). */
static void shard_memory(const p3d_model_counts *mc, const p3d_job *job, int lps, int L, int t, int p, int dcp,
                         int eshards, int edp, p3d_cost *out, double *psi, double *psi_e)
{
    const int w = job->dtype_bytes > 0 ? job->dtype_bytes : 2;
    const double f = (double)lps / L;
    const int untied = job->model.untied;
    double tp = (mc->tp_block * f + mc->embedding * (untied && p == 1 ? 2 : 1)) / t;
    *psi = tp + mc->replicated_block * f;
    *psi_e = mc->expert_block * f / eshards;
    out->params_shard = *psi + *psi_e;
    out->params_shard_expert = *psi_e;
    out->params_per_gpu = out->params_shard;
    out->params_expert_per_gpu = *psi_e;
    /* fp32 training keeps fp32 gradients; 16-bit training fp32 main
     * gradients unless --grad-reduce-in-bf16 */
    out->grad_bytes = w >= 4 ? 4 : job->grad_bf16 ? 2 : 4;
    p3d_cost_model_states(*psi, dcp, job->zero, w, out->grad_bytes, &out->mem_weights, &out->mem_grads,
                          &out->mem_optim);
    if (*psi_e > 0) {
        double ew, eg, eo;
        p3d_cost_model_states(*psi_e, edp, job->zero, w, out->grad_bytes, &ew, &eg, &eo);
        out->mem_weights += ew;
        out->mem_grads += eg;
        out->mem_optim += eo;
    }
    out->bytes_per_param =
        out->params_shard > 0 ? (out->mem_weights + out->mem_grads + out->mem_optim) / out->params_shard : 0;
}

/* Activations of the first stage, which holds the most micro-batches
 * (docs/cost-model.md, "Activations"). Megatron-LM's estimator: with
 * sequence parallelism and selective recompute sbh(18 + 4f/h) per layer,
 * the embedding's input ids (8sb) and dropout (sbh) per micro-batch in
 * flight, and with pp = 1 the output layer's 4sbh(1 + V/h), all over t;
 * without sequence parallelism sbh(10 + 24/t) per layer, the embedding's
 * terms whole, with pp = 1 2(sbV/t + sbh), the sum x 1.05. A stage holds
 * min(m, p) micro-batches, x (1 + (p-1)/(pv)) interleaved. Full
 * recompute (Megatron's estimator has no row for it) and no recompute:
 * Korthikanti et al. 2022 Table 2's rows in the same frame. cp splits the
 * sequence; fp32 activations are twice the 16-bit figures. MoE layers:
 * par3drun adds what the routed copies hold (mem_act_moe, apart). */
static void act_first_stage(const p3d_model *md, const p3d_job *job, int lps, int t, int etp, int p, int v, int b,
                            int m, int cp, p3d_cost *out)
{
    const int w = job->dtype_bytes > 0 ? job->dtype_bytes : 2, sp = out->seq_parallel;
    const int s = md->seq_len / cp > 0 ? md->seq_len / cp : 1, h = md->hidden, f = p3d_model_ffn(md);
    const double sb = (double)s * b, scale = w / 2.0;
    out->act_layer = p3d_cost_act_layer_f(s, b, h, md->heads, f, t, sp, job->recompute) * scale;
    out->inflight = m < p ? m : p;
    double penalty = v > 1 ? 1.0 + (double)(p - 1) / ((double)p * v) : 1.0;
    double mbs = v > 1 ? p * penalty : out->inflight; /* micro-batches' worth held */
    double layers = out->act_layer * lps * mbs;
    double embed = (8.0 * sb + sb * h) * mbs / (sp ? t : 1) * scale;
    double output = 0;
    if (p == 1)
        output = (sp ? 4.0 * sb * h * (1.0 + (double)md->vocab / h) / t : 2.0 * (sb * md->vocab / t + sb * h)) * scale;
    /* par3drun's addition for MoE layers, kept apart: Megatron's estimator
     * counts an MoE layer like a dense one of --ffn-hidden-size, while each
     * token's dispatched copies (top-k and shared) hold activations in
     * every expert they reach */
    out->mem_act_moe = 0;
    if (md->experts > 0 && job->recompute < 2) {
        double shared = md->moe_shared_ffn > 0 ? (double)md->moe_shared_ffn / md->moe_ffn : md->shared_experts;
        int copies = md->top_k + (int)(shared + 0.5);
        double moe =
            p3d_cost_act_moe_layer(s, b, h, md->heads, t, sp, job->recompute, copies, md->moe_ffn, etp) * scale;
        int moe_layers = lps < md->layers - md->dense_layers ? lps : md->layers - md->dense_layers;
        if (moe > out->act_layer)
            out->mem_act_moe = (moe - out->act_layer) * moe_layers * mbs;
    }
    double total = layers + embed + output;
    if (job->recompute >= 2) /* one layer's full working set while it is recomputed */
        total += p3d_cost_act_layer_f(s, b, h, md->heads, f, t, sp, 1) * scale;
    if (!sp)
        total *= 1.05; /* Megatron's allowance for temporaries without SP */
    out->mem_act_megatron = total;
    out->mem_act = total + out->mem_act_moe;
    out->mem_act_embed = (embed + output) * (sp ? 1.0 : 1.05);
    out->act_formula = job->recompute == 1 ? (sp ? "megatron-sp" : "megatron-no-sp")
                                           : (job->recompute >= 2 ? "korthikanti-full" : "korthikanti-none");
}

/* Layers of the first, a middle and the last stage. Even stages: ceil(L/p)
 * each (Megatron requires p | L). Megatron's --decoder-first-pipeline-
 * num-layers F / --decoder-last-pipeline-num-layers N put F (N) layers on
 * the first (last) stage and the rest evenly on the others, which must
 * divide it; refused with interleaving, as Megatron does. */
int p3d_cost_stage_layers(int L, int p, int v, int first, int last, int out[3], char **err)
{
    const int lps = (L + p - 1) / p;
    out[0] = out[1] = out[2] = lps;
    if (!first && !last)
        return 0;
    if (p < 2)
        return p3d_err(err, "--decoder-%s-pipeline-num-layers needs pp > 1", first ? "first" : "last");
    if (v > 1)
        return p3d_err(err,
                       "--decoder-first/last-pipeline-num-layers: not with --virtual-stages %d (Megatron "
                       "refuses uneven stages with interleaving)",
                       v);
    int others = p - (first > 0) - (last > 0), rest = L - first - last;
    if (rest < 0 || (others == 0 && rest != 0) || (others > 0 && (rest < others || rest % others)))
        return p3d_err(err,
                       "--decoder-first-pipeline-num-layers %d, --decoder-last-pipeline-num-layers %d: the "
                       "other %d stage%s must share the remaining %d of %d layers evenly, at least one each",
                       first, last, others, others == 1 ? "" : "s", rest, L);
    int mid = others > 0 ? rest / others : 0;
    out[0] = first ? first : mid;
    out[1] = p > 2 ? mid : out[0]; /* pp = 2: no middle stage */
    out[2] = last ? last : mid;
    return 0;
}

/* Memory per GPU that one layer adds to a stage: its weights, gradients
 * and optimizer state as shard_memory counts them, and its activations per
 * micro-batch held as the first stage has them (Megatron's per-layer term,
 * par3drun's MoE copies); both linear in the layers. */
static void layer_mem(const p3d_model_counts *mc, const p3d_job *job, int L, int t, int dcp, int eshards, int edp,
                      p3d_cost *out)
{
    const int w = job->dtype_bytes > 0 ? job->dtype_bytes : 2;
    double psi = mc->tp_block / L / t + mc->replicated_block / L, psi_e = mc->expert_block / L / eshards, a, g, o;
    p3d_cost_model_states(psi, dcp, job->zero, w, out->grad_bytes, &a, &g, &o);
    out->mem_layer_states = a + g + o;
    if (psi_e > 0) {
        p3d_cost_model_states(psi_e, edp, job->zero, w, out->grad_bytes, &a, &g, &o);
        out->mem_layer_states += a + g + o;
    }
    out->mem_layer_act = out->stage_layers[0] > 0 && out->inflight > 0
                             ? (out->mem_act - out->mem_act_embed) / ((double)out->stage_layers[0] * out->inflight)
                             : out->act_layer;
}

/* Memory per GPU of the k-th stage (k > 0; 1F1B: it holds min(m, p - k)
 * micro-batches); the last one adds the output layer's weights (Megatron
 * keeps a copy there even when tied) and its logits' activations. */
static double later_stage_mem(const p3d_model_counts *mc, const p3d_job *job, const p3d_cost *first, int layers, int k,
                              int p, int m, int t, int dcp)
{
    const p3d_model *md = &job->model;
    const int w = job->dtype_bytes > 0 ? job->dtype_bytes : 2, held = m < p - k ? m : p - k;
    double total = layers * (first->mem_layer_states + first->mem_layer_act * held);
    if (k == p - 1) {
        double a, g, o;
        p3d_cost_model_states(mc->embedding / t, dcp, job->zero, w, first->grad_bytes, &a, &g, &o);
        const double sb = (double)md->seq_len * first->micro_batch_size, h = md->hidden, scale = w / 2.0;
        total += a + g + o +
                 (first->seq_parallel ? 4.0 * sb * h * (1.0 + (double)md->vocab / h) / t
                                      : 2.0 * (sb * md->vocab / t + sb * h)) *
                     scale;
    }
    return total;
}

/* The slowest stage's work: its layers, and on the last the output layer
 * (the pipeline runs at that stage's pace). */
static double stage_slowest(const int layers[3], double layer, double head)
{
    double a = layers[0] * layer, b = layers[1] * layer, c = layers[2] * layer + head;
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

/* The job's shape as the estimate reads it, filled once by
 * p3d_cost_eval_hops; each part below takes what it uses under the names
 * its formulas use. */
typedef struct eval_shape {
    int t, p, d, cp, v, w, ep, etp, edp, dcp; /* the mesh; w: bytes per element */
    int b, m, B;                              /* micro-batch size, micro-batches, global batch */
    int s, h, L, V, lps;                      /* sequence, hidden, layers, vocabulary; layers of the fullest stage */
    double N;                                 /* the world */
} eval_shape;

/* Memory per GPU: the shards of weights, gradients and optimizer states,
 * the activations, each stage's total, and what the GPU holds (*psi,
 * *psi_e: the dense and the expert parameters a GPU reduces). */
static void eval_memory(const p3d_cluster *c, const p3d_job *job, const p3d_model_counts *mc, const eval_shape *g,
                        p3d_cost *out, double *psi, double *psi_e)
{
    const int t = g->t, p = g->p, cp = g->cp, v = g->v, ep = g->ep, etp = g->etp, edp = g->edp, dcp = g->dcp, b = g->b,
              m = g->m, L = g->L;
    const p3d_model *md = &job->model;
    const int uneven = out->uneven;
    out->seq_parallel = t > 1 && !job->no_seq_parallel;
    out->moe = md->experts > 0;
    out->params_expert = mc->expert_block;
    out->params_active = mc->active;
    shard_memory(mc, job, out->stage_layers[0], L, t, p, dcp, etp * ep, edp, out, psi, psi_e);
    act_first_stage(md, job, out->stage_layers[0], t, etp, p, v, b, m, cp, out);
    out->mem_total = out->mem_weights + out->mem_grads + out->mem_optim + out->mem_act;
    layer_mem(mc, job, L, t, dcp, etp * ep, edp, out);
    out->stage_mem[0] = out->stage_mem[1] = out->stage_mem[2] = out->mem_total;
    if (p > 1) {
        if (p > 2)
            out->stage_mem[1] = later_stage_mem(mc, job, out, out->stage_layers[1], 1, p, m, t, dcp);
        out->stage_mem[2] = later_stage_mem(mc, job, out, out->stage_layers[2], p - 1, p, m, t, dcp);
    }
    /* even stages: the first, as Megatron's estimator counts; uneven ones:
     * the first is no longer the most loaded for sure, the fullest sets it */
    for (int k = 1; uneven && k < 3; k++)
        if (out->stage_mem[k] > out->mem_total)
            out->mem_total = out->stage_mem[k];
    /* an explicit option wins over what the topology discovered */
    double gm = cluster_gpu_mem(c);
    if (job->gpu_mem_bytes > 0) {
        out->gpu_mem = job->gpu_mem_bytes;
        out->gpu_mem_source = "--gpu-mem";
    } else if (gm > 0) {
        out->gpu_mem = gm;
        out->gpu_mem_source = "topology";
    } else {
        out->gpu_mem = P3D_DEFAULT_GPU_MEM;
        out->gpu_mem_source = "default";
    }
    if (job->mem_reserve_set) {
        out->mem_reserve = job->mem_reserve_bytes;
        out->mem_reserve_source = "--mem-reserve";
    } else {
        out->mem_reserve = p3d_cost_default_reserve(out->gpu_mem);
        out->mem_reserve_source = "default";
    }
    out->fits_raw = out->mem_total <= out->gpu_mem;
    out->fits = out->mem_total <= out->gpu_mem - out->mem_reserve;
}

/* The pipeline's point-to-point traffic and its time, hop by hop. */
static void eval_pp(const p3d_cluster *c, const p3d_hops *hops, const eval_shape *g, p3d_cost *out)
{
    const int t = g->t, v = g->v, w = g->w, m = g->m;
    /* one micro-batch's hidden states on one GPU: cp splits the sequence */
    double act_elems = (double)g->b * g->s * g->h / g->cp;
    /* b·s·h forward and the same back per boundary per micro-batch; each
     * of a stage's t GPUs sends its 1/t slice (SP or Megatron's
     * scatter-gather), and interleaving multiplies the boundaries by v. */
    out->pp_bytes_boundary = 2.0 * act_elems * w;
    out->pp_bytes_step = out->pp_bytes_boundary / t * m * v;
    /* Hop by hop: each boundary costs its own link's time (plus one
     * latency per message: an activation forward and a gradient back
     * per micro-batch per (virtual) stage boundary), and the step
     * counts the average boundary — exact for the fill and drain,
     * where a micro-batch crosses every hop once; in the steady state
     * a stage's sends overlap the other stages' compute. A pipeline
     * with one cross-rack hop of three pays for one, not for three. */
    double share[P3D_LINK_COUNT], xfer = 0;
    hop_shares(hops, P3D_DIM_PP, out->link[P3D_DIM_PP], share);
    for (int l = 0; l < P3D_LINK_COUNT; l++) {
        if (share[l] <= 0)
            continue;
        xfer += share[l] * xfer_time(out->pp_bytes_step, p3d_link_gbps(c, (p3d_link)l));
        out->pp_latency += share[l] * 2.0 * m * v * p2p_latency((p3d_link)l);
    }
    out->pp_time = xfer + out->pp_latency;
    /* the bandwidth that time amounts to, for the reports */
    out->link_gbps[P3D_DIM_PP] = xfer > 0 && isfinite(xfer) ? out->pp_bytes_step / xfer / 1e9 : 0;
}

/* Traffic per GPU per step of every dimension, and its time on the link
 * that paces it. */
static void eval_traffic(const p3d_cluster *c, const p3d_job *job, const p3d_link link[P3D_NDIMS], const p3d_hops *hops,
                         const eval_shape *g, double psi, double psi_e, p3d_cost *out)
{
    const int t = g->t, p = g->p, d = g->d, cp = g->cp, w = g->w, ep = g->ep, edp = g->edp, dcp = g->dcp, b = g->b,
              m = g->m, s = g->s, h = g->h, L = g->L, lps = g->lps;
    const p3d_model *md = &job->model;
    /* traffic and time */
    for (int k = 0; k < P3D_NDIMS; k++) {
        out->link[k] = link ? link[k] : P3D_LINK_SELF;
        out->link_gbps[k] = p3d_link_gbps(c, out->link[k]);
    }
    /* one micro-batch's hidden states on one GPU: cp splits the sequence */
    double act_elems = (double)b * s * h / cp;
    if (t > 1) {
        /* Megatron: 2 all-reduces forward, 2 backward per layer (plus the 2
         * forward ones again under full recompute); a ring moves 2(t-1)/t of
         * the buffer per GPU. With SP each becomes an all-gather plus a
         * reduce-scatter, which moves the same bytes. */
        int nar = job->recompute >= 2 ? 6 : 4;
        out->tp_bytes_layer = nar * 2.0 * (t - 1) / t * act_elems * w;
        out->tp_bytes_step = out->tp_bytes_layer * lps * m;
        out->tp_time = xfer_time(out->tp_bytes_step, out->link_gbps[P3D_DIM_TP]);
    }
    if (p > 1)
        eval_pp(c, hops, g, out);
    /* TP, CP, EP and DP are ring (or all-to-all) collectives: every member
     * sends at once and a step ends when the slowest hop has delivered, so
     * link[d] (the ring's slowest hop) paces the whole collective. A new
     * dimension's traffic goes here: bytes per GPU per step into its own
     * fields, seconds = bytes / link_gbps[d], and its part of step_time
     * below (on the critical path like tp, or overlapped like dp). */
    if (cp > 1) {
        /* Ring attention (Megatron's context parallelism): each layer
         * passes every rank's K and V chunk around the cp ring forward
         * (cp-1 of the cp chunks arrive), and K, V plus their gradients
         * backward: 3 x 2·b·(s/cp)·h·(cp-1) elements per layer per
         * micro-batch, split over tp (heads). Grouped-query attention
         * would move less; counted on the critical path (no overlap). */
        out->cp_bytes_layer = 3.0 * 2.0 * act_elems * (cp - 1) * w / t;
        if (job->recompute >= 2)
            out->cp_bytes_layer *= 4.0 / 3.0; /* the forward again */
        out->cp_bytes_step = out->cp_bytes_layer * lps * m;
        out->cp_time = xfer_time(out->cp_bytes_step, out->link_gbps[P3D_DIM_CP]);
    }
    if (dcp > 1) {
        double S = (double)w * psi;
        out->dp_bytes_step = 2.0 * (dcp - 1) / dcp * S * (job->zero >= 3 ? 1.5 : 1.0);
        /* over dp x cp members: the slower of the two dimensions' links */
        p3d_link gl = out->link[P3D_DIM_DP];
        if (cp > 1 && (d == 1 || out->link[P3D_DIM_CP] > gl))
            gl = out->link[P3D_DIM_CP];
        out->dp_time = xfer_time(out->dp_bytes_step, p3d_link_gbps(c, gl));
    }
    if (out->moe) {
        /* MoE layers of the fullest stage: the dense ones come first */
        int first_moe = md->dense_layers, hi = lps < L ? lps : L;
        out->moe_layers_per_stage = hi - (first_moe < hi ? first_moe : hi);
        if (p > 1 && L - first_moe < lps)
            out->moe_layers_per_stage = L - first_moe;
        else if (p > 1)
            out->moe_layers_per_stage = lps; /* a later stage is all MoE */
        /* EP: dispatch and combine all-to-alls of every MoE layer, forward
         * and backward, on the critical path; the EP group's slowest link
         * paces them (an all-to-all waits for its slowest pair) */
        out->ep_bytes_layer = p3d_cost_ep_bytes_layer(b, s, h, md->top_k, t, cp, ep, w, job->recompute);
        out->ep_bytes_step = out->ep_bytes_layer * out->moe_layers_per_stage * m;
        out->ep_time = xfer_time(out->ep_bytes_step, out->link_gbps[P3D_DIM_EP]);
        /* expert gradients all-reduced over edp, overlapped like dp's */
        if (edp > 1) {
            out->edp_bytes_step = 2.0 * (edp - 1) / edp * (double)w * psi_e * (job->zero >= 3 ? 1.5 : 1.0);
            out->edp_time = xfer_time(out->edp_bytes_step, out->link_gbps[P3D_DIM_EDP]);
        }
    }
}

/* Compute time, the bubble, the exposed gradient reduction, the step and
 * the MFU. */
static void eval_step(const p3d_cluster *c, const p3d_job *job, const p3d_model_counts *mc, const eval_shape *g,
                      p3d_cost *out)
{
    const int t = g->t, p = g->p, cp = g->cp, v = g->v, w = g->w, ep = g->ep, etp = g->etp, b = g->b, m = g->m,
              B = g->B, s = g->s, h = g->h, L = g->L, V = g->V, lps = g->lps;
    const double N = g->N;
    const p3d_model *md = &job->model;
    /* compute, bubble, step */
    int known;
    int fam = cluster_gpu_family(c, &known);
    out->gpu_name = gpu_peaks[fam].name;
    out->peak_tflops = gpu_peaks[fam].peak;
    /* an MoE token passes through its top-k (and shared) experts only */
    out->flops_step = p3d_cost_flops_w(job->recompute >= 2 ? 96 : 72, B, s, L, h, V, mc->matmul);
    out->flops_model = p3d_cost_flops_w(72, B, s, L, h, V, mc->matmul);
    if (job->tflops > 0) {
        /* one sustained figure for everything (the user's): the pipeline
         * runs at the pace of its slowest stage, the last one with ceil(L/p)
         * layers plus the LM head, whose share of the FLOPs formula is the
         * V/(16Lh) term (V/(16h) in units of one layer's W/(12Lh^2) + s/(6h)) */
        out->tflops = job->tflops;
        out->tflops_source = "--tflops";
        double layer_w = mc->matmul / (12.0 * L * (double)h * h) + (double)s / (6.0 * h),
               head_w = (double)V / (16.0 * h);
        double slow = stage_slowest(out->stage_layers, layer_w, head_w);
        out->stage_imbalance = p > 1 ? slow / ((L * layer_w + head_w) / p) : 1.0;
        out->compute_time = out->flops_step / (N * out->tflops * 1e12) * out->stage_imbalance;
    } else {
        /* from the GEMM shapes (compute_time.c): the last stage's layers
         * and the output layer per micro-batch, m of them */
        p3d_compute_times(&gpu_peaks[fam].perf, out->peak_tflops, md, mc, b, t, cp, ep, etp, job->recompute, w, out);
        double stage = stage_slowest(out->stage_layers, out->t_layer, out->t_head),
               avg = (L * out->t_layer + out->t_head) / p;
        out->stage_imbalance = p > 1 ? stage / avg : 1.0;
        out->compute_time = m * stage;
        /* the sustained figure that amounts to, for the reports */
        out->tflops = out->flops_step / (N * m * avg) / 1e12;
        out->tflops_source = known ? "GEMM shapes" : "GEMM shapes, H100 assumed";
    }
    out->bubble = p3d_cost_bubble(p, m, v);
    out->bubble_overhead = p > 1 ? (double)(p - 1) / ((double)v * m) : 0;
    /* TP and PP transfers sit on each micro-batch's critical path, so the
     * bubble stretches them like compute. The DP all-reduce overlaps the
     * backward pass (Megatron's --overlap-grad-reduce): a stage's gradients
     * are final only during its last micro-batch's backward, and the first
     * stage runs that last of all, so at most one micro-batch's backward on
     * the slowest stage (2/3 of its compute, 3/4 with full recompute) hides
     * it; the first layer's bucket (1/ceil(L/p) of the gradients) is ready
     * only when the backward ends and is always exposed. */
    double bwd_share = job->recompute >= 2 ? 0.75 : 2.0 / 3.0;
    double window = out->compute_time / m * bwd_share;
    /* the dense and the expert gradient all-reduces share that window */
    double grad_time = out->dp_time + out->edp_time;
    double floor_exposed = grad_time / lps;
    out->dp_exposed = grad_time - window;
    if (out->dp_exposed < floor_exposed)
        out->dp_exposed = floor_exposed;
    out->dp_overlap = isfinite(grad_time) ? grad_time - out->dp_exposed : 0;
    out->step_time =
        (out->compute_time + out->tp_time + out->cp_time + out->ep_time + out->pp_time) * (1.0 + out->bubble_overhead) +
        out->dp_exposed;
    out->mfu = out->step_time > 0 && isfinite(out->step_time)
                   ? out->flops_model / (out->step_time * N * out->peak_tflops * 1e12)
                   : 0;
}

int p3d_cost_eval(const p3d_cluster *c, const p3d_job *job, const p3d_link link[P3D_NDIMS], p3d_cost *out, char **err)
{
    return p3d_cost_eval_hops(c, job, link, NULL, out, err);
}

int p3d_cost_eval_hops(const p3d_cluster *c, const p3d_job *job, const p3d_link link[P3D_NDIMS], const p3d_hops *hops,
                       p3d_cost *out, char **err)
{
    memset(out, 0, sizeof *out);
    if (!job->has_model)
        return p3d_err(err, "cost model: no model given (use --model NAME or --params --layers "
                            "--hidden --heads --seq-len)");
    const p3d_model *md = &job->model;
    if (md->params <= 0 || md->layers <= 0 || md->hidden <= 0 || md->heads <= 0 || md->seq_len <= 0)
        return p3d_err(err, "cost model: model '%s' needs params, layers, hidden, heads and seq-len > 0", md->name);
    const int t = job->mesh.size[P3D_DIM_TP], p = job->mesh.size[P3D_DIM_PP], d = job->mesh.size[P3D_DIM_DP],
              cp = job->mesh.size[P3D_DIM_CP];
    const int v = job->virtual_stages > 0 ? job->virtual_stages : 1;
    const int w = job->dtype_bytes > 0 ? job->dtype_bytes : 2;
    if (t < 1 || p < 1 || d < 1 || cp < 1 || job->mesh.size[P3D_DIM_EP] < 1)
        return p3d_err(err, "cost model: mesh sizes must be >= 1 (tp=%d pp=%d dp=%d)", t, p, d);
    /* the expert grid: etp*ep*edp*pp = world */
    const int ep = job->mesh.size[P3D_DIM_EP], etp = p3d_mesh_size(&job->mesh, P3D_DIM_ETP),
              edp = p3d_mesh_size(&job->mesh, P3D_DIM_EDP);
    if (md->experts <= 0 && ep > 1)
        return p3d_err(err, "cost model: --ep %d needs a mixture-of-experts model; '%s' is dense (no experts)", ep,
                       md->name);
    if (md->experts > 0 && md->experts % ep)
        return p3d_err(err,
                       "cost model: --ep %d does not divide the %d experts of '%s': every EP rank must "
                       "hold the same number of experts",
                       ep, md->experts, md->name);
    if (md->experts > 0 && (etp < 1 || edp < 1))
        return p3d_err(err, "cost model: the expert grid etp=%d ep=%d does not divide the world", etp, ep);
    p3d_model_counts mc;
    if (p3d_model_count(md, &mc, err) < 0)
        return -1;
    if (p > md->layers)
        return p3d_err(err, "cost model: pp=%d exceeds the model's %d layers", p, md->layers);
    if (job->zero < 0 || job->zero > 3)
        return p3d_err(err, "cost model: ZeRO stage must be 0-3, got %d", job->zero);
    const double N = (double)p3d_mesh_world(&job->mesh);

    p3d_batch bt;
    if (p3d_batch_resolve(job, &bt, err) < 0)
        return -1;
    const int b = bt.b, m = bt.m, B = bt.B;
    out->micro_batches_assumed = bt.m_assumed;
    out->micro_batch_size = b;
    out->micro_batches = m;
    out->global_batch = B;

    const int s = md->seq_len, h = md->hidden, L = md->layers, V = md->vocab;
    const int dcp = d * cp; /* gradients are reduced (and sharded) over dp x cp */
    if (p3d_cost_stage_layers(L, p, v, job->first_stage_layers, job->last_stage_layers, out->stage_layers, err) < 0)
        return -1;
    const int uneven = job->first_stage_layers || job->last_stage_layers;
    out->uneven = uneven;
    int lps = out->stage_layers[0];
    for (int k = 1; k < 3; k++)
        if (out->stage_layers[k] > lps)
            lps = out->stage_layers[k];
    out->layers_per_stage = lps;

    eval_shape g = {.t = t,
                    .p = p,
                    .d = d,
                    .cp = cp,
                    .v = v,
                    .w = w,
                    .ep = ep,
                    .etp = etp,
                    .edp = edp,
                    .dcp = dcp,
                    .b = b,
                    .m = m,
                    .B = B,
                    .s = s,
                    .h = h,
                    .L = L,
                    .V = V,
                    .lps = lps,
                    .N = N};
    double psi = 0, psi_e = 0;
    eval_memory(c, job, &mc, &g, out, &psi, &psi_e);
    eval_traffic(c, job, link, hops, &g, psi, psi_e, out);
    if (hops) {
        out->hops = *hops;
        out->has_hops = 1;
    }
    eval_step(c, job, &mc, &g, out);
    return 0;
}
