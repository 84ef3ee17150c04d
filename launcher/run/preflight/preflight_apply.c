/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preflight_apply.c — --preflight on a placed job (launch, dry run): the
 * nodes it benchmarks (those with ranks, and the spares), the benchmark
 * (preflight.c), and the excluded nodes' ranks moved to spares
 * (place_replace.c, as for a node that failed its --health-check before
 * the start).
 */
#include "plan.h"
#include "preflight.h"
#include "termsafe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int p3d_preflight_nodes(const p3d_opts *o, const p3d_plan_result *r, int **nodes, const char ***names, char **err)
{
    const p3d_cluster *c = r->cluster;
    int n = 0;
    unsigned char *has = calloc(c->nnodes + 1, 1);
    *nodes = calloc(c->nnodes + 1, sizeof **nodes);
    *names = calloc(c->nnodes + 1, sizeof **names);
    if (!has || !*nodes || !*names) {
        free(has);
        return p3d_err(err, "out of memory");
    }
    for (int k = 0; k < r->pl->world; k++)
        has[r->pl->ranks[k].node] = 1;
    /* the spares are benchmarked too: a slow one must not take a rank */
    for (size_t i = 0; i < c->nnodes; i++)
        if (has[i] || c->nodes[i].role == P3D_NODE_SPARE) {
            (*names)[n] = c->nodes[i].name;
            (*nodes)[n++] = (int)i;
        }
    free(has);
    if (n > 1 && !o->emulate)
        return p3d_err(err,
                       "--preflight: the placement spans %d nodes of %s; the preflight runs them on this host "
                       "with --emulate (a preflight across the hosts of a multi-node rendezvous is not "
                       "done in this version)",
                       n, o->cluster ? o->cluster : "the cluster");
    return n;
}

/* Before the placement is used: the preflight on its nodes, its events,
 * a line per excluded node, and the excluded nodes' ranks moved to spares
 * (place_replace.c, as for a node that failed its --health-check before
 * the start; restart 0: nothing ran yet). */
int p3d_preflight_apply(const p3d_opts *o, p3d_plan_result *r, int events_fd, double t0, FILE *table, char **json)
{
    char *err = NULL, *msg = NULL;
    int rc = P3D_EXIT_BADINPUT, *nodes = NULL, *lost = NULL, *was = NULL, nlost = 0, n;
    const char **names = NULL;
    p3d_preflight pf = {0};
    *json = NULL;
    if ((n = p3d_preflight_nodes(o, r, &nodes, &names, &err)) < 0) {
        fputs("par3drun: ", stderr);
        p3d_term_fputs(err ? err : "out of memory", stderr);
        fputc('\n', stderr);
        free(err);
        goto out;
    }
    if (p3d_preflight_run(o, names, n, &pf, &err) < 0) {
        fputs("par3drun: ", stderr);
        p3d_term_fputs(err ? err : "out of memory", stderr);
        fputc('\n', stderr);
        free(err);
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    p3d_preflight_events(events_fd, t0, &pf);
    if (table)
        p3d_preflight_table(&pf, table);
    *json = p3d_preflight_json(&pf);
    rc = P3D_EXIT_OK;
    if (!pf.nexcluded)
        goto out;
    lost = calloc((size_t)n + 1, sizeof *lost);
    for (int i = 0; lost && i < n; i++)
        if (pf.nodes[i].excluded) {
            lost[nlost++] = nodes[i];
            char line[512];
            snprintf(line, sizeof line, "par3drun: node %s failed the --preflight (%s): excluded\n", names[i],
                     pf.nodes[i].why);
            p3d_term_fputs(line, stderr);
        }
    char why[256];
    const char *first = "?";
    for (int i = 0; i < n; i++)
        if (pf.nodes[i].excluded) {
            first = names[i];
            break;
        }
    if (nlost > 1)
        snprintf(why, sizeof why, "%d nodes failed the --preflight (%s and %d more)", nlost, first, nlost - 1);
    else
        snprintf(why, sizeof why, "node %s failed the --preflight", first);
    int e = lost ? p3d_replace_place(o, r, lost, nlost, 0, why, events_fd, t0, &was, &msg) : -1;
    if (e == 0) {
        free(msg);
        msg = NULL;
        e = p3d_replace_story(r, was, lost, nlost, 0, why, events_fd, t0, &msg);
    }
    if (e < 0) {
        char line[1024];
        snprintf(line, sizeof line, "par3drun: %s; cannot replace %s: %s\n", why, nlost == 1 ? "it" : "them",
                 msg    ? msg
                 : lost ? "no spare (--spares K keeps some)"
                        : "out of memory");
        p3d_term_fputs(line, stderr);
        rc = P3D_EXIT_FAIL;
    } else {
        char line[1024];
        snprintf(line, sizeof line, "par3drun: %s; %s\n", why, msg ? msg : "replaced");
        p3d_term_fputs(line, stderr);
    }
out:
    free(msg);
    free(was);
    free(lost);
    free(nodes);
    free(names);
    p3d_preflight_free(&pf);
    return rc;
}
