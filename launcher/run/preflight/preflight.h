/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preflight.h — --preflight and `par3drun preflight` (preflight.c): every
 * node of the job runs p3d-worker --bench-node at once, through the
 * --health-check machinery (health.c), and a node whose figure is more
 * than --slow-factor below the median of the nodes, or whose benchmark
 * fails or outlasts --preflight-timeout, is excluded (docs/launch.md,
 * "Preflight"). The public header of launcher/run/preflight/: it owns the
 * benchmark run, its figures, the verdict and the exclusions
 * (preflight_apply.c), the multi-node parts (preflight_remote.c), and the
 * judge (judge.c) that the controller's slow-node detector uses too.
 */
#ifndef P3D_PREFLIGHT_H
#define P3D_PREFLIGHT_H

#include "plan.h"
#include "ranks.h"

#include <stdio.h>

/* --preflight and `par3drun preflight` (preflight.c, preflight_apply.c):
 * every node of the job runs p3d-worker --bench-node at once; a node more
 * than --slow-factor below the median, or whose benchmark fails or
 * outlasts --preflight-timeout, is excluded (docs/launch.md, "Preflight"). */
/* One node's figures (-1: none) and verdict. */
typedef struct p3d_preflight_node {
    const char *name; /* the caller's */
    int ran;          /* the benchmark ended with its figures */
    int excluded;
    double gflops, mem_gbps, tcp_out_mbps, tcp_in_mbps;
    double p2p_gbps; /* GPUs: the slowest peer link of the fastest class */
    int gpus;        /* GPUs benchmarked; 0: the CPU backend */
    int tcp_cleared; /* both its ring links slow, explained by its slow
                         * neighbours: its TCP figure is not held against it */
    double seconds;
    const char *links; /* what became of the NVLink links (static text) */
    char why[320];     /* excluded: why; "" otherwise */
} p3d_preflight_node;

typedef struct p3d_preflight {
    int n, nexcluded;
    p3d_preflight_node *nodes;
    double median_gflops, median_mem_gbps, median_tcp_mbps; /* -1: none */
    double median_p2p_gbps;                                 /* over the nodes with GPU peer links; -1 none */
    int any_gpu;                                            /* some node benchmarked GPUs (the table's columns) */
    int tcp_judged;                                         /* 3 nodes or more: a slow link's end can be told */
    int judged;                                             /* compute and memory: 3 nodes or more gave them */
    int p2p_judged;                                         /* GPU peer links: 3 nodes or more gave them */
    double slow_factor, timeout, seconds;
    const char *tcp_note; /* no ring ran: why (static text), else NULL */
    int nrun_none;        /* nodes that ran no preflight (multi-node: started
                         * without --preflight): not judged */
} p3d_preflight;

/* Runs the benchmark on names[0..n) (all on this host: --emulate or one
 * node), judges it and fills *pf (freed with p3d_preflight_free, also
 * after a failure). Returns 0, or -1 with *err (the benchmark could not be
 * started at all: p3d-worker not found, no sockets). */
int p3d_preflight_run(const p3d_opts *o, const char *const *names, int n, p3d_preflight *pf, char **err);
void p3d_preflight_free(p3d_preflight *pf);
/* The table `par3drun preflight` prints: one row per node. */
void p3d_preflight_table(const p3d_preflight *pf, FILE *f);
/* The report's "preflight" object (docs/report-json.md), malloc'd; NULL
 * out of memory. */
char *p3d_preflight_json(const p3d_preflight *pf);
/* The nodes --preflight benchmarks: those that hold ranks in r's
 * placement and the spares, in cluster order, as cluster indices and names
 * (both malloc'd, the caller frees them, also after a failure). Returns how
 * many, or -1 with *err (exit 2: more than one node without --emulate). */
int p3d_preflight_nodes(const p3d_opts *o, const p3d_plan_result *r, int **nodes, const char ***names, char **err);
/* --preflight on a placed job (launch, dry run): runs it, writes its
 * events (events_fd < 0: none) and its table (table NULL: none), says
 * which nodes are excluded and moves their ranks to spares in r; *json
 * gets the report's "preflight" object (malloc'd, or NULL). Returns 0, or
 * the exit code with the message printed (2 bad input, 1 a node excluded
 * that no spare can replace, or the preflight could not run). */
int p3d_preflight_apply(const p3d_opts *o, p3d_plan_result *r, int events_fd, double t0, FILE *table, char **json);


/* The parts, for the tests. The figures of one node from its benchmark's
 * output (the last "preflight ..." line, strictly: every word known,
 * every number whole and >= 0): 0, or -1 with why (cap bytes). */
int p3d_preflight_parse(const char *text, p3d_preflight_node *nd, char *why, size_t cap);
/* The same for the line of --bench-tcp-only: tcp_out_mbps and tcp_in_mbps
 * required, compute and memory absent. */
int p3d_preflight_parse_tcp(const char *text, p3d_preflight_node *nd, char *why, size_t cap);
/* The medians over the nodes that ran (ran set), and every such node not
 * yet excluded judged against them (excluded, why, nexcluded). 0, or -1
 * out of memory. */
int p3d_preflight_judge(p3d_preflight *pf);
/* One events.jsonl "preflight" record per node (fd < 0: none). */
void p3d_preflight_events(int events_fd, double t0, const p3d_preflight *pf);
/* What becomes of the NVLink links under these options (static text). */
const char *p3d_preflight_links(const p3d_opts *o);
/* A verdict for n nodes begun: *pf zeroed, its options and medians set,
 * n cleared nodes (every figure -1). 0, or -1 out of memory. */
int p3d_preflight_begin(p3d_preflight *pf, const p3d_opts *o, int n);
/* What became of the links on a node whose figures were parsed: its GPU
 * peer links measured, none to measure, or the CPU backend's (static
 * text). */
const char *p3d_preflight_node_links(const p3d_opts *o, const p3d_preflight_node *nd);
/* Every figure of nd none (-1), the CPU backend. */
void p3d_preflight_node_clear(p3d_preflight_node *nd);

/* Multi-node (preflight_remote.c): this node's own benchmark, before it
 * joins, as the line its gathered record carries: its figures
 * ("preflight gflops=G mem_gbps=M seconds=S") or P3D_PREFLIGHT_FAILED and
 * the reason; printable ASCII, cut to cap bytes. */
extern const char P3D_PREFLIGHT_FAILED[];
void p3d_preflight_own(const p3d_opts *o, const char *name, char *line, size_t cap);
/* Multi-node: this node's part of the TCP ring across the hosts, once the
 * leader named the next node (addr:port): p3d-worker --bench-node
 * --bench-tcp-only streams there while it takes the previous node's stream
 * on lfd (inherited: the caller clears its close-on-exec), bounded by
 * --preflight-timeout. key_fd >= 0: the read end of a pipe that holds the
 * job key (inherited the same way; the caller closes it after): the
 * ring's connections prove the key both ways. 0 with the MB/s out (as the
 * next node measured them) and in, or -1 with why (cap bytes). */
int p3d_preflight_ring(const p3d_opts *o, const char *name, int lfd, int key_fd, const char *addr, int port,
                       double *out_mbps, double *in_mbps, char *why, size_t cap);
/* The read end of a pipe that holds key, inheritable (only the ring's
 * benchmarks run while it is open; the caller closes it after): the key
 * never goes on a command line or into an environment. -1 with errno. */
int p3d_preflight_key_fd(const char *key);
/* The leader: the verdict on the lines the records carried (lines[i] NULL:
 * node i ran none; not judged, counted in nrun_none), node i named
 * names[i] (borrowed). 0, or -1 out of memory; *pf is freed with
 * p3d_preflight_free either way. */
int p3d_preflight_gathered(const p3d_opts *o, const char *const *names, const char *const *lines, int n,
                           p3d_preflight *pf);

/* ---- judge.c: who is slow among peers (the preflight; the controller's
 * slow-node detector too) ---- */
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
/* The fewest nodes a group needs before any of them is judged. */
#define P3D_JUDGE_MIN 3

/* Physical bounds of the figures judged (docs/limits.md): a figure beyond
 * them is refused with the reason, never compared. Generous on purpose:
 * ten times the fastest hardware of 2026 and more. */
#define P3D_JUDGE_BUSY_MAX 1e6    /* seconds of a rank's own work per step */
#define P3D_JUDGE_GFLOPS_MAX 1e8  /* GFLOP/s of one GPU or CPU (100 PFLOP/s) */
#define P3D_JUDGE_GBPS_MAX 1e5    /* GB/s of memory or a GPU peer link */
#define P3D_JUDGE_MBPS_MAX 1e7    /* MB/s of a TCP link (10 TB/s) */
#define P3D_JUDGE_SECONDS_MAX 1e6 /* a benchmark's own seconds */

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
