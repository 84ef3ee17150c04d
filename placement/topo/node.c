/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * node.c — the node record shared by every topology source: allocation,
 * freeing, and p3d_node_finish(), which derives what all sources have in
 * common (NVLink domains, nearest NIC per GPU, notes, hash) from the raw
 * facts a source filled in. Keeping the derivation here means an hwloc XML,
 * an nvidia-smi text and a live machine with the same hardware produce the
 * same domains and NIC choices.
 */
#include "topo_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

p3d_node *p3d_node_new(const char *hostname, const char *source, const char *source_kind)
{
    p3d_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->fabric_clique = -1;
    if ((hostname && !(n->hostname = strdup(hostname))) || (source && !(n->source = strdup(source))) ||
        (source_kind && !(n->source_kind = strdup(source_kind)))) {
        p3d_node_free(n);
        return NULL;
    }
    return n;
}

void p3d_node_free(p3d_node *n)
{
    if (!n)
        return;
    for (int i = 0; i < n->ngpus && n->gpus; i++)
        free(n->gpus[i].cpus);
    free(n->gpus);
    free(n->nics);
    free(n->nvlink);
    free(n->gg_class);
    free(n->gn_class);
    free(n->hostname);
    free(n->source);
    free(n->source_kind);
    free(n->fabric_uuid);
    free(n->notes);
    free(n);
}

int p3d_node_alloc(p3d_node *n, int ngpus, int nnics, char **err)
{
    int rc = -1;
    /* 4096 is far above any node we know of (NVL72 trays hold 4); the bound
     * keeps ngpus*ngpus and ngpus*nnics from overflowing. */
    if (ngpus < 0 || nnics < 0 || ngpus > 4096 || nnics > 4096) {
        p3d_err(err, "%s: %d GPUs and %d NICs: expected 0..4096 of each", n->source ? n->source : "topology", ngpus,
                nnics);
        goto out;
    }
    size_t g = (size_t)ngpus, k = (size_t)nnics;
    size_t gg = g * g > 0 ? g * g : 1, gk = g * k > 0 ? g * k : 1;
    n->ngpus = ngpus;
    n->nnics = nnics;
    n->gpus = calloc(g ? g : 1, sizeof *n->gpus);
    n->nics = calloc(k ? k : 1, sizeof *n->nics);
    n->nvlink = calloc(gg, sizeof *n->nvlink);
    n->gg_class = malloc(gg);
    n->gn_class = malloc(gk);
    if (!n->gpus || !n->nics || !n->nvlink || !n->gg_class || !n->gn_class) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < g; i++) {
        p3d_gpu *gp = &n->gpus[i];
        gp->index = gp->phys = (int)i;
        gp->numa = gp->package = gp->nearest_nic = gp->domain = -1;
        for (size_t j = 0; j < g; j++)
            n->gg_class[i * g + j] = i == j ? P3D_LINK_SELF : P3D_LINK_SYS;
        for (size_t j = 0; j < k; j++)
            n->gn_class[i * k + j] = P3D_LINK_SYS;
    }
    for (size_t j = 0; j < k; j++)
        n->nics[j].numa = -1;
    rc = 0;
out:
    return rc;
}

void p3d_node_note(p3d_node *n, const char *fmt, ...)
{
    va_list ap;
    char *line = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (r < 0)
        return;
    p3d_str_appendf(&n->notes, "\n", "%s", line);
    free(line);
}

int p3d_nvlink_validate(const double *m, int k, const char *what, char **err)
{
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) {
            double a = m[(size_t)i * k + j], b = m[(size_t)j * k + i];
            if (!isfinite(a) || a < 0)
                return p3d_err(err,
                               "%s: entry [%d][%d] is %g: expected a "
                               "finite bandwidth >= 0 GB/s",
                               what, i, j, a);
            if (i < j && fabs(a - b) > 1e-6 * fmax(fabs(a), fabs(b)))
                return p3d_err(err,
                               "%s: not symmetric: [%d][%d] = %g but "
                               "[%d][%d] = %g (NVLink bandwidth is the same "
                               "both ways)",
                               what, i, j, a, j, i, b);
        }
    return 0;
}

int p3d_link_parse(const char *s)
{
    if (!s)
        return -1;
    if (!strcmp(s, "X"))
        return P3D_LINK_SELF;
    if (!strncmp(s, "NV", 2)) {
        const char *p = s + 2;
        if (!*p)
            return P3D_LINK_NVLINK;
        while (*p >= '0' && *p <= '9')
            p++;
        return *p ? -1 : P3D_LINK_NVLINK;
    }
    for (int l = P3D_LINK_PIX; l < P3D_LINK_COUNT; l++)
        if (!strcmp(s, p3d_link_name((p3d_link)l)))
            return l;
    return -1;
}

/* ---- NVLink domains ---------------------------------------------------- */

/* Adjacency as 64-bit masks works for every node we know of; bigger
 * components fall back to a greedy split (see split_component). */
typedef uint64_t mask_t;

static int popcount64(mask_t m)
{
    return __builtin_popcountll(m);
}

static double clique_min_bw(const p3d_node *n, mask_t c)
{
    double best = INFINITY;
    for (int i = 0; i < n->ngpus && i < 64; i++)
        for (int j = i + 1; j < n->ngpus && j < 64; j++)
            if ((c >> i & 1) && (c >> j & 1))
                best = fmin(best, n->nvlink[(size_t)i * n->ngpus + j]);
    return isfinite(best) ? best : 0;
}

/* Is candidate c better than the best so far? Larger first, then the higher
 * weakest link (so a split keeps the fat links together), then the set whose
 * lowest differing GPU is smaller (deterministic, independent of search
 * order). */
static int clique_better(const p3d_node *n, mask_t c, mask_t best)
{
    int pc = popcount64(c), pb = popcount64(best);
    if (pc != pb)
        return pc > pb;
    double bc = clique_min_bw(n, c), bb = clique_min_bw(n, best);
    if (bc != bb)
        return bc > bb;
    mask_t diff = c ^ best;
    return diff && (c & (diff & -diff));
}

/* Bron–Kerbosch with pivoting over bit masks: reports every maximal clique
 * of the graph restricted to P ∪ R, keeping the best in *best. */
static void bron_kerbosch(const p3d_node *n, const mask_t *adj, mask_t R, mask_t P, mask_t X, mask_t *best)
{
    if (!P && !X) {
        if (clique_better(n, R, *best))
            *best = R;
        return;
    }
    mask_t PX = P | X;
    int pivot = __builtin_ctzll(PX);
    mask_t cand = P & ~adj[pivot];
    while (cand) {
        int v = __builtin_ctzll(cand);
        mask_t bit = (mask_t)1 << v;
        bron_kerbosch(n, adj, R | bit, P & adj[v], X & adj[v], best);
        P &= ~bit;
        X |= bit;
        cand &= ~bit;
    }
}

static int is_clique(const p3d_node *n, const int *m, int k)
{
    for (int a = 0; a < k; a++)
        for (int b = a + 1; b < k; b++)
            if (!(n->nvlink[(size_t)m[a] * n->ngpus + m[b]] > 0))
                return 0;
    return 1;
}

/* Splits a connected, non-clique component into cliques: repeatedly take the
 * best maximal clique among the GPUs still unassigned (clique_better), until
 * none is left. For the DGX-1 cube-mesh this yields {0-3} and {4-7}. */
static void split_component(p3d_node *n, const int *m, int k, int *ndom)
{
    int g = n->ngpus;
    if (g > 64) {
        /* Greedy in index order: grow a clique from the lowest unassigned
         * GPU. Deterministic; only reached on nodes with > 64 GPUs. */
        for (int a = 0; a < k; a++) {
            if (n->gpus[m[a]].domain >= 0)
                continue;
            int d = (*ndom)++;
            n->gpus[m[a]].domain = d;
            for (int b = a + 1; b < k; b++) {
                if (n->gpus[m[b]].domain >= 0)
                    continue;
                int ok = 1;
                for (int c = 0; c < k && ok; c++)
                    if (n->gpus[m[c]].domain == d && !(n->nvlink[(size_t)m[c] * g + m[b]] > 0))
                        ok = 0;
                if (ok)
                    n->gpus[m[b]].domain = d;
            }
        }
        return;
    }
    mask_t adj[64] = {0}, left = 0;
    for (int a = 0; a < k; a++) {
        left |= (mask_t)1 << m[a];
        for (int b = 0; b < k; b++)
            if (a != b && n->nvlink[(size_t)m[a] * g + m[b]] > 0)
                adj[m[a]] |= (mask_t)1 << m[b];
    }
    while (left) {
        mask_t best = 0;
        bron_kerbosch(n, adj, 0, left, 0, &best);
        if (!best) /* cannot happen: a lone vertex is a clique; be safe */
            best = left & -left;
        int d = (*ndom)++;
        for (int v = 0; v < g; v++)
            if (best >> v & 1)
                n->gpus[v].domain = d;
        left &= ~best;
    }
}

/* Domains are numbered by their lowest GPU, so domain 0 holds GPU 0. The
 * split above may create domains out of order; renumber at the end. */
static void renumber_domains(p3d_node *n)
{
    int *map = malloc(sizeof(int) * (size_t)(n->ndomains ? n->ndomains : 1));
    if (!map)
        return;
    for (int d = 0; d < n->ndomains; d++)
        map[d] = -1;
    int next = 0;
    for (int i = 0; i < n->ngpus; i++) {
        int d = n->gpus[i].domain;
        if (map[d] < 0)
            map[d] = next++;
        n->gpus[i].domain = map[d];
    }
    free(map);
}

static int compute_domains(p3d_node *n, char **err)
{
    int g = n->ngpus, rc = -1;
    int *comp = malloc(sizeof(int) * (size_t)(g ? g : 1));
    int *stack = malloc(sizeof(int) * (size_t)(g ? g : 1));
    if (!comp || !stack) {
        p3d_err(err, "out of memory");
        goto out;
    }
    n->ndomains = 0;
    n->nvlink_connected_not_clique = 0;
    for (int i = 0; i < g; i++)
        n->gpus[i].domain = -1;
    for (int s = 0; s < g; s++) {
        if (n->gpus[s].domain >= 0)
            continue;
        /* Collect s's connected component (depth-first, index order). */
        int k = 0, sp = 0;
        char *seen = calloc((size_t)g, 1);
        if (!seen) {
            p3d_err(err, "out of memory");
            goto out;
        }
        stack[sp++] = s;
        seen[s] = 1;
        while (sp) {
            int v = stack[--sp];
            comp[k++] = v;
            for (int w = 0; w < g; w++)
                if (!seen[w] && w != v && n->nvlink[(size_t)v * g + w] > 0) {
                    seen[w] = 1;
                    stack[sp++] = w;
                }
        }
        free(seen);
        /* sort the member list (insertion sort: k is small) */
        for (int a = 1; a < k; a++)
            for (int b = a; b > 0 && comp[b - 1] > comp[b]; b--) {
                int t = comp[b];
                comp[b] = comp[b - 1];
                comp[b - 1] = t;
            }
        if (is_clique(n, comp, k)) {
            int d = n->ndomains++;
            for (int a = 0; a < k; a++)
                n->gpus[comp[a]].domain = d;
        } else {
            n->nvlink_connected_not_clique = 1;
            split_component(n, comp, k, &n->ndomains);
        }
    }
    renumber_domains(n);
    rc = 0;
out:
    free(comp);
    free(stack);
    return rc;
}

int p3d_node_domain_members(const p3d_node *n, int d, int *out, int cap)
{
    int k = 0;
    if (!n)
        return 0;
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpus[i].domain == d) {
            if (k < cap && out)
                out[k] = i;
            k++;
        }
    return k;
}

/* ---- nearest NIC ------------------------------------------------------- */

static int nic_is_rdma(const p3d_nic *c)
{
    return !strcmp(c->kind, "ib") || !strcmp(c->kind, "efa");
}

/* The candidates of GPU i: NICs of the best class, restricted first to RDMA
 * NICs when the node has any (NCCL only uses those), then to NICs on the
 * GPU's NUMA node when some of the best-class ones are. Writes the NIC
 * indices in ascending order and returns how many. */
static int nic_candidates(const p3d_node *n, int i, int any_rdma, int *out)
{
    int k = 0, best = P3D_LINK_COUNT, numa = n->gpus[i].numa;
    for (int j = 0; j < n->nnics; j++) {
        if (any_rdma && !nic_is_rdma(&n->nics[j]))
            continue;
        int c = n->gn_class[(size_t)i * n->nnics + j];
        if (c < best) {
            best = c;
            k = 0;
        }
        if (c == best)
            out[k++] = j;
    }
    int same = 0;
    for (int a = 0; a < k; a++)
        if (numa >= 0 && n->nics[out[a]].numa == numa)
            out[same++] = out[a];
    return same ? same : k;
}

/* Ties are spread rather than piled on the lowest NIC: the GPUs that share
 * one candidate set (e.g. a GPU pair behind one PCIe switch with two NICs on
 * a DGX A100) take its NICs round-robin in GPU index order. */
static int compute_nearest_nic(p3d_node *n, char **err)
{
    int g = n->ngpus, k = n->nnics, rc = -1, any_rdma = 0;
    size_t gk = (size_t)g * (size_t)k;
    int *cand = malloc(sizeof(int) * (gk > 0 ? gk : 1));
    int *ncand = malloc(sizeof(int) * (size_t)(g ? g : 1));
    if (!cand || !ncand) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int j = 0; j < k; j++)
        any_rdma |= nic_is_rdma(&n->nics[j]);
    for (int i = 0; i < g; i++)
        ncand[i] = k ? nic_candidates(n, i, any_rdma, &cand[(size_t)i * k]) : 0;
    for (int i = 0; i < g; i++) {
        p3d_gpu *gp = &n->gpus[i];
        gp->nearest_nic = -1;
        gp->nic_same_numa = 0;
        if (!ncand[i])
            continue;
        int pos = 0; /* earlier GPUs with the same candidate set */
        for (int e = 0; e < i; e++)
            if (ncand[e] == ncand[i] &&
                !memcmp(&cand[(size_t)e * k], &cand[(size_t)i * k], sizeof(int) * (size_t)ncand[i]))
                pos++;
        gp->nearest_nic = cand[(size_t)i * k + pos % ncand[i]];
        gp->nic_same_numa = gp->numa >= 0 && n->nics[gp->nearest_nic].numa == gp->numa;
    }
    rc = 0;
out:
    free(cand);
    free(ncand);
    return rc;
}

/* ---- hash -------------------------------------------------------------- */

static void fnv(uint64_t *h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++) {
        *h ^= b[i];
        *h *= 0x100000001b3ULL;
    }
}

/* Over the facts placement depends on (not names of the source), so two
 * nodes of the same type hash alike wherever their topology came from. */
static void compute_hash(p3d_node *n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    int g = n->ngpus, k = n->nnics;
    fnv(&h, &g, sizeof g);
    fnv(&h, &k, sizeof k);
    for (int i = 0; i < g; i++) {
        const p3d_gpu *gp = &n->gpus[i];
        fnv(&h, gp->pci, strlen(gp->pci) + 1);
        fnv(&h, &gp->numa, sizeof gp->numa);
        fnv(&h, &gp->domain, sizeof gp->domain);
        fnv(&h, &gp->nearest_nic, sizeof gp->nearest_nic);
        for (int j = 0; j < g; j++) {
            /* GB/s rounded to 1/1000 so float noise does not change it */
            long long v = llround(n->nvlink[(size_t)i * g + j] * 1000);
            fnv(&h, &v, sizeof v);
        }
        fnv(&h, &n->gg_class[(size_t)i * g], (size_t)g);
        fnv(&h, &n->gn_class[(size_t)i * k], (size_t)k);
    }
    for (int j = 0; j < k; j++) {
        fnv(&h, n->nics[j].name, strlen(n->nics[j].name) + 1);
        fnv(&h, &n->nics[j].numa, sizeof n->nics[j].numa);
    }
    snprintf(n->hash, sizeof n->hash, "%016llx", (unsigned long long)h);
}

int p3d_node_finish(p3d_node *n, char **err)
{
    int rc = -1;
    const char *src = n && n->source ? n->source : "topology";
    if (!n) {
        p3d_err(err, "no node record");
        goto out;
    }
    if (n->ngpus < 0 || n->nnics < 0 || (n->ngpus && (!n->gpus || !n->nvlink || !n->gg_class)) ||
        (n->ngpus && n->nnics && (!n->nics || !n->gn_class))) {
        p3d_err(err, "%s: incomplete node record (%d GPUs, %d NICs)", src, n->ngpus, n->nnics);
        goto out;
    }
    char what[600];
    snprintf(what, sizeof what, "%s: NVLink matrix", src);
    if (n->ngpus && p3d_nvlink_validate(n->nvlink, n->ngpus, what, err) < 0)
        goto out;
    int g = n->ngpus;
    for (int i = 0; i < g; i++) {
        n->nvlink[(size_t)i * g + i] = 0; /* self bandwidth is meaningless */
        for (int j = 0; j < g; j++) {
            unsigned char *c = &n->gg_class[(size_t)i * g + j];
            if (i == j)
                *c = P3D_LINK_SELF;
            else if (n->nvlink[(size_t)i * g + j] > 0)
                *c = P3D_LINK_NVLINK;
            else if (*c >= P3D_LINK_COUNT || *c <= P3D_LINK_NVLINK)
                *c = P3D_LINK_SYS; /* no NVLink recorded: PCIe at worst */
        }
        for (int j = 0; j < n->nnics; j++) {
            unsigned char *c = &n->gn_class[(size_t)i * n->nnics + j];
            if (*c >= P3D_LINK_COUNT || *c < P3D_LINK_PIX)
                *c = P3D_LINK_SYS;
        }
    }
    if (compute_domains(n, err) < 0 || compute_nearest_nic(n, err) < 0)
        goto out;
    if (n->nvlink_connected_not_clique)
        p3d_node_note(n, "NVLink connects GPUs that are not all mutually "
                         "linked (e.g. a DGX-1 hybrid cube-mesh): domains are "
                         "the largest all-to-all cliques; a TP group spanning "
                         "them still runs over NVLink as a ring, but not "
                         "all-to-all");
    if (g && n->nnics == 0)
        p3d_node_note(n, "no NIC found: inter-node traffic goes through "
                         "whatever the host routes to");
    for (int i = 0; i < g; i++)
        if (n->gpus[i].nearest_nic >= 0 && !n->gpus[i].nic_same_numa && n->gpus[i].numa >= 0)
            p3d_node_note(n,
                          "GPU%d (NUMA %d) has no NIC on its NUMA node; "
                          "nearest is %s (%s)",
                          i, n->gpus[i].numa, n->nics[n->gpus[i].nearest_nic].name,
                          p3d_link_name((p3d_link)n->gn_class[(size_t)i * n->nnics + n->gpus[i].nearest_nic]));
    compute_hash(n);
    rc = 0;
out:
    return rc;
}
