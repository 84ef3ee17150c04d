/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reshape.c — the shrink of an elastic job (p3d/elastic.h): which replicas
 * go when GPUs are lost and no spare can take them, and the placement of
 * the rest. Only the dp index of a surviving GPU changes, so its shards of
 * the model (which tp, cp, pp own) stay useful after the restart.
 */
#include "reshape_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rs_mesh(const p3d_mesh *old, int ndp, p3d_mesh *out, char **err)
{
    *out = *old;
    out->size[P3D_DIM_DP] = ndp;
    out->size[P3D_DIM_EDP] = 0;
    return p3d_mesh_resolve(out, err);
}

int rs_rank(const p3d_mesh *nm, const int coord[P3D_NDIMS], int dp)
{
    int c[P3D_NDIMS];
    memcpy(c, coord, sizeof c);
    c[P3D_DIM_DP] = dp;
    return p3d_mesh_rank(nm, c);
}

p3d_placement *rs_build(const p3d_placement *old, const p3d_mesh *nm, const int *node, const int *gpu)
{
    int w = p3d_mesh_world(nm);
    p3d_placement *p = calloc(1, sizeof *p);
    if (!p || w < 1)
        goto fail;
    p->world = w;
    p->mesh = *nm;
    p->ranks = calloc((size_t)w, sizeof *p->ranks);
    p->policy = strdup(old->policy ? old->policy : "");
    p->policy_source = strdup(old->policy_source ? old->policy_source : "");
    if (!p->ranks || !p->policy || !p->policy_source)
        goto fail;
    int maxnode = 0;
    for (int r = 0; r < w; r++) {
        p->ranks[r].node = node[r];
        p->ranks[r].gpu = gpu[r];
        p3d_mesh_coord(nm, r, p->ranks[r].coord);
        maxnode = node[r] > maxnode ? node[r] : maxnode;
    }
    /* local ranks: a node's ranks numbered in rank order */
    int *next = calloc((size_t)maxnode + 1, sizeof *next);
    if (!next)
        goto fail;
    for (int r = 0; r < w; r++)
        p->ranks[r].local_rank = next[node[r]]++;
    free(next);
    return p;
fail:
    p3d_placement_free(p);
    return NULL;
}

void p3d_reshape_free(p3d_reshape *r)
{
    if (!r)
        return;
    p3d_placement_free(r->pl);
    free(r->from);
    free(r->dropped);
    memset(r, 0, sizeof *r);
}

int rs_lostmap_make(const p3d_cluster *c, const p3d_gpuref *lost, size_t n, rs_lostmap *m)
{
    m->base = calloc(c->nnodes + 1, sizeof *m->base);
    m->bit = NULL;
    if (!m->base)
        return -1;
    for (size_t i = 0; i < c->nnodes; i++)
        m->base[i + 1] = m->base[i] + (size_t)(c->nodes[i].topo ? c->nodes[i].topo->ngpus : 0);
    if (!(m->bit = calloc(m->base[c->nnodes] + 1, 1)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (lost[i].node < 0 || (size_t)lost[i].node >= c->nnodes)
            continue;
        size_t lo = m->base[lost[i].node], hi = m->base[lost[i].node + 1];
        if (lost[i].gpu < 0)
            memset(m->bit + lo, 1, hi - lo);
        else if (lo + (size_t)lost[i].gpu < hi)
            m->bit[lo + (size_t)lost[i].gpu] = 1;
    }
    return 0;
}

int rs_lostmap_has(const rs_lostmap *m, int node, int gpu)
{
    size_t lo = m->base[node], hi = m->base[node + 1];
    return gpu >= 0 && lo + (size_t)gpu < hi && m->bit[lo + (size_t)gpu];
}

void rs_lostmap_free(rs_lostmap *m)
{
    free(m->base);
    free(m->bit);
    m->base = NULL;
    m->bit = NULL;
}

/* "node003, node007:gpu2" for the message of a shrink below D. */
static char *lost_names(const p3d_cluster *c, const p3d_gpuref *lost, size_t n)
{
    char *s = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *nm = lost[i].node >= 0 && (size_t)lost[i].node < c->nnodes ? c->nodes[lost[i].node].name : "?";
        if (lost[i].gpu < 0)
            p3d_str_appendf(&s, ", ", "%s", nm);
        else
            p3d_str_appendf(&s, ", ", "%s:gpu%d", nm, lost[i].gpu);
    }
    return s;
}

/* The survivors of one shrink: per (replica, unit) whether its TP group
 * is whole, and per replica whether all of it is. */
typedef struct survey {
    int dp, nu, tp;
    unsigned char *unit_ok; /* [dp*nu] */
    unsigned char *rep_ok;  /* [dp] */
    unsigned char *used;    /* [dp*nu]: taken into an assembled replica */
    int intact;
} survey;

static int survey_take(const p3d_cluster *c, const p3d_placement *pl, const p3d_gpuref *lost, size_t nlost, survey *s)
{
    rs_lostmap lm = {0};
    const p3d_mesh *m = &pl->mesh;
    s->dp = p3d_mesh_size(m, P3D_DIM_DP);
    s->nu = p3d_mesh_size(m, P3D_DIM_CP) * p3d_mesh_size(m, P3D_DIM_PP);
    s->tp = p3d_mesh_size(m, P3D_DIM_TP);
    s->unit_ok = malloc((size_t)s->dp * s->nu);
    s->used = calloc((size_t)s->dp * s->nu, 1);
    s->rep_ok = malloc((size_t)s->dp);
    if (!s->unit_ok || !s->used || !s->rep_ok || rs_lostmap_make(c, lost, nlost, &lm) < 0) {
        rs_lostmap_free(&lm);
        return -1;
    }
    memset(s->unit_ok, 1, (size_t)s->dp * s->nu);
    memset(s->rep_ok, 1, (size_t)s->dp);
    for (int r = 0; r < pl->world; r++) {
        const p3d_rank *k = &pl->ranks[r];
        if (rs_lostmap_has(&lm, k->node, k->gpu)) {
            s->unit_ok[k->coord[P3D_DIM_DP] * s->nu + rs_unit(m, k->coord)] = 0;
            s->rep_ok[k->coord[P3D_DIM_DP]] = 0;
        }
    }
    rs_lostmap_free(&lm);
    s->intact = 0;
    for (int d = 0; d < s->dp; d++)
        s->intact += s->rep_ok[d];
    return 0;
}

static void survey_free(survey *s)
{
    free(s->unit_ok);
    free(s->rep_ok);
    free(s->used);
}

/* The rack of the unit (d, u): its tp-rank-0 GPU's node's. */
static int unit_rack(const p3d_cluster *c, const p3d_placement *pl, int d, int u)
{
    const p3d_mesh *m = &pl->mesh;
    int coord[P3D_NDIMS] = {0}, ncp = p3d_mesh_size(m, P3D_DIM_CP);
    coord[P3D_DIM_DP] = d, coord[P3D_DIM_CP] = u % ncp, coord[P3D_DIM_PP] = u / ncp;
    return c->nodes[pl->ranks[p3d_mesh_rank(m, coord)].node].rack;
}

/* A whole unit from a broken replica in rack R at unit index u, not used
 * yet; its replica index, or -1. */
static int pool_find(const p3d_cluster *c, const p3d_placement *pl, const survey *s, int R, int u)
{
    for (int d = 0; d < s->dp; d++)
        if (!s->rep_ok[d] && s->unit_ok[d * s->nu + u] && !s->used[d * s->nu + u] && unit_rack(c, pl, d, u) == R)
            return d;
    return -1;
}

/* How many replicas the broken replicas' whole units make in rack R. */
static int pool_count(const p3d_cluster *c, const p3d_placement *pl, const survey *s, int R)
{
    int most = -1;
    for (int u = 0; u < s->nu; u++) {
        int n = 0;
        for (int d = 0; d < s->dp; d++)
            n += !s->rep_ok[d] && s->unit_ok[d * s->nu + u] && unit_rack(c, pl, d, u) == R;
        most = most < 0 || n < most ? n : most;
    }
    return most < 0 ? 0 : most;
}

/* Old replica d's unit u (its tp GPUs) becomes new replica j's unit u. */
static void move_unit(const p3d_placement *pl, const p3d_mesh *nm, int d, int u, int j, int *node, int *gpu)
{
    const p3d_mesh *m = &pl->mesh;
    int coord[P3D_NDIMS] = {0}, ncp = p3d_mesh_size(m, P3D_DIM_CP);
    coord[P3D_DIM_DP] = d, coord[P3D_DIM_CP] = u % ncp, coord[P3D_DIM_PP] = u / ncp;
    for (int t = 0; t < p3d_mesh_size(m, P3D_DIM_TP); t++) {
        coord[P3D_DIM_TP] = t;
        const p3d_rank *k = &pl->ranks[p3d_mesh_rank(m, coord)];
        int nr = rs_rank(nm, k->coord, j);
        node[nr] = k->node;
        gpu[nr] = k->gpu;
    }
}

/* out->dropped: the old replicas none of from[0..n) kept. */
static void note_dropped(p3d_reshape *out, int old, int n)
{
    out->ndropped = 0;
    for (int d = 0; d < old; d++) {
        int kept = 0;
        for (int j = 0; j < n; j++)
            kept |= out->from[j] == d;
        if (!kept)
            out->dropped[out->ndropped++] = d;
    }
}

int rs_keep(const p3d_placement *pl, const int *keep, int n, p3d_reshape *out)
{
    const p3d_mesh *m = &pl->mesh;
    int rc = -1, old = p3d_mesh_size(m, P3D_DIM_DP), nu = p3d_mesh_size(m, P3D_DIM_CP) * p3d_mesh_size(m, P3D_DIM_PP);
    int w = n * p3d_mesh_size(m, P3D_DIM_TP) * nu;
    int *node = malloc(sizeof *node * (size_t)w), *gpu = malloc(sizeof *gpu * (size_t)w);
    p3d_mesh nm;
    p3d_placement_free(out->pl);
    free(out->from);
    free(out->dropped);
    out->pl = NULL, out->ndropped = 0, out->old_dp = old;
    out->from = malloc(sizeof *out->from * (size_t)n);
    out->dropped = malloc(sizeof *out->dropped * (size_t)old);
    if (!node || !gpu || !out->from || !out->dropped || rs_mesh(m, n, &nm, NULL) < 0)
        goto out;
    for (int j = 0; j < n; j++) {
        for (int u = 0; u < nu; u++)
            move_unit(pl, &nm, keep[j], u, j, node, gpu);
        out->from[j] = keep[j];
    }
    note_dropped(out, old, n);
    rc = (out->pl = rs_build(pl, &nm, node, gpu)) ? 0 : -1;
out:
    free(node);
    free(gpu);
    return rc;
}

/* Fills node/gpu for the new width: intact replicas first (lowest old dp
 * first), then replicas assembled rack by rack. */
/* Replicas per expert-grid block: the fewest k whose tp*cp*k ranks the
 * etp*ep expert groups divide (1 for a dense model). Widths are multiples
 * of it, and a block kept whole keeps its GPUs' ep coordinates too. */
static int ep_block(const p3d_mesh *m)
{
    int a = p3d_mesh_size(m, P3D_DIM_TP) * p3d_mesh_size(m, P3D_DIM_CP);
    int b = p3d_mesh_size(m, P3D_DIM_ETP) * p3d_mesh_size(m, P3D_DIM_EP), x = a, y = b;
    while (y) {
        int t = x % y;
        x = y, y = t;
    }
    return b / x;
}

/* Keeps old replica d as new replica j (every unit in place). */
static void keep_whole(const p3d_placement *pl, const survey *s, const p3d_mesh *nm, int d, int j, p3d_reshape *out,
                       int *node, int *gpu)
{
    for (int u = 0; u < s->nu; u++)
        move_unit(pl, nm, d, u, j, node, gpu);
    out->from[j] = d;
}

/* Fills node/gpu for the new width: whole expert-grid blocks of intact
 * replicas first, then the other intact replicas (lowest old dp first),
 * then replicas assembled rack by rack. */
static void shrink_fill(const p3d_cluster *c, const p3d_placement *pl, survey *s, const p3d_mesh *nm, p3d_reshape *out,
                        int *node, int *gpu)
{
    int j = 0, ndp = out->width.dp, k = ep_block(&pl->mesh);
    unsigned char *kept = s->used; /* per replica, in its unit 0's slot: taken whole */
    for (int b = 0; k > 1 && (b + 1) * k <= s->dp && j + k <= ndp; b++) {
        int whole = 1;
        for (int d = b * k; d < (b + 1) * k; d++)
            whole &= s->rep_ok[d];
        for (int d = b * k; whole && d < (b + 1) * k; d++, j++) {
            keep_whole(pl, s, nm, d, j, out, node, gpu);
            kept[d * s->nu] = 2;
        }
    }
    for (int d = 0; d < s->dp && j < ndp; d++)
        if (s->rep_ok[d] && kept[d * s->nu] != 2)
            keep_whole(pl, s, nm, d, j++, out, node, gpu);
    for (size_t R = 0; R < c->nracks && j < ndp; R++)
        for (int n = pool_count(c, pl, s, (int)R); n > 0 && j < ndp; n--) {
            for (int u = 0; u < s->nu; u++) {
                int d = pool_find(c, pl, s, (int)R, u);
                s->used[d * s->nu + u] = 1;
                move_unit(pl, nm, d, u, j, node, gpu);
            }
            out->from[j++] = -1;
        }
    note_dropped(out, s->dp, ndp);
}

int p3d_shrink_plan(const p3d_cluster *c, const p3d_placement *pl, const p3d_elastic *e, const p3d_gpuref *lost,
                    size_t nlost, p3d_reshape *out, char **err)
{
    int rc = -1, *node = NULL, *gpu = NULL;
    survey s = {0};
    p3d_mesh nm;
    memset(out, 0, sizeof *out);
    if (survey_take(c, pl, lost, nlost, &s) < 0)
        goto oom;
    out->old_dp = s.dp;
    int most = s.intact;
    for (size_t R = 0; R < c->nracks; R++)
        most += pool_count(c, pl, &s, (int)R);
    if (p3d_width_choose(e, &pl->mesh, most, &out->width) < 0) {
        char *names = lost_names(c, lost, nlost);
        const char *why = most >= e->min_dp ? out->width.note : "";
        p3d_err(err,
                "the job cannot continue: %d whole data-parallel replica%s of %d left after losing %s, and "
                "--min-dp is %d%s%s%s",
                most, most == 1 ? "" : "s", s.dp, names ? names : "nothing", e->min_dp,
                *why ? " (no width from there down has a valid batch: " : "", why, *why ? ")" : "");
        free(names);
        goto out;
    }
    if (rs_mesh(&pl->mesh, out->width.dp, &nm, err) < 0)
        goto out;
    node = malloc(sizeof *node * (size_t)out->width.world);
    gpu = malloc(sizeof *gpu * (size_t)out->width.world);
    out->from = malloc(sizeof *out->from * (size_t)out->width.dp);
    out->dropped = malloc(sizeof *out->dropped * (size_t)s.dp);
    if (!node || !gpu || !out->from || !out->dropped)
        goto oom;
    shrink_fill(c, pl, &s, &nm, out, node, gpu);
    if (!(out->pl = rs_build(pl, &nm, node, gpu)))
        goto oom;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "out of memory planning the shrink");
out:
    if (rc < 0)
        p3d_reshape_free(out);
    survey_free(&s);
    free(node);
    free(gpu);
    return rc;
}
