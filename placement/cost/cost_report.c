/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cost_report.c — the cost model's figures as JSON and as text, shared by
 * every report (plan, dry run). Field names are documented in
 * docs/cost-model.md; keep both in step.
 */
#include "cost_internal.h"

#include <math.h>
#include <stdio.h>

const char *p3d_recompute_name(int r)
{
    return r <= 0 ? "none" : r == 1 ? "selective" : "full";
}

static void kv_num(p3d_sb *b, const char *k, double v, int comma)
{
    p3d_sb_json_str(b, k);
    p3d_sb_putc(b, ':');
    p3d_sb_json_num(b, v);
    if (comma)
        p3d_sb_putc(b, ',');
}

/* Rounds to 6 significant digits first: estimates do not deserve more, and
 * it keeps golden files stable against last-bit floating-point noise. */
static double r6(double v)
{
    if (!isfinite(v) || v == 0)
        return v;
    double e = floor(log10(fabs(v)));
    double scale = pow(10.0, 5 - e);
    return round(v * scale) / scale;
}

void p3d_cost_json(p3d_sb *b, const p3d_cost *c)
{
    /* one entry per dimension the model costs; a new dimension adds its
     * row here and its bytes/seconds in the branch below */
    static const int dims[6] = {P3D_DIM_TP, P3D_DIM_CP, P3D_DIM_PP, P3D_DIM_DP, P3D_DIM_EP, P3D_DIM_EDP};
    int ndims = c->moe ? 6 : 4; /* ep and edp for MoE models only */
    p3d_sb_puts(b, "{\"estimate\":true,\"memory\":{");
    kv_num(b, "weights", r6(c->mem_weights), 1);
    kv_num(b, "grads", r6(c->mem_grads), 1);
    kv_num(b, "optimizer", r6(c->mem_optim), 1);
    kv_num(b, "activations", r6(c->mem_act), 1);
    kv_num(b, "total", r6(c->mem_total), 1);
    kv_num(b, "gpu", r6(c->gpu_mem), 1);
    p3d_sb_puts(b, "\"gpu_source\":");
    p3d_sb_json_str(b, c->gpu_mem_source ? c->gpu_mem_source : "default");
    p3d_sb_putc(b, ',');
    kv_num(b, "reserve", r6(c->mem_reserve), 1);
    p3d_sb_puts(b, "\"reserve_source\":");
    p3d_sb_json_str(b, c->mem_reserve_source ? c->mem_reserve_source : "default");
    p3d_sb_printf(b, ",\"fits\":%s,\"fits_without_reserve\":%s,", c->fits ? "true" : "false",
                  c->fits_raw ? "true" : "false");
    kv_num(b, "params_per_gpu", r6(c->params_per_gpu), 1);
    kv_num(b, "activation_per_layer", r6(c->act_layer), 1);
    kv_num(b, "layers_per_stage", c->layers_per_stage, 1);
    kv_num(b, "inflight_micro_batches", c->inflight, 1);
    if (c->uneven) /* Megatron's uneven split: first, second (the fullest middle) and last stage */
        p3d_sb_printf(b, "\"stage_layers\":[%d,%d,%d],\"stage_memory\":[%.6g,%.6g,%.6g],", c->stage_layers[0],
                      c->stage_layers[1], c->stage_layers[2], r6(c->stage_mem[0]), r6(c->stage_mem[1]),
                      r6(c->stage_mem[2]));
    /* Megatron's arithmetic (docs/cost-model.md, "Memory") */
    kv_num(b, "params_most_loaded_shard", r6(c->params_shard), 1);
    kv_num(b, "params_most_loaded_shard_experts", r6(c->params_shard_expert), 1);
    kv_num(b, "bytes_per_param", r6(c->bytes_per_param), 1);
    kv_num(b, "main_grad_bytes", c->grad_bytes, 1);
    kv_num(b, "activation_embedding_output", r6(c->mem_act_embed), 1);
    kv_num(b, "activation_megatron", r6(c->mem_act_megatron), 1);
    kv_num(b, "activation_moe_dispatch", r6(c->mem_act_moe), 1);
    p3d_sb_printf(b, "\"sequence_parallel\":%s,\"activation_formula\":", c->seq_parallel ? "true" : "false");
    p3d_sb_json_str(b, c->act_formula ? c->act_formula : "megatron-sp");
    p3d_sb_puts(b, "},\"batch\":{");
    kv_num(b, "global", c->global_batch, 1);
    kv_num(b, "micro_batch", c->micro_batch_size, 1);
    kv_num(b, "micro_batches", c->micro_batches, 1);
    p3d_sb_printf(b, "\"micro_batches_assumed\":%s},\"dims\":{", c->micro_batches_assumed ? "true" : "false");
    for (int i = 0; i < ndims; i++) {
        int d = dims[i];
        if (i)
            p3d_sb_putc(b, ',');
        p3d_sb_json_str(b, p3d_dim_name(d));
        p3d_sb_puts(b, ":{\"link\":");
        p3d_sb_json_str(b, p3d_link_name(c->link[d]));
        p3d_sb_putc(b, ',');
        kv_num(b, "gbps", r6(c->link_gbps[d]), 1);
        p3d_sb_puts(b, "\"hops_by_link\":{");
        for (int l = 0, any = 0; c->has_hops && l < P3D_LINK_COUNT; l++)
            if (c->hops.n[d][l]) {
                p3d_sb_printf(b, "%s\"%s\":%ld", any++ ? "," : "", p3d_link_name((p3d_link)l), c->hops.n[d][l]);
            }
        p3d_sb_puts(b, "},");
        if (d == P3D_DIM_TP) {
            kv_num(b, "bytes_per_layer", r6(c->tp_bytes_layer), 1);
            kv_num(b, "bytes_per_step", r6(c->tp_bytes_step), 1);
            kv_num(b, "seconds", r6(c->tp_time), 0);
        } else if (d == P3D_DIM_CP) {
            kv_num(b, "bytes_per_layer", r6(c->cp_bytes_layer), 1);
            kv_num(b, "bytes_per_step", r6(c->cp_bytes_step), 1);
            kv_num(b, "seconds", r6(c->cp_time), 0);
        } else if (d == P3D_DIM_EP) {
            kv_num(b, "bytes_per_layer", r6(c->ep_bytes_layer), 1);
            kv_num(b, "bytes_per_step", r6(c->ep_bytes_step), 1);
            kv_num(b, "seconds", r6(c->ep_time), 0);
        } else if (d == P3D_DIM_EDP) {
            kv_num(b, "bytes_per_step", r6(c->edp_bytes_step), 1);
            kv_num(b, "seconds", r6(c->edp_time), 0);
        } else if (d == P3D_DIM_PP) {
            kv_num(b, "bytes_per_boundary", r6(c->pp_bytes_boundary), 1);
            kv_num(b, "bytes_per_step", r6(c->pp_bytes_step), 1);
            kv_num(b, "latency_seconds", r6(c->pp_latency), 1);
            kv_num(b, "seconds", r6(c->pp_time), 0);
        } else {
            kv_num(b, "bytes_per_step", r6(c->dp_bytes_step), 1);
            kv_num(b, "seconds", r6(c->dp_time), 1);
            kv_num(b, "overlapped_seconds", r6(c->dp_overlap), 1);
            kv_num(b, "exposed_seconds", r6(c->dp_exposed), 0);
        }
        p3d_sb_putc(b, '}');
    }
    p3d_sb_puts(b, "},");
    if (c->moe) {
        p3d_sb_puts(b, "\"moe\":{");
        kv_num(b, "params_expert", r6(c->params_expert), 1);
        kv_num(b, "params_expert_per_gpu", r6(c->params_expert_per_gpu), 1);
        kv_num(b, "params_active", r6(c->params_active), 1);
        kv_num(b, "moe_layers_per_stage", c->moe_layers_per_stage, 0);
        p3d_sb_puts(b, "},");
    }
    kv_num(b, "bubble", r6(c->bubble), 1);
    kv_num(b, "bubble_overhead", r6(c->bubble_overhead), 1);
    kv_num(b, "stage_imbalance", r6(c->stage_imbalance), 1);
    kv_num(b, "flops_per_step", r6(c->flops_step), 1);
    kv_num(b, "model_flops_per_step", r6(c->flops_model), 1);
    p3d_sb_puts(b, "\"gpu_model\":");
    p3d_sb_json_str(b, c->gpu_name ? c->gpu_name : "H100");
    p3d_sb_puts(b, ",\"tflops_source\":");
    p3d_sb_json_str(b, c->tflops_source ? c->tflops_source : "default");
    p3d_sb_putc(b, ',');
    kv_num(b, "tflops_sustained", c->tflops, 1);
    kv_num(b, "tflops_peak", c->peak_tflops, 1);
    kv_num(b, "compute_seconds", r6(c->compute_time), 1);
    kv_num(b, "step_seconds", r6(c->step_time), 1);
    kv_num(b, "mfu", r6(c->mfu), 0);
    p3d_sb_putc(b, '}');
}

static void dim_line(p3d_sb *b, const char *indent, const char *label, p3d_link l, double gbps, double bytes,
                     double secs, const p3d_cost *base, p3d_link bl, double bsecs)
{
    p3d_sb_printf(b, "%s%-30s %-6s %6.0f %10.2f %9.3f", indent, label, p3d_link_name(l), gbps, bytes / 1e9, secs);
    if (base)
        p3d_sb_printf(b, "  | %-6s %9.3f", p3d_link_name(bl), bsecs);
    p3d_sb_putc(b, '\n');
}

void p3d_cost_text(p3d_sb *b, const p3d_cost *c, const p3d_cost *base, const char *indent)
{
    char label[64];
    p3d_sb_printf(b, "%s%-30s %-6s %6s %10s %9s", indent, "per GPU per step (estimates)", "link", "GB/s", "GB",
                  "seconds");
    if (base)
        p3d_sb_printf(b, "  | %-6s %9s", "naive", "seconds");
    p3d_sb_putc(b, '\n');
    dim_line(b, indent, "TP all-reduce (all layers)", c->link[P3D_DIM_TP], c->link_gbps[P3D_DIM_TP], c->tp_bytes_step,
             c->tp_time, base, base ? base->link[P3D_DIM_TP] : 0, base ? base->tp_time : 0);
    long hops = 0;
    for (int l = 0; c->has_hops && l < P3D_LINK_COUNT; l++)
        hops += c->hops.n[P3D_DIM_PP][l];
    if (hops)
        snprintf(label, sizeof label, "PP send/recv, %ld/%ld hops XRACK", c->hops.n[P3D_DIM_PP][P3D_LINK_XRACK], hops);
    else
        snprintf(label, sizeof label, "PP send/recv");
    dim_line(b, indent, label, c->link[P3D_DIM_PP], c->link_gbps[P3D_DIM_PP], c->pp_bytes_step, c->pp_time, base,
             base ? base->link[P3D_DIM_PP] : 0, base ? base->pp_time : 0);
    if (c->moe)
        dim_line(b, indent, "EP all-to-all (MoE layers)", c->link[P3D_DIM_EP], c->link_gbps[P3D_DIM_EP],
                 c->ep_bytes_step, c->ep_time, base, base ? base->link[P3D_DIM_EP] : 0, base ? base->ep_time : 0);
    dim_line(b, indent, "DP all-reduce (exposed part)", c->link[P3D_DIM_DP], c->link_gbps[P3D_DIM_DP], c->dp_bytes_step,
             c->dp_exposed, base, base ? base->link[P3D_DIM_DP] : 0, base ? base->dp_exposed : 0);
    p3d_sb_printf(b,
                  "%scompute %.2f s at %.0f TFLOP/s (%s, %s; MFU vs %.0f peak), bubble %.1f%%, step %.2f s, "
                  "MFU %.1f%%",
                  indent, c->compute_time, c->tflops, c->gpu_name ? c->gpu_name : "H100",
                  c->tflops_source ? c->tflops_source : "default", c->peak_tflops, 100 * c->bubble, c->step_time,
                  100 * c->mfu);
    if (base)
        p3d_sb_printf(b, "  | naive step %.2f s, MFU %.1f%%", base->step_time, 100 * base->mfu);
    p3d_sb_putc(b, '\n');
    p3d_sb_printf(b,
                  "%smemory per GPU %.1f of %.1f GB (%s): weights %.1f, grads %.1f, optimizer %.1f, "
                  "activations %.1f%s\n",
                  indent, c->mem_total / 1e9, c->gpu_mem / 1e9, c->gpu_mem_source ? c->gpu_mem_source : "default",
                  c->mem_weights / 1e9, c->mem_grads / 1e9, c->mem_optim / 1e9, c->mem_act / 1e9,
                  c->fits ? "" : "  DOES NOT FIT");
    p3d_sb_printf(b,
                  "%s(Megatron's arithmetic: %.3gB params on the most loaded shard x %.3g B/param, activations "
                  "%s, sequence parallelism %s; par3drun keeps %.1f GB more free for CUDA context, NCCL "
                  "buffers, fragmentation)\n",
                  indent, c->params_shard / 1e9, c->bytes_per_param, c->act_formula ? c->act_formula : "megatron-sp",
                  c->seq_parallel ? "on" : "off", c->mem_reserve / 1e9);
    if (base)
        p3d_cost_compare_note(b, c, "this placement", base, "naive", indent);
    if (c->tp_bytes_layer > 0)
        p3d_sb_printf(b, "%s(TP: the all-reduces of %d layers per stage x %d micro-batches)\n", indent,
                      c->layers_per_stage, c->micro_batches);
    if (c->micro_batches_assumed)
        p3d_sb_printf(b, "%s(micro-batches not given: assumed m = 4 x pp = %d)\n", indent, c->micro_batches);
}

/* The dimension whose time (per GPU per step, as the step counts it) differs
 * most between two estimates, for the comparison note. */
static double dim_cost(const p3d_cost *c, int d)
{
    double stretch = 1.0 + c->bubble_overhead;
    return d == P3D_DIM_TP   ? c->tp_time * stretch
           : d == P3D_DIM_PP ? c->pp_time * stretch
           : d == P3D_DIM_EP ? c->ep_time * stretch
                             : c->dp_exposed;
}

void p3d_cost_compare_note(p3d_sb *b, const p3d_cost *c, const char *name, const p3d_cost *base, const char *base_name,
                           const char *indent)
{
    (void)name;
    static const int dims[4] = {P3D_DIM_TP, P3D_DIM_PP, P3D_DIM_DP, P3D_DIM_EP};
    if (!base || !(base->step_time < c->step_time))
        return;
    /* which dimensions' traffic moved to which link, and what that costs
     * (positive: the baseline saves time there) */
    p3d_sb_printf(b, "%s%s's estimate is %.2f s faster:\n%s   ", indent, base_name, c->step_time - base->step_time,
                  indent);
    int shown = 0;
    for (int i = 0; i < 4; i++) {
        int d = dims[i];
        double delta = dim_cost(c, d) - dim_cost(base, d);
        if (c->link[d] == base->link[d] || fabs(delta) < 0.0005)
            continue;
        p3d_sb_printf(b, "%sits %s on %s instead of %s %s %.2f s", shown ? ", " : "", p3d_dim_name(d),
                      p3d_link_name(base->link[d]), p3d_link_name(c->link[d]), delta >= 0 ? "saves" : "costs",
                      fabs(delta));
        shown++;
    }
    if (!shown)
        p3d_sb_puts(b, "same links; compute or bubble differ");
    p3d_sb_puts(b, ".\n");
}
