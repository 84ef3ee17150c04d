/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub_status.c — what the hub knows of the job's progress for slow-node
 * judgement: the controller's peer groups from the placement of now, the
 * spares left, and RUN_DIR/status.txt (`par3drun status`).
 */
#include "hub_int.h"
#include "rundir.h"
#include "termsafe.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The controller's peer groups (peers.c) from the placement of now: at
 * the start and after each replacement, where a spare took a lost node's
 * ranks and so its work. */
void hub_peers(hub *h)
{
    int *group = calloc((size_t)h->n + 1, sizeof *group);
    char(*what)[P3D_PEER_WHAT] = calloc((size_t)h->n + 1, sizeof *what);
    const char **wp = calloc((size_t)h->n + 1, sizeof *wp);
    if (group && what && wp &&
        p3d_peer_groups(h->L->job->pl, h->nodes, h->n, h->L->job->cluster->nnodes, group, what) == 0) {
        for (int i = 0; i < h->n; i++)
            wp[i] = what[i];
        p3d_ctl_set_peers(h->ctl, group, wp);
    }
    free(group);
    free(what);
    free(wp);
}

/* Spare nodes left to take a slow node's ranks: the agents not lost whose
 * node runs no rank in the placement of now (a multi-node leader's
 * cluster does not carry the roles; the placement does, everywhere). */
int hub_spares_left(void *ctx)
{
    hub *h = ctx;
    const p3d_placement *pl = h->L->job->pl;
    size_t nc = h->L->job->cluster->nnodes;
    unsigned char *used = calloc(nc + 1, 1);
    int n = 0;
    if (!used)
        return 0; /* out of memory: report only */
    for (int r = 0; r < pl->world; r++)
        if (pl->ranks[r].node >= 0 && (size_t)pl->ranks[r].node < nc)
            used[pl->ranks[r].node] = 1;
    for (int i = 0; i < h->n; i++)
        n += h->nodes[i] >= 0 && (size_t)h->nodes[i] < nc && !used[h->nodes[i]] && !p3d_ctl_is_dead(h->ctl, i);
    free(used);
    return n;
}

/* Nodes shown by the status view, slowest first. */
#define P3D_STATUS_TOP 20

static int by_ratio_desc(const void *x, const void *y, void *ctx)
{
    const double *r = ctx;
    double a = r[*(const int *)x], b = r[*(const int *)y];
    return (a < b) - (a > b);
}

/* RUN_DIR/status.txt, what `par3drun status RUN_DIR` shows (cmd_status.c):
 * the job's nodes, generation, spares, steps and its slowest nodes, from
 * the controller's figures; rewritten (atomically) after each judgement,
 * so at most once a --progress-interval, O(nodes log nodes). */
void hub_write_status(hub *h)
{
    int n = h->n, nfig = 0, lo = -1, hi = -1, nlost = 0, nslow = 0;
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    double *ratio = calloc((size_t)n + 1, sizeof *ratio);
    p3d_ctl_fig *fig = calloc((size_t)n + 1, sizeof *fig);
    char *s = NULL, *lost = NULL, *slow = NULL, *err = NULL;
    if (!idx || !ratio || !fig)
        goto out;
    for (int i = 0; i < n; i++) {
        if (p3d_ctl_is_dead(h->ctl, i) && nlost++ < 10)
            p3d_str_appendf(&lost, ", ", "%s", h->names[i]);
        if (!p3d_ctl_figures(h->ctl, i, &fig[i]))
            continue;
        idx[nfig++] = i;
        ratio[i] = fig[i].ratio;
        if (fig[i].slow && nslow++ < 10)
            p3d_str_appendf(&slow, ", ", "%s", h->names[i]);
        if (lo < 0 || fig[i].step < lo)
            lo = fig[i].step;
        if (fig[i].step > hi)
            hi = fig[i].step;
    }
    qsort_r(idx, (size_t)nfig, sizeof *idx, by_ratio_desc, ratio);
    h->status_gen = p3d_ctl_restarts(h->ctl);
    h->status_state = (int)p3d_ctl_get_state(h->ctl);
    int spares = hub_spares_left(h);
    p3d_str_appendf(&s, "", "job %s: generation %d (%d restart%s), state %s, %.1f s after the start\n",
                    h->L->job->job_id, p3d_ctl_restarts(h->ctl), p3d_ctl_restarts(h->ctl),
                    p3d_ctl_restarts(h->ctl) == 1 ? "" : "s", p3d_ctl_state_name(p3d_ctl_get_state(h->ctl)),
                    p3d_now() - h->L->t0);
    p3d_str_appendf(&s, "", "nodes: %d, %d reporting progress, %d spare%s left, %d lost%s%s%s%s\n", n, nfig, spares,
                    spares == 1 ? "" : "s", nlost, nlost ? " (" : "", lost ? lost : "", nlost > 10 ? ", ..." : "",
                    nlost ? ")" : "");
    int dp, full_dp, min_dp;
    p3d_ctl_width(h->ctl, &dp, &full_dp, &min_dp);
    if (min_dp > 0) {
        /* an elastic job: where it runs in its range, and how it got there */
        const char *wh = p3d_ctl_width_history(h->ctl);
        p3d_str_appendf(&s, "", "width: dp %d of %d (--min-dp %d)%s%s\n", dp, full_dp, min_dp, wh[0] ? "; " : "", wh);
    }
    if (p3d_ctl_restarts(h->ctl) > 0) {
        /* a recovery's two figures, as the end line gives them */
        char sp[40] = "not completed", su[40] = "not seen";
        if (p3d_ctl_recovery_max(h->ctl) >= 0)
            snprintf(sp, sizeof sp, "%.2f s", p3d_ctl_recovery_max(h->ctl));
        if (p3d_ctl_resumed_max(h->ctl) >= 0)
            snprintf(su, sizeof su, "%.2f s", p3d_ctl_resumed_max(h->ctl));
        p3d_str_appendf(&s, "", "slowest recovery: respawn %s, training resumed %s (after the failure was seen)\n", sp,
                        su);
    }
    if (nfig)
        p3d_str_appendf(&s, "", "steps: %d to %d\n", lo, hi);
    p3d_str_appendf(&s, "", "slow nodes this generation: %d%s%s%s%s\n", nslow, nslow ? " (" : "", slow ? slow : "",
                    nslow > 10 ? ", ..." : "", nslow ? ")" : "");
    if (nfig) {
        p3d_str_appendf(&s, "", "slowest nodes (median busy s per step of its ranks, vs its peers'):\n");
        p3d_str_appendf(&s, "", "  %-16s %8s %8s %8s %7s %6s  %s\n", "node", "step", "busy_s", "peers_s", "ratio",
                        "peers", "work");
        for (int k = 0; k < nfig && k < P3D_STATUS_TOP; k++) {
            const p3d_ctl_fig *f = &fig[idx[k]];
            p3d_str_appendf(&s, "", "  %-16s %8d %8.3f %8.3f %7.2f %6d  %s%s\n", h->names[idx[k]], f->step, f->busy,
                            f->peer_busy, f->ratio, f->npeers, f->what, f->slow ? " (slow)" : "");
        }
    }
    if (s && p3d_rundir_write(h->L->run_dir, "status.txt", s, strlen(s), &err) < 0 && !h->status_warned) {
        h->status_warned = 1;
        char line[512];
        snprintf(line, sizeof line, "par3drun: warning: cannot write the status view: %s\n", err ? err : "?");
        hub_note(h, line);
    }
out:
    free(idx);
    free(ratio);
    free(fig);
    free(s);
    free(lost);
    free(slow);
    free(err);
}
