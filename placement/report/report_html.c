/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_html.c — `--format html`: one self-contained page (no network
 * fetch): the summary, the cost figures, the checks, and the picture with a
 * small inline script that toggles between the views. Without JavaScript
 * every view is shown, one under the other. When the script has run it sets
 * <body data-ready="1"> (the browser test looks for it).
 *
 * Written front to back into one p3d_sb, a buffer or a stream
 * (p3d_report_html_to): only the cost table, a few lines, is built apart.
 */
#include "report_common.h"
#include "report_draw.h"

#include <stdlib.h>

static const char *const view_ids[P3D_NVIEWS] = {"stage", "tp", "pp", "dp"};

static const char *sev_name(p3d_severity s)
{
    return s == P3D_SEV_ERROR ? "error" : s == P3D_SEV_WARNING ? "warning" : "info";
}

/* The whole page into *bp (a buffer or a stream), front to back; 0, or -1
 * when the drawing could not be laid out. */
static int html(p3d_sb *bp, const p3d_report_in *in)
{
    if (!in || !in->cluster || !in->job)
        return -1;
    p3d_draw *d = p3d_draw_new(in);
    if (!d)
        return -1;
    p3d_sb b = *bp;
    int w, h;
    p3d_draw_size(d, &w, &h);
    p3d_sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<title>par3drun placement</title>\n<style>\n"
                    "body{font-family:sans-serif;margin:16px;color:#222}\n"
                    "nav button{margin-right:6px;padding:4px 10px;border:1px solid #888;background:#f4f4f4;"
                    "border-radius:4px;cursor:pointer}\n"
                    "nav button.on{background:#334;color:#fff}\n"
                    "h2{font-size:17px;margin:0 0 6px}p{margin:2px 0;font-size:13px}\n"
                    "nav{margin:10px 0}\n"
                    "pre{background:#f7f7f7;padding:8px;overflow-x:auto}\n"
                    ".error{color:#b00}.warning{color:#a60}.info{color:#555}\n"
                    "</style>\n</head>\n<body>\n");
    /* the summary: same lines as the SVG report's header */
    char lines[P3D_SUMMARY_MAX][P3D_SUMMARY_LEN];
    int nl = p3d_draw_summary_lines(in, lines, P3D_SUMMARY_MAX);
    for (int i = 0; i < nl; i++) {
        p3d_sb_puts(&b, i == 0 ? "<h2>" : "<p>");
        p3d_xml_text(&b, lines[i]);
        p3d_sb_puts(&b, i == 0 ? "</h2>\n" : "</p>\n");
    }
    p3d_sb_puts(&b, "<nav id=\"views\">\n");
    for (int v = 0; v < P3D_NVIEWS; v++)
        p3d_sb_printf(&b, "<button type=\"button\" data-view=\"%s\">%s</button>\n", view_ids[v],
                      p3d_draw_view_title(v));
    p3d_sb_puts(&b, "</nav>\n");
    for (int v = 0; v < P3D_NVIEWS; v++) {
        p3d_sb_printf(&b,
                      "<section class=\"view\" id=\"view-%s\">\n<h3>%s</h3>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n",
                      view_ids[v], p3d_draw_view_title(v), w + 4, h + 4);
        p3d_draw_view(&b, d, v, 2, 2);
        p3d_sb_puts(&b, "</svg>\n</section>\n");
    }
    if (in->an && in->an->has_cost) {
        p3d_sb_puts(&b, "<h3>Cost estimate for ");
        p3d_xml_text(&b, in->job->model.name);
        p3d_sb_puts(&b, " (per GPU per step; docs/cost-model.md)</h3>\n<pre>");
        p3d_sb t = {0};
        p3d_report_cost_table(&t, in,
                              in->pl->policy ? in->pl->policy
                                             : "policy"); /* the text report's table; xml_text escapes it */
        char *txt = p3d_sb_finish(&t);
        p3d_xml_text(&b, txt ? txt : "");
        free(txt);
        p3d_sb_puts(&b, "</pre>\n");
    }
    if (in->an && in->an->nchecks) {
        p3d_sb_puts(&b, "<h3>Checks</h3>\n<ul>\n");
        for (size_t i = 0; i < in->an->nchecks; i++) {
            const p3d_check *ck = &in->an->checks[i];
            p3d_sb_printf(&b, "<li class=\"%s\"><b>%s %s</b>: ", sev_name(ck->severity), sev_name(ck->severity),
                          ck->code);
            p3d_xml_text(&b, ck->message ? ck->message : "");
            p3d_sb_puts(&b, "</li>\n");
        }
        p3d_sb_puts(&b, "</ul>\n");
    }
    p3d_sb_puts(&b, "<script>\n"
                    "(function () {\n"
                    "  var buttons = document.querySelectorAll('#views button');\n"
                    "  function show(id) {\n"
                    "    document.querySelectorAll('section.view').forEach(function (s) {\n"
                    "      s.style.display = s.id === 'view-' + id ? '' : 'none';\n"
                    "    });\n"
                    "    buttons.forEach(function (b) {\n"
                    "      b.className = b.getAttribute('data-view') === id ? 'on' : '';\n"
                    "    });\n"
                    "  }\n"
                    "  buttons.forEach(function (b) {\n"
                    "    b.addEventListener('click', function () { show(b.getAttribute('data-view')); });\n"
                    "  });\n"
                    "  show('stage');\n"
                    "  document.body.setAttribute('data-ready', '1');\n"
                    "})();\n"
                    "</script>\n</body>\n</html>\n");
    p3d_draw_free(d);
    *bp = b;
    return 0;
}

char *p3d_report_html(const p3d_report_in *in)
{
    p3d_sb b = {0};
    if (html(&b, in) < 0) {
        p3d_sb_free(&b);
        return NULL;
    }
    return p3d_sb_finish(&b);
}

int p3d_report_html_to(const p3d_report_in *in, FILE *f)
{
    p3d_sb b;
    if (p3d_sb_stream(&b, f, P3D_REPORT_STREAM_BUF) < 0)
        return -1;
    if (html(&b, in) < 0)
        b.oom = 1;
    return p3d_sb_stream_end(&b);
}
