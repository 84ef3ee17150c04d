/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compute_time.c — compute time from the shapes of the matrix multiplies
 * (docs/cost-model.md, "Compute time"): each GEMM of a layer runs at an
 * efficiency that rises with its rows (tokens, b*s), width and depth (h/t,
 * ffn/t, ...) towards the GPU family's ceiling; fused attention runs at its
 * own fraction of peak; the elementwise parts (norms, dropout, residuals,
 * activation functions, the loss) are bound by memory bandwidth. The
 * family figures are in cost_model.c's table, calibrated and checked by
 * bench/plan-accuracy.sh against published step times.
 */
#include "cost_internal.h"

#include <math.h>

double p3d_gemm_eff(const p3d_gpu_perf *g, double M, double N, double K)
{
    if (M <= 0 || N <= 0 || K <= 0)
        return g->gemm_max;
    return g->gemm_max * M / (M + g->m0) * N / (N + g->n0) * K / (K + g->n0);
}

/* Accumulates one GEMM (count of them, M x N x K) into flops and seconds. */
static void gemm(const p3d_gpu_perf *g, double peak, double count, double M, double N, double K, double *flops,
                 double *secs)
{
    double f = 2.0 * M * N * K * count;
    *flops += f;
    *secs += f / (peak * p3d_gemm_eff(g, M, N, K));
}

void p3d_compute_times(const p3d_gpu_perf *g, double peak_tflops, const p3d_model *md, const p3d_model_counts *mc,
                       int b, int t, int cp, int ep, int etp, int recompute, int w, p3d_cost *out)
{
    const double peak = peak_tflops * 1e12, hbm = g->hbm_tbps * 1e12;
    const double h = md->hidden, s = (double)md->seq_len / cp, M = b * s, glu = md->swiglu ? 2.0 : 1.0;
    const double f = p3d_model_ffn(md);
    if (t < 1)
        t = 1;
    if (etp < 1)
        etp = 1;
    /* attention projections: the layer's attention weights as one
     * projection in (QKV, N = its share of the weights) and one out (h) */
    double fl = 0, ga = 0, gm = 0, gx = 0;
    double attn_out = (md->mla ? md->heads * (double)md->v_head_dim
                               : md->heads * (double)(md->kv_channels > 0 ? md->kv_channels : md->hidden / md->heads));
    double attn_in = mc->attn / h - attn_out;
    gemm(g, peak, 1, M, attn_in / t, h, &fl, &ga);
    gemm(g, peak, 1, M, h, attn_out / t, &fl, &ga);
    double mlp_width = f; /* the MLP part of the elementwise work */
    if (md->experts > 0) {
        /* an MoE layer: the shared experts like a dense MLP; the routed
         * ones as E/ep grouped GEMMs of the tokens each expert receives */
        double shared = mc->shared_mlp / (glu + 1.0) / h; /* its intermediate width */
        if (shared > 0) {
            gemm(g, peak, 1, M, glu * shared / t, h, &fl, &gx);
            gemm(g, peak, 1, M, h, shared / t, &fl, &gx);
        }
        double experts = (double)md->experts / (ep > 0 ? ep : 1);
        double Me = M * md->top_k * (ep > 0 ? ep : 1) * etp / ((double)md->experts * t);
        gemm(g, peak, experts, Me, glu * md->moe_ffn / etp, h, &fl, &gx);
        gemm(g, peak, experts, Me, h, (double)md->moe_ffn / etp, &fl, &gx);
        mlp_width = shared + (double)md->top_k * md->moe_ffn;
    } else {
        gemm(g, peak, 1, M, glu * f / t, h, &fl, &gm);
        gemm(g, peak, 1, M, h, f / t, &fl, &gm);
    }
    double gemm_fwd = ga + gm + gx;
    /* attention scores and values (Narayanan et al.'s 4bs^2h per layer,
     * causal masking not subtracted, as their FLOP count) */
    double q = md->mla ? md->heads * ((double)md->qk_head_dim + md->qk_rope_dim) : attn_out;
    double attn_fwd = 4.0 * M * s * q / t / (peak * g->attn_eff);
    /* elementwise: two norms, dropouts and residuals (~16h elements read
     * or written per token) and the MLP's activation (3 x its width) */
    double mem_fwd = w * M * (16.0 * h + 3.0 * mlp_width) / t / hbm;
    double fwd = gemm_fwd + attn_fwd + mem_fwd;
    double recomp = recompute >= 2 ? fwd : recompute == 1 ? attn_fwd : 0;
    out->t_layer_gemm = 3.0 * gemm_fwd + (recompute >= 2 ? gemm_fwd : 0);
    out->t_layer_attn = 3.0 * attn_fwd + (recompute >= 1 ? attn_fwd : 0);
    out->t_layer_mem = 3.0 * mem_fwd + (recompute >= 2 ? mem_fwd : 0);
    out->t_layer = 3.0 * fwd + recomp;
    out->gemm_eff = gemm_fwd > 0 ? fl / (gemm_fwd * peak) : 0;
    /* the output layer (M x V/t x h, forward and backward) and the loss
     * (the logits read and written a few times in fp32) */
    double head = 0, hf = 0;
    gemm(g, peak, 3, M, (double)md->vocab / t, h, &hf, &head);
    head += 4.0 * 4.0 * M * md->vocab / t / hbm;
    out->t_head = head;
}
