/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check_internal.h — private interface between the checks (check*.c) and
 * the reports (report_*.c). Not installed.
 */
#ifndef P3D_CHECK_INTERNAL_H
#define P3D_CHECK_INTERNAL_H

#include "p3d/p3d.h"

/* Lowest rank of the g-th group of dim, groups numbered by their lowest
 * rank ascending; the members are first + i*stride, i < size[dim], with
 * stride = p3d_mesh_stride(m, dim) (in dim's grid, p3d/job.h). */
static inline int p3d_group_first(const p3d_mesh *m, int dim, int g)
{
    int stride = p3d_mesh_stride(m, dim);
    int block = stride * p3d_mesh_size(m, dim);
    return (g / stride) * block + g % stride;
}

/* Appends a check (message copied from the format). Returns 0 or -1 when
 * out of memory. */
int p3d_analysis_add(p3d_analysis *a, p3d_severity sev, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Scores every group of every dimension (check_links.c): fills a->dim[]. */
int p3d_analysis_links(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a, char **err);

/* The named checks (check_rules.c): appends to a->checks. */
int p3d_analysis_rules(const p3d_cluster *c, const p3d_job *job, const p3d_placement *pl, p3d_analysis *a, char **err);

/* Figures the reports compare against the baseline. */
/* TP groups whose worst link is slower than (multi-node) NVLink. */
int p3d_tp_off_nvlink(const p3d_analysis *a);
/* Pipelines with a stage boundary across racks. */
int p3d_pp_cross_rack(const p3d_analysis *a);
/* The placement objective, compared lexicographically (smaller is better;
 * docs/report-json.md, metrics.objective): TP groups off one NVLink
 * domain; of those, groups spanning nodes; TP groups spanning racks;
 * pipelines spanning racks; cross-rack hops between consecutive stages. */
#define P3D_OBJECTIVE_LEN 5
void p3d_objective(const p3d_analysis *a, long long out[P3D_OBJECTIVE_LEN]);

/* "node001/0" or the multi-node NVLink domain's name, into buf. */
void p3d_gpu_domain_name(const p3d_cluster *c, int node, int gpu, char *buf, size_t cap);

#endif
