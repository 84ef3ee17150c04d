/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_text.c — the job controller's words: the names of its states
 * and events, the lines it says, the events.jsonl records it writes, the
 * recovery story and the root-cause summary. Nothing here decides.
 */
#include "controller_int.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[P3D_CTL_NSTATES] = {
    [P3D_CTL_STARTING] = "starting",
    [P3D_CTL_RUNNING] = "running",
    [P3D_CTL_CHECKING] = "checking",
    [P3D_CTL_RESTARTING] = "restarting",
    [P3D_CTL_REPLACING] = "replacing",
    [P3D_CTL_STOPPING] = "stopping",
    [P3D_CTL_DONE] = "done",
    [P3D_CTL_TAKEOVER] = "takeover",
    [P3D_CTL_COLLECTING] = "collecting",
    [P3D_CTL_PREEMPTING] = "preempting",
    [P3D_CTL_SHRINKING] = "shrinking",
    [P3D_CTL_GROWING] = "growing",
};

static const char *const event_names[P3D_CTL_NEVENTS] = {
    [P3D_CTL_EV_UP] = "up",
    [P3D_CTL_EV_FAIL] = "failure",
    [P3D_CTL_EV_DONE] = "done",
    [P3D_CTL_EV_NODE_SIG] = "node-signal",
    [P3D_CTL_EV_GONE] = "agent-gone",
    [P3D_CTL_EV_SIGNAL] = "signal",
    [P3D_CTL_EV_ABORT] = "abort",
    [P3D_CTL_EV_TICK] = "tick",
    [P3D_CTL_EV_HEALTH] = "health-result",
    [P3D_CTL_EV_MARK_DEAD] = "mark-dead",
    [P3D_CTL_EV_PROGRESS] = "progress",
    [P3D_CTL_EV_RESUMED] = "resumed",
    [P3D_CTL_EV_LEADER_LOST] = "leader-lost",
    [P3D_CTL_EV_REJOIN] = "rejoin",
    [P3D_CTL_EV_ELECTION] = "election",
    [P3D_CTL_EV_ALL_UP] = "all-up",
    [P3D_CTL_EV_ALL_DONE] = "all-done",
    [P3D_CTL_EV_ALL_GONE] = "all-gone",
    [P3D_CTL_EV_TAKEOVER_READY] = "takeover-ready",
    [P3D_CTL_EV_SLOW] = "slow-node",
    [P3D_CTL_EV_PREEMPT] = "preempt",
    [P3D_CTL_EV_ALL_CKPT] = "all-checkpointed",
    [P3D_CTL_EV_JOIN] = "join",
    [P3D_CTL_EV_GROW] = "grow",
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

/* The width history's next step: " -> dp (why[ n])". */
void ctl_width_note(p3d_ctl *c, int dp, const char *why, int n)
{
    size_t k = strlen(c->els.hist);
    if (k + 8 >= sizeof c->els.hist)
        return;
    if (n >= 0)
        snprintf(c->els.hist + k, sizeof c->els.hist - k, " -> %d (%s %d)", dp, why, n);
    else
        snprintf(c->els.hist + k, sizeof c->els.hist - k, " -> %d (%s)", dp, why);
}
