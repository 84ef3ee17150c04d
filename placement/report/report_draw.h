/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_draw.h — the picture shared by the SVG and HTML reports: geometry of
 * racks -> nodes -> GPUs and one drawing per view (private to placement/).
 */
#ifndef P3D_REPORT_DRAW_H
#define P3D_REPORT_DRAW_H

#include "p3d/p3d.h"
#include "strbuf.h"

/* The views: GPUs coloured by pipeline stage, by TP group, by pipeline, by
 * DP group. */
enum { P3D_VIEW_STAGE = 0, P3D_VIEW_TP, P3D_VIEW_PP, P3D_VIEW_DP, P3D_NVIEWS };

typedef struct p3d_draw p3d_draw;

/* Lays the cluster out (at most a few nodes per rack drawn; the rest are
 * summarised). Caller frees with p3d_draw_free(). NULL when out of memory. */
p3d_draw *p3d_draw_new(const p3d_report_in *in);
void p3d_draw_free(p3d_draw *d);
/* Size of one view's drawing, legend included. */
void p3d_draw_size(const p3d_draw *d, int *w, int *h);
/* Appends one view's SVG elements (no <svg> wrapper), translated by (x, y). */
void p3d_draw_view(p3d_sb *b, const p3d_draw *d, int view, int x, int y);
/* The view's title ("Pipeline stages", ...). */
const char *p3d_draw_view_title(int view);
/* A short summary (policy, mesh, worst links, estimated step) as text
 * lines for the picture's header, XML-escaped. */
void p3d_draw_summary(p3d_sb *b, const p3d_report_in *in, int x, int y, int *h);
/* The same summary as plain lines (not escaped); returns how many. */
#define P3D_SUMMARY_LEN 512
#define P3D_SUMMARY_MAX 6
int p3d_draw_summary_lines(const p3d_report_in *in, char lines[][P3D_SUMMARY_LEN], int max);
/* XML-escaped text. */
void p3d_xml_text(p3d_sb *b, const char *s);

#endif
