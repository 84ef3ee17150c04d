/*
 * mnode_place.c — a multi-node job's placement: the leader builds the
 * cluster from every node's HELLO and places on it; every node builds its
 * own view of the job from the PLACE message (docs/multinode.md).
 */
#include "mnode.h"

#include "place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the leader's placement ---------------------------------------------- */

/* The cluster in node-rank order from the HELLOs. Records with the same
 * hash share one topology (as a cluster file's nodes do); hostnames that
 * occur twice (several agents on one host) become "host:RANK". */
static int gathered_cluster(const p3d_opts *o, const p3d_rdzv *r, p3d_hello *all, int n, p3d_cluster **out,
                            char **err)
{
    int rc = -1;
    p3d_cluster *c = NULL;
    p3d_node *first = all[0].topo;
    all[0].topo = NULL;
    if (p3d_cluster_from_node(first, &c, err) < 0)
        goto out;
    p3d_cnode *nodes = realloc(c->nodes, (size_t)n * sizeof *nodes);
    p3d_node **topos = realloc(c->topos, (size_t)n * sizeof *topos);
    if (nodes)
        c->nodes = nodes;
    if (topos)
        c->topos = topos;
    if (!nodes || !topos) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 1; i < n; i++) {
        p3d_node *t = all[i].topo;
        all[i].topo = NULL;
        const p3d_node *use = NULL;
        for (size_t k = 0; k < c->ntopos && !use; k++)
            if (!strcmp(c->topos[k]->hash, t->hash))
                use = c->topos[k];
        if (use) {
            p3d_node_free(t);
        } else {
            c->topos[c->ntopos++] = t;
            use = t;
        }
        c->nodes[i] = (p3d_cnode){.name = NULL, .topo = use, .rack = 0, .nvl_domain = -1};
        c->nnodes++;
    }
    for (int i = 0; i < n; i++) {
        const char *h = all[i].hostname && all[i].hostname[0] ? all[i].hostname : "node";
        int dup = 0;
        for (int k = 0; k < n && !dup; k++)
            dup = k != i && all[k].hostname && !strcmp(all[k].hostname, h);
        char *name = NULL;
        if (asprintf(&name, dup ? "%s:%d" : "%s", h, i) < 0) {
            p3d_err(err, "out of memory");
            goto out;
        }
        free(c->nodes[i].name);
        c->nodes[i].name = name;
    }
    /* reports name where the nodes came from */
    free(c->source);
    if (asprintf(&c->source, "rendezvous:%s", r->ops->name) < 0) {
        c->source = NULL;
        p3d_err(err, "out of memory");
        goto out;
    }
    if (o->nproc_per_node > 0 && p3d_cluster_set_slots(c, o->nproc_per_node, err) < 0)
        goto out;
    if (o->slurm_topology) {
        if (p3d_cluster_apply_slurm_topology(c, o->slurm_topology, err) < 0)
            goto out;
    } else { /* racks the agents read from SLURM_TOPOLOGY_ADDR */
        char **racks = calloc((size_t)n, sizeof *racks);
        if (!racks) {
            p3d_err(err, "out of memory");
            goto out;
        }
        for (int i = 0; i < n; i++)
            racks[i] = all[i].rack;
        int e = p3d_cluster_set_racks(c, racks, err);
        free(racks);
        if (e < 0)
            goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    p3d_cluster_free(c);
    return rc;
}

/* Places on the gathered cluster and builds the PLACE frame. */
int p3d_mnode_place(const p3d_opts *o, const p3d_rdzv *r, p3d_hello *all, int n, p3d_wbuf *frame, char **err)
{
    int rc = -1;
    p3d_cluster *c = NULL;
    p3d_plan_result res;
    int placed = 0;
    char *json = NULL;
    memset(&res, 0, sizeof res);
    if (gathered_cluster(o, r, all, n, &c, err) < 0)
        goto out;
    {
        p3d_cluster *own = c;
        c = NULL; /* p3d_place_cluster owns it from here, also on failure */
        if (p3d_place_cluster(o, own, &res, err) < 0)
            goto out;
    }
    placed = 1;
    if (res.an && res.an->nerrors > 0) {
        char buf[4096];
        int k = snprintf(buf, sizeof buf, "the placement fails %d error-level check%s; nothing started:",
                         res.an->nerrors, res.an->nerrors == 1 ? "" : "s");
        for (size_t i = 0; i < res.an->nchecks && k < (int)sizeof buf; i++)
            if (res.an->checks[i].severity == P3D_SEV_ERROR)
                k += snprintf(buf + k, sizeof buf - (size_t)k, " %s: %s", res.an->checks[i].code,
                              res.an->checks[i].message);
        p3d_err(err, "%s", buf);
        goto out;
    }
    p3d_report_in in = p3d_plan_report_in(&res);
    json = p3d_report_json(&in);
    if (!json) {
        p3d_err(err, "cannot render the placement JSON (out of memory)");
        goto out;
    }
    const p3d_placement *pl = res.pl;
    int n0 = pl->ranks[0].node;
    p3d_place_msg pm = {
        .job_id = all[0].job_id,
        .master_addr = o->master_addr ? (char *)o->master_addr : all[n0].addr,
        .master_port = o->master_port ? o->master_port : all[n0].master_port,
        .nccl_port = all[n0].nccl_port,
        .nnodes = n,
        .pl = res.pl,
        .json = json,
        .json_len = strlen(json),
    };
    pm.names = calloc((size_t)n, sizeof *pm.names);
    pm.hashes = calloc((size_t)n, sizeof *pm.hashes);
    if (!pm.names || !pm.hashes) {
        free(pm.names);
        free(pm.hashes);
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        pm.names[i] = res.cluster->nodes[i].name;
        pm.hashes[i] = (char *)res.cluster->nodes[i].topo->hash;
    }
    int e = p3d_place_encode(&pm, frame);
    free(pm.names);
    free(pm.hashes);
    if (e < 0) {
        p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        goto out;
    }
    if (o->verbose)
        fprintf(stderr,
                "par3drun: rendezvous: placed %d ranks on %d nodes (cluster %.1f ms, policy %.1f ms, checks %.1f "
                "ms, baseline %.1f ms); placement %zu bytes\n",
                pl->world, n, 1e3 * res.t_cluster, 1e3 * res.t_policy, 1e3 * res.t_check, 1e3 * res.t_baseline,
                strlen(json));
    rc = 0;
out:
    free(json);
    if (placed)
        p3d_plan_result_free(&res);
    p3d_cluster_free(c);
    return rc;
}

/* ---- this node's view of the job ----------------------------------------- */

/* The agent's cluster: every node's name (rank environment, tags), and
 * only this node's topology — the only one an agent reads (binding,
 * CUDA_VISIBLE_DEVICES, the root-cause summary). */
int p3d_mnode_local_cluster(const p3d_opts *o, p3d_node *t, const p3d_place_msg *pm, int me, p3d_cluster **out,
                            char **err)
{
    int n = pm->nnodes, rc = -1;
    if (p3d_cluster_from_node(t, out, err) < 0)
        goto out;
    p3d_cluster *c = *out;
    if (o->nproc_per_node > 0 && p3d_cluster_set_slots(c, o->nproc_per_node, err) < 0)
        goto out;
    if (strcmp(c->topos[0]->hash, pm->hashes[me]) != 0) {
        p3d_err(err, "node[%d] %s: the leader placed on topology hash %s, this node has %s (different "
                     "--nproc-per-node on this node?)",
                me, pm->names[me], pm->hashes[me], c->topos[0]->hash);
        goto out;
    }
    p3d_cnode *nodes = realloc(c->nodes, (size_t)n * sizeof *nodes);
    if (!nodes) {
        p3d_err(err, "out of memory");
        goto out;
    }
    c->nodes = nodes;
    free(c->nodes[0].name);
    for (int i = 0; i < n; i++) {
        c->nodes[i] = (p3d_cnode){.name = strdup(pm->names[i]), .topo = i == me ? c->topos[0] : NULL,
                                  .rack = 0, .nvl_domain = -1};
        if (!c->nodes[i].name) {
            c->nnodes = (size_t)i;
            p3d_err(err, "out of memory");
            goto out;
        }
    }
    c->nnodes = (size_t)n;
    rc = 0;
out:
    return rc;
}
