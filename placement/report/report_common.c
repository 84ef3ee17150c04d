/* SPDX-License-Identifier: BSD-3-Clause */
/* report_common.c — helpers shared by report_text.c and report_json.c. */
#include "report_common.h"

#include <stdlib.h>

int p3d_report_dims(const p3d_mesh *m, int dims[P3D_NDIMS])
{
    static const int order[P3D_NDIMS] = {P3D_DIM_TP, P3D_DIM_PP, P3D_DIM_DP, P3D_DIM_CP, P3D_DIM_EP,
                                         P3D_DIM_ETP, P3D_DIM_EDP};
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

int p3d_report_slots(const p3d_cluster *c, const p3d_placement *pl, size_t **first, int **rank_at)
{
    size_t *f = malloc((c->nnodes + 1) * sizeof *f);
    int *ra = NULL;
    if (!f)
        return -1;
    f[0] = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        f[i + 1] = f[i] + (size_t)c->nodes[i].topo->ngpus;
    ra = malloc((f[c->nnodes] + 1) * sizeof *ra);
    if (!ra) {
        free(f);
        return -1;
    }
    for (size_t s = 0; s < f[c->nnodes]; s++)
        ra[s] = -1;
    for (int r = 0; r < pl->world; r++) {
        const p3d_rank *rk = &pl->ranks[r];
        if (rk->node >= 0 && (size_t)rk->node < c->nnodes && rk->gpu >= 0 &&
            rk->gpu < c->nodes[rk->node].topo->ngpus)
            ra[f[rk->node] + (size_t)rk->gpu] = r;
    }
    *first = f;
    *rank_at = ra;
    return 0;
}
