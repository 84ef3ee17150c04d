/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch.h — the public header of launcher/run/, the top of the run
 * stages: the two launch paths, which cmd/ calls. A job run from here
 * (launch_local.c: one node, or --emulate) and a multi-node job
 * (mnode.c, mnode_place.c, mnode_failover.c, mnode_preflight.c: the
 * rendezvous, the placement every node holds, the leader's succession,
 * the preflight across nodes; takeover.c: a successor's plan), with what
 * both prepare first (launch_prepare.c, prepare.h: program, environment,
 * run directory). The rest of run/ is in stages below, each a folder
 * with one public header (docs/architecture.md):
 *
 *   rundir/    the run directory (rundir.h)
 *   store/     the agent store, torch's TCPStore (tcpstore.h)
 *   ranks/     a node's rank processes: spawn, bind, environment, output,
 *              hangs, progress, stop, --health-check (ranks.h)
 *   preflight/ the node benchmarks and who is slow (preflight.h)
 *   ctl/       the job controller: the job's fate as a table (controller.h)
 *   agent/     a node's agent, its link to the hub, the relay (agent.h)
 *   hub/       the controller's transports and event loop (hub.h)
 *
 * and launcher/plan/ (plan.h), the placement pipeline of --dry-run and
 * launch, below them all.
 *
 * Process tree (why two levels: a supervisor must outlive a SIGKILLed
 * par3drun to kill the workers' grandchildren):
 *
 *   par3drun (launcher: places, writes the placement JSON, subreaper)
 *     └─ agent, one per node (node index + the placement, in memory after
 *        fork; subreaper; PR_SET_PDEATHSIG=SIGTERM so it tears down when
 *        the launcher dies)
 *          └─ worker, one per local rank (own process group,
 *             PR_SET_PDEATHSIG=SIGKILL)
 */
#ifndef P3D_LAUNCH_H
#define P3D_LAUNCH_H

#include "opts.h"

/* ---- launch_local.c, mnode.c: the two launch paths ----------------------- */

/* A job run from here (launch_local.c): node < 0: every node that holds
 * ranks or is a spare (one node, or --emulate); node >= 0: only that one
 * (`par3drun __agent --node-rank`). Prints what went wrong; returns the
 * job's exit code. */
int p3d_local_launch(const p3d_opts *o, int node);
/* A multi-node job when a rendezvous is asked for (mnode.c): the job's
 * exit code, or -1 when there is no rendezvous (p3d_local_launch then). */
int p3d_rdzv_launch(const p3d_opts *o);

#endif
