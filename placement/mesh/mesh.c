/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh.c — rank arithmetic for order strings, as Megatron-LM's RankGenerator
 * and initialize_model_parallel do it. One order string, two grids (p3d/job.h):
 * the dense grid tp*cp*dp*pp and the expert grid etp*ep*edp*pp. In each,
 * rank = sum(coord_i * stride_i), stride_i = product of the grid's sizes
 * listed before dimension i in the order string (fastest-varying first).
 * The Lua helper module reaches this file through lua_par3d.c. */
#include "p3d/p3d.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int default_order[P3D_NORDER] = {P3D_DIM_TP, P3D_DIM_CP, P3D_DIM_EP, P3D_DIM_DP, P3D_DIM_PP};

void p3d_job_init(p3d_job *j)
{
    memset(j, 0, sizeof *j);
    for (int d = 0; d < P3D_NDIMS; d++)
        j->mesh.size[d] = 1;
    j->mesh.size[P3D_DIM_ETP] = 0; /* same as tp */
    j->mesh.size[P3D_DIM_EDP] = 0; /* derived */
    for (int k = 0; k < P3D_NORDER; k++)
        j->mesh.order[k] = default_order[k];
    j->mesh.order[P3D_NORDER] = P3D_DIM_ETP;
    j->mesh.order[P3D_NORDER + 1] = P3D_DIM_EDP;
    strcpy(j->mesh.order_str, "tp-cp-ep-dp-pp");
    j->virtual_stages = 1;
    j->dtype_bytes = 2;
    j->recompute = 1;
}

int p3d_mesh_set_order(p3d_mesh *m, const char *order, char **err)
{
    int used[P3D_NDIMS] = {0}, n = 0;
    char low[sizeof m->order_str];
    if (!order || !*order)
        return p3d_err(err, "--order: expected dimensions joined by '-' (e.g. tp-cp-ep-dp-pp), got ''");
    if (strlen(order) >= sizeof low)
        return p3d_err(err, "--order: '%s' is too long", order);
    /* Megatron lower-cases the order string before reading it */
    for (size_t i = 0; i <= strlen(order); i++)
        low[i] = (char)tolower((unsigned char)order[i]);
    const char *p = low;
    while (*p) {
        const char *dash = strchr(p, '-');
        size_t len = dash ? (size_t)(dash - p) : strlen(p);
        int dim = -1;
        for (int k = 0; k < P3D_NORDER; k++)
            if (len == 2 && strncmp(p, p3d_dim_name(default_order[k]), 2) == 0)
                dim = default_order[k];
        if (dim < 0)
            return p3d_err(err, "--order: unknown dimension '%.*s' in '%s' (expected tp, cp, ep, dp, pp)", (int)len,
                           order + (p - low), order);
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
    /* Dims left out must have size 1 (p3d_mesh_resolve checks once every
     * size is known); append them in default order so the arithmetic stays
     * total. order_str keeps the string as given, lower-cased. */
    for (int k = 0; k < P3D_NORDER; k++)
        if (!used[default_order[k]])
            m->order[n++] = default_order[k];
    m->order[P3D_NORDER] = P3D_DIM_ETP;
    m->order[P3D_NORDER + 1] = P3D_DIM_EDP;
    strcpy(m->order_str, low);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The two grids                                                           */
/* ---------------------------------------------------------------------- */

static int pos(int v)
{
    return v >= 1 ? v : 1;
}

static long long dense_world(const p3d_mesh *m)
{
    return (long long)pos(m->size[P3D_DIM_TP]) * pos(m->size[P3D_DIM_CP]) * pos(m->size[P3D_DIM_DP]) *
           pos(m->size[P3D_DIM_PP]);
}

/* Every size, etp and edp derived as p3d_mesh_resolve would. */
static void eff_sizes(const p3d_mesh *m, int s[P3D_NDIMS])
{
    for (int d = 0; d < P3D_NDIMS; d++)
        s[d] = pos(m->size[d]);
    if (m->size[P3D_DIM_ETP] < 1)
        s[P3D_DIM_ETP] = s[P3D_DIM_TP];
    long long den = (long long)s[P3D_DIM_ETP] * s[P3D_DIM_EP] * s[P3D_DIM_PP];
    long long w = dense_world(m);
    s[P3D_DIM_EDP] = w >= den && w / den < (1 << 30) ? (int)(w / den) : 1;
}

/* The size a token of the order string has in each grid. */
static int dense_size(const int s[P3D_NDIMS], int token)
{
    return token == P3D_DIM_EP ? 1 : s[token];
}

static int expert_dim(int token)
{
    switch (token) {
    case P3D_DIM_TP: return P3D_DIM_ETP;
    case P3D_DIM_DP: return P3D_DIM_EDP;
    case P3D_DIM_CP: return -1; /* size 1 in the expert grid */
    default: return token;      /* ep, pp */
    }
}

static int expert_size(const int s[P3D_NDIMS], int token)
{
    int d = expert_dim(token);
    return d < 0 ? 1 : s[d];
}

static int is_expert_dim(int dim)
{
    return dim == P3D_DIM_EP || dim == P3D_DIM_ETP || dim == P3D_DIM_EDP;
}

static int stride_in(const p3d_mesh *m, const int s[P3D_NDIMS], int dim, int expert)
{
    long long st = 1;
    for (int k = 0; k < P3D_NORDER; k++) {
        int t = m->order[k];
        if ((expert ? expert_dim(t) : t) == dim)
            break;
        st *= expert ? expert_size(s, t) : dense_size(s, t);
        if (st > (1 << 30))
            return 1 << 30;
    }
    return (int)st;
}

int p3d_mesh_world(const p3d_mesh *m)
{
    long long w = dense_world(m);
    return w > (1 << 30) ? -1 : (int)w;
}

int p3d_mesh_size(const p3d_mesh *m, int dim)
{
    int s[P3D_NDIMS];
    if (dim < 0 || dim >= P3D_NDIMS)
        return 1;
    eff_sizes(m, s);
    return s[dim];
}

int p3d_mesh_stride(const p3d_mesh *m, int dim)
{
    int s[P3D_NDIMS];
    eff_sizes(m, s);
    return stride_in(m, s, dim, is_expert_dim(dim));
}

int p3d_mesh_rank(const p3d_mesh *m, const int coord[P3D_NDIMS])
{
    int s[P3D_NDIMS], r = 0, stride = 1;
    eff_sizes(m, s);
    for (int k = 0; k < P3D_NORDER; k++) {
        int t = m->order[k];
        if (t == P3D_DIM_EP)
            continue;
        r += coord[t] * stride;
        stride *= s[t];
    }
    return r;
}

void p3d_mesh_coord(const p3d_mesh *m, int rank, int coord[P3D_NDIMS])
{
    int s[P3D_NDIMS], r = rank;
    eff_sizes(m, s);
    for (int k = 0; k < P3D_NORDER; k++) {
        int t = m->order[k], n = dense_size(s, t);
        if (t != P3D_DIM_EP)
            coord[t] = r % n;
        r /= n;
    }
    r = rank;
    for (int k = 0; k < P3D_NORDER; k++) {
        int t = m->order[k], d = expert_dim(t), n = expert_size(s, t);
        if (d >= 0 && d != P3D_DIM_PP)
            coord[d] = r % n;
        r /= n;
    }
}

int p3d_group_members(const p3d_mesh *m, int dim, int r, int *out, int cap)
{
    int s[P3D_NDIMS];
    eff_sizes(m, s);
    int n = s[dim], st = stride_in(m, s, dim, is_expert_dim(dim));
    int base = r - ((r / st) % n) * st;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = base + i * st; /* ascending: strides > 0 */
    return n;
}

/* ---------------------------------------------------------------------- */
/* What Megatron refuses                                                   */
/* ---------------------------------------------------------------------- */

static int listed(const p3d_mesh *m, int token)
{
    for (const char *p = m->order_str; *p;) {
        const char *dash = strchr(p, '-');
        size_t len = dash ? (size_t)(dash - p) : strlen(p);
        if (len == 2 && strncmp(p, p3d_dim_name(token), 2) == 0)
            return 1;
        if (!dash)
            break;
        p = dash + 1;
    }
    return 0;
}

/* RankGenerator refuses an order string that leaves out a dimension of
 * size > 1 in either grid; accepting it would report and export
 * (P3D_ORDER) an order the training script cannot use. */
static int check_order(const p3d_mesh *m, const int s[P3D_NDIMS], char **err)
{
    char missing[200] = "";
    size_t k = 0;
    for (int q = 0; q < P3D_NORDER; q++) {
        int t = default_order[q], e = expert_dim(t);
        int big = dense_size(s, t) > 1 ? t : e >= 0 && s[e] > 1 ? e : -1;
        if (big < 0 || listed(m, t) || k >= sizeof missing)
            continue;
        if (big == t)
            k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%s (size %d)", k ? ", " : "", p3d_dim_name(t),
                                  s[t]);
        else
            k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%s (%s=%d)", k ? ", " : "", p3d_dim_name(t),
                                  p3d_dim_name(big), s[big]);
    }
    if (k)
        return p3d_err(err,
                       "--order %s leaves out %s: Megatron requires every dimension of size > 1 in the "
                       "order string",
                       m->order_str, missing);
    return 0;
}

const char *p3d_rules_name(int rules)
{
    return rules == P3D_RULES_DEVICEMESH ? "devicemesh" : "megatron";
}

int p3d_rules_parse(const char *s)
{
    if (s && !strcmp(s, "megatron"))
        return P3D_RULES_MEGATRON;
    if (s && !strcmp(s, "devicemesh"))
        return P3D_RULES_DEVICEMESH;
    return -1;
}

/* DeviceMesh's mesh_dim_names is the order string: a dimension of size > 1
 * left out of it would be a mesh dimension nobody named. Only the dense
 * dimensions count, and ep when EP was asked. */
static int check_order_devicemesh(const p3d_mesh *m, const int s[P3D_NDIMS], int ep_asked, char **err)
{
    char missing[200] = "";
    size_t k = 0;
    for (int q = 0; q < P3D_NORDER; q++) {
        int t = default_order[q];
        int n = t == P3D_DIM_EP ? (ep_asked ? s[t] : 1) : s[t];
        if (n <= 1 || listed(m, t) || k >= sizeof missing)
            continue;
        k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%s (size %d)", k ? ", " : "", p3d_dim_name(t), n);
    }
    if (k)
        return p3d_err(err,
                       "--order %s leaves out %s: the order string names the DeviceMesh's dimensions "
                       "(mesh_dim_names, fastest first); list every dimension of size > 1",
                       m->order_str, missing);
    return 0;
}

/* refuse = 0: only sizes and the world's bound are checked, etp and edp
 * derived; 1: what m->rules refuses is refused too. */
static int resolve(p3d_mesh *m, int refuse, char **err)
{
    static const int given[] = {P3D_DIM_TP, P3D_DIM_CP, P3D_DIM_EP, P3D_DIM_DP, P3D_DIM_PP};
    int s[P3D_NDIMS];
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
        if (m->size[given[i]] < 1)
            return p3d_err(err, "mesh: %s=%d, expected >= 1", p3d_dim_name(given[i]), m->size[given[i]]);
    if (m->size[P3D_DIM_ETP] < 0)
        return p3d_err(err, "mesh: etp=%d, expected >= 1", m->size[P3D_DIM_ETP]);
    if (m->rules != P3D_RULES_MEGATRON && m->rules != P3D_RULES_DEVICEMESH)
        return p3d_err(err, "mesh: unknown shape rules %d", m->rules);
    int megatron = refuse && m->rules == P3D_RULES_MEGATRON;
    long long w = dense_world(m);
    if (w > (1 << 30))
        return p3d_err(err, "mesh: world size tp*cp*dp*pp = %lld is too large", w);
    eff_sizes(m, s);
    /* DeviceMesh has no expert grid unless EP is asked for: then etp and
     * edp are only derived (edp = tp*cp*dp/tp), nothing about them refused */
    int ep_asked = refuse && (s[P3D_DIM_EP] > 1 || s[P3D_DIM_ETP] != s[P3D_DIM_TP]);
    long long den = (long long)s[P3D_DIM_ETP] * s[P3D_DIM_EP] * s[P3D_DIM_PP];
    if ((megatron || ep_asked) && w % den != 0)
        return p3d_err(err,
                       "mesh: the expert grid etp*ep*edp*pp does not fit the world: world size tp*cp*dp*pp = %lld "
                       "is not divisible by etp*ep*pp = %lld (etp=%d ep=%d pp=%d); %s refuses this",
                       w, den, s[P3D_DIM_ETP], s[P3D_DIM_EP], s[P3D_DIM_PP],
                       megatron ? "Megatron" : "an expert mesh (pp, edp, ep, etp) over the same ranks");
    if (refuse && (megatron ? check_order(m, s, err) < 0 : check_order_devicemesh(m, s, ep_asked, err) < 0))
        return -1;
    size_t ol = strlen(m->order_str);
    int pp_last = ol >= 2 && strcmp(m->order_str + ol - 2, "pp") == 0;
    if (megatron && !pp_last && s[P3D_DIM_PP] > 1 && s[P3D_DIM_EDP] != s[P3D_DIM_DP])
        return p3d_err(err,
                       "--order %s is not pp-last with pp=%d, and the expert data-parallel size edp=%d differs from "
                       "dp=%d: Megatron requires the attention and MoE layers to have the same data-parallel size "
                       "when pp is not last in the order",
                       m->order_str, s[P3D_DIM_PP], s[P3D_DIM_EDP], s[P3D_DIM_DP]);
    /* same size and same stride: the same pipeline groups (all singletons
     * when pp = 1, whatever the strides) */
    int pd = stride_in(m, s, P3D_DIM_PP, 0), pe = stride_in(m, s, P3D_DIM_PP, 1);
    if ((megatron || ep_asked) && s[P3D_DIM_PP] > 1 && pd != pe)
        return p3d_err(err,
                       "--order %s gives the expert layers other pipeline groups than the dense layers (stage "
                       "stride %d vs %d ranks): %s requires the same pipeline groups for the non-expert "
                       "and expert parts; put pp after the dimensions that differ (e.g. tp-cp-ep-dp-pp)",
                       m->order_str, pd, pe, megatron ? "Megatron" : "one pp dimension in both meshes");
    m->size[P3D_DIM_ETP] = s[P3D_DIM_ETP];
    m->size[P3D_DIM_EDP] = s[P3D_DIM_EDP];
    return 0;
}

int p3d_mesh_resolve(p3d_mesh *m, char **err)
{
    return resolve(m, 1, err);
}

int p3d_mesh_derive(p3d_mesh *m, char **err)
{
    return resolve(m, 0, err);
}

int p3d_job_resolve_dp(p3d_job *job, size_t gpus, char **err)
{
    return p3d_job_resolve_dp_on(job, gpus, "GPU", 0, 0, err);
}

int p3d_job_resolve_dp_on(p3d_job *job, size_t gpus, const char *unit, size_t spare_gpus, int spare_nodes, char **err)
{
    p3d_mesh *m = &job->mesh;
    char sp[192] = "";
    if (spare_nodes > 0)
        snprintf(sp, sizeof sp,
                 " (not counting the %zu %s%s of the %d --spares node%s, kept free to replace a "
                 "lost node: lower --spares or the mesh)",
                 spare_gpus, unit, spare_gpus == 1 ? "" : "s", spare_nodes, spare_nodes == 1 ? "" : "s");
    long long other = 1;
    for (int d = 0; d < P3D_NORDER; d++)
        if (d != P3D_DIM_DP && d != P3D_DIM_EP)
            other *= m->size[d];
    if (m->size[P3D_DIM_DP] == 0) {
        if (gpus == 0)
            return p3d_err(err,
                           "no GPUs found (see par3drun topo): give --nproc-per-node N to run N CPU ranks per node");
        if ((long long)gpus % other != 0)
            return p3d_err(err,
                           "mesh does not divide the world: %zu %ss%s is not a multiple of tp*cp*pp = %lld "
                           "(tp=%d cp=%d pp=%d); choose sizes whose product divides %zu or give --dp",
                           gpus, unit, sp, other, m->size[P3D_DIM_TP], m->size[P3D_DIM_CP], m->size[P3D_DIM_PP], gpus);
        m->size[P3D_DIM_DP] = (int)((long long)gpus / other);
    } else {
        long long world = other * m->size[P3D_DIM_DP];
        if (world > (long long)gpus)
            return p3d_err(err, "world size tp*cp*dp*pp = %lld is larger than the %zu %ss available%s", world, gpus,
                           unit, sp);
    }
    /* the policy declares whose rules apply when it runs (policy_run.c) */
    return p3d_mesh_derive(m, err);
}
