/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_links.c — which link class each group of each dimension crosses.
 *
 * Collectives (TP, CP, EP and DP all-reduce / all-gather / all-to-all): a
 * group's class is the worst link between ANY two members, because ring and
 * tree algorithms both put every member on the critical path and the
 * slowest hop bounds the whole collective.
 *
 * Pipelines (PP): only point-to-point sends between consecutive stages
 * travel, so a pipeline's class is the worst link between stage i and
 * stage i+1; with interleaved 1F1B (virtual stages > 1) the last stage also
 * sends to the first, so that wrap-around link counts too.
 *
 * Hops (hops_by_link, what the cost model costs): a pipeline's hops are
 * its consecutive-stage boundaries (and the wrap-around with interleaving),
 * each on its own class; a collective's are the hops of the ring NCCL would
 * build, members in topology order (rack, multi-node NVLink domain, node,
 * GPU), so a ring crosses each rack boundary once rather than once per
 * member that happens to alternate.
 *
 * One exception to "any two members": a group on one node whose NVLink
 * connects its members in a cycle but not pair by pair (DGX-1 hybrid
 * cube-mesh) runs its ring collectives (tp, dp, etp, edp) as an NVLink
 * ring, so its class is NV and it is counted in nvlink_ring_groups
 * (NVLINK_RING_ONLY says so); EP's all-to-all still pays the missing pairs.
 *
 * Cost: O(world) per dimension plus the pairs inside each node. Pairs of
 * members on different nodes are compared node against node, and nodes
 * that share (rack, multi-node NVLink domain) are interchangeable for that
 * comparison — p3d_cluster_link between two nodes depends only on those —
 * so at most two nodes per such pair take part. That keeps a 1,024-member
 * DP group from costing half a million link look-ups.
 */
#include "check_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct ctx {
    const p3d_cluster *c;
    const p3d_placement *pl;
    int gid;          /* stamp of the group being scored */
    int *node_stamp;  /* per node: gid that last touched it */
    int *node_head;   /* per node: first member index (list via next) */
    int *next;        /* per member index */
    int *distinct;    /* nodes of the group, first-seen order */
    int *combo_stamp; /* per (rack, nvl domain) pair, or NULL */
    unsigned char *combo_count;
    size_t ncombos;
    int *reps; /* representative nodes of the group */
} ctx;

static p3d_link link_of(const ctx *x, int ra, int rb)
{
    const p3d_rank *a = &x->pl->ranks[ra], *b = &x->pl->ranks[rb];
    return p3d_cluster_link(x->c, (size_t)a->node, a->gpu, (size_t)b->node, b->gpu);
}

/* A pipeline: every consecutive-stage hop counted on its own class in
 * hops[]; returns the worst. */
static p3d_link chain_worst(const ctx *x, int first, int stride, int n, int wrap, int *hops)
{
    p3d_link w = P3D_LINK_SELF;
    for (int i = 0; i + 1 < n; i++) {
        p3d_link l = link_of(x, first + i * stride, first + (i + 1) * stride);
        hops[l]++;
        if (l > w)
            w = l;
    }
    if (wrap && n > 2) {
        p3d_link l = link_of(x, first + (n - 1) * stride, first);
        hops[l]++;
        if (l > w)
            w = l;
    }
    return w;
}

/* A ring member with its place in the topology, for sorting. */
typedef struct ring_member {
    int rack, dom, node, gpu, rank;
} ring_member;

/* Topology order: rack, multi-node NVLink domain, node, GPU. */
static int ring_cmp(const void *pa, const void *pb)
{
    const ring_member *a = pa, *b = pb;
    if (a->rack != b->rack)
        return a->rack < b->rack ? -1 : 1;
    if (a->dom != b->dom)
        return a->dom < b->dom ? -1 : 1;
    if (a->node != b->node)
        return a->node < b->node ? -1 : 1;
    return (a->gpu > b->gpu) - (a->gpu < b->gpu);
}

/* A collective's ring: members in topology order, n hops (n = 2: the pair
 * both ways), each counted on its class in hops[]. ring[] holds n. */
static void ring_hops(const ctx *x, int first, int stride, int n, ring_member *ring, int *hops)
{
    for (int i = 0; i < n; i++) {
        int r = first + i * stride;
        const p3d_rank *rk = &x->pl->ranks[r];
        const p3d_cnode *cn = &x->c->nodes[rk->node];
        ring[i] = (ring_member){cn->rack, cn->nvl_domain, rk->node, rk->gpu, r};
    }
    /* the members' keys are distinct (one GPU each), so every sort gives
     * the same order: skip it when they come sorted (most groups of a
     * good placement), insertion sort for a TP-sized group */
    int sorted = 1;
    for (int i = 1; i < n && sorted; i++)
        sorted = ring_cmp(&ring[i - 1], &ring[i]) < 0;
    if (!sorted && n <= 16) {
        for (int i = 1; i < n; i++) {
            ring_member v = ring[i];
            int k = i;
            for (; k > 0 && ring_cmp(&ring[k - 1], &v) > 0; k--)
                ring[k] = ring[k - 1];
            ring[k] = v;
        }
    } else if (!sorted) {
        qsort(ring, (size_t)n, sizeof *ring, ring_cmp);
    }
    for (int i = 0; i < n; i++)
        hops[link_of(x, ring[i].rank, ring[(i + 1) % n].rank)]++;
}

/* NCCL rings an all-reduce over NVLink whenever the members' NVLink links
 * close a cycle through all of them, even when some pairs have no direct
 * link (DGX-1 hybrid cube-mesh: 0-1-2-3-7-6-5-4). Whether the members of a
 * group on one node have such a cycle: depth-first search over at most 16
 * GPUs (larger NVLink nodes are NVSwitch cliques). */
static int ring_dfs(const p3d_node *t, const int *gpu, int n, int *used, int at, int depth)
{
    if (depth == n)
        return t->nvlink[gpu[at] * t->ngpus + gpu[0]] > 0;
    for (int i = 1; i < n; i++)
        if (!used[i] && t->nvlink[gpu[at] * t->ngpus + gpu[i]] > 0) {
            used[i] = 1;
            if (ring_dfs(t, gpu, n, used, i, depth + 1))
                return 1;
            used[i] = 0;
        }
    return 0;
}

static int nvlink_ring(const ctx *x, int first, int stride, int n)
{
    int gpu[16], used[16] = {0};
    const p3d_rank *rk = x->pl->ranks;
    int node = rk[first].node;
    const p3d_node *t = x->c->nodes[node].topo;
    if (n < 3 || n > 16 || !t || !t->nvlink || !t->nvlink_connected_not_clique)
        return 0;
    for (int i = 0; i < n; i++) {
        const p3d_rank *r = &rk[first + i * stride];
        if (r->node != node || r->gpu < 0 || r->gpu >= t->ngpus)
            return 0;
        gpu[i] = r->gpu;
    }
    used[0] = 1;
    return ring_dfs(t, gpu, n, used, 0, 1);
}

/* Dimensions whose traffic NCCL runs as rings (all-reduce, all-gather,
 * reduce-scatter); EP's all-to-all and CP's rank-ordered exchanges go
 * pair by pair. */
static int ring_collective(int d)
{
    return d == P3D_DIM_TP || d == P3D_DIM_DP || d == P3D_DIM_ETP || d == P3D_DIM_EDP;
}

static p3d_link collective_worst(ctx *x, int first, int stride, int n)
{
    const p3d_rank *rk = x->pl->ranks;
    int gid = ++x->gid, nd = 0, nreps = 0;
    p3d_link w = P3D_LINK_SELF;
    for (int i = 0; i < n; i++) {
        int node = rk[first + i * stride].node;
        if (x->node_stamp[node] != gid) {
            x->node_stamp[node] = gid;
            x->node_head[node] = -1;
            x->distinct[nd++] = node;
        }
        x->next[i] = x->node_head[node];
        x->node_head[node] = i;
    }
    /* pairs on one node: the intra-node class depends on the GPU pair */
    for (int k = 0; k < nd; k++)
        for (int i = x->node_head[x->distinct[k]]; i >= 0; i = x->next[i])
            for (int j = x->next[i]; j >= 0; j = x->next[j]) {
                p3d_link l = link_of(x, first + i * stride, first + j * stride);
                if (l > w)
                    w = l;
            }
    if (nd < 2)
        return w;
    for (int k = 0; k < nd; k++) {
        int node = x->distinct[k];
        if (x->combo_stamp) {
            const p3d_cnode *cn = &x->c->nodes[node];
            size_t cid = (size_t)cn->rack * (x->c->nnvl_domains + 1) + (size_t)(cn->nvl_domain + 1);
            if (cid < x->ncombos) {
                if (x->combo_stamp[cid] != gid) {
                    x->combo_stamp[cid] = gid;
                    x->combo_count[cid] = 0;
                }
                if (x->combo_count[cid] >= 2)
                    continue;
                x->combo_count[cid]++;
            }
        }
        x->reps[nreps++] = first + x->node_head[node] * stride; /* a rank on that node */
    }
    for (int i = 0; i < nreps && w < P3D_LINK_XRACK; i++)
        for (int j = i + 1; j < nreps && w < P3D_LINK_XRACK; j++) {
            p3d_link l = link_of(x, x->reps[i], x->reps[j]);
            if (l > w)
                w = l;
        }
    return w;
}

int p3d_analysis_links(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a, char **err)
{
    int rc = -1;
    const p3d_mesh *m = &pl->mesh;
    int world = pl->world, maxn = 1;
    ring_member *ring = NULL;
    ctx x = {.c = c, .pl = pl};
    for (int d = 0; d < P3D_NDIMS; d++)
        if (p3d_mesh_size(m, d) > maxn)
            maxn = p3d_mesh_size(m, d);
    x.node_stamp = malloc((c->nnodes + 1) * sizeof *x.node_stamp);
    x.node_head = malloc((c->nnodes + 1) * sizeof *x.node_head);
    x.next = malloc((size_t)maxn * sizeof *x.next);
    x.distinct = malloc((size_t)maxn * sizeof *x.distinct);
    x.reps = malloc((size_t)maxn * sizeof *x.reps);
    ring = malloc((size_t)maxn * sizeof *ring);
    if (!x.node_stamp || !x.node_head || !x.next || !x.distinct || !x.reps || !ring) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->nnodes; i++)
        x.node_stamp[i] = 0;
    /* (rack, domain) table when it is of a sensible size; without it every
     * distinct node is a representative (exact, only slower). */
    size_t nracks = c->nracks ? c->nracks : 1;
    if (nracks * (c->nnvl_domains + 1) <= ((size_t)1 << 22)) {
        x.ncombos = nracks * (c->nnvl_domains + 1);
        x.combo_stamp = calloc(x.ncombos, sizeof *x.combo_stamp);
        x.combo_count = calloc(x.ncombos, 1);
        if (!x.combo_stamp || !x.combo_count) {
            p3d_err(err, "out of memory");
            goto out;
        }
    }
    for (int d = 0; d < P3D_NDIMS; d++) {
        p3d_dim_stats *st = &a->dim[d];
        int n = p3d_mesh_size(m, d), stride = p3d_mesh_stride(m, d);
        memset(st, 0, sizeof *st);
        st->ngroups = world / n;
        st->worst = P3D_LINK_SELF;
        if (n == 1) {
            st->groups_by_link[P3D_LINK_SELF] = st->ngroups;
            continue;
        }
        for (int g = 0; g < st->ngroups; g++) {
            int first = p3d_group_first(m, d, g);
            p3d_link w;
            if (d == P3D_DIM_PP) {
                w = chain_worst(&x, first, stride, n, job->virtual_stages > 1, st->hops_by_link);
            } else {
                w = collective_worst(&x, first, stride, n);
                if (w > P3D_LINK_MNNVL && w < P3D_LINK_RACK && ring_collective(d) &&
                    nvlink_ring(&x, first, stride, n)) {
                    /* the whole ring on NVLink, though not all-to-all */
                    w = P3D_LINK_NVLINK;
                    st->nvlink_ring_groups++;
                    st->hops_by_link[P3D_LINK_NVLINK] += n;
                } else {
                    ring_hops(&x, first, stride, n, ring, st->hops_by_link);
                }
            }
            st->groups_by_link[w]++;
            if ((int)w > st->worst)
                st->worst = w;
        }
    }
    rc = 0;
out:
    free(x.node_stamp);
    free(x.node_head);
    free(x.next);
    free(x.distinct);
    free(x.reps);
    free(x.combo_stamp);
    free(x.combo_count);
    free(ring);
    return rc;
}
