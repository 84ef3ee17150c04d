/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_placement.c — what every policy run shares, the bundled naive one
 * in C (policy_naive.c) and the Lua ones (policy_run.c): the mesh and its
 * world checked against the cluster before placing, and the placement
 * freed after. Below both: it calls neither.
 */
#include "policy_internal.h"

#include <stdlib.h>

int p3d_policy_sizes(const p3d_cluster *c, const p3d_job *job, p3d_mesh *mesh, int *world, char **err)
{
    *mesh = job->mesh;
    for (int d = 0; d < P3D_NORDER; d++)
        if (mesh->size[d] < 1)
            return p3d_err(err, "mesh: %s=%d, expected >= 1 (resolve dp before placing)", p3d_dim_name(d),
                           mesh->size[d]);
    if (p3d_mesh_derive(mesh, err) < 0)
        return -1;
    *world = p3d_mesh_world(mesh);
    if (!c || c->nnodes == 0)
        return p3d_err(err, "the cluster has no nodes");
    size_t total = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        total += c->nodes[i].topo ? (size_t)c->nodes[i].topo->ngpus : 0;
    if ((size_t)*world > total)
        return p3d_err(err, "world size %d (tp*cp*dp*pp) is larger than the %zu GPUs of the cluster", *world, total);
    return 0;
}

void p3d_placement_free(p3d_placement *p)
{
    if (!p)
        return;
    free(p->ranks);
    free(p->policy);
    free(p->policy_source);
    p3d_strv_free(p->notes, p->nnotes);
    free(p);
}
