/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan.c — `par3drun plan`'s search: every (tp, cp, pp, dp, virtual stages,
 * micro-batch size, micro-batch count[, ZeRO stage]) that uses all of the
 * cluster's GPUs (tp: divisors of the NVLink domain; cp: powers of two for
 * long sequences; pp: any count up to the layers; v: what divides the
 * layers; dp: what is left), minus what the user pinned,
 * filtered by the hard rules and by memory, ranked by the cost model's step
 * time estimate.
 *
 * No policy runs here. The link class each dimension would use is derived
 * from the cluster's shape the way a topology-aware policy lays ranks out
 * (docs/plan.md): TP inside an NVLink domain, a pipeline on the fewest
 * nodes of one rack, DP across whatever remains.
 */
#include "p3d/p3d.h"
#include "plan_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Facts about the cluster's shape the derivation needs. */
static int cluster_shape(const p3d_cluster *c, p3d_plan *pl, char **err)
{
    int rc = -1;
    int *per_rack = NULL, *per_dom = NULL;
    if (!c || c->nnodes == 0)
        return p3d_err(err, "plan: the cluster has no nodes (give --cluster FILE)");
    /* a one-node cluster built from --topology names that file */
    pl->cluster_source = c->source ? c->source : c->nodes[0].topo ? c->nodes[0].topo->source : NULL;
    pl->cluster_is_topology = !c->source;
    pl->nodes = (int)c->nnodes;
    int G = -1, D = -1;
    p3d_link intra = P3D_LINK_SELF;
    for (size_t i = 0; i < c->nnodes; i++) {
        const p3d_node *n = c->nodes[i].topo;
        int g = n ? n->ngpus : 0;
        if (G < 0 || g < G)
            G = g;
        if (!n || g == 0)
            continue;
        /* smallest NVLink domain of this node */
        for (int d = 0; d < n->ndomains; d++) {
            int cnt = 0;
            for (int k = 0; k < g; k++)
                cnt += n->gpus[k].domain == d;
            if (cnt > 0 && (D < 0 || cnt < D))
                D = cnt;
        }
        /* the slowest class between two GPUs of a node */
        for (int a = 0; n->gg_class && a < g; a++)
            for (int b = 0; b < g; b++)
                if (a != b && n->gg_class[a * g + b] > intra)
                    intra = (p3d_link)n->gg_class[a * g + b];
    }
    if (G <= 0) {
        rc = p3d_err(err, "plan: %s: node '%s' has no GPUs; plan needs GPUs on every node",
                     c->source ? c->source : "cluster", c->nodes[0].name);
        goto out;
    }
    pl->gpus_per_node = G;
    pl->gpus = G * pl->nodes;
    pl->nvl_gpus = D > 0 ? D : 1;
    if (pl->nvl_gpus > G)
        pl->nvl_gpus = G;
    pl->intra_link = intra == P3D_LINK_SELF ? P3D_LINK_NVLINK : intra;

    per_rack = calloc(c->nracks ? c->nracks : 1, sizeof *per_rack);
    per_dom = calloc(c->nnvl_domains ? c->nnvl_domains : 1, sizeof *per_dom);
    if (!per_rack || !per_dom) {
        rc = p3d_err(err, "plan: out of memory");
        goto out;
    }
    int all_mnnvl = 1;
    for (size_t i = 0; i < c->nnodes; i++) {
        int r = c->nodes[i].rack;
        if (r >= 0 && (size_t)r < c->nracks)
            per_rack[r]++;
        int d = c->nodes[i].nvl_domain;
        if (d >= 0 && (size_t)d < c->nnvl_domains)
            per_dom[d]++;
        else
            all_mnnvl = 0;
    }
    pl->nracks = 0;
    pl->nodes_per_rack = 0;
    for (size_t r = 0; r < c->nracks; r++)
        if (per_rack[r] > 0) {
            pl->nracks++;
            if (pl->nodes_per_rack == 0 || per_rack[r] < pl->nodes_per_rack)
                pl->nodes_per_rack = per_rack[r];
        }
    if (pl->nracks == 0) { /* no rack information: one rack */
        pl->nracks = 1;
        pl->nodes_per_rack = pl->nodes;
    }
    /* a cluster file that names no rack puts every node in 'default' */
    pl->racks_unknown = pl->nodes > 1 && c->nracks <= 1 &&
                        (c->nracks == 0 || (c->racks && c->racks[0] && strcmp(c->racks[0], "default") == 0));
    pl->mnnvl_gpus = 0;
    if (all_mnnvl && c->nnvl_domains > 0) {
        int mn = 0;
        for (size_t d = 0; d < c->nnvl_domains; d++)
            if (per_dom[d] > 0 && (mn == 0 || per_dom[d] < mn))
                mn = per_dom[d];
        pl->mnnvl_gpus = mn * G;
    }
    for (int l = 0; l < P3D_LINK_COUNT; l++)
        pl->link_gbps[l] = p3d_link_gbps(c, (p3d_link)l);
    rc = 0;
out:
    free(per_rack);
    free(per_dom);
    return rc;
}

/* The class a group of `span` GPUs uses when laid out on the fewest nodes:
 * inside an NVLink domain, inside a node, inside a multi-node NVLink domain,
 * inside one rack, or across racks. */
static p3d_link span_link(const p3d_plan *pl, long span)
{
    /* a span that does not divide a level's size makes some groups
     * straddle two of its units (tp=3 on 4-GPU trays), so that level's link
     * only holds when the span tiles it */
    if (span <= 1)
        return P3D_LINK_SELF;
    if (span <= pl->nvl_gpus && pl->nvl_gpus % span == 0)
        return P3D_LINK_NVLINK;
    if (span <= pl->gpus_per_node && pl->gpus_per_node % span == 0)
        return pl->intra_link;
    if (pl->mnnvl_gpus > 0 && span <= pl->mnnvl_gpus && pl->mnnvl_gpus % span == 0)
        return P3D_LINK_MNNVL;
    long nodes = (span + pl->gpus_per_node - 1) / pl->gpus_per_node;
    return nodes <= pl->nodes_per_rack ? P3D_LINK_RACK : P3D_LINK_XRACK;
}

/* The class between the GPUs at positions ga and gb of a layout packed onto
 * consecutive GPUs of consecutive nodes from a rack boundary on (what a
 * topology-aware policy achieves): one node, one multi-node NVLink domain,
 * one rack or across racks. */
static p3d_link pos_link(const p3d_plan *pl, long ga, long gb)
{
    long G = pl->gpus_per_node, na = ga / G, nb = gb / G;
    if (ga == gb)
        return P3D_LINK_SELF;
    if (na == nb)
        return ga % G / pl->nvl_gpus == gb % G / pl->nvl_gpus ? P3D_LINK_NVLINK : pl->intra_link;
    if (pl->mnnvl_gpus > 0 && ga / pl->mnnvl_gpus == gb / pl->mnnvl_gpus)
        return P3D_LINK_MNNVL;
    return na / pl->nodes_per_rack == nb / pl->nodes_per_rack ? P3D_LINK_RACK : P3D_LINK_XRACK;
}

/* Hops of one group of n members `stride` GPUs apart: a chain (pp; the
 * wrap-around with interleaving) or a ring (collectives). */
static void pos_hops(const p3d_plan *pl, long stride, int n, int closed, long *hops)
{
    for (int i = 0; i + 1 < n; i++)
        hops[pos_link(pl, i * stride, (i + 1) * stride)]++;
    if (closed && n > 1) /* a ring of two: the pair both ways, as check_links.c counts */
        hops[pos_link(pl, (long)(n - 1) * stride, 0)]++;
}

/* Hypothetical link classes: a TP group spans tp GPUs; a CP group tp·cp; a
 * pipeline spans tp·cp·pp GPUs (its stages on consecutive GPUs/nodes); a DP
 * group's members sit in different replicas, which together cover the
 * whole job, so it spans the whole job. The hops are those of one group of
 * each dimension laid out that way (the cost uses their shares). */
static void layout_links(const p3d_plan *pl, int t, int cp, int p, int d, int v, int ep, int etp,
                         p3d_link link[P3D_NDIMS], p3d_hops *hops)
{
    int edp = (int)((long)t * cp * d / ((long)etp * ep));
    memset(hops, 0, sizeof *hops);
    for (int k = 0; k < P3D_NDIMS; k++)
        link[k] = P3D_LINK_SELF;
    link[P3D_DIM_TP] = span_link(pl, t);
    link[P3D_DIM_CP] = cp > 1 ? span_link(pl, (long)t * cp) : P3D_LINK_SELF;
    link[P3D_DIM_PP] = p > 1 ? span_link(pl, (long)t * cp * p) : P3D_LINK_SELF;
    link[P3D_DIM_DP] = d > 1 ? span_link(pl, (long)t * cp * p * d) : P3D_LINK_SELF;
    if (t > 1)
        pos_hops(pl, 1, t, 1, hops->n[P3D_DIM_TP]);
    if (cp > 1)
        pos_hops(pl, t, cp, 1, hops->n[P3D_DIM_CP]);
    if (p > 1) {
        pos_hops(pl, (long)t * cp, p, v > 1 && p > 2, hops->n[P3D_DIM_PP]);
        /* the chain's worst hop is the class the tables name */
        p3d_link w = P3D_LINK_SELF;
        for (int l = 0; l < P3D_LINK_COUNT; l++)
            if (hops->n[P3D_DIM_PP][l])
                w = (p3d_link)l;
        link[P3D_DIM_PP] = w;
    }
    if (d > 1)
        pos_hops(pl, (long)t * cp * p, d, 1, hops->n[P3D_DIM_DP]);
    /* MoE (megatron.lua's EP placement): an expert block of etp*ep GPUs on
     * consecutive GPUs, so an EP group spans etp*ep of them; an edp group,
     * like a DP group, the whole job */
    if (etp > 1) {
        link[P3D_DIM_ETP] = span_link(pl, etp);
        pos_hops(pl, 1, etp, 1, hops->n[P3D_DIM_ETP]);
    }
    if (ep > 1) {
        link[P3D_DIM_EP] = span_link(pl, (long)etp * ep);
        pos_hops(pl, etp, ep, 1, hops->n[P3D_DIM_EP]);
    }
    if (edp > 1) {
        link[P3D_DIM_EDP] = span_link(pl, (long)t * cp * p * d);
        pos_hops(pl, (long)etp * ep, edp, 1, hops->n[P3D_DIM_EDP]);
    }
}

/* Fastest first; ties broken by lower memory, then smaller tp, pp, b, ZeRO
 * stage — a total order, so the output is deterministic. */
static int row_cmp(const void *pa, const void *pb)
{
    const p3d_plan_row *a = pa, *b = pb;
    if (a->cost.step_time != b->cost.step_time)
        return a->cost.step_time < b->cost.step_time ? -1 : 1;
    if (a->cost.mem_total != b->cost.mem_total)
        return a->cost.mem_total < b->cost.mem_total ? -1 : 1;
    if (a->tp != b->tp)
        return a->tp - b->tp;
    if (a->pp != b->pp)
        return a->pp - b->pp;
    if (a->cp != b->cp)
        return a->cp - b->cp;
    if (a->ep != b->ep)
        return a->ep - b->ep;
    if (a->etp != b->etp)
        return a->etp - b->etp;
    if (a->virtual_stages != b->virtual_stages)
        return a->virtual_stages - b->virtual_stages;
    if (a->micro_batch != b->micro_batch)
        return a->micro_batch - b->micro_batch;
    return a->zero - b->zero;
}

static int push_row(p3d_plan *pl, size_t *cap, const p3d_plan_row *r)
{
    if (pl->nrows == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        p3d_plan_row *nr = realloc(pl->rows, nc * sizeof *nr);
        if (!nr)
            return -1;
        pl->rows = nr;
        *cap = nc;
    }
    pl->rows[pl->nrows++] = *r;
    return 0;
}

/* Whether a variant becomes a row, the closest misfit, or a headroom drop. */
static int keep_variant(p3d_plan *pl, size_t *cap, const p3d_plan_row *r, int *fit_any, int *raw_any)
{
    if (!r->cost.fits) {
        if (r->cost.fits_raw) {
            *raw_any = 1;
            pl->headroom_variants++;
            if (!pl->has_headroom_drop || r->cost.step_time < pl->headroom_drop.cost.step_time) {
                pl->headroom_drop = *r;
                pl->has_headroom_drop = 1;
            }
        } else if (!pl->has_misfit || r->cost.mem_total < pl->misfit.cost.mem_total) {
            pl->misfit = *r;
            pl->has_misfit = 1;
        }
        return 0;
    }
    *fit_any = 1;
    return push_row(pl, cap, r);
}

int p3d_plan_search(const p3d_cluster *c, const p3d_job *job, int zero_mode, p3d_plan **out, char **err)
{
    return p3d_plan_search_pinned(c, job, zero_mode, NULL, out, err);
}

/* What the search needs and the pins allow: a model, a global batch, a
 * ZeRO choice, expert pins that fit the model. Fills pl's copy of the job,
 * its pins and the cluster's shape. 0, or -1 with *err (bad input). */
static int plan_setup(const p3d_cluster *c, const p3d_job *job, int zero_mode, const p3d_plan_pins *pins, p3d_plan *pl,
                      char **err)
{
    if (!job->has_model) {
        p3d_err(err, "plan: no model given (use --model NAME, e.g. gpt3-175b, or --params --layers "
                     "--hidden --heads --seq-len --vocab)");
        return -1;
    }
    if (job->global_batch <= 0) {
        p3d_err(err, "plan: --global-batch N is required (samples per optimizer step)");
        return -1;
    }
    if (zero_mode < P3D_PLAN_ZERO_SEARCH || zero_mode > 3) {
        p3d_err(err, "plan: ZeRO stage must be 0-3, got %d", zero_mode);
        return -1;
    }
    pl->job = *job;
    pl->zero_mode = zero_mode;
    if (pins)
        pl->pins = *pins;
    if (cluster_shape(c, pl, err) < 0)
        return -1;
    const p3d_model *md = &job->model;
    const int moe = md->experts > 0;
    if (!moe && (pl->pins.ep > 1 || pl->pins.etp > 0)) {
        p3d_err(err,
                "plan: --%s %d: expert parallelism needs a mixture-of-experts model; %s is dense "
                "(MoE presets: deepseek-v3, mixtral-8x22b)",
                pl->pins.ep > 1 ? "ep" : "etp", pl->pins.ep > 1 ? pl->pins.ep : pl->pins.etp, job->model.name);
        return -1;
    }
    if (moe && pl->pins.ep > 0 && md->experts % pl->pins.ep) {
        p3d_err(err,
                "plan: --ep %d does not divide the %d experts of %s: every EP rank must hold the same "
                "number of experts",
                pl->pins.ep, md->experts, md->name);
        return -1;
    }
    if (moe && pl->pins.etp > 0 && pl->pins.tp > 0 && pl->pins.etp > pl->pins.tp) {
        p3d_err(err,
                "plan: --etp %d is larger than --tp %d: plan keeps expert tensor parallelism within the "
                "TP group's NVLink domain (etp <= tp)",
                pl->pins.etp, pl->pins.tp);
        return -1;
    }
    pl->searched_ep = moe && !pl->pins.ep;

    const p3d_plan_pins *pn = &pl->pins;
    if (pn->pp > md->layers)
        return p3d_err(err, "plan: --pp %d exceeds the model's %d layers", pn->pp, md->layers);
    pl->searched_cp = !pn->cp && md->seq_len >= P3D_PLAN_CP_MIN_SEQ;
    pl->searched_v = !pn->virtual_stages;
    return 0;
}

/* The hard rules of one (tp, cp, pp, dp) layout, most fundamental first:
 * the P3D_PLAN_REJ_* reason it breaks, or -1 when it keeps them all. */
static int plan_rule_broken(const p3d_plan *pl, const p3d_job *job, int t, int cp, int d)
{
    const p3d_model *md = &job->model;
    if (md->heads % t || md->hidden % t)
        return P3D_PLAN_REJ_HEADS;
    if (cp > 1 && md->seq_len % (2 * cp))
        return P3D_PLAN_REJ_SEQ;
    /* TP must stay inside an NVLink domain; a node without
     * NVLink (every domain one GPU) may use its PCIe fabric. */
    int tp_ok = t <= pl->nvl_gpus || (pl->mnnvl_gpus > 0 && t <= pl->mnnvl_gpus) ||
                (pl->nvl_gpus == 1 && t <= pl->gpus_per_node);
    if (!tp_ok)
        return P3D_PLAN_REJ_NVLINK;
    /* pp need not divide the layers: the cost model runs the
     * pipeline at the pace of its fullest stage (ceil(L/p)
     * layers, stage_imbalance), so uneven splits rank by what
     * they cost. */
    if (job->global_batch % d)
        return P3D_PLAN_REJ_BATCH;
    return -1;
}

/* One layout of the search (tp, cp, pp, dp), the variants tried on it
 * so far and whether one fit (with or without the reserve). */
typedef struct plan_try {
    const p3d_cluster *c;
    const p3d_job *job;
    p3d_plan *pl;
    size_t *cap;
    int t, cp, p, d, zlo, zhi;
    int tried, fit_any, raw_any;
} plan_try;

/* Every micro-batch size and ZeRO stage of the layout with expert grid
 * (etp, ep) and v virtual stages, costed and kept (keep_variant). */
static int plan_variants(plan_try *x, int etp, int ep, int v, char **err)
{
    const p3d_job *job = x->job;
    p3d_plan *pl = x->pl;
    const int t = x->t, cp = x->cp, p = x->p, d = x->d, per_replica = job->global_batch / d;
    p3d_link link[P3D_NDIMS];
    p3d_hops hops;
    layout_links(pl, t, cp, p, d, v, ep, etp, link, &hops);
    for (int bsz = 1; bsz <= per_replica && bsz <= 64; bsz *= 2) {
        if (per_replica % bsz)
            continue;
        int m = per_replica / bsz;
        if (job->micro_batch_size > 0 && bsz != job->micro_batch_size)
            continue;
        if (job->micro_batches > 0 && m != job->micro_batches)
            continue;
        if (v > 1 && m % p) /* interleaving needs m to be a multiple of pp */
            continue;
        for (int z = x->zlo; z <= x->zhi; z++) {
            p3d_job j = *job;
            j.mesh.size[P3D_DIM_TP] = t;
            j.mesh.size[P3D_DIM_PP] = p;
            j.mesh.size[P3D_DIM_DP] = d;
            j.mesh.size[P3D_DIM_CP] = cp;
            j.mesh.size[P3D_DIM_EP] = ep;
            j.mesh.size[P3D_DIM_ETP] = etp;
            j.mesh.size[P3D_DIM_EDP] = (int)((long)t * cp * d / ((long)etp * ep));
            j.micro_batch_size = bsz;
            j.micro_batches = m;
            j.virtual_stages = v;
            j.zero = z;
            p3d_plan_row r;
            memset(&r, 0, sizeof r);
            r.tp = t, r.pp = p, r.dp = d, r.micro_batch = bsz, r.micro_batches = m, r.zero = z;
            r.cp = cp, r.virtual_stages = v;
            r.ep = ep, r.etp = etp, r.edp = j.mesh.size[P3D_DIM_EDP];
            if (p3d_cost_eval_hops(x->c, &j, link, &hops, &r.cost, err) < 0)
                return -1;
            x->tried++;
            if (keep_variant(pl, x->cap, &r, &x->fit_any, &x->raw_any) < 0)
                return p3d_err(err, "plan: out of memory");
        }
    }
    return 0;
}

/* Every variant of one layout that keeps the hard rules: the expert grids,
 * the virtual stages, then plan_variants; counts a layout none of whose
 * variants fit. */
static int plan_layout(plan_try *x, int zero_mode, char **err)
{
    const p3d_job *job = x->job;
    const p3d_model *md = &job->model;
    p3d_plan *pl = x->pl;
    const p3d_plan_pins *pn = &pl->pins;
    const int moe = md->experts > 0, t = x->t, cp = x->cp, p = x->p, d = x->d, L = md->layers;
    if (zero_mode == P3D_PLAN_ZERO_SEARCH)
        x->zlo = 0, x->zhi = 3;
    else if (zero_mode == P3D_PLAN_ZERO_DEFAULT)
        x->zlo = x->zhi = d * cp > 1 ? 1 : 0;
    else
        x->zlo = x->zhi = zero_mode;
    x->tried = x->fit_any = x->raw_any = 0;
    /* MoE: etp is tp or 1 (pinned: as given, at most tp); ep
     * every divisor of the experts (pinned: as given) whose
     * expert block etp*ep divides the dense grid's tp*cp*dp
     * ranks of a stage (edp = tp*cp*dp / (etp*ep)) */
    int etps[2] = {t, 1}, netp = moe ? (pn->etp ? 1 : t > 1 ? 2 : 1) : 1;
    if (moe && pn->etp)
        etps[0] = pn->etp;
    for (int ie = 0; ie < netp; ie++) {
        int etp = etps[ie];
        if (etp > t)
            continue;
        int ep_lo = pn->ep ? pn->ep : 1, ep_hi = pn->ep ? pn->ep : moe ? md->experts : 1;
        for (int ep = ep_lo; ep <= ep_hi; ep++) {
            if ((moe && md->experts % ep) || ((long)t * cp * d) % ((long)etp * ep))
                continue;
            /* virtual stages: Megatron's interleaved schedule needs the
             * layers to divide into pp·v chunks and pp > 1 */
            int v_hi = pn->virtual_stages ? pn->virtual_stages : p > 1 ? L / p : 1;
            for (int v = pn->virtual_stages ? pn->virtual_stages : 1; v <= v_hi; v++) {
                if (v > 1 && (p < 2 || L % (p * v)))
                    continue;
                /* --decoder-first/last-pipeline-num-layers: the
                 * layouts Megatron accepts them for */
                int lay[3];
                if ((job->first_stage_layers || job->last_stage_layers) &&
                    p3d_cost_stage_layers(L, p, v, job->first_stage_layers, job->last_stage_layers, lay, NULL) < 0)
                    continue;
                if (plan_variants(x, etp, ep, v, err) < 0)
                    return -1;
            }
        }
    }
    pl->variants += (size_t)x->tried;
    if (x->tried && !x->fit_any)
        pl->rejected[x->raw_any ? P3D_PLAN_REJ_HEADROOM : P3D_PLAN_REJ_MEMORY]++;
    return 0;
}

int p3d_plan_search_pinned(const p3d_cluster *c, const p3d_job *job, int zero_mode, const p3d_plan_pins *pins,
                           p3d_plan **out, char **err)
{
    int rc = -1;
    size_t cap = 0;
    p3d_plan *pl = calloc(1, sizeof *pl);
    *out = NULL;
    if (!pl)
        return p3d_err(err, "plan: out of memory");
    if (plan_setup(c, job, zero_mode, pins, pl, err) < 0)
        goto out;
    const int N = pl->gpus, L = job->model.layers;
    const p3d_plan_pins *pn = &pl->pins;
    /* TP: every divisor of the widest domain a TP group may use (a node, or
     * a multi-node NVLink domain: tp=6 or 9 is valid inside 72 GPUs), so
     * the groups tile the domain; non-powers of two matter for models
     * whose heads are divisible by 3. A pinned tp is tried as given (the
     * NVLink rule still applies). */
    int tmax = pl->mnnvl_gpus > pl->gpus_per_node ? pl->mnnvl_gpus : pl->gpus_per_node;
    int t_lo = pn->tp ? pn->tp : 1, t_hi = pn->tp ? pn->tp : tmax;
    for (int t = t_lo; t <= t_hi && t <= N; t++) {
        if ((!pn->tp && tmax % t) || N % t)
            continue;
        /* CP: powers of two up to 16 when searched (Megatron splits the
         * sequence into 2·cp chunks, so cp must divide s/2) */
        for (int cp = pn->cp ? pn->cp : 1; cp <= (pn->cp ? pn->cp : pl->searched_cp ? 16 : 1); cp *= 2) {
            if (N % ((long)t * cp))
                continue;
            int p_lo = pn->pp ? pn->pp : 1, p_hi = pn->pp ? pn->pp : L;
            for (int p = p_lo; p <= p_hi && (long)t * cp * p <= N; p++) {
                if (N % (t * cp * p))
                    continue;
                int d = N / (t * cp * p);
                pl->searched++;
                int why = plan_rule_broken(pl, job, t, cp, d);
                if (why >= 0) {
                    pl->rejected[why]++;
                    continue;
                }
                plan_try x = {.c = c, .job = job, .pl = pl, .cap = &cap, .t = t, .cp = cp, .p = p, .d = d};
                if (plan_layout(&x, zero_mode, err) < 0)
                    goto out;
            }
        }
    }
    if (pl->nrows > 1)
        qsort(pl->rows, pl->nrows, sizeof *pl->rows, row_cmp);
    *out = pl;
    pl = NULL;
    rc = 0;
out:
    p3d_plan_free(pl);
    return rc;
}

int p3d_plan_place(p3d_plan *pl, int k, p3d_plan_place_fn place, void *ctx, char **err)
{
    int rc = -1;
    size_t n = 0, m = 0;
    size_t *idx = p3d_plan_pick_shapes(pl, k, &n);
    p3d_plan_row *rows = malloc((pl->nrows ? pl->nrows : 1) * sizeof *rows);
    unsigned char *taken = calloc(pl->nrows ? pl->nrows : 1, 1);
    if (!idx || !rows || !taken) {
        p3d_err(err, "plan: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (place(ctx, &pl->rows[idx[i]], err) < 0)
            goto out;
    for (int pass = 0; pass < 2; pass++) {
        size_t from = m;
        for (size_t i = 0; i < n; i++) {
            const p3d_plan_row *r = &pl->rows[idx[i]];
            if (r->placed && (pass ? r->nerrors > 0 : r->nerrors == 0)) {
                rows[m++] = *r;
                taken[idx[i]] = 1;
            }
        }
        if (pass == 0 && m - from > 1)
            qsort(rows + from, m - from, sizeof *rows, row_cmp);
    }
    for (size_t i = 0; i < pl->nrows; i++)
        if (!taken[i])
            rows[m++] = pl->rows[i];
    free(pl->rows);
    pl->rows = rows;
    rows = NULL;
    rc = 0;
out:
    free(idx);
    free(rows);
    free(taken);
    return rc;
}

int p3d_plan_cluster_shape(const p3d_cluster *c, p3d_plan *pl, char **err)
{
    return cluster_shape(c, pl, err);
}

void p3d_plan_free(p3d_plan *pl)
{
    if (!pl)
        return;
    free(pl->rows);
    free(pl);
}
