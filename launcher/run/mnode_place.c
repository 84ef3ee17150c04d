/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode_place.c — a multi-node job's placement: the leader builds the
 * cluster from every node's HELLO and places on it; every node builds its
 * own view of the job from the PLACE message (docs/multinode.md).
 */
#include "mnode.h"

#include "plan.h"
#include "loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the leader's placement ---------------------------------------------- */

/* Sort helper for duplicate hostnames. */
static const p3d_gather *sort_g;
static int by_name(const void *a, const void *b)
{
    const p3d_grec *x = &sort_g->recs[*(const int *)a], *y = &sort_g->recs[*(const int *)b];
    int c = strcmp(x->hostname, y->hostname);
    return c ? c : x->rank - y->rank;
}

/* The cluster in node-rank order from the gathered records (by[i]: the
 * record of node rank i). The gather already shares one topology per
 * hash, as a cluster file's nodes do; hostnames that occur twice (several
 * agents on one host) become "host:RANK". The topologies are taken. */
static int gathered_cluster(const p3d_opts *o, const p3d_rdzv *r, p3d_gather *g, const int *by, int n,
                            p3d_cluster **out, char **err)
{
    int rc = -1;
    p3d_cluster *c = NULL;
    int t0 = g->recs[by[0]].topo;
    p3d_node *first = g->topos[t0];
    g->topos[t0] = NULL;
    int *dup = calloc((size_t)n, sizeof *dup), *ord = calloc((size_t)n, sizeof *ord);
    char **racks = calloc((size_t)n, sizeof *racks);
    const p3d_node **tp = calloc((size_t)g->ntopos, sizeof *tp);
    if (!dup || !ord || !racks || !tp) {
        p3d_node_free(first);
        p3d_err(err, "out of memory");
        goto out;
    }
    if (p3d_cluster_from_node(first, &c, err) < 0)
        goto out;
    p3d_cnode *nodes = realloc(c->nodes, (size_t)n * sizeof *nodes);
    p3d_node **topos = realloc(c->topos, (size_t)g->ntopos * sizeof *topos);
    if (nodes)
        c->nodes = nodes;
    if (topos)
        c->topos = topos;
    if (!nodes || !topos) {
        p3d_err(err, "out of memory");
        goto out;
    }
    tp[t0] = first;
    for (int t = 0; t < g->ntopos; t++)
        if (t != t0) {
            c->topos[c->ntopos++] = g->topos[t];
            tp[t] = g->topos[t];
            g->topos[t] = NULL;
        }
    for (int i = 1; i < n; i++) {
        c->nodes[i] = (p3d_cnode){.name = NULL, .topo = tp[g->recs[by[i]].topo], .rack = 0, .nvl_domain = -1};
        c->nnodes++;
    }
    for (int i = 0; i < n; i++) {
        ord[i] = by[i];
        if (!g->recs[by[i]].hostname[0]) {
            free(g->recs[by[i]].hostname);
            g->recs[by[i]].hostname = strdup("node");
            if (!g->recs[by[i]].hostname) {
                p3d_err(err, "out of memory");
                goto out;
            }
        }
    }
    sort_g = g;
    qsort(ord, (size_t)n, sizeof *ord, by_name);
    for (int i = 0; i + 1 < n; i++)
        if (!strcmp(g->recs[ord[i]].hostname, g->recs[ord[i + 1]].hostname))
            dup[g->recs[ord[i]].rank] = dup[g->recs[ord[i + 1]].rank] = 1;
    for (int i = 0; i < n; i++) {
        char *name = NULL;
        if (asprintf(&name, dup[i] ? "%s:%d" : "%s", g->recs[by[i]].hostname, i) < 0) {
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
        for (int i = 0; i < n; i++)
            racks[i] = g->recs[by[i]].rack;
        if (p3d_cluster_set_racks(c, racks, err) < 0)
            goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    free(dup);
    free(ord);
    free(racks);
    free(tp);
    p3d_cluster_free(c);
    return rc;
}

void p3d_mpeer_free(p3d_mpeer *p, int n)
{
    for (int i = 0; p && i < n; i++)
        free(p[i].addr);
    free(p);
}

int p3d_mnode_encode(const p3d_opts *o, const char *job_id, const p3d_plan_result *res, const p3d_mpeer *peers,
                     const char *json, p3d_wbuf *frame, int *compact, char **err)
{
    const p3d_mpeer *m0 = &peers[res->pl->ranks[0].node];
    p3d_cplace_in ci = {
        .job_id = job_id,
        .master_addr = o->master_addr ? o->master_addr : m0->addr,
        .master_port = o->master_port ? o->master_port : m0->master_port,
        .nccl_port = m0->nccl_port,
        /* an elastic job: its full width and floor go along, so that every
         * node (a successor too) knows them at any width */
        .full_dp = res->job.min_dp > 0 ? p3d_mesh_size(&res->job.mesh, P3D_DIM_DP) : 0,
        .min_dp = res->job.min_dp > 0 ? res->job.min_dp : 0,
        /* and the batch: a node that joins later is given none */
        .batch = {.global = o->global_batch > 0 ? o->global_batch : 0,
                  .micro = o->micro_batch > 0 ? o->micro_batch : 0,
                  .micros = o->micro_batches > 0 ? o->micro_batches : 0,
                  .tol_mpct = o->batch_tolerance > 0 ? (int)(o->batch_tolerance * 1000 + 0.5) : 0},
        /* and how long a node holds its ranks after one failed: the
         * leader's window, whatever each node was given */
        .fault_ms = p3d_fault_ms(o->fault_window),
        .cluster = res->cluster,
        .pl = res->pl,
        .json = json,
    };
    return p3d_cplace_encode(&ci, frame, compact, err);
}

/* Places on the gathered cluster and builds the CPLACE frame. */
int p3d_mnode_place(const p3d_opts *o, const p3d_rdzv *r, p3d_gather *g, int n, p3d_wbuf *frame, p3d_tree_stats *st,
                    char **err)
{
    return p3d_mnode_place_keep(o, r, g, n, frame, st, NULL, NULL, NULL, err);
}

/* Nodes that failed their own --health-check before the start (their
 * gathered record says so) are excluded like --exclude's, each one using
 * up a spare (*oh: o with --spares lowered), so that the spares fill in
 * before the policy runs and the job keeps its size. -2 when the leader's
 * node failed (it cannot be replaced) or more nodes failed than there are
 * spares: the job stops before anything runs. */
static int exclude_unhealthy(const p3d_opts *o, const p3d_gather *g, const int *by, p3d_cluster *c, p3d_opts *oh,
                             char **err)
{
    int nbad = 0, npf = 0;
    char *who = NULL; /* every failed node by name and reason (the first 8) */
    size_t lp = strlen(P3D_MNODE_PF_PREFIX);
    for (int i = 0; i < (int)c->nnodes; i++) {
        const p3d_grec *x = &g->recs[by[i]];
        if (x->health != P3D_GREC_HEALTH_FAILED)
            continue;
        const char *how = x->health_how ? x->health_how : "failed";
        int pf = !strncmp(how, P3D_MNODE_PF_PREFIX, lp); /* the leader's --preflight verdict */
        if (i == 0) {
            p3d_err(err,
                    P3D_REFUSE_FAILED "the leader's node %s failed %s before the start (%s); the leader runs the "
                                      "job controller and cannot be replaced: nothing started",
                    c->nodes[0].name, pf ? "the --preflight" : "its --health-check", pf ? how + lp : how);
            free(who);
            return -2;
        }
        c->nodes[i].role = P3D_NODE_EXCLUDED;
        npf += pf;
        if (nbad++ < 8)
            p3d_str_appendf(&who, "; ", "%s (%s)", c->nodes[i].name, how);
    }
    int rc = 0;
    if (nbad > o->spares) {
        p3d_err(err,
                P3D_REFUSE_FAILED "%d node%s failed the %s before the start and no spare can take "
                                  "%s place (--spares %d): %s%s; nothing started",
                nbad, nbad == 1 ? "" : "s",
                !npf          ? "--health-check"
                : npf == nbad ? "--preflight"
                              : "--health-check or the --preflight",
                nbad == 1 ? "its" : "their", o->spares, who ? who : "?", nbad > 8 ? "; ..." : "");
        rc = -2;
    } else {
        oh->spares = o->spares - nbad;
    }
    free(who);
    return rc;
}

int p3d_mnode_place_keep(const p3d_opts *o, const p3d_rdzv *r, p3d_gather *g, int n, p3d_wbuf *frame,
                         p3d_tree_stats *st, p3d_plan_result *keep, p3d_mpeer **peers, const char *preflight,
                         char **err)
{
    p3d_mpeer *pe = NULL;
    int rc = -1;
    p3d_cluster *c = NULL;
    p3d_plan_result res;
    int placed = 0;
    char *json = NULL;
    double t0 = p3d_now();
    int *by = malloc((size_t)n * sizeof *by);
    memset(&res, 0, sizeof res);
    if (!by) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++)
        by[i] = -1;
    for (int i = 0; i < g->nrec; i++) {
        int x = g->recs[i].rank;
        if (x < 0 || x >= n || by[x] >= 0) {
            p3d_err(err, "rendezvous: node rank %d's record came twice", x);
            goto out;
        }
        by[x] = i;
    }
    for (int i = 0; i < n; i++)
        if (by[i] < 0) {
            p3d_err(err, "rendezvous: node rank %d's record is missing", i);
            goto out;
        }
    if (gathered_cluster(o, r, g, by, n, &c, err) < 0)
        goto out;
    p3d_opts oh = *o;
    int e = exclude_unhealthy(o, g, by, c, &oh, err);
    if (e < 0) {
        rc = e;
        goto out;
    }
    {
        p3d_cluster *own = c;
        c = NULL; /* p3d_place_cluster owns it from here, also on failure */
        if (p3d_place_cluster(&oh, own, &res, err) < 0)
            goto out;
    }
    placed = 1;
    if (res.an && res.an->nerrors > 0) {
        char buf[4096];
        int k =
            snprintf(buf, sizeof buf, "the placement fails %d error-level check%s; nothing started:", res.an->nerrors,
                     res.an->nerrors == 1 ? "" : "s");
        for (size_t i = 0; i < res.an->nchecks && k < (int)sizeof buf; i++)
            if (res.an->checks[i].severity == P3D_SEV_ERROR)
                k += snprintf(buf + k, sizeof buf - (size_t)k, " %s: %s", res.an->checks[i].code,
                              res.an->checks[i].message);
        p3d_err(err, "%s", buf);
        goto out;
    }
    p3d_launch_warnings(res.an, o->quiet); /* the leader's, once for the job */
    p3d_report_in in = p3d_plan_report_in(&res);
    in.preflight_json = preflight;
    json = p3d_report_json(&in);
    if (!json) {
        p3d_err(err, "cannot render the placement JSON (out of memory)");
        goto out;
    }
    const p3d_placement *pl = res.pl;
    pe = calloc((size_t)n, sizeof *pe);
    if (!pe) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        const p3d_grec *gr = &g->recs[by[i]];
        pe[i] = (p3d_mpeer){.addr = strdup(gr->addr ? gr->addr : ""),
                            .master_port = gr->master_port,
                            .nccl_port = gr->nccl_port,
                            .failover_port = gr->failover_port};
        if (!pe[i].addr) {
            p3d_err(err, "out of memory");
            goto out;
        }
    }
    int compact = 0;
    if (p3d_mnode_encode(o, r->boot.job_id, &res, pe, json, frame, &compact, err) < 0)
        goto out;
    if (st) {
        st->json_len = strlen(json);
        st->cplace_len = frame->len;
        st->t_place = p3d_now() - t0;
    }
    if (o->verbose && !compact)
        fprintf(stderr,
                "par3drun: rendezvous: the compact placement does not expand to the same JSON here; "
                "sending the JSON itself (%zu bytes)\n",
                strlen(json));
    if (o->verbose)
        fprintf(stderr,
                "par3drun: rendezvous: placed %d ranks on %d nodes (cluster %.1f ms, policy %.1f ms, checks %.1f "
                "ms, baseline %.1f ms); placement %zu bytes, %zu on the wire\n",
                pl->world, n, 1e3 * res.t_cluster, 1e3 * res.t_policy, 1e3 * res.t_check, 1e3 * res.t_baseline,
                strlen(json), frame->len);
    rc = 0;
    if (keep) {
        *keep = res;
        placed = 0;
    }
    if (peers) {
        *peers = pe;
        pe = NULL;
    }
out:
    p3d_mpeer_free(pe, n);
    free(by);
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
        p3d_err(err,
                "node[%d] %s: the leader placed on topology hash %s, this node has %s (different "
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
        c->nodes[i] = (p3d_cnode){.name = strdup(pm->names[i]),
                                  .topo = i == me ? c->topos[0] : NULL,
                                  .rack = 0,
                                  .nvl_domain = -1};
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
