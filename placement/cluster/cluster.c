/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster.c — the cluster model itself: creation, freeing, link classes
 * between GPUs, restriction to a job's node list, warnings. Reading a
 * cluster file is cluster_file.c; applying a Slurm topology.conf is
 * cluster_slurm.c.
 */
#include "cluster_internal.h"
#include "strmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The same GPU is "device memory": never the bottleneck, but not zero so
 * nothing divides by it. Every other class starts at the cost model's
 * default (p3d_link_default_gbps); a cluster file's "link_gbps" overrides. */
#define SELF_GBPS 3000.0

p3d_cluster *p3d_cluster_new(void)
{
    p3d_cluster *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    for (int l = 0; l < P3D_LINK_COUNT; l++)
        c->link_gbps[l] = p3d_link_default_gbps((p3d_link)l);
    c->link_gbps[P3D_LINK_SELF] = SELF_GBPS;
    return c;
}

void p3d_cluster_free(p3d_cluster *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nnodes; i++)
        free(c->nodes[i].name);
    free(c->nodes);
    for (size_t i = 0; i < c->ntopos; i++)
        p3d_node_free(c->topos[i]);
    free(c->topos);
    p3d_strv_free(c->racks, c->nracks);
    p3d_strv_free(c->nvl_domains, c->nnvl_domains);
    free(c->rack_dist);
    p3d_strv_free(c->warnings, c->nwarnings);
    free(c->source);
    free(c->slurm_topology);
    free(c);
}

long p3d_strv_push(char ***v, size_t *n, size_t *cap, char *name)
{
    if (!name)
        return -1;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        char **a = realloc(*v, nc * sizeof *a);
        if (!a) {
            free(name);
            return -1;
        }
        *v = a;
        *cap = nc;
    }
    (*v)[*n] = name;
    return (long)(*n)++;
}

void p3d_cluster_warn(p3d_cluster *c, const char *fmt, ...)
{
    if (!c)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    if (!m)
        return;
    char **a = realloc(c->warnings, (c->nwarnings + 1) * sizeof *a);
    if (!a) {
        free(m);
        return;
    }
    c->warnings = a;
    c->warnings[c->nwarnings++] = m;
}

int p3d_cluster_from_node(p3d_node *node, p3d_cluster **out, char **err)
{
    int rc = -1;
    p3d_cluster *c = NULL;
    *out = NULL;
    if (!node)
        return p3d_err(err, "cluster: no node record given");
    if (!(c = p3d_cluster_new()))
        goto oom;
    c->topos = calloc(1, sizeof *c->topos);
    c->nodes = calloc(1, sizeof *c->nodes);
    c->racks = calloc(1, sizeof *c->racks);
    if (!c->topos || !c->nodes || !c->racks)
        goto oom;
    c->topos[0] = node;
    c->ntopos = 1;
    node = NULL; /* owned by c from here on */
    if (!(c->racks[0] = strdup("default")))
        goto oom;
    c->nracks = 1;
    const char *h = c->topos[0]->hostname;
    if (!(c->nodes[0].name = strdup(h && *h ? h : "localhost")))
        goto oom;
    c->nodes[0].topo = c->topos[0];
    c->nodes[0].rack = 0;
    c->nodes[0].nvl_domain = -1;
    c->nnodes = 1;
    *out = c;
    c = NULL;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "cluster: out of memory");
out:
    p3d_node_free(node);
    p3d_cluster_free(c);
    return rc;
}

size_t p3d_cluster_gpus(const p3d_cluster *c)
{
    size_t n = 0;
    if (!c)
        return 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].topo && c->nodes[i].topo->ngpus > 0)
            n += (size_t)c->nodes[i].topo->ngpus;
    return n;
}

/* Same node: what the node's topology says; otherwise one multi-node NVLink
 * domain, then one rack (leaf switch), then the network across racks. Bad
 * indices answer the worst class rather than crash. */
p3d_link p3d_cluster_link(const p3d_cluster *c, size_t a, int ga, size_t b, int gb)
{
    if (!c || a >= c->nnodes || b >= c->nnodes)
        return P3D_LINK_XRACK;
    const p3d_cnode *na = &c->nodes[a], *nb = &c->nodes[b];
    if (a == b) {
        const p3d_node *t = na->topo;
        if (!t || ga < 0 || gb < 0 || ga >= t->ngpus || gb >= t->ngpus)
            return P3D_LINK_XRACK;
        if (ga == gb)
            return P3D_LINK_SELF;
        if (!t->gg_class)
            return P3D_LINK_SYS;
        return (p3d_link)t->gg_class[(size_t)ga * (size_t)t->ngpus + (size_t)gb];
    }
    if (na->nvl_domain >= 0 && na->nvl_domain == nb->nvl_domain)
        return P3D_LINK_MNNVL;
    if (na->rack == nb->rack)
        return P3D_LINK_RACK;
    return P3D_LINK_XRACK;
}

/* Renumbers one name table (racks or NVLink domains) in order of first use
 * through idx_of(node); unused names are freed. map_out (optional) gets
 * old -> new (-1 unused); the caller frees it. */
static int compact_table(p3d_cluster *c, char ***names, size_t *n, int is_rack, int **map_out)
{
    int rc = -1;
    int *map = NULL;
    char **nn = NULL;
    size_t k = 0;
    if (*n == 0) {
        if (map_out)
            *map_out = NULL;
        return 0;
    }
    map = malloc(*n * sizeof *map);
    nn = malloc(*n * sizeof *nn);
    if (!map || !nn)
        goto out;
    for (size_t i = 0; i < *n; i++)
        map[i] = -1;
    for (size_t i = 0; i < c->nnodes; i++) {
        int *f = is_rack ? &c->nodes[i].rack : &c->nodes[i].nvl_domain;
        if (*f < 0 || (size_t)*f >= *n) {
            if (is_rack)
                *f = 0; /* cannot happen with our readers; stay in range */
            continue;
        }
        if (map[*f] < 0) {
            map[*f] = (int)k;
            nn[k++] = (*names)[*f];
        }
        *f = map[*f];
    }
    for (size_t i = 0; i < *n; i++)
        if (map[i] < 0)
            free((*names)[i]);
    free(*names);
    *names = nn;
    *n = k;
    nn = NULL;
    if (map_out) {
        *map_out = map;
        map = NULL;
    }
    rc = 0;
out:
    free(map);
    free(nn);
    return rc;
}

int p3d_cluster_compact(p3d_cluster *c, char **err)
{
    int rc = -1;
    int *rmap = NULL;
    size_t old_nracks = c->nracks;
    if (compact_table(c, &c->racks, &c->nracks, 1, &rmap) < 0 ||
        compact_table(c, &c->nvl_domains, &c->nnvl_domains, 0, NULL) < 0) {
        p3d_err(err, "cluster: out of memory");
        goto out;
    }
    if (c->rack_dist && rmap) {
        size_t n = c->nracks;
        int *d = malloc((n ? n * n : 1) * sizeof *d);
        if (!d) {
            p3d_err(err, "cluster: out of memory");
            goto out;
        }
        for (size_t i = 0; i < old_nracks; i++)
            for (size_t j = 0; j < old_nracks; j++)
                if (rmap[i] >= 0 && rmap[j] >= 0)
                    d[(size_t)rmap[i] * n + (size_t)rmap[j]] = c->rack_dist[i * old_nracks + j];
        free(c->rack_dist);
        c->rack_dist = d;
    }
    rc = 0;
out:
    free(rmap);
    return rc;
}

typedef struct topo_ref {
    const p3d_node *p;
    size_t idx;
} topo_ref;

static int cmp_topo_ref(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const topo_ref *)a)->p;
    uintptr_t y = (uintptr_t)((const topo_ref *)b)->p;
    return x < y ? -1 : x > y;
}

/* Frees the topologies no node uses any more, keeping the order of the rest. */
static int compact_topos(p3d_cluster *c)
{
    int rc = -1;
    topo_ref *refs = NULL;
    unsigned char *used = NULL;
    if (c->ntopos == 0)
        return 0;
    refs = malloc(c->ntopos * sizeof *refs);
    used = calloc(c->ntopos, 1);
    if (!refs || !used)
        goto out;
    for (size_t i = 0; i < c->ntopos; i++)
        refs[i] = (topo_ref){c->topos[i], i};
    qsort(refs, c->ntopos, sizeof *refs, cmp_topo_ref);
    for (size_t i = 0; i < c->nnodes; i++) {
        topo_ref key = {c->nodes[i].topo, 0};
        topo_ref *r = bsearch(&key, refs, c->ntopos, sizeof *refs, cmp_topo_ref);
        if (r)
            used[r->idx] = 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < c->ntopos; i++) {
        if (used[i])
            c->topos[k++] = c->topos[i];
        else
            p3d_node_free(c->topos[i]);
    }
    c->ntopos = k;
    rc = 0;
out:
    free(refs);
    free(used);
    return rc;
}

/* SLURM_JOB_NODELIST order is the order Slurm numbers the job's nodes
 * (SLURM_NODEID), so it becomes the cluster's list order. */
int p3d_cluster_restrict(p3d_cluster *c, const char *hostlist, char **err)
{
    int rc = -1;
    char **names = NULL, **missing = NULL, *e = NULL, *miss = NULL;
    size_t nnames = 0, nmissing = 0;
    p3d_strmap byname = {0}, seen = {0};
    p3d_cnode *nodes = NULL;
    const char *src = c->source ? c->source : "the cluster";
    if (p3d_hostlist_expand(hostlist, &names, &nnames, P3D_CLUSTER_MAX_NODES, &e) < 0) {
        p3d_err(err, "node list: %s", e);
        goto out;
    }
    if (nnames == 0) {
        p3d_err(err, "node list is empty (expected host names such as "
                     "node[001-004])");
        goto out;
    }
    if (p3d_strmap_init(&byname, c->nnodes) < 0 || p3d_strmap_init(&seen, nnames) < 0 ||
        !(nodes = calloc(nnames, sizeof *nodes)) || !(missing = calloc(nnames, sizeof *missing)))
        goto oom;
    for (size_t i = 0; i < c->nnodes; i++)
        if (p3d_strmap_put(&byname, c->nodes[i].name, i, NULL) < 0)
            goto oom;
    for (size_t i = 0; i < nnames; i++) {
        size_t idx;
        int r = p3d_strmap_put(&seen, names[i], i, NULL);
        if (r < 0)
            goto oom;
        if (r == 0) {
            p3d_err(err, "node list: '%s' is listed twice", names[i]);
            goto out;
        }
        if (!p3d_strmap_get(&byname, names[i], &idx)) {
            missing[nmissing++] = names[i];
            continue;
        }
        nodes[i] = c->nodes[idx];
    }
    if (nmissing) {
        if (!(miss = p3d_hostlist_compress(missing, nmissing)))
            goto oom;
        p3d_err(err, "node list: %zu node%s not described in %s: %s", nmissing, nmissing == 1 ? " is" : "s are", src,
                miss);
        goto out;
    }
    /* names now move into the new list; the old ones are freed */
    for (size_t i = 0; i < nnames; i++) {
        nodes[i].name = names[i];
        names[i] = NULL;
    }
    for (size_t i = 0; i < c->nnodes; i++)
        free(c->nodes[i].name);
    free(c->nodes);
    c->nodes = nodes;
    c->nnodes = nnames;
    nodes = NULL;
    if (p3d_cluster_compact(c, err) < 0)
        goto out;
    if (compact_topos(c) < 0)
        goto oom;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "cluster: out of memory");
out:
    p3d_strmap_free(&byname);
    p3d_strmap_free(&seen);
    free(nodes);
    free(missing);
    free(miss);
    free(e);
    p3d_strv_free(names, nnames);
    return rc;
}

int p3d_cluster_set_racks(p3d_cluster *c, char *const *rack, char **err)
{
    size_t known = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        known += rack[i] && rack[i][0];
    if (!known)
        return 0;
    int rc = -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    p3d_strmap m;
    if (p3d_strmap_init(&m, c->nnodes) < 0)
        return p3d_err(err, "cluster: out of memory");
    for (size_t i = 0; i < c->nnodes; i++) {
        const char *r = rack[i] && rack[i][0] ? rack[i] : "default";
        size_t idx;
        if (!p3d_strmap_get(&m, r, &idx)) {
            char *d = strdup(r);
            long k = d ? p3d_strv_push(&names, &n, &cap, d) : -1;
            if (k < 0 || p3d_strmap_put(&m, names[k], (size_t)k, NULL) < 0)
                goto oom;
            idx = (size_t)k;
        }
        c->nodes[i].rack = (int)idx;
    }
    p3d_strv_free(c->racks, c->nracks);
    c->racks = names;
    c->nracks = n;
    names = NULL;
    free(c->rack_dist); /* names only: no switch distances known */
    c->rack_dist = NULL;
    if (known < c->nnodes)
        p3d_cluster_warn(c, "%zu of %zu nodes named no rack; they are put in a rack named 'default'", c->nnodes - known,
                         c->nnodes);
    rc = 0;
    goto out;
oom:
    p3d_err(err, "cluster: out of memory");
out:
    p3d_strv_free(names, n);
    p3d_strmap_free(&m);
    return rc;
}

/* A link class's bandwidth: the cluster file's link_gbps where it gives
 * one, else the default of the class (GB/s one way; docs/cost-model.md). */
double p3d_link_default_gbps(p3d_link l)
{
    switch (l) {
    case P3D_LINK_SELF: return 0; /* no traffic leaves the GPU */
    case P3D_LINK_NVLINK: return 450;
    case P3D_LINK_MNNVL: return 900;
    case P3D_LINK_PIX: return 64;
    case P3D_LINK_PXB: return 64;
    case P3D_LINK_PHB: return 64;
    case P3D_LINK_NODE: return 48;
    case P3D_LINK_SYS: return 24;
    case P3D_LINK_RACK: return 50;
    case P3D_LINK_XRACK: return 25;
    default: return 0;
    }
}

double p3d_link_gbps(const p3d_cluster *c, p3d_link l)
{
    if ((unsigned)l >= P3D_LINK_COUNT)
        return 0;
    if (c && c->link_gbps[l] > 0)
        return c->link_gbps[l];
    return p3d_link_default_gbps(l);
}
