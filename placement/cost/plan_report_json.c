/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan_report_json.c — `par3drun plan --format json`: the same layouts and
 * "why" sentences as the text report (plan_report.c), as one JSON object
 * (docs/plan.md).
 */
#include "cost_internal.h"
#include "plan_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const rej_key[P3D_PLAN_NREJ] = {"memory", "tp_outside_nvlink", "batch",   "heads",
                                                   "layers", "headroom",          "sequence"};

static void row_json(p3d_sb *b, const p3d_plan_row *r, const p3d_plan_row *best, int rank)
{
    p3d_sb_printf(b, "{\"rank\":%d,\"tp\":%d,\"cp\":%d,\"pp\":%d,\"dp\":%d,", rank, r->tp, r->cp, r->pp, r->dp);
    if (r->cost.moe) /* the expert grid, MoE models only */
        p3d_sb_printf(b, "\"ep\":%d,\"etp\":%d,\"edp\":%d,", r->ep, r->etp, r->edp);
    p3d_sb_printf(b, "\"virtual_stages\":%d,\"micro_batch\":%d,\"micro_batches\":%d,\"zero\":%d,\"why\":",
                  r->virtual_stages, r->micro_batch, r->micro_batches, r->zero);
    if (best) {
        p3d_sb s = {0};
        p3d_plan_why(&s, r, best, rank == 1);
        char *txt = p3d_sb_finish(&s);
        p3d_sb_json_str(b, txt ? txt : "");
        free(txt);
    } else {
        p3d_sb_puts(b, "null");
    }
    if (r->placed) {
        p3d_sb_puts(b, ",\"placed\":true,\"policy\":");
        p3d_sb_json_str(b, r->policy);
        p3d_sb_printf(b, ",\"errors\":%d,\"warnings\":[", r->nerrors);
        for (const char *w = r->warned; *w;) {
            size_t n = strcspn(w, ",");
            char code[96];
            snprintf(code, sizeof code, "%.*s", (int)n, w);
            p3d_sb_puts(b, w == r->warned ? "" : ",");
            p3d_sb_json_str(b, code);
            w += n + (w[n] == ',');
        }
        p3d_sb_putc(b, ']');
    } else {
        p3d_sb_puts(b, ",\"placed\":false,\"policy\":null");
    }
    p3d_sb_puts(b, ",\"cost\":");
    p3d_cost_json(b, &r->cost);
    p3d_sb_putc(b, '}');
}

/* "model", "cluster": what the plan is for. */
static void inputs_json(p3d_sb *b, const p3d_plan *pl)
{
    const p3d_model *m = &pl->job.model;
    p3d_sb_puts(b, "{\"estimate\":true,\"model\":{\"name\":");
    p3d_sb_json_str(b, m->name);
    p3d_sb_puts(b, ",\"params\":");
    p3d_sb_json_num(b, m->params);
    p3d_sb_printf(b, ",\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"seq_len\":%d,\"vocab\":%d", m->layers, m->hidden,
                  m->heads, m->seq_len, m->vocab);
    if (m->experts > 0)
        p3d_sb_printf(b,
                      ",\"experts\":%d,\"top_k\":%d,\"moe_ffn\":%d,\"shared_experts\":%d,\"dense_layers\":%d,"
                      "\"ffn\":%d",
                      m->experts, m->top_k, m->moe_ffn, m->shared_experts, m->dense_layers, m->ffn);
    p3d_sb_puts(b, "},");
    p3d_sb_puts(b, "\"cluster\":{\"source\":");
    p3d_sb_json_str(b, pl->cluster_source);
    p3d_sb_printf(b,
                  ",\"nodes\":%d,\"gpus_per_node\":%d,\"gpus\":%d,\"racks\":%d,\"nodes_per_rack\":%d,"
                  "\"nvlink_domain_gpus\":%d,\"mnnvl_domain_gpus\":%d,\"link_gbps\":{",
                  pl->nodes, pl->gpus_per_node, pl->gpus, pl->nracks, pl->nodes_per_rack, pl->nvl_gpus, pl->mnnvl_gpus);
    for (int l = 1; l < P3D_LINK_COUNT; l++) {
        p3d_sb_printf(b, "%s\"%s\":", l > 1 ? "," : "", p3d_link_name((p3d_link)l));
        p3d_sb_json_num(b, pl->link_gbps[l]);
    }
    p3d_sb_puts(b, "}}");
}

/* "job", "pins", "searched_dims", the counts: how the search ran. */
static void search_json(p3d_sb *b, const p3d_plan *pl)
{
    const p3d_job *j = &pl->job;
    const int moe = j->model.experts > 0;
    p3d_sb_printf(b, ",\"job\":{\"global_batch\":%d,\"dtype_bytes\":%d,\"recompute\":\"%s\",\"zero\":", j->global_batch,
                  j->dtype_bytes > 0 ? j->dtype_bytes : 2, p3d_recompute_name(j->recompute));
    if (pl->zero_mode == P3D_PLAN_ZERO_SEARCH)
        p3d_sb_puts(b, "\"search\"");
    else if (pl->zero_mode == P3D_PLAN_ZERO_DEFAULT)
        p3d_sb_puts(b, "\"default\"");
    else
        p3d_sb_int(b, pl->zero_mode);
    const p3d_plan_pins *pn = &pl->pins;
    p3d_sb_printf(b, ",\"mem_reserve_gb\":");
    p3d_sb_json_num(b, j->mem_reserve_set ? j->mem_reserve_bytes / 1e9 : -1);
    p3d_sb_printf(b,
                  "},\"pins\":{\"tp\":%d,\"pp\":%d,\"cp\":%d,\"ep\":%d,\"micro_batch\":%d,"
                  "\"virtual_stages\":%d",
                  pn->tp, pn->pp, pn->cp, pn->ep, pn->micro_batch, pn->virtual_stages);
    if (moe)
        p3d_sb_printf(b, ",\"etp\":%d", pn->etp);
    p3d_sb_printf(b, "},\"searched_dims\":{\"cp\":%s,\"virtual_stages\":%s", pl->searched_cp ? "true" : "false",
                  pl->searched_v ? "true" : "false");
    if (moe)
        p3d_sb_printf(b, ",\"ep\":%s", pl->searched_ep ? "true" : "false");
    p3d_sb_puts(b, "},");
    p3d_sb_printf(b, "\"searched\":%zu,\"variants\":%zu,\"rejected\":{", pl->searched, pl->variants);
    for (int k = 0; k < P3D_PLAN_NREJ; k++)
        p3d_sb_printf(b, "%s\"%s\":%zu", k ? "," : "", rej_key[k], pl->rejected[k]);
    p3d_sb_puts(b, "}");
}

/* Appends the line fn writes for the best row as a JSON string. */
static void line_json(p3d_sb *b, const char *key, const p3d_plan *pl, const p3d_plan_row *best,
                      void (*fn)(p3d_sb *, const p3d_plan *, const p3d_plan_row *))
{
    p3d_sb line = {0};
    fn(&line, pl, best);
    char *t = p3d_sb_finish(&line);
    p3d_sb_printf(b, ",\"%s\":", key);
    p3d_sb_json_str(b, t ? t : "");
    free(t);
}

/* "run_lines", "micro_batch_note", "uneven_stages" of the best row (the
 * lines users paste: docs/plan.md, "Run lines"). */
static void best_json(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *best)
{
    p3d_sb_printf(b, ",\"run_lines\":{\"sequence_parallel\":%s",
                  best->tp > 1 && !pl->job.no_seq_parallel ? "true" : "false");
    line_json(b, "par3drun", pl, best, p3d_plan_run_line);
    line_json(b, "megatron", pl, best, p3d_plan_megatron_line);
    line_json(b, "torchtitan", pl, best, p3d_plan_torchtitan_line);
    p3d_sb_putc(b, '}');
    /* why this micro-batch; uneven stages when they help */
    line_json(b, "micro_batch_note", pl, best, p3d_plan_micro_batch_note);
    p3d_plan_split sp;
    p3d_sb_puts(b, ",\"uneven_stages\":");
    if (p3d_plan_uneven(pl, best, &sp)) {
        p3d_sb_printf(b,
                      "{\"decoder_first_pipeline_num_layers\":%d,\"decoder_last_pipeline_num_layers\":%d,"
                      "\"saves_seconds\":",
                      sp.first, sp.last);
        p3d_sb_json_num(b, sp.saves);
        p3d_sb_puts(b, ",\"memory_before\":");
        p3d_sb_json_num(b, sp.mem_now);
        p3d_sb_puts(b, ",\"memory_after\":");
        p3d_sb_json_num(b, sp.mem_new);
        p3d_sb_putc(b, '}');
    } else {
        p3d_sb_puts(b, "null");
    }
}

/* A row, or null. */
static void row_or_null(p3d_sb *b, const char *key, int has, const p3d_plan_row *r)
{
    p3d_sb_printf(b, "%s", key);
    if (has)
        row_json(b, r, NULL, 0);
    else
        p3d_sb_puts(b, "null");
}

char *p3d_plan_json(const p3d_plan *pl, int top)
{
    p3d_sb b = {0};
    size_t n = 0;
    size_t *idx = p3d_plan_pick_shapes(pl, top > 0 ? top : 5, &n);
    if (!idx)
        return NULL;
    inputs_json(&b, pl);
    search_json(&b, pl);
    p3d_sb_puts(&b, ",\"layouts\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            p3d_sb_putc(&b, ',');
        row_json(&b, &pl->rows[idx[i]], &pl->rows[idx[0]], (int)i + 1);
    }
    row_or_null(&b, "],\"closest_misfit\":", pl->has_misfit, &pl->misfit);
    p3d_sb_printf(&b, ",\"headroom_dropped\":%zu", pl->headroom_variants);
    row_or_null(&b, ",\"headroom_drop\":", pl->has_headroom_drop, &pl->headroom_drop);
    p3d_sb_puts(&b, ",\"policy\":");
    if (pl->best_policy[0]) {
        p3d_sb_puts(&b, "{\"best\":");
        p3d_sb_json_str(&b, pl->best_policy);
        p3d_sb_puts(&b, ",\"note\":");
        p3d_sb_json_str(&b, pl->policy_note);
        p3d_sb_putc(&b, '}');
    } else {
        p3d_sb_puts(&b, "null");
    }
    if (n > 0)
        best_json(&b, pl, &pl->rows[idx[0]]);
    else
        p3d_sb_puts(&b, ",\"run_lines\":null,\"micro_batch_note\":null,\"uneven_stages\":null");
    p3d_sb_puts(&b, "}\n");
    free(idx);
    return p3d_sb_finish(&b);
}
