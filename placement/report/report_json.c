/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_json.c — the dry-run report for machines (p3d_report_json),
 * DESIGN.md's schema; docs/report-json.md documents every field.
 *
 * Written by hand into one growing buffer rather than through a cJSON tree:
 * a 131,072-rank report is ~30 MB and a tree of a million small objects
 * costs more time and memory than the whole placement. Layout is fixed
 * (keys in a fixed order, one rank and one group per line, numbers printed
 * the same way every time), so the bytes are deterministic and goldens diff
 * line by line.
 */
#include "report_common.h"
#include "cost_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void key(p3d_sb *b, int indent, const char *k)
{
    p3d_sb_pad(b, ' ', indent);
    p3d_sb_json_str(b, k);
    p3d_sb_puts(b, ": ");
}

static void mesh_obj(p3d_sb *b, const p3d_mesh *m)
{
    static const int order[P3D_NDIMS] = {P3D_DIM_TP, P3D_DIM_PP,  P3D_DIM_DP, P3D_DIM_CP,
                                         P3D_DIM_EP, P3D_DIM_ETP, P3D_DIM_EDP};
    p3d_sb_putc(b, '{');
    for (int k = 0; k < P3D_NDIMS; k++) {
        p3d_sb_printf(b, "%s\"%s\": ", k ? ", " : "", p3d_dim_name(order[k]));
        p3d_sb_int(b, m->size[order[k]]);
    }
    p3d_sb_putc(b, '}');
}

/* The hot loop of a big report: no printf in here (vsnprintf twice per
 * call was most of the time at 131,072 ranks). */
/* "spares": ["n3", ...] — only when some node has that role, so reports
 * of jobs without --spares / --exclude stay as they were. */
static void role_list(p3d_sb *b, const p3d_cluster *c, int role, const char *name)
{
    int k = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].role != role)
            continue;
        if (!k++) {
            key(b, 2, name);
            p3d_sb_putc(b, '[');
        } else {
            p3d_sb_puts(b, ", ");
        }
        p3d_sb_json_str(b, c->nodes[i].name);
    }
    if (k)
        p3d_sb_puts(b, "],\n");
}

/* The node's JSON-escaped strings, made once per run of ranks on one node
 * (ranks of a node are mostly consecutive): its name, quoted, and its
 * rack, quoted or null. */
typedef struct node_strs {
    const p3d_cnode *cn;
    p3d_sb name, rack;
} node_strs;

static void node_strs_for(node_strs *s, const p3d_cluster *c, const p3d_cnode *cn)
{
    if (s->cn == cn)
        return;
    s->cn = cn;
    s->name.len = s->rack.len = 0;
    p3d_sb_json_str(&s->name, cn->name);
    p3d_sb_json_str(&s->rack, (size_t)cn->rack < c->nracks ? c->racks[cn->rack] : NULL);
}

static void ranks(p3d_sb *b, const p3d_cluster *c, const p3d_placement *pl)
{
    static const char *const keys[P3D_NDIMS] = {", \"tp\": ", ", \"pp\": ",  ", \"dp\": ", ", \"cp\": ",
                                                ", \"ep\": ", ", \"etp\": ", ", \"edp\": "};
    static const int order[P3D_NDIMS] = {P3D_DIM_TP, P3D_DIM_PP,  P3D_DIM_DP, P3D_DIM_CP,
                                         P3D_DIM_EP, P3D_DIM_ETP, P3D_DIM_EDP};
    node_strs ns = {0};
    key(b, 2, "ranks");
    p3d_sb_puts(b, "[\n");
    for (int r = 0; r < pl->world; r++) {
        const p3d_rank *rk = &pl->ranks[r];
        const p3d_cnode *cn = &c->nodes[rk->node];
        const p3d_gpu *g = &cn->topo->gpus[rk->gpu];
        node_strs_for(&ns, c, cn);
        if (ns.name.oom || ns.rack.oom) {
            b->oom = 1;
            break;
        }
        p3d_sb_puts(b, "    {\"rank\": ");
        p3d_sb_int(b, r);
        p3d_sb_puts(b, ", \"node\": ");
        p3d_sb_putn(b, ns.name.p, ns.name.len);
        p3d_sb_puts(b, ", \"gpu\": ");
        p3d_sb_int(b, rk->gpu);
        p3d_sb_puts(b, ", \"local_rank\": ");
        p3d_sb_int(b, rk->local_rank);
        for (int k = 0; k < P3D_NDIMS; k++) {
            p3d_sb_puts(b, keys[k]);
            p3d_sb_int(b, rk->coord[order[k]]);
        }
        p3d_sb_puts(b, ", \"numa\": ");
        if (g->numa >= 0)
            p3d_sb_int(b, g->numa);
        else
            p3d_sb_puts(b, "null");
        p3d_sb_puts(b, ", \"nic\": ");
        p3d_sb_json_str(b, g->nearest_nic >= 0 && g->nearest_nic < cn->topo->nnics ? cn->topo->nics[g->nearest_nic].name
                                                                                   : NULL);
        /* same text as p3d_gpu_domain_name(), without snprintf */
        p3d_sb_puts(b, ", \"nvlink_domain\": ");
        if (cn->nvl_domain >= 0 && (size_t)cn->nvl_domain < c->nnvl_domains) {
            p3d_sb_json_str(b, c->nvl_domains[cn->nvl_domain]);
        } else {
            p3d_sb_putn(b, ns.name.p, ns.name.len - 1); /* the string reopened: "node001/3" */
            p3d_sb_putc(b, '/');
            p3d_sb_int(b, g->domain);
            p3d_sb_putc(b, '"');
        }
        p3d_sb_puts(b, ", \"rack\": ");
        p3d_sb_putn(b, ns.rack.p, ns.rack.len);
        p3d_sb_puts(b, r + 1 < pl->world ? "},\n" : "}\n");
    }
    p3d_sb_free(&ns.name);
    p3d_sb_free(&ns.rack);
    p3d_sb_puts(b, "  ]");
}

static void groups(p3d_sb *b, const p3d_placement *pl, const int *dims, int nd)
{
    const p3d_mesh *m = &pl->mesh;
    key(b, 2, "groups");
    p3d_sb_puts(b, "{\n");
    for (int k = 0; k < nd; k++) {
        int d = dims[k], n = p3d_mesh_size(m, d), ng = pl->world / n, stride = p3d_mesh_stride(m, d);
        key(b, 4, p3d_dim_name(d));
        p3d_sb_puts(b, "[\n");
        for (int g = 0; g < ng; g++) {
            int first = p3d_group_first(m, d, g);
            p3d_sb_puts(b, "      [");
            for (int i = 0; i < n; i++) {
                if (i)
                    p3d_sb_putc(b, ',');
                p3d_sb_int(b, first + i * stride);
            }
            p3d_sb_puts(b, g + 1 < ng ? "],\n" : "]\n");
        }
        p3d_sb_puts(b, k + 1 < nd ? "    ],\n" : "    ]\n");
    }
    p3d_sb_puts(b, "  }");
}

static void checks(p3d_sb *b, const p3d_analysis *an)
{
    key(b, 2, "checks");
    if (!an->nchecks) {
        p3d_sb_puts(b, "[]");
        return;
    }
    p3d_sb_puts(b, "[\n");
    for (size_t i = 0; i < an->nchecks; i++) {
        const p3d_check *k = &an->checks[i];
        p3d_sb_puts(b, "    {\"severity\": ");
        p3d_sb_json_str(b, p3d_severity_name(k->severity));
        p3d_sb_puts(b, ", \"code\": ");
        p3d_sb_json_str(b, k->code);
        p3d_sb_puts(b, ", \"message\": ");
        p3d_sb_json_str(b, k->message);
        p3d_sb_puts(b, i + 1 < an->nchecks ? "},\n" : "}\n");
    }
    p3d_sb_puts(b, "  ]");
}

static void dim_metrics(p3d_sb *b, int indent, const p3d_mesh *m, const p3d_analysis *an, const int *dims, int nd)
{
    key(b, indent, "dims");
    p3d_sb_puts(b, "{\n");
    for (int k = 0; k < nd; k++) {
        int d = dims[k];
        const p3d_dim_stats *st = &an->dim[d];
        key(b, indent + 2, p3d_dim_name(d));
        p3d_sb_puts(b, "{\"size\": ");
        p3d_sb_int(b, m->size[d]);
        p3d_sb_puts(b, ", \"groups\": ");
        p3d_sb_int(b, st->ngroups);
        p3d_sb_puts(b, ", \"worst_link\": ");
        p3d_sb_json_str(b, p3d_link_name((p3d_link)st->worst));
        p3d_sb_puts(b, ", \"worst_link_desc\": ");
        p3d_sb_json_str(b, p3d_link_desc((p3d_link)st->worst));
        p3d_sb_puts(b, ", \"groups_by_link\": {");
        int any = 0;
        for (int l = 0; l < P3D_LINK_COUNT; l++)
            if (st->groups_by_link[l]) {
                p3d_sb_printf(b, "%s\"%s\": ", any ? ", " : "", p3d_link_name((p3d_link)l));
                p3d_sb_int(b, st->groups_by_link[l]);
                any = 1;
            }
        p3d_sb_puts(b, "}, \"hops_by_link\": {");
        any = 0;
        for (int l = 0; l < P3D_LINK_COUNT; l++)
            if (st->hops_by_link[l]) {
                p3d_sb_printf(b, "%s\"%s\": ", any ? ", " : "", p3d_link_name((p3d_link)l));
                p3d_sb_int(b, st->hops_by_link[l]);
                any = 1;
            }
        p3d_sb_puts(b, k + 1 < nd ? "}},\n" : "}}\n");
    }
    p3d_sb_pad(b, ' ', indent);
    p3d_sb_puts(b, "},\n");
}

/* The cost object: the same shape as plan's layouts[].cost
 * (p3d_cost_json, docs/report-json.md "Cost object"). */
static void cost_obj(p3d_sb *b, int indent, const p3d_cost *k)
{
    key(b, indent, "cost");
    p3d_cost_json(b, k);
}

/* The figures the baseline comparison uses, and the check counts. */
static void summary(p3d_sb *b, int indent, const p3d_analysis *an)
{
    int ninfo = (int)an->nchecks - an->nerrors - an->nwarnings;
    key(b, indent, "tp_groups_off_nvlink");
    p3d_sb_int(b, p3d_tp_off_nvlink(an));
    p3d_sb_puts(b, ",\n");
    key(b, indent, "pipelines_crossing_racks");
    p3d_sb_int(b, p3d_pp_cross_rack(an));
    p3d_sb_puts(b, ",\n");
    long long obj[P3D_OBJECTIVE_LEN];
    p3d_objective(an, obj);
    key(b, indent, "objective");
    for (int i = 0; i < P3D_OBJECTIVE_LEN; i++)
        p3d_sb_printf(b, "%s%lld", i ? ", " : "[", obj[i]);
    p3d_sb_puts(b, "],\n");
    key(b, indent, "errors");
    p3d_sb_int(b, an->nerrors);
    p3d_sb_puts(b, ",\n");
    key(b, indent, "warnings");
    p3d_sb_int(b, an->nwarnings);
    p3d_sb_puts(b, ",\n");
    key(b, indent, "infos");
    p3d_sb_int(b, ninfo);
}

static void metrics(p3d_sb *b, const p3d_report_in *in, const int *dims, int nd)
{
    const p3d_mesh *m = &in->pl->mesh;
    key(b, 2, "metrics");
    p3d_sb_puts(b, "{\n");
    dim_metrics(b, 4, m, in->an, dims, nd);
    summary(b, 4, in->an);
    if (in->an->has_cost) {
        p3d_sb_puts(b, ",\n");
        cost_obj(b, 4, &in->an->cost);
    }
    if (in->an->has_infer) {
        p3d_sb_puts(b, ",\n");
        key(b, 4, "inference");
        p3d_infer_json(b, &in->an->infer);
    }
    p3d_sb_puts(b, ",\n");
    key(b, 4, "baseline");
    if (!in->base_pl || !in->base_an) {
        p3d_sb_puts(b, "null\n");
    } else {
        p3d_sb_puts(b, "{\n");
        key(b, 6, "policy");
        p3d_sb_json_str(b, in->base_pl->policy);
        p3d_sb_puts(b, ",\n");
        dim_metrics(b, 6, m, in->base_an, dims, nd);
        summary(b, 6, in->base_an);
        if (in->base_an->has_cost) {
            p3d_sb_puts(b, ",\n");
            cost_obj(b, 6, &in->base_an->cost);
        }
        p3d_sb_puts(b, "\n    }\n");
    }
    p3d_sb_puts(b, "  }");
}

/* The whole report into b (a buffer or a stream). */
static void report(p3d_sb *bp, const p3d_report_in *in)
{
    const p3d_cluster *c = in->cluster;
    const p3d_placement *pl = in->pl;
    p3d_sb b = *bp;
    int dims[P3D_NDIMS], nd = p3d_report_dims(&pl->mesh, dims);
    p3d_sb_puts(&b, "{\n");
    key(&b, 2, "world_size");
    p3d_sb_int(&b, pl->world);
    p3d_sb_puts(&b, ",\n");
    key(&b, 2, "mesh");
    mesh_obj(&b, &pl->mesh);
    p3d_sb_puts(&b, ",\n");
    key(&b, 2, "order");
    p3d_sb_json_str(&b, pl->mesh.order_str);
    p3d_sb_puts(&b, ",\n");
    key(&b, 2, "policy");
    p3d_sb_json_str(&b, pl->policy);
    p3d_sb_puts(&b, ",\n");
    key(&b, 2, "inputs");
    p3d_sb_puts(&b, "{\"cluster\": ");
    p3d_sb_json_str(&b, c->source);
    p3d_sb_puts(&b, ", \"topology\": ");
    p3d_sb_json_str(&b, !c->source && c->nnodes ? c->nodes[0].topo->source : NULL);
    p3d_sb_puts(&b, ", \"slurm_topology\": ");
    p3d_sb_json_str(&b, c->slurm_topology);
    p3d_sb_puts(&b, ", \"policy_source\": ");
    p3d_sb_json_str(&b, pl->policy_source);
    p3d_sb_puts(&b, "},\n");
    key(&b, 2, "cluster");
    p3d_sb_printf(&b, "{\"nodes\": %zu, \"gpus\": %zu, \"racks\": %zu, \"nvlink_domains\": %zu},\n", c->nnodes,
                  p3d_cluster_gpus(c), c->nracks, c->nnvl_domains);
    role_list(&b, c, P3D_NODE_SPARE, "spares");
    role_list(&b, c, P3D_NODE_EXCLUDED, "excluded");
    role_list(&b, c, P3D_NODE_LOST, "lost");
    ranks(&b, c, pl);
    p3d_sb_puts(&b, ",\n");
    groups(&b, pl, dims, nd);
    p3d_sb_puts(&b, ",\n");
    checks(&b, in->an);
    p3d_sb_puts(&b, ",\n");
    metrics(&b, in, dims, nd);
    if (in->preflight_json) {
        p3d_sb_puts(&b, ",\n");
        key(&b, 2, "preflight");
        p3d_sb_puts(&b, in->preflight_json);
    }
    if (in->widths_json) {
        p3d_sb_puts(&b, ",\n");
        key(&b, 2, "elastic");
        p3d_sb_puts(&b, in->widths_json);
    }
    p3d_sb_puts(&b, "\n}\n");
    *bp = b;
}

char *p3d_report_json(const p3d_report_in *in)
{
    p3d_sb b = {0};
    /* ~190 bytes per rank line plus its groups: one allocation up front */
    p3d_sb_reserve(&b, (size_t)in->pl->world * 240 + 65536);
    report(&b, in);
    return p3d_sb_finish(&b);
}

int p3d_report_json_to(const p3d_report_in *in, FILE *f)
{
    p3d_sb b;
    if (p3d_sb_stream(&b, f, P3D_REPORT_STREAM_BUF) < 0)
        return -1;
    report(&b, in);
    return p3d_sb_stream_end(&b);
}
