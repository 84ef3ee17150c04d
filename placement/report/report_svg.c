/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_svg.c — `--format svg`: one self-contained SVG with a summary and
 * four panels (pipeline stages, TP groups, pipelines, DP groups) stacked
 * top to bottom. Drawing lives in report_draw.c.
 */
#include "report_draw.h"

#include <stdlib.h>

char *p3d_report_svg(const p3d_report_in *in)
{
    p3d_sb head = {0}, body = {0};
    if (!in || !in->cluster || !in->job)
        return NULL;
    p3d_draw *d = p3d_draw_new(in);
    if (!d)
        return NULL;
    int w, h, sh;
    p3d_draw_size(d, &w, &h);
    p3d_draw_summary(&body, in, 12, 4, &sh);
    int y = sh + 8;
    for (int v = 0; v < P3D_NVIEWS; v++) {
        p3d_sb_printf(&body, "<text x=\"12\" y=\"%d\" font-size=\"14\" font-weight=\"bold\" "
                             "font-family=\"sans-serif\">%d. %s</text>\n",
                      y + 16, v + 1, p3d_draw_view_title(v));
        p3d_draw_view(&body, d, v, 12, y + 26);
        y += 26 + h + 16;
    }
    p3d_sb_printf(&head, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                         "viewBox=\"0 0 %d %d\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
                  w + 24, y, w + 24, y);
    char *b = p3d_sb_finish(&body);
    if (b)
        p3d_sb_puts(&head, b);
    else
        head.oom = 1;
    free(b);
    p3d_sb_puts(&head, "</svg>\n");
    p3d_draw_free(d);
    return p3d_sb_finish(&head);
}
