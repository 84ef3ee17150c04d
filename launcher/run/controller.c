/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller.c — the job controller's state machine (controller.h).
 *
 * Everything here is a reaction to one event; nothing blocks, nothing
 * does I/O except through the ops. The messages it prints are the job's
 * user-visible story, the same for one node, --emulate and a multi-node
 * leader.
 */
#include "controller_int.h"
#include "launch.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[P3D_CTL_NSTATES] = {
    [P3D_CTL_STARTING] = "starting",     [P3D_CTL_RUNNING] = "running",   [P3D_CTL_CHECKING] = "checking",
    [P3D_CTL_RESTARTING] = "restarting", [P3D_CTL_REPLACING] = "replacing", [P3D_CTL_STOPPING] = "stopping",
    [P3D_CTL_DONE] = "done",             [P3D_CTL_TAKEOVER] = "takeover",
};

static const char *const event_names[P3D_CTL_NEVENTS] = {
    [P3D_CTL_EV_UP] = "up",           [P3D_CTL_EV_FAIL] = "failure",     [P3D_CTL_EV_DONE] = "done",
    [P3D_CTL_EV_NODE_SIG] = "node-signal", [P3D_CTL_EV_GONE] = "agent-gone", [P3D_CTL_EV_SIGNAL] = "signal",
    [P3D_CTL_EV_ABORT] = "abort",     [P3D_CTL_EV_TICK] = "tick",        [P3D_CTL_EV_HEALTH] = "health-result",
    [P3D_CTL_EV_MARK_DEAD] = "mark-dead", [P3D_CTL_EV_PROGRESS] = "progress", [P3D_CTL_EV_RESUMED] = "resumed",
    [P3D_CTL_EV_LEADER_LOST] = "leader-lost", [P3D_CTL_EV_REJOIN] = "rejoin",
    [P3D_CTL_EV_ELECTION] = "election",
};

const char *p3d_ctl_state_name(p3d_ctl_state s)
{
    return s >= 0 && s < P3D_CTL_NSTATES ? state_names[s] : "?";
}

const char *p3d_ctl_event_name(p3d_ctl_event e)
{
    return e >= 0 && e < P3D_CTL_NEVENTS ? event_names[e] : "?";
}

void ctl_say(p3d_ctl *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    if (m && *m)
        c->ops.say(c->ops.ctx, m);
    free(m);
}

void ctl_event(p3d_ctl *c, const char *fmt, ...)
{
    if (!c->ops.event)
        return;
    char *m = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&m, fmt, ap);
    va_end(ap);
    if (n > 0)
        c->ops.event(c->ops.ctx, m);
    free(m);
}

/* One line of the recovery story, with the time since the start. */
void ctl_story(p3d_ctl *c, double now, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    if (m)
        p3d_str_appendf(&c->story, "", "par3drun: %7.2f s  %s\n", c->cfg.t0 > 0 ? now - c->cfg.t0 : 0.0, m);
    free(m);
}

/* A JSON string literal of s (quotes included), in buf (events.c). */
const char *ctl_jstr(const char *s, char *buf, size_t cap)
{
    p3d_json_str(buf, cap, s);
    return buf;
}

const char *ctl_sig_name(int sig, char *buf, size_t cap)
{
    const char *a = sig > 0 ? sigabbrev_np(sig) : NULL;
    if (a)
        snprintf(buf, cap, "SIG%s", a);
    else
        snprintf(buf, cap, "signal %d", sig);
    return buf;
}

void p3d_failure_how(int code, int sig, char *buf, size_t cap)
{
    if (sig > 0)
        snprintf(buf, cap, "killed by signal %d (%s)", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    else
        snprintf(buf, cap, "exit code %d", code);
}

p3d_ctl *p3d_ctl_new(const p3d_ctl_cfg *cfg, const p3d_ctl_ops *ops, double now)
{
    p3d_ctl *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    int n = cfg->nagents > 0 ? cfg->nagents : 1;
    c->cfg = *cfg;
    c->ops = *ops;
    c->code = -1;
    c->resume_gen = -1;
    c->up_gen = malloc((size_t)n * sizeof *c->up_gen);
    c->done_gen = malloc((size_t)n * sizeof *c->done_gen);
    c->gone = calloc((size_t)n, 1);
    c->killed = calloc((size_t)n, 1);
    c->dead = calloc((size_t)n, 1);
    c->retiring = calloc((size_t)n, 1);
    c->lostq = calloc((size_t)n, 1);
    c->rejoined = calloc((size_t)n, 1);
    c->olds = calloc((size_t)n, 1);
    if (!c->up_gen || !c->done_gen || !c->gone || !c->killed || !c->dead || !c->retiring || !c->lostq ||
        !c->rejoined || !c->olds || ctl_slow_init(c) < 0) {
        p3d_ctl_free(c);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        c->up_gen[i] = c->done_gen[i] = -1;
    c->state = P3D_CTL_STARTING;
    c->fail_seen = now;
    c->old_leader = -1;
    ctl_gen_members(c);
    if (cfg->timeout > 0)
        c->timeout_at = now + cfg->timeout;
    return c;
}

void p3d_ctl_free(p3d_ctl *c)
{
    if (!c)
        return;
    free(c->up_gen);
    free(c->done_gen);
    free(c->gone);
    free(c->killed);
    free(c->dead);
    free(c->retiring);
    free(c->lostq);
    free(c->rejoined);
    free(c->olds);
    free(c->takeover_why);
    ctl_slow_free(c);
    free(c->story);
    free(c->summary);
    free(c);
}

void ctl_set_summary(p3d_ctl *c, char *s)
{
    free(c->summary);
    c->summary = s;
}

void ctl_summary_fmt(p3d_ctl *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ctl_set_summary(c, p3d_vfmt(fmt, ap));
    va_end(ap);
}

int ctl_stopping(const p3d_ctl *c)
{
    return c->state == P3D_CTL_STOPPING || c->state == P3D_CTL_DONE;
}

/* The one place the state changes: recorded with the event that caused
 * it (--verbose, events.jsonl). */
void ctl_go(p3d_ctl *c, p3d_ctl_state to)
{
    if (to == c->state)
        return;
    const char *from = state_names[c->state];
    c->state = to;
    if (c->cfg.verbose)
        ctl_say(c, "par3drun: state %s -> %s (%s)\n", from, state_names[to], event_names[c->cause]);
    ctl_event(c, "\"event\": \"state\", \"from\": \"%s\", \"to\": \"%s\", \"cause\": \"%s\"", from, state_names[to],
          event_names[c->cause]);
}

void ctl_check_done(p3d_ctl *c)
{
    if (c->state == P3D_CTL_STOPPING && c->ngone >= c->cfg.nagents)
        ctl_go(c, P3D_CTL_DONE);
}

/* The stop order: sig to every rank (0: none, they are done), SIGKILL
 * after the grace; agents that are still there at kill_at are ended. */
void ctl_stop(p3d_ctl *c, int sig, int code, double now)
{
    if (c->code < 0)
        c->code = code;
    c->stops++;
    double grace = c->cfg.grace;
    if (ctl_stopping(c)) {
        if (sig != SIGKILL && sig != SIGQUIT)
            sig = SIGKILL; /* asked again: no more grace */
        if (sig == SIGKILL)
            grace = 0;
        else
            grace = c->kill_at - now - P3D_CTL_SLACK;
    } else {
        ctl_go(c, P3D_CTL_STOPPING);
    }
    if (sig == 0 || sig == SIGKILL)
        grace = 0;
    if (grace < 0)
        grace = 0;
    double k = now + grace + P3D_CTL_SLACK;
    if (!c->kill_at || k < c->kill_at)
        c->kill_at = k;
    c->giveup_at = c->kill_at + P3D_CTL_SLACK;
    c->stop_sig = sig;
    p3d_amsg m = {.type = P3D_AM_STOP, .sig = sig, .code = c->code};
    c->ops.send(c->ops.ctx, -1, &m);
    ctl_check_done(c);
}

int ctl_takeover_all_in(const p3d_ctl *c)
{
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!c->dead[i] && !(c->olds && c->olds[i]) && !c->rejoined[i])
            return 0;
    return 1;
}

int ctl_takeover_quorum(const p3d_ctl *c)
{
    return c->cfg.elect ? c->elected : 2 * c->nrejoined > c->members;
}

double ctl_takeover_giveup(const p3d_ctl *c)
{
    return c->takeover_until + (c->cfg.elect ? c->cfg.elect_wait : 0);
}

void ctl_gen_members(p3d_ctl *c)
{
    c->members = c->cfg.nagents - c->ndead;
    c->dead0 = c->ndead;
}

/* Every agent still there runs generation gen: RUNNING. */
void ctl_all_up(p3d_ctl *c, double now)
{
    if (c->state == P3D_CTL_RESTARTING && c->in_takeover) {
        /* the takeover's record: from the old leader's last heartbeat to
         * every rank running under the new one */
        char jo[160], jn[160], jw[600];
        double t = now - c->heard;
        const char *nl = c->cfg.leader >= 0 ? c->cfg.names[c->cfg.leader] : "";
        ctl_event(c, "\"event\": \"takeover\", \"old_leader\": %s, \"new_leader\": %s, \"reason\": %s, "
                  "\"restart\": %d, \"heartbeat_to_running_s\": %.3f, \"decided_by\": \"%s\"",
                  ctl_jstr(c->cfg.names[c->old_leader], jo, sizeof jo), ctl_jstr(nl, jn, sizeof jn),
                  ctl_jstr(c->takeover_why, jw, sizeof jw), c->gen, t, c->cfg.elect ? "election" : "majority");
        ctl_say(c, "par3drun: takeover: node %s leads the job now; all ranks running again (restart %d) %.2f s after "
                "the old leader %s was last heard\n", nl, c->gen, t, c->cfg.names[c->old_leader]);
        ctl_story(c, now, "takeover by %s: all ranks running again (restart %d), %.2f s after the leader's last "
                  "heartbeat", nl, c->gen, t);
        c->in_takeover = 0;
        c->takeovers++;
        c->old_leader = -1;
    }
    if (c->state == P3D_CTL_RESTARTING && c->recovering) {
        double t = now - c->fail_seen;
        if (!c->recoveries++ || t > c->recovery_max)
            c->recovery_max = t;
        if (c->cfg.verbose || c->replaced)
            ctl_say(c, "par3drun: restart %d: all ranks running again %.2f s after the failure was seen\n", c->gen, t);
        ctl_event(c, "\"event\": \"running\", \"restart\": %d, \"recovery_s\": %.3f", c->gen, t);
        ctl_story(c, now, "all ranks running again (restart %d), %.2f s after the failure was seen", c->gen, t);
        c->recovering = 0;
    } else if (c->state == P3D_CTL_STARTING) {
        ctl_event(c, "\"event\": \"running\", \"restart\": %d", c->gen);
    }
    ctl_go(c, P3D_CTL_RUNNING);
}

/* Restart c->gen was ordered for the failure seen at c->fail_seen: the
 * first sign of life of its ranks (V) gives the time to training resumed. */
void ctl_await_resume(p3d_ctl *c)
{
    c->resume_gen = c->gen;
    c->resume_from = c->fail_seen;
}

/* The ranks of generation gen showed life on agent a (the first V of the
 * generation counts: training resumed when any restarted rank beats or
 * prints, which may come before the last agent reports its ranks up). */
void ctl_resumed(p3d_ctl *c, int a, int gen, double now)
{
    if (gen != c->gen || c->resume_gen != gen)
        return;
    double t = now - c->resume_from;
    char jn[160];
    c->resume_gen = -1;
    if (!c->resumes++ || t > c->resumed_max)
        c->resumed_max = t;
    if (c->cfg.verbose || c->replaced)
        ctl_say(c, "par3drun: restart %d: training resumed %.2f s after the failure was seen (first heartbeat or "
                   "output, node %s)\n", gen, t, c->cfg.names[a]);
    ctl_event(c, "\"event\": \"resumed\", \"restart\": %d, \"node\": %s, \"resumed_s\": %.3f", gen,
              ctl_jstr(c->cfg.names[a], jn, sizeof jn), t);
    ctl_story(c, now, "training resumed (restart %d: first heartbeat or output, node %s), %.2f s after the failure "
                      "was seen", gen, c->cfg.names[a], t);
}

/* Nodes lost[0..nlost) are gone for good: a new placement without them,
 * then every agent retires and starts again on it (one restart). When
 * they ran no rank (spares) nothing moves and the job goes on in the
 * state it is in: REPLACE_NOTHING, the caller carries on. */
int ctl_begin_replace(p3d_ctl *c, const int *lost, int nlost, const char *reason, double now)
{
    char jr[512];
    for (int k = 0; k < nlost; k++)
        if (!c->dead[lost[k]]) {
            c->dead[lost[k]] = 1;
            c->ndead++;
        }
    ctl_story(c, now, "%s", reason);
    int was_recovering = c->recovering;
    if (!c->recovering)
        c->fail_seen = now;
    c->recovering = 1;
    for (int k = 0; k < nlost; k++)
        if (lost[k] == c->cfg.leader) {
            ctl_summary_fmt(c, "par3drun: root cause: %s; it is the leader's own node (the job controller runs there) "
                           "and cannot be replaced: put the leader on a node that runs no ranks (docs/launch.md, "
                           "\"When a node dies\")\n", reason);
            ctl_stop(c, SIGTERM, P3D_EXIT_LOST, now);
            return REPLACE_STOPPED;
        }
    if (!c->ops.replace || !c->ops.respawn) {
        ctl_summary_fmt(c, "par3drun: root cause: %s; no spare to replace it (--spares K keeps some; an --emulate job "
                       "and a multi-node leader replace nodes in this version)\n", reason);
        ctl_stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return REPLACE_STOPPED;
    }
    if (c->gen >= c->cfg.max_restarts) {
        ctl_summary_fmt(c, "par3drun: root cause: %s; no restart left to replace it (--max-restarts %d, every restart "
                       "counts)\n", reason, c->cfg.max_restarts);
        ctl_stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return REPLACE_STOPPED;
    }
    c->gen++;
    char *msg = NULL;
    int rr = c->ops.replace(c->ops.ctx, lost, nlost, c->gen, reason, &msg);
    if (rr > 0) {
        /* the lost nodes ran no rank (spares): nothing to restart */
        c->gen--;
        ctl_say(c, "par3drun: %s; %s\n", reason, msg ? msg : "it ran no rank");
        ctl_story(c, now, "%s", msg ? msg : "it ran no rank");
        free(msg);
        c->recovering = was_recovering;
        return REPLACE_NOTHING;
    }
    if (rr < 0) {
        ctl_summary_fmt(c, "par3drun: root cause: %s; cannot replace it: %s\n", reason, msg ? msg : "no placement");
        free(msg);
        ctl_event(c, "\"event\": \"replace_failed\", \"reason\": %s", ctl_jstr(reason, jr, sizeof jr));
        ctl_stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return REPLACE_STOPPED;
    }
    c->replaced += nlost;
    ctl_await_resume(c);
    ctl_say(c, "par3drun: %s; %s; restarting all ranks (restart %d of %d)\n", reason, msg ? msg : "replaced", c->gen,
        c->cfg.max_restarts);
    ctl_story(c, now, "%s; restart %d", msg ? msg : "replaced", c->gen);
    free(msg);
    ctl_event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"replacement\"", c->gen);
    ctl_retire_all(c, now);
    return REPLACE_UNDER_WAY;
}

/* REPLACING: every agent still there is told to retire; once all are
 * gone, settle() starts them again on the current placement. */
void ctl_retire_all(p3d_ctl *c, double now)
{
    ctl_go(c, P3D_CTL_REPLACING); /* before the orders: the transport retires on them */
    double k = now + c->cfg.grace + P3D_CTL_SLACK;
    if (!c->kill_at || k < c->kill_at)
        c->kill_at = k;
    c->giveup_at = c->kill_at + P3D_CTL_SLACK;
    p3d_amsg m = {.type = P3D_AM_STOP, .sig = SIGTERM, .code = 0};
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!c->gone[i] && !c->retiring[i]) {
            c->retiring[i] = 1;
            c->ops.send(c->ops.ctx, i, &m);
        }
}

/* The failure c->pend is restarted in place: every rank again, one
 * restart more. */
void ctl_restart_in_place(p3d_ctl *c, double now)
{
    char how[64];
    p3d_failure_how(c->pend.code, c->pend.sig, how, sizeof how);
    if (c->gen >= c->cfg.max_restarts) {
        ctl_summary_fmt(c, "par3drun: root cause: rank %d failed (%s); no restart left (--max-restarts %d)\n",
                    c->pend.rank, how, c->cfg.max_restarts);
        ctl_stop(c, SIGTERM, c->pend.code > 0 ? c->pend.code : P3D_EXIT_LOST, now);
        return;
    }
    /* not the root cause yet: one line; the summary is printed once, for
     * the failure that ends the job */
    c->gen++;
    ctl_await_resume(c);
    if (c->pend.rank >= 0)
        ctl_say(c, "par3drun: rank %d failed (%s); restarting all ranks (restart %d of %d)\n", c->pend.rank, how, c->gen,
            c->cfg.max_restarts);
    else
        ctl_say(c, "par3drun: node %s could not start its ranks (%s); restarting all ranks (restart %d of %d)\n",
            c->cfg.names[c->pend.a], how, c->gen, c->cfg.max_restarts);
    for (int k = 0; k < c->cfg.nagents; k++)
        c->done_gen[k] = -1;
    ctl_gen_members(c);
    ctl_go(c, P3D_CTL_RESTARTING);
    ctl_event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"in-place\"", c->gen);
    p3d_amsg r = {.type = P3D_AM_RESTART, .gen = c->gen};
    c->ops.send(c->ops.ctx, -1, &r);
}

/* REPLACING: once every agent is gone, the transport starts the live ones
 * again on the new placement. */
void ctl_respawn(p3d_ctl *c)
{
    if (c->ops.respawn(c->ops.ctx, c->gen, c->dead) < 0) {
        ctl_set_summary(c, strdup("par3drun: root cause: cannot start the agents again after a replacement\n"));
        if (c->code < 0)
            c->code = P3D_EXIT_LOST;
        ctl_go(c, P3D_CTL_STOPPING);
        ctl_check_done(c);
        return;
    }
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!c->dead[i]) {
            c->gone[i] = c->retiring[i] = c->killed[i] = 0;
            c->up_gen[i] = c->done_gen[i] = -1;
        }
    c->ngone = c->ndead;
    c->kill_at = c->giveup_at = 0;
    c->fence_said = 0;
    ctl_gen_members(c);
    ctl_go(c, P3D_CTL_RESTARTING);
}

/* ---- the entry points (controller.h) ------------------------------------ */

int ctl_agent_ok(const p3d_ctl *c, int a)
{
    return a >= 0 && a < c->cfg.nagents;
}

void p3d_ctl_message(p3d_ctl *c, int a, const p3d_amsg *m, double now)
{
    if (!ctl_agent_ok(c, a) || c->gone[a])
        return;
    ctl_ev e = {.a = a, .m = m, .now = now};
    switch (m->type) {
    case P3D_AM_FAIL:
        e.type = P3D_CTL_EV_FAIL;
        break;
    case P3D_AM_UP:
        e.type = P3D_CTL_EV_UP;
        break;
    case P3D_AM_DONE:
        e.type = P3D_CTL_EV_DONE;
        break;
    case P3D_AM_SIGNAL:
        e.type = P3D_CTL_EV_NODE_SIG;
        break;
    case P3D_AM_PROGRESS:
        e.type = P3D_CTL_EV_PROGRESS;
        break;
    case P3D_AM_RESUMED:
        e.type = P3D_CTL_EV_RESUMED;
        break;
    default:
        return;
    }
    ctl_dispatch(c, &e);
}

void p3d_ctl_mark_dead(p3d_ctl *c, int a)
{
    if (!ctl_agent_ok(c, a))
        return;
    ctl_ev e = {.type = P3D_CTL_EV_MARK_DEAD, .a = a, .now = c->fail_seen};
    ctl_dispatch(c, &e);
}

void p3d_ctl_gone(p3d_ctl *c, int a, const char *how, double now)
{
    p3d_ctl_gone_status(c, a, how, 0, now);
}

void p3d_ctl_gone_status(p3d_ctl *c, int a, const char *how, int clean, double now)
{
    if (!ctl_agent_ok(c, a) || c->gone[a])
        return;
    ctl_ev e = {.type = P3D_CTL_EV_GONE, .a = a, .how = how, .clean = clean, .now = now};
    ctl_dispatch(c, &e);
}

void p3d_ctl_fence(p3d_ctl *c, int a, double until)
{
    if (ctl_agent_ok(c, a) && until > c->fence_at)
        c->fence_at = until;
}

void p3d_ctl_signal(p3d_ctl *c, int sig, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_SIGNAL, .a = -1, .sig = sig, .now = now};
    ctl_dispatch(c, &e);
}

void p3d_ctl_abort(p3d_ctl *c, const char *why, int code, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_ABORT, .a = -1, .how = why, .code = code, .now = now};
    ctl_dispatch(c, &e);
}

void p3d_ctl_health_result(p3d_ctl *c, const unsigned char *bad, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_HEALTH, .a = -1, .bad = bad, .now = now};
    ctl_dispatch(c, &e);
}

void p3d_ctl_leader_lost(p3d_ctl *c, int successor, double heard, const char *why, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_LEADER_LOST, .a = successor, .heard = heard, .how = why, .now = now};
    ctl_dispatch(c, &e);
}

void p3d_ctl_rejoin(p3d_ctl *c, int a, int gen, double now)
{
    if (!ctl_agent_ok(c, a))
        return;
    ctl_ev e = {.type = P3D_CTL_EV_REJOIN, .a = a, .gen = gen, .now = now};
    ctl_dispatch(c, &e);
}

void p3d_ctl_election(p3d_ctl *c, int news, const char *why, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_ELECTION, .a = -1, .gen = news, .how = why, .now = now};
    ctl_dispatch(c, &e);
}

void p3d_ctl_tick(p3d_ctl *c, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_TICK, .a = -1, .now = now};
    ctl_dispatch(c, &e);
}

/* ---- queries ------------------------------------------------------------- */

double p3d_ctl_deadline(const p3d_ctl *c)
{
    double t = c->timeout_at;
    switch (c->state) {
    case P3D_CTL_DONE:
        return 0;
    case P3D_CTL_CHECKING:
        return t > 0 && t < c->health_at ? t : c->health_at;
    case P3D_CTL_TAKEOVER: {
        /* before a majority: its deadline; with one: the old leader's
         * fence, and past it the deadline unless every node is in (then
         * the takeover acts) */
        double d = ctl_takeover_quorum(c) ? c->takeover_until : ctl_takeover_giveup(c);
        if (ctl_takeover_quorum(c) && (c->fence_at > d || ctl_takeover_all_in(c)))
            d = c->fence_at;
        return t > 0 && t < d ? t : d;
    }
    case P3D_CTL_STOPPING:
    case P3D_CTL_REPLACING: {
        /* the next force (kill_at), then giving up on them (giveup_at);
         * REPLACING with every agent gone: the lost nodes' fence */
        double d = c->state == P3D_CTL_REPLACING ? c->fence_at : c->giveup_at;
        for (int i = 0; i < c->cfg.nagents; i++)
            if (!c->gone[i] && !c->killed[i]) {
                d = c->kill_at;
                break;
            } else if (!c->gone[i]) {
                d = c->giveup_at;
            }
        if (c->state == P3D_CTL_STOPPING)
            t = 0;
        return t > 0 && t < d ? t : d;
    }
    case P3D_CTL_RUNNING: {
        double s = ctl_slow_deadline(c);
        return s > 0 && (!t || s < t) ? s : t;
    }
    default:
        return t;
    }
}

p3d_ctl_state p3d_ctl_get_state(const p3d_ctl *c)
{
    return c->state;
}

int p3d_ctl_is_dead(const p3d_ctl *c, int a)
{
    return ctl_agent_ok(c, a) && c->dead[a];
}

int p3d_ctl_code(const p3d_ctl *c)
{
    return c->code < 0 ? 0 : c->code;
}

const char *p3d_ctl_summary(const p3d_ctl *c)
{
    return c->summary ? c->summary : "";
}

int p3d_ctl_restarts(const p3d_ctl *c)
{
    return c->gen;
}

double p3d_ctl_recovery_max(const p3d_ctl *c)
{
    return c->recoveries ? c->recovery_max : -1;
}

double p3d_ctl_resumed_max(const p3d_ctl *c)
{
    return c->resumes ? c->resumed_max : -1;
}

int p3d_ctl_recovering(const p3d_ctl *c)
{
    return c->recovering;
}

int p3d_ctl_replaced(const p3d_ctl *c)
{
    return c->replaced;
}

const char *p3d_ctl_story(const p3d_ctl *c)
{
    return c->story ? c->story : "";
}

int p3d_ctl_leader(const p3d_ctl *c)
{
    return c->cfg.leader;
}

int p3d_ctl_takeovers(const p3d_ctl *c)
{
    return c->takeovers;
}
