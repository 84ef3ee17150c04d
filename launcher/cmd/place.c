/* place.c — options to a checked placement (see place.h). */
#include "place.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void p3d_plan_result_free(p3d_plan_result *r)
{
    if (!r)
        return;
    p3d_analysis_free(r->base_an);
    p3d_placement_free(r->base_pl);
    p3d_analysis_free(r->an);
    p3d_placement_free(r->pl);
    p3d_cluster_free(r->cluster);
    free(r->base_err);
    memset(r, 0, sizeof *r);
}

p3d_report_in p3d_plan_report_in(const p3d_plan_result *r)
{
    p3d_report_in in = {
        .cluster = r->cluster,
        .job = &r->job,
        .pl = r->pl,
        .an = r->an,
        .base_pl = r->base_pl,
        .base_an = r->base_an,
        .color = 0,
    };
    return in;
}

static int load_cluster(const p3d_opts *o, p3d_cluster **out, char **err)
{
    int rc = -1;
    p3d_cluster *c = NULL;
    char *e = NULL;
    if (o->cluster) {
        /* --topology names the nodes' topology for sources without one
         * (kubectl, AWS); "local" is the default, not a choice */
        const char *t = o->topology && strcmp(o->topology, "local") ? o->topology : NULL;
        if (p3d_cluster_load_as(o->cluster, t, &c, err) < 0)
            goto out;
        const char *alloc = getenv("SLURM_JOB_NODELIST");
        size_t listed = c->nnodes;
        if (alloc && *alloc && p3d_cluster_restrict(c, alloc, &e) < 0) {
            p3d_err(err, "SLURM_JOB_NODELIST '%s' against %s: %s (unset SLURM_JOB_NODELIST to place on the "
                         "whole cluster file)",
                    alloc, o->cluster, e ? e : "no match");
            goto out;
        }
        if (alloc && *alloc) /* the report says only these nodes were used */
            c->nnodes_file = listed;
        /* --emulate runs every node on this host: each takes this host's
         * allocated GPUs (docs/cluster-file.md "Allocations") */
        for (size_t t = 0; o->emulate && t < c->ntopos; t++) {
            p3d_node *was = c->topos[t];
            if (p3d_node_apply_allocation(&c->topos[t], o->nproc_per_node, err) < 0)
                goto out;
            for (size_t i = 0; i < c->nnodes; i++)
                if (c->nodes[i].topo == was)
                    c->nodes[i].topo = c->topos[t];
        }
    } else {
        p3d_node *n = NULL;
        if (p3d_topo_load(o->topology ? o->topology : "local", &n, err) < 0)
            goto out;
        /* this host's allocation (SLURM_STEP_GPUS, CUDA_VISIBLE_DEVICES) */
        if (p3d_node_apply_allocation(&n, o->nproc_per_node, err) < 0) {
            p3d_node_free(n);
            goto out;
        }
        /* takes ownership of n, also when it fails */
        if (p3d_cluster_from_node(n, &c, err) < 0)
            goto out;
    }
    if (o->nproc_per_node > 0 && p3d_cluster_set_slots(c, o->nproc_per_node, err) < 0)
        goto out;
    if (o->slurm_topology && p3d_cluster_apply_slurm_topology(c, o->slurm_topology, err) < 0)
        goto out;
    *out = c;
    c = NULL;
    rc = 0;
out:
    free(e);
    p3d_cluster_free(c);
    return rc;
}

int p3d_place(const p3d_opts *o, p3d_plan_result *out, char **err)
{
    p3d_cluster *c = NULL;
    double t0 = now();
    memset(out, 0, sizeof *out);
    if (load_cluster(o, &c, err) < 0)
        return -1;
    double t_load = now() - t0;
    int rc = p3d_place_cluster(o, c, out, err);
    if (rc == 0)
        out->t_cluster += t_load;
    return rc;
}

int p3d_place_cluster(const p3d_opts *o, p3d_cluster *cluster, p3d_plan_result *out, char **err)
{
    int rc = -1;
    double t0 = now(), t1;
    memset(out, 0, sizeof *out);
    out->cluster = cluster;
    if (p3d_cli_job(o, &out->job, err) < 0)
        goto out;
    /* p3d_job_resolve_dp's own message points at the local machine */
    if (o->cluster && p3d_cluster_gpus(out->cluster) == 0) {
        p3d_err(err, "%s: the cluster has no GPUs: give --nproc-per-node N to run N CPU ranks per node",
                o->cluster);
        goto out;
    }
    if (p3d_job_resolve_dp(&out->job, p3d_cluster_gpus(out->cluster), err) < 0)
        goto out;
    t1 = now();
    out->t_cluster = t1 - t0;
    t0 = t1;
    if (p3d_policy_run(o->policy ? o->policy : "megatron", o->policy_sha256, out->cluster, &out->job, &out->pl,
                       err) < 0)
        goto out;
    t1 = now();
    out->t_policy = t1 - t0;
    t0 = t1;
    if (p3d_analyze(out->cluster, &out->job, out->pl, &out->an, err) < 0)
        goto out;
    t1 = now();
    out->t_check = t1 - t0;
    t0 = t1;
    /* The baseline is context, not a requirement: if naive.lua cannot run
     * the report says why and the dry run goes on. */
    if (!out->pl->policy || strcmp(out->pl->policy, "naive") != 0) {
        char *e = NULL;
        if (p3d_policy_run("naive", NULL, out->cluster, &out->job, &out->base_pl, &e) < 0 ||
            p3d_analyze(out->cluster, &out->job, out->base_pl, &out->base_an, &e) < 0) {
            p3d_placement_free(out->base_pl);
            out->base_pl = NULL;
            out->base_err = e ? e : strdup("naive.lua failed");
        } else {
            free(e);
        }
    }
    out->t_baseline = now() - t0;
    rc = 0;
out:
    if (rc < 0)
        p3d_plan_result_free(out);
    return rc;
}
