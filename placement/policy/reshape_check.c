/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reshape_check.c — C's word on a shrink or grow placement, whoever made
 * it (p3d/elastic.h): the geometry is the old one, only the width moved,
 * every rank has a GPU of its own that is not lost, and the placement
 * rules the old placement kept (TP in an NVLink domain, pipelines in a
 * rack) still hold.
 */
#include "reshape_internal.h"

#include <stdlib.h>
#include <string.h>

/* 1 when the group's GPUs share an NVLink domain: one node's domain, or
 * a multi-node domain all their nodes are in. */
static int group_nvlinked(const p3d_cluster *c, const p3d_placement *p, const int *g, int n)
{
    const p3d_rank *a = &p->ranks[g[0]];
    int nvl = c->nodes[a->node].nvl_domain, one = 1;
    for (int i = 1; i < n; i++) {
        const p3d_rank *b = &p->ranks[g[i]];
        const p3d_node *t = c->nodes[b->node].topo;
        if (b->node != a->node || !t || t->gpus[b->gpu].domain != t->gpus[a->gpu].domain)
            one = 0;
        if (c->nodes[b->node].nvl_domain != nvl)
            nvl = -1;
    }
    return one || nvl >= 0;
}

static int group_in_rack(const p3d_cluster *c, const p3d_placement *p, const int *g, int n)
{
    for (int i = 1; i < n; i++)
        if (c->nodes[p->ranks[g[i]].node].rack != c->nodes[p->ranks[g[0]].node].rack)
            return 0;
    return 1;
}

/* The first rank whose dim group breaks the rule (TP: NVLink, PP: rack),
 * or -1; *oom set when out of memory. */
static int first_broken(const p3d_cluster *c, const p3d_placement *p, int dim, int *oom)
{
    int n = p3d_mesh_size(&p->mesh, dim), bad = -1;
    int *g = malloc(sizeof *g * (size_t)n);
    if (!g) {
        *oom = 1;
        return -1;
    }
    for (int r = 0; r < p->world && bad < 0; r++) {
        if (p->ranks[r].coord[dim] != 0)
            continue;
        int k = p3d_group_members(&p->mesh, dim, r, g, n);
        if (dim == P3D_DIM_TP ? !group_nvlinked(c, p, g, k) : !group_in_rack(c, p, g, k))
            bad = r;
    }
    free(g);
    return bad;
}

static int same_geometry(const p3d_placement *old, const p3d_placement *neu, char **err)
{
    static const int dims[] = {P3D_DIM_TP, P3D_DIM_CP, P3D_DIM_PP, P3D_DIM_EP, P3D_DIM_ETP};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (p3d_mesh_size(&old->mesh, dims[i]) != p3d_mesh_size(&neu->mesh, dims[i]))
            return p3d_err(err, "the new placement has %s=%d, the job %s=%d: only dp may change", p3d_dim_name(dims[i]),
                           p3d_mesh_size(&neu->mesh, dims[i]), p3d_dim_name(dims[i]),
                           p3d_mesh_size(&old->mesh, dims[i]));
    if (strcmp(old->mesh.order_str, neu->mesh.order_str))
        return p3d_err(err, "the new placement has order %s, the job %s", neu->mesh.order_str, old->mesh.order_str);
    if (neu->world != p3d_mesh_world(&neu->mesh))
        return p3d_err(err, "the new placement has %d ranks, its mesh %d", neu->world, p3d_mesh_world(&neu->mesh));
    return 0;
}

/* Every rank on its own GPU of a usable node, none lost, coordinates as
 * the mesh gives them. */
static int ranks_sound(const p3d_cluster *c, const p3d_placement *p, const p3d_gpuref *lost, size_t nlost, char **err)
{
    int rc = -1;
    rs_lostmap lm = {0};
    unsigned char *seen = NULL;
    if (rs_lostmap_make(c, lost, nlost, &lm) < 0 || !(seen = calloc(lm.base[c->nnodes] + 1, 1))) {
        p3d_err(err, "out of memory checking the new placement");
        goto out;
    }
    const size_t *base = lm.base;
    for (int r = 0; r < p->world; r++) {
        const p3d_rank *k = &p->ranks[r];
        int coord[P3D_NDIMS];
        if (k->node < 0 || (size_t)k->node >= c->nnodes || k->gpu < 0 ||
            (size_t)k->gpu >= base[k->node + 1] - base[k->node]) {
            p3d_err(err, "rank %d: no GPU %d on node %d", r, k->gpu, k->node);
            goto out;
        }
        const char *nm = c->nodes[k->node].name;
        if (rs_lostmap_has(&lm, k->node, k->gpu)) {
            p3d_err(err, "rank %d: %s GPU %d is lost", r, nm, k->gpu);
            goto out;
        }
        if (c->nodes[k->node].role == P3D_NODE_LOST || c->nodes[k->node].role == P3D_NODE_EXCLUDED) {
            p3d_err(err, "rank %d: node %s is %s", r, nm,
                    c->nodes[k->node].role == P3D_NODE_LOST ? "lost" : "excluded");
            goto out;
        }
        if (seen[base[k->node] + (size_t)k->gpu]++) {
            p3d_err(err, "rank %d: %s GPU %d already runs another rank", r, nm, k->gpu);
            goto out;
        }
        p3d_mesh_coord(&p->mesh, r, coord);
        for (int d = 0; d < P3D_NDIMS; d++)
            if (coord[d] != k->coord[d]) {
                p3d_err(err, "rank %d: %s=%d, the mesh says %d", r, p3d_dim_name(d), k->coord[d], coord[d]);
                goto out;
            }
    }
    rc = 0;
out:
    rs_lostmap_free(&lm);
    free(seen);
    return rc;
}

int p3d_reshape_check(const p3d_cluster *c, const p3d_placement *old, const p3d_placement *neu, const p3d_elastic *e,
                      const p3d_gpuref *lost, size_t nlost, char **err)
{
    int dp = p3d_mesh_size(&neu->mesh, P3D_DIM_DP), oom = 0;
    p3d_width w;
    if (same_geometry(old, neu, err) < 0)
        return -1;
    if (dp < e->min_dp || dp > e->full_dp)
        return p3d_err(err, "the new placement has dp=%d, outside the job's range %d..%d", dp, e->min_dp, e->full_dp);
    p3d_width_at(e, &neu->mesh, dp, &w);
    if (!w.valid)
        return p3d_err(err, "the new placement's width dp=%d is not valid: %s", dp, w.note);
    if (ranks_sound(c, neu, lost, nlost, err) < 0)
        return -1;
    /* a rule the old placement already broke (the hardware left no
     * choice) is no reason to refuse the new one */
    static const int rule[] = {P3D_DIM_TP, P3D_DIM_PP};
    for (int i = 0; i < 2; i++) {
        int bad = first_broken(c, neu, rule[i], &oom);
        if (bad >= 0 && first_broken(c, old, rule[i], &oom) < 0 && !oom)
            return p3d_err(err, "rank %d: its %s group %s, which the job's placement never did", bad,
                           p3d_dim_name(rule[i]), rule[i] == P3D_DIM_TP ? "leaves its NVLink domain" : "spans racks");
        if (oom)
            return p3d_err(err, "out of memory checking the new placement");
    }
    return 0;
}
