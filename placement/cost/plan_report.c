/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan_report.c — `par3drun plan`'s text: the best layouts, one per mesh
 * shape, and why each wins or loses against the best (docs/plan.md). The
 * JSON of the same plan is plan_report_json.c.
 */
#include "cost_internal.h"
#include "plan_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const rej_text[P3D_PLAN_NREJ] = {
    "do not fit in GPU memory",
    "would put TP outside an NVLink domain",
    "have a dp that does not divide the global batch",
    "have a tp that does not divide the heads/hidden size",
    "have a pp that does not divide the layers",
    "fit only without the memory reserve (see 'dropped for headroom')",
    "have a cp that does not split the sequence into 2 x cp chunks",
};

/* Link class for the table; "-" when the dimension has size 1. */
static const char *lname(p3d_link l)
{
    return l == P3D_LINK_SELF ? "-" : p3d_link_name(l);
}

/* The best variant of each (tp, pp, dp) shape, in rank order (rows are
 * sorted fastest first, so the first row of a shape is its best). Returns a
 * malloc'd index array; *n gets its length (at most top). */
size_t *p3d_plan_pick_shapes(const p3d_plan *pl, int top, size_t *n)
{
    size_t *idx = malloc((pl->nrows ? pl->nrows : 1) * sizeof *idx);
    *n = 0;
    if (!idx)
        return NULL;
    for (size_t i = 0; i < pl->nrows && (int)*n < top; i++) {
        const p3d_plan_row *r = &pl->rows[i];
        int seen = 0;
        for (size_t k = 0; k < *n && !seen; k++) {
            const p3d_plan_row *q = &pl->rows[idx[k]];
            seen = q->tp == r->tp && q->pp == r->pp && q->dp == r->dp && q->cp == r->cp && q->ep == r->ep &&
                   q->etp == r->etp;
        }
        if (!seen)
            idx[(*n)++] = i;
    }
    return idx;
}

/* Appends text word-wrapped at 100 columns, continuation lines indented. */
static void wrapped(p3d_sb *b, const char *text, const char *first, const char *cont)
{
    size_t col = strlen(first);
    p3d_sb_puts(b, first);
    const char *p = text;
    int at_start = 1;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ' ')
            e++;
        size_t wl = (size_t)(e - p);
        if (wl == 0)
            break;
        /* a figure keeps its unit on its line ("18.55 s", "6.07 s,") */
        size_t need = wl;
        if (e[0] == ' ' && e[1] == 's' && (e[2] == 0 || e[2] == ' ' || (strchr(",.;:)", e[2]) && e[2])))
            need += 2 + (e[2] && e[2] != ' ');
        if (!at_start && col + 1 + need > 100) {
            p3d_sb_putc(b, '\n');
            p3d_sb_puts(b, cont);
            col = strlen(cont);
            at_start = 1;
        }
        if (!at_start) {
            p3d_sb_putc(b, ' ');
            col++;
        }
        p3d_sb_putn(b, p, wl);
        col += wl;
        at_start = 0;
        p = e;
    }
    p3d_sb_putc(b, '\n');
}

/* Step time split into parts that add up: compute (with the slowest-stage
 * imbalance), TP, PP, EP (MoE all-to-alls), bubble (the idle share
 * stretching those), DP. CP is part of no row here (cp > 1 only for long
 * sequences; its time is in the cost JSON). */
enum { PART_COMPUTE, PART_TP, PART_PP, PART_BUBBLE, PART_DP, PART_EP, NPARTS };
static void parts(const p3d_cost *c, double out[NPARTS])
{
    out[PART_COMPUTE] = c->compute_time;
    out[PART_TP] = c->tp_time;
    out[PART_PP] = c->pp_time;
    out[PART_EP] = c->ep_time;
    out[PART_BUBBLE] = (c->compute_time + c->tp_time + c->pp_time + c->ep_time) * c->bubble_overhead;
    out[PART_DP] = c->dp_exposed;
}

static void describe_part(p3d_sb *b, int k, const p3d_plan_row *r, const p3d_plan_row *best, double delta)
{
    const p3d_cost *c = &r->cost, *w = &best->cost;
    p3d_sb_printf(b, "%s%.2f s ", delta >= 0 ? "+" : "-", fabs(delta));
    switch (k) {
    case PART_COMPUTE:
        p3d_sb_printf(b, "compute (slowest stage %.1f%% over average vs %.1f%%)", 100 * (c->stage_imbalance - 1),
                      100 * (w->stage_imbalance - 1));
        break;
    case PART_TP:
        p3d_sb_printf(b, "TP (tp=%d on %s vs tp=%d on %s)", r->tp, p3d_link_name(c->link[P3D_DIM_TP]), best->tp,
                      p3d_link_name(w->link[P3D_DIM_TP]));
        break;
    case PART_PP:
        p3d_sb_printf(b, "PP send/recv (%s vs %s)", p3d_link_name(c->link[P3D_DIM_PP]),
                      p3d_link_name(w->link[P3D_DIM_PP]));
        break;
    case PART_BUBBLE: p3d_sb_printf(b, "bubble (%.1f%% vs %.1f%%)", 100 * c->bubble, 100 * w->bubble); break;
    case PART_EP:
        p3d_sb_printf(b, "EP all-to-all (ep=%d on %s vs ep=%d on %s)", r->ep, lname(c->link[P3D_DIM_EP]), best->ep,
                      lname(w->link[P3D_DIM_EP]));
        break;
    default:
        if (c->moe)
            p3d_sb_printf(b, "exposed DP + expert gradient all-reduce (%.2f vs %.2f GB on %s/%s)",
                          (c->dp_bytes_step + c->edp_bytes_step) / 1e9, (w->dp_bytes_step + w->edp_bytes_step) / 1e9,
                          lname(c->link[P3D_DIM_DP]), lname(c->link[P3D_DIM_EDP]));
        else if (r->dp * r->cp > 1)
            p3d_sb_printf(b, "exposed DP all-reduce (%.2f vs %.2f GB on %s)", c->dp_bytes_step / 1e9,
                          w->dp_bytes_step / 1e9, lname(c->link[P3D_DIM_DP]));
        else
            p3d_sb_printf(b, "exposed DP all-reduce (none at dp=1 vs %.2f GB on %s)", w->dp_bytes_step / 1e9,
                          lname(w->link[P3D_DIM_DP]));
        break;
    }
}

/* One "why" sentence for row r against the best row. */
void p3d_plan_why(p3d_sb *b, const p3d_plan_row *r, const p3d_plan_row *best, int is_best)
{
    const p3d_cost *c = &r->cost;
    double dpshare = c->step_time > 0 ? c->dp_exposed / c->step_time : 0;
    if (is_best) {
        p3d_sb_printf(b,
                      "fastest estimate: compute %.2f s, bubble %.1f%%, TP %.2f s on %s (%.0f GB/s), "
                      "PP %.2f s on %s, ",
                      c->compute_time, 100 * c->bubble, c->tp_time, lname(c->link[P3D_DIM_TP]),
                      c->link_gbps[P3D_DIM_TP], c->pp_time, lname(c->link[P3D_DIM_PP]));
        if (c->moe && r->ep > 1) {
            /* the issue's question first: is every EP group on NVLink? */
            int block = r->ep * r->etp;
            p3d_sb_printf(b, "EP all-to-all %.2f s on %s (ep=%d, etp=%d: %.1f GB per GPU; ", c->ep_time,
                          lname(c->link[P3D_DIM_EP]), r->ep, r->etp, c->ep_bytes_step / 1e9);
            if (c->link[P3D_DIM_EP] <= P3D_LINK_MNNVL)
                p3d_sb_printf(b, "every expert block of etp*ep = %d GPUs inside one NVLink domain), ", block);
            else
                p3d_sb_printf(b,
                              "expert blocks of etp*ep = %d GPUs do not fit one NVLink domain, so the "
                              "all-to-alls run on %s), ",
                              block, lname(c->link[P3D_DIM_EP]));
        } else if (c->moe) {
            p3d_sb_puts(b, "no EP all-to-all (ep=1: every GPU holds all experts), ");
        }
        if (c->moe && (r->dp > 1 || r->edp > 1))
            p3d_sb_printf(b,
                          "DP all-reduce %.2f s on %s and expert gradients over edp=%d %.2f s on %s, %.2f s of "
                          "them exposed after the backward (%.1f%% of the step);",
                          c->dp_time, lname(c->link[P3D_DIM_DP]), r->edp, c->edp_time, lname(c->link[P3D_DIM_EDP]),
                          c->dp_exposed, 100 * dpshare);
        else if (r->dp > 1)
            p3d_sb_printf(b,
                          "DP all-reduce %.2f s on %s, %.2f s of it exposed after the backward (%.1f%% of "
                          "the step);",
                          c->dp_time, lname(c->link[P3D_DIM_DP]), c->dp_exposed, 100 * dpshare);
        else
            p3d_sb_puts(b, "no DP all-reduce (dp=1);");
    } else {
        double a[NPARTS], w[NPARTS], d[NPARTS];
        parts(c, a);
        parts(&best->cost, w);
        for (int k = 0; k < NPARTS; k++)
            d[k] = a[k] - w[k];
        p3d_sb_printf(b, "%+.1f%% step time vs #1:", 100 * (c->step_time / best->cost.step_time - 1));
        /* the biggest differences first, at most three, skipping noise */
        int used[NPARTS] = {0}, shown = 0;
        for (int n = 0; n < 3; n++) {
            int k = -1;
            for (int j = 0; j < NPARTS; j++)
                if (!used[j] && (k < 0 || fabs(d[j]) > fabs(d[k])))
                    k = j;
            if (k < 0 || fabs(d[k]) < 0.002 * best->cost.step_time)
                break;
            used[k] = 1;
            p3d_sb_puts(b, shown ? ", " : " ");
            describe_part(b, k, r, best, d[k]);
            shown++;
        }
        if (!shown)
            p3d_sb_puts(b, " about the same time");
        p3d_sb_putc(b, ';');
    }
    double free_gb = (c->gpu_mem - c->mem_total) / 1e9;
    p3d_sb_printf(b, " %.1f GB of %.1f GB free per GPU (%.1f GB of it the reserve)", free_gb, c->gpu_mem / 1e9,
                  c->mem_reserve / 1e9);
    if (!is_best && fabs(c->mem_total - best->cost.mem_total) > 0.05 * c->gpu_mem)
        p3d_sb_printf(b, " (%s headroom than #1)", c->mem_total < best->cost.mem_total ? "more" : "less");
    p3d_sb_putc(b, '.');
    /* whose placement the figures are (docs/plan.md, "Which policy") */
    if (r->placed && r->nerrors)
        p3d_sb_printf(b, " Placed by %s, which fails %d error-level check%s.", r->policy, r->nerrors,
                      r->nerrors == 1 ? "" : "s");
    else if (r->placed && r->nwarnings)
        p3d_sb_printf(b, " Placed by %s, which warns %s.", r->policy, r->warned);
    else if (r->placed)
        p3d_sb_printf(b, " Placed by %s.", r->policy);
    else
        p3d_sb_puts(b, " Plan's own estimate (no bundled policy placed it).");
}

static const char *dtype_name(int w)
{
    return w == 4 ? "fp32" : "bf16/fp16";
}

static void zero_text(p3d_sb *b, int mode)
{
    if (mode == P3D_PLAN_ZERO_SEARCH)
        p3d_sb_puts(b, "ZeRO 0-3 searched");
    else if (mode == P3D_PLAN_ZERO_DEFAULT)
        p3d_sb_puts(b, "ZeRO-1 when dp > 1 (default)");
    else
        p3d_sb_printf(b, "ZeRO-%d", mode);
}

/* Which dimensions were searched and which pinned, one sentence. */
static void search_scope(p3d_sb *b, const p3d_plan *pl)
{
    const p3d_plan_pins *pn = &pl->pins;
    const struct {
        const char *name;
        int pin;
    } dims[] = {{"tp", pn->tp},
                {"pp", pn->pp},
                {"cp", pn->cp},
                {"micro-batch", pn->micro_batch},
                {"virtual stages", pn->virtual_stages}};
    int np = 0;
    p3d_sb_puts(b, " Searched: dp");
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        if (dims[k].pin)
            continue;
        if (k == 2 && !pl->searched_cp)
            continue;
        p3d_sb_printf(b, ", %s", dims[k].name);
    }
    if (pl->job.model.experts > 0) {
        if (!pn->ep)
            p3d_sb_printf(b, ", ep (dividing the %d experts)", pl->job.model.experts);
        if (!pn->etp)
            p3d_sb_puts(b, ", etp (tp or 1)");
    }
    if (pl->pins.micro_batch == 0 && pl->job.micro_batches == 0)
        p3d_sb_puts(b, ", micro-batch count");
    if (pl->zero_mode == P3D_PLAN_ZERO_SEARCH)
        p3d_sb_puts(b, ", ZeRO stage");
    p3d_sb_putc(b, '.');
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        if (dims[k].pin)
            p3d_sb_printf(b, "%s %s=%d", np++ ? "," : " Pinned:", dims[k].name, dims[k].pin);
    if (pl->job.micro_batches > 0)
        p3d_sb_printf(b, "%s micro-batches=%d", np++ ? "," : " Pinned:", pl->job.micro_batches);
    if (pn->ep)
        p3d_sb_printf(b, "%s ep=%d", np++ ? "," : " Pinned:", pn->ep);
    if (pn->etp)
        p3d_sb_printf(b, "%s etp=%d", np++ ? "," : " Pinned:", pn->etp);
    if (np)
        p3d_sb_putc(b, '.');
    if (!pn->cp && !pl->searched_cp)
        p3d_sb_printf(b, " cp=1 (sequence %d < %d; --cp N to try it).", pl->job.model.seq_len, P3D_PLAN_CP_MIN_SEQ);
}

static void header(p3d_sb *b, const p3d_plan *pl)
{
    const p3d_job *j = &pl->job;
    const p3d_model *m = &j->model;
    const int w = j->dtype_bytes > 0 ? j->dtype_bytes : 2;
    p3d_sb_puts(b, "par3drun plan: estimates from the cost model in docs/cost-model.md, not measurements\n");
    p3d_model_counts mc;
    int counted = p3d_model_count(m, &mc, NULL) == 0;
    p3d_sb_printf(b, "model    %s: %.1fB params%s, %d layers, hidden %d, %d heads, seq %d, vocab %d\n", m->name,
                  m->params / 1e9, m->params_forced ? " (--params)" : "", m->layers, m->hidden, m->heads, m->seq_len,
                  m->vocab);
    p3d_model_describe(b, m, "         ");
    if (m->experts > 0 && counted)
        p3d_sb_printf(b,
                      "         MoE: %d experts (top-%d) of FFN %d, %d dense layer%s first; %.1fB in "
                      "routed experts, %.1fB active per token\n",
                      m->experts, m->top_k, m->moe_ffn, m->dense_layers, m->dense_layers == 1 ? "" : "s",
                      mc.expert_block / 1e9, mc.active / 1e9);
    {
        p3d_sb cl = {0};
        p3d_sb_printf(&cl, "%s: %d node%s x %d GPUs = %d GPUs, ", pl->cluster_source ? pl->cluster_source : "(cluster)",
                      pl->nodes, pl->nodes == 1 ? "" : "s", pl->gpus_per_node, pl->gpus);
        if (pl->racks_unknown)
            p3d_sb_puts(&cl, "no racks given (all nodes assumed on one leaf switch; add \"rack\" to the "
                             "cluster file)");
        else if (pl->nracks == 1)
            p3d_sb_puts(&cl, "1 rack");
        else
            p3d_sb_printf(&cl, "%d racks (the smallest %d node%s)", pl->nracks, pl->nodes_per_rack,
                          pl->nodes_per_rack == 1 ? "" : "s");
        p3d_sb_printf(&cl, ", NVLink domain %d GPUs", pl->nvl_gpus);
        if (pl->mnnvl_gpus)
            p3d_sb_printf(&cl, ", multi-node NVLink %d GPUs", pl->mnnvl_gpus);
        char *cs = p3d_sb_finish(&cl);
        wrapped(b, cs ? cs : "", "cluster  ", "         ");
        free(cs);
    }
    p3d_sb_printf(b, "job      global batch %d, %s, recompute %s, ", j->global_batch, dtype_name(w),
                  p3d_recompute_name(j->recompute));
    zero_text(b, pl->zero_mode);
    if (pl->pins.virtual_stages > 1)
        p3d_sb_printf(b, ", interleaved 1F1B v=%d\n", pl->pins.virtual_stages);
    else if (pl->pins.virtual_stages == 1)
        p3d_sb_puts(b, ", 1F1B\n");
    else
        p3d_sb_puts(b, ", 1F1B or interleaved\n");
    const p3d_cost *any = pl->nrows ? &pl->rows[0].cost : pl->has_misfit ? &pl->misfit.cost : NULL;
    if (any) {
        p3d_sb as = {0};
        int unknown = any->tflops_source && strcmp(any->tflops_source, "default") == 0;
        if (unknown)
            p3d_sb_printf(&as, "GPU model unknown, %s figures assumed (--tflops to change): ",
                          any->gpu_name ? any->gpu_name : "H100");
        else
            p3d_sb_printf(&as, "%s (%s): ", any->gpu_name ? any->gpu_name : "H100",
                          any->tflops_source ? any->tflops_source : "default");
        p3d_sb_printf(&as,
                      "%.0f TFLOP/s sustained per GPU, MFU against %.0f peak; %.1f GB per GPU (%s), "
                      "%.1f GB of it kept free (%s)",
                      any->tflops, any->peak_tflops, any->gpu_mem / 1e9, any->gpu_mem_source, any->mem_reserve / 1e9,
                      any->mem_reserve_source && strcmp(any->mem_reserve_source, "default") == 0
                          ? "default: 5%, at least 3 GB; --mem-reserve to change"
                          : "--mem-reserve");
        char *ass = p3d_sb_finish(&as);
        wrapped(b, ass ? ass : "", "assumed  ", "         ");
        free(ass);
    }
    p3d_sb_printf(b, "links    GB/s per direction: NV %.0f, MNNVL %.0f, PCIe %.0f-%.0f, RACK %.0f, XRACK %.0f\n",
                  pl->link_gbps[P3D_LINK_NVLINK], pl->link_gbps[P3D_LINK_MNNVL], pl->link_gbps[P3D_LINK_SYS],
                  pl->link_gbps[P3D_LINK_PIX], pl->link_gbps[P3D_LINK_RACK], pl->link_gbps[P3D_LINK_XRACK]);
    if (any) {
        /* the first question: does the model fit one GPU at all? */
        /* bytes per parameter as the cost model counts them (Megatron's
         * 18 for bf16 training: 2 weights + 4 main gradients + 12 Adam) */
        int bpp = w + (w >= 4 ? 4 : j->grad_bf16 ? 2 : 4) + (w >= 4 ? 8 : 12);
        double gm = any->gpu_mem, wbytes = w * m->params, state = (double)bpp * m->params;
        p3d_sb *t = b;
        char line[400];
        if (wbytes > gm)
            snprintf(line, sizeof line,
                     "%s weights alone are %.1f GB > %.1f GB: the model does not fit one GPU; "
                     "with gradients and Adam state (%d B/param, %.0f GB) it needs tp x pp >= %d GPUs "
                     "before ZeRO and activations.",
                     w == 4 ? "FP32" : "FP16/BF16", wbytes / 1e9, gm / 1e9, bpp, state / 1e9, (int)ceil(state / gm));
        else if (state > gm)
            snprintf(line, sizeof line,
                     "weights (%.1f GB) fit one GPU, but with gradients and Adam state (%d B/param, %.0f GB) "
                     "they need %d GPUs (tp x pp, or ZeRO over dp) before activations.",
                     wbytes / 1e9, bpp, state / 1e9, (int)ceil(state / gm));
        else
            snprintf(line, sizeof line, "model state (%d B/param, %.1f GB) fits one GPU.", bpp, state / 1e9);
        wrapped(t, line, "memory   ", "         ");
    }
    size_t rej = 0;
    for (int k = 0; k < P3D_PLAN_NREJ; k++)
        rej += pl->rejected[k];
    p3d_sb sbl = {0};
    p3d_sb_printf(&sbl, "%zu mesh shapes (tp x cp x pp x dp = %d), %zu kept", pl->searched, pl->gpus,
                  pl->searched - rej);
    int first = 1;
    for (int k = 0; k < P3D_PLAN_NREJ; k++)
        if (pl->rejected[k]) {
            p3d_sb_printf(&sbl, "%s %zu %s", first ? "; rejected:" : ",", pl->rejected[k], rej_text[k]);
            first = 0;
        }
    p3d_sb_putc(&sbl, '.');
    search_scope(&sbl, pl);
    char *s = p3d_sb_finish(&sbl);
    wrapped(b, s ? s : "", "search   ", "         ");
    free(s);
}

/* A shell word: as is when it holds only safe characters, else quoted. */
static void shell_word(p3d_sb *b, const char *w)
{
    if (w && *w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=./:,@%") == strlen(w)) {
        p3d_sb_puts(b, w);
        return;
    }
    p3d_sb_putc(b, '\'');
    for (const char *p = w ? w : ""; *p; p++)
        if (*p == '\'')
            p3d_sb_puts(b, "'\\''");
        else
            p3d_sb_putc(b, *p);
    p3d_sb_putc(b, '\'');
}

/* Whether two models have the same architecture and shape. */
static int same_arch(const p3d_model *a, const p3d_model *b)
{
    return a->layers == b->layers && a->hidden == b->hidden && a->heads == b->heads && a->seq_len == b->seq_len &&
           a->vocab == b->vocab && a->experts == b->experts && a->top_k == b->top_k && a->moe_ffn == b->moe_ffn &&
           a->shared_experts == b->shared_experts && a->dense_layers == b->dense_layers && a->ffn == b->ffn &&
           a->query_groups == b->query_groups && a->kv_channels == b->kv_channels && a->swiglu == b->swiglu &&
           a->untied == b->untied && a->rmsnorm == b->rmsnorm && a->moe_shared_ffn == b->moe_shared_ffn;
}

/* The complete dry-run command for row r: the same cluster, model and job
 * options as the plan, so it can be pasted as is. */
void p3d_plan_run_line(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *r)
{
    const p3d_job *j = &pl->job;
    const p3d_model *m = &j->model;
    p3d_model pm;
    int preset = !m->config && p3d_model_preset(m->name, &pm, NULL) == 0;
    p3d_sb_puts(b, "par3drun --dry-run ");
    p3d_sb_puts(b, pl->cluster_is_topology ? "--topology " : "--cluster ");
    shell_word(b, pl->cluster_source ? pl->cluster_source : "CLUSTER.json");
    /* the model: a preset as such, anything else (a config with options
     * on it, Megatron's arguments) in Megatron's argument names */
    if (preset && !m->params_forced && same_arch(&pm, m)) {
        p3d_sb_puts(b, " --model ");
        shell_word(b, m->name);
    } else if (m->config && !m->params_forced) {
        p3d_model cm;
        if (p3d_model_config_load(m->config, &cm, NULL) == 0 && cm.seq_len == m->seq_len && cm.layers == m->layers &&
            cm.hidden == m->hidden && cm.vocab == m->vocab && cm.experts == m->experts) {
            p3d_sb_puts(b, " --model-config ");
            shell_word(b, m->config);
        } else {
            p3d_sb_putc(b, ' ');
            p3d_model_megatron_args(b, m);
        }
    } else {
        p3d_sb_putc(b, ' ');
        p3d_model_megatron_args(b, m);
        if (m->params_forced)
            p3d_sb_printf(b, " --params %.6g", m->params);
    }
    p3d_sb_printf(b, " --tp %d --pp %d --dp %d", r->tp, r->pp, r->dp);
    if (pl->exclude) {
        p3d_sb_puts(b, " --exclude ");
        shell_word(b, pl->exclude);
    }
    if (pl->spares > 0)
        p3d_sb_printf(b, " --spares %d", pl->spares);
    if (pl->best_policy[0] && strcmp(pl->best_policy, "megatron") != 0) {
        p3d_sb_puts(b, " --policy ");
        shell_word(b, pl->best_policy);
    }
    if (r->cp > 1)
        p3d_sb_printf(b, " --cp %d", r->cp);
    if (r->ep > 1)
        p3d_sb_printf(b, " --ep %d", r->ep);
    if (m->experts > 0 && r->etp != r->tp)
        p3d_sb_printf(b, " --etp %d", r->etp);
    p3d_sb_printf(b, " --micro-batch %d --global-batch %d --zero %d", r->micro_batch, j->global_batch, r->zero);
    if (r->virtual_stages > 1)
        p3d_sb_printf(b, " --virtual-stages %d", r->virtual_stages);
    if (j->dtype_bytes == 4)
        p3d_sb_puts(b, " --dtype fp32");
    if (j->recompute != 1)
        p3d_sb_printf(b, " --recompute %s", p3d_recompute_name(j->recompute));
    if (j->gpu_mem_bytes > 0)
        p3d_sb_printf(b, " --gpu-mem %.6g", j->gpu_mem_bytes / 1e9);
    if (j->mem_reserve_set)
        p3d_sb_printf(b, " --mem-reserve %.6g", j->mem_reserve_bytes / 1e9);
    if (j->tflops > 0)
        p3d_sb_printf(b, " --tflops %.6g", j->tflops);
    if (j->no_seq_parallel)
        p3d_sb_puts(b, " --no-sequence-parallel");
    if (j->grad_bf16)
        p3d_sb_puts(b, " --grad-reduce-in-bf16");
}

char *p3d_plan_none_reason(const p3d_plan *pl)
{
    p3d_sb b = {0};
    size_t rules = 0;
    for (int k = 0; k < P3D_PLAN_NREJ; k++)
        if (k != P3D_PLAN_REJ_MEMORY)
            rules += pl->rejected[k];
    if (pl->searched == 0) {
        p3d_sb_printf(&b, "no tp x pp x dp uses all %d GPUs with tp inside an NVLink domain of %d GPUs", pl->gpus,
                      pl->mnnvl_gpus > pl->gpus_per_node ? pl->mnnvl_gpus : pl->gpus_per_node);
    } else if (pl->has_headroom_drop) {
        p3d_sb_printf(&b,
                      "no layout fits in GPU memory with %.1f GB per GPU kept free: the fastest needs %.1f of "
                      "%.1f GB (--mem-reserve GB to change the reserve)",
                      pl->headroom_drop.cost.mem_reserve / 1e9, pl->headroom_drop.cost.mem_total / 1e9,
                      pl->headroom_drop.cost.gpu_mem / 1e9);
    } else if (pl->has_misfit) {
        p3d_sb_printf(&b,
                      "no layout fits in GPU memory: %zu of %zu mesh shapes pass the rules, but even the "
                      "closest needs %.1f GB per GPU of %.1f GB",
                      pl->searched - rules, pl->searched, pl->misfit.cost.mem_total / 1e9,
                      pl->misfit.cost.gpu_mem / 1e9);
    } else {
        p3d_sb_printf(&b, "none of the %zu mesh shapes (tp x pp x dp = %d) is valid:", pl->searched, pl->gpus);
        int first = 1;
        for (int k = 0; k < P3D_PLAN_NREJ; k++)
            if (k != P3D_PLAN_REJ_MEMORY && pl->rejected[k]) {
                p3d_sb_printf(&b, "%s %zu %s", first ? "" : ",", pl->rejected[k], rej_text[k]);
                first = 0;
            }
        if (pl->job.micro_batch_size > 0 || pl->job.micro_batches > 0)
            p3d_sb_puts(&b, " (or none matches the --micro-batch/--micro-batches given)");
    }
    return p3d_sb_finish(&b);
}

/* " ep=E etp=T" for an MoE row, "" otherwise (static buffer: one use per
 * statement). */
static const char *ep_text(const p3d_plan_row *r)
{
    static char buf[48];
    if (!r->cost.moe)
        return "";
    snprintf(buf, sizeof buf, " ep=%d etp=%d", r->ep, r->etp);
    return buf;
}

/* The table of the picked rows: MoE rows show the expert grid and the EP
 * all-to-all's link, dense rows the exposed DP share. */
static void rows_table(p3d_sb *b, const p3d_plan *pl, const size_t *idx, size_t n)
{
    if (pl->job.model.experts > 0) {
        /* MoE: the expert grid's ep and etp and the EP all-to-all's link */
        p3d_sb_printf(b, "%2s %3s %3s %3s %4s %3s %3s %3s %3s %5s %4s %12s %5s %6s %-5s %-5s %-5s %-5s %5s %7s %5s\n",
                      "#", "tp", "cp", "pp", "dp", "ep", "etp", "v", "b", "m", "ZeRO", "mem/GPU GB", "free", "bubble",
                      "TP", "PP", "EP", "DP", "EP%", "step s", "MFU");
        for (size_t i = 0; i < n; i++) {
            const p3d_plan_row *r = &pl->rows[idx[i]];
            const p3d_cost *c = &r->cost;
            char mem[32];
            snprintf(mem, sizeof mem, "%.1f/%.0f", c->mem_total / 1e9, c->gpu_mem / 1e9);
            p3d_sb_printf(b,
                          "%2zu %3d %3d %3d %4d %3d %3d %3d %3d %5d %4d %12s %4.0f%% %5.1f%% %-5s %-5s %-5s %-5s "
                          "%4.1f%% %7.2f %4.1f%%\n",
                          i + 1, r->tp, r->cp, r->pp, r->dp, r->ep, r->etp, r->virtual_stages, r->micro_batch,
                          r->micro_batches, r->zero, mem, 100 * (1 - c->mem_total / c->gpu_mem), 100 * c->bubble,
                          lname(c->link[P3D_DIM_TP]), lname(c->link[P3D_DIM_PP]), lname(c->link[P3D_DIM_EP]),
                          lname(c->link[P3D_DIM_DP]), c->step_time > 0 ? 100 * c->ep_time / c->step_time : 0,
                          c->step_time, 100 * c->mfu);
        }
        return;
    }
    p3d_sb_printf(b, "%2s %3s %3s %3s %4s %3s %3s %5s %4s %12s %5s %6s %-5s %-5s %-5s %5s %7s %5s\n", "#", "tp", "cp",
                  "pp", "dp", "v", "b", "m", "ZeRO", "mem/GPU GB", "free", "bubble", "TP", "PP", "DP", "DP%", "step s",
                  "MFU");
    for (size_t i = 0; i < n; i++) {
        const p3d_plan_row *r = &pl->rows[idx[i]];
        const p3d_cost *c = &r->cost;
        char mem[32];
        snprintf(mem, sizeof mem, "%.1f/%.0f", c->mem_total / 1e9, c->gpu_mem / 1e9);
        p3d_sb_printf(b,
                      "%2zu %3d %3d %3d %4d %3d %3d %5d %4d %12s %4.0f%% %5.1f%% %-5s %-5s %-5s %4.1f%% %7.2f "
                      "%4.1f%%\n",
                      i + 1, r->tp, r->cp, r->pp, r->dp, r->virtual_stages, r->micro_batch, r->micro_batches, r->zero,
                      mem, 100 * (1 - c->mem_total / c->gpu_mem), 100 * c->bubble, lname(c->link[P3D_DIM_TP]),
                      lname(c->link[P3D_DIM_PP]), lname(c->link[P3D_DIM_DP]),
                      c->step_time > 0 ? 100 * c->dp_exposed / c->step_time : 0, c->step_time, 100 * c->mfu);
    }
}

/* "why": one paragraph a row, against the best. */
static void rows_why(p3d_sb *b, const p3d_plan *pl, const size_t *idx, size_t n)
{
    p3d_sb_puts(b, "\nwhy\n");
    for (size_t i = 0; i < n; i++) {
        const p3d_plan_row *r = &pl->rows[idx[i]];
        p3d_sb s = {0};
        p3d_plan_why(&s, r, &pl->rows[idx[0]], i == 0);
        char *txt = p3d_sb_finish(&s);
        char first[80];
        if (pl->job.model.experts > 0)
            snprintf(first, sizeof first, "%2zu tp=%d cp=%d pp=%d dp=%d ep=%d etp=%d: ", i + 1, r->tp, r->cp, r->pp,
                     r->dp, r->ep, r->etp);
        else if (r->cp > 1)
            snprintf(first, sizeof first, "%2zu tp=%d cp=%d pp=%d dp=%d: ", i + 1, r->tp, r->cp, r->pp, r->dp);
        else
            snprintf(first, sizeof first, "%2zu tp=%d pp=%d dp=%d: ", i + 1, r->tp, r->pp, r->dp);
        wrapped(b, txt ? txt : "", first, "   ");
        free(txt);
    }
}

/* The best row's batch note (and the uneven split that would save time),
 * then the command lines that run it: par3drun, Megatron-LM, torchtitan. */
static void best_lines(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *best)
{
    p3d_sb mb = {0};
    p3d_plan_micro_batch_note(&mb, pl, best);
    p3d_sb_putc(&mb, '.');
    p3d_plan_split sp;
    if (p3d_plan_uneven(pl, best, &sp)) {
        p3d_sb_printf(&mb,
                      " Uneven stages: the last stage also runs the output layer (%.0f%% of a "
                      "layer's time), the first holds the embedding; Megatron's",
                      100 * best->cost.t_head / best->cost.t_layer);
        if (sp.first)
            p3d_sb_printf(&mb, " --decoder-first-pipeline-num-layers %d", sp.first);
        if (sp.last)
            p3d_sb_printf(&mb, " --decoder-last-pipeline-num-layers %d", sp.last);
        p3d_sb_printf(&mb,
                      " saves about %.2f s per step (%.1f%%); the fullest stage needs %.1f GB "
                      "per GPU instead of %.1f.",
                      sp.saves, 100 * sp.saves / best->cost.step_time, sp.mem_new / 1e9, sp.mem_now / 1e9);
    }
    char *mbt = p3d_sb_finish(&mb);
    p3d_sb_putc(b, '\n');
    wrapped(b, mbt ? mbt : "", "batch    ", "         ");
    free(mbt);
    p3d_sb_puts(b, "\nrun the best:  ");
    p3d_plan_run_line(b, pl, best);
    p3d_sb_putc(b, '\n');
    p3d_sb_printf(b, "sequence parallelism: %s\n",
                  best->tp <= 1             ? "none (tp=1)"
                  : pl->job.no_seq_parallel ? "off (--no-sequence-parallel): the estimate is without it"
                                            : "assumed (tp > 1); the lines below turn it on");
    p3d_sb_puts(b, "Megatron-LM:   pretrain_gpt.py ");
    p3d_plan_megatron_line(b, pl, best);
    p3d_sb_puts(b, "\ntorchtitan:    ");
    p3d_plan_torchtitan_line(b, pl, best);
    p3d_sb_putc(b, '\n');
}

/* What was dropped: the fastest variant that fits only without the
 * reserve, and the closest misfit (with the advice when nothing fits). */
static void dropped(p3d_sb *b, const p3d_plan *pl, size_t n)
{
    if (pl->has_headroom_drop) {
        const p3d_plan_row *h = &pl->headroom_drop;
        char line[512];
        snprintf(line, sizeof line,
                 "%zu variant%s fit%s the GPU only without the %.1f GB reserve; the fastest, tp=%d cp=%d pp=%d dp=%d%s "
                 "v=%d b=%d ZeRO-%d (step %.2f s), needs %.1f of %.1f GB. --mem-reserve GB changes the reserve.",
                 pl->headroom_variants, pl->headroom_variants == 1 ? "" : "s", pl->headroom_variants == 1 ? "s" : "",
                 h->cost.mem_reserve / 1e9, h->tp, h->cp, h->pp, h->dp, ep_text(h), h->virtual_stages, h->micro_batch,
                 h->zero, h->cost.step_time, h->cost.mem_total / 1e9, h->cost.gpu_mem / 1e9);
        wrapped(b, line, "\ndropped for headroom: ", "   ");
    }
    if (pl->has_misfit && (n == 0 || pl->rejected[P3D_PLAN_REJ_MEMORY])) {
        const p3d_plan_row *m = &pl->misfit;
        const p3d_cost *c = &m->cost;
        char line[400];
        snprintf(line, sizeof line,
                 "tp=%d pp=%d dp=%d%s b=%d ZeRO-%d needs %.1f GB per GPU (weights %.1f, grads %.1f, optimizer "
                 "%.1f, activations %.1f) > %.1f GB.",
                 m->tp, m->pp, m->dp, ep_text(m), m->micro_batch, m->zero, c->mem_total / 1e9, c->mem_weights / 1e9,
                 c->mem_grads / 1e9, c->mem_optim / 1e9, c->mem_act / 1e9, c->gpu_mem / 1e9);
        wrapped(b, line, n ? "\nclosest misfit: " : "closest misfit: ", "   ");
        if (n == 0)
            p3d_sb_puts(b, "try --recompute full, --search-zero, a smaller --micro-batch, or more nodes.\n");
    }
}

char *p3d_plan_text(const p3d_plan *pl, int top)
{
    p3d_sb b = {0};
    size_t n = 0;
    size_t *idx = p3d_plan_pick_shapes(pl, top > 0 ? top : 5, &n);
    if (!idx)
        return NULL;
    header(&b, pl);
    if (pl->policy_note[0])
        wrapped(&b, pl->policy_note, "policy   ", "         ");
    p3d_sb_putc(&b, '\n');
    if (n == 0) {
        char *why_none = p3d_plan_none_reason(pl);
        p3d_sb sn = {0};
        p3d_sb_printf(&sn, "%s.", why_none ? why_none : "no layout is valid");
        free(why_none);
        char *ln = p3d_sb_finish(&sn);
        wrapped(&b, ln ? ln : "", "", "");
        free(ln);
    } else {
        rows_table(&b, pl, idx, n);
        rows_why(&b, pl, idx, n);
        best_lines(&b, pl, &pl->rows[idx[0]]);
    }
    dropped(&b, pl, n);
    free(idx);
    return p3d_sb_finish(&b);
}
