/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_elastic.c — the job's width (docs/launch.md, "Elastic
 * width"; docs/controller.md, "Shrink and grow"). A loss that no spare can
 * take, in a job with cfg.min_dp, comes back from the transport's replace
 * as a narrower placement, and the replacement's own path retires every
 * agent into SHRINKING (controller_act.c). In RUNNING below the full width the grow detector looks
 * at the spares (ops.grow_room, every time: spares may join the running
 * job at any moment) and posts GROW at the ranks' first checkpoint newer
 * than the shrink, or cfg.grow_wait seconds after the spares could hold a
 * replica; the GROW cell places the job wider and retires every agent
 * (GROWING), as a replacement does.
 */
#include "controller_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often RUNNING looks at the spares while the job runs narrower than
 * its full width (seconds): a joined spare is seen within this. */
#define GROW_POLL 1.0

/* Can the job grow at all (elastic, narrower than full, the ops there)? */
static int can_grow(const p3d_ctl *c)
{
    return c->cfg.min_dp > 0 && c->els.dp < c->cfg.full_dp && c->ops.grow_room && c->ops.grow;
}

/* RUNNING (a tick, a progress summary): the spares looked at when due;
 * GROW posted once a replica fits and either a checkpoint newer than the
 * shrink came or cfg.grow_wait passed since the spares could hold it. */
void ctl_grow_look(p3d_ctl *c, double now)
{
    if (!can_grow(c) || c->els.posted)
        return;
    if (now >= c->els.poll_at) {
        c->els.poll_at = now + GROW_POLL;
        if (c->ops.grow_room(c->ops.ctx) <= 0) {
            c->els.seen_at = 0;
            c->els.said = 0;
            return;
        }
        if (!c->els.seen_at)
            c->els.seen_at = now;
    }
    if (!c->els.seen_at)
        return;
    int ckpt = c->ckpt_max > c->els.ckpt0;
    if (!ckpt && now < c->els.seen_at + c->cfg.grow_wait) {
        if (!c->els.said++)
            ctl_say(c,
                    "par3drun: the spares can hold a data-parallel replica again (dp %d of %d): growing at the "
                    "ranks' next checkpoint, or in %g s (--grow-wait)\n",
                    c->els.dp, c->cfg.full_dp, c->els.seen_at + c->cfg.grow_wait - now);
        return;
    }
    c->els.posted = 1;
}

/* RUNNING: when the detector wants its next look (0: none). */
double ctl_grow_deadline(const p3d_ctl *c)
{
    if (!can_grow(c))
        return 0;
    double d = c->els.poll_at;
    if (c->els.seen_at && c->els.seen_at + c->cfg.grow_wait < d)
        d = c->els.seen_at + c->cfg.grow_wait;
    return d;
}

/* RUNNING, GROW: the job placed wider on the spares (one restart), every
 * agent retires and starts again on it (GROWING). No restart left, or no
 * replica fits after all: it runs on as it is, said. */
void ctl_on_grow(p3d_ctl *c, const ctl_ev *e)
{
    if (c->gen >= c->cfg.max_restarts) {
        ctl_say(c,
                "par3drun: the job could grow back to more data-parallel replicas, but no restart is left "
                "(--max-restarts %d): it runs on at dp %d\n",
                c->cfg.max_restarts, c->els.dp);
        c->els.poll_at = e->now + 3600; /* said once an hour at most */
        c->els.seen_at = 0;
        return;
    }
    /* no progress, no loop: a grow is a restart too (grow, fail, shrink,
     * grow ... must not go round without progress); it is not made then,
     * and the job runs on as it is */
    int next = ctl_np_next(c);
    if (c->cfg.max_no_progress > 0 && next >= c->cfg.max_no_progress) {
        ctl_say(c,
                "par3drun: not growing: the ranks reached no later step and no newer checkpoint since the last "
                "restart (--max-no-progress %d)\n",
                c->cfg.max_no_progress);
        c->els.seen_at = 0;
        c->els.poll_at = e->now + c->cfg.grow_wait + GROW_POLL;
        return;
    }
    int old = c->els.dp, step = c->step_max;
    char *msg = NULL, when[160];
    int at_ckpt = c->ckpt_max > c->els.ckpt0;
    if (at_ckpt)
        snprintf(when, sizeof when, "at the ranks' checkpoint step %d, newer than the shrink's", c->ckpt_max);
    else
        snprintf(when, sizeof when, "--grow-wait %g s passed with no newer checkpoint reported", c->cfg.grow_wait);
    c->gen++;
    int rr = c->ops.grow(c->ops.ctx, c->gen, when, &msg);
    if (rr != 0) {
        c->gen--;
        if (rr < 0)
            ctl_say(c, "par3drun: cannot grow: %s\n", msg ? msg : "no placement");
        free(msg);
        c->els.seen_at = 0;
        c->els.said = 0;
        return;
    }
    ctl_np_restart(c, next);
    c->els.grows++;
    c->els.since = e->now;
    ctl_say(c, "par3drun: growing from dp %d to dp %d%s: %s; restarting all ranks (restart %d of %d)\n", old, c->els.dp,
            at_ckpt ? " at a checkpoint" : " (--grow-wait passed)", msg ? msg : "", c->gen, c->cfg.max_restarts);
    ctl_story(c, e->now, "grown from dp %d to dp %d at step %d; restart %d", old, c->els.dp, step, c->gen);
    ctl_width_note(c, c->els.dp, step >= 0 ? "grown at step" : "grown", step);
    free(msg);
    ctl_event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"grow\"", c->gen);
    c->els.seen_at = 0;
    c->els.said = 0;
    ctl_retire_all(c, P3D_CTL_GROWING, e->now);
}

void p3d_ctl_set_width(p3d_ctl *c, int dp, int nranks, const int *replica_of)
{
    if (dp < 1 || nranks < 1 || nranks > c->els.nranks_cap)
        return;
    c->els.dp = dp;
    c->cfg.nranks = nranks;
    if (!c->flt.replica || dp > c->els.nrep_cap)
        return; /* not compared, or wider than the arrays (cannot happen) */
    for (int r = 0; r < c->els.nranks_cap; r++)
        c->flt.replica[r] = replica_of && r < nranks && replica_of[r] >= 0 && replica_of[r] < dp ? replica_of[r] : -1;
    c->flt.nreplicas = dp;
}

void p3d_ctl_width(const p3d_ctl *c, int *dp, int *full_dp, int *min_dp)
{
    *dp = c->els.dp;
    *full_dp = c->cfg.full_dp;
    *min_dp = c->cfg.min_dp;
}

int p3d_ctl_shrinks(const p3d_ctl *c)
{
    return c->els.shrinks;
}

int p3d_ctl_grows(const p3d_ctl *c)
{
    return c->els.grows;
}

const char *p3d_ctl_width_history(const p3d_ctl *c)
{
    return c->els.shrinks || c->els.grows ? c->els.hist : "";
}
