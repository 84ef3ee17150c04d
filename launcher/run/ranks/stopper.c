/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stopper.c — "stop with grace, then kill", the one rule the agent (its
 * ranks) and the relay (its agent) follow: a stop begins, a timer on the
 * loop ends what is left by force when the grace is over; a second stop
 * may only bring that moment closer.
 */
#include "ranks.h"

void p3d_stopper_init(p3d_stopper *s, p3d_loop *l, void (*kill)(void *ctx), void *ctx)
{
    *s = (p3d_stopper){.loop = l, .kill = kill, .ctx = ctx};
}

static void stopper_due(p3d_loop *l, void *ctx)
{
    p3d_stopper *s = ctx;
    (void)l;
    s->timer = 0;
    s->killed = 1;
    s->kill(s->ctx);
}

int p3d_stopper_begin(p3d_stopper *s, double grace)
{
    int first = !s->stopping;
    s->stopping = 1;
    if (s->killed)
        return first;
    double at = p3d_now() + (grace > 0 ? grace : 0);
    if (grace <= 0) {
        p3d_loop_cancel(s->loop, s->timer);
        s->timer = 0;
        s->kill_at = at;
        s->killed = 1;
        s->kill(s->ctx);
        return first;
    }
    if (s->timer && s->kill_at <= at)
        return first;
    p3d_loop_cancel(s->loop, s->timer);
    s->kill_at = at;
    s->timer = p3d_loop_at(s->loop, at, stopper_due, s);
    if (!s->timer) { /* out of memory: no grace rather than no kill */
        s->killed = 1;
        s->kill(s->ctx);
    }
    return first;
}

void p3d_stopper_clear(p3d_stopper *s)
{
    p3d_loop_cancel(s->loop, s->timer);
    s->timer = 0;
    s->stopping = s->killed = 0;
    s->kill_at = 0;
}
