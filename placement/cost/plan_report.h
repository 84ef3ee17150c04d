/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan_report.h — what the plan's text report (plan_report.c) and its JSON
 * (plan_report_json.c) share; private to placement/cost.
 */
#ifndef P3D_PLAN_REPORT_H
#define P3D_PLAN_REPORT_H

#include "p3d/p3d.h"
#include "strbuf.h"

/* The best variant of each (tp, pp, dp, cp, ep, etp) shape, in rank order
 * (rows are sorted fastest first, so a shape's first row is its best), at
 * most top of them. Returns a malloc'd index array the caller frees, *n its
 * length; NULL when out of memory. */
size_t *p3d_plan_pick_shapes(const p3d_plan *pl, int top, size_t *n);

/* Appends one "why" sentence for row r against the best row to b. */
void p3d_plan_why(p3d_sb *b, const p3d_plan_row *r, const p3d_plan_row *best, int is_best);

/* par3drun's own dry-run line for row r (plan_report.c). */
void p3d_plan_run_line(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *r);
/* The model in Megatron-LM's argument names (par3drun takes them too). */
void p3d_model_megatron_args(p3d_sb *b, const p3d_model *m);
/* Row r as Megatron-LM's pretrain_gpt.py arguments, and as torchtitan's
 * options (plan_runlines.c, docs/plan.md "Run lines"). */
void p3d_plan_megatron_line(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *r);
void p3d_plan_torchtitan_line(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *r);

/* Why row best's micro-batch size wins: the same layout with half and
 * twice the micro-batch (step time, GEMM efficiency, bubble, activations),
 * or that they do not fit. One clause list, no newline. */
void p3d_plan_micro_batch_note(p3d_sb *b, const p3d_plan *pl, const p3d_plan_row *best);
/* Uneven stages: the split of layers (Megatron's --decoder-first/last-
 * pipeline-num-layers) that makes row best's slowest stage (the last runs
 * the output layer) fastest, then its fullest stage (the first holds the
 * embedding and the most micro-batches) lightest, among splits that fit;
 * the seconds per step it saves and the fullest stage's memory before and
 * after. 1 when it saves 0.5% of the step, or 2% of the memory without
 * costing time. */
typedef struct p3d_plan_split {
    int first, last;         /* Megatron's --decoder-first/last-pipeline-num-layers, 0 = not given */
    double saves;            /* seconds per step */
    double mem_now, mem_new; /* the fullest stage's memory per GPU, bytes */
} p3d_plan_split;
int p3d_plan_uneven(const p3d_plan *pl, const p3d_plan_row *best, p3d_plan_split *out);

/* Fills pl's cluster-shape fields (nodes, GPUs per node, NVLink domain)
 * as the search does (plan.c). */
int p3d_plan_cluster_shape(const p3d_cluster *c, p3d_plan *pl, char **err);

#endif
