/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_widths.c — the widths an elastic job could run at (--dry-run
 * --min-dp D; p3d/elastic.h): per width dp' the world, the micro-batches
 * each replica accumulates, the step's batch, and with a model the
 * estimated step time of the placement it would have after dropping its
 * highest replicas (the cost model on that placement, as for the job).
 */
#include "p3d/p3d.h"
#include "strbuf.h"

#include <stdlib.h>
#include <string.h>

/* The placement of the first dp replicas of pl (the others lost) and its
 * step time estimate; 0 when there is none (no model, or it failed). */
static double step_at(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, const p3d_elastic *e,
                      const p3d_width *w)
{
    double t = 0;
    if (!job->has_model || job->inference)
        return 0;
    p3d_gpuref *lost = malloc(sizeof *lost * (size_t)pl->world);
    p3d_reshape r = {0};
    p3d_analysis *an = NULL;
    size_t n = 0;
    if (!lost)
        return 0;
    for (int q = 0; q < pl->world; q++)
        if (pl->ranks[q].coord[P3D_DIM_DP] >= w->dp)
            lost[n++] = (p3d_gpuref){pl->ranks[q].node, pl->ranks[q].gpu};
    p3d_elastic only = *e;
    only.min_dp = w->dp; /* this width and no other */
    if (p3d_shrink_plan(c, pl, &only, lost, n, &r, NULL) == 0) {
        p3d_job j = *job;
        j.mesh = r.pl->mesh;
        j.micro_batch_size = w->b;
        j.micro_batches = w->m > 0 ? w->m : job->micro_batches;
        j.global_batch = w->m > 0 ? w->batch : 0;
        if (p3d_analyze(c, &j, r.pl, &an, NULL) == 0 && an->has_cost)
            t = an->cost.step_time;
    }
    p3d_analysis_free(an);
    p3d_reshape_free(&r);
    free(lost);
    return t;
}

static void text_row(p3d_sb *t, const p3d_width *w, double step)
{
    p3d_sb_printf(t, "  %6d %7d ", w->dp, w->world);
    if (!w->valid) {
        p3d_sb_printf(t, "%13s %7s %10s  %s\n", "-", "-", "-", w->note);
        return;
    }
    if (w->m > 0)
        p3d_sb_printf(t, "%13d %7d ", w->m, w->batch);
    else
        p3d_sb_printf(t, "%13s %7s ", "-", "-");
    if (step > 0)
        p3d_sb_printf(t, "%8.3f s", step);
    else
        p3d_sb_printf(t, "%10s", "-");
    p3d_sb_printf(t, "%s%s\n", w->note[0] ? "  " : "", w->note);
}

static void json_row(p3d_sb *j, const p3d_width *w, double step, int first)
{
    p3d_sb_printf(j, "%s\n    {\"dp\": %d, \"world\": %d, \"valid\": %s, \"exact\": %s, ", first ? "" : ",", w->dp,
                  w->world, w->valid ? "true" : "false", w->exact ? "true" : "false");
    p3d_sb_printf(j, "\"micro_batch\": %d, \"micro_batches\": %d, \"batch\": %d, \"step_time\": ", w->b, w->m,
                  w->valid ? w->batch : 0);
    if (step > 0)
        p3d_sb_json_num(j, step);
    else
        p3d_sb_puts(j, "null");
    p3d_sb_puts(j, ", \"note\": ");
    p3d_sb_json_str(j, w->note);
    p3d_sb_putc(j, '}');
}

int p3d_widths_report(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, char **text, char **json,
                      char **err)
{
    p3d_elastic e;
    p3d_sb t = {0}, j = {0};
    *text = *json = NULL;
    if (p3d_elastic_init(job, job->min_dp, job->batch_tol_pct, &e, err) < 0)
        return -1;
    p3d_sb_printf(&t, "Elastic widths (--min-dp %d of dp %d", e.min_dp, e.full_dp);
    if (e.B > 0)
        p3d_sb_printf(&t, "; global batch %d, micro-batch %d, tolerance %g%%", e.B, e.b, e.tol_pct);
    p3d_sb_printf(&t, "):\n  %6s %7s %13s %7s %10s  %s\n", "dp", "world", "micro-batches", "batch", "step", "note");
    p3d_sb_printf(&j,
                  "{\"full_dp\": %d, \"min_dp\": %d, \"global_batch\": %d, \"micro_batch\": %d, "
                  "\"batch_tolerance\": ",
                  e.full_dp, e.min_dp, e.B, e.b);
    p3d_sb_json_num(&j, e.tol_pct);
    p3d_sb_puts(&j, ", \"widths\": [");
    for (int dp = e.full_dp; dp >= e.min_dp; dp--) {
        p3d_width w;
        p3d_width_at(&e, &pl->mesh, dp, &w);
        double step = w.valid ? step_at(c, job, pl, &e, &w) : 0;
        text_row(&t, &w, step);
        json_row(&j, &w, step, dp == e.full_dp);
    }
    p3d_sb_puts(&j, "\n  ]}");
    *text = p3d_sb_finish(&t);
    *json = p3d_sb_finish(&j);
    if (!*text || !*json) {
        P3D_FREE(text);
        P3D_FREE(json);
        return p3d_err(err, "out of memory writing the widths");
    }
    return 0;
}
