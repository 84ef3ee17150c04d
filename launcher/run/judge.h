/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * judge.h — the arithmetic of judging one node against the nodes that do
 * the same work (judge.c): slow-node detection (controller_slow.c) and the
 * preflight (preflight.c). Pure functions, no state. run/ internal.
 *
 * The figures come from the nodes themselves (progress files any rank
 * writes, benchmark lines a peer sends), so one node must not be able to
 * move the reference the others are judged by: the reference is the median
 * of the whole group, the judged node in it, and there is none with fewer
 * than P3D_JUDGE_MIN nodes (with two, a median is their mean, and either
 * could be the odd one). For an even count the middle value on the
 * lenient side is taken, never a mean of the two.
 */
#ifndef P3D_JUDGE_H
#define P3D_JUDGE_H

/* The fewest nodes a group needs before any of them is judged. */
#define P3D_JUDGE_MIN 3

/* Physical bounds of the figures judged (docs/limits.md): a figure beyond
 * them is refused with the reason, never compared. Generous on purpose:
 * ten times the fastest hardware of 2026 and more. */
#define P3D_JUDGE_BUSY_MAX 1e6     /* seconds of a rank's own work per step */
#define P3D_JUDGE_GFLOPS_MAX 1e8   /* GFLOP/s of one GPU or CPU (100 PFLOP/s) */
#define P3D_JUDGE_GBPS_MAX 1e5     /* GB/s of memory or a GPU peer link */
#define P3D_JUDGE_MBPS_MAX 1e7     /* MB/s of a TCP link (10 TB/s) */
#define P3D_JUDGE_SECONDS_MAX 1e6  /* a benchmark's own seconds */

/* The index of the reference in n values sorted ascending, or -1 when
 * n < P3D_JUDGE_MIN (cannot judge). high_bad: a high value is the bad one
 * (busy time), so an even count takes the upper middle; otherwise (a
 * bandwidth, a rate) the lower middle. */
int p3d_judge_pick(int n, int high_bad);

/* The reference of v[0..n) (sorted in place) as above, in *ref: 0, or -1
 * (cannot judge; *ref is the plain median then, for display, or -1 when
 * n is 0). */
int p3d_judge_ref(double *v, int n, int high_bad, double *ref);

#endif
