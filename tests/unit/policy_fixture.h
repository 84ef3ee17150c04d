/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_fixture.h — synthetic clusters for the policy tests, built by hand
 * in memory (no files): n nodes, each a p3d_node with g GPUs split into
 * NVLink domains of dsz GPUs, optional racks and multi-node NVLink domains.
 * fx_free() releases everything fx_* allocated.
 */
#ifndef P3D_POLICY_FIXTURE_H
#define P3D_POLICY_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p3d/p3d.h"

static inline p3d_node *fx_topo(int g, int dsz)
{
    p3d_node *n = calloc(1, sizeof *n);
    n->ngpus = g;
    n->gpus = calloc((size_t)g, sizeof *n->gpus);
    n->nvlink = calloc((size_t)g * (size_t)g, sizeof *n->nvlink);
    n->ndomains = (g + dsz - 1) / dsz;
    for (int i = 0; i < g; i++) {
        p3d_gpu *G = &n->gpus[i];
        G->index = i;
        snprintf(G->pci, sizeof G->pci, "0000:%02x:00.0", 0x18 + i);
        G->numa = i * 2 / g;
        G->package = G->numa;
        G->nearest_nic = -1;
        G->domain = i / dsz;
        G->mem_bytes = 80ULL << 30;
        for (int j = 0; j < g; j++)
            if (i != j && i / dsz == j / dsz)
                n->nvlink[(size_t)i * (size_t)g + (size_t)j] = 450.0;
    }
    n->source = strdup("synthetic");
    strcpy(n->hash, "0123456789abcdef");
    return n;
}

/* nnodes nodes; topo_of[i] indexes topos; rack_of[i] (NULL: all rack 0);
 * nvl_of[i] (NULL: none, -1 none). */
static inline p3d_cluster *fx_cluster(size_t nnodes, p3d_node **topos, size_t ntopos, const int *topo_of,
                                      const int *rack_of, size_t nracks, const int *nvl_of, size_t nnvl)
{
    p3d_cluster *c = calloc(1, sizeof *c);
    c->nnodes = nnodes;
    c->nodes = calloc(nnodes, sizeof *c->nodes);
    c->ntopos = ntopos;
    c->topos = calloc(ntopos, sizeof *c->topos);
    memcpy(c->topos, topos, ntopos * sizeof *topos);
    c->nracks = nracks ? nracks : 1;
    c->racks = calloc(c->nracks, sizeof *c->racks);
    for (size_t r = 0; r < c->nracks; r++) {
        c->racks[r] = malloc(32);
        snprintf(c->racks[r], 32, "r%zu", r + 1);
    }
    c->nnvl_domains = nnvl;
    c->nvl_domains = calloc(nnvl ? nnvl : 1, sizeof *c->nvl_domains);
    for (size_t d = 0; d < nnvl; d++) {
        c->nvl_domains[d] = malloc(32);
        snprintf(c->nvl_domains[d], 32, "nvl%zu", d);
    }
    for (size_t i = 0; i < nnodes; i++) {
        c->nodes[i].name = malloc(32);
        snprintf(c->nodes[i].name, 32, "n%05zu", i + 1);
        c->nodes[i].topo = topos[topo_of ? topo_of[i] : 0];
        c->nodes[i].rack = rack_of ? rack_of[i] : 0;
        c->nodes[i].nvl_domain = nvl_of ? nvl_of[i] : -1;
    }
    return c;
}

/* The common case: n nodes of g GPUs in domains of dsz, racks of rack_size
 * consecutive nodes (0: one rack). */
static inline p3d_cluster *fx_simple(size_t n, int g, int dsz, size_t rack_size)
{
    p3d_node *t = fx_topo(g, dsz);
    int *rack = calloc(n, sizeof *rack);
    size_t nracks = 1;
    if (rack_size) {
        for (size_t i = 0; i < n; i++)
            rack[i] = (int)(i / rack_size);
        nracks = (n + rack_size - 1) / rack_size;
    }
    p3d_cluster *c = fx_cluster(n, &t, 1, NULL, rack, nracks, NULL, 0);
    free(rack);
    return c;
}

static inline void fx_free(p3d_cluster *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nnodes; i++)
        free(c->nodes[i].name);
    for (size_t t = 0; t < c->ntopos; t++) {
        p3d_node *n = c->topos[t];
        free(n->gpus);
        free(n->nvlink);
        free(n->source);
        free(n);
    }
    for (size_t r = 0; r < c->nracks; r++)
        free(c->racks[r]);
    for (size_t d = 0; d < c->nnvl_domains; d++)
        free(c->nvl_domains[d]);
    free(c->nvl_domains);
    free(c->racks);
    free(c->topos);
    free(c->nodes);
    free(c);
}

static inline void fx_job(p3d_job *j, int tp, int cp, int ep, int dp, int pp, const char *order)
{
    p3d_job_init(j);
    j->mesh.size[P3D_DIM_TP] = tp;
    j->mesh.size[P3D_DIM_CP] = cp;
    j->mesh.size[P3D_DIM_EP] = ep;
    j->mesh.size[P3D_DIM_DP] = dp;
    j->mesh.size[P3D_DIM_PP] = pp;
    if (order && p3d_mesh_set_order(&j->mesh, order, NULL) < 0) {
        fprintf(stderr, "bad order %s\n", order);
        abort();
    }
}

#endif
