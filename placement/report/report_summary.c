/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report_summary.c — the few lines that head the SVG and HTML pictures
 * (policy, mesh, worst link per dimension, estimated step, the naive
 * placement's figures), as plain lines and as SVG text; and the XML
 * escaping every drawn label goes through.
 */
#include "report_draw.h"

#include <math.h>
#include <stdio.h>

void p3d_xml_text(p3d_sb *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': p3d_sb_puts(b, "&lt;"); break;
        case '>': p3d_sb_puts(b, "&gt;"); break;
        case '&': p3d_sb_puts(b, "&amp;"); break;
        case '"': p3d_sb_puts(b, "&quot;"); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n')
                p3d_sb_putc(b, *s);
        }
    }
}

int p3d_draw_summary_lines(const p3d_report_in *in, char lines[][P3D_SUMMARY_LEN], int max)
{
    int n = 0;
    const p3d_placement *pl = in->pl;
    const p3d_mesh *m = pl ? &pl->mesh : &in->job->mesh;
    size_t nn = in->cluster ? in->cluster->nnodes : 0;
    if (max < 4)
        return 0;
    snprintf(lines[n++], P3D_SUMMARY_LEN,
             "par3drun placement: policy %s, order %s, tp=%d pp=%d dp=%d (%d rank%s on %zu node%s)",
             pl && pl->policy ? pl->policy : "?", m->order_str, m->size[P3D_DIM_TP], m->size[P3D_DIM_PP],
             m->size[P3D_DIM_DP], pl ? pl->world : 0, pl && pl->world == 1 ? "" : "s", nn, nn == 1 ? "" : "s");
    if (!in->an)
        return n;
    const p3d_analysis *an = in->an;
    static const int dims[3] = {P3D_DIM_TP, P3D_DIM_PP, P3D_DIM_DP};
    char *line = lines[n++];
    size_t len = (size_t)snprintf(line, P3D_SUMMARY_LEN, "worst link per dimension:");
    for (int i = 0; i < 3 && len < P3D_SUMMARY_LEN; i++) {
        const p3d_dim_stats *st = &an->dim[dims[i]];
        if (m->size[dims[i]] == 1) /* no group talks: no link to name */
            len += (size_t)snprintf(line + len, P3D_SUMMARY_LEN - len, " %s - (size 1)%s", p3d_dim_name(dims[i]),
                                    i < 2 ? "," : "");
        else
            len += (size_t)snprintf(line + len, P3D_SUMMARY_LEN - len, " %s %s (%d group%s)%s", p3d_dim_name(dims[i]),
                                    p3d_link_name((p3d_link)st->worst), st->ngroups, st->ngroups == 1 ? "" : "s",
                                    i < 2 ? "," : "");
    }
    if (len < P3D_SUMMARY_LEN)
        snprintf(line + len, P3D_SUMMARY_LEN - len, "; checks: %d error%s, %d warning%s", an->nerrors,
                 an->nerrors == 1 ? "" : "s", an->nwarnings, an->nwarnings == 1 ? "" : "s");
    if (!an->has_cost)
        return n;
    const p3d_cost *c = &an->cost;
    char dp[64] = "no DP traffic (dp=1)";
    if (m->size[P3D_DIM_DP] > 1)
        snprintf(dp, sizeof dp, "DP %.2f on %s", c->dp_time, p3d_link_name(c->link[P3D_DIM_DP]));
    snprintf(lines[n++], P3D_SUMMARY_LEN,
             "estimated step %.2f s (compute %.2f, TP %.2f on %s, PP %.2f on %s, %s), "
             "bubble %.1f%%, MFU %.1f%%; memory %.1f of %.1f GB per GPU",
             c->step_time, c->compute_time, c->tp_time, p3d_link_name(c->link[P3D_DIM_TP]), c->pp_time,
             m->size[P3D_DIM_PP] > 1 ? p3d_link_name(c->link[P3D_DIM_PP]) : "-", dp, 100 * c->bubble, 100 * c->mfu,
             c->mem_total / 1e9, c->gpu_mem / 1e9);
    if (in->base_an && in->base_an->has_cost && c->step_time > 0) {
        const p3d_cost *bc = &in->base_an->cost;
        const p3d_dim_stats *ps = &an->dim[P3D_DIM_PP], *bs = &in->base_an->dim[P3D_DIM_PP];
        int hops = 0;
        for (int l = 0; l < P3D_LINK_COUNT; l++)
            hops += ps->hops_by_link[l];
        double pct = 100 * (bc->step_time / c->step_time - 1);
        /* the rack crossings, not only the step: a 0.0% step difference can
         * hide 1 against 3 cross-rack hops per pipeline */
        char verdict[48] = "the same estimate";
        if (fabs(pct) >= 0.05)
            snprintf(verdict, sizeof verdict, "%.1f%% %s", fabs(pct), pct >= 0 ? "faster" : "slower");
        snprintf(lines[n++], P3D_SUMMARY_LEN,
                 "naive placement (host-list order): step %.2f s, %d of %d PP hops across racks (this placement: "
                 "%d); this placement: %s (estimate, docs/cost-model.md)",
                 bc->step_time, bs->hops_by_link[P3D_LINK_XRACK], hops, ps->hops_by_link[P3D_LINK_XRACK], verdict);
    }
    return n;
}

void p3d_draw_summary(p3d_sb *b, const p3d_report_in *in, int x, int y, int *h)
{
    char lines[P3D_SUMMARY_MAX][P3D_SUMMARY_LEN];
    int n = p3d_draw_summary_lines(in, lines, P3D_SUMMARY_MAX);
    int y0 = y;
    for (int i = 0; i < n; i++) {
        y += i == 0 ? 18 : 17;
        p3d_sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" font-family=\"sans-serif\"%s>", x, y,
                      i == 0 ? 15 : 12, i == 0 ? " font-weight=\"bold\"" : "");
        p3d_xml_text(b, lines[i]);
        p3d_sb_puts(b, "</text>\n");
    }
    *h = y - y0 + 8;
}
