/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_fault.c — fault classification before any remedy
 * (controller.h, "Fault classification"): the rank failures of one
 * window, the verdict — job, node or unknown — with its evidence in
 * events.jsonl and in plain words, and the remedy the verdict allows.
 *
 * Why a window: a bug in the program (every rank raises the same
 * exception at step 3) reaches the leader as one F packet per node within
 * milliseconds of each other; one bad node as a single F while the
 * others' ranks go on. Deciding on the first packet would read both the
 * same. Why the error line and not only the exit code: a peer of a dead
 * rank fails too (a closed connection, a collective's timeout), usually
 * with another error, and must not make a node's fault look like the
 * job's; two nodes failing with the same exit code, signal and error
 * line are the program failing, wherever it runs.
 */
#include "controller_int.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ctl_fault_init(p3d_ctl *c)
{
    int n = c->cfg.nagents > 0 ? c->cfg.nagents : 1, nr = c->cfg.nranks > 0 ? c->cfg.nranks : 0;
    int nrep = c->cfg.replica_of && c->cfg.nreplicas > 0 ? c->cfg.nreplicas : 0;
    /* at most one failure a rank, and one a node whose ranks could not start */
    c->flt.cap = nr + n;
    c->flt.f = calloc((size_t)c->flt.cap, sizeof *c->flt.f);
    c->flt.of = calloc((size_t)n, sizeof *c->flt.of);
    c->flt.whole = calloc((size_t)n, 1);
    c->flt.seen = calloc((size_t)n + (size_t)nrep, 1);
    c->flt.rank_in = calloc((size_t)nr + 1, 1);
    c->nranks_of = malloc((size_t)n * sizeof *c->nranks_of);
    if (!c->flt.f || !c->flt.of || !c->flt.whole || !c->flt.seen || !c->flt.rank_in || !c->nranks_of)
        return -1;
    for (int i = 0; i < n; i++)
        c->nranks_of[i] = -1;
    if (nrep && nr) {
        c->flt.replica = malloc((size_t)nr * sizeof *c->flt.replica);
        if (!c->flt.replica)
            return -1;
        for (int r = 0; r < nr; r++) /* out of range: not compared */
            c->flt.replica[r] = c->cfg.replica_of[r] >= 0 && c->cfg.replica_of[r] < nrep ? c->cfg.replica_of[r] : -1;
        c->flt.nreplicas = nrep;
    }
    return 0;
}

static void failure_free(struct ctl_failure *f)
{
    free(f->err);
    free(f->where);
    free(f->text);
    memset(f, 0, sizeof *f);
}

static void window_clear(p3d_ctl *c)
{
    for (int k = 0; k < c->flt.n; k++)
        failure_free(&c->flt.f[k]);
    c->flt.n = 0;
    memset(c->flt.rank_in, 0, (size_t)(c->cfg.nranks > 0 ? c->cfg.nranks : 0) + 1);
    memset(c->flt.of, 0, (size_t)(c->cfg.nagents > 0 ? c->cfg.nagents : 1) * sizeof *c->flt.of);
    memset(c->flt.whole, 0, (size_t)(c->cfg.nagents > 0 ? c->cfg.nagents : 1));
}

void ctl_fault_free(p3d_ctl *c)
{
    if (c->flt.f && c->flt.of && c->flt.whole && c->flt.rank_in)
        window_clear(c);
    failure_free(&c->flt.last);
    free(c->flt.f);
    free(c->flt.of);
    free(c->flt.whole);
    free(c->flt.seen);
    free(c->flt.rank_in);
    free(c->flt.replica);
    free(c->nranks_of);
}

/* A bounded copy (the packet's text is a peer's: bounded again here). */
static char *bounded(const char *s, size_t cap)
{
    return strndup(s ? s : "", cap);
}

/* An f packet's one-line field (ended by its newline in a decoded packet). */
static char *line_of(const char *s, size_t cap)
{
    size_t n = p3d_amsg_line(s);
    return strndup(s ? s : "", n < cap ? n : cap);
}

/* Already in the window: the same rank's failure (a rank fails once a
 * generation; a peer that says it twice is not counted twice), or a node
 * whose ranks could not start, twice. */
static int window_has(const p3d_ctl *c, int a, int rank)
{
    return rank >= 0 ? c->flt.rank_in[rank] : c->flt.whole[a];
}

void ctl_fault_add(p3d_ctl *c, const ctl_ev *e)
{
    const p3d_amsg *m = e->m;
    if (c->flt.n >= c->flt.cap || (m->rank >= 0 && m->rank >= c->cfg.nranks) || window_has(c, e->a, m->rank))
        return;
    struct ctl_failure *f = &c->flt.f[c->flt.n];
    if (!c->flt.n)
        c->flt.first_at = e->now;
    *f = (struct ctl_failure){.a = e->a,
                              .rank = m->rank,
                              .code = m->code,
                              .sig = m->sig,
                              .step = m->step >= 0 ? m->step : -1,
                              .errline = m->errline,
                              .errts = m->errts >= 0 ? m->errts : -1};
    f->err = line_of(m->err, P3D_AMSG_ERR_MAX);
    f->where = line_of(m->where, P3D_AMSG_WHERE_MAX);
    f->text = bounded(m->text, P3D_AMSG_MAX);
    if (!f->err || !f->where || !f->text) {
        failure_free(f); /* out of memory: this one is not compared */
        return;
    }
    c->flt.n++;
    c->flt.of[e->a]++;
    if (m->rank < 0)
        c->flt.whole[e->a] = 1;
    else
        c->flt.rank_in[m->rank] = 1;
}

/* The nodes that run ranks now (a spare runs none). */
static int ranked_live(const p3d_ctl *c)
{
    int n = 0;
    for (int i = 0; i < c->cfg.nagents; i++)
        n += !c->gone[i] && !c->dead[i] && c->nranks_of[i] != 0;
    return n;
}

/* Every rank of every node that runs ranks reported its failure (a node
 * whose ranks could not start, all of them at once): nothing more can
 * come, the verdict need not wait. A node that has not said how many
 * ranks it runs counts as in after one. */
int ctl_fault_all_in(const p3d_ctl *c)
{
    if (c->cfg.fault_window <= 0)
        return 1;
    for (int i = 0; i < c->cfg.nagents; i++) {
        if (c->gone[i] || c->dead[i] || c->nranks_of[i] == 0 || c->flt.whole[i])
            continue;
        if (c->flt.of[i] < (c->nranks_of[i] > 0 ? c->nranks_of[i] : 1))
            return 0;
    }
    return 1;
}

/* The same failure: exit code, signal and error line. */
static int same_way(const struct ctl_failure *x, const struct ctl_failure *y)
{
    return x->code == y->code && x->sig == y->sig && !strcmp(x->err, y->err);
}

/* "exit code 1, ValueError: bad batch (train.py:12), at step 3" */
static void failure_words(const struct ctl_failure *f, char *buf, size_t cap)
{
    char how[64], err[P3D_AMSG_ERR_MAX + P3D_AMSG_WHERE_MAX + 32] = "", step[32] = "";
    p3d_failure_how(f->code, f->sig, how, sizeof how);
    if (f->err[0] && f->where[0])
        snprintf(err, sizeof err, ", %s (%s:%d)", f->err, f->where, f->errline);
    else if (f->err[0])
        snprintf(err, sizeof err, ", %s", f->err);
    if (f->step >= 0)
        snprintf(step, sizeof step, ", at step %d", f->step);
    snprintf(buf, cap, "%s%s%s", how, err, step);
}

/* The window's failures as events.jsonl records, with the verdict. */
static void record_failures(p3d_ctl *c, const char *verdict)
{
    for (int k = 0; k < c->flt.n; k++) {
        const struct ctl_failure *f = &c->flt.f[k];
        char jn[160], je[P3D_AMSG_ERR_MAX * 6 + 8], jw[P3D_AMSG_WHERE_MAX * 6 + 8], step[16] = "null", rc[4096];
        if (f->step >= 0)
            snprintf(step, sizeof step, "%d", f->step);
        if (f->err[0] || f->where[0])
            snprintf(rc, sizeof rc, "{\"exception\": %s, \"file\": %s, \"line\": %d, \"time\": %d}",
                     ctl_jstr(f->err, je, sizeof je), ctl_jstr(f->where, jw, sizeof jw), f->errline, f->errts);
        else
            snprintf(rc, sizeof rc, "null");
        ctl_event(c,
                  "\"event\": \"failure\", \"node\": %s, \"rank\": %d, \"cause\": \"%s\", \"exit_code\": %d, "
                  "\"signal\": %d, \"fault\": \"%s\", \"step\": %s, \"root_cause\": %s",
                  ctl_jstr(c->cfg.names[f->a], jn, sizeof jn), f->rank,
                  f->rank >= 0 ? "rank failed" : "ranks could not start", f->code, f->sig, verdict, step, rc);
    }
}

void ctl_fault_lost(p3d_ctl *c)
{
    c->flt.verdict = "node";
}

void ctl_fault_consequences(p3d_ctl *c)
{
    record_failures(c, "node");
    window_clear(c);
}

/* The verdict on the window, with why (plain words) and the evidence. */
typedef struct verdict {
    const char *v;
    char why[1536];
    /* JSON lists of the failures like the first: their nodes (each once),
     * ranks and DP replicas (each once; [] when the placement says none) */
    char nodes[1024], ranks[512], replicas[512];
    int same, nodes_same, nodes_any, reps_same;
} verdict;

/* Appends ", x" (or "x" first) to a JSON list being built in buf; a list
 * too long for buf is cut (the counts say how many). */
static void list_add(char *buf, size_t cap, int *len, int first, const char *x)
{
    if (*len < (int)cap - (int)strlen(x) - 8)
        *len += snprintf(buf + *len, cap - (size_t)*len, "%s%s", first ? "" : ", ", x);
}

/* The evidence: how many failures are like the first (exit code, signal,
 * error line), from how many nodes and replicas, and from how many nodes
 * failures of any kind came. */
static void evidence(p3d_ctl *c, verdict *d)
{
    const struct ctl_failure *p = &c->flt.f[0];
    int n = c->cfg.nagents, nn = 1, nr = 1, np = 1;
    unsigned char *node_seen = c->flt.seen, *rep_seen = c->flt.seen + n;
    memset(c->flt.seen, 0, (size_t)n + (size_t)c->flt.nreplicas);
    *d = (verdict){0};
    strcpy(d->nodes, "[");
    strcpy(d->ranks, "[");
    strcpy(d->replicas, "[");
    for (int k = 0; k < c->flt.n; k++) /* 2: a failure like the first; 1: another */
        node_seen[c->flt.f[k].a] |= same_way(&c->flt.f[k], p) ? 2 : 1;
    for (int i = 0; i < n; i++)
        d->nodes_any += node_seen[i] != 0;
    for (int k = 0; k < c->flt.n; k++) {
        const struct ctl_failure *f = &c->flt.f[k];
        if (!same_way(f, p))
            continue;
        char x[160];
        if (node_seen[f->a] & 2) {
            node_seen[f->a] &= 1; /* listed once */
            list_add(d->nodes, sizeof d->nodes, &nn, !d->nodes_same++, ctl_jstr(c->cfg.names[f->a], x, sizeof x));
        }
        snprintf(x, sizeof x, "%d", f->rank);
        list_add(d->ranks, sizeof d->ranks, &nr, !d->same++, x);
        int rep = f->rank >= 0 && c->flt.replica ? c->flt.replica[f->rank] : -1;
        if (rep >= 0 && !rep_seen[rep]) {
            rep_seen[rep] = 1;
            snprintf(x, sizeof x, "%d", rep);
            list_add(d->replicas, sizeof d->replicas, &np, !d->reps_same++, x);
        }
    }
    strcat(d->nodes, "]");
    strcat(d->ranks, "]");
    strcat(d->replicas, "]");
}

/* The rules, in order: the same failure on two nodes or more; the same
 * failure after a restart at the same step; one node's failures while
 * the other nodes ran on (a node's crash takes every replica it holds
 * with it); the same failure in more than half the replicas (two at
 * least), which decides where no other node runs ranks, a one-node job;
 * else unknown. */
static void classify(p3d_ctl *c, verdict *d)
{
    const struct ctl_failure *p = &c->flt.f[0];
    char words[P3D_AMSG_ERR_MAX + P3D_AMSG_WHERE_MAX + 128];
    int live = ranked_live(c), nrep = c->flt.nreplicas;
    evidence(c, d);
    failure_words(p, words, sizeof words);
    if (d->nodes_same >= 2) {
        d->v = "job";
        snprintf(d->why, sizeof d->why, "the ranks of %d nodes failed the same way (%s): the program's own fault",
                 d->nodes_same, words);
    } else if (c->flt.have_last && same_way(p, &c->flt.last) && p->step >= 0 && p->step == c->flt.last.step) {
        d->v = "job";
        snprintf(d->why, sizeof d->why,
                 "rank %d failed as before the restart, at the same step (%s): the program's "
                 "own fault",
                 p->rank, words);
    } else if (c->flt.n == 1 && c->flt.early) {
        d->v = "unknown";
        snprintf(d->why, sizeof d->why,
                 "rank %d failed (%s); with no restart left the job stops without waiting to "
                 "compare it with the other ranks'",
                 p->rank, words);
    } else if (d->nodes_any == 1 && live >= 2) {
        d->v = "node";
        snprintf(d->why, sizeof d->why,
                 "only node %s's ranks failed (rank %d, %s) while the ranks of %d other "
                 "node%s ran on",
                 c->cfg.names[p->a], p->rank, words, live - 1, live == 2 ? "" : "s");
    } else if (d->reps_same >= 2 && 2 * d->reps_same > nrep) {
        d->v = "job";
        snprintf(d->why, sizeof d->why,
                 "%d ranks of %d of the %d data-parallel replicas failed the same way (%s): "
                 "the program's own fault",
                 d->same, d->reps_same, nrep, words);
    } else {
        d->v = "unknown";
        if (c->flt.n == 1)
            snprintf(d->why, sizeof d->why, "rank %d failed (%s) and no other rank failed to compare it with", p->rank,
                     words);
        else if (d->same == c->flt.n)
            snprintf(d->why, sizeof d->why,
                     "%d ranks of node %s failed the same way (%s), in %d of the %d "
                     "data-parallel replicas: not most of them",
                     d->same, c->cfg.names[p->a], words, d->reps_same, nrep);
        else
            snprintf(d->why, sizeof d->why, "%d ranks failed, not the same way (first rank %d: %s)", c->flt.n, p->rank,
                     words);
    }
}

/* The remedy a verdict gets now, in words; 1 when it is a stop. */
static int remedy_words(const p3d_ctl *c, const verdict *d, char *buf, size_t cap)
{
    int job = !strcmp(d->v, "job");
    if (c->gen >= c->cfg.max_restarts) {
        snprintf(buf, cap, "stop: no restart left (--max-restarts %d)", c->cfg.max_restarts);
        return 1;
    }
    if (job && c->flt.job_restarts >= c->cfg.max_job_restarts) {
        snprintf(buf, cap, "stop with the program's exit code: no job restart left (--max-job-restarts %d)",
                 c->cfg.max_job_restarts);
        return 1;
    }
    if (job)
        snprintf(buf, cap, "restart in place, no spare used and no node excluded (job restart %d of %d)",
                 c->flt.job_restarts + 1, c->cfg.max_job_restarts);
    else if (c->ops.health)
        snprintf(buf, cap, "--health-check on every node, then a restart in place or a spare");
    else
        snprintf(buf, cap, "restart in place");
    return 0;
}

/* No restart for the window's first failure: it is the root cause. */
static void stop_on(p3d_ctl *c, const struct ctl_failure *p, const char *line, double now)
{
    char how[64], *s = NULL;
    p3d_failure_how(p->code, p->sig, how, sizeof how);
    if (p->text[0]) {
        if (asprintf(&s, "%s%spar3drun: %s\n", p->text, p->text[strlen(p->text) - 1] == '\n' ? "" : "\n", line) < 0)
            s = NULL;
    } else if (asprintf(&s, "par3drun: root cause: %s %d on node %s %s (%s)\npar3drun: %s\n",
                        p->rank >= 0 ? "rank" : "node rank", p->rank >= 0 ? p->rank : p->a, c->cfg.names[p->a],
                        p->rank >= 0 ? "failed" : "could not start its ranks", how, line) < 0) {
        s = NULL;
    }
    ctl_set_summary(c, s);
    ctl_stop(c, SIGTERM, p->code > 0 ? p->code : P3D_EXIT_LOST, now);
}

/* The verdict d on the window with its remedy, recorded: the failures and
 * the fault record in events.jsonl, the story; line gets the plain words. */
static void record_verdict(p3d_ctl *c, const verdict *d, const char *remedy, char *line, size_t cap, double now)
{
    char jw[4096], je[P3D_AMSG_ERR_MAX * 6 + 8], step[16] = "null";
    const struct ctl_failure *p = &c->flt.f[0];
    c->flt.verdict = d->v;
    record_failures(c, d->v);
    if (p->step >= 0)
        snprintf(step, sizeof step, "%d", p->step);
    ctl_event(c,
              "\"event\": \"fault\", \"fault\": \"%s\", \"why\": %s, \"nodes\": %s, \"ranks\": %s, "
              "\"replicas\": %s, \"exit_code\": %d, \"signal\": %d, \"error\": %s, \"step\": %s, \"remedy\": \"%s\", "
              "\"window_s\": %.3f",
              d->v, ctl_jstr(d->why, jw, sizeof jw), d->nodes, d->ranks, d->replicas, p->code, p->sig,
              ctl_jstr(p->err, je, sizeof je), step, remedy, now - c->flt.first_at);
    snprintf(line, cap, "fault: %s: %s; %s", d->v, d->why, remedy);
    ctl_story(c, now, "%s", line);
}

void ctl_fault_cut(p3d_ctl *c, const char *remedy, double now)
{
    if (!c->flt.n)
        return;
    verdict d;
    char line[2048];
    classify(c, &d);
    record_verdict(c, &d, remedy, line, sizeof line, now);
    ctl_say(c, "par3drun: %s\n", line);
    window_clear(c);
}

void ctl_fault_decide(p3d_ctl *c, double now)
{
    if (!c->flt.n)
        return;
    verdict d;
    char remedy[256], line[2048];
    classify(c, &d);
    int stop = remedy_words(c, &d, remedy, sizeof remedy);
    const struct ctl_failure *p = &c->flt.f[0];
    record_verdict(c, &d, remedy, line, sizeof line, now);
    /* said now unless the summary says it at the end (a stop), or there
     * was nothing to classify (one node's first failure: as before) */
    if (!stop && !(!strcmp(d.v, "unknown") && c->flt.n == 1 && ranked_live(c) < 2))
        ctl_say(c, "par3drun: %s\n", line);
    /* the repeat rule compares the next window's first failure with this one */
    failure_free(&c->flt.last);
    c->flt.last = *p;
    c->flt.have_last = 1;
    c->flt.f[0] = (struct ctl_failure){0};
    struct ctl_failure *first = &c->flt.last;
    c->pend.a = first->a;
    c->pend.rank = first->rank;
    c->pend.code = first->code;
    c->pend.sig = first->sig;
    if (!c->recovering)
        c->fail_seen = now;
    c->recovering = 1;
    c->flt.early = 0;
    window_clear(c);
    if (stop) {
        stop_on(c, first, line, now);
        return;
    }
    if (!strcmp(d.v, "job")) {
        int gen = c->gen;
        ctl_restart_in_place(c, now);
        c->flt.job_restarts += c->gen > gen;
        return;
    }
    if (c->ops.health && c->ops.health(c->ops.ctx, c->dead) == 0) {
        memset(c->chk.lostq, 0, (size_t)c->cfg.nagents);
        c->chk.health_at = now + c->cfg.health_timeout + 2 * P3D_CTL_SLACK;
        ctl_go(c, P3D_CTL_CHECKING);
        return;
    }
    ctl_restart_in_place(c, now);
}
