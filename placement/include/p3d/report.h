/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/report.h — report: text, JSON, SVG, HTML (placement/report/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_REPORT_H
#define P3D_REPORT_H

#include "p3d/check.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a report shows; the baseline (naive policy) may be NULL. */
typedef struct p3d_report_in {
    const p3d_cluster *cluster;
    const p3d_job *job;
    const p3d_placement *pl;
    const p3d_analysis *an;
    const p3d_placement *base_pl;
    const p3d_analysis *base_an;
    int color;
} p3d_report_in;

/* Reports; caller frees. Deterministic: same input, same bytes. */
char *p3d_report_text(const p3d_report_in *in);
char *p3d_report_json(const p3d_report_in *in);
char *p3d_report_svg(const p3d_report_in *in);
char *p3d_report_html(const p3d_report_in *in);

#ifdef __cplusplus
}
#endif
#endif
