/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/report.h — report: text, JSON, SVG, HTML (placement/report/).
 * Conventions: see p3d/base.h.
 */
#ifndef P3D_REPORT_H
#define P3D_REPORT_H

#include "p3d/check.h"

#include <stdio.h>

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
    /* the launcher's --preflight figures, a JSON object written as the
     * report's "preflight" member (NULL: none; docs/report-json.md) */
    const char *preflight_json;
    /* --min-dp: the widths the job could run at, a JSON object written as
     * the report's "elastic" member (NULL: none; p3d_widths_report) */
    const char *widths_json;
} p3d_report_in;

/* Reports; caller frees. Deterministic: same input, same bytes. */
char *p3d_report_text(const p3d_report_in *in);
char *p3d_report_json(const p3d_report_in *in);
char *p3d_report_svg(const p3d_report_in *in);
char *p3d_report_html(const p3d_report_in *in);
/* The JSON report streamed into f (the same bytes as p3d_report_json,
 * never the whole report in memory): 0, or -1 when memory ran out or a
 * write failed (errno from the write). f stays open. */
int p3d_report_json_to(const p3d_report_in *in, FILE *f);
/* The same for the other formats: the bytes of p3d_report_text, _svg and
 * _html, written as they are made; 0 or -1 as above. */
int p3d_report_text_to(const p3d_report_in *in, FILE *f);
int p3d_report_svg_to(const p3d_report_in *in, FILE *f);
int p3d_report_html_to(const p3d_report_in *in, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
