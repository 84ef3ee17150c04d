/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * place_join.c — a node joining a running job (par3drun --join;
 * docs/multinode.md, "Adding a node to a running job"), the placement's
 * part: whether its kind fits the job (the placement rules assume every
 * node that may take a lost node's ranks looks like the nodes that run
 * them: the same GPUs per node, the same GPU model, the same NVLink
 * domains), and the node appended to the leader's cluster as a spare, so
 * that the next replacement (p3d_place_replace) may put ranks on it.
 */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sizes of n's NVLink domains, largest first, as "8" or "4+4". */
static void domain_shape(const p3d_node *n, char *buf, size_t cap)
{
    int size[64] = {0}, nd = n->ndomains < 64 ? n->ndomains : 64;
    for (int g = 0; g < n->ngpus; g++)
        if (n->gpus[g].domain >= 0 && n->gpus[g].domain < nd)
            size[n->gpus[g].domain]++;
    for (int i = 0; i < nd; i++) /* a handful of domains: insertion sort */
        for (int j = i; j > 0 && size[j] > size[j - 1]; j--) {
            int t = size[j];
            size[j] = size[j - 1];
            size[j - 1] = t;
        }
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < nd && k + 12 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? "+" : "", size[i]);
    if (!nd)
        snprintf(buf, cap, "none");
}

/* The node whose kind the job's nodes have: the first one running ranks
 * (any not lost when none does). */
static const p3d_node *job_kind(const p3d_cluster *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].role == P3D_NODE_USE)
            return c->nodes[i].topo;
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].role != P3D_NODE_LOST)
            return c->nodes[i].topo;
    return NULL;
}

int p3d_join_fits(const p3d_cluster *c, const p3d_node *n, char **why)
{
    const p3d_node *k = c ? job_kind(c) : NULL;
    if (!k)
        return p3d_err(why, "the job has no node left to compare it with");
    if (n->ngpus != k->ngpus)
        return p3d_err(why,
                       "it has %d GPU%s (rank slots), the job's nodes have %d: give it the job's "
                       "--nproc-per-node, or a node of the job's kind",
                       n->ngpus, n->ngpus == 1 ? "" : "s", k->ngpus);
    const char *mn = n->ngpus ? n->gpus[0].model : "", *mk = k->ngpus ? k->gpus[0].model : "";
    if (*mn && *mk && strcmp(mn, mk))
        return p3d_err(why, "its GPUs are %s, the job's are %s", mn, mk);
    char sn[160], sk[160];
    domain_shape(n, sn, sizeof sn);
    domain_shape(k, sk, sizeof sk);
    if (strcmp(sn, sk))
        return p3d_err(why,
                       "its NVLink domains hold %s GPUs, the job's nodes' hold %s: a tensor-parallel group "
                       "placed on it would cross a slower link",
                       sn, sk);
    return 0;
}

/* The rack named rack among c's (NULL or unknown: the only one, when
 * there is only one); -1 with *err otherwise. */
static int rack_of(const p3d_cluster *c, const char *rack, char **err)
{
    for (size_t i = 0; rack && *rack && i < c->nracks; i++)
        if (!strcmp(c->racks[i], rack))
            return (int)i;
    if (c->nracks <= 1)
        return 0;
    return p3d_err(err, "its rack '%s' is none of the job's %zu racks (the job's racks are fixed at its start)",
                   rack && *rack ? rack : "(none)", c->nracks);
}

int p3d_plan_add_spare(p3d_plan_result *r, p3d_node *n, const char *name, const char *rack, char **err)
{
    p3d_cluster *c = r->cluster;
    int rc = -1, ri = rack_of(c, rack, err);
    char *nm = strdup(name ? name : "");
    const p3d_node *topo = NULL;
    if (ri < 0)
        goto out;
    for (size_t i = 0; i < c->ntopos && !topo; i++)
        if (!strcmp(c->topos[i]->hash, n->hash))
            topo = c->topos[i];
    p3d_cnode *nodes = realloc(c->nodes, (c->nnodes + 1) * sizeof *nodes);
    if (nodes)
        c->nodes = nodes;
    p3d_node **topos = topo ? c->topos : realloc(c->topos, (c->ntopos + 1) * sizeof *topos);
    if (topos)
        c->topos = topos;
    if (!nm || !nodes || !topos) {
        p3d_err(err, "out of memory");
        goto out;
    }
    if (!topo) {
        c->topos[c->ntopos++] = n;
        topo = n;
        n = NULL;
    }
    c->nodes[c->nnodes] = (p3d_cnode){.name = nm, .topo = topo, .rack = ri, .nvl_domain = -1, .role = P3D_NODE_SPARE};
    nm = NULL;
    rc = (int)c->nnodes++;
out:
    free(nm);
    p3d_node_free(n);
    return rc;
}
