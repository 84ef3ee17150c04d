/* SPDX-License-Identifier: BSD-3-Clause */
/* place.c — options to a checked placement (see place.h). */
#include "plan.h"

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
    if (r->view)
        free(r->view->nodes);
    free(r->view);
    free(r->view_map);
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
            p3d_err(err,
                    "SLURM_JOB_NODELIST '%s' against %s: %s (unset SLURM_JOB_NODELIST to place on the "
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

void p3d_place_warned(const p3d_analysis *a, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; a && i < a->nchecks && k < cap; i++)
        if (a->checks[i].severity == P3D_SEV_WARNING)
            k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? "," : "", a->checks[i].code);
}

/* The dimension whose time differs most between two estimates, in words. */
static void alt_why(const p3d_cost *chosen, const p3d_cost *c, char *buf, size_t cap)
{
    static const int dims[3] = {P3D_DIM_TP, P3D_DIM_PP, P3D_DIM_DP};
    double stretch_a = 1.0 + chosen->bubble_overhead, stretch_b = 1.0 + c->bubble_overhead;
    double a[3] = {chosen->tp_time * stretch_a, chosen->pp_time * stretch_a, chosen->dp_exposed};
    double b[3] = {c->tp_time * stretch_b, c->pp_time * stretch_b, c->dp_exposed};
    int k = 0;
    for (int i = 1; i < 3; i++)
        if (a[i] - b[i] > a[k] - b[k])
            k = i;
    if (dims[k] == P3D_DIM_PP && c->has_hops && chosen->has_hops)
        snprintf(buf, cap, "its pp takes %.2f s instead of %.2f s (%ld cross-rack stage hops instead of %ld)", b[k],
                 a[k], c->hops.n[P3D_DIM_PP][P3D_LINK_XRACK], chosen->hops.n[P3D_DIM_PP][P3D_LINK_XRACK]);
    else
        snprintf(buf, cap, "its %s takes %.2f s instead of %.2f s (%s instead of %s)", p3d_dim_name(dims[k]), b[k],
                 a[k], p3d_link_name(c->link[dims[k]]), p3d_link_name(chosen->link[dims[k]]));
}

/* ---- spares, --exclude and the policy's view ------------------------------ */

/* --exclude: the named nodes get P3D_NODE_EXCLUDED; each must exist. */
static int apply_exclude(const char *list, p3d_cluster *c, char **err)
{
    char **names = NULL, *e = NULL;
    size_t n = 0;
    int rc = -1;
    if (p3d_hostlist_expand(list, &names, &n, 0, &e) < 0) {
        p3d_err(err, "--exclude '%s': %s", list, e ? e : "not a host list");
        goto out;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = 0;
        while (i < c->nnodes && strcmp(c->nodes[i].name, names[k]) != 0)
            i++;
        if (i == c->nnodes) {
            p3d_err(err, "--exclude '%s': node '%s' is not in %s", list, names[k],
                    c->source ? c->source : "the cluster");
            goto out;
        }
        c->nodes[i].role = P3D_NODE_EXCLUDED;
    }
    rc = 0;
out:
    free(e);
    p3d_strv_free(names, n);
    return rc;
}

int p3d_place_roles(const p3d_opts *o, p3d_cluster *c, const p3d_job *job, char **err)
{
    if (o->exclude && apply_exclude(o->exclude, c, err) < 0)
        return -1;
    /* one implementation of the default rule: par3d.default_spares (Lua);
     * --policy auto compares policies that would each choose, so it takes
     * the default */
    const char *policy = o->policy ? o->policy : "megatron";
    if (job->spares > 0 && !strcmp(policy, "auto"))
        policy = NULL;
    return p3d_policy_pick_spares(policy, policy ? o->policy_sha256 : NULL, c, job, err);
}

int p3d_place_keep_usable(p3d_cluster *c, char **err)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        n += c->nodes[i].role == P3D_NODE_USE;
    if (n == c->nnodes)
        return 0;
    if (n == 0)
        return p3d_err(err, "--exclude leaves no node of %s to use", c->source ? c->source : "the cluster");
    char **names = malloc(n * sizeof *names);
    if (!names)
        return p3d_err(err, "out of memory");
    n = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].role == P3D_NODE_USE)
            names[n++] = c->nodes[i].name;
    char *hl = p3d_hostlist_compress(names, n);
    free(names);
    if (!hl)
        return p3d_err(err, "out of memory");
    int rc = p3d_cluster_restrict(c, hl, err);
    free(hl);
    return rc;
}

/* The policy's view: the nodes the job may place on (with_spares: also the
 * spares and unused nodes, marked spare), sharing everything else. */
static int make_view(p3d_plan_result *out, int with_spares, const p3d_placement *prev, char **err)
{
    const p3d_cluster *c = out->cluster;
    if (out->view)
        free(out->view->nodes);
    free(out->view);
    free(out->view_map);
    out->view = NULL;
    out->view_map = NULL;
    (void)prev;
    size_t n = 0, all = 1;
    for (size_t i = 0; i < c->nnodes; i++) {
        int role = c->nodes[i].role;
        n += role == P3D_NODE_USE || (with_spares && role == P3D_NODE_SPARE);
        all &= role == P3D_NODE_USE;
    }
    if (all)
        return 0;
    p3d_cluster *v = malloc(sizeof *v);
    p3d_cnode *nodes = calloc(n + 1, sizeof *nodes);
    int *map = calloc(n + 1, sizeof *map);
    if (!v || !nodes || !map) {
        free(v);
        free(nodes);
        free(map);
        return p3d_err(err, "out of memory");
    }
    *v = *c;
    size_t k = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        int role = c->nodes[i].role;
        if (!(role == P3D_NODE_USE || (with_spares && role == P3D_NODE_SPARE)))
            continue;
        nodes[k] = c->nodes[i];
        nodes[k].role = role == P3D_NODE_SPARE ? P3D_NODE_SPARE : P3D_NODE_USE;
        map[k++] = (int)i;
    }
    v->nodes = nodes;
    v->nnodes = k;
    out->view = v;
    out->view_map = map;
    return 0;
}

/* A policy on the view; the ranks' nodes mapped back to the cluster's. */
static int policy_on_view(const char *policy, const char *sha, const p3d_plan_result *out, const p3d_job *job,
                          p3d_placement **pl, char **err)
{
    if (p3d_policy_run(policy, sha, out->view ? out->view : out->cluster, job, pl, err) < 0)
        return -1;
    for (int r = 0; out->view && r < (*pl)->world; r++)
        (*pl)->ranks[r].node = out->view_map[(*pl)->ranks[r].node];
    return 0;
}

/* Runs one policy and its checks; 0, or -1 with *err. */
static int run_one(const char *policy, const char *sha, const p3d_plan_result *out, p3d_placement **pl,
                   p3d_analysis **an, char **err)
{
    *pl = NULL;
    *an = NULL;
    if (policy_on_view(policy, sha, out, &out->job, pl, err) < 0)
        return -1;
    if (p3d_analyze(out->cluster, &out->job, *pl, an, err) < 0) {
        p3d_placement_free(*pl);
        *pl = NULL;
        return -1;
    }
    return 0;
}

/* --policy auto, or any policy with a model: every bundled policy (and
 * --policy-candidates) on the same input. Auto keeps the best estimate
 * that passes every error-level check; otherwise the chosen policy stays
 * and the others are only compared. */
static int compare_policies(const p3d_opts *o, p3d_plan_result *out, char **err)
{
    static const char *const bundled[] = {"megatron", "devicemesh", "naive"};
    const char *names[3 + 8];
    int n = 0, is_auto = o->policy && strcmp(o->policy, "auto") == 0;
    for (size_t i = 0; i < 3; i++)
        names[n++] = bundled[i];
    for (size_t i = 0; i < o->npolicy_candidates && n < (int)(sizeof names / sizeof names[0]); i++)
        names[n++] = o->policy_candidates[i];
    p3d_placement *best_pl = NULL;
    p3d_analysis *best_an = NULL;
    for (int i = 0; i < n; i++) {
        if (!is_auto && out->pl && out->pl->policy && strcmp(names[i], out->pl->policy) == 0)
            continue;
        p3d_placement *pl = NULL;
        p3d_analysis *an = NULL;
        char *e = NULL;
        if (run_one(names[i], NULL, out, &pl, &an, &e) < 0) {
            if (i >= 3) { /* a candidate the user named must run */
                p3d_err(err, "--policy-candidates %s: %s", names[i], e ? e : "failed");
                free(e);
                p3d_placement_free(best_pl);
                p3d_analysis_free(best_an);
                return -1;
            }
            free(e);
            continue;
        }
        if (out->nalt < (int)(sizeof out->alt / sizeof out->alt[0])) {
            struct p3d_policy_alt *a = &out->alt[out->nalt++];
            snprintf(a->name, sizeof a->name, "%s", pl->policy ? pl->policy : names[i]);
            a->step_time = an->has_cost ? an->cost.step_time : 0;
            a->nerrors = an->nerrors;
            a->nwarnings = an->nwarnings;
            p3d_place_warned(an, a->warned, sizeof a->warned);
            a->why[0] = 0;
            if (!is_auto && an->has_cost && out->an && out->an->has_cost &&
                an->cost.step_time < out->an->cost.step_time)
                alt_why(&out->an->cost, &an->cost, a->why, sizeof a->why);
        }
        /* fewest warnings first, then the estimate (place.h) */
        int better = is_auto && an->has_cost && an->nerrors == 0 &&
                     (!best_an || best_an->nerrors || an->nwarnings < best_an->nwarnings ||
                      (an->nwarnings == best_an->nwarnings && an->cost.step_time < best_an->cost.step_time));
        if (better) {
            p3d_placement_free(best_pl);
            p3d_analysis_free(best_an);
            best_pl = pl;
            best_an = an;
        } else if (is_auto && !best_an && !out->pl) {
            best_pl = pl; /* nothing passes yet: keep the first as a fallback */
            best_an = an;
        } else {
            p3d_placement_free(pl);
            p3d_analysis_free(an);
        }
    }
    if (is_auto && best_an && !best_an->has_cost) {
        /* nothing to rank by: falling back to the first policy would hide
         * that the estimate is gone (a batch mismatch, typically) */
        const char *why = "the cost model gave none";
        for (size_t i = 0; i < best_an->nchecks; i++)
            if (!strcmp(best_an->checks[i].code, "COST_UNAVAILABLE") ||
                !strcmp(best_an->checks[i].code, "BATCH_MISMATCH"))
                why = best_an->checks[i].message;
        p3d_err(err,
                "--policy auto ranks the policies by the cost model's step-time estimate, and there is none: %s "
                "(make the batch figures agree, or name a policy: --policy megatron)",
                why);
        p3d_placement_free(best_pl);
        p3d_analysis_free(best_an);
        return -1;
    }
    if (is_auto) {
        if (!best_pl)
            return p3d_err(err, "--policy auto: none of the policies produced a placement");
        out->pl = best_pl;
        out->an = best_an;
        out->auto_chosen = 1;
    }
    return 0;
}

void p3d_place_policy_note(const p3d_plan_result *r, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!r->an || !r->an->has_cost)
        return;
    const char *me = r->pl && r->pl->policy ? r->pl->policy : "the policy";
    int best = -1, warned = -1, runner = -1;
    for (int i = 0; i < r->nalt; i++) {
        const struct p3d_policy_alt *a = &r->alt[i];
        if (!strcmp(a->name, me) || a->step_time <= 0 || a->nerrors)
            continue;
        int faster = a->step_time < r->an->cost.step_time;
        if (faster && a->nwarnings <= r->an->nwarnings && (best < 0 || a->step_time < r->alt[best].step_time))
            best = i;
        if (faster && a->nwarnings > r->an->nwarnings && (warned < 0 || a->step_time < r->alt[warned].step_time))
            warned = i;
        if (runner < 0 || a->step_time < r->alt[runner].step_time)
            runner = i;
    }
    if (best >= 0) {
        /* the reason: rerun the comparison on the costs we have */
        snprintf(buf, cap,
                 "policy %s's estimate is %.2f s faster than %s's on this input (step %.2f s vs %.2f s%s%s); "
                 "--policy %s or --policy auto uses it",
                 r->alt[best].name, r->an->cost.step_time - r->alt[best].step_time, me, r->alt[best].step_time,
                 r->an->cost.step_time, r->alt[best].why[0] ? ": " : "", r->alt[best].why, r->alt[best].name);
    } else if (warned >= 0 && !r->auto_chosen) {
        /* faster on paper, but its own checks warn against it: named, not advised */
        snprintf(buf, cap,
                 "policy %s's estimate is %.2f s faster than %s's on this input (step %.2f s vs %.2f s%s%s), "
                 "but its placement warns %s; %s is kept (docs/plan.md, \"Which policy\")",
                 r->alt[warned].name, r->an->cost.step_time - r->alt[warned].step_time, me, r->alt[warned].step_time,
                 r->an->cost.step_time, r->alt[warned].why[0] ? ": " : "", r->alt[warned].why, r->alt[warned].warned,
                 me);
    } else if (r->auto_chosen && runner >= 0) {
        const struct p3d_policy_alt *a = &r->alt[runner];
        snprintf(buf, cap, "--policy auto chose %s (step %.2f s%s); runner-up %s (%.2f s%s%s)", me,
                 r->an->cost.step_time, r->an->nwarnings ? ", the fewest warnings" : "", a->name, a->step_time,
                 a->nwarnings > r->an->nwarnings ? ", warns " : "", a->nwarnings > r->an->nwarnings ? a->warned : "");
    } else if (r->auto_chosen) {
        snprintf(buf, cap, "--policy auto chose %s (step %.2f s); no other policy passed the checks", me,
                 r->an->cost.step_time);
    }
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

/* dp from what the nodes that run ranks hold, named as they are (GPUs or
 * CPU slots), and saying what the --spares nodes hold back. */
static int resolve_dp(p3d_plan_result *out, char **err)
{
    const p3d_cluster *v = out->view ? out->view : out->cluster;
    size_t slots = 0, spare_gpus = 0;
    int spare_nodes = 0;
    for (size_t i = 0; i < v->nnodes; i++)
        for (int g = 0; v->nodes[i].topo && g < v->nodes[i].topo->ngpus; g++)
            slots += !strcmp(v->nodes[i].topo->gpus[g].model, "CPU slot");
    for (size_t i = 0; i < out->cluster->nnodes; i++)
        if (out->cluster->nodes[i].role == P3D_NODE_SPARE) {
            spare_nodes++;
            spare_gpus += out->cluster->nodes[i].topo ? (size_t)out->cluster->nodes[i].topo->ngpus : 0;
        }
    size_t n = p3d_cluster_gpus(v);
    return p3d_job_resolve_dp_on(&out->job, n, n && slots == n ? "CPU slot" : "GPU", spare_gpus, spare_nodes, err);
}

/* The elastic range (--min-dp, torchrun's --nnodes MIN:MAX, --batch-
 * tolerance), checked once dp is known and before anything starts: a range
 * without a valid width is bad input. MIN counts the nodes that run ranks
 * at the start (the spares are not among them). */
static int resolve_elastic(const p3d_opts *o, p3d_plan_result *out, char **err)
{
    p3d_job *j = &out->job;
    const p3d_cluster *v = out->view ? out->view : out->cluster;
    p3d_elastic e;
    if (o->min_dp && o->nnodes_min)
        return p3d_err(err, "--min-dp %d and --nnodes %d:%d both set the elastic range: give one of them", o->min_dp,
                       o->nnodes_min, o->nnodes);
    if (o->nnodes_min &&
        p3d_elastic_min_dp_of_nodes(o->nnodes_min, (int)v->nnodes, j->mesh.size[P3D_DIM_DP], &j->min_dp, err) < 0)
        return -1;
    if (!j->min_dp && o->batch_tolerance < 0)
        return 0; /* not elastic: today's checks (BATCH_NOT_DIVISIBLE) say the rest */
    return p3d_elastic_init(j, j->min_dp, j->batch_tol_pct, &e, err);
}

/* --strict: every warning-level check is an error; the dry run and the
 * launch then refuse the placement as for any error (exit 2). */
static void strict_checks(p3d_analysis *an)
{
    for (size_t i = 0; an && i < an->nchecks; i++)
        if (an->checks[i].severity == P3D_SEV_WARNING) {
            an->checks[i].severity = P3D_SEV_ERROR;
            an->nwarnings--;
            an->nerrors++;
        }
}

int p3d_place_cluster(const p3d_opts *o, p3d_cluster *cluster, p3d_plan_result *out, char **err)
{
    int rc = -1;
    double t0 = now(), t1;
    memset(out, 0, sizeof *out);
    out->cluster = cluster;
    if (p3d_opts_job(o, &out->job, err) < 0)
        goto out;
    out->job.spares = o->spares;
    if (p3d_place_roles(o, cluster, &out->job, err) < 0 || make_view(out, 0, NULL, err) < 0)
        goto out;
    /* p3d_job_resolve_dp's own message points at the local machine */
    if (o->cluster && p3d_cluster_gpus(out->cluster) == 0) {
        p3d_err(err, "%s: the cluster has no GPUs: give --nproc-per-node N to run N CPU ranks per node", o->cluster);
        goto out;
    }
    if (resolve_dp(out, err) < 0 || resolve_elastic(o, out, err) < 0)
        goto out;
    t1 = now();
    out->t_cluster = t1 - t0;
    t0 = t1;
    int is_auto = o->policy && strcmp(o->policy, "auto") == 0;
    for (size_t i = 0; i < o->npolicy_candidates; i++)
        if (!o->policy_candidates[i][0] || strcmp(o->policy_candidates[i], "auto") == 0) {
            p3d_err(err, "--policy-candidates: '%s' is not a policy (a bundled name, a .lua file or a URL)",
                    o->policy_candidates[i]);
            goto out;
        }
    if (o->npolicy_candidates && !out->job.has_model) {
        p3d_err(err, "--policy-candidates are compared by the cost model's estimate: give --model (or --params "
                     "--layers --hidden --heads --seq-len)");
        goto out;
    }
    if (is_auto && o->policy_sha256) {
        p3d_err(err, "--policy-sha256 pins one policy file; --policy auto runs several: name the policy you pin "
                     "with --policy");
        goto out;
    }
    if (is_auto) {
        if (!out->job.has_model) {
            p3d_err(err, "--policy auto ranks policies by the cost model's estimate: give --model (or --params "
                         "--layers --hidden --heads --seq-len)");
            goto out;
        }
        if (compare_policies(o, out, err) < 0)
            goto out;
        t1 = now();
        out->t_policy = t1 - t0;
        t0 = t1;
    } else {
        if (policy_on_view(o->policy ? o->policy : "megatron", o->policy_sha256, out, &out->job, &out->pl, err) < 0)
            goto out;
        t1 = now();
        out->t_policy = t1 - t0;
        t0 = t1;
        if (p3d_analyze(out->cluster, &out->job, out->pl, &out->an, err) < 0)
            goto out;
        /* with a model, say whether another bundled policy does better */
        if (out->job.has_model && out->an->has_cost && compare_policies(o, out, err) < 0)
            goto out;
    }
    t1 = now();
    out->t_check = t1 - t0;
    t0 = t1;
    /* The baseline is context, not a requirement: if naive.lua cannot run
     * the report says why and the dry run goes on. */
    if (!out->pl->policy || strcmp(out->pl->policy, "naive") != 0) {
        char *e = NULL;
        if (policy_on_view("naive", NULL, out, &out->job, &out->base_pl, &e) < 0 ||
            p3d_analyze(out->cluster, &out->job, out->base_pl, &out->base_an, &e) < 0) {
            p3d_placement_free(out->base_pl);
            out->base_pl = NULL;
            out->base_err = e ? e : strdup("naive.lua failed");
        } else {
            free(e);
        }
    }
    out->t_baseline = now() - t0;
    if (o->strict)
        strict_checks(out->an);
    rc = 0;
out:
    if (rc < 0)
        p3d_plan_result_free(out);
    return rc;
}

int p3d_place_replace(const p3d_opts *o, p3d_plan_result *r, const int *lost, int nlost, int restart, char **err)
{
    p3d_cluster *c = r->cluster;
    p3d_placement *old = r->pl, *pl = NULL;
    p3d_analysis *an = NULL;
    int world = old->world, rc = -1;
    const char **node = calloc((size_t)world + 1, sizeof *node);
    int *gpu = calloc((size_t)world + 1, sizeof *gpu);
    const char **fname = calloc((size_t)nlost + 1, sizeof *fname);
    const char **frack = calloc((size_t)nlost + 1, sizeof *frack);
    const char **fnvl = calloc((size_t)nlost + 1, sizeof *fnvl);
    if (!node || !gpu || !fname || !frack || !fnvl) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int k = 0; k < nlost; k++) {
        const p3d_cnode *cn = &c->nodes[lost[k]];
        c->nodes[lost[k]].role = P3D_NODE_LOST;
        fname[k] = cn->name;
        frack[k] = c->nracks ? c->racks[cn->rack] : NULL;
        fnvl[k] =
            cn->nvl_domain >= 0 && (size_t)cn->nvl_domain < c->nnvl_domains ? c->nvl_domains[cn->nvl_domain] : NULL;
    }
    for (int q = 0; q < world; q++) {
        node[q] = c->nodes[old->ranks[q].node].name;
        gpu[q] = old->ranks[q].gpu;
    }
    /* the spares available now: a spare that runs no rank any more (its
     * node was... never: a used node that lost its ranks is lost) */
    size_t spares = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        spares += c->nodes[i].role == P3D_NODE_SPARE;
    if (!spares) {
        p3d_err(err, "no spare node left to take the ranks of %s (--spares %d, all in use or lost)%s", fname[0],
                o->spares,
                r->job.min_dp > 0 ? "" : "; the job is not elastic (--min-dp D lets it shrink), so it stops");
        goto out;
    }
    p3d_previous prev = {.world = world,
                         .node = node,
                         .gpu = gpu,
                         .restart = restart,
                         .nfailed = (size_t)nlost,
                         .failed = fname,
                         .failed_rack = frack,
                         .failed_nvl = fnvl};
    p3d_job job = r->job;
    job.previous = &prev;
    /* the view: the nodes that hold ranks and the spares (only they have
     * agents waiting); a used node without ranks is not offered */
    if (make_view(r, 1, old, err) < 0)
        goto out;
    const char *policy = old->policy ? old->policy : o->policy ? o->policy : "megatron";
    if (policy_on_view(o->policy && strcmp(o->policy, "auto") ? o->policy : policy,
                       o->policy && strcmp(o->policy, "auto") ? o->policy_sha256 : NULL, r, &job, &pl, err) < 0)
        goto out;
    if (p3d_analyze(c, &r->job, pl, &an, err) < 0)
        goto out;
    for (int q = 0; q < world; q++)
        c->nodes[pl->ranks[q].node].role = P3D_NODE_USE;
    p3d_placement_free(r->pl);
    p3d_analysis_free(r->an);
    r->pl = pl;
    r->an = an;
    pl = NULL;
    an = NULL;
    /* the baseline compared the first placement; a replacement keeps
     * every healthy rank, so there is nothing to compare it with */
    p3d_placement_free(r->base_pl);
    p3d_analysis_free(r->base_an);
    r->base_pl = NULL;
    r->base_an = NULL;
    free(r->base_err);
    r->base_err = strdup("not run again after a node loss (the replacement keeps every healthy rank in place)");
    r->nalt = 0;
    rc = 0;
out:
    p3d_placement_free(pl);
    p3d_analysis_free(an);
    free(node);
    free(gpu);
    free(fname);
    free(frack);
    free(fnvl);
    return rc;
}
