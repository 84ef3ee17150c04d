/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reshape_grow.c — the grow of an elastic job (p3d/elastic.h): whole
 * replicas on the spare nodes, back towards the full width. A new
 * replica's tensor-parallel groups each sit in one NVLink domain of a
 * spare node and all its nodes in one rack, the rules the policy's first
 * placement followed; the running replicas keep their GPUs and
 * coordinates (appended replicas take the dp indices after theirs).
 */
#include "reshape_internal.h"

#include <stdlib.h>
#include <string.h>

/* A tp-sized group of GPUs in one NVLink domain of a spare node. */
typedef struct slot {
    int node, rack;
    int gpu[64];
} slot;

/* Slots of tp GPUs on spare nodes, in node order (consecutive slots share
 * a node, so a pipeline's neighbouring stages do where they can). A
 * domain smaller than tp gives none. */
static int spare_slots(const p3d_cluster *c, int tp, slot **out, int *n)
{
    int cap = 0, have = 0, members[1024];
    slot *v = NULL;
    *out = NULL, *n = 0;
    if (tp > 64)
        return 0; /* no node's NVLink domain is that large */
    for (size_t i = 0; i < c->nnodes; i++) {
        const p3d_node *t = c->nodes[i].topo;
        if (c->nodes[i].role != P3D_NODE_SPARE || !t)
            continue;
        for (int d = 0; d < t->ndomains; d++) {
            int k = p3d_node_domain_members(t, d, members, 1024);
            for (int g = 0; g + tp <= k; g += tp) {
                if (have == cap) {
                    cap = cap ? cap * 2 : 16;
                    slot *nv = realloc(v, sizeof *v * (size_t)cap);
                    if (!nv) {
                        free(v);
                        return -1;
                    }
                    v = nv;
                }
                v[have].node = (int)i, v[have].rack = c->nodes[i].rack;
                memcpy(v[have].gpu, members + g, sizeof(int) * (size_t)tp);
                have++;
            }
        }
    }
    *out = v, *n = have;
    return 0;
}

/* Takes nu free slots of rack R (marking them used) for one replica: their
 * indices in pick[], or -1 when the rack has fewer left. */
static int take_rack(const slot *v, int n, unsigned char *used, int R, int nu, int *pick)
{
    int k = 0;
    for (int i = 0; i < n && k < nu; i++)
        if (!used[i] && v[i].rack == R)
            pick[k++] = i;
    if (k < nu)
        return -1;
    for (int i = 0; i < nu; i++)
        used[pick[i]] = 1;
    return 0;
}

/* The current ranks at their place in mesh nm (only rank numbers change). */
static void keep_running(const p3d_placement *pl, const p3d_mesh *nm, int *node, int *gpu)
{
    for (int r = 0; r < pl->world; r++) {
        const p3d_rank *k = &pl->ranks[r];
        int nr = rs_rank(nm, k->coord, k->coord[P3D_DIM_DP]);
        node[nr] = k->node;
        gpu[nr] = k->gpu;
    }
}

/* How many replicas the slots hold, rack by rack. */
static int slot_replicas(const p3d_cluster *c, const slot *v, int n, int nu)
{
    int total = 0;
    for (size_t R = 0; R < c->nracks; R++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            k += v[i].rack == (int)R;
        total += k / nu;
    }
    return total;
}

int p3d_grow_plan(const p3d_cluster *c, const p3d_placement *pl, const p3d_elastic *e, p3d_reshape *out, char **err)
{
    int rc = -1, n = 0, *node = NULL, *gpu = NULL, *pick = NULL;
    const p3d_mesh *m = &pl->mesh;
    int cur = p3d_mesh_size(m, P3D_DIM_DP), tp = p3d_mesh_size(m, P3D_DIM_TP);
    int ncp = p3d_mesh_size(m, P3D_DIM_CP), nu = ncp * p3d_mesh_size(m, P3D_DIM_PP);
    slot *v = NULL;
    unsigned char *used = NULL;
    p3d_mesh nm;
    memset(out, 0, sizeof *out);
    out->old_dp = cur;
    if (spare_slots(c, tp, &v, &n) < 0)
        goto oom;
    int most = cur + slot_replicas(c, v, n, nu);
    /* no larger valid width: nothing to grow (the current one stays) */
    if (most <= cur || p3d_width_choose(e, m, most, &out->width) < 0 || out->width.dp <= cur) {
        p3d_width_at(e, m, cur, &out->width);
        rc = 0;
        goto out;
    }
    if (rs_mesh(m, out->width.dp, &nm, err) < 0)
        goto out;
    node = malloc(sizeof *node * (size_t)out->width.world);
    gpu = malloc(sizeof *gpu * (size_t)out->width.world);
    out->from = malloc(sizeof *out->from * (size_t)out->width.dp);
    used = calloc((size_t)n + 1, 1);
    pick = malloc(sizeof *pick * (size_t)nu);
    if (!node || !gpu || !out->from || !used || !pick)
        goto oom;
    keep_running(pl, &nm, node, gpu);
    for (int j = 0; j < cur; j++)
        out->from[j] = j;
    int j = cur;
    for (size_t R = 0; R < c->nracks && j < out->width.dp; R++)
        while (j < out->width.dp && take_rack(v, n, used, (int)R, nu, pick) == 0) {
            for (int u = 0; u < nu; u++) {
                int coord[P3D_NDIMS] = {0};
                coord[P3D_DIM_CP] = u % ncp, coord[P3D_DIM_PP] = u / ncp;
                for (int t = 0; t < tp; t++) {
                    coord[P3D_DIM_TP] = t;
                    int nr = rs_rank(&nm, coord, j);
                    node[nr] = v[pick[u]].node;
                    gpu[nr] = v[pick[u]].gpu[t];
                }
            }
            out->from[j++] = -1;
        }
    if (!(out->pl = rs_build(pl, &nm, node, gpu)))
        goto oom;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "out of memory planning the grow");
out:
    if (rc < 0)
        p3d_reshape_free(out);
    free(v);
    free(used);
    free(pick);
    free(node);
    free(gpu);
    return rc;
}
