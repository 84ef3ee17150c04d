/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * place_reshape.c — a running job at another width (docs/launch.md,
 * "Elastic width"): past its last spare an elastic job drops whole
 * data-parallel replicas (p3d_policy_shrink: the policy's shrink() hook or
 * the default), and once spares can hold whole replicas again it grows
 * back (p3d_grow_plan). The plan result keeps the job at its full width
 * (r->job) and the placement at the width it runs (r->pl). The single-node
 * /--emulate launcher and the multi-node leader share this, as they share
 * place_replace.c.
 */
#include "plan.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int p3d_plan_elastic(const p3d_plan_result *r, p3d_elastic *e, char **err)
{
    if (r->job.min_dp <= 0)
        return p3d_err(err, "the job is not elastic (--min-dp or --nnodes MIN:MAX sets its range)");
    return p3d_elastic_init(&r->job, r->job.min_dp, r->job.batch_tol_pct, e, err);
}

/* r->job at the placement's width: what the checks and the report read. */
static p3d_job job_at(const p3d_plan_result *r, const p3d_placement *pl)
{
    p3d_job j = r->job;
    j.mesh.size[P3D_DIM_DP] = p3d_mesh_size(&pl->mesh, P3D_DIM_DP);
    return j;
}

/* The reshape's placement becomes the job's: checked (error-level checks
 * refuse it), node roles set (a node that held ranks and holds none now
 * is a spare; one that holds ranks is used), the old one freed. */
static int adopt(p3d_plan_result *r, p3d_reshape *rs, char **err)
{
    p3d_cluster *c = r->cluster;
    p3d_analysis *an = NULL;
    p3d_job j = job_at(r, rs->pl);
    if (p3d_analyze(c, &j, rs->pl, &an, err) < 0)
        return -1;
    if (an->nerrors > 0) {
        char buf[1024];
        int k = snprintf(buf, sizeof buf, "the new placement fails %d error-level check%s:", an->nerrors,
                         an->nerrors == 1 ? "" : "s");
        for (size_t i = 0; i < an->nchecks && k < (int)sizeof buf; i++)
            if (an->checks[i].severity == P3D_SEV_ERROR)
                k += snprintf(buf + k, sizeof buf - (size_t)k, " %s: %s", an->checks[i].code, an->checks[i].message);
        p3d_analysis_free(an);
        return p3d_err(err, "%s", buf);
    }
    for (int q = 0; q < r->pl->world; q++)
        if (c->nodes[r->pl->ranks[q].node].role == P3D_NODE_USE)
            c->nodes[r->pl->ranks[q].node].role = P3D_NODE_SPARE;
    for (int q = 0; q < rs->pl->world; q++)
        c->nodes[rs->pl->ranks[q].node].role = P3D_NODE_USE;
    p3d_placement_free(r->pl);
    p3d_analysis_free(r->an);
    r->pl = rs->pl;
    r->an = an;
    rs->pl = NULL;
    p3d_placement_free(r->base_pl);
    p3d_analysis_free(r->base_an);
    r->base_pl = NULL;
    r->base_an = NULL;
    free(r->base_err);
    r->base_err = strdup("not run again after a width change (whole replicas dropped or added, the rest kept)");
    r->nalt = 0;
    return 0;
}

/* The policy a re-placement runs: --policy, or under auto the chosen one. */
static const char *policy_of(const p3d_opts *o, const p3d_plan_result *r, const char **pin)
{
    int named = o->policy && strcmp(o->policy, "auto");
    *pin = named ? o->policy_sha256 : NULL;
    return named ? o->policy : r->pl->policy ? r->pl->policy : "megatron";
}

/* "1,3" for the dp indices v[0..n), into buf. */
static void int_list(const int *v, int n, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k + 16 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? ", " : "", v[i]);
}

/* The width change's record (events.jsonl "shrink" or "grow") and its
 * story line in *msg. */
static int width_record(const p3d_plan_result *r, const p3d_reshape *rs, int old_world, int restart, int grow,
                        const char *reason, int events_fd, double t0, char **msg)
{
    p3d_elastic e;
    int B = p3d_plan_elastic(r, &e, NULL) == 0 && e.B > 0 ? e.B : rs->width.batch;
    const p3d_width *w = &rs->width;
    char drop[256], jw[600], bnote[320];
    int_list(rs->dropped, rs->ndropped, drop, sizeof drop);
    p3d_json_str(jw, sizeof jw, reason ? reason : "");
    p3d_event(events_fd, t0,
              "\"event\": \"%s\", \"old_dp\": %d, \"new_dp\": %d, \"old_world\": %d, \"new_world\": %d, "
              "\"replicas_%s\": %d, \"dropped\": [%s], \"global_batch\": %d, \"micro_batch\": %d, "
              "\"micro_batches\": %d, \"batch\": %d, \"exact\": %s, \"restart\": %d, \"reason\": %s",
              grow ? "grow" : "shrink", rs->old_dp, w->dp, old_world, r->pl->world, grow ? "added" : "dropped",
              grow ? w->dp - rs->old_dp : rs->old_dp - w->dp, grow ? "" : drop, B, w->b, w->m, w->batch,
              w->exact ? "true" : "false", restart, jw);
    if (B <= 0) /* no --global-batch: no batch to keep */
        snprintf(bnote, sizeof bnote, "no --global-batch to keep: each replica's batch as before");
    else if (w->exact)
        snprintf(bnote, sizeof bnote, "batch %d kept: %d micro-batch%s of %d a replica", w->batch, w->m,
                 w->m == 1 ? "" : "es", w->b);
    else
        snprintf(bnote, sizeof bnote, "batch %d (%s): %d micro-batch%s of %d a replica", w->batch, w->note, w->m,
                 w->m == 1 ? "" : "es", w->b);
    int n = grow ? asprintf(msg, "grown from dp %d to dp %d (world %d -> %d), %s", rs->old_dp, w->dp, old_world,
                            r->pl->world, bnote)
                 : asprintf(msg, "dropped replica%s %s: dp %d -> %d (world %d -> %d), %s", rs->ndropped == 1 ? "" : "s",
                            drop, rs->old_dp, w->dp, old_world, r->pl->world, bnote);
    if (n < 0)
        *msg = NULL;
    return 0;
}

int p3d_place_shrink(const p3d_opts *o, p3d_plan_result *r, const int *lost, int nlost, int restart, const char *reason,
                     int events_fd, double t0, char **msg)
{
    p3d_elastic e;
    p3d_reshape rs;
    memset(&rs, 0, sizeof rs);
    int rc = -1, old_world = r->pl->world;
    p3d_gpuref *refs = calloc((size_t)nlost + 1, sizeof *refs);
    if (!refs)
        return p3d_err(msg, "out of memory");
    for (int k = 0; k < nlost; k++) {
        refs[k] = (p3d_gpuref){.node = lost[k], .gpu = -1};
        r->cluster->nodes[lost[k]].role = P3D_NODE_LOST;
    }
    const char *pin, *policy = policy_of(o, r, &pin);
    if (p3d_plan_elastic(r, &e, msg) < 0 ||
        p3d_policy_shrink(policy, pin, r->cluster, &r->job, r->pl, &e, refs, (size_t)nlost, &rs, msg) < 0 ||
        adopt(r, &rs, msg) < 0)
        goto out;
    rc = width_record(r, &rs, old_world, restart, 0, reason, events_fd, t0, msg);
out:
    p3d_reshape_free(&rs);
    free(refs);
    return rc;
}

int p3d_place_grow_room(const p3d_plan_result *r)
{
    p3d_elastic e;
    p3d_reshape rs;
    memset(&rs, 0, sizeof rs);
    int now = p3d_mesh_size(&r->pl->mesh, P3D_DIM_DP), room = 0;
    if (r->job.min_dp <= 0 || p3d_plan_elastic(r, &e, NULL) < 0 || now >= e.full_dp)
        return 0;
    if (p3d_grow_plan(r->cluster, r->pl, &e, &rs, NULL) == 0 && rs.pl)
        room = rs.width.dp - now;
    p3d_reshape_free(&rs);
    return room > 0 ? room : 0;
}

int p3d_place_grow(const p3d_opts *o, p3d_plan_result *r, int restart, const char *when, int events_fd, double t0,
                   char **msg)
{
    (void)o;
    p3d_elastic e;
    p3d_reshape rs;
    memset(&rs, 0, sizeof rs);
    int rc = -1, old_world = r->pl->world, now = p3d_mesh_size(&r->pl->mesh, P3D_DIM_DP);
    if (p3d_plan_elastic(r, &e, msg) < 0 || p3d_grow_plan(r->cluster, r->pl, &e, &rs, msg) < 0)
        goto out;
    if (!rs.pl || rs.width.dp <= now) {
        rc = 1;
        if (asprintf(msg, "no whole replica fits on the spares at dp %d", now) < 0)
            *msg = NULL;
        goto out;
    }
    if (adopt(r, &rs, msg) < 0)
        goto out;
    char why[256];
    snprintf(why, sizeof why, "the spares hold %d more replica%s%s%s", rs.width.dp - now,
             rs.width.dp - now == 1 ? "" : "s", when ? ", " : "", when ? when : "");
    rc = width_record(r, &rs, old_world, restart, 1, why, events_fd, t0, msg);
out:
    p3d_reshape_free(&rs);
    return rc;
}

int p3d_place_heal(const p3d_opts *o, p3d_plan_result *res, const int *lost, int nlost, int restart, const char *reason,
                   int events_fd, double t0, int **was, char **msg)
{
    int rc = p3d_replace_place(o, res, lost, nlost, restart, reason, events_fd, t0, was, msg);
    if (rc >= 0 || res->job.min_dp <= 0)
        return rc;
    /* no spare can take them: an elastic job runs on fewer replicas */
    char *first = *msg, *second = NULL;
    *msg = NULL;
    if (p3d_place_shrink(o, res, lost, nlost, restart, reason, events_fd, t0, &second) == 0) {
        free(first);
        *msg = second;
        return 2;
    }
    if (asprintf(msg, "%s; and the job cannot shrink: %s", first ? first : "no spare",
                 second ? second : "out of memory") < 0)
        *msg = NULL;
    free(first);
    free(second);
    return -1;
}
