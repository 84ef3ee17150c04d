/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * width.c — the widths an elastic job may run at and the global batch at
 * each (p3d/elastic.h). The batch B is the user's; a replica accumulates
 * m = B / (dp * b) micro-batches of b samples. When dp * b does not divide
 * B, m is rounded to the nearest whole number and the step's batch moves
 * off B: that width is taken only within --batch-tolerance.
 */
#include "p3d/elastic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The mesh accepts dp (the expert grid divides the new world, Megatron's
 * or DeviceMesh's rules as the policy declared). */
static int mesh_takes(const p3d_mesh *m, int dp, char *why, size_t cap)
{
    p3d_mesh t = *m;
    char *err = NULL;
    t.size[P3D_DIM_DP] = dp;
    t.size[P3D_DIM_EDP] = 0;
    int ok = p3d_mesh_resolve(&t, &err) == 0;
    if (!ok)
        snprintf(why, cap, "mesh: %s", err ? err : "refused");
    free(err);
    return ok;
}

void p3d_width_at(const p3d_elastic *e, const p3d_mesh *m, int dp, p3d_width *w)
{
    memset(w, 0, sizeof *w);
    w->dp = dp;
    long long rep =
        (long long)p3d_mesh_size(m, P3D_DIM_TP) * p3d_mesh_size(m, P3D_DIM_CP) * p3d_mesh_size(m, P3D_DIM_PP);
    w->world = rep * dp < (1 << 30) ? (int)(rep * dp) : -1;
    w->b = e->b > 0 ? e->b : 1;
    if (dp < 1 || w->world < 0) {
        snprintf(w->note, sizeof w->note, "dp %d is out of range", dp);
        return;
    }
    if (!mesh_takes(m, dp, w->note, sizeof w->note))
        return;
    if (e->B <= 0) { /* no batch asked: nothing to keep */
        w->exact = w->valid = 1;
        return;
    }
    long long per = (long long)dp * w->b;
    long long lo = e->B / per, m_best = lo;
    /* the nearest whole m (ties: the smaller batch); at least one */
    if (lo < 1 || (e->B - lo * per) * 2 > per)
        m_best = lo + 1;
    w->m = m_best < (1 << 30) ? (int)m_best : (1 << 30);
    long long batch = per * w->m;
    w->batch = batch < (1LL << 31) - 1 ? (int)batch : -1;
    w->exact = batch == e->B;
    w->dev_pct = 100.0 * fabs((double)(batch - e->B)) / e->B;
    if (w->exact) {
        w->valid = 1;
    } else if (w->batch > 0 && w->dev_pct <= e->tol_pct + 1e-9) {
        w->valid = 1;
        snprintf(w->note, sizeof w->note, "batch %d, not %d: %.1f%% off, within --batch-tolerance %g", w->batch, e->B,
                 w->dev_pct, e->tol_pct);
    } else {
        snprintf(w->note, sizeof w->note,
                 "dp %d x micro-batch %d does not divide %d (nearest batch %lld, %.1f%% off%s)", dp, w->b, e->B, batch,
                 w->dev_pct, e->tol_pct > 0 ? ", beyond --batch-tolerance" : "");
    }
}

int p3d_width_choose(const p3d_elastic *e, const p3d_mesh *m, int most, p3d_width *w)
{
    p3d_width t;
    int lo = e->min_dp > 0 ? e->min_dp : 1;
    if (most > e->full_dp)
        most = e->full_dp;
    /* exact first (the batch the user asked for), then the tolerance */
    for (int pass = 0; pass < 2; pass++)
        for (int dp = most; dp >= lo; dp--) {
            p3d_width_at(e, m, dp, &t);
            if (t.valid && (pass || t.exact)) {
                *w = t;
                return 0;
            }
        }
    p3d_width_at(e, m, most, w);
    w->valid = 0;
    return -1;
}

int p3d_elastic_init(const p3d_job *job, int min_dp, double tol_pct, p3d_elastic *e, char **err)
{
    memset(e, 0, sizeof *e);
    e->full_dp = job->mesh.size[P3D_DIM_DP];
    e->min_dp = min_dp > 0 ? min_dp : e->full_dp;
    e->B = job->global_batch;
    e->tol_pct = tol_pct;
    if (e->full_dp < 1)
        return p3d_err(err, "internal: the data-parallel size is not resolved");
    if (e->min_dp > e->full_dp)
        return p3d_err(err,
                       "--min-dp %d is larger than the job's data-parallel size %d (the width it starts at): "
                       "give --min-dp 1..%d",
                       e->min_dp, e->full_dp, e->full_dp);
    e->b = job->micro_batch_size > 0 ? job->micro_batch_size : 1;
    if (job->micro_batch_size <= 0 && e->B > 0 && job->micro_batches > 0) {
        long long per = (long long)e->full_dp * job->micro_batches;
        if (e->B % per)
            return p3d_err(err,
                           "--global-batch %d is not a multiple of dp %d x --micro-batches %d = %lld: no "
                           "micro-batch size follows (give --micro-batch)",
                           e->B, e->full_dp, job->micro_batches, per);
        e->b = (int)(e->B / per);
    }
    p3d_width w;
    p3d_width_at(e, &job->mesh, e->full_dp, &w);
    if (!w.valid)
        return p3d_err(err,
                       "--global-batch %d at the full width dp %d: %s; choose --global-batch as a multiple of "
                       "%lld or raise --batch-tolerance",
                       e->B, e->full_dp, w.note, (long long)e->full_dp * e->b);
    if (e->B > 0 && job->micro_batches > 0 && job->micro_batch_size > 0 && w.m != job->micro_batches)
        return p3d_err(err,
                       "--micro-batches %d disagrees with --global-batch %d / (dp %d x --micro-batch %d) = %d: "
                       "leave --micro-batches out (par3drun derives it at every width)",
                       job->micro_batches, e->B, e->full_dp, e->b, w.m);
    /* a range none of whose smaller widths is valid could never shrink */
    if (e->min_dp < e->full_dp && p3d_width_choose(e, &job->mesh, e->full_dp - 1, &w) < 0)
        return p3d_err(err,
                       "--min-dp %d: no width from %d to %d has a valid batch (%s), so the job could never "
                       "shrink; choose a --global-batch that more widths divide or raise --batch-tolerance",
                       e->min_dp, e->min_dp, e->full_dp - 1, w.note);
    return 0;
}

int p3d_elastic_min_dp_of_nodes(int min_nodes, int nnodes, int full_dp, int *min_dp, char **err)
{
    if (nnodes < 1 || min_nodes < 1 || min_nodes > nnodes)
        return p3d_err(err, "--nnodes %d:%d: MIN must be 1..%d", min_nodes, nnodes, nnodes);
    long long d = (long long)min_nodes * full_dp / nnodes;
    if (d < 1)
        return p3d_err(err,
                       "--nnodes %d:%d: %d node%s of %d hold no whole data-parallel replica of this mesh "
                       "(%d replicas on %d nodes); raise MIN or give --min-dp",
                       min_nodes, nnodes, min_nodes, min_nodes == 1 ? "" : "s", nnodes, full_dp, nnodes);
    *min_dp = (int)d;
    return 0;
}
