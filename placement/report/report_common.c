/* SPDX-License-Identifier: BSD-3-Clause */
/* report_common.c — helpers shared by report_text.c and report_json.c. */
#include "report_common.h"

#include <stdlib.h>

int p3d_report_dims(const p3d_mesh *m, int dims[P3D_NDIMS])
{
    static const int order[P3D_NDIMS] = {P3D_DIM_TP, P3D_DIM_PP,  P3D_DIM_DP, P3D_DIM_CP,
                                         P3D_DIM_EP, P3D_DIM_ETP, P3D_DIM_EDP};
    /* the expert grid's ep, etp, edp whenever it differs from the dense one */
    int expert = p3d_mesh_size(m, P3D_DIM_EP) > 1 || p3d_mesh_size(m, P3D_DIM_ETP) != p3d_mesh_size(m, P3D_DIM_TP);
    int n = 0;
    for (int k = 0; k < P3D_NDIMS; k++)
        if (k < 3 || (order[k] == P3D_DIM_CP ? m->size[order[k]] > 1 : expert))
            dims[n++] = order[k];
    return n;
}

const char *p3d_severity_name(p3d_severity s)
{
    switch (s) {
    case P3D_SEV_ERROR: return "error";
    case P3D_SEV_WARNING: return "warning";
    default: return "info";
    }
}

long p3d_report_shown(size_t nnodes, size_t head, size_t tail, size_t i)
{
    if (nnodes <= head + tail || i < head)
        return (long)i;
    if (i >= nnodes - tail)
        return (long)(head + (i - (nnodes - tail)));
    return -1;
}

int p3d_report_slots(const p3d_cluster *c, const p3d_placement *pl, size_t head, size_t tail, size_t **first,
                     int **rank_at)
{
    size_t ns = c->nnodes <= head + tail ? c->nnodes : head + tail;
    size_t *f = malloc((ns + 1) * sizeof *f);
    int *ra = NULL;
    if (!f)
        return -1;
    f[0] = 0;
    for (size_t i = 0, k = 0; i < c->nnodes; i++)
        if (p3d_report_shown(c->nnodes, head, tail, i) >= 0) {
            f[k + 1] = f[k] + (size_t)c->nodes[i].topo->ngpus;
            k++;
        } else {
            i = c->nnodes - tail - 1; /* the hidden middle: skip it */
        }
    ra = malloc((f[ns] + 1) * sizeof *ra);
    if (!ra) {
        free(f);
        return -1;
    }
    for (size_t s = 0; s < f[ns]; s++)
        ra[s] = -1;
    for (int r = 0; r < pl->world; r++) {
        const p3d_rank *rk = &pl->ranks[r];
        if (rk->node < 0 || (size_t)rk->node >= c->nnodes || rk->gpu < 0 || rk->gpu >= c->nodes[rk->node].topo->ngpus)
            continue;
        long k = p3d_report_shown(c->nnodes, head, tail, (size_t)rk->node);
        if (k >= 0)
            ra[f[k] + (size_t)rk->gpu] = r;
    }
    *first = f;
    *rank_at = ra;
    return 0;
}
