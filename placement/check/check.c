/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check.c — p3d_analyze: validates what a policy returned, scores every
 * group's links (check_links.c) and runs the named checks (check_rules.c).
 * docs/checks.md lists every check code.
 */
#include "check_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *order_desc(const p3d_mesh *m, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "order %s with", m->order_str);
    for (int d = 0; d < P3D_NDIMS && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, " %s=%d", p3d_dim_name(d), p3d_mesh_size(m, d));
    return buf;
}

/* The one validator of a placement, whoever made it (the policy runner,
 * tests, a saved plan): the checks and reports index arrays with what it
 * says. */
int p3d_placement_validate(const p3d_cluster *c, const p3d_mesh *mesh, const p3d_placement *pl, const char *who,
                           int partial, char **err)
{
    int rc = -1;
    size_t *first = NULL;
    int *owner = NULL;
    char od[200];
    int world = p3d_mesh_world(mesh);
    if (world <= 0 || pl->world != world)
        return p3d_err(err, "%s: returned %d ranks, the mesh has tp*cp*dp*pp = %d", who, pl->world, world);
    for (int d = 0; d < P3D_NDIMS; d++)
        if (p3d_mesh_size(&pl->mesh, d) != p3d_mesh_size(mesh, d))
            return p3d_err(err, "%s: placement mesh has %s=%d, the job asked for %d", who, p3d_dim_name(d),
                           p3d_mesh_size(&pl->mesh, d), p3d_mesh_size(mesh, d));
    if (strcmp(pl->mesh.order_str, mesh->order_str) != 0)
        return p3d_err(err, "%s: placement mesh has order %s, the job asked for %s", who, pl->mesh.order_str,
                       mesh->order_str);
    first = malloc((c->nnodes + 1) * sizeof *first);
    if (!first) {
        p3d_err(err, "out of memory");
        goto out;
    }
    first[0] = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        first[i + 1] = first[i] + (size_t)(c->nodes[i].topo ? c->nodes[i].topo->ngpus : 0);
    owner = malloc((first[c->nnodes] + 1) * sizeof *owner);
    if (!owner) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (size_t s = 0; s < first[c->nnodes]; s++)
        owner[s] = -1;
    for (int r = 0; r < world; r++) {
        const p3d_rank *rk = &pl->ranks[r];
        if (rk->node < 0 || (size_t)rk->node >= c->nnodes) {
            p3d_err(err, "%s: rank %d: node index %d is not in the cluster (0..%zu)", who, r, rk->node, c->nnodes - 1);
            goto out;
        }
        const p3d_cnode *cn = &c->nodes[rk->node];
        int ng = cn->topo ? cn->topo->ngpus : 0;
        if (rk->gpu < 0 || rk->gpu >= ng) {
            p3d_err(err, "%s: rank %d: GPU %d does not exist on %s (it has %d GPUs, indices 0..%d)", who, r, rk->gpu,
                    cn->name, ng, ng - 1);
            goto out;
        }
        size_t s = first[rk->node] + (size_t)rk->gpu;
        if (owner[s] >= 0) {
            p3d_err(err, "%s: GPU %d of %s is assigned to both rank %d and rank %d", who, rk->gpu, cn->name, owner[s],
                    r);
            goto out;
        }
        owner[s] = r;
        int want[P3D_NDIMS];
        p3d_mesh_coord(mesh, r, want);
        for (int d = 0; d < P3D_NDIMS; d++)
            if (rk->coord[d] != want[d] && !(partial && rk->coord[d] == P3D_COORD_UNSET)) {
                p3d_err(err,
                        "%s: rank %d: %s=%d, but under %s rank %d has %s=%d (rank = sum of coord*stride, "
                        "strides from the order string)",
                        who, r, p3d_dim_name(d), rk->coord[d], order_desc(mesh, od, sizeof od), r, p3d_dim_name(d),
                        want[d]);
                goto out;
            }
    }
    rc = 0;
out:
    free(first);
    free(owner);
    return rc;
}

int p3d_analyze(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis **out, char **err)
{
    int rc = -1;
    p3d_analysis *a = calloc(1, sizeof *a);
    *out = NULL;
    if (!a)
        return p3d_err(err, "out of memory");
    /* resolved copies: etp and edp filled in, what the policy's rules
     * (Megatron's or DeviceMesh's, declared by the policy) refuse refused */
    p3d_job jv = *job;
    p3d_placement pv = *pl;
    jv.mesh.rules = pl->mesh.rules;
    char *who = NULL;
    if (p3d_mesh_resolve(&jv.mesh, err) < 0 || p3d_mesh_resolve(&pv.mesh, err) < 0)
        goto out;
    if (asprintf(&who, "policy %s", pl->policy ? pl->policy : "?") < 0) {
        who = NULL;
        p3d_err(err, "out of memory");
        goto out;
    }
    rc = p3d_placement_validate(c, &jv.mesh, &pv, who, 0, err);
    free(who);
    if (rc < 0)
        goto out;
    rc = -1;
    if (p3d_analysis_links(c, &jv, &pv, a, err) < 0)
        goto out;
    if (p3d_analysis_rules(c, &jv, &pv, a, err) < 0)
        goto out;
    /* Errors first, then warnings, then infos; within one severity the
     * order the rules ran in (a stable insertion sort: qsort is not). */
    for (size_t i = 1; i < a->nchecks; i++) {
        p3d_check k = a->checks[i];
        size_t j = i;
        while (j > 0 && a->checks[j - 1].severity < k.severity) {
            a->checks[j] = a->checks[j - 1];
            j--;
        }
        a->checks[j] = k;
    }
    for (size_t i = 0; i < a->nchecks; i++) {
        if (a->checks[i].severity == P3D_SEV_ERROR)
            a->nerrors++;
        else if (a->checks[i].severity == P3D_SEV_WARNING)
            a->nwarnings++;
    }
    *out = a;
    a = NULL;
    rc = 0;
out:
    p3d_analysis_free(a);
    return rc;
}
