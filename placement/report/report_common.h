/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_common.h — pieces shared by the text and JSON reports (private).
 */
#ifndef P3D_REPORT_COMMON_H
#define P3D_REPORT_COMMON_H

#include "check_internal.h"
#include "strbuf.h"

/* The buffer a streamed report (p3d_report_*_to) writes through: big
 * writes, and the bytes are still in cache when written. */
#define P3D_REPORT_STREAM_BUF ((size_t)1 << 20)

/* Dimensions a report lists: tp, pp, dp always, cp and ep when > 1, in
 * that order. Returns the count written to dims[]. */
int p3d_report_dims(const p3d_mesh *m, int dims[P3D_NDIMS]);

/* "error", "warning", "info". */
const char *p3d_severity_name(p3d_severity s);

/* Which of the nodes a report shows node i as: the first head and the last
 * tail of nnodes (every node when nnodes <= head + tail), numbered in that
 * order; -1 for a node not shown. */
long p3d_report_shown(size_t nnodes, size_t head, size_t tail, size_t i);
/* The rank on each (node, GPU) slot of the nodes shown (p3d_report_shown):
 * *first gets one offset per shown node and one more, *rank_at one entry
 * per slot (-1 when idle); memory for the shown nodes only, whatever the
 * world. Caller frees both. */
int p3d_report_slots(const p3d_cluster *c, const p3d_placement *pl, size_t head, size_t tail, size_t **first,
                     int **rank_at);

/* The cost estimate next to the baseline's, one row per figure (the text
 * report's table; the HTML report shows the same). label heads the
 * policy's column, already escaped for the output. Nothing without a
 * cost. */
void p3d_report_cost_table(p3d_sb *b, const p3d_report_in *in, const char *label);
/* The dry run's serving section (--inference): memory, TTFT, TPOT, tokens/s. */
void p3d_report_infer_table(p3d_sb *b, const p3d_infer_cost *k);

#endif
