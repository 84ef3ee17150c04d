/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_text.c — the dry-run report for people (p3d_report_text).
 *
 * Sections: header (policy, order, inputs, mesh), placement grid (per
 * node: the rank and its coordinates on each GPU), groups in compact form,
 * links per dimension, checks, the comparison with naive.lua, and the cost
 * estimate when a model was given. Lines fit 100 columns for nodes of up
 * to 8 GPUs; more than 64 nodes are summarized (the JSON report has every
 * rank). Same input, same bytes: nothing here depends on time or paths
 * other than those given.
 */
#include "cost_internal.h"
#include "report_common.h"
#include "termsafe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 100
#define GRID_MAX_NODES 64 /* beyond this: the first GRID_HEAD and last GRID_TAIL */
#define GRID_HEAD 48
#define GRID_TAIL 8
#define GROUPS_SHOWN 3

typedef struct tx {
    p3d_sb b;
    int color;
    size_t *sgr_at, nsgr, capsgr; /* where our own colour sequences start */
    char **pool;                  /* esc() copies, freed with the report */
    size_t npool, cappool;
} tx;

/* A name or message from input as the report shows it: every control
 * character (a newline too: a name cannot add a line to the report) as
 * \n, \r, \t or \xHH. The string itself when there is none. */
static const char *esc(tx *t, const char *s)
{
    if (!s || p3d_term_clean(s, strlen(s), 0))
        return s;
    if (t->npool == t->cappool) {
        size_t nc = t->cappool ? 2 * t->cappool : 16;
        char **a = realloc(t->pool, nc * sizeof *a);
        if (!a) {
            t->b.oom = 1;
            return "?";
        }
        t->pool = a;
        t->cappool = nc;
    }
    char *o = p3d_term_dup(s, strlen(s), (size_t)-1, 0);
    if (!o) {
        t->b.oom = 1;
        return "?";
    }
    t->pool[t->npool++] = o;
    return o;
}

static void sgr(tx *t, const char *code)
{
    if (!t->color)
        return;
    if (t->nsgr == t->capsgr) {
        size_t nc = t->capsgr ? 2 * t->capsgr : 64;
        size_t *a = realloc(t->sgr_at, nc * sizeof *a);
        if (!a) {
            t->b.oom = 1;
            return;
        }
        t->sgr_at = a;
        t->capsgr = nc;
    }
    t->sgr_at[t->nsgr++] = t->b.len;
    p3d_sb_printf(&t->b, "\033[%sm", code);
}

/* The finished report with every terminal control that came from input
 * (node, rack and policy names, file names, notes, messages) written as
 * text: C0 controls but '\n', DEL, C1 controls (U+0080-U+009F; some
 * terminals take U+009B as CSI) and the bidirectional overrides that can
 * reorder what a line seems to say (U+202A-U+202E, U+2066-U+2069). Only
 * the colour sequences sgr() wrote stay escape sequences, so no input can
 * move the cursor, clear the screen or forge a line of the report. */
static char *terminal_safe(tx *t)
{
    p3d_sb o = {0};
    const unsigned char *s = (const unsigned char *)t->b.p;
    size_t n = t->b.len, k = 0;
    size_t from = 0; /* start of the text since the last colour sequence */
    for (size_t i = 0; s && i < n; i++) {
        if (k < t->nsgr && t->sgr_at[k] == i) {
            p3d_term_put(&o, (const char *)s + from, i - from, P3D_TERM_KEEP_NL);
            size_t e = i;
            while (e < n && s[e] != 'm')
                e++;
            p3d_sb_putn(&o, (const char *)s + i, e < n ? e - i + 1 : n - i);
            i = e;
            from = e + 1;
            k++;
        }
    }
    if (s && from < n)
        p3d_term_put(&o, (const char *)s + from, n - from, P3D_TERM_KEEP_NL);
    if (t->b.oom)
        o.oom = 1;
    free(t->b.p);
    free(t->sgr_at);
    for (size_t i = 0; i < t->npool; i++)
        free(t->pool[i]);
    free(t->pool);
    t->b = (p3d_sb){0};
    t->sgr_at = NULL;
    return p3d_sb_finish(&o);
}

static void heading(tx *t, const char *s)
{
    sgr(t, "1");
    p3d_sb_puts(&t->b, s);
    sgr(t, "0");
    p3d_sb_putc(&t->b, '\n');
}

/* Word-wraps text at WIDTH; the first line continues at column col, the
 * following lines start with indent spaces. */
static void wrap(p3d_sb *b, const char *text, int col, int indent)
{
    const char *p = text;
    int first = 1;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *word = p;
        while (*p && *p != ' ')
            p++;
        int wl = (int)(p - word);
        if (!first && col + 1 + wl > WIDTH && col > indent) {
            p3d_sb_putc(b, '\n');
            p3d_sb_pad(b, ' ', indent);
            col = indent;
        } else if (!first) {
            p3d_sb_putc(b, ' ');
            col++;
        }
        p3d_sb_putn(b, word, (size_t)wl);
        col += wl;
        first = 0;
    }
    p3d_sb_putc(b, '\n');
}

static void coord_label(const p3d_mesh *m, const int *dims, int nd, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < nd; k++)
        len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s%s", k ? "," : "", p3d_dim_name(dims[k]));
    (void)m;
}

static void coord_tuple(const p3d_rank *rk, const int *dims, int nd, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < nd && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", k ? "," : "", rk->coord[dims[k]]);
}

static void header(tx *t, const p3d_report_in *in)
{
    const p3d_cluster *c = in->cluster;
    const p3d_placement *pl = in->pl;
    const p3d_job *job = in->job;
    const p3d_mesh *m = &pl->mesh;
    p3d_sb *b = &t->b;
    size_t gpus = p3d_cluster_gpus(c);
    sgr(t, "1");
    p3d_sb_printf(b, "par3drun dry run: policy %s", pl->policy ? esc(t, pl->policy) : "?");
    sgr(t, "0");
    p3d_sb_printf(b, " (%s), order %s\n", pl->policy_source ? esc(t, pl->policy_source) : "?", m->order_str);
    if (c->source && c->nnodes_file)
        p3d_sb_printf(b, "inputs: cluster %s (allocation SLURM_JOB_NODELIST: %zu of its %zu nodes)", esc(t, c->source),
                      c->nnodes, c->nnodes_file);
    else if (c->source)
        p3d_sb_printf(b, "inputs: cluster %s", esc(t, c->source));
    else
        p3d_sb_printf(b, "inputs: topology %s",
                      c->nnodes && c->nodes[0].topo->source ? esc(t, c->nodes[0].topo->source) : "?");
    p3d_sb_printf(b, "; slurm topology %s\n", c->slurm_topology ? esc(t, c->slurm_topology) : "none");
    p3d_sb_printf(b, "mesh: tp=%d pp=%d dp=%d", m->size[P3D_DIM_TP], m->size[P3D_DIM_PP], m->size[P3D_DIM_DP]);
    if (m->size[P3D_DIM_CP] > 1)
        p3d_sb_printf(b, " cp=%d", m->size[P3D_DIM_CP]);
    /* the expert grid (etp*ep*edp*pp = world) beside the dense one */
    if (m->size[P3D_DIM_EP] > 1 || p3d_mesh_size(m, P3D_DIM_ETP) != m->size[P3D_DIM_TP])
        p3d_sb_printf(b, " ep=%d etp=%d edp=%d", m->size[P3D_DIM_EP], p3d_mesh_size(m, P3D_DIM_ETP),
                      p3d_mesh_size(m, P3D_DIM_EDP));
    /* nodes without GPUs run ranks on CPU slots (--nproc-per-node): say so */
    size_t slots = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        for (int g = 0; c->nodes[i].topo && g < c->nodes[i].topo->ngpus; g++)
            slots += !strcmp(c->nodes[i].topo->gpus[g].model, "CPU slot");
    if (slots && slots == gpus)
        p3d_sb_printf(b, ", world %d on %zu CPU slot%s (no GPU) of %zu node%s, %zu rack%s", pl->world, slots,
                      slots == 1 ? "" : "s", c->nnodes, c->nnodes == 1 ? "" : "s", c->nracks, c->nracks == 1 ? "" : "s");
    else if (slots)
        p3d_sb_printf(b, ", world %d on %zu GPUs and %zu CPU slots of %zu node%s, %zu rack%s", pl->world,
                      gpus - slots, slots, c->nnodes, c->nnodes == 1 ? "" : "s", c->nracks, c->nracks == 1 ? "" : "s");
    else
        p3d_sb_printf(b, ", world %d on %zu GPU%s of %zu node%s, %zu rack%s", pl->world, gpus, gpus == 1 ? "" : "s",
                      c->nnodes, c->nnodes == 1 ? "" : "s", c->nracks, c->nracks == 1 ? "" : "s");
    if (c->nnvl_domains)
        p3d_sb_printf(b, ", %zu multi-node NVLink domain%s", c->nnvl_domains, c->nnvl_domains == 1 ? "" : "s");
    p3d_sb_putc(b, '\n');
    static const char *const role_name[] = {NULL, "spares", "excluded", "lost"};
    for (int role = P3D_NODE_SPARE; role <= P3D_NODE_LOST; role++) {
        int k = 0;
        for (size_t i = 0; i < c->nnodes; i++)
            if (c->nodes[i].role == role) {
                const p3d_cnode *n = &c->nodes[i];
                p3d_sb_printf(b, "%s %s (rack %s", k++ ? "," : role_name[role], n->name,
                              c->nracks ? c->racks[n->rack] : "default");
                if (n->nvl_domain >= 0 && (size_t)n->nvl_domain < c->nnvl_domains)
                    p3d_sb_printf(b, ", NVLink domain %s", c->nvl_domains[n->nvl_domain]);
                p3d_sb_putc(b, ')');
            }
        if (k && role == P3D_NODE_SPARE)
            p3d_sb_puts(b, ": run no rank; a lost node's ranks move to one\n");
        else if (k)
            p3d_sb_puts(b, ": never used\n");
    }
    if (job->has_model || job->micro_batches || job->global_batch) {
        p3d_sb_puts(b, "training:");
        if (job->has_model)
            p3d_sb_printf(b, " model %s (%.3g B params, %d layers)", job->model.name, job->model.params / 1e9,
                          job->model.layers);
        if (job->micro_batches)
            p3d_sb_printf(b, ", %d micro-batches", job->micro_batches);
        if (job->micro_batch_size)
            p3d_sb_printf(b, "%s micro-batch size %d", job->micro_batches ? " of" : ",",
                          job->micro_batch_size);
        if (job->global_batch)
            p3d_sb_printf(b, ", global batch %d", job->global_batch);
        if (job->virtual_stages > 1)
            p3d_sb_printf(b, ", %d virtual stages", job->virtual_stages);
        p3d_sb_putc(b, '\n');
    }
}

static void grid(tx *t, const p3d_report_in *in, const int *dims, int nd, const size_t *first, const int *rank_at)
{
    const p3d_cluster *c = in->cluster;
    const p3d_placement *pl = in->pl;
    p3d_sb *b = &t->b;
    char label[32], cell[64];
    int maxg = 0, namew = 4, rackw = 4, cellw = 1;
    size_t nn = c->nnodes;
    int summarize = nn > GRID_MAX_NODES;
#define SHOWN(i) (!summarize || (i) < GRID_HEAD || (i) >= nn - GRID_TAIL)
    coord_label(&pl->mesh, dims, nd, label, sizeof label);
    int labw = (int)strlen(label) > 4 ? (int)strlen(label) : 4;
    for (size_t i = 0; i < nn; i++) {
        if (!SHOWN(i))
            continue;
        const p3d_cnode *cn = &c->nodes[i];
        int w = (int)strlen(esc(t, cn->name)), ng = cn->topo->ngpus;
        namew = w > namew ? w : namew;
        w = (int)strlen(esc(t, c->racks[cn->rack]));
        rackw = w > rackw ? w : rackw;
        maxg = ng > maxg ? ng : maxg;
        for (int g = 0; g < ng; g++) {
            int r = rank_at[first[i] + (size_t)g];
            if (r < 0)
                continue;
            coord_tuple(&pl->ranks[r], dims, nd, cell, sizeof cell);
            w = (int)strlen(cell);
            cellw = w > cellw ? w : cellw;
            w = snprintf(cell, sizeof cell, "%d", r);
            cellw = w > cellw ? w : cellw;
        }
    }
    for (int g = 0; g < maxg; g++) {
        int w = snprintf(cell, sizeof cell, "%d", g);
        cellw = w > cellw ? w : cellw;
    }
    p3d_sb_putc(b, '\n');
    p3d_sb_printf(b, "Placement: rank and (%s) on each GPU", label);
    p3d_sb_puts(b, summarize ? "" : "\n");
    if (summarize)
        p3d_sb_printf(b, " (first %d and last %d of %zu nodes)\n", GRID_HEAD, GRID_TAIL, nn);
    p3d_sb_printf(b, "  %-*s  %-*s  %-*s", namew, "node", rackw, "rack", labw, "GPU");
    for (int g = 0; g < maxg; g++)
        p3d_sb_printf(b, "  %*d", cellw, g);
    p3d_sb_putc(b, '\n');
    for (size_t i = 0; i < nn; i++) {
        if (!SHOWN(i)) {
            if (i == GRID_HEAD)
                p3d_sb_printf(b, "  ... %zu nodes not shown (--format json lists every rank)\n",
                              nn - GRID_HEAD - GRID_TAIL);
            continue;
        }
        const p3d_cnode *cn = &c->nodes[i];
        int ng = cn->topo->ngpus;
        p3d_sb_printf(b, "  %-*s  %-*s  %-*s", namew, esc(t, cn->name), rackw, esc(t, c->racks[cn->rack]), labw,
                      "rank");
        for (int g = 0; g < ng; g++) {
            int r = rank_at[first[i] + (size_t)g];
            if (r < 0)
                p3d_sb_printf(b, "  %*s", cellw, "-");
            else
                p3d_sb_printf(b, "  %*d", cellw, r);
        }
        p3d_sb_putc(b, '\n');
        p3d_sb_printf(b, "  %-*s  %-*s  %-*s", namew, "", rackw, "", labw, label);
        for (int g = 0; g < ng; g++) {
            int r = rank_at[first[i] + (size_t)g];
            if (r < 0)
                cell[0] = 0;
            else
                coord_tuple(&pl->ranks[r], dims, nd, cell, sizeof cell);
            p3d_sb_printf(b, "  %*s", cellw, cell);
        }
        /* no trailing blanks on idle nodes */
        while (b->len && b->p[b->len - 1] == ' ')
            b->p[--b->len] = 0;
        p3d_sb_putc(b, '\n');
    }
#undef SHOWN
}

/* "[0-7]", "[0,8]", "[0,32,...,480]", "[3,5,9,...,40]" */
static void group_compact(p3d_sb *b, int first, int stride, int n)
{
    int last = first + (n - 1) * stride;
    if (n == 1)
        p3d_sb_printf(b, "[%d]", first);
    else if (stride == 1 && n > 2)
        p3d_sb_printf(b, "[%d-%d]", first, last);
    else if (n <= 3) {
        p3d_sb_putc(b, '[');
        for (int i = 0; i < n; i++)
            p3d_sb_printf(b, "%s%d", i ? "," : "", first + i * stride);
        p3d_sb_putc(b, ']');
    } else
        p3d_sb_printf(b, "[%d,%d,...,%d]", first, first + stride, last);
}

static void groups(tx *t, const p3d_report_in *in, const int *dims, int nd)
{
    const p3d_mesh *m = &in->pl->mesh;
    p3d_sb *b = &t->b;
    int world = in->pl->world;
    p3d_sb_putc(b, '\n');
    heading(t, "Groups (ranks that share a coordinate in every other dimension)");
    for (int k = 0; k < nd; k++) {
        int d = dims[k], n = p3d_mesh_size(m, d), ng = world / n, stride = p3d_mesh_stride(m, d);
        if (n == 1) {
            p3d_sb_printf(b, "  %s: size 1 (no %s communication)\n", p3d_dim_name(d), p3d_dim_name(d));
            continue;
        }
        p3d_sb_printf(b, "  %s: %d group%s of %d ", p3d_dim_name(d), ng, ng == 1 ? "" : "s", n);
        for (int g = 0; g < ng; g++) {
            if (g == GROUPS_SHOWN && ng > GROUPS_SHOWN + 1) {
                p3d_sb_puts(b, " ...");
                g = ng - 1;
            }
            p3d_sb_putc(b, ' ');
            group_compact(b, p3d_group_first(m, d, g), stride, n);
        }
        p3d_sb_putc(b, '\n');
    }
}

static void counts(p3d_sb *b, const p3d_dim_stats *st)
{
    int any = 0;
    for (int l = P3D_LINK_COUNT - 1; l >= 0; l--)
        if (st->groups_by_link[l]) {
            p3d_sb_printf(b, "%s%s %d", any ? ", " : "", p3d_link_name((p3d_link)l), st->groups_by_link[l]);
            any = 1;
        }
}

static void links(tx *t, const p3d_report_in *in, const int *dims, int nd)
{
    const p3d_mesh *m = &in->pl->mesh;
    const p3d_analysis *an = in->an;
    p3d_sb *b = &t->b;
    p3d_sb_putc(b, '\n');
    heading(t, "Links: the slowest link each group uses (pp: between consecutive stages)");
    p3d_sb_printf(b, "  %-3s  %6s  %7s  %-44s  %s\n", "dim", "size", "groups", "worst link", "groups by worst link");
    for (int k = 0; k < nd; k++) {
        int d = dims[k];
        const p3d_dim_stats *st = &an->dim[d];
        char worst[64];
        if (m->size[d] == 1)
            snprintf(worst, sizeof worst, "-     (size 1)");
        else
            snprintf(worst, sizeof worst, "%-5s %s", p3d_link_name((p3d_link)st->worst),
                     p3d_link_desc((p3d_link)st->worst));
        p3d_sb_printf(b, "  %-3s  %6d  %7d  %-44s  ", p3d_dim_name(d), m->size[d], st->ngroups, worst);
        if (m->size[d] > 1)
            counts(b, st);
        while (b->len && b->p[b->len - 1] == ' ')
            b->p[--b->len] = 0;
        p3d_sb_putc(b, '\n');
    }
    long long o[P3D_OBJECTIVE_LEN];
    p3d_objective(an, o);
    p3d_sb_printf(b,
                  "  objective: %lld TP groups off NVLink, %lld of them across nodes, %lld across racks;\n"
                  "             %lld pipelines across racks, %lld cross-rack stage hops\n",
                  o[0], o[1], o[2], o[3], o[4]);
}

static void checks(tx *t, const p3d_analysis *an)
{
    p3d_sb *b = &t->b;
    int ninfo = (int)an->nchecks - an->nerrors - an->nwarnings;
    p3d_sb_putc(b, '\n');
    sgr(t, "1");
    p3d_sb_printf(b, "Checks: %d error%s, %d warning%s, %d info", an->nerrors, an->nerrors == 1 ? "" : "s",
                  an->nwarnings, an->nwarnings == 1 ? "" : "s", ninfo);
    sgr(t, "0");
    p3d_sb_putc(b, '\n');
    if (!an->nchecks)
        p3d_sb_puts(b, "  none\n");
    for (size_t i = 0; i < an->nchecks; i++) {
        const p3d_check *k = &an->checks[i];
        p3d_sb_puts(b, "  ");
        sgr(t, k->severity == P3D_SEV_ERROR ? "1;31" : k->severity == P3D_SEV_WARNING ? "33" : "36");
        p3d_sb_printf(b, "%-7s", p3d_severity_name(k->severity));
        sgr(t, "0");
        p3d_sb_printf(b, "  %s\n", k->code);
        p3d_sb_pad(b, ' ', 11);
        wrap(b, esc(t, k->message), 11, 11);
    }
}

/* One headline sentence (the figure that matters most for this mesh),
 * then the figures side by side. */
static void baseline(tx *t, const p3d_report_in *in)
{
    p3d_sb *b = &t->b;
    const char *me = in->pl->policy ? esc(t, in->pl->policy) : "policy";
    p3d_sb_putc(b, '\n');
    if (!in->base_pl || !in->base_an) {
        p3d_sb_printf(b, "Compared with naive: %s\n",
                      in->pl->policy && !strcmp(in->pl->policy, "naive") ? "this is the naive baseline"
                                                                         : "baseline not available");
        return;
    }
    const p3d_analysis *a = in->an, *z = in->base_an;
    const p3d_mesh *m = &in->pl->mesh;
    sgr(t, "1");
    p3d_sb_puts(b, "Compared with naive on the same input: ");
    sgr(t, "0");
    if (m->size[P3D_DIM_PP] > 1)
        p3d_sb_printf(b, "naive: %d of %d pipelines cross racks; %s: %d\n", p3d_pp_cross_rack(z),
                      z->dim[P3D_DIM_PP].ngroups, me, p3d_pp_cross_rack(a));
    else if (m->size[P3D_DIM_TP] > 1)
        p3d_sb_printf(b, "naive: %d of %d TP groups off NVLink; %s: %d\n", p3d_tp_off_nvlink(z),
                      z->dim[P3D_DIM_TP].ngroups, me, p3d_tp_off_nvlink(a));
    else
        p3d_sb_printf(b, "errors/warnings naive %d/%d; %s: %d/%d\n", z->nerrors, z->nwarnings, me, a->nerrors,
                      a->nwarnings);
    char v[3][2][32];
    snprintf(v[0][0], 32, "%d of %d", p3d_tp_off_nvlink(z), z->dim[P3D_DIM_TP].ngroups);
    snprintf(v[0][1], 32, "%d of %d", p3d_tp_off_nvlink(a), a->dim[P3D_DIM_TP].ngroups);
    snprintf(v[1][0], 32, "%d of %d", p3d_pp_cross_rack(z), z->dim[P3D_DIM_PP].ngroups);
    snprintf(v[1][1], 32, "%d of %d", p3d_pp_cross_rack(a), a->dim[P3D_DIM_PP].ngroups);
    snprintf(v[2][0], 32, "%d / %d", z->nerrors, z->nwarnings);
    snprintf(v[2][1], 32, "%d / %d", a->nerrors, a->nwarnings);
    static const char *const rows[3] = {"TP groups off NVLink", "pipelines crossing racks", "errors / warnings"};
    p3d_sb_printf(b, "  %-26s  %16s  %16s\n", "", "naive", me);
    for (int i = 0; i < 3; i++)
        p3d_sb_printf(b, "  %-26s  %16s  %16s\n", rows[i], v[i][0], v[i][1]);
}

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
    p3d_sb_printf(b, "  assumed: %s, %.0f TFLOP/s sustained (%s), MFU against %.0f peak\n",
                  x->gpu_name ? x->gpu_name : "H100", x->tflops, x->tflops_source ? x->tflops_source : "default",
                  x->peak_tflops);
    if (x->micro_batches_assumed)
        p3d_sb_printf(b, "  assumed: %d micro-batches (4 x pp; give --global-batch or --micro-batches)\n",
                      x->micro_batches);
    p3d_cost_compare_note(b, x, label, y, "naive", "  ");
    if (!x->fits)
        p3d_sb_puts(b, "  the model state does NOT fit GPU memory (see MODEL_DOES_NOT_FIT)\n");
}

static void cost(tx *t, const p3d_report_in *in)
{
    if (!in->an->has_cost)
        return;
    char title[128];
    p3d_sb_putc(&t->b, '\n');
    snprintf(title, sizeof title, "Cost estimate for %s (per GPU per step; docs/cost-model.md formulas)",
             in->job->model.name);
    heading(t, title);
    p3d_report_cost_table(&t->b, in, in->pl->policy ? esc(t, in->pl->policy) : "policy");
}

char *p3d_report_text(const p3d_report_in *in)
{
    tx t = {.color = in->color};
    size_t *first = NULL;
    int *rank_at = NULL, dims[P3D_NDIMS];
    int nd = p3d_report_dims(&in->pl->mesh, dims);
    if (p3d_report_slots(in->cluster, in->pl, &first, &rank_at) < 0)
        return NULL;
    header(&t, in);
    grid(&t, in, dims, nd, first, rank_at);
    groups(&t, in, dims, nd);
    links(&t, in, dims, nd);
    checks(&t, in->an);
    baseline(&t, in);
    cost(&t, in);
    free(first);
    free(rank_at);
    return terminal_safe(&t);
}
