/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_draw.c — the placement as a picture (SVG elements), shared by the
 * SVG and HTML reports: racks side by side, nodes stacked inside them, GPUs
 * as labelled cells, NVLink domains outlined with dashes. Each view colours
 * the GPUs by one thing (pipeline stage, TP group, pipeline, DP group) and
 * draws the links its groups cross between nodes; a link that leaves the
 * group's intended domain (TP: its NVLink domain; PP: its rack) is red.
 *
 * Racks are laid out in rows that fit a PAGE_W-pixel window (four racks of
 * 8-GPU nodes a row: a node shows its GPUs MAX_COLS to a row), each rack's
 * nodes stacked top to bottom. Big clusters stay readable, and the picture
 * bounded, by drawing at most MAX_NODES_PER_RACK nodes of each rack and
 * MAX_RACKS of racks, summarising the rest in one line each. Output depends
 * only on the input (no time, no randomness), so reports are
 * byte-identical.
 */
#include "report_draw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CW 68 /* GPU cell */
#define CH 34
#define GAP 4
#define NPAD 6   /* node padding */
#define NHEAD 16 /* node label */
#define NGAP 8
#define RPAD 10
#define RHEAD 22
#define RGAP 18
#define MAX_COLS 4            /* GPU cells a row inside a node */
#define MAX_NODES_PER_RACK 32 /* every node of a 16- or 32-node rack */
#define MAX_RACKS 64          /* 16 rows of 4 */
#define PAGE_W 1400           /* the window the picture fits, margins included */
#define PAGE_MARGIN 56        /* the SVG report's 2 x 12, the HTML page's 2 x 16 */
#define HIDDEN_RACKS_H 24     /* the line under the racks that names those not drawn */
#define MAX_LINES 3000
#define LEG_ROW 18   /* one row of legend swatches */
#define LEG_LINES 40 /* the two text lines under the swatches */
#define LEG_ENTRY 44 /* one swatch and its number */
#define LEG_ROWS 3   /* swatch rows at most */
#define NHUES 12
#define NTIERS 3
#define NPATTERNS 4
#define NSTYLES (NHUES * NTIERS * NPATTERNS)
#define WARN "#d62728"
#define GREY "#6f6f6f"

typedef struct dnode {
    int drawn;
    int x, y, w, h;
} dnode;

typedef struct drack {
    int x, y, w, h;
    int drawn; /* one of the first MAX_RACKS with nodes */
    int nnodes, nhidden;
    int hidden_first, hidden_last; /* node indices of the summarised nodes */
    int rank_lo, rank_hi;          /* ranks on the summarised nodes */
} drack;

struct p3d_draw {
    const p3d_report_in *in;
    size_t nnodes, nracks;
    dnode *nodes;
    drack *racks;
    size_t *gpu_off;     /* first slot of node i in rank_at */
    int *rank_at;        /* (node, gpu) -> rank, -1 none */
    int *gid[P3D_NDIMS]; /* rank -> dense group index per dim (tp, pp, dp) */
    int ngroups[P3D_NDIMS];
    int nracks_hidden; /* racks with nodes beyond MAX_RACKS */
    int hidden_rack_first, hidden_rack_last, hidden_rank_lo, hidden_rank_hi;
    int w, h;  /* drawing without legend */
    int leg_h; /* tallest legend of the four views */
};

static int legend_height(const p3d_draw *d, int view);

const char *p3d_draw_view_title(int view)
{
    static const char *const t[P3D_NVIEWS] = {"Pipeline stages", "Tensor-parallel groups", "Pipelines",
                                              "Data-parallel groups"};
    return view >= 0 && view < P3D_NVIEWS ? t[view] : "?";
}

/* Light colours so black labels stay readable: HSL with fixed S, L from
 * the tier (0: light, 1: mid, 2: pale). */
static void hsl_hex(double hue, int tier, char out[8])
{
    static const double L[NTIERS] = {0.74, 0.64, 0.87};
    double s = 0.65, l = L[tier % NTIERS];
    double c = (1 - fabs(2 * l - 1)) * s, hp = fmod(hue, 360.0) / 60.0;
    double x = c * (1 - fabs(fmod(hp, 2.0) - 1)), r = 0, g = 0, bl = 0;
    if (hp < 1)
        r = c, g = x;
    else if (hp < 2)
        r = x, g = c;
    else if (hp < 3)
        g = c, bl = x;
    else if (hp < 4)
        g = x, bl = c;
    else if (hp < 5)
        r = x, bl = c;
    else
        r = c, bl = x;
    double mm = l - c / 2;
    snprintf(out, 8, "#%02x%02x%02x", (int)lround((r + mm) * 255), (int)lround((g + mm) * 255),
             (int)lround((bl + mm) * 255));
}

/* How one group (or stage) is drawn: a fill colour and a pattern laid over
 * it (0: none). */
typedef struct cstyle {
    char fill[8];
    int pattern;
} cstyle;

/* Stages run along the hue circle in order (neighbouring stages look
 * alike, so the eye follows a pipeline); beyond NHUES stages every other
 * stage is a tier darker, so neighbours still differ. Groups step through
 * 12 hues 150 degrees apart (consecutive groups never look alike), then
 * through the lightness tiers, then the patterns. */
static cstyle view_style(int view, int idx, int n)
{
    static const int hue_order[NHUES] = {0, 5, 10, 3, 8, 1, 6, 11, 4, 9, 2, 7};
    cstyle st = {"", 0};
    if (idx < 0)
        idx = 0;
    if (view == P3D_VIEW_STAGE) {
        hsl_hex(fmod(200.0 + 360.0 * idx / (n > 0 ? n : 1), 360.0), n > NHUES ? idx % 2 : 0, st.fill);
        return st;
    }
    int k = idx % NSTYLES;
    hsl_hex(20.0 + 30.0 * hue_order[k % NHUES], (k / NHUES) % NTIERS, st.fill);
    st.pattern = k / (NHUES * NTIERS);
    return st;
}

/* The fill patterns, with ids unique to the view (the HTML page holds four
 * drawings, and a pattern defined in a hidden one would not paint). */
static void pattern_defs(p3d_sb *b, int view)
{
    p3d_sb_printf(b,
                  "<defs>\n"
                  "<pattern id=\"p3d-v%d-pat1\" width=\"7\" height=\"7\" patternUnits=\"userSpaceOnUse\" "
                  "patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"7\" fill=\"#000\" "
                  "fill-opacity=\"0.22\"/></pattern>\n"
                  "<pattern id=\"p3d-v%d-pat2\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\">"
                  "<circle cx=\"3\" cy=\"3\" r=\"1.3\" fill=\"#000\" fill-opacity=\"0.3\"/></pattern>\n"
                  "<pattern id=\"p3d-v%d-pat3\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\">"
                  "<path d=\"M0 0L8 8M8 0L0 8\" stroke=\"#000\" stroke-opacity=\"0.22\" stroke-width=\"1.2\"/>"
                  "</pattern>\n</defs>\n",
                  view, view, view);
}

/* A filled rectangle in a style: the colour, then its pattern on top. */
static void style_rect(p3d_sb *b, int view, const cstyle *st, int x, int y, int w, int h, int rx)
{
    p3d_sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"%d\" fill=\"%s\"/>", x, y, w, h, rx,
                  st->fill);
    if (st->pattern)
        p3d_sb_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"%d\" fill=\"url(#p3d-v%d-pat%d)\"/>",
                      x, y, w, h, rx, view, st->pattern);
}

static int view_dim(int view)
{
    return view == P3D_VIEW_TP ? P3D_DIM_TP : view == P3D_VIEW_DP ? P3D_DIM_DP : P3D_DIM_PP;
}

void p3d_draw_free(p3d_draw *d)
{
    if (!d)
        return;
    free(d->nodes);
    free(d->racks);
    free(d->gpu_off);
    free(d->rank_at);
    for (int k = 0; k < P3D_NDIMS; k++)
        free(d->gid[k]);
    free(d);
}

/* Dense group indices in order of each group's lowest rank. */
static int group_ids(p3d_draw *d, int dim)
{
    const p3d_placement *pl = d->in->pl;
    int world = pl->world;
    int *key_to = malloc((size_t)(world > 0 ? world : 1) * sizeof *key_to);
    d->gid[dim] = malloc((size_t)(world > 0 ? world : 1) * sizeof(int));
    if (!key_to || !d->gid[dim]) {
        free(key_to);
        return -1;
    }
    for (int r = 0; r < world; r++)
        key_to[r] = -1;
    int n = 0;
    for (int r = 0; r < world; r++) {
        int coord[P3D_NDIMS];
        p3d_mesh_coord(&pl->mesh, r, coord);
        coord[dim] = 0;
        int key = p3d_mesh_rank(&pl->mesh, coord);
        if (key < 0 || key >= world)
            key = 0;
        if (key_to[key] < 0)
            key_to[key] = n++;
        d->gid[dim][r] = key_to[key];
    }
    d->ngroups[dim] = n;
    free(key_to);
    return 0;
}

static int node_gpus(const p3d_draw *d, size_t i)
{
    const p3d_node *t = d->in->cluster->nodes[i].topo;
    return t ? t->ngpus : 0;
}

/* Widens [*lo, *hi] (-1: empty) to the ranks on node i's GPUs. */
static void node_rank_range(const p3d_draw *d, size_t i, int *lo, int *hi)
{
    for (int g = 0; g < node_gpus(d, i); g++) {
        int rank = d->rank_at[d->gpu_off[i] + (size_t)g];
        if (rank < 0)
            continue;
        if (*lo < 0 || rank < *lo)
            *lo = rank;
        if (rank > *hi)
            *hi = rank;
    }
}

/* Which rank sits on each GPU slot, and each rank's group per dimension. */
static int index_ranks(p3d_draw *d)
{
    const p3d_report_in *in = d->in;
    for (size_t i = 0; i < d->nnodes; i++)
        d->gpu_off[i + 1] = d->gpu_off[i] + (size_t)node_gpus(d, i);
    size_t slots = d->gpu_off[d->nnodes];
    d->rank_at = malloc((slots ? slots : 1) * sizeof *d->rank_at);
    if (!d->rank_at)
        return -1;
    for (size_t k = 0; k < slots; k++)
        d->rank_at[k] = -1;
    if (in->pl) {
        for (int r = 0; r < in->pl->world; r++) {
            const p3d_rank *rk = &in->pl->ranks[r];
            if (rk->node >= 0 && (size_t)rk->node < d->nnodes && rk->gpu >= 0 && rk->gpu < node_gpus(d, rk->node))
                d->rank_at[d->gpu_off[rk->node] + (size_t)rk->gpu] = r;
        }
        if (group_ids(d, P3D_DIM_TP) < 0 || group_ids(d, P3D_DIM_PP) < 0 || group_ids(d, P3D_DIM_DP) < 0)
            return -1;
    }
    return 0;
}

/* Each rack's nodes in cluster order, top to bottom, positions relative
 * to the rack (one pass over the nodes); nodes past MAX_NODES_PER_RACK are
 * counted, not drawn. Returns the width of a rack. */
static int stack_nodes(p3d_draw *d)
{
    const p3d_cluster *c = d->in->cluster;
    int node_w = 0;
    for (size_t i = 0; i < d->nnodes; i++) {
        int g = node_gpus(d, i), cols = g < MAX_COLS ? (g ? g : 1) : MAX_COLS;
        int w = 2 * NPAD + cols * CW + (cols - 1) * GAP;
        if (w > node_w)
            node_w = w;
    }
    if (node_w < 200)
        node_w = 200;
    int rack_w = node_w + 2 * RPAD;
    for (size_t r = 0; r < d->nracks; r++) {
        drack *rk = &d->racks[r];
        rk->w = rack_w;
        rk->h = RHEAD; /* the next node's y for now */
        rk->hidden_first = rk->hidden_last = -1;
        rk->rank_lo = rk->rank_hi = -1;
    }
    for (size_t i = 0; i < d->nnodes; i++) {
        int nr = c->nodes[i].rack;
        drack *rk = &d->racks[(size_t)nr < d->nracks ? (size_t)nr : 0];
        rk->nnodes++;
        if (rk->nnodes > MAX_NODES_PER_RACK) {
            rk->nhidden++;
            if (rk->hidden_first < 0)
                rk->hidden_first = (int)i;
            rk->hidden_last = (int)i;
            node_rank_range(d, i, &rk->rank_lo, &rk->rank_hi);
            continue;
        }
        dnode *n = &d->nodes[i];
        int g = node_gpus(d, i), rows = g ? (g + MAX_COLS - 1) / MAX_COLS : 1;
        n->drawn = 1;
        n->x = RPAD;
        n->y = rk->h;
        n->w = node_w;
        n->h = NHEAD + NPAD + rows * CH + (rows - 1) * GAP + NPAD;
        rk->h += n->h + NGAP;
    }
    return rack_w;
}

/* Racks in rows of per_row, each row as tall as its tallest rack; racks
 * past MAX_RACKS are named in one line, their nodes not drawn. Sets the
 * drawing's size. */
static void place_racks(p3d_draw *d, int rack_w)
{
    int per_row = (PAGE_W - PAGE_MARGIN + RGAP) / (rack_w + RGAP);
    if (per_row < 1)
        per_row = 1;
    int k = 0, row_y = 0, row_h = 0, ncols = 0;
    d->hidden_rack_first = d->hidden_rack_last = d->hidden_rank_lo = d->hidden_rank_hi = -1;
    for (size_t r = 0; r < d->nracks; r++) {
        drack *rk = &d->racks[r];
        if (!rk->nnodes)
            continue;
        if (rk->nhidden)
            rk->h += 34;
        rk->h += RPAD - NGAP;
        if (k == MAX_RACKS) {
            d->nracks_hidden++;
            if (d->hidden_rack_first < 0)
                d->hidden_rack_first = (int)r;
            d->hidden_rack_last = (int)r;
            continue;
        }
        if (k && k % per_row == 0) {
            row_y += row_h + RGAP;
            row_h = 0;
        }
        rk->drawn = 1;
        rk->x = (k % per_row) * (rack_w + RGAP);
        rk->y = row_y;
        row_h = rk->h > row_h ? rk->h : row_h;
        ncols = k % per_row + 1 > ncols ? k % per_row + 1 : ncols;
        k++;
    }
    d->w = ncols ? ncols * (rack_w + RGAP) - RGAP : rack_w;
    d->h = k ? row_y + row_h : 0;
}

/* A row's racks share its height; nodes move to their rack's place (or,
 * in a hidden rack, are not drawn and their ranks named in a range). */
static void settle_nodes(p3d_draw *d)
{
    const p3d_cluster *c = d->in->cluster;
    for (size_t r = 0; r < d->nracks; r++) {
        drack *rk = &d->racks[r];
        if (!rk->drawn)
            continue;
        int h = 0;
        for (size_t q = 0; q < d->nracks; q++)
            if (d->racks[q].drawn && d->racks[q].y == rk->y && d->racks[q].h > h)
                h = d->racks[q].h;
        rk->h = h;
    }
    for (size_t i = 0; i < d->nnodes; i++) {
        int nr = c->nodes[i].rack;
        const drack *rk = &d->racks[(size_t)nr < d->nracks ? (size_t)nr : 0];
        dnode *n = &d->nodes[i];
        if (!rk->drawn) {
            n->drawn = 0;
            node_rank_range(d, i, &d->hidden_rank_lo, &d->hidden_rank_hi);
        } else if (n->drawn) {
            n->x += rk->x;
            n->y += rk->y;
        }
    }
}

p3d_draw *p3d_draw_new(const p3d_report_in *in)
{
    const p3d_cluster *c = in->cluster;
    p3d_draw *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->in = in;
    d->nnodes = c ? c->nnodes : 0;
    d->nracks = c && c->nracks ? c->nracks : 1;
    d->nodes = calloc(d->nnodes ? d->nnodes : 1, sizeof *d->nodes);
    d->racks = calloc(d->nracks, sizeof *d->racks);
    d->gpu_off = calloc(d->nnodes + 1, sizeof *d->gpu_off);
    if (!d->nodes || !d->racks || !d->gpu_off || index_ranks(d) < 0)
        goto fail;
    place_racks(d, stack_nodes(d));
    settle_nodes(d);
    if (d->nracks_hidden)
        d->h += HIDDEN_RACKS_H;
    for (int v = 0; v < P3D_NVIEWS; v++) {
        int lh = legend_height(d, v);
        if (lh > d->leg_h)
            d->leg_h = lh;
    }
    return d;
fail:
    p3d_draw_free(d);
    return NULL;
}

/* Width of the drawing (room for the summary and legend lines). */
static int draw_width(const p3d_draw *d)
{
    return d->w < 1040 ? 1040 : d->w;
}

void p3d_draw_size(const p3d_draw *d, int *w, int *h)
{
    *w = draw_width(d);
    *h = d->h + d->leg_h;
}

static void cell_pos(const p3d_draw *d, size_t node, int gpu, int *x, int *y)
{
    const dnode *n = &d->nodes[node];
    *x = n->x + NPAD + (gpu % MAX_COLS) * (CW + GAP);
    *y = n->y + NHEAD + NPAD + (gpu / MAX_COLS) * (CH + GAP);
}

/* The groups a view colours: pipeline stages, or the groups of its dim. */
static int view_count(const p3d_draw *d, int view)
{
    if (!d->in->pl)
        return 0;
    return view == P3D_VIEW_STAGE ? d->in->pl->mesh.size[P3D_DIM_PP] : d->ngroups[view_dim(view)];
}

static const char *view_caption(int view)
{
    static const char *const t[P3D_NVIEWS] = {"stage:", "TP group:", "pipeline:", "DP group:"};
    return view >= 0 && view < P3D_NVIEWS ? t[view] : "";
}

#define LEG_X0 84 /* swatches start right of the caption */

static int legend_per_row(const p3d_draw *d)
{
    int n = (draw_width(d) - LEG_X0) / LEG_ENTRY;
    return n > 1 ? n : 1;
}

static int legend_shown(const p3d_draw *d, int view)
{
    int n = view_count(d, view), max = legend_per_row(d) * LEG_ROWS;
    return n < max ? n : max;
}

static int legend_height(const p3d_draw *d, int view)
{
    int shown = legend_shown(d, view), per = legend_per_row(d);
    int rows = shown ? (shown + per - 1) / per : 1;
    return 4 + rows * LEG_ROW + LEG_LINES;
}

/* The point where the segment from the centre of a cell towards (dx, dy)
 * leaves the cell, so a link starts and ends at cell edges and never runs
 * over the labels of the cells it joins. */
static void cell_exit(int cx, int cy, double dx, double dy, double *x, double *y)
{
    double tx = dx != 0 ? (CW / 2.0 + 1) / fabs(dx) : 1e30, ty = dy != 0 ? (CH / 2.0 + 1) / fabs(dy) : 1e30;
    double t = tx < ty ? tx : ty;
    if (t > 1)
        t = 1;
    *x = cx + t * dx;
    *y = cy + t * dy;
}

/* Links between consecutive members of each group of the view's dimension
 * that cross nodes; red when they leave the group's intended domain. */
static void draw_links(p3d_sb *b, const p3d_draw *d, int view, int *nwarn)
{
    const p3d_placement *pl = d->in->pl;
    const p3d_cluster *c = d->in->cluster;
    int dim = view_dim(view), lines = 0;
    int members[4096];
    int gmax = view == P3D_VIEW_DP ? 8 : d->ngroups[dim]; /* DP: a sample keeps it legible */
    char *done = calloc((size_t)(d->ngroups[dim] > 0 ? d->ngroups[dim] : 1), 1);
    if (!done)
        return;
    for (int r = 0; r < pl->world && lines < MAX_LINES; r++) {
        int g = d->gid[dim][r];
        if (done[g] || g >= gmax)
            continue;
        done[g] = 1;
        int n = p3d_group_members(&pl->mesh, dim, r, members, 4096);
        if (n > 4096)
            n = 4096;
        for (int k = 0; k + 1 < n && lines < MAX_LINES; k++) {
            const p3d_rank *a = &pl->ranks[members[k]], *z = &pl->ranks[members[k + 1]];
            if (a->node == z->node)
                continue; /* inside a node: the outlines tell */
            p3d_link l = p3d_cluster_link(c, (size_t)a->node, a->gpu, (size_t)z->node, z->gpu);
            int warn = (dim == P3D_DIM_TP && l > P3D_LINK_MNNVL) || (dim == P3D_DIM_PP && l >= P3D_LINK_XRACK);
            if (warn)
                (*nwarn)++;
            if (!d->nodes[a->node].drawn || !d->nodes[z->node].drawn)
                continue;
            int x1, y1, x2, y2;
            cell_pos(d, (size_t)a->node, a->gpu, &x1, &y1);
            cell_pos(d, (size_t)z->node, z->gpu, &x2, &y2);
            x1 += CW / 2, y1 += CH / 2, x2 += CW / 2, y2 += CH / 2;
            double ax, ay, zx, zy;
            cell_exit(x1, y1, x2 - x1, y2 - y1, &ax, &ay);
            cell_exit(x2, y2, x1 - x2, y1 - y2, &zx, &zy);
            p3d_sb_printf(b,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%s\" "
                          "stroke-opacity=\"0.8\"><title>%s ranks %d-%d over %s</title></line>\n",
                          ax, ay, zx, zy, warn ? WARN : GREY, warn ? "2.5" : "1.2", p3d_dim_name(dim), members[k],
                          members[k + 1], p3d_link_desc(l));
            lines++;
        }
    }
    free(done);
}

static void legend(p3d_sb *b, const p3d_draw *d, int view, int y, int nwarn)
{
    int n = view_count(d, view), shown = legend_shown(d, view), per = legend_per_row(d);
    int rows = shown ? (shown + per - 1) / per : 1;
    p3d_sb_printf(
        b, "<g class=\"legend\" transform=\"translate(0,%d)\" font-size=\"11\">\n<text x=\"0\" y=\"15\">%s</text>\n", y,
        view_caption(view));
    for (int i = 0; i < shown; i++) {
        cstyle st = view_style(view, i, n);
        int x = LEG_X0 + (i % per) * LEG_ENTRY, yy = 4 + (i / per) * LEG_ROW;
        style_rect(b, view, &st, x, yy, 14, 14, 0);
        p3d_sb_printf(b,
                      "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" fill=\"none\" stroke=\"#333\"/>"
                      "<text x=\"%d\" y=\"%d\">%d</text>\n",
                      x, yy, x + 18, yy + 11, i);
    }
    int ly = 4 + rows * LEG_ROW;
    p3d_sb_printf(b,
                  "<rect x=\"0\" y=\"%d\" width=\"22\" height=\"12\" fill=\"none\" stroke=\"#333\" "
                  "stroke-dasharray=\"4 2\"/><text x=\"28\" y=\"%d\">NVLink domain</text>"
                  "<line x1=\"130\" y1=\"%d\" x2=\"158\" y2=\"%d\" stroke=\"" GREY "\" stroke-width=\"1.2\"/>"
                  "<text x=\"164\" y=\"%d\">group link between nodes</text>"
                  "<line x1=\"330\" y1=\"%d\" x2=\"358\" y2=\"%d\" stroke=\"" WARN "\" stroke-width=\"2.5\"/>"
                  "<text x=\"364\" y=\"%d\">leaves its domain (TP: NVLink domain, PP: rack)",
                  ly, ly + 10, ly + 6, ly + 6, ly + 10, ly + 6, ly + 6, ly + 10);
    if (view != P3D_VIEW_STAGE)
        p3d_sb_printf(b, ": %d link%s", nwarn, nwarn == 1 ? "" : "s");
    p3d_sb_printf(b, "</text>\n<text x=\"0\" y=\"%d\">cell: rank (bold), GPU index g#, then (tp,pp,dp) coordinates",
                  ly + 30);
    if (n > shown)
        p3d_sb_printf(b, "; colours for the first %d of %d", shown, n);
    if (view != P3D_VIEW_STAGE && n > NSTYLES)
        p3d_sb_printf(b, "; %d styles (12 hues x 3 shades x 4 patterns), so group k looks like group k+%d", NSTYLES,
                      NSTYLES);
    else if (view != P3D_VIEW_STAGE && n > NHUES)
        p3d_sb_printf(b, "; each of the %d groups has its own hue, shade and pattern", n);
    if (view == P3D_VIEW_DP && n > 8)
        p3d_sb_printf(b, "; lines for the first 8 of %d DP groups", n);
    if (d->in->cluster->nnvl_domains)
        p3d_sb_puts(b, "; purple frame: a node in a multi-node NVLink domain");
    p3d_sb_puts(b, "</text>\n</g>\n");
}

/* Frames (racks, nodes, NVLink domains) and coloured cells: the bottom
 * layer. */
static void draw_cells(p3d_sb *b, const p3d_draw *d, int view)
{
    const p3d_cluster *c = d->in->cluster;
    const p3d_placement *pl = d->in->pl;
    int dim = view_dim(view), n = view_count(d, view);
    for (size_t r = 0; r < d->nracks; r++) {
        const drack *rk = &d->racks[r];
        if (rk->drawn)
            p3d_sb_printf(b,
                          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"6\" fill=\"#f4f4f4\" "
                          "stroke=\"#999\"/>\n",
                          rk->x, rk->y, rk->w, rk->h);
    }
    for (size_t i = 0; i < d->nnodes; i++) {
        const dnode *nd = &d->nodes[i];
        if (!nd->drawn)
            continue;
        const p3d_cnode *cn = &c->nodes[i];
        int mn = cn->nvl_domain >= 0;
        p3d_sb_printf(b,
                      "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"#fff\" stroke=\"%s\" "
                      "stroke-width=\"%s\"/>\n",
                      nd->x, nd->y, nd->w, nd->h, mn ? "#7b3fa0" : "#444", mn ? "2.5" : "1");
        const p3d_node *t = cn->topo;
        int g = t ? t->ngpus : 0;
        /* NVLink domains of this node, outlined (bounding box of members) */
        for (int dom = 0; t && dom < t->ndomains; dom++) {
            int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1, cnt = 0;
            for (int k = 0; k < g; k++)
                if (t->gpus[k].domain == dom) {
                    int cx, cy;
                    cell_pos(d, i, k, &cx, &cy);
                    x0 = cx < x0 ? cx : x0;
                    y0 = cy < y0 ? cy : y0;
                    x1 = cx + CW > x1 ? cx + CW : x1;
                    y1 = cy + CH > y1 ? cy + CH : y1;
                    cnt++;
                }
            if (cnt > 1)
                p3d_sb_printf(b,
                              "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\" "
                              "stroke-dasharray=\"4 2\"/>\n",
                              x0 - 2, y0 - 2, x1 - x0 + 4, y1 - y0 + 4);
        }
        for (int k = 0; k < g; k++) {
            int cx, cy, rank = d->rank_at[d->gpu_off[i] + (size_t)k];
            cell_pos(d, i, k, &cx, &cy);
            cstyle st = {"#eeeeee", 0};
            if (rank >= 0) {
                const p3d_rank *rk = &pl->ranks[rank];
                st = view_style(view, view == P3D_VIEW_STAGE ? rk->coord[P3D_DIM_PP] : d->gid[dim][rank], n);
            }
            p3d_sb_puts(b, "<g>");
            style_rect(b, view, &st, cx, cy, CW, CH, 3);
            p3d_sb_printf(b,
                          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"3\" fill=\"none\" stroke=\"#555\"/>",
                          cx, cy, CW, CH);
            if (rank >= 0) {
                const p3d_rank *rk = &pl->ranks[rank];
                p3d_sb_printf(b, "<title>rank %d on ", rank);
                p3d_xml_text(b, cn->name);
                p3d_sb_printf(b, " GPU %d: tp %d, pp %d, dp %d; TP group %d, pipeline %d, DP group %d</title>", k,
                              rk->coord[P3D_DIM_TP], rk->coord[P3D_DIM_PP], rk->coord[P3D_DIM_DP],
                              d->gid[P3D_DIM_TP][rank], d->gid[P3D_DIM_PP][rank], d->gid[P3D_DIM_DP][rank]);
            } else {
                p3d_sb_printf(b, "<title>GPU %d: no rank</title>", k);
            }
            p3d_sb_puts(b, "</g>\n");
        }
    }
}

/* Every label, last, each with a halo of its background's colour: lines
 * pass behind them. */
static void draw_labels(p3d_sb *b, const p3d_draw *d, int view)
{
    const p3d_cluster *c = d->in->cluster;
    const p3d_placement *pl = d->in->pl;
    int dim = view_dim(view), n = view_count(d, view);
    p3d_sb_puts(b, "<g paint-order=\"stroke\" stroke-linejoin=\"round\">\n");
    for (size_t r = 0; r < d->nracks; r++) {
        const drack *rk = &d->racks[r];
        if (!rk->drawn)
            continue;
        p3d_sb_printf(b,
                      "<text x=\"%d\" y=\"%d\" font-size=\"13\" font-weight=\"bold\" stroke=\"#f4f4f4\" "
                      "stroke-width=\"3\">rack ",
                      rk->x + 8, rk->y + 16);
        p3d_xml_text(b, c->nracks ? c->racks[r] : "default");
        p3d_sb_printf(b, " (%d node%s)</text>\n", rk->nnodes, rk->nnodes == 1 ? "" : "s");
        if (rk->nhidden) {
            p3d_sb_printf(b,
                          "<text x=\"%d\" y=\"%d\" font-size=\"11\" stroke=\"#f4f4f4\" stroke-width=\"3\">+ %d "
                          "more node%s: ",
                          rk->x + RPAD, rk->y + rk->h - RPAD - 18, rk->nhidden, rk->nhidden == 1 ? "" : "s");
            p3d_xml_text(b, c->nodes[rk->hidden_first].name);
            p3d_sb_puts(b, " .. ");
            p3d_xml_text(b, c->nodes[rk->hidden_last].name);
            if (rk->rank_lo >= 0)
                p3d_sb_printf(b,
                              "</text><text x=\"%d\" y=\"%d\" font-size=\"11\" stroke=\"#f4f4f4\" "
                              "stroke-width=\"3\">ranks %d..%d (not drawn)",
                              rk->x + RPAD, rk->y + rk->h - RPAD - 4, rk->rank_lo, rk->rank_hi);
            p3d_sb_puts(b, "</text>\n");
        }
    }
    if (d->nracks_hidden) {
        p3d_sb_printf(b,
                      "<text x=\"0\" y=\"%d\" font-size=\"12\" stroke=\"#fff\" stroke-width=\"3\">+ %d more "
                      "rack%s not drawn: ",
                      d->h - 6, d->nracks_hidden, d->nracks_hidden == 1 ? "" : "s");
        p3d_xml_text(b, c->racks[d->hidden_rack_first]);
        if (d->hidden_rack_last != d->hidden_rack_first) {
            p3d_sb_puts(b, " .. ");
            p3d_xml_text(b, c->racks[d->hidden_rack_last]);
        }
        if (d->hidden_rank_lo >= 0)
            p3d_sb_printf(b, ", ranks %d..%d", d->hidden_rank_lo, d->hidden_rank_hi);
        p3d_sb_puts(b, "</text>\n");
    }
    for (size_t i = 0; i < d->nnodes; i++) {
        const dnode *nd = &d->nodes[i];
        if (!nd->drawn)
            continue;
        const p3d_cnode *cn = &c->nodes[i];
        p3d_sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\" stroke=\"#fff\" stroke-width=\"3\">", nd->x + NPAD,
                      nd->y + 12);
        p3d_xml_text(b, cn->name);
        if (cn->nvl_domain >= 0 && (size_t)cn->nvl_domain < c->nnvl_domains) {
            p3d_sb_puts(b, " [NVLink domain ");
            p3d_xml_text(b, c->nvl_domains[cn->nvl_domain]);
            p3d_sb_putc(b, ']');
        }
        p3d_sb_puts(b, "</text>\n");
        int g = cn->topo ? cn->topo->ngpus : 0;
        for (int k = 0; k < g; k++) {
            int cx, cy, rank = d->rank_at[d->gpu_off[i] + (size_t)k];
            cell_pos(d, i, k, &cx, &cy);
            if (rank < 0) {
                p3d_sb_printf(b,
                              "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\" fill=\"#888\" "
                              "stroke=\"#eeeeee\" stroke-width=\"3\">GPU %d</text>\n",
                              cx + CW / 2, cy + 21, k);
                continue;
            }
            const p3d_rank *rk = &pl->ranks[rank];
            cstyle st = view_style(view, view == P3D_VIEW_STAGE ? rk->coord[P3D_DIM_PP] : d->gid[dim][rank], n);
            p3d_sb_printf(b,
                          "<g stroke=\"%s\" stroke-width=\"3\"><text x=\"%d\" y=\"%d\" font-size=\"11\" "
                          "font-weight=\"bold\">r%d</text><text x=\"%d\" y=\"%d\" font-size=\"9\" "
                          "text-anchor=\"end\" fill=\"#333\">g%d</text><text x=\"%d\" y=\"%d\" font-size=\"9\" "
                          "text-anchor=\"middle\">%d,%d,%d</text></g>\n",
                          st.fill, cx + 4, cy + 14, rank, cx + CW - 4, cy + 13, k, cx + CW / 2, cy + 28,
                          rk->coord[P3D_DIM_TP], rk->coord[P3D_DIM_PP], rk->coord[P3D_DIM_DP]);
        }
    }
    p3d_sb_puts(b, "</g>\n");
}

void p3d_draw_view(p3d_sb *b, const p3d_draw *d, int view, int x, int y)
{
    p3d_sb_printf(b, "<g class=\"view\" transform=\"translate(%d,%d)\" font-family=\"sans-serif\">\n", x, y);
    pattern_defs(b, view);
    draw_cells(b, d, view);
    int nwarn = 0;
    if (d->in->pl && view != P3D_VIEW_STAGE)
        draw_links(b, d, view, &nwarn);
    draw_labels(b, d, view);
    legend(b, d, view, d->h + 4, nwarn);
    p3d_sb_puts(b, "</g>\n");
}
