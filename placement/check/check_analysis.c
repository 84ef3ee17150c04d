/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_analysis.c — the analysis a check run fills: its findings (added
 * by check_rules.c and check.c, freed here), the figures read from it
 * (TP groups off NVLink, PP hops across racks, the objective policies
 * compare), and the name of a GPU's NVLink domain the findings quote.
 * Below check.c, check_rules.c and check_links.c: it calls none of them.
 */
#include "check_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int p3d_analysis_add(p3d_analysis *a, p3d_severity sev, const char *code, const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    p3d_check *v = realloc(a->checks, (a->nchecks + 1) * sizeof *v);
    if (!v) {
        free(msg);
        return -1;
    }
    a->checks = v;
    p3d_check *k = &v[a->nchecks++];
    memset(k, 0, sizeof *k);
    k->severity = sev;
    snprintf(k->code, sizeof k->code, "%s", code);
    k->message = msg;
    return 0;
}

void p3d_analysis_free(p3d_analysis *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->nchecks; i++)
        free(a->checks[i].message);
    free(a->checks);
    free(a);
}

int p3d_tp_off_nvlink(const p3d_analysis *a)
{
    int n = 0;
    for (int l = P3D_LINK_MNNVL + 1; l < P3D_LINK_COUNT; l++)
        n += a->dim[P3D_DIM_TP].groups_by_link[l];
    return n;
}

int p3d_pp_cross_rack(const p3d_analysis *a)
{
    return a->dim[P3D_DIM_PP].groups_by_link[P3D_LINK_XRACK];
}

void p3d_objective(const p3d_analysis *a, long long out[P3D_OBJECTIVE_LEN])
{
    const p3d_dim_stats *tp = &a->dim[P3D_DIM_TP], *pp = &a->dim[P3D_DIM_PP];
    out[0] = p3d_tp_off_nvlink(a);
    out[1] = tp->groups_by_link[P3D_LINK_RACK] + tp->groups_by_link[P3D_LINK_XRACK];
    out[2] = tp->groups_by_link[P3D_LINK_XRACK];
    out[3] = p3d_pp_cross_rack(a);
    out[4] = pp->hops_by_link[P3D_LINK_XRACK];
}

void p3d_gpu_domain_name(const p3d_cluster *c, int node, int gpu, char *buf, size_t cap)
{
    const p3d_cnode *cn = &c->nodes[node];
    if (cn->nvl_domain >= 0 && (size_t)cn->nvl_domain < c->nnvl_domains)
        snprintf(buf, cap, "%s", c->nvl_domains[cn->nvl_domain]);
    else
        snprintf(buf, cap, "%s/%d", cn->name, gpu >= 0 && gpu < cn->topo->ngpus ? cn->topo->gpus[gpu].domain : 0);
}
