/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_slow.c — slow nodes: which node holds the whole job back,
 * judged from the agents' progress summaries (wire.h's P), and,
 * with --slow-node replace, its ranks moved to a spare at a checkpoint.
 *
 * In synchronous training every rank waits for the slowest, so step times
 * say nothing; the ranks' own busy time (compute, without waiting on
 * peers) does. A node is compared only with the nodes whose ranks do the
 * same work (its peer group: the same pp stage and TP/CP/EP coordinates
 * across DP replicas, set by the transport from the placement), never
 * with the job as a whole: pipeline stages differ by design.
 *
 * Every --progress-interval, in RUNNING, each node that sent a summary
 * since the last judgement is judged: slow when its median busy time is
 * more than --slow-factor times the median of its group (itself in it,
 * judge.h: one node reporting a tiny busy time cannot make its honest
 * peers look slow), for --slow-windows judgements in a row. A group of
 * fewer than three nodes is not judged ("cannot judge" is said once), and
 * a busy time outside physical bounds is refused with the reason: that
 * node is neither judged nor part of its group's reference. Cost: one
 * sort of the nodes by (group, busy) per interval, O(1) per node after it.
 *
 * A slow node is reported once per generation (a line, a slow event).
 * With --slow-node replace, once its ranks report a checkpoint newer than
 * the one they had at the detection, or --slow-wait seconds after it, the
 * detector posts a SLOW event: the table's handler (controller_on.c)
 * replaces it like a node that failed its health check — unless no spare
 * or restart is left, or it is the leader's own node: then it is only
 * reported; a slow node never stops a job. The detector itself never
 * moves the job.
 */
#include "controller_int.h"
#include "preflight.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ctl_slow_init(p3d_ctl *c)
{
    int n = c->cfg.nagents > 0 ? c->cfg.nagents : 1;
    c->prog = calloc((size_t)n, sizeof *c->prog);
    c->order = calloc((size_t)n, sizeof *c->order);
    if (!c->prog || !c->order)
        return -1;
    for (int i = 0; i < n; i++) {
        c->prog[i].gen = -1;
        c->prog[i].group = -1;
    }
    return 0;
}

void ctl_slow_free(p3d_ctl *c)
{
    free(c->prog);
    free(c->order);
}

void p3d_ctl_set_peers(p3d_ctl *c, const int *group, const char *const *what)
{
    for (int a = 0; a < c->cfg.nagents; a++) {
        c->prog[a].group = group ? group[a] : -1;
        snprintf(c->prog[a].what, sizeof c->prog[a].what, "%s", what && what[a] ? what[a] : "");
    }
}

int p3d_ctl_slow_count(const p3d_ctl *c)
{
    return c->nslow;
}

unsigned p3d_ctl_judgements(const p3d_ctl *c)
{
    return c->njudged;
}

int p3d_ctl_figures(const p3d_ctl *c, int a, p3d_ctl_fig *f)
{
    if (!ctl_agent_ok(c, a) || c->prog[a].gen != c->gen)
        return 0;
    const struct ctl_prog *p = &c->prog[a];
    *f = (p3d_ctl_fig){.step = p->step,
                       .ckpt = p->ckpt,
                       .npeers = p->npeers,
                       .busy = p->busy,
                       .peer_busy = p->peer_busy,
                       .ratio = p->npeers ? p->ratio : 0,
                       .slow = p->flagged == c->gen + 1 || p->flagged == -(c->gen + 1),
                       .what = p->what};
    return 1;
}

const char *ctl_slow_cannot(const p3d_ctl *c, int a, char *buf, size_t cap)
{
    if (a == c->cfg.leader)
        return "it is the leader's own node";
    if (!c->ops.replace || !c->ops.respawn)
        return "this job cannot replace nodes";
    if (c->gen >= c->cfg.max_restarts) {
        snprintf(buf, cap, "no restart left (--max-restarts %d)", c->cfg.max_restarts);
        return buf;
    }
    if (!c->ops.spares_left || c->ops.spares_left(c->ops.ctx) < 1)
        return "no spare left";
    return NULL;
}

/* The story of agent a's slowness, for the lines and the reason. */
void ctl_slow_text(const p3d_ctl *c, int a, char *buf, size_t cap)
{
    const struct ctl_prog *p = &c->prog[a];
    snprintf(buf, cap, "node %s is %.2fx slower than its %d peer%s (busy %.2f s vs %.2f s per step%s%s)",
             c->cfg.names[a], p->ratio, p->npeers, p->npeers == 1 ? "" : "s", p->busy, p->peer_busy,
             p->what[0] ? ", " : "", p->what);
}

static void report(p3d_ctl *c, int a, double now)
{
    struct ctl_prog *p = &c->prog[a];
    char text[320], why[96], jn[160], jw[96], ja[200];
    double for_s = p->windows * c->cfg.progress_interval;
    p->flagged = c->gen + 1;
    p->flag_at = now;
    p->flag_ckpt = p->ckpt;
    c->nslow++;
    ctl_slow_text(c, a, text, sizeof text);
    ctl_say(c, "par3drun: %s for %.6g s\n", text, for_s);
    const char *no = c->cfg.slow_replace ? ctl_slow_cannot(c, a, why, sizeof why) : NULL;
    char action[160];
    if (!c->cfg.slow_replace)
        snprintf(action, sizeof action, "report");
    else if (no)
        snprintf(action, sizeof action, "report (not replaced: %s)", no);
    else
        snprintf(action, sizeof action, "replace");
    if (c->cfg.slow_replace && no) {
        ctl_say(c, "par3drun: node %s is not replaced: %s (--slow-node replace reports only then)\n", c->cfg.names[a],
                no);
        p->flagged = -(c->gen + 1); /* said; spares only ever become fewer */
    } else if (c->cfg.slow_replace && p->ckpt >= 0)
        ctl_say(c,
                "par3drun: node %s: its ranks move to a spare after their next checkpoint (newer than step %d), "
                "at the latest in %g s (--slow-wait)\n",
                c->cfg.names[a], p->ckpt, c->cfg.slow_wait);
    else if (c->cfg.slow_replace)
        ctl_say(c, "par3drun: node %s: its ranks report no checkpoint; they move to a spare in %g s (--slow-wait)\n",
                c->cfg.names[a], c->cfg.slow_wait);
    ctl_event(c,
              "\"event\": \"slow\", \"node\": %s, \"ratio\": %.3f, \"busy_s\": %.6f, \"peer_busy_s\": %.6f, "
              "\"peers\": %d, \"work\": %s, \"step\": %d, \"ckpt\": %d, \"windows\": %d, \"seconds\": %.3f, "
              "\"action\": %s",
              ctl_jstr(c->cfg.names[a], jn, sizeof jn), p->ratio, p->busy, p->peer_busy, p->npeers,
              ctl_jstr(p->what, jw, sizeof jw), p->step, p->ckpt, p->windows, for_s, ctl_jstr(action, ja, sizeof ja));
}

/* --slow-node replace: agent a's time has come (why: the trigger). Acted
 * on, whatever comes of it: the table decides. */
static void due(p3d_ctl *c, int a, const char *why)
{
    c->prog[a].flagged = -(c->gen + 1);
    ctl_post_slow(c, a, why);
}

static int by_group_busy(const void *x, const void *y, void *ctx)
{
    const p3d_ctl *c = ctx;
    const struct ctl_prog *a = &c->prog[*(const int *)x], *b = &c->prog[*(const int *)y];
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    return (a->busy > b->busy) - (a->busy < b->busy);
}

enum { JUDGE_SAID_REFUSED = 1, JUDGE_SAID_CANNOT = 2 };

/* A busy time a rank's own work can take: > 0 and below judge.h's bound. */
static int busy_physical(const struct ctl_prog *p)
{
    return p->busy > 0 && p->busy <= P3D_JUDGE_BUSY_MAX;
}

/* Agent a is not judged this time; said once a job (what, why). */
static void not_judged(p3d_ctl *c, int a, unsigned what, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void not_judged(p3d_ctl *c, int a, unsigned what, const char *fmt, ...)
{
    struct ctl_prog *p = &c->prog[a];
    p->windows = 0;
    if (p->said & what)
        return;
    p->said |= what;
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    ctl_say(c, "par3drun: slow-node detection: node %s: %s (said once)\n", c->cfg.names[a], text);
}

/* A group of m < P3D_JUDGE_MIN nodes (run[0..m)): none judged; said once
 * a job, for the group, not for each of its nodes. */
static void cannot_judge(p3d_ctl *c, const int *run, int m)
{
    int told = 1;
    for (int t = 0; t < m; t++)
        told &= (c->prog[run[t]].said & JUDGE_SAID_CANNOT) != 0;
    for (int t = 0; t < m; t++) {
        c->prog[run[t]].fresh = 0;
        c->prog[run[t]].windows = 0;
        c->prog[run[t]].said |= JUDGE_SAID_CANNOT;
    }
    if (told)
        return;
    const struct ctl_prog *p = &c->prog[run[0]];
    ctl_say(c,
            "par3drun: slow-node detection cannot judge node %s%s%s%s%s%s: %d node%s do%s the same work (at least %d "
            "needed; with two, either could be the slow one) (said once)\n",
            c->cfg.names[run[0]], m > 1 ? " and " : "", m > 1 ? c->cfg.names[run[1]] : "", p->what[0] ? " (" : "",
            p->what, p->what[0] ? ")" : "", m, m == 1 ? "" : "s", m == 1 ? "es" : "", P3D_JUDGE_MIN);
}

/* One judgement of every node that reported since the last one. */
static void judge(p3d_ctl *c, double now)
{
    int k = 0;
    c->njudged++;
    for (int a = 0; a < c->cfg.nagents; a++) {
        struct ctl_prog *p = &c->prog[a];
        if (p->gen != c->gen || c->dead[a] || c->gone[a] || p->group < 0) {
            p->windows = 0;
            continue;
        }
        if (!busy_physical(p)) {
            if (p->fresh)
                not_judged(c, a, JUDGE_SAID_REFUSED,
                           "busy %g s per step is outside physical bounds (expected more than 0 and at most %g s); "
                           "not judged, not a reference for its peers",
                           p->busy, P3D_JUDGE_BUSY_MAX);
            p->fresh = 0;
            continue;
        }
        c->order[k++] = a;
    }
    qsort_r(c->order, (size_t)k, sizeof *c->order, by_group_busy, c);
    for (int i = 0; i < k;) {
        int j = i;
        while (j < k && c->prog[c->order[j]].group == c->prog[c->order[i]].group)
            j++;
        int m = j - i, ref = p3d_judge_pick(m, 1);
        if (ref < 0) {
            int any = 0;
            for (int t = 0; t < m; t++)
                any |= c->prog[c->order[i + t]].fresh;
            if (any)
                cannot_judge(c, c->order + i, m);
            i = j;
            continue;
        }
        for (int t = 0; t < m; t++) {
            struct ctl_prog *p = &c->prog[c->order[i + t]];
            if (!p->fresh)
                continue;
            p->fresh = 0;
            double med = c->prog[c->order[i + ref]].busy;
            if (med < P3D_SLOW_MIN_BUSY) {
                /* steps so short that timer and scheduling noise is all
                 * a ratio would show */
                p->windows = 0;
                continue;
            }
            p->ratio = p->busy / med;
            p->peer_busy = med;
            p->npeers = m - 1;
            p->windows = p->ratio > c->cfg.slow_factor ? p->windows + 1 : 0;
            if (p->windows >= c->cfg.slow_windows && p->flagged != c->gen + 1 && p->flagged != -(c->gen + 1))
                report(c, c->order[i + t], now);
        }
        i = j;
    }
}

/* A progress summary; 0 when it is of a generation that is over. */
int ctl_slow_record(p3d_ctl *c, const ctl_ev *e)
{
    const p3d_amsg *m = e->m;
    struct ctl_prog *p = &c->prog[e->a];
    /* a checkpoint written is one, whatever generation wrote it */
    if (m->step > c->step_max)
        c->step_max = m->step;
    if (m->ckpt > c->ckpt_max)
        c->ckpt_max = m->ckpt;
    if (m->gen != c->gen)
        return 0;
    if (p->gen != c->gen) {
        p->windows = 0;
        p->flagged = 0;
        p->npeers = 0;
        p->ratio = 0;
    }
    p->gen = m->gen;
    p->step = m->step;
    p->ckpt = m->ckpt;
    p->nranks = m->nranks;
    p->busy = m->busy_us / 1e6;
    p->fresh = 1;
    return 1;
}

void ctl_slow_ckpt(p3d_ctl *c, int a)
{
    const struct ctl_prog *p = &c->prog[a];
    if (c->cfg.slow_replace && p->flagged == c->gen + 1 && p->ckpt > p->flag_ckpt) {
        char trig[96];
        snprintf(trig, sizeof trig, "after its ranks' checkpoint of step %d", p->ckpt);
        due(c, a, trig);
    }
}

void ctl_slow_tick(p3d_ctl *c, double now)
{
    if (c->cfg.progress_interval <= 0)
        return;
    if (!c->eval_at) {
        c->eval_at = now + c->cfg.progress_interval;
    } else if (now >= c->eval_at) {
        /* late (a pause, a restart in between): one judgement, of what
         * came meanwhile, and the next a whole interval on */
        c->eval_at += c->cfg.progress_interval;
        if (c->eval_at <= now)
            c->eval_at = now + c->cfg.progress_interval;
        judge(c, now);
    }
    for (int a = 0; c->cfg.slow_replace && a < c->cfg.nagents; a++) {
        const struct ctl_prog *p = &c->prog[a];
        if (p->flagged == c->gen + 1 && p->gen == c->gen && now >= p->flag_at + c->cfg.slow_wait) {
            char trig[96];
            snprintf(trig, sizeof trig, "%g s after the detection with no newer checkpoint (--slow-wait)",
                     c->cfg.slow_wait);
            due(c, a, trig);
        }
    }
}

double ctl_slow_deadline(const p3d_ctl *c)
{
    if (c->cfg.progress_interval <= 0 || c->state != P3D_CTL_RUNNING || !c->eval_at)
        return 0;
    double d = c->eval_at;
    for (int a = 0; c->cfg.slow_replace && a < c->cfg.nagents; a++) {
        const struct ctl_prog *p = &c->prog[a];
        if (p->flagged == c->gen + 1 && p->gen == c->gen && p->flag_at + c->cfg.slow_wait < d)
            d = p->flag_at + c->cfg.slow_wait;
    }
    return d;
}
