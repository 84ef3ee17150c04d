/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_launch.c — `par3drun [options] -- PROGRAM`: a multi-node job when a
 * rendezvous is asked for (--rdzv, or PMIx/Slurm in the environment:
 * run/mnode.c), else every node from here (run/launch_local.c). Also the
 * internal `par3drun __agent`, which runs one node of the same job on its
 * own (docs/launch.md). Both paths share one preparation
 * (run/launch_prepare.c); --preflight runs in either (run/preflight*.c).
 */
#include "commands.h"
#include "launch.h"

int p3d_cmd_launch(const p3d_opts *o)
{
    int mrc = p3d_rdzv_launch(o);
    if (mrc >= 0)
        return mrc;
    return p3d_local_launch(o, -1);
}

/* `par3drun __agent --node-rank I [the job's options] -- PROGRAM`: one node
 * of the job, under a job controller of its own (the one-agent case of
 * supervise.c: it decides restarts of this node and prints its root cause). The placement is computed
 * again from the same options — the policies are deterministic on the same
 * input — so several __agents of one job agree without talking. Give them
 * the same --job-id, --run-dir and --master-port. */
int p3d_cmd_agent(const p3d_opts *o)
{
    return p3d_local_launch(o, o->node_rank < 0 ? 0 : o->node_rank);
}
