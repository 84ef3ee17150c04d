/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller.c — the job controller's entry points (controller.h): each
 * turns a call into one event for the table (controller_table.c); its
 * lifecycle; and the queries. It decides nothing itself.
 */
#include "controller_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

p3d_ctl *p3d_ctl_new(const p3d_ctl_cfg *cfg, const p3d_ctl_ops *ops, double now)
{
    p3d_ctl *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    int n = cfg->nagents > 0 ? cfg->nagents : 1;
    c->cfg = *cfg;
    c->ops = *ops;
    c->code = -1;
    c->step_max = c->ckpt_max = -1;
    c->np.step = c->np.ckpt = -1;
    c->resume_gen = -1;
    c->up_gen = malloc((size_t)n * sizeof *c->up_gen);
    c->done_gen = malloc((size_t)n * sizeof *c->done_gen);
    c->gone = calloc((size_t)n, 1);
    c->killed = calloc((size_t)n, 1);
    c->dead = calloc((size_t)n, 1);
    c->retiring = calloc((size_t)n, 1);
    c->chk.lostq = calloc((size_t)n, 1);
    c->tk.rejoined = calloc((size_t)n, 1);
    c->tk.olds = calloc((size_t)n, 1);
    c->posted = calloc((size_t)n, sizeof *c->posted);
    if (!c->up_gen || !c->done_gen || !c->gone || !c->killed || !c->dead || !c->retiring || !c->chk.lostq ||
        !c->tk.rejoined || !c->tk.olds || !c->posted || ctl_slow_init(c) < 0 || ctl_fault_init(c) < 0) {
        p3d_ctl_free(c);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        c->up_gen[i] = c->done_gen[i] = -1;
    c->state = P3D_CTL_STARTING;
    c->fail_seen = now;
    c->old_leader = -1;
    c->join.first = cfg->nagents;
    ctl_gen_members(c);
    c->els.dp = cfg->dp > 0 ? cfg->dp : cfg->full_dp;
    c->els.nranks_cap = cfg->nranks;
    c->els.nrep_cap = c->flt.nreplicas;
    c->els.ckpt0 = -1;
    snprintf(c->els.hist, sizeof c->els.hist, "dp %d", c->els.dp);
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
    free(c->chk.lostq);
    free(c->tk.rejoined);
    free(c->tk.olds);
    free(c->posted);
    free(c->takeover_why);
    ctl_join_free(c);
    ctl_slow_free(c);
    ctl_fault_free(c);
    free(c->story);
    free(c->summary);
    free(c);
}

/* ---- the entry points (controller.h) ------------------------------------ */

/* sig is the scheduler's warning (preemption), not a stop request. */
static int ctl_preempts(const p3d_ctl *c, int sig)
{
    return sig > 0 && (sig == c->cfg.preempt_sig || (sig == SIGTERM && c->cfg.preempt_term));
}

void p3d_ctl_message(p3d_ctl *c, int a, const p3d_amsg *m, double now)
{
    if (!ctl_agent_ok(c, a) || c->gone[a])
        return;
    ctl_ev e = {.a = a, .m = m, .now = now};
    switch (m->type) {
    case P3D_AM_FAIL: e.type = P3D_CTL_EV_FAIL; break;
    case P3D_AM_UP: e.type = P3D_CTL_EV_UP; break;
    case P3D_AM_DONE: e.type = P3D_CTL_EV_DONE; break;
    case P3D_AM_SIGNAL:
        e.type = P3D_CTL_EV_NODE_SIG;
        if (ctl_preempts(c, m->sig)) {
            e.type = P3D_CTL_EV_PREEMPT;
            e.sig = m->sig;
        }
        break;
    case P3D_AM_PROGRESS: e.type = P3D_CTL_EV_PROGRESS; break;
    case P3D_AM_RESUMED: e.type = P3D_CTL_EV_RESUMED; break;
    default: return;
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
    ctl_ev e = {.type = ctl_preempts(c, sig) ? P3D_CTL_EV_PREEMPT : P3D_CTL_EV_SIGNAL, .a = -1, .sig = sig, .now = now};
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

int p3d_ctl_join(p3d_ctl *c, const char *name, const char *addr, int gpus, double now, const char **why)
{
    ctl_ev e = {.type = P3D_CTL_EV_JOIN,
                .a = -1,
                .how = name && *name ? name : "?",
                .addr = addr ? addr : "",
                .gen = gpus,
                .now = now};
    c->join.result = -1;
    c->join.why = "the job is over"; /* DONE ignores the event */
    ctl_dispatch(c, &e);
    if (c->join.result < 0 && why)
        *why = c->join.why;
    return c->join.result;
}

int p3d_ctl_joins(const p3d_ctl *c)
{
    return c->join.n;
}

int p3d_ctl_join_refusals(const p3d_ctl *c)
{
    return c->join.refused;
}

int p3d_ctl_joined(const p3d_ctl *c, int a)
{
    return ctl_agent_ok(c, a) && a >= c->join.first;
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
    case P3D_CTL_DONE: return 0;
    case P3D_CTL_CHECKING: return t > 0 && t < c->chk.health_at ? t : c->chk.health_at;
    case P3D_CTL_TAKEOVER: {
        /* before a majority: its deadline; with one: the old leader's
         * fence, and past it the deadline unless every node is in (then
         * the takeover acts) */
        double d = ctl_takeover_quorum(c) ? c->tk.until : ctl_takeover_giveup(c);
        if (ctl_takeover_quorum(c) && (c->fence_at > d || ctl_takeover_all_in(c)))
            d = c->fence_at;
        return t > 0 && t < d ? t : d;
    }
    case P3D_CTL_STOPPING:
    case P3D_CTL_REPLACING:
    case P3D_CTL_SHRINKING:
    case P3D_CTL_GROWING: {
        /* the next force (kill_at), then giving up on them (giveup_at);
         * a retirement with every agent gone: the lost nodes' fence */
        double d = c->state != P3D_CTL_STOPPING ? c->fence_at : c->end.giveup_at;
        for (int i = 0; i < c->cfg.nagents; i++)
            if (!c->gone[i] && !c->killed[i]) {
                d = c->end.kill_at;
                break;
            } else if (!c->gone[i]) {
                d = c->end.giveup_at;
            }
        if (c->state == P3D_CTL_STOPPING)
            t = 0;
        return t > 0 && t < d ? t : d;
    }
    case P3D_CTL_COLLECTING: return t > 0 && t < c->flt.until ? t : c->flt.until;
    case P3D_CTL_PREEMPTING: return t > 0 && t < c->pre.until ? t : c->pre.until;
    case P3D_CTL_RUNNING: {
        double s = ctl_slow_deadline(c), g = ctl_grow_deadline(c);
        if (g > 0 && (!s || g < s))
            s = g;
        return s > 0 && (!t || s < t) ? s : t;
    }
    default: return t;
    }
}

int p3d_ctl_retiring(const p3d_ctl *c)
{
    return c->state == P3D_CTL_REPLACING || c->state == P3D_CTL_SHRINKING || c->state == P3D_CTL_GROWING;
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

void p3d_ctl_progress_max(const p3d_ctl *c, int *step, int *ckpt)
{
    *step = c->step_max;
    *ckpt = c->ckpt_max;
}

int p3d_ctl_fault_step(const p3d_ctl *c)
{
    return c->flt.have_last ? c->flt.last.step : -1;
}

const char *p3d_ctl_fault(const p3d_ctl *c)
{
    return c->flt.verdict ? c->flt.verdict : "none";
}

int p3d_ctl_job_restarts(const p3d_ctl *c)
{
    return c->flt.job_restarts;
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
