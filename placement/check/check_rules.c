/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_rules.c — the named checks (docs/checks.md is the list users read;
 * keep the two in step). Each rule states what happened, why it matters
 * and what to do. Severity policy:
 *   error   — the job cannot run as described (world > GPUs, pp > layers,
 *             dp > batch, model does not fit) or a mistake a placement
 *             could have avoided on this hardware (TP over the network or
 *             PCIe while every TP group would fit in an NVLink domain);
 *   warning — it runs, slower than it could (pipelines across racks, TP
 *             that cannot fit an NVLink domain, uneven stages...);
 *   info    — facts worth knowing (idle GPUs, policy notes).
 */
#include "check_internal.h"
#include "cost_internal.h"
#include "strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADD(sev, code, ...)                                                                                            \
    do {                                                                                                               \
        if (p3d_analysis_add(a, sev, code, __VA_ARGS__) < 0)                                                           \
            goto oom;                                                                                                  \
    } while (0)

/* Largest NVLink domain in GPUs, and how many disjoint groups of tp GPUs
 * fit inside NVLink domains over the whole cluster (a node in a multi-node
 * domain counts towards that domain instead of its own). */
static int nvlink_capacity(const p3d_cluster *c, int tp, long long *groups, int *largest)
{
    long long *dom_gpus = calloc(c->nnvl_domains + 1, sizeof *dom_gpus);
    int *dsize = NULL, cap = 0;
    if (!dom_gpus)
        return -1;
    *groups = 0;
    *largest = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        const p3d_cnode *cn = &c->nodes[i];
        const p3d_node *t = cn->topo;
        if (cn->nvl_domain >= 0 && (size_t)cn->nvl_domain < c->nnvl_domains) {
            dom_gpus[cn->nvl_domain] += t->ngpus;
            continue;
        }
        if (t->ndomains > cap) {
            int *v = realloc(dsize, (size_t)t->ndomains * sizeof *v);
            if (!v) {
                free(dom_gpus);
                free(dsize);
                return -1;
            }
            dsize = v;
            cap = t->ndomains;
        }
        for (int d = 0; d < t->ndomains; d++)
            dsize[d] = 0;
        for (int g = 0; g < t->ngpus; g++)
            if (t->gpus[g].domain >= 0 && t->gpus[g].domain < t->ndomains)
                dsize[t->gpus[g].domain]++;
        for (int d = 0; d < t->ndomains; d++) {
            *groups += dsize[d] / tp;
            if (dsize[d] > *largest)
                *largest = dsize[d];
        }
    }
    for (size_t d = 0; d < c->nnvl_domains; d++) {
        *groups += dom_gpus[d] / tp;
        if (dom_gpus[d] > *largest)
            *largest = (int)dom_gpus[d];
    }
    free(dom_gpus);
    free(dsize);
    return 0;
}

/* What a node's rank slots are called in messages: its GPUs, or the CPU
 * slots --nproc-per-node synthesized on a node without any (slots.c). */
static const char *slot_word(const p3d_node *n)
{
    return n && n->ngpus && !strcmp(n->gpus[0].model, "CPU slot") ? "CPU slot" : "GPU";
}

/* The same for the whole cluster: "CPU slot" when every node has only those. */
static const char *cluster_slot_word(const p3d_cluster *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].topo && c->nodes[i].topo->ngpus && strcmp(slot_word(c->nodes[i].topo), "CPU slot"))
            return "GPU";
    return c->nnodes ? "CPU slot" : "GPU";
}

static int count_range(const p3d_dim_stats *st, int lo, int hi)
{
    int n = 0;
    for (int l = lo; l <= hi; l++)
        n += st->groups_by_link[l];
    return n;
}

/* The worst class among lo..hi that some group has (for "over <link>"). */
static int worst_in(const p3d_dim_stats *st, int lo, int hi)
{
    for (int l = hi; l >= lo; l--)
        if (st->groups_by_link[l])
            return l;
    return lo;
}

static int tp_rules(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a)
{
    const p3d_dim_stats *st = &a->dim[P3D_DIM_TP];
    int tp = job->mesh.size[P3D_DIM_TP];
    long long fit_groups = 0;
    int largest = 0;
    if (tp <= 1)
        return 0;
    if (nvlink_capacity(c, tp, &fit_groups, &largest) < 0)
        return -1;
    int avoidable = fit_groups >= st->ngroups;
    /* every slot is a synthesized CPU slot: see below */
    int cpu_only = 1;
    for (size_t t = 0; t < c->ntopos; t++) {
        const p3d_node *n = c->topos[t];
        if (n->ngpus && strcmp(n->gpus[0].model, "CPU slot") != 0)
            cpu_only = 0;
    }
    /* the cause, as it is: a policy that missed a placement that exists,
     * tp wider than any NVLink domain, or too few domains for the job */
    const char *pol = pl && pl->policy ? pl->policy : "?";
    int aware = !strcmp(pol, "megatron") || !strcmp(pol, "devicemesh");
    char why[400];
    if (avoidable && aware)
        snprintf(why, sizeof why,
                 "This hardware has room for every TP group inside one NVLink domain (%lld groups of %d fit, %d "
                 "needed), yet policy %s did not find such a placement: a shortfall of the policy (please report it "
                 "with this cluster file); --policy auto tries the other bundled policies.",
                 fit_groups, tp, st->ngroups, pol);
    else if (avoidable)
        snprintf(why, sizeof why,
                 "This hardware has room for every TP group inside one NVLink domain (%lld groups of %d fit, %d "
                 "needed): use a topology-aware policy (--policy megatron) or fix policy %s.",
                 fit_groups, tp, st->ngroups, pol);
    else if (tp > largest)
        snprintf(why, sizeof why,
                 "tp=%d is larger than the largest NVLink domain here (%d GPU%s): keep tp <= %d and grow pp or dp "
                 "instead.",
                 tp, largest, largest == 1 ? "" : "s", largest);
    else
        snprintf(why, sizeof why,
                 "The NVLink domains here hold only %lld whole TP groups of %d and the job has %d, so the rest "
                 "must leave NVLink: use fewer ranks (lower dp) or nodes with NVLink domains of at least %d GPUs.",
                 fit_groups, tp, st->ngroups, tp);
    int net = count_range(st, P3D_LINK_RACK, P3D_LINK_XRACK);
    if (net) {
        int l = worst_in(st, P3D_LINK_RACK, P3D_LINK_XRACK);
        if (avoidable)
            ADD(P3D_SEV_ERROR, "TP_CROSSES_NODES",
                "%d of %d TP groups (tp=%d) span nodes: TP all-reduces on every layer will run over %s "
                "instead of NVLink. %s",
                net, st->ngroups, tp, p3d_link_desc((p3d_link)l), why);
        else
            ADD(P3D_SEV_WARNING, "TP_CROSSES_NODES",
                "%d of %d TP groups (tp=%d) span nodes: TP all-reduces on every layer will run over %s. %s", net,
                st->ngroups, tp, p3d_link_desc((p3d_link)l), why);
    }
    int pcie = count_range(st, P3D_LINK_PIX, P3D_LINK_SYS);
    if (st->nvlink_ring_groups) {
        /* DGX-1-style hybrid cube-mesh: the domains are its all-to-all
         * cliques, yet the group's NVLink links close a ring through all of
         * its members, and NCCL rings it over NVLink. check_links.c counts
         * such a group as NV, so the links table, the objective and this
         * check say the same. Not a mistake. */
        ADD(P3D_SEV_INFO, "NVLINK_RING_ONLY",
            "%d of %d TP groups (tp=%d) span NVLink cliques of a node whose NVLink links connect their GPUs "
            "in a ring but not every pair (hybrid cube-mesh, e.g. DGX-1): NCCL runs their all-reduces as "
            "NVLink rings (the links table counts them as NV), at lower bandwidth than inside a clique of %d. "
            "Fine for tp=%d; tp <= %d keeps each group all-to-all.",
            st->nvlink_ring_groups, st->ngroups, tp, largest, tp, largest);
    }
    if (pcie && cpu_only) {
        ADD(P3D_SEV_INFO, "CPU_SLOTS",
            "the rank slots are CPU slots (no GPU): TP traffic runs through host memory; link checks for "
            "NVLink do not apply.");
    } else if (pcie) {
        int l = worst_in(st, P3D_LINK_PIX, P3D_LINK_SYS);
        if (avoidable)
            ADD(P3D_SEV_ERROR, "TP_CROSSES_NVLINK_DOMAIN",
                "%d of %d TP groups (tp=%d) leave their NVLink domain inside a node: TP all-reduces on every "
                "layer will run over %s. %s",
                pcie, st->ngroups, tp, p3d_link_desc((p3d_link)l), why);
        else
            ADD(P3D_SEV_WARNING, "TP_CROSSES_NVLINK_DOMAIN",
                "%d of %d TP groups (tp=%d) leave their NVLink domain: TP all-reduces on every layer will run "
                "over %s. %s",
                pcie, st->ngroups, tp, p3d_link_desc((p3d_link)l), why);
    }
    /* tp vs GPUs per node: report each distinct GPU count once */
    int seen[8], nseen = 0;
    for (size_t i = 0; i < c->nnodes && nseen < 8; i++) {
        int g = c->nodes[i].topo->ngpus, dup = 0;
        for (int k = 0; k < nseen; k++)
            dup |= seen[k] == g;
        if (dup || g == 0)
            continue;
        seen[nseen++] = g;
        if (g % tp != 0 && tp % g != 0) {
            char divs[96] = "";
            size_t len = 0;
            for (int k = 1; k <= g && len + 8 < sizeof divs; k++)
                if (g % k == 0)
                    len += (size_t)snprintf(divs + len, sizeof divs - len, "%s%d", len ? ", " : "", k);
            const char *w = slot_word(c->nodes[i].topo);
            ADD(P3D_SEV_WARNING, "TP_NOT_DIVIDING_GPUS_PER_NODE",
                "tp=%d does not divide the %d %ss of node %s: either %ss stay idle or a TP group straddles "
                "two nodes. Choose tp among %s (or a multiple of %d inside a multi-node NVLink domain).",
                tp, g, w, c->nodes[i].name, w, divs, g);
        }
    }
    return 0;
oom:
    return -1;
}

/* GPUs of the smallest rack (of those with GPUs); also the largest, and
 * how many whole blocks of `block` GPUs the racks hold together. */
static int rack_gpus_min(const p3d_cluster *c, long long block, long long *largest, long long *whole)
{
    size_t nr = c->nracks ? c->nracks : 1;
    long long *g = calloc(nr, sizeof *g);
    long long best = 0;
    *largest = *whole = 0;
    if (!g)
        return 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if ((size_t)c->nodes[i].rack < nr)
            g[c->nodes[i].rack] += c->nodes[i].topo->ngpus;
    for (size_t r = 0; r < nr; r++) {
        if (g[r] && (!best || g[r] < best))
            best = g[r];
        if (g[r] > *largest)
            *largest = g[r];
        if (block > 0)
            *whole += g[r] / block;
    }
    free(g);
    return (int)best;
}

static int pp_rules(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a)
{
    const p3d_dim_stats *st = &a->dim[P3D_DIM_PP];
    const p3d_mesh *m = &job->mesh;
    int pp = m->size[P3D_DIM_PP], v = job->virtual_stages > 1 ? job->virtual_stages : 1;
    int xr = st->groups_by_link[P3D_LINK_XRACK];
    if (pp > 1 && xr) {
        /* one pipeline's GPUs: its pp stages of the dense grid, tp*cp
         * each (ep is carved out of dp and adds none) */
        long long pipe = (long long)pp * m->size[P3D_DIM_TP] * m->size[P3D_DIM_CP];
        long long largest = 0, whole = 0, blocks = pipe > 0 ? pl->world / pipe : 0;
        long long smallest = rack_gpus_min(c, pipe, &largest, &whole);
        const char *pol = pl->policy ? pl->policy : "?";
        char sizes[64], cause[480];
        if (smallest == largest)
            snprintf(sizes, sizeof sizes, "%lld GPUs", largest);
        else
            snprintf(sizes, sizeof sizes, "%lld to %lld GPUs", smallest, largest);
        if (pipe > largest)
            snprintf(cause, sizeof cause,
                     "A pipeline block (pp x tp x cp = %lld GPUs) needs more GPUs than any rack holds (racks "
                     "of %s), so every pipeline crosses racks: lower pp (or tp) so one block fits a rack, if the "
                     "model allows.",
                     pipe, sizes);
        else if (blocks > whole)
            snprintf(cause, sizeof cause,
                     "The racks (%s) hold at most %lld whole pipeline block%s of %lld GPUs (pp x tp x cp) and "
                     "the job has %lld, so at least %lld must cross racks: a dp that gives at most %lld block%s "
                     "keeps every pipeline in one rack.",
                     sizes, whole, whole == 1 ? "" : "s", pipe, blocks, blocks - whole, whole, whole == 1 ? "" : "s");
        else if (!strcmp(pol, "megatron") || !strcmp(pol, "devicemesh"))
            snprintf(cause, sizeof cause,
                     "By GPU count the racks (%s) could hold all %lld pipeline blocks of %lld GPUs whole; policy %s "
                     "crossed racks to keep what ranks higher in its objective (TP groups on NVLink, inside one "
                     "node, inside one rack: see its notes and metrics.objective).",
                     sizes, blocks, pipe, pol);
        else
            snprintf(cause, sizeof cause,
                     "A pipeline block (%lld GPUs) fits in one rack here (racks of %s) and the racks hold all %lld: "
                     "use a rack-aware policy (--policy megatron) or list nodes rack by rack.",
                     pipe, sizes, blocks);
        ADD(P3D_SEV_WARNING, "PP_CROSSES_RACKS",
            "%d of %d pipelines have a stage boundary across racks: activations between those stages cross the "
            "spine switches (more hops, shared and often oversubscribed) on every micro-batch. %s",
            xr, st->ngroups, cause);
    }
    if (job->has_model && job->model.layers > 0 && pp > 1) {
        int L = job->model.layers;
        if ((long long)pp * v > L)
            ADD(P3D_SEV_ERROR, "PP_GT_LAYERS",
                "pp=%d%s needs at least %lld layers, the model has %d: some stages would hold no layer. "
                "Lower pp (at most %d%s).",
                pp, v > 1 ? " with virtual stages" : "", (long long)pp * v, L, L / v, v > 1 ? " / v" : "");
        else if (L % (pp * v) != 0)
            ADD(P3D_SEV_WARNING, "PP_LAYERS_UNEVEN",
                "%d layers do not split evenly into %d stage%s: the stages with one layer more set the pace "
                "of the whole pipeline. Prefer pp%s dividing %d.",
                L, pp * v, pp * v > 1 ? "s" : "", v > 1 ? "*v" : "", L);
    }
    if (pp > 1 && job->micro_batches > 0 && job->micro_batches < pp)
        ADD(P3D_SEV_WARNING, "PP_FEW_MICROBATCHES",
            "%d micro-batches for %d stages: the pipeline bubble (p-1)/(m+p-1) = %.0f%% of every step is idle. "
            "Use at least pp micro-batches, ideally 4*pp or more.",
            job->micro_batches, pp, 100.0 * (pp - 1) / (job->micro_batches + pp - 1));
    return 0;
oom:
    return -1;
}

static int dp_rules(const p3d_job *job, p3d_analysis *a)
{
    int dp = job->mesh.size[P3D_DIM_DP];
    int B = job->global_batch;
    if (B <= 0)
        return 0;
    /* --micro-batches without --micro-batch: the cost model derives b from
     * B/(dp*m); only p3d_batch_resolve's verdict applies (below). */
    if (job->micro_batch_size > 0 || job->micro_batches <= 0) {
        int b = job->micro_batch_size > 0 ? job->micro_batch_size : 1;
        if ((long long)dp * b > B) {
            ADD(P3D_SEV_ERROR, "DP_GT_BATCH",
                "dp=%d replicas but the global batch of %d samples holds only %d micro-batch%s of %d: some "
                "replicas would get no data. Lower dp (at most %d) or raise --global-batch.",
                dp, B, B / b, B / b == 1 ? "" : "es", b, B / b);
            return 0;
        }
        if (B % ((long long)dp * b) != 0) {
            ADD(P3D_SEV_WARNING, "BATCH_NOT_DIVISIBLE",
                "global batch %d is not a multiple of dp*micro-batch = %d*%d: replicas get unequal work or "
                "samples are dropped. Choose a global batch divisible by %d.",
                B, dp, b, dp * b);
            return 0;
        }
    }
    /* the same resolution the cost model does: say exactly what it uses */
    p3d_batch bt;
    char *berr = NULL;
    if (p3d_batch_resolve(job, &bt, &berr) < 0) {
        int b = job->micro_batch_size > 0 ? job->micro_batch_size : 1;
        char fix[128] = "";
        if (job->micro_batches > 0 && job->micro_batch_size > 0 && B % ((long long)dp * b) == 0)
            snprintf(fix, sizeof fix, " (e.g. --micro-batches %lld)", (long long)B / ((long long)dp * b));
        int r = p3d_analysis_add(a, P3D_SEV_WARNING, "BATCH_MISMATCH",
                                 "%s: the figures disagree, so the cost model gives no estimate. Make "
                                 "--global-batch = dp x --micro-batch x --micro-batches%s, or leave one of "
                                 "them out to have it derived.",
                                 berr ? berr : "batch sizes disagree", fix);
        free(berr);
        if (r < 0)
            goto oom;
    }
    return 0;
oom:
    return -1;
}

/* CP (ring attention send/recv every layer) is nearly as chatty as TP. */
static int cp_rules(const p3d_job *job, p3d_analysis *a)
{
    const p3d_dim_stats *st = &a->dim[P3D_DIM_CP];
    int n = count_range(st, P3D_LINK_RACK, P3D_LINK_XRACK);
    if (job->mesh.size[P3D_DIM_CP] > 1 && n)
        ADD(P3D_SEV_WARNING, "CP_CROSSES_NODES",
            "%d of %d cp groups span nodes: context-parallel attention exchanges on every layer will run over "
            "%s. Keep cp inside a node's NVLink domain when tp*cp fits one.",
            n, st->ngroups, p3d_link_desc((p3d_link)worst_in(st, P3D_LINK_RACK, P3D_LINK_XRACK)));
    return 0;
oom:
    return -1;
}

/* The first group of dim whose worst link lies in lo..hi, named for a
 * message: "ranks 0,2,4,6 on dgx-a/0, dgx-b/0": its ranks (the first 8)
 * and the NVLink domains they sit in, each once. */
static void name_group(const p3d_cluster *c, const p3d_placement *pl, const p3d_mesh *m, int dim, int lo, int hi,
                       char *buf, size_t cap)
{
    int n = p3d_mesh_size(m, dim), stride = p3d_mesh_stride(m, dim), ng = pl->world / n;
    buf[0] = 0;
    for (int g = 0; g < ng; g++) {
        int first = p3d_group_first(m, dim, g), w = P3D_LINK_SELF;
        for (int i = 0; i < n && w < hi; i++)
            for (int j = i + 1; j < n; j++) {
                const p3d_rank *ra = &pl->ranks[first + i * stride], *rb = &pl->ranks[first + j * stride];
                int l = p3d_cluster_link(c, (size_t)ra->node, ra->gpu, (size_t)rb->node, rb->gpu);
                if (l > w)
                    w = l;
            }
        if (w < lo || w > hi)
            continue;
        size_t len = (size_t)snprintf(buf, cap, "ranks ");
        for (int i = 0; i < n && i < 8 && len < cap; i++)
            len += (size_t)snprintf(buf + len, cap - len, "%s%d", i ? "," : "", first + i * stride);
        if (n > 8 && len < cap)
            len += (size_t)snprintf(buf + len, cap - len, ",...");
        char seen[4][64];
        int nseen = 0;
        for (int i = 0; i < n && len < cap; i++) {
            const p3d_rank *r = &pl->ranks[first + i * stride];
            char dom[64];
            p3d_gpu_domain_name(c, r->node, r->gpu, dom, sizeof dom);
            int dup = 0;
            for (int k = 0; k < nseen; k++)
                dup |= !strcmp(seen[k], dom);
            if (dup)
                continue;
            if (nseen == 4) {
                len += (size_t)snprintf(buf + len, cap - len, ", ...");
                break;
            }
            snprintf(seen[nseen++], sizeof seen[0], "%s", dom);
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", nseen == 1 ? " on " : ", ", dom);
        }
        return;
    }
}

/* EP: the token dispatch and combine all-to-alls of every MoE layer, the
 * heaviest traffic of an MoE model. An all-to-all sends to every member
 * directly, so (unlike a ring) it pays every pair's link. The unit a
 * placement can keep together is an expert block of etp*ep ranks. */
static int ep_rules(const p3d_cluster *c, const p3d_placement *pl, p3d_analysis *a)
{
    const p3d_dim_stats *st = &a->dim[P3D_DIM_EP];
    const p3d_mesh *m = &pl->mesh;
    int ep = p3d_mesh_size(m, P3D_DIM_EP), etp = p3d_mesh_size(m, P3D_DIM_ETP);
    int block = ep * etp, nblocks = pl->world / (block > 0 ? block : 1);
    char grp[256];
    if (ep <= 1)
        return 0;
    int off_nvl = count_range(st, P3D_LINK_PIX, P3D_LINK_RACK);
    int xr = st->groups_by_link[P3D_LINK_XRACK];
    if (off_nvl) {
        long long fit = 0;
        int largest = 0;
        if (nvlink_capacity(c, block, &fit, &largest) < 0)
            return -1;
        int l = worst_in(st, P3D_LINK_PIX, P3D_LINK_RACK);
        name_group(c, pl, m, P3D_DIM_EP, P3D_LINK_PIX, P3D_LINK_RACK, grp, sizeof grp);
        if (fit >= nblocks)
            ADD(P3D_SEV_WARNING, "EP_CROSSES_NVLINK_DOMAIN",
                "%d of %d EP groups (ep=%d) leave their NVLink domain, e.g. %s: the token all-to-alls of every "
                "MoE layer (dispatch and combine, forward and backward) run over %s. Every expert block of "
                "etp*ep = %d GPUs fits one NVLink domain here: use --policy megatron (it keeps EP blocks on "
                "NVLink) or fix the policy.",
                off_nvl, st->ngroups, ep, grp, p3d_link_desc((p3d_link)l), block);
        else
            ADD(P3D_SEV_INFO, "EP_CROSSES_NVLINK_DOMAIN",
                "%d of %d EP groups (ep=%d) leave their NVLink domain, e.g. %s: the token all-to-alls of every "
                "MoE layer run over %s, because expert blocks of etp*ep = %d GPUs do not all fit the NVLink "
                "domains (largest: %d GPU%s). Keep etp*ep <= %d to stay on NVLink, or accept it (large-EP "
                "recipes such as DeepSeek-V3's ep=64 do).",
                off_nvl, st->ngroups, ep, grp, p3d_link_desc((p3d_link)l), block, largest, largest == 1 ? "" : "s",
                largest);
    }
    if (xr) {
        long long rack = 0, whole = 0;
        rack_gpus_min(c, block, &rack, &whole);
        name_group(c, pl, m, P3D_DIM_EP, P3D_LINK_XRACK, P3D_LINK_XRACK, grp, sizeof grp);
        ADD(P3D_SEV_WARNING, "EP_CROSSES_RACKS",
            "%d of %d EP groups (ep=%d) span racks, e.g. %s: the token all-to-alls of every MoE layer cross the "
            "spine switches (more hops, shared and often oversubscribed). %s",
            xr, st->ngroups, ep, grp,
            block > rack
                ? "An expert block of etp*ep GPUs needs more than the largest rack holds: lower ep (or etp) so "
                  "one block fits a rack."
                : "An expert block of etp*ep GPUs fits one rack here: use a rack-aware policy "
                  "(--policy megatron) or list nodes rack by rack.");
    }
    return 0;
oom:
    return -1;
}

static int world_rules(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a)
{
    long long world = p3d_mesh_world(&job->mesh);
    size_t gpus = p3d_cluster_gpus(c);
    const char *w = cluster_slot_word(c);
    if (world > (long long)gpus)
        ADD(P3D_SEV_ERROR, "WORLD_GT_GPUS",
            "the mesh needs tp*cp*dp*pp = %lld %ss, the cluster has %zu. Lower dp (or leave --dp out to use "
            "what is there) or add nodes.",
            world, w, gpus);
    else if (world < (long long)gpus) {
        char *used = calloc(c->nnodes + 1, 1);
        size_t idle_nodes = 0;
        if (!used)
            goto oom;
        for (int r = 0; r < pl->world; r++)
            used[pl->ranks[r].node] = 1;
        for (size_t i = 0; i < c->nnodes; i++)
            idle_nodes += !used[i];
        free(used);
        ADD(P3D_SEV_INFO, "NODES_IDLE", "the job uses %lld of %zu %ss: %zu %s%s idle (%zu node%s without any rank).",
            world, gpus, w, gpus - (size_t)world, w, gpus - (size_t)world == 1 ? " stays" : "s stay", idle_nodes,
            idle_nodes == 1 ? "" : "s");
    }
    return 0;
oom:
    return -1;
}

/* --inference: the layout serves, so its memory is weights + KV cache
 * (plan --inference's arithmetic), not training's; the training figures
 * stay in the cost object but judge nothing. */
static int serving_rules(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a)
{
    char *cerr = NULL;
    if (p3d_infer_layout(c, job, pl->mesh.size[P3D_DIM_TP], pl->mesh.size[P3D_DIM_PP], pl->world, &a->infer, &cerr) <
        0) {
        /* asked for and impossible (a prompt longer than the context): an error, not a note */
        int r = p3d_analysis_add(a, P3D_SEV_ERROR, "SERVING_UNAVAILABLE", "no serving estimate: %s",
                                 cerr ? cerr : "the cost model failed");
        free(cerr);
        return r;
    }
    a->has_infer = 1;
    const p3d_infer_cost *k = &a->infer;
    if (!k->fits)
        ADD(P3D_SEV_ERROR, "SERVING_DOES_NOT_FIT",
            "serving %s at tp=%d pp=%d needs about %.1f GB per GPU (weights %.1f, KV cache %.1f for %d sequences "
            "of %d tokens); the GPUs hold %.1f GB less %.1f GB kept free. Raise tp*pp, or lower --context-len "
            "or --serve-batch (par3drun plan --inference finds the smallest replica that fits).",
            job->model.name, k->tp, k->pp, k->total / 1e9, k->weights / 1e9, k->kv / 1e9, k->batch, k->context,
            k->gpu_mem / 1e9, k->reserve / 1e9);
    return 0;
oom:
    return -1;
}

static int cost_rules(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a)
{
    char *cerr = NULL;
    p3d_link link[P3D_NDIMS];
    if (!job->has_model)
        return 0;
    if (job->first_stage_layers || job->last_stage_layers) {
        /* Megatron refuses such a split at start-up: an error here, not a note */
        int lay[3];
        if (p3d_cost_stage_layers(job->model.layers, pl->mesh.size[P3D_DIM_PP], job->virtual_stages,
                                  job->first_stage_layers, job->last_stage_layers, lay, &cerr) < 0) {
            int r = p3d_analysis_add(a, P3D_SEV_ERROR, "UNEVEN_STAGES", "%s", cerr ? cerr : "invalid split");
            free(cerr);
            return r;
        }
    }
    p3d_hops hops;
    for (int d = 0; d < P3D_NDIMS; d++) {
        link[d] = (p3d_link)a->dim[d].worst;
        for (int l = 0; l < P3D_LINK_COUNT; l++)
            hops.n[d][l] = a->dim[d].hops_by_link[l];
    }
    if (p3d_cost_eval_hops(c, job, link, &hops, &a->cost, &cerr) < 0) {
        int r = p3d_analysis_add(a, P3D_SEV_INFO, "COST_UNAVAILABLE", "no cost estimate: %s",
                                 cerr ? cerr : "the cost model failed");
        free(cerr);
        return r;
    }
    a->has_cost = 1;
    if (job->inference)
        return serving_rules(c, job, pl, a);
    const p3d_cost *k = &a->cost;
    if (k->fits_raw && !k->fits)
        ADD(P3D_SEV_WARNING, "MEMORY_HEADROOM",
            "%s needs about %.1f GB per GPU of %.1f GB: less than the %.1f GB (%s) kept free for the CUDA "
            "context, NCCL buffers and fragmentation, which the estimate does not count. Expect out-of-memory "
            "errors; lower the memory as MODEL_DOES_NOT_FIT says, or set --mem-reserve if you know better.",
            job->model.name, k->mem_total / 1e9, k->gpu_mem / 1e9, k->mem_reserve / 1e9, k->mem_reserve_source);
    if (!k->fits_raw)
        ADD(P3D_SEV_ERROR, "MODEL_DOES_NOT_FIT",
            "%s needs about %.1f GB per GPU (weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f "
            "for micro-batch %d%s x %d in flight), the GPUs hold %.1f GB. Raise tp*pp, use --zero 1..3 with "
            "dp > 1, a smaller --micro-batch, or --recompute full.",
            job->model.name, k->mem_total / 1e9, k->mem_weights / 1e9, k->mem_grads / 1e9, k->mem_optim / 1e9,
            k->mem_act / 1e9, k->micro_batch_size,
            job->micro_batch_size > 0 ? ""
            : job->micro_batches > 0  ? " = global batch / (dp x micro-batches)"
                                      : "",
            k->inflight, k->gpu_mem / 1e9);
    return 0;
oom:
    return -1;
}

static int carried_notes(const p3d_cluster *c, const p3d_placement *pl, p3d_analysis *a)
{
    for (size_t i = 0; i < c->nwarnings; i++)
        ADD(P3D_SEV_WARNING, "CLUSTER_WARNING", "%s", c->warnings[i]);
    /* each distinct topology's notes once, naming its first node */
    for (size_t t = 0; t < c->ntopos; t++) {
        const p3d_node *n = c->topos[t];
        const char *host = NULL;
        size_t count = 0;
        if (!n->notes || !*n->notes)
            continue;
        for (size_t i = 0; i < c->nnodes; i++)
            if (c->nodes[i].topo == n && !count++)
                host = c->nodes[i].name;
        if (!count)
            continue;
        /* one check per topology: its notes joined, so a node with eight
         * similar GPU notes does not bury the checks that matter */
        p3d_sb sb = {0};
        for (const char *q = n->notes; *q; q++)
            if (*q == '\n')
                p3d_sb_puts(&sb, "; ");
            else
                p3d_sb_putc(&sb, *q);
        char *joined = p3d_sb_finish(&sb);
        if (!joined)
            goto oom;
        int r = p3d_analysis_add(a, P3D_SEV_INFO, "TOPOLOGY_NOTE", "node %s%s: %s", host,
                                 count > 1 ? " (and the others with its topology)" : "", joined);
        free(joined);
        if (r < 0)
            goto oom;
    }
    for (size_t i = 0; i < pl->nnotes; i++)
        ADD(P3D_SEV_INFO, "POLICY_NOTE", "policy %s: %s", pl->policy ? pl->policy : "?", pl->notes[i]);
    return 0;
oom:
    return -1;
}

int p3d_analysis_rules(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a, char **err)
{
    if (world_rules(c, job, pl, a) < 0 || tp_rules(c, job, pl, a) < 0 || pp_rules(c, job, pl, a) < 0 ||
        dp_rules(job, a) < 0 || cp_rules(job, a) < 0 || ep_rules(c, pl, a) < 0 || cost_rules(c, job, pl, a) < 0 ||
        carried_notes(c, pl, a) < 0)
        return p3d_err(err, "out of memory while checking the placement");
    return 0;
}
