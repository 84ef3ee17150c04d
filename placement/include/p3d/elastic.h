/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/elastic.h — the elastic range of a job: the widths it may run at
 * (--min-dp D up to its full data-parallel width), the global batch kept at
 * every width (placement/mesh/width.c), and the placements of a shrink and
 * a grow (placement/policy/reshape*.c). Conventions: see p3d/base.h.
 *
 * A width is a data-parallel size dp'. The tensor, context, pipeline and
 * expert geometry never changes: a width change adds or removes whole
 * data-parallel replicas (tp*cp*pp ranks each).
 */
#ifndef P3D_ELASTIC_H
#define P3D_ELASTIC_H

#include "p3d/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a job asked for: the widths [min_dp, full_dp] and the batch.
 * B 0: no --global-batch (no batch figures, every width is valid as far as
 * the batch goes). b: the micro-batch size every width keeps. */
typedef struct p3d_elastic {
    int full_dp;    /* the width the job starts at (--dp, or what is left) */
    int min_dp;     /* D: the job stops below it (full_dp when not elastic) */
    int B;          /* --global-batch, 0 none */
    int b;          /* --micro-batch (or derived at full width), >= 1 */
    double tol_pct; /* --batch-tolerance: |batch - B| / B at most this, in % */
} p3d_elastic;

/* One width and its batch: each replica accumulates m micro-batches of b
 * samples, so one step takes batch = dp * b * m samples; exact when that
 * is B. valid: the mesh (its expert grid) takes this dp and the batch is
 * exact or within the tolerance. note says why not, or how far off. */
typedef struct p3d_width {
    int dp, world;
    int b, m, batch;
    int exact, valid;
    double dev_pct; /* 100 * |batch - B| / B */
    char note[160];
} p3d_width;

/* Fills *e from the job's figures: full_dp from job->mesh (resolved),
 * min_dp from min_dp (0: full width, not elastic); b from --micro-batch,
 * else B / (full_dp * --micro-batches) when both are given, else 1.
 * Fails (bad input) when min_dp > full_dp, when b cannot be derived, or
 * when the full width itself has no valid batch (a job refused before it
 * starts), naming the figures. */
int p3d_elastic_init(const p3d_job *job, int min_dp, double tol_pct, p3d_elastic *e, char **err);

/* The figures of width dp under e and the mesh m (its tp, cp, pp, ep, etp
 * and rules; its dp is ignored). Never fails: w->valid says. */
void p3d_width_at(const p3d_elastic *e, const p3d_mesh *m, int dp, p3d_width *w);

/* The width to run at when at most `most` replicas fit: the largest dp' in
 * [min_dp, most] whose batch is exact, else the largest within the
 * tolerance (its note says so). 0 with *w, or -1 when no width fits (w
 * then holds the figures of `most`, with its note). */
int p3d_width_choose(const p3d_elastic *e, const p3d_mesh *m, int most, p3d_width *w);

/* --nnodes MIN:MAX for a job of full_dp replicas on nnodes nodes: the
 * replicas MIN nodes hold, floor(MIN * full_dp / nnodes). Fails when that
 * is 0 (MIN nodes cannot hold one whole replica). */
int p3d_elastic_min_dp_of_nodes(int min_nodes, int nnodes, int full_dp, int *min_dp, char **err);

/* ------------------------------------------------------------------------ */
/* Shrink and grow (placement/policy/reshape.c)                              */
/* ------------------------------------------------------------------------ */

/* A lost GPU, or a whole node with gpu -1 (cluster node index). */
typedef struct p3d_gpuref {
    int node, gpu;
} p3d_gpuref;

/* A new placement at another width and how it came from the old one. */
typedef struct p3d_reshape {
    p3d_placement *pl; /* the new placement, owned (p3d_reshape_free) */
    p3d_width width;   /* its width and batch */
    int old_dp;
    int *from;    /* [width.dp]: the old dp index each new replica kept,
                           -1 for a replica assembled from pieces or new */
    int ndropped; /* old replicas that no longer run */
    int *dropped; /* [ndropped] their old dp indices */
    int moved;    /* surviving GPUs whose (tp, cp, pp) changed (0 when
                           every one kept its coordinates) */
} p3d_reshape;

void p3d_reshape_free(p3d_reshape *r);

/* Shrink: the largest valid width >= e->min_dp the placement's surviving
 * GPUs can hold (lost[0..nlost) gone): whole replicas whose GPUs all
 * survive keep their GPUs and (tp, cp, pp) coordinates (lowest old dp index
 * first, only the dp index renumbers; with experts whole expert-grid blocks
 * of replicas first, which keeps their ep coordinates too); replicas that lost GPUs give their
 * intact tensor-parallel groups to assemble further replicas, each within
 * one rack (pipelines stay rack-local, TP groups stay where they were, in
 * their NVLink domain). 0 with *out (caller frees with p3d_reshape_free),
 * or -1 with *err naming D, the replicas left and what was lost. */
int p3d_shrink_plan(const p3d_cluster *c, const p3d_placement *pl, const p3d_elastic *e, const p3d_gpuref *lost,
                    size_t nlost, p3d_reshape *out, char **err);

/* Grow: the running placement (below e->full_dp) plus whole replicas on the
 * nodes whose role is P3D_NODE_SPARE: each new replica's TP groups inside
 * one NVLink domain of a spare node, all of a replica's nodes in one rack;
 * the largest valid width up to full_dp. 0 with *out (out->width.dp ==
 * the current dp when no replica fits: nothing to do), -1 with *err on a
 * bad input. Spare nodes the grow uses are left for the caller to mark. */
int p3d_grow_plan(const p3d_cluster *c, const p3d_placement *pl, const p3d_elastic *e, p3d_reshape *out, char **err);

/* A shrink the policy may decide (placement/policy/policy_shrink.c,
 * docs/policies.md "Shrinking"): p3d_shrink_plan's width and default
 * choice, then, when the policy (a bundled name, path or URL; NULL: none)
 * returns a shrink(cluster, job, s) hook, the whole surviving replicas it
 * names in their new dp order instead; either way p3d_reshape_check must
 * pass. 0 with *out (caller frees with p3d_reshape_free), or -1 with *err
 * (below D; the hook failed or returned something invalid, named). */
int p3d_policy_shrink(const char *policy, const char *sha256_pin, const p3d_cluster *c, const p3d_job *job,
                      const p3d_placement *pl, const p3d_elastic *e, const p3d_gpuref *lost, size_t nlost,
                      p3d_reshape *out, char **err);

/* Checks a reshaped placement (the default one, or a policy's) against the
 * one it replaces: the same tp/cp/pp/ep/etp and order, dp within
 * [min_dp, full_dp] and valid, a bijection of ranks onto distinct GPUs none
 * of which is lost, every TP group within one NVLink domain (a node's, or a
 * multi-node domain) unless it already crossed one before, every pipeline
 * within one rack unless it already crossed racks. 0, or -1 with *err
 * naming the rank and the rule. */
int p3d_reshape_check(const p3d_cluster *c, const p3d_placement *old, const p3d_placement *neu, const p3d_elastic *e,
                      const p3d_gpuref *lost, size_t nlost, char **err);

/* The widths of --dry-run --min-dp (placement/report/report_widths.c):
 * from the full width down to job->min_dp, each width's world, micro-
 * batches, batch and note, and with a model the estimated step time of
 * the placement pl keeps at that width (its highest replicas dropped).
 * *text: a table for people; *json: the report's "elastic" object
 * (docs/report-json.md). 0 (caller frees both), or -1 with *err. */
int p3d_widths_report(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, char **text, char **json,
                      char **err);

#ifdef __cplusplus
}
#endif
#endif
