/* SPDX-License-Identifier: BSD-3-Clause */
/* test_report_svg.c — the SVG and HTML pictures on hand-built clusters and
 * placements: content, warning links, summarising big clusters,
 * self-containment and determinism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "p3d/p3d.h"

#define MAXN 64
#define G 8

typedef struct fixture {
    p3d_gpu gpus[G];
    unsigned char gg[G * G];
    p3d_node topo;
    p3d_node *topos[1];
    p3d_cnode nodes[MAXN];
    char names[MAXN][16];
    char *racks[4];
    p3d_cluster c;
    p3d_job job;
    p3d_rank ranks[MAXN * G];
    p3d_placement pl;
    p3d_analysis an;
} fixture;

static char rack_names[4][8] = {"r1", "r2", "r3", "r4"};

/* nnodes DGX-like nodes (8 GPUs, one NVLink domain) in nracks racks of
 * equal size; a tp x pp x dp job. If spread, rank r goes to node r % nnodes
 * (TP groups cross nodes: the classic mistake), else rank r to node r / 8. */
static fixture *make(int nnodes, int nracks, int tp, int pp, int spread)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    for (int g = 0; g < G; g++) {
        f->gpus[g].index = g;
        f->gpus[g].domain = 0;
        for (int h = 0; h < G; h++)
            f->gg[g * G + h] = g == h ? P3D_LINK_SELF : P3D_LINK_NVLINK;
    }
    f->topo.ngpus = G;
    f->topo.gpus = f->gpus;
    f->topo.gg_class = f->gg;
    f->topo.ndomains = 1;
    f->topos[0] = &f->topo;
    for (int i = 0; i < nnodes; i++) {
        snprintf(f->names[i], sizeof f->names[i], "node%03d", i + 1);
        f->nodes[i].name = f->names[i];
        f->nodes[i].topo = &f->topo;
        f->nodes[i].rack = i / (nnodes / nracks);
        f->nodes[i].nvl_domain = -1;
    }
    for (int r = 0; r < nracks; r++)
        f->racks[r] = rack_names[r];
    f->c.nnodes = (size_t)nnodes;
    f->c.nodes = f->nodes;
    f->c.ntopos = 1;
    f->c.topos = f->topos;
    f->c.nracks = (size_t)nracks;
    f->c.racks = f->racks;
    p3d_job_init(&f->job);
    f->job.mesh.size[P3D_DIM_TP] = tp;
    f->job.mesh.size[P3D_DIM_PP] = pp;
    f->job.mesh.size[P3D_DIM_DP] = nnodes * G / (tp * pp);
    f->pl.mesh = f->job.mesh;
    f->pl.world = nnodes * G;
    f->pl.ranks = f->ranks;
    f->pl.policy = "test";
    for (int r = 0; r < f->pl.world; r++) {
        f->ranks[r].node = spread ? r % nnodes : r / G;
        f->ranks[r].gpu = spread ? r / nnodes : r % G;
        p3d_mesh_coord(&f->pl.mesh, r, f->ranks[r].coord);
    }
    /* an analysis with a cost, so the summary line is exercised */
    assert_int_equal(p3d_model_preset("llama2-70b", &f->job.model, NULL), 0);
    f->job.has_model = 1;
    f->job.global_batch = 64;
    f->job.recompute = 2;
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_TP] = spread ? P3D_LINK_RACK : P3D_LINK_NVLINK;
    link[P3D_DIM_PP] = pp > 1 ? P3D_LINK_RACK : P3D_LINK_SELF;
    link[P3D_DIM_DP] = P3D_LINK_XRACK;
    assert_int_equal(p3d_cost_eval(&f->c, &f->job, link, &f->an.cost, NULL), 0);
    f->an.has_cost = 1;
    f->an.dim[P3D_DIM_TP].worst = link[P3D_DIM_TP];
    f->an.dim[P3D_DIM_TP].ngroups = f->pl.world / tp;
    return f;
}

static p3d_report_in in_of(fixture *f)
{
    p3d_report_in in = {.cluster = &f->c, .job = &f->job, .pl = &f->pl, .an = &f->an};
    return in;
}

/* P3D_REPORT_DUMP=DIR keeps the pictures for a look in a browser. */
static void dump(const char *name, const char *text)
{
    const char *dir = getenv("P3D_REPORT_DUMP");
    if (!dir || !*dir)
        return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void two_nodes_svg(void **state)
{
    (void)state;
    fixture *f = make(2, 1, 8, 2, 0);
    p3d_report_in in = in_of(f);
    char *svg = p3d_report_svg(&in);
    assert_non_null(svg);
    assert_true(strncmp(svg, "<?xml", 5) == 0);
    assert_non_null(strstr(svg, "</svg>\n"));
    /* every rank drawn in each of the 4 panels */
    assert_int_equal(count(svg, ">r0<"), 4);
    assert_int_equal(count(svg, ">r15<"), 4);
    assert_non_null(strstr(svg, ">1,1,0<")); /* rank 9: tp 1, pp 1, dp 0 */
    /* every cell shows its GPU index: g0..g7 on each of 2 nodes, 4 panels */
    assert_int_equal(count(svg, ">g0</text>"), 8);
    assert_int_equal(count(svg, ">g7</text>"), 8);
    assert_non_null(strstr(svg, "(16 ranks on 2 nodes)"));
    assert_non_null(strstr(svg, "node002"));
    assert_non_null(strstr(svg, "Pipeline stages"));
    assert_non_null(strstr(svg, "Tensor-parallel groups"));
    assert_non_null(strstr(svg, "Data-parallel groups"));
    assert_non_null(strstr(svg, "stroke-dasharray")); /* NVLink domains outlined */
    assert_non_null(strstr(svg, "estimated step"));
    /* TP inside nodes: no red link anywhere; the pipeline links are grey */
    assert_null(strstr(svg, "stroke=\"#d62728\" stroke-width=\"2.5\" stroke-opacity"));
    assert_non_null(strstr(svg, "pp ranks 0-8 over the network within a rack"));
    assert_int_equal(count(svg, "<g"), count(svg, "</g>"));
    assert_int_equal(count(svg, "<text"), count(svg, "</text>"));
    /* deterministic */
    char *again = p3d_report_svg(&in);
    assert_string_equal(svg, again);
    free(again);
    free(svg);
    free(f);
}

static void tp_across_nodes_is_red(void **state)
{
    (void)state;
    fixture *f = make(2, 1, 8, 2, 1);
    p3d_report_in in = in_of(f);
    char *svg = p3d_report_svg(&in);
    assert_non_null(svg);
    /* each TP group alternates nodes: 7 crossing links per group, 2 groups */
    assert_int_equal(count(svg, "<title>tp ranks"), 14);
    assert_non_null(strstr(svg, "stroke=\"#d62728\" stroke-width=\"2.5\" stroke-opacity"));
    assert_non_null(strstr(svg, ": 14 links</text>"));
    dump("tp-across-nodes.svg", svg);
    free(svg);
    free(f);
}

static void big_cluster_summarised(void **state)
{
    (void)state;
    fixture *f = make(64, 1, 8, 16, 0);
    p3d_report_in in = in_of(f);
    char *svg = p3d_report_svg(&in);
    assert_non_null(svg);
    /* 32 of a rack's 64 nodes drawn, the rest summarised with their ranks */
    assert_int_equal(count(svg, "+ 32 more nodes: node033 .. node064"), 4);
    assert_non_null(strstr(svg, "ranks 256..511 (not drawn)"));
    assert_non_null(strstr(svg, ">r255<"));
    assert_null(strstr(svg, ">r256<"));
    assert_non_null(strstr(svg, "rack r1 (64 nodes)"));
    assert_non_null(strstr(svg, "lines for the first 8 of 128 DP groups"));
    assert_true(strlen(svg) < 4u << 20);
    dump("64-nodes.svg", svg);
    free(svg);
    free(f);
}

static void html_self_contained(void **state)
{
    (void)state;
    fixture *f = make(2, 1, 8, 2, 0);
    p3d_report_in in = in_of(f);
    char *html = p3d_report_html(&in);
    assert_non_null(html);
    assert_true(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    assert_int_equal(count(html, "<button"), 4);
    assert_int_equal(count(html, "<section class=\"view\""), 4);
    assert_non_null(strstr(html, "data-ready"));
    assert_non_null(strstr(html, "Cost estimate for "));
    /* the text report's table: dp=1 says so instead of a DP row of zeros */
    assert_non_null(strstr(html, "none (dp=1)"));
    assert_null(strstr(html, "DP all-reduce (exposed part)"));
    /* nothing to fetch: no src=, no href=, no URL outside the SVG namespace */
    assert_null(strstr(html, "src="));
    assert_null(strstr(html, "href="));
    assert_int_equal(count(html, "http"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
    dump("2-nodes.html", html);
    char *again = p3d_report_html(&in);
    assert_string_equal(html, again);
    free(again);
    free(html);
    free(f);
}

static void names_escaped(void **state)
{
    (void)state;
    fixture *f = make(2, 1, 8, 2, 0);
    char evil[] = "<n&1>";
    f->nodes[0].name = evil;
    p3d_report_in in = in_of(f);
    char *svg = p3d_report_svg(&in);
    assert_non_null(svg);
    assert_null(strstr(svg, "<n&1>"));
    assert_non_null(strstr(svg, "&lt;n&amp;1&gt;"));
    free(svg);
    free(f);
}

/* The part of an SVG between the heading of view v (1-based) and the next. */
static char *view_part(const char *svg, int v)
{
    char head[32], next[32];
    snprintf(head, sizeof head, ">%d. ", v);
    snprintf(next, sizeof next, ">%d. ", v + 1);
    const char *a = strstr(svg, head);
    assert_non_null(a);
    const char *z = strstr(a, next);
    size_t n = z ? (size_t)(z - a) : strlen(a);
    char *out = malloc(n + 1);
    assert_non_null(out);
    memcpy(out, a, n);
    out[n] = 0;
    return out;
}

/* 128 DP groups: every group's cells share one style (fill colour and
 * pattern) and no two groups share one; the legend says so. */
static void styles_tell_groups_apart(void **state)
{
    (void)state;
    fixture *f = make(64, 4, 8, 16, 0);
    p3d_report_in in = in_of(f);
    char *svg = p3d_report_svg(&in);
    assert_non_null(svg);
    char *dp = view_part(svg, 4);
    enum { NG = 128 };
    char style[NG][40];
    memset(style, 0, sizeof style);
    int cells = 0;
    for (const char *p = dp; (p = strstr(p, "<g><rect ")); p++) {
        char fill[8] = "", pat[16] = "-";
        const char *q = strstr(p, "fill=\"");
        assert_non_null(q);
        memcpy(fill, q + 6, 7);
        const char *end = strstr(p, "</g>");
        const char *u = strstr(p, "url(#p3d-v3-");
        if (u && u < end)
            sscanf(u + 12, "%15[^)]", pat);
        const char *t = strstr(p, "DP group ");
        assert_true(t && t < end);
        int g = atoi(t + 9);
        assert_true(g >= 0 && g < NG);
        char st[40];
        snprintf(st, sizeof st, "%s/%s", fill, pat);
        if (style[g][0])
            assert_string_equal(style[g], st);
        else
            snprintf(style[g], sizeof style[g], "%s", st);
        cells++;
    }
    assert_int_equal(cells, 4 * 16 * 8); /* every node of 4 racks of 16 */
    int seen = 0;
    for (int a = 0; a < NG; a++) {
        if (!style[a][0])
            continue;
        seen++;
        for (int b = a + 1; b < NG; b++)
            if (style[b][0])
                assert_string_not_equal(style[a], style[b]);
    }
    assert_int_equal(seen, 128); /* every rank drawn: every group */
    /* beyond 36 groups patterns come in, each defined in the view itself */
    assert_non_null(strstr(dp, "url(#p3d-v3-pat1)"));
    assert_non_null(strstr(dp, "url(#p3d-v3-pat3)"));
    assert_non_null(strstr(dp, "<pattern id=\"p3d-v3-pat3\""));
    assert_non_null(strstr(dp, "each of the 128 groups has its own hue, shade and pattern"));
    free(dp);
    free(svg);
    free(f);
}

/* Lines run behind the labels: in every view the links come before the
 * label layer, and a link starts at its cell's edge, not on its label. */
static void labels_over_lines(void **state)
{
    (void)state;
    fixture *f = make(2, 1, 8, 2, 1); /* TP groups across nodes: links in every view */
    p3d_report_in in = in_of(f);
    char *svg = p3d_report_svg(&in);
    assert_non_null(svg);
    for (int v = 2; v <= 4; v++) {
        char *part = view_part(svg, v);
        char *leg = strstr(part, "<g class=\"legend\"");
        assert_non_null(leg);
        *leg = 0; /* the legend's sample lines are not links */
        const char *labels = strstr(part, "<g paint-order=\"stroke\"");
        assert_non_null(labels);
        const char *last = NULL;
        for (const char *p = part; (p = strstr(p, "<line x1=")); p++)
            last = p;
        if (v == 2)
            assert_non_null(last);
        if (last)
            assert_true(last < labels);
        assert_null(strstr(labels, "<line x1="));
        free(part);
    }
    /* rank 0 (node001 GPU 0) to rank 1 (node002 GPU 0): the cells sit one
     * above the other; the line leaves the bottom edge of r0's cell */
    char *tp = view_part(svg, 2);
    const char *l = strstr(tp, "<line x1=");
    assert_non_null(l);
    double x1, y1, x2, y2;
    assert_int_equal(sscanf(l, "<line x1=\"%lf\" y1=\"%lf\" x2=\"%lf\" y2=\"%lf\"", &x1, &y1, &x2, &y2), 4);
    const char *cell = strstr(tp, "<g><rect x=\"");
    int cx, cy;
    assert_int_equal(sscanf(cell, "<g><rect x=\"%d\" y=\"%d\"", &cx, &cy), 2);
    assert_true(x1 == x2);
    assert_true(y1 >= cy + 34 && y1 <= cy + 36); /* the bottom edge, not the middle */
    free(tp);
    free(svg);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_nodes_svg),          cmocka_unit_test(tp_across_nodes_is_red),
        cmocka_unit_test(big_cluster_summarised), cmocka_unit_test(html_self_contained),
        cmocka_unit_test(names_escaped),          cmocka_unit_test(styles_tell_groups_apart),
        cmocka_unit_test(labels_over_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
