/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_svg.c — `--format svg`: one self-contained SVG with a summary and
 * four panels (pipeline stages, TP groups, pipelines, DP groups) stacked
 * top to bottom. Drawing lives in report_draw.c.
 *
 * Written front to back into one p3d_sb, a buffer or a stream: the <svg>
 * header needs the total height, which is known before any panel is drawn
 * (the summary's height, then four panels of one size), so nothing the
 * size of the picture is held back (a 1,048,576-GPU picture is ~700 MB).
 */
#include "report_common.h"
#include "report_draw.h"

#include <stdlib.h>

/* The whole picture into b; 0, or -1 when the drawing could not be laid out. */
static int svg(p3d_sb *b, const p3d_report_in *in)
{
    p3d_sb sum = {0};
    if (!in || !in->cluster || !in->job)
        return -1;
    p3d_draw *d = p3d_draw_new(in);
    if (!d)
        return -1;
    int w, h, sh;
    p3d_draw_size(d, &w, &h);
    /* the summary is a few lines: held until the header that needs its height */
    p3d_draw_summary(&sum, in, 12, 4, &sh);
    int height = sh + 8 + P3D_NVIEWS * (26 + h + 16);
    p3d_sb_printf(b,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                  "viewBox=\"0 0 %d %d\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
                  w + 24, height, w + 24, height);
    if (sum.oom)
        b->oom = 1;
    else if (sum.len)
        p3d_sb_putn(b, sum.p, sum.len);
    p3d_sb_free(&sum);
    int y = sh + 8;
    for (int v = 0; v < P3D_NVIEWS; v++) {
        p3d_sb_printf(b,
                      "<text x=\"12\" y=\"%d\" font-size=\"14\" font-weight=\"bold\" "
                      "font-family=\"sans-serif\">%d. %s</text>\n",
                      y + 16, v + 1, p3d_draw_view_title(v));
        p3d_draw_view(b, d, v, 12, y + 26);
        y += 26 + h + 16;
    }
    p3d_sb_puts(b, "</svg>\n");
    p3d_draw_free(d);
    return 0;
}

char *p3d_report_svg(const p3d_report_in *in)
{
    p3d_sb b = {0};
    if (svg(&b, in) < 0) {
        p3d_sb_free(&b);
        return NULL;
    }
    return p3d_sb_finish(&b);
}

int p3d_report_svg_to(const p3d_report_in *in, FILE *f)
{
    p3d_sb b;
    if (p3d_sb_stream(&b, f, P3D_REPORT_STREAM_BUF) < 0)
        return -1;
    if (svg(&b, in) < 0)
        b.oom = 1;
    return p3d_sb_stream_end(&b);
}
