/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preflight.h — --preflight and `par3drun preflight` (preflight.c): every
 * node of the job runs p3d-worker --bench-node at once, through the
 * --health-check machinery (health.c), and a node whose figure is more
 * than --slow-factor below the median of the nodes, or whose benchmark
 * fails or outlasts --preflight-timeout, is excluded (docs/launch.md,
 * "Preflight"). run/ internal: what the commands use is in launch.h.
 */
#ifndef P3D_PREFLIGHT_H
#define P3D_PREFLIGHT_H

#include "launch.h"

#include <stdio.h>

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

#endif
