/* mesh.c — rank arithmetic for order strings (Megatron's RankGenerator):
 * rank = sum(coord_i * stride_i), stride_i = product of the sizes listed
 * before dimension i in the order string (fastest-varying first). */
#include "p3d/p3d.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int default_order[P3D_NDIMS] = {P3D_DIM_TP, P3D_DIM_CP, P3D_DIM_EP, P3D_DIM_DP, P3D_DIM_PP};

void p3d_job_init(p3d_job *j)
{
    memset(j, 0, sizeof *j);
    for (int d = 0; d < P3D_NDIMS; d++) {
        j->mesh.size[d] = 1;
        j->mesh.order[d] = default_order[d];
    }
    strcpy(j->mesh.order_str, "tp-cp-ep-dp-pp");
    j->virtual_stages = 1;
    j->dtype_bytes = 2;
    j->recompute = 1;
}

int p3d_mesh_set_order(p3d_mesh *m, const char *order, char **err)
{
    int used[P3D_NDIMS] = {0}, n = 0;
    const char *p = order;
    if (!order || !*order)
        return p3d_err(err, "--order: expected dimensions joined by '-' (e.g. tp-cp-ep-dp-pp), got ''");
    if (strlen(order) >= sizeof m->order_str)
        return p3d_err(err, "--order: '%s' is too long", order);
    while (*p) {
        const char *dash = strchr(p, '-');
        size_t len = dash ? (size_t)(dash - p) : strlen(p);
        int dim = -1;
        for (int d = 0; d < P3D_NDIMS; d++)
            if (len == 2 && strncmp(p, p3d_dim_name(d), 2) == 0)
                dim = d;
        if (dim < 0)
            return p3d_err(err, "--order: unknown dimension '%.*s' in '%s' (expected tp, cp, ep, dp, pp)",
                           (int)len, p, order);
        if (used[dim])
            return p3d_err(err, "--order: dimension '%s' appears twice in '%s'", p3d_dim_name(dim), order);
        used[dim] = 1;
        m->order[n++] = dim;
        if (!dash)
            break;
        p = dash + 1;
        if (!*p)
            return p3d_err(err, "--order: '%s' ends with '-'", order);
    }
    /* Dims left out must have size 1 (checked by p3d_job_resolve_dp once
     * every size is known); append them in default order so the arithmetic
     * stays total. order_str keeps the user's string, as Megatron does. */
    for (int k = 0; k < P3D_NDIMS; k++)
        if (!used[default_order[k]])
            m->order[n++] = default_order[k];
    strcpy(m->order_str, order);
    return 0;
}

int p3d_mesh_world(const p3d_mesh *m)
{
    long long w = 1;
    for (int d = 0; d < P3D_NDIMS; d++)
        w *= m->size[d];
    return w > (1 << 30) ? -1 : (int)w;
}

int p3d_mesh_rank(const p3d_mesh *m, const int coord[P3D_NDIMS])
{
    int r = 0, stride = 1;
    for (int k = 0; k < P3D_NDIMS; k++) {
        int d = m->order[k];
        r += coord[d] * stride;
        stride *= m->size[d];
    }
    return r;
}

void p3d_mesh_coord(const p3d_mesh *m, int rank, int coord[P3D_NDIMS])
{
    for (int k = 0; k < P3D_NDIMS; k++) {
        int d = m->order[k];
        coord[d] = rank % m->size[d];
        rank /= m->size[d];
    }
}

int p3d_group_members(const p3d_mesh *m, int dim, int r, int *out, int cap)
{
    int c[P3D_NDIMS], n = 0;
    p3d_mesh_coord(m, r, c);
    for (int i = 0; i < m->size[dim]; i++) {
        c[dim] = i;
        if (n < cap)
            out[n] = p3d_mesh_rank(m, c);
        n++;
    }
    /* ascending: coordinate order along one dim is rank order (strides > 0) */
    return n;
}

/* Megatron's RankGenerator refuses an order string that leaves out a
 * dimension of size > 1; accepting it would report and export (P3D_ORDER)
 * an order the training script cannot use. Size-1 dims may be left out. */
static int mesh_check_order(const p3d_mesh *m, char **err)
{
    int listed[P3D_NDIMS] = {0};
    char missing[160] = "";
    size_t k = 0;
    for (const char *p = m->order_str; *p;) {
        const char *dash = strchr(p, '-');
        size_t len = dash ? (size_t)(dash - p) : strlen(p);
        for (int d = 0; d < P3D_NDIMS; d++)
            if (len == 2 && strncmp(p, p3d_dim_name(d), 2) == 0)
                listed[d] = 1;
        if (!dash)
            break;
        p = dash + 1;
    }
    for (int d = 0; d < P3D_NDIMS; d++)
        if (!listed[d] && m->size[d] > 1 && k < sizeof missing)
            k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%s (size %d)", k ? ", " : "",
                                  p3d_dim_name(d), m->size[d]);
    if (k)
        return p3d_err(err, "--order %s leaves out %s: Megatron requires every dimension of size > 1 in the "
                            "order string",
                       m->order_str, missing);
    return 0;
}

int p3d_job_resolve_dp(p3d_job *job, size_t gpus, char **err)
{
    p3d_mesh *m = &job->mesh;
    long long other = 1;
    for (int d = 0; d < P3D_NDIMS; d++)
        if (d != P3D_DIM_DP)
            other *= m->size[d];
    if (m->size[P3D_DIM_DP] == 0) {
        if (gpus == 0)
            return p3d_err(err, "no GPUs found (see par3drun topo): give --nproc-per-node N to run N CPU ranks per node");
        if ((long long)gpus % other != 0)
            return p3d_err(err,
                           "mesh does not divide the world: %zu GPUs is not a multiple of tp*cp*ep*pp = %lld "
                           "(tp=%d cp=%d ep=%d pp=%d); choose sizes whose product divides %zu or give --dp",
                           gpus, other, m->size[P3D_DIM_TP], m->size[P3D_DIM_CP], m->size[P3D_DIM_EP],
                           m->size[P3D_DIM_PP], gpus);
        m->size[P3D_DIM_DP] = (int)((long long)gpus / other);
        return mesh_check_order(m, err);
    }
    long long world = other * m->size[P3D_DIM_DP];
    if (world > (long long)gpus)
        return p3d_err(err, "world size tp*cp*ep*dp*pp = %lld is larger than the %zu GPUs available", world, gpus);
    return mesh_check_order(m, err);
}
