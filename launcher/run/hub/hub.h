/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub.h — the public header of launcher/run/hub/: the job controller's
 * transports and its event loop (supervise.c). The hub owns the links to
 * the agents (a socket pair per local agent, the rendezvous channel per
 * remote node), the loop they are read on, the --health-check rounds
 * across nodes (hub_health.c), the successor's gate (hub_gate.c), the
 * start and end lines and status.txt (hub_lines.c, hub_status.c, peers.c)
 * and result.json (result.c); it feeds the controller (ctl/) events and
 * carries out what it answers. Its state is in hub_int.h, for its own
 * files only.
 */
#ifndef P3D_HUB_H
#define P3D_HUB_H

#include "ranks.h"

/* Runs the job controller (controller.h) over nnodes agents: agent i is
 * node nodes[i]; remote (NULL: none) gives agent i's rendezvous
 * channel, or NULL for an agent forked here. Remote channels are taken
 * over (remote[i] set to NULL; the hub frees them). Prints the root cause once; returns the job's exit code. */
int p3d_hub_run(const p3d_launch *L, const int *nodes, int nnodes, struct p3d_chan **remote);

/* One node, or --emulate: every agent is forked here. */
int p3d_launcher_run(const p3d_launch *L, const int *nodes, int nnodes);

/* Leader failover: the successor's hub (supervise.c). me: this node's
 * agent index; leader: the lost leader's; heard: when it was last heard.
 * Every other node rejoins on L->mn->gate; the controller starts in TAKEOVER. */
int p3d_hub_takeover(const p3d_launch *L, const int *nodes, int nnodes, int me, int leader, double heard,
                     const char *why);

#endif
