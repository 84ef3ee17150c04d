/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub_health.c — the hub's --health-check rounds: every live node checked
 * at once on the hub's loop (remote nodes asked with C, their H answers
 * taken as they come, local checks run by health.c), bounded by
 * --health-check-timeout + P3D_CTL_SLACK; the result goes to the
 * controller (or, before the first start, to p3d_hub_run).
 */
#include "hub_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hub_round_free(hub *h, hround *r)
{
    if (!r)
        return;
    p3d_health_cancel(r->job);
    p3d_loop_cancel(h->loop, r->timer);
    free(r->res);
    free(r->ask);
    free(r->gone);
    free(r->skip);
    free(r);
}

/* Out of memory where a round's result is due: every node counts as
 * failed rather than none (done gets NULL when even that array cannot be
 * had: the same verdict). */
static void all_failed(hub *h, void (*done)(hub *, unsigned char *))
{
    unsigned char *b = malloc((size_t)h->n + 1);
    if (b)
        memset(b, 1, (size_t)h->n + 1);
    done(h, b);
    free(b);
}

/* Every answer is in, or the time is up: each node's result said and
 * recorded, and the round's done with the failed ones. */
static void round_finish(hub *h)
{
    hround *r = h->round;
    h->round = NULL;
    unsigned char *bad = calloc((size_t)h->n + 1, 1);
    for (int i = 0; i < h->n; i++) {
        if (r->gone[i])
            continue;
        if (r->ask[i] == 1)
            r->res[i].seconds = p3d_now() - r->t;
        p3d_health_event(h->L->events_fd, h->L->t0, h->names[i], &r->res[i]);
        if (!r->res[i].ok) {
            char line[P3D_HEALTH_HOW + 128];
            snprintf(line, sizeof line, "par3drun: node %s failed its --health-check (%s)\n", h->names[i],
                     r->res[i].how);
            hub_say(h, line);
            if (bad)
                bad[i] = 1;
        }
    }
    void (*done)(hub *, unsigned char *) = r->done;
    hub_round_free(h, r);
    if (bad)
        done(h, bad);
    else
        all_failed(h, done);
    free(bad);
}

static void round_check(hub *h)
{
    hround *r = h->round;
    if (!r || r->job)
        return;
    for (int i = 0; i < h->n; i++)
        if (r->ask[i] == 1)
            return;
    round_finish(h);
}

static void round_check_timer(p3d_loop *lp, void *ctx)
{
    (void)lp;
    round_check(ctx);
}

static void round_local_done(void *ctx, int nbad)
{
    hub *h = ctx;
    (void)nbad;
    if (h->round)
        h->round->job = NULL;
    round_check(h);
}

/* --health-check-timeout + P3D_CTL_SLACK: what has not answered failed
 * (its result says so already); local checks are bounded by their own
 * timeout, so they are over. */
static void round_timeout(p3d_loop *lp, void *ctx)
{
    hub *h = ctx;
    (void)lp;
    hround *r = h->round;
    if (!r)
        return;
    r->timer = 0;
    if (r->job) {
        p3d_health_cancel(r->job);
        r->job = NULL;
        for (int i = 0; i < h->n; i++)
            if (!r->skip[i] && !r->res[i].ok && !r->res[i].how[0])
                snprintf(r->res[i].how, sizeof r->res[i].how, "timed out");
    }
    round_finish(h);
}

/* A remote node's answer (H) to the round. */
void hub_round_answer(hub *h, int a, const p3d_amsg *m)
{
    hround *r = h->round;
    if (!r || m->seq != r->seq || r->ask[a] != 1)
        return; /* an answer to an earlier request, too late */
    r->ask[a] = 2;
    p3d_health_res *res = &r->res[a];
    res->ok = m->ok;
    res->seconds = p3d_now() - r->t;
    p3d_health_set_how(res, m->text && m->text[0] ? m->text : m->ok ? "passed" : "failed");
    if (m->ok && !strcmp(res->how, P3D_HEALTH_NONE) && !h->health_warned) {
        char line[256];
        snprintf(line, sizeof line,
                 "par3drun: warning: node %s has no --health-check of its own (it counts as healthy); give every "
                 "node the same options\n",
                 h->names[a]);
        hub_note(h, line);
        h->health_warned = 1;
    }
    round_check(h);
}

/* Link a is gone during the round: its check failed. */
void hub_round_lost(hub *h, int a)
{
    hround *r = h->round;
    if (!r || r->ask[a] != 1)
        return;
    r->ask[a] = 2;
    r->res[a].ok = 0;
    p3d_health_set_how(&r->res[a], "the connection ended during the check");
    round_check(h);
}

/* --health-check on every live node, all at once, on the loop: the remote
 * nodes are asked first (wire.h's C; each runs its own CMD,
 * health.c) so that they check while the local ones do; their answers (H)
 * are awaited up to --health-check-timeout + P3D_CTL_SLACK, no answer by
 * then is a failure. done(h, bad) runs from the loop at the end. */
int hub_health(hub *h, const unsigned char *dead, void (*done)(hub *, unsigned char *))
{
    const p3d_opts *o = h->L->o;
    hround *r = calloc(1, sizeof *r);
    if (r) {
        r->res = calloc((size_t)h->n + 1, sizeof *r->res);
        r->skip = calloc((size_t)h->n + 1, 1);
        r->ask = calloc((size_t)h->n + 1, 1);
        r->gone = calloc((size_t)h->n + 1, 1);
    }
    if (!r || !r->res || !r->skip || !r->ask || !r->gone) {
        hub_round_free(h, r);
        return -1;
    }
    hub_round_free(h, h->round); /* a newer request replaces an older round */
    h->round = r;
    r->done = done;
    r->t = p3d_now();
    r->seq = ++h->health_seq;
    char pkt[64];
    p3d_amsg c = {.type = P3D_AM_CHECK, .seq = r->seq};
    int len = p3d_amsg_encode(&c, pkt, sizeof pkt);
    int nlocal = 0;
    for (int i = 0; i < h->n; i++) {
        /* a connection already gone is reported lost by the loop */
        r->gone[i] = (dead && dead[i]) || (h->ln[i].remote && (h->ln[i].fd < 0 || h->ln[i].broken));
        r->skip[i] = r->gone[i] || h->ln[i].remote;
        nlocal += !r->skip[i];
        if (r->gone[i] || !h->ln[i].remote)
            continue;
        r->ask[i] = 1;
        r->res[i].ok = 0;
        snprintf(r->res[i].how, sizeof r->res[i].how, "no answer within %g s", o->health_check_timeout + P3D_CTL_SLACK);
        if (len > 0)
            hub_send_one(h, i, pkt, (size_t)len);
    }
    r->timer = p3d_loop_at(h->loop, r->t + o->health_check_timeout + P3D_CTL_SLACK, round_timeout, h);
    if (nlocal)
        r->job = p3d_health_start(h->loop, o, h->names, h->n, r->skip, r->res, round_local_done, h);
    /* nothing left to wait for (no node, or the checks could not start:
     * res says why): the round ends from the loop, never from here */
    if (!r->timer || !p3d_loop_at(h->loop, p3d_now(), round_check_timer, h)) {
        h->round = NULL;
        hub_round_free(h, r);
        return -1;
    }
    return 0;
}

/* ops.health: the controller must not block, so the round starts from the
 * loop (hub_prepare), which hands its result back. */
int hub_health_start(void *ctx, const unsigned char *dead)
{
    hub *h = ctx;
    (void)dead;
    h->health_due = 1;
    return 0;
}

void hub_pre_done(hub *h, unsigned char *bad)
{
    if (bad)
        memcpy(h->pre_bad, bad, (size_t)h->n);
    else
        memset(h->pre_bad, 1, (size_t)h->n);
    h->pre_done = 1;
}

static void hub_health_result(hub *h, unsigned char *bad)
{
    p3d_ctl_health_result(h->ctl, bad, p3d_now());
}

void hub_health_due(hub *h)
{
    if (!h->health_due)
        return;
    h->health_due = 0;
    unsigned char *dead = calloc((size_t)h->n + 1, 1);
    for (int i = 0; dead && i < h->n; i++)
        dead[i] = (unsigned char)p3d_ctl_is_dead(h->ctl, i);
    if (!dead || hub_health(h, dead, hub_health_result) < 0)
        all_failed(h, hub_health_result);
    free(dead);
}

/* Reads every packet agent a has queued (local). Returns -1 at EOF. */
