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

static const char *const rej_key[P3D_PLAN_NREJ] = {"memory", "tp_outside_nvlink", "batch", "heads",
                                                   "layers", "headroom", "sequence"};

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

char *p3d_plan_json(const p3d_plan *pl, int top)
{
    p3d_sb b = {0};
    size_t n = 0;
    size_t *idx = p3d_plan_pick_shapes(pl, top > 0 ? top : 5, &n);
    if (!idx)
        return NULL;
    const p3d_job *j = &pl->job;
    const p3d_model *m = &j->model;
    p3d_sb_puts(&b, "{\"estimate\":true,\"model\":{\"name\":");
    p3d_sb_json_str(&b, m->name);
    p3d_sb_puts(&b, ",\"params\":");
    p3d_sb_json_num(&b, m->params);
    p3d_sb_printf(&b, ",\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"seq_len\":%d,\"vocab\":%d", m->layers,
                  m->hidden, m->heads, m->seq_len, m->vocab);
    if (m->experts > 0)
        p3d_sb_printf(&b, ",\"experts\":%d,\"top_k\":%d,\"moe_ffn\":%d,\"shared_experts\":%d,\"dense_layers\":%d,"
                          "\"ffn\":%d",
                      m->experts, m->top_k, m->moe_ffn, m->shared_experts, m->dense_layers, m->ffn);
    p3d_sb_puts(&b, "},");
    p3d_sb_puts(&b, "\"cluster\":{\"source\":");
    p3d_sb_json_str(&b, pl->cluster_source);
    p3d_sb_printf(&b, ",\"nodes\":%d,\"gpus_per_node\":%d,\"gpus\":%d,\"racks\":%d,\"nodes_per_rack\":%d,"
                      "\"nvlink_domain_gpus\":%d,\"mnnvl_domain_gpus\":%d,\"link_gbps\":{",
                  pl->nodes, pl->gpus_per_node, pl->gpus, pl->nracks, pl->nodes_per_rack, pl->nvl_gpus,
                  pl->mnnvl_gpus);
    for (int l = 1; l < P3D_LINK_COUNT; l++) {
        p3d_sb_printf(&b, "%s\"%s\":", l > 1 ? "," : "", p3d_link_name((p3d_link)l));
        p3d_sb_json_num(&b, pl->link_gbps[l]);
    }
    p3d_sb_printf(&b, "}},\"job\":{\"global_batch\":%d,\"dtype_bytes\":%d,\"recompute\":\"%s\",\"zero\":",
                  j->global_batch, j->dtype_bytes > 0 ? j->dtype_bytes : 2, p3d_recompute_name(j->recompute));
    if (pl->zero_mode == P3D_PLAN_ZERO_SEARCH)
        p3d_sb_puts(&b, "\"search\"");
    else if (pl->zero_mode == P3D_PLAN_ZERO_DEFAULT)
        p3d_sb_puts(&b, "\"default\"");
    else
        p3d_sb_int(&b, pl->zero_mode);
    const p3d_plan_pins *pn = &pl->pins;
    p3d_sb_printf(&b, ",\"mem_reserve_gb\":");
    p3d_sb_json_num(&b, j->mem_reserve_set ? j->mem_reserve_bytes / 1e9 : -1);
    p3d_sb_printf(&b, "},\"pins\":{\"tp\":%d,\"pp\":%d,\"cp\":%d,\"ep\":%d,\"micro_batch\":%d,"
                      "\"virtual_stages\":%d",
                  pn->tp, pn->pp, pn->cp, pn->ep, pn->micro_batch, pn->virtual_stages);
    if (m->experts > 0)
        p3d_sb_printf(&b, ",\"etp\":%d", pn->etp);
    p3d_sb_printf(&b, "},\"searched_dims\":{\"cp\":%s,\"virtual_stages\":%s", pl->searched_cp ? "true" : "false",
                  pl->searched_v ? "true" : "false");
    if (m->experts > 0)
        p3d_sb_printf(&b, ",\"ep\":%s", pl->searched_ep ? "true" : "false");
    p3d_sb_puts(&b, "},");
    p3d_sb_printf(&b, "\"searched\":%zu,\"variants\":%zu,\"rejected\":{", pl->searched, pl->variants);
    for (int k = 0; k < P3D_PLAN_NREJ; k++)
        p3d_sb_printf(&b, "%s\"%s\":%zu", k ? "," : "", rej_key[k], pl->rejected[k]);
    p3d_sb_puts(&b, "},\"layouts\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            p3d_sb_putc(&b, ',');
        row_json(&b, &pl->rows[idx[i]], &pl->rows[idx[0]], (int)i + 1);
    }
    p3d_sb_puts(&b, "],\"closest_misfit\":");
    if (pl->has_misfit)
        row_json(&b, &pl->misfit, NULL, 0);
    else
        p3d_sb_puts(&b, "null");
    p3d_sb_printf(&b, ",\"headroom_dropped\":%zu,\"headroom_drop\":", pl->headroom_variants);
    if (pl->has_headroom_drop)
        row_json(&b, &pl->headroom_drop, NULL, 0);
    else
        p3d_sb_puts(&b, "null");
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
    /* the lines users paste (docs/plan.md, "Run lines") */
    p3d_sb_puts(&b, ",\"run_lines\":");
    if (n > 0) {
        const p3d_plan_row *best = &pl->rows[idx[0]];
        p3d_sb line = {0};
        p3d_plan_run_line(&line, pl, best);
        char *t = p3d_sb_finish(&line);
        p3d_sb_printf(&b, "{\"sequence_parallel\":%s,\"par3drun\":",
                      best->tp > 1 && !j->no_seq_parallel ? "true" : "false");
        p3d_sb_json_str(&b, t ? t : "");
        free(t);
        p3d_plan_megatron_line(&line, pl, best);
        t = p3d_sb_finish(&line);
        p3d_sb_puts(&b, ",\"megatron\":");
        p3d_sb_json_str(&b, t ? t : "");
        free(t);
        p3d_plan_torchtitan_line(&line, pl, best);
        t = p3d_sb_finish(&line);
        p3d_sb_puts(&b, ",\"torchtitan\":");
        p3d_sb_json_str(&b, t ? t : "");
        free(t);
        p3d_sb_putc(&b, '}');
        /* why this micro-batch; uneven stages when they help */
        p3d_plan_micro_batch_note(&line, pl, best);
        t = p3d_sb_finish(&line);
        p3d_sb_puts(&b, ",\"micro_batch_note\":");
        p3d_sb_json_str(&b, t ? t : "");
        free(t);
        p3d_plan_split sp;
        p3d_sb_puts(&b, ",\"uneven_stages\":");
        if (p3d_plan_uneven(pl, best, &sp)) {
            p3d_sb_printf(&b, "{\"decoder_first_pipeline_num_layers\":%d,\"decoder_last_pipeline_num_layers\":%d,"
                              "\"saves_seconds\":", sp.first, sp.last);
            p3d_sb_json_num(&b, sp.saves);
            p3d_sb_puts(&b, ",\"memory_before\":");
            p3d_sb_json_num(&b, sp.mem_now);
            p3d_sb_puts(&b, ",\"memory_after\":");
            p3d_sb_json_num(&b, sp.mem_new);
            p3d_sb_putc(&b, '}');
        } else {
            p3d_sb_puts(&b, "null");
        }
    } else {
        p3d_sb_puts(&b, "null,\"micro_batch_note\":null,\"uneven_stages\":null");
    }
    p3d_sb_puts(&b, "}\n");
    free(idx);
    return p3d_sb_finish(&b);
}
