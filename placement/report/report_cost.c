/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_cost.c — the cost estimate's table (memory, traffic and time per
 * GPU per step, bubble, MFU) beside the naive baseline's, with units: the
 * text report's "Cost estimate" section and `par3drun plan`'s detail
 * (report_common.h).
 */
#include "cost_internal.h"
#include "report_common.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Cost figures with units, "-" when not applicable. */
static void fmt_bytes(char *buf, size_t cap, double v)
{
    if (v >= 1e12)
        snprintf(buf, cap, "%.2f TB", v / 1e12);
    else if (v >= 1e9)
        snprintf(buf, cap, "%.1f GB", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, cap, "%.1f MB", v / 1e6);
    else if (v > 0)
        snprintf(buf, cap, "%.0f kB", v / 1e3);
    else
        snprintf(buf, cap, "0");
}

static void fmt_time(char *buf, size_t cap, double v)
{
    if (v >= 1)
        snprintf(buf, cap, "%.2f s", v);
    else if (v >= 1e-3)
        snprintf(buf, cap, "%.1f ms", v * 1e3);
    else if (v > 0)
        snprintf(buf, cap, "%.0f us", v * 1e6);
    else
        snprintf(buf, cap, "0");
}

enum { F_BYTES, F_TIME, F_PCT, F_LINK };

static void cost_row(p3d_sb *b, const char *label, int kind, size_t off, int link_dim, const p3d_cost *x,
                     const p3d_cost *y)
{
    char v[2][48];
    const p3d_cost *k[2] = {x, y};
    for (int i = 0; i < 2; i++) {
        v[i][0] = 0;
        if (!k[i])
            continue;
        double d = *(const double *)((const char *)k[i] + off);
        if (kind == F_BYTES)
            fmt_bytes(v[i], sizeof v[i], d);
        else if (kind == F_TIME)
            fmt_time(v[i], sizeof v[i], d);
        else if (kind == F_PCT)
            snprintf(v[i], sizeof v[i], "%.1f %%", d * 100);
        if (link_dim >= 0) {
            size_t len = strlen(v[i]);
            snprintf(v[i] + len, sizeof v[i] - len, " %s", p3d_link_name(k[i]->link[link_dim]));
        }
    }
    p3d_sb_printf(b, "  %-34s  %18s  %18s\n", label, v[0], v[1]);
}

void p3d_report_cost_table(p3d_sb *b, const p3d_report_in *in, const char *label)
{
    const p3d_analysis *an = in->an;
    if (!an || !an->has_cost)
        return;
    const p3d_cost *x = &an->cost, *y = in->base_an && in->base_an->has_cost ? &in->base_an->cost : NULL;
    p3d_sb_printf(b, "  %-34s  %18s  %18s\n", "", label, y ? "naive" : "");
#define R(label, kind, field, dim) cost_row(b, label, kind, offsetof(p3d_cost, field), dim, x, y)
    R("memory: weights", F_BYTES, mem_weights, -1);
    R("memory: gradients", F_BYTES, mem_grads, -1);
    R("memory: optimizer state", F_BYTES, mem_optim, -1);
    R("memory: activations", F_BYTES, mem_act, -1);
    R("memory: total", F_BYTES, mem_total, -1);
    R("memory: GPU holds", F_BYTES, gpu_mem, -1);
    R("memory: kept free (reserve)", F_BYTES, mem_reserve, -1);
    R("TP traffic per step, worst link", F_BYTES, tp_bytes_step, P3D_DIM_TP);
    R("TP time per step", F_TIME, tp_time, -1);
    R("PP traffic per step, worst link", F_BYTES, pp_bytes_step, P3D_DIM_PP);
    R("PP time per step (hop by hop)", F_TIME, pp_time, -1);
    {
        /* the hops each pipeline boundary takes, by class: what the PP time costs */
        char hv[2][64];
        const p3d_analysis *ha[2] = {an, y ? in->base_an : NULL};
        for (int k = 0; k < 2; k++) {
            size_t len = 0;
            hv[k][0] = 0;
            for (int l = 0; ha[k] && l < P3D_LINK_COUNT; l++)
                if (ha[k]->dim[P3D_DIM_PP].hops_by_link[l] && len < sizeof hv[k])
                    len += (size_t)snprintf(hv[k] + len, sizeof hv[k] - len, "%s%d %s", len ? ", " : "",
                                            ha[k]->dim[P3D_DIM_PP].hops_by_link[l], p3d_link_name((p3d_link)l));
        }
        if (hv[0][0])
            p3d_sb_printf(b, "  %-34s  %18s  %18s\n", "PP hops by link", hv[0], hv[1]);
    }
    if (x->moe) {
        /* MoE: the token all-to-alls over EP and the expert gradients over edp */
        R("EP all-to-all per step, worst link", F_BYTES, ep_bytes_step, P3D_DIM_EP);
        R("EP time per step", F_TIME, ep_time, -1);
        R("expert grads over edp, worst link", F_BYTES, edp_bytes_step, P3D_DIM_EDP);
        R("expert grad time per step", F_TIME, edp_time, -1);
    }
    if (in->pl->mesh.size[P3D_DIM_DP] > 1) {
        R("DP traffic per step, worst link", F_BYTES, dp_bytes_step, P3D_DIM_DP);
        R("DP time per step", F_TIME, dp_time, -1);
        R(x->moe ? "DP + edp exposed (not overlapped)" : "DP exposed (not overlapped)", F_TIME, dp_exposed, -1);
    } else {
        p3d_sb_printf(b, "  %-34s  %18s  %18s\n", "DP traffic", "none (dp=1)", y ? "none (dp=1)" : "");
    }
    R("pipeline bubble", F_PCT, bubble, -1);
    R("compute time per step", F_TIME, compute_time, -1);
    R("step time", F_TIME, step_time, -1);
    R("MFU", F_PCT, mfu, -1);
#undef R
    p3d_sb_printf(b,
                  "  memory as Megatron-LM counts it: %.3gB params on the most loaded shard x %.3g B/param\n"
                  "    (fp%d main gradients), activations %s%s, sequence parallelism %s;\n"
                  "    the reserve is par3drun's (CUDA context, NCCL buffers, fragmentation)\n",
                  x->params_shard / 1e9, x->bytes_per_param, x->grad_bytes == 2 ? 16 : 32,
                  x->act_formula ? x->act_formula : "megatron-sp",
                  x->mem_act_moe > 0 ? " + par3drun's MoE dispatch copies" : "", x->seq_parallel ? "on" : "off");
    p3d_sb_printf(b, "  assumed: %s, %.0f TFLOP/s sustained (%s), MFU against %.0f peak\n",
                  x->gpu_name ? x->gpu_name : "H100", x->tflops, x->tflops_source ? x->tflops_source : "default",
                  x->peak_tflops);
    if (x->uneven)
        p3d_sb_printf(b,
                      "  uneven stages (--decoder-first/last-pipeline-num-layers): first %d layers + embedding "
                      "%.1f GB,\n    %s %d layers %.1f GB, last %d layers + output layer %.1f GB; the fullest "
                      "sets the memory,\n    the slowest (%.0f%% of an even stage's work) the pipeline's pace\n",
                      x->stage_layers[0], x->stage_mem[0] / 1e9,
                      in->pl->mesh.size[P3D_DIM_PP] > 2 ? "middle" : "(none)", x->stage_layers[1],
                      x->stage_mem[1] / 1e9, x->stage_layers[2], x->stage_mem[2] / 1e9, 100 * x->stage_imbalance);
    if (x->micro_batches_assumed)
        p3d_sb_printf(b, "  assumed: %d micro-batches (4 x pp; give --global-batch or --micro-batches)\n",
                      x->micro_batches);
    p3d_cost_compare_note(b, x, label, y, "naive", "  ");
    if (!x->fits)
        p3d_sb_puts(b, "  the model state does NOT fit GPU memory (see MODEL_DOES_NOT_FIT)\n");
}

void p3d_report_infer_table(p3d_sb *b, const p3d_infer_cost *k)
{
    char v[48];
    p3d_sb_printf(b,
                  "  one replica = tp %d x pp %d GPUs, %d replica%s; %d sequences in flight per replica, context "
                  "%d tokens (prompt %d)\n",
                  k->tp, k->pp, k->replicas, k->replicas == 1 ? "" : "s", k->batch, k->context, k->prompt);
#define ROW(label, fmt, val)                                                                                           \
    do {                                                                                                               \
        fmt(v, sizeof v, val);                                                                                         \
        p3d_sb_printf(b, "  %-34s  %18s\n", label, v);                                                                 \
    } while (0)
    ROW("memory: weights (bf16)", fmt_bytes, k->weights);
    ROW("memory: KV cache", fmt_bytes, k->kv);
    ROW("memory: total", fmt_bytes, k->total);
    ROW("memory: GPU holds", fmt_bytes, k->gpu_mem);
    ROW("memory: kept free (reserve)", fmt_bytes, k->reserve);
    ROW("time to first token (TTFT)", fmt_time, k->ttft);
    ROW("time per output token (TPOT)", fmt_time, k->tpot);
#undef ROW
    p3d_sb_printf(b, "  %-34s  %18.0f\n", "tokens/s per GPU", k->tok_s_gpu);
    fmt_bytes(v, sizeof v, k->kv_per_token);
    p3d_sb_printf(b,
                  "  KV cache %s per token (K and V of every KV head of every layer, bf16), split over tp and pp;\n"
                  "  assumed: %s, decode reads at 80%% of HBM bandwidth (plan --inference's arithmetic)\n",
                  v, k->gpu_name ? k->gpu_name : "H100");
    if (!k->fits)
        p3d_sb_puts(b, "  the serving layout does NOT fit GPU memory (see SERVING_DOES_NOT_FIT)\n");
}
