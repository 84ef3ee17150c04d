/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * slots.c — --nproc-per-node: N rank slots per node (p3d.h).
 *
 * Why synthesize slots on a GPU-less node instead of special-casing "no
 * GPU" everywhere: the policies, checks, reports and the launcher all speak
 * in (node, GPU index); a CPU slot is a GPU index without a device, so the
 * whole pipeline runs unchanged (CI machines, CPU backends), and the report
 * says plainly that the slots are synthetic.
 */
#include "topo_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new record with k slots built from n (k <= n->ngpus, or n has none). */
static int resize(const p3d_node *n, int k, p3d_node **out, char **err)
{
    int rc = -1;
    p3d_node *m = NULL;
    if (n->ngpus > 0) { /* the first k GPUs in PCI order */
        int *idx = malloc(sizeof *idx * (size_t)k);
        if (!idx)
            return p3d_err(err, "out of memory");
        for (int i = 0; i < k; i++)
            idx[i] = i;
        m = p3d_node_subset(n, idx, k, err);
        free(idx);
        if (!m)
            return -1;
        p3d_node_note(m, "--nproc-per-node %d: only GPUs 0-%d of %d take ranks", k, k - 1, n->ngpus);
        *out = m;
        return 0;
    }
    if (!(m = p3d_node_shell(n, k, err)))
        return -1;
    for (int i = 0; i < k; i++) {
        p3d_gpu *g = &m->gpus[i];
        g->index = i;
        snprintf(g->model, sizeof g->model, "CPU slot");
        g->numa = -1;
        g->package = -1;
        g->nearest_nic = -1;
    }
    if (p3d_node_finish(m, err) < 0)
        goto out;
    p3d_node_note(m, "no GPU found: %d CPU rank slot%s synthesized for --nproc-per-node (no device, no NVLink)", k,
                  k == 1 ? "" : "s");
    *out = m;
    m = NULL;
    rc = 0;
out:
    p3d_node_free(m);
    return rc;
}

int p3d_cluster_set_slots(p3d_cluster *c, int nslots, char **err)
{
    if (nslots < 1)
        return p3d_err(err, "--nproc-per-node: expected at least 1, got %d", nslots);
    for (size_t t = 0; t < c->ntopos; t++) {
        p3d_node *n = c->topos[t], *m = NULL;
        if (n->ngpus == nslots)
            continue;
        if (n->ngpus > 0 && n->ngpus < nslots) {
            const char *host = n->hostname ? n->hostname : "?";
            for (size_t i = 0; i < c->nnodes; i++)
                if (c->nodes[i].topo == n) {
                    host = c->nodes[i].name;
                    break;
                }
            return p3d_err(err,
                           "--nproc-per-node %d: node %s has only %d GPUs (one rank per GPU; give at most %d "
                           "or leave it out)",
                           nslots, host, n->ngpus, n->ngpus);
        }
        if (resize(n, nslots, &m, err) < 0)
            return -1;
        for (size_t i = 0; i < c->nnodes; i++)
            if (c->nodes[i].topo == n)
                c->nodes[i].topo = m;
        c->topos[t] = m;
        p3d_node_free(n);
    }
    return 0;
}
