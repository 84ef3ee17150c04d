/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_naive.c — the naive baseline computed, not placed. The bundled
 * naive.lua gives rank r the r-th GPU of the host list (nodes in list
 * order, GPUs in PCI order): the placement follows from the rank order
 * alone. Every report compares against it, so at 1M GPUs running it in
 * the sandbox was a second whole policy run; above P3D_NAIVE_COMPUTED_MIN
 * ranks (docs/policies.md, "The naive baseline") the same placement is
 * computed here. tests/integration/naive_computed.sh diffs both ways.
 */
#include "policy_internal.h"
#include "decimal.h"
#include "termsafe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int p3d_naive_computed_min(long long *min, char **err)
{
    unsigned long long v;
    int k = p3d_env_decimal("P3D_NAIVE_COMPUTED_MIN", 1ULL << 40, &v);
    if (k < 0)
        return p3d_err(err,
                       "P3D_NAIVE_COMPUTED_MIN: expected a number of ranks (0 always computes the naive "
                       "baseline, a number above the world never), got '%s'",
                       p3d_tesc(getenv("P3D_NAIVE_COMPUTED_MIN")));
    *min = k > 0 ? (long long)v : P3D_NAIVE_COMPUTED_MIN;
    return 0;
}

int p3d_naive_is_bundled(const char *source)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lua/naive.lua", p3d_data_dir());
    return source && strcmp(source, path) == 0;
}

int p3d_naive_compute(const p3d_cluster *c, const p3d_job *job, const char *source, p3d_placement **out, char **err)
{
    int rc = -1;
    int *count = NULL;
    p3d_placement *pl = NULL;
    *out = NULL;
    /* the same refusals, in the same order, as p3d_policy_run_text */
    p3d_mesh mesh;
    int world;
    if (p3d_policy_sizes(c, job, &mesh, &world, err) < 0)
        return -1;
    /* naive.lua declares follows = "megatron": Megatron-LM's rules */
    mesh.rules = P3D_RULES_MEGATRON;
    if (p3d_mesh_resolve(&mesh, err) < 0)
        goto out;
    pl = calloc(1, sizeof *pl);
    count = calloc(c->nnodes, sizeof *count);
    if (!pl || !count || !(pl->ranks = calloc((size_t)world, sizeof *pl->ranks))) {
        p3d_err(err, "out of memory");
        goto out;
    }
    pl->world = world;
    pl->mesh = mesh;
    pl->policy = strdup("naive");
    pl->policy_source = strdup(source ? source : "naive.lua");
    if (!pl->policy || !pl->policy_source) {
        p3d_err(err, "out of memory");
        goto out;
    }
    int r = 0;
    for (size_t i = 0; i < c->nnodes && r < world; i++) {
        int n = c->nodes[i].topo ? c->nodes[i].topo->ngpus : 0;
        for (int g = 0; g < n && r < world; g++, r++) {
            p3d_rank *R = &pl->ranks[r];
            R->node = (int)i;
            R->gpu = g;
            R->local_rank = count[i]++;
            p3d_mesh_coord(&mesh, r, R->coord);
        }
    }
    *out = pl;
    pl = NULL;
    rc = 0;
out:
    free(count);
    p3d_placement_free(pl);
    return rc;
}
