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
 *
 * Written line by line: the lines wait in a small buffer until
 * drain() has made them terminal-safe and moved them to the output, a
 * buffer (p3d_report_text) or a stream (p3d_report_text_to), and the grid
 * keeps ranks for the nodes it shows only, so memory does not grow with
 * the world.
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
    p3d_sb b;   /* the lines not yet made terminal-safe: the last few only */
    p3d_sb out; /* the report as it is written: a buffer or a stream */
    int color;
    size_t *sgr_at, nsgr, capsgr; /* where our own colour sequences in b start */
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

/* Moves the finished lines of t->b (up to its last newline) into t->out
 * with every terminal control that came from input (node, rack and policy
 * names, file names, notes, messages) written as text: C0 controls but
 * '\n', DEL, C1 controls (U+0080-U+009F; some terminals take U+009B as CSI)
 * and the bidirectional overrides that can reorder what a line seems to
 * say (U+202A-U+202E, U+2066-U+2069). Only the colour sequences sgr()
 * wrote stay escape sequences, so no input can move the cursor, clear the
 * screen or forge a line of the report. Cutting at a newline changes no
 * byte: no UTF-8 sequence holds one. With all, the unfinished line too
 * (the report's end). Called after each line or section, so what waits
 * here stays a few lines whatever the world size. */
static void drain(tx *t, int all)
{
    const unsigned char *s = (const unsigned char *)t->b.p;
    size_t n = t->b.len, k = 0;
    if (!all)
        while (n && s[n - 1] != '\n')
            n--;
    size_t from = 0; /* start of the text since the last colour sequence */
    for (size_t i = 0; s && i < n; i++) {
        if (k < t->nsgr && t->sgr_at[k] == i) {
            p3d_term_put(&t->out, (const char *)s + from, i - from, P3D_TERM_KEEP_NL);
            size_t e = i;
            while (e < t->b.len && s[e] != 'm')
                e++;
            p3d_sb_putn(&t->out, (const char *)s + i, e < t->b.len ? e - i + 1 : t->b.len - i);
            i = e;
            from = e + 1;
            k++;
        }
    }
    if (s && from < n)
        p3d_term_put(&t->out, (const char *)s + from, n - from, P3D_TERM_KEEP_NL);
    if (t->b.oom)
        t->out.oom = 1;
    /* a colour sequence runs to its 'm', which may lie past n */
    size_t cut = from > n ? from : n;
    if (cut > t->b.len)
        cut = t->b.len;
    if (k) {
        memmove(t->sgr_at, t->sgr_at + k, (t->nsgr - k) * sizeof *t->sgr_at);
        t->nsgr -= k;
    }
    for (size_t j = 0; j < t->nsgr; j++)
        t->sgr_at[j] -= cut;
    if (s) {
        memmove(t->b.p, t->b.p + cut, t->b.len - cut);
        t->b.len -= cut;
        t->b.p[t->b.len] = 0;
    }
}

static void tx_free(tx *t)
{
    p3d_sb_free(&t->b);
    free(t->sgr_at);
    for (size_t i = 0; i < t->npool; i++)
        free(t->pool[i]);
    free(t->pool);
    t->sgr_at = NULL;
    t->pool = NULL;
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
                      slots == 1 ? "" : "s", c->nnodes, c->nnodes == 1 ? "" : "s", c->nracks,
                      c->nracks == 1 ? "" : "s");
    else if (slots)
        p3d_sb_printf(b, ", world %d on %zu GPUs and %zu CPU slots of %zu node%s, %zu rack%s", pl->world, gpus - slots,
                      slots, c->nnodes, c->nnodes == 1 ? "" : "s", c->nracks, c->nracks == 1 ? "" : "s");
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
            p3d_sb_printf(b, "%s micro-batch size %d", job->micro_batches ? " of" : ",", job->micro_batch_size);
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
    size_t head = summarize ? GRID_HEAD : nn, tail = summarize ? GRID_TAIL : 0;
    coord_label(&pl->mesh, dims, nd, label, sizeof label);
    int labw = (int)strlen(label) > 4 ? (int)strlen(label) : 4;
    /* a node without GPUs runs its ranks on CPU slots: called slots */
    size_t nslot = 0, nall = 0;
    for (size_t i = 0; i < nn; i++)
        for (int g = 0; c->nodes[i].topo && g < c->nodes[i].topo->ngpus; g++) {
            nall++;
            nslot += !strcmp(c->nodes[i].topo->gpus[g].model, "CPU slot");
        }
    const char *what = !nslot ? "GPU" : nslot == nall ? "CPU slot" : "GPU or CPU slot";
    const char *col = !nslot ? "GPU" : nslot == nall ? "slot" : "GPU/slot";
    if ((int)strlen(col) > labw)
        labw = (int)strlen(col);
    for (size_t i = 0; i < nn; i++) {
        long si = p3d_report_shown(nn, head, tail, i);
        if (si < 0) {
            i = nn - tail - 1;
            continue;
        }
        const p3d_cnode *cn = &c->nodes[i];
        int w = (int)strlen(esc(t, cn->name)), ng = cn->topo->ngpus;
        namew = w > namew ? w : namew;
        w = (int)strlen(esc(t, c->racks[cn->rack]));
        rackw = w > rackw ? w : rackw;
        maxg = ng > maxg ? ng : maxg;
        for (int g = 0; g < ng; g++) {
            int r = rank_at[first[si] + (size_t)g];
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
    p3d_sb_printf(b, "Placement: rank and (%s) on each %s", label, what);
    p3d_sb_puts(b, summarize ? "" : "\n");
    if (summarize)
        p3d_sb_printf(b, " (first %d and last %d of %zu nodes)\n", GRID_HEAD, GRID_TAIL, nn);
    p3d_sb_printf(b, "  %-*s  %-*s  %-*s", namew, "node", rackw, "rack", labw, col);
    for (int g = 0; g < maxg; g++)
        p3d_sb_printf(b, "  %*d", cellw, g);
    p3d_sb_putc(b, '\n');
    for (size_t i = 0; i < nn; i++) {
        long si = p3d_report_shown(nn, head, tail, i);
        if (si < 0) {
            p3d_sb_printf(b, "  ... %zu nodes not shown (--format json lists every rank)\n",
                          nn - GRID_HEAD - GRID_TAIL);
            i = nn - tail - 1;
            continue;
        }
        const p3d_cnode *cn = &c->nodes[i];
        int ng = cn->topo->ngpus;
        p3d_sb_printf(b, "  %-*s  %-*s  %-*s", namew, esc(t, cn->name), rackw, esc(t, c->racks[cn->rack]), labw,
                      "rank");
        for (int g = 0; g < ng; g++) {
            int r = rank_at[first[si] + (size_t)g];
            if (r < 0)
                p3d_sb_printf(b, "  %*s", cellw, "-");
            else
                p3d_sb_printf(b, "  %*d", cellw, r);
        }
        p3d_sb_putc(b, '\n');
        p3d_sb_printf(b, "  %-*s  %-*s  %-*s", namew, "", rackw, "", labw, label);
        for (int g = 0; g < ng; g++) {
            int r = rank_at[first[si] + (size_t)g];
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
        drain(t, 0);
    }
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
        drain(t, 0);
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

static void cost(tx *t, const p3d_report_in *in)
{
    if (in->an->has_infer) {
        char title[128];
        p3d_sb_putc(&t->b, '\n');
        snprintf(title, sizeof title, "Serving estimate for %s (--inference; docs/plan.md, \"Inference\")",
                 in->job->model.name);
        heading(t, title);
        p3d_report_infer_table(&t->b, &in->an->infer);
        return;
    }
    if (!in->an->has_cost)
        return;
    char title[128];
    p3d_sb_putc(&t->b, '\n');
    snprintf(title, sizeof title, "Cost estimate for %s (per GPU per step; docs/cost-model.md formulas)",
             in->job->model.name);
    heading(t, title);
    p3d_report_cost_table(&t->b, in, in->pl->policy ? esc(t, in->pl->policy) : "policy");
}

/* The whole report into t->out, drained line by line; 0, or -1 when out of
 * memory before the first line. */
static int text(tx *t, const p3d_report_in *in)
{
    const p3d_cluster *c = in->cluster;
    size_t *first = NULL;
    int *rank_at = NULL, dims[P3D_NDIMS];
    int nd = p3d_report_dims(&in->pl->mesh, dims);
    int sum = c->nnodes > GRID_MAX_NODES;
    if (p3d_report_slots(c, in->pl, sum ? GRID_HEAD : c->nnodes, sum ? GRID_TAIL : 0, &first, &rank_at) < 0)
        return -1;
    header(t, in);
    drain(t, 0);
    grid(t, in, dims, nd, first, rank_at);
    groups(t, in, dims, nd);
    drain(t, 0);
    links(t, in, dims, nd);
    drain(t, 0);
    checks(t, in->an);
    drain(t, 0);
    baseline(t, in);
    cost(t, in);
    drain(t, 1);
    free(first);
    free(rank_at);
    return 0;
}

char *p3d_report_text(const p3d_report_in *in)
{
    tx t = {.color = in->color};
    int rc = text(&t, in);
    tx_free(&t);
    if (rc < 0) {
        p3d_sb_free(&t.out);
        return NULL;
    }
    return p3d_sb_finish(&t.out);
}

int p3d_report_text_to(const p3d_report_in *in, FILE *f)
{
    tx t = {.color = in->color};
    if (p3d_sb_stream(&t.out, f, P3D_REPORT_STREAM_BUF) < 0)
        return -1;
    if (text(&t, in) < 0)
        t.out.oom = 1;
    tx_free(&t);
    return p3d_sb_stream_end(&t.out);
}
