/* SPDX-License-Identifier: BSD-3-Clause */
/* launch_fixture.h — a hand-built job for the launch unit tests: nnodes
 * nodes of ngpus GPUs (read "from a file", so nothing is bound), a tp x pp
 * x dp mesh in Megatron's order, rank r on node r / ngpus, GPU r % ngpus in
 * reverse order on odd nodes (so LOCAL_RANK != GPU is exercised). */
#ifndef LAUNCH_FIXTURE_H
#define LAUNCH_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "plan.h"

typedef struct fixture {
    p3d_node topo;
    p3d_cnode cnodes[8];
    p3d_cluster cluster;
    p3d_placement pl;
    p3d_rank ranks[64];
    p3d_gpu gpus[8];
    p3d_nic nics[2];
    p3d_opts o;
    p3d_launch L;
    p3d_jobstate job;
    char *argv[8];
} fixture;

static inline void fixture_init(fixture *f, int nnodes, int ngpus, int tp, int pp, int dp)
{
    memset(f, 0, sizeof *f);
    f->topo.ngpus = ngpus;
    f->topo.gpus = f->gpus;
    f->topo.nnics = 2;
    f->topo.nics = f->nics;
    strcpy(f->nics[0].name, "mlx5_0");
    strcpy(f->nics[1].name, "mlx5_1");
    f->topo.source = "fixture.xml";
    f->topo.source_kind = "hwloc-xml";
    for (int g = 0; g < ngpus; g++) {
        f->gpus[g].index = f->gpus[g].phys = g;
        snprintf(f->gpus[g].pci, sizeof f->gpus[g].pci, "0000:%02x:00.0", 0x10 + g);
        strcpy(f->gpus[g].model, "Fixture GPU");
        f->gpus[g].numa = g * 2 / ngpus;
        f->gpus[g].nearest_nic = g * 2 / ngpus;
    }
    static char names[8][16];
    for (int n = 0; n < nnodes; n++) {
        snprintf(names[n], sizeof names[n], "node%03d", n + 1);
        f->cnodes[n].name = names[n];
        f->cnodes[n].topo = &f->topo;
    }
    f->cluster.nnodes = (size_t)nnodes;
    f->cluster.nodes = f->cnodes;
    p3d_mesh *m = &f->pl.mesh;
    for (int d = 0; d < P3D_NDIMS; d++)
        m->size[d] = 1;
    m->size[P3D_DIM_TP] = tp;
    m->size[P3D_DIM_PP] = pp;
    m->size[P3D_DIM_DP] = dp;
    p3d_mesh_set_order(m, "tp-cp-ep-dp-pp", NULL);
    f->pl.world = tp * pp * dp;
    f->pl.ranks = f->ranks;
    for (int r = 0; r < f->pl.world; r++) {
        p3d_rank *k = &f->ranks[r];
        k->node = r / ngpus;
        k->local_rank = r % ngpus;
        k->gpu = (k->node % 2) ? ngpus - 1 - r % ngpus : r % ngpus;
        p3d_mesh_coord(m, r, k->coord);
    }
    f->o.bind = "none";
    f->o.grace = 10;
    f->o.tag_output = -1;
    f->L.o = &f->o;
    f->L.job = &f->job;
    f->job.cluster = &f->cluster;
    f->job.pl = &f->pl;
    f->job.job_id = "job42";
    f->L.run_dir = "/tmp";
    f->L.placement_path = "/tmp/placement.json";
    f->job.master_addr = "127.0.0.1";
    f->job.master_port = 29500;
}

/* Sets the program to /bin/sh -c SCRIPT. */
static inline void fixture_sh(fixture *f, const char *script)
{
    f->argv[0] = "/bin/sh";
    f->argv[1] = "-c";
    f->argv[2] = (char *)script;
    f->argv[3] = NULL;
    f->o.argv = f->argv;
    f->o.argc = 3;
    f->L.program = "/bin/sh";
}

#endif
