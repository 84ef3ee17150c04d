/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * place_replace.c — the one replacement path: a lost node's ranks placed
 * again (p3d_place_replace and its error-level checks) and the story of
 * who took which ranks, for the single-node/--emulate launcher and the
 * multi-node leader alike (place.h).
 */
#include "plan.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "0-3,8,12-15" for a sorted list of ranks. */
static void rank_ranges(const int *r, int n, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k + 24 < cap;) {
        int j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1)
            j++;
        k += (size_t)snprintf(buf + k, cap - k, j > i ? "%s%d-%d" : "%s%d", i ? "," : "", r[i], r[j]);
        i = j + 1;
    }
}

int p3d_replace_place(const p3d_opts *o, p3d_plan_result *res, const int *lost, int nlost, int restart,
                      const char *reason, int events_fd, double t0, int **was_out, char **msg)
{
    char *err = NULL;
    int world = res->pl->world, holds = 0;
    int *was = calloc((size_t)world + 1, sizeof *was);
    *was_out = NULL;
    if (!was) {
        p3d_err(msg, "out of memory");
        return -1;
    }
    for (int r = 0; r < world; r++) {
        was[r] = res->pl->ranks[r].node;
        for (int j = 0; j < nlost; j++)
            holds |= was[r] == lost[j];
    }
    if (!holds) {
        /* a spare (or an idle node) is lost: nothing moves */
        size_t left = 0;
        for (int j = 0; j < nlost; j++)
            res->cluster->nodes[lost[j]].role = P3D_NODE_LOST;
        for (size_t i = 0; i < res->cluster->nnodes; i++)
            left += res->cluster->nodes[i].role == P3D_NODE_SPARE;
        char jf[160], jw[600];
        for (int j = 0; j < nlost; j++) {
            p3d_json_str(jf, sizeof jf, res->cluster->nodes[lost[j]].name);
            p3d_json_str(jw, sizeof jw, reason);
            p3d_event(events_fd, t0,
                      "\"event\": \"replace\", \"failed\": %s, \"spare\": null, \"moved_ranks\": [], "
                      "\"restart\": null, \"reason\": %s",
                      jf, jw);
        }
        if (asprintf(msg, "it ran no rank: nothing moves, %zu spare%s left", left, left == 1 ? "" : "s") < 0)
            *msg = NULL;
        free(was);
        return 1;
    }
    if (p3d_place_replace(o, res, lost, nlost, restart, &err) < 0) {
        *msg = err;
        free(was);
        return -1;
    }
    if (res->an && res->an->nerrors > 0) {
        char buf[2048];
        int k = snprintf(buf, sizeof buf, "the new placement fails %d error-level check%s:", res->an->nerrors,
                         res->an->nerrors == 1 ? "" : "s");
        for (size_t i = 0; i < res->an->nchecks && k < (int)sizeof buf; i++)
            if (res->an->checks[i].severity == P3D_SEV_ERROR)
                k += snprintf(buf + k, sizeof buf - (size_t)k, " %s: %s", res->an->checks[i].code,
                              res->an->checks[i].message);
        *msg = strdup(buf);
        free(was);
        return -1;
    }
    *was_out = was;
    return 0;
}

int p3d_replace_story(const p3d_plan_result *res, const int *was, const int *lost, int nlost, int restart,
                      const char *reason, int events_fd, double t0, char **msg)
{
    const p3d_cluster *c = res->cluster;
    int world = res->pl->world;
    int *moved = calloc((size_t)world + 1, sizeof *moved);
    char ranks[512], jr[600], jf[160], js[160], jw[600], story[1024];
    size_t k = 0;
    if (!moved) {
        p3d_err(msg, "out of memory");
        return -1;
    }
    story[0] = 0;
    for (int j = 0; j < nlost; j++) {
        int n = 0, spare = -1;
        for (int r = 0; r < world; r++)
            if (was[r] == lost[j]) {
                moved[n++] = r;
                spare = res->pl->ranks[r].node;
            }
        rank_ranges(moved, n, ranks, sizeof ranks);
        const char *sname = spare >= 0 ? c->nodes[spare].name : "";
        p3d_json_str(jf, sizeof jf, c->nodes[lost[j]].name);
        p3d_json_str(js, sizeof js, sname);
        p3d_json_str(jw, sizeof jw, reason);
        int jk = 0;
        jr[0] = 0;
        for (int q = 0; q < n && jk + 16 < (int)sizeof jr; q++)
            jk += snprintf(jr + jk, sizeof jr - (size_t)jk, "%s%d", q ? ", " : "", moved[q]);
        p3d_event(events_fd, t0,
                  "\"event\": \"replace\", \"failed\": %s, \"spare\": %s, \"moved_ranks\": [%s], "
                  "\"restart\": %d, \"reason\": %s",
                  jf, spare >= 0 ? js : "null", jr, restart, jw);
        if (spare >= 0) {
            /* where the spare is, as the policy ranks it: the same
             * multi-node NVLink domain, else the same rack, else another */
            const p3d_cnode *sn = &c->nodes[spare], *ln = &c->nodes[lost[j]];
            const char *rs = c->nracks ? c->racks[sn->rack] : "default";
            char where[160];
            if (ln->nvl_domain >= 0 && sn->nvl_domain == ln->nvl_domain && (size_t)sn->nvl_domain < c->nnvl_domains)
                snprintf(where, sizeof where, "same NVLink domain %s", c->nvl_domains[sn->nvl_domain]);
            else if (ln->nvl_domain >= 0)
                snprintf(where, sizeof where, "%s rack %s, outside NVLink domain %s",
                         sn->rack == ln->rack ? "same" : "other", rs,
                         (size_t)ln->nvl_domain < c->nnvl_domains ? c->nvl_domains[ln->nvl_domain] : "?");
            else
                snprintf(where, sizeof where, "%s rack %s", sn->rack == ln->rack ? "same" : "other", rs);
            k += (size_t)snprintf(story + k, sizeof story - k, "%srank%s %s of %s moved to spare %s (%s)",
                                  k ? "; " : "", n == 1 ? "" : "s", ranks, ln->name, sname, where);
        } else {
            k += (size_t)snprintf(story + k, sizeof story - k, "%snode %s ran no rank", k ? "; " : "",
                                  c->nodes[lost[j]].name);
        }
        if (k >= sizeof story)
            k = sizeof story - 1;
    }
    free(moved);
    *msg = strdup(story);
    return *msg ? 0 : -1;
}
