/*
 * controller.c — the job controller's state machine (controller.h).
 *
 * Everything here is a reaction to one event; nothing blocks, nothing
 * does I/O except through the ops. The messages it prints are the job's
 * user-visible story, the same for one node, --emulate and a multi-node
 * leader.
 */
#include "controller.h"
#include "launch.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct p3d_ctl {
    p3d_ctl_cfg cfg;
    p3d_ctl_ops ops;
    p3d_ctl_state state;
    int gen;
    int *up_gen;           /* last generation agent a reported started, -1 */
    int *done_gen;         /* last generation agent a reported done, -1 */
    unsigned char *gone;   /* agent a ended / disconnected */
    unsigned char *killed; /* ops->kill called for a */
    int ngone;
    int code;              /* -1 undecided */
    char *summary;
    int stop_sig;          /* the signal of the stop order (0: done) */
    int stops;             /* stop requests seen */
    double timeout_at;     /* --timeout deadline, 0 none */
    double kill_at;        /* STOPPING: agents still there are ended then */
    double giveup_at;      /* STOPPING: past this, DONE whatever is left */
    double fail_seen;      /* RESTARTING: when the failure was seen */
    double recovery_max;
    int recoveries;        /* recoveries completed (recovery_max valid) */
    int recovering;        /* a failure seen, not every rank running again */
    unsigned char *dead;   /* agent a's node is lost for good */
    unsigned char *retiring; /* REPLACING: a was told to end */
    int ndead;
    int replaced;
    char *story;           /* the recoveries, whole lines */
    unsigned char *lostq;  /* CHECKING: agents lost while the checks ran */
    double health_at;      /* CHECKING: past this, no result is awaited */
    struct {
        int a, rank, code, sig;
    } pend;                /* CHECKING: the failure that started it */
    p3d_ctl_event cause;   /* the event being handled (state records) */
    double fence_at;       /* no respawn before (p3d_ctl_fence) */
    int fence_said;
};

/* One event, as the entry points hand it to the table. */
typedef struct ctl_ev {
    p3d_ctl_event type;
    int a;                    /* the agent, -1 none */
    const p3d_amsg *m;        /* UP, FAIL, DONE, NODE_SIG */
    const char *how;          /* GONE: what happened; ABORT: why */
    int clean;                /* GONE: ended by itself */
    int sig;                  /* SIGNAL */
    int code;                 /* ABORT */
    const unsigned char *bad; /* HEALTH */
    double now;
} ctl_ev;

static const char *const state_names[P3D_CTL_NSTATES] = {
    [P3D_CTL_STARTING] = "starting",     [P3D_CTL_RUNNING] = "running",   [P3D_CTL_CHECKING] = "checking",
    [P3D_CTL_RESTARTING] = "restarting", [P3D_CTL_REPLACING] = "replacing", [P3D_CTL_STOPPING] = "stopping",
    [P3D_CTL_DONE] = "done",
};

static const char *const event_names[P3D_CTL_NEVENTS] = {
    [P3D_CTL_EV_UP] = "up",           [P3D_CTL_EV_FAIL] = "failure",     [P3D_CTL_EV_DONE] = "done",
    [P3D_CTL_EV_NODE_SIG] = "node-signal", [P3D_CTL_EV_GONE] = "agent-gone", [P3D_CTL_EV_SIGNAL] = "signal",
    [P3D_CTL_EV_ABORT] = "abort",     [P3D_CTL_EV_TICK] = "tick",        [P3D_CTL_EV_HEALTH] = "health-result",
    [P3D_CTL_EV_MARK_DEAD] = "mark-dead",
};

const char *p3d_ctl_state_name(p3d_ctl_state s)
{
    return s >= 0 && s < P3D_CTL_NSTATES ? state_names[s] : "?";
}

const char *p3d_ctl_event_name(p3d_ctl_event e)
{
    return e >= 0 && e < P3D_CTL_NEVENTS ? event_names[e] : "?";
}

static void say(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(p3d_ctl *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    if (m && *m)
        c->ops.say(c->ops.ctx, m);
    free(m);
}

static void event(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(p3d_ctl *c, const char *fmt, ...)
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
static void story(p3d_ctl *c, double now, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void story(p3d_ctl *c, double now, const char *fmt, ...)
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
static const char *jstr(const char *s, char *buf, size_t cap)
{
    p3d_json_str(buf, cap, s);
    return buf;
}

static const char *sig_name(int sig, char *buf, size_t cap)
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
    c->up_gen = malloc((size_t)n * sizeof *c->up_gen);
    c->done_gen = malloc((size_t)n * sizeof *c->done_gen);
    c->gone = calloc((size_t)n, 1);
    c->killed = calloc((size_t)n, 1);
    c->dead = calloc((size_t)n, 1);
    c->retiring = calloc((size_t)n, 1);
    c->lostq = calloc((size_t)n, 1);
    if (!c->up_gen || !c->done_gen || !c->gone || !c->killed || !c->dead || !c->retiring || !c->lostq) {
        p3d_ctl_free(c);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        c->up_gen[i] = c->done_gen[i] = -1;
    c->state = P3D_CTL_STARTING;
    c->fail_seen = now;
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
    free(c->story);
    free(c->summary);
    free(c);
}

static void set_summary(p3d_ctl *c, char *s)
{
    free(c->summary);
    c->summary = s;
}

static void summary_fmt(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void summary_fmt(p3d_ctl *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_summary(c, p3d_vfmt(fmt, ap));
    va_end(ap);
}

static int stopping(const p3d_ctl *c)
{
    return c->state == P3D_CTL_STOPPING || c->state == P3D_CTL_DONE;
}

/* The one place the state changes: recorded with the event that caused
 * it (--verbose, events.jsonl). */
static void go(p3d_ctl *c, p3d_ctl_state to)
{
    if (to == c->state)
        return;
    const char *from = state_names[c->state];
    c->state = to;
    if (c->cfg.verbose)
        say(c, "par3drun: state %s -> %s (%s)\n", from, state_names[to], event_names[c->cause]);
    event(c, "\"event\": \"state\", \"from\": \"%s\", \"to\": \"%s\", \"cause\": \"%s\"", from, state_names[to],
          event_names[c->cause]);
}

static void check_done(p3d_ctl *c)
{
    if (c->state == P3D_CTL_STOPPING && c->ngone >= c->cfg.nagents)
        go(c, P3D_CTL_DONE);
}

/* The stop order: sig to every rank (0: none, they are done), SIGKILL
 * after the grace; agents that are still there at kill_at are ended. */
static void stop(p3d_ctl *c, int sig, int code, double now)
{
    if (c->code < 0)
        c->code = code;
    c->stops++;
    double grace = c->cfg.grace;
    if (stopping(c)) {
        if (sig != SIGKILL && sig != SIGQUIT)
            sig = SIGKILL; /* asked again: no more grace */
        if (sig == SIGKILL)
            grace = 0;
        else
            grace = c->kill_at - now - P3D_CTL_SLACK;
    } else {
        go(c, P3D_CTL_STOPPING);
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
    check_done(c);
}

/* Every agent still there runs generation gen: RUNNING. */
static void all_up(p3d_ctl *c, double now)
{
    if (c->state == P3D_CTL_RESTARTING && c->recovering) {
        double t = now - c->fail_seen;
        if (!c->recoveries++ || t > c->recovery_max)
            c->recovery_max = t;
        if (c->cfg.verbose || c->replaced)
            say(c, "par3drun: restart %d: all ranks running again %.2f s after the failure was seen\n", c->gen, t);
        event(c, "\"event\": \"running\", \"restart\": %d, \"recovery_s\": %.3f", c->gen, t);
        story(c, now, "all ranks running again (restart %d), %.2f s after the failure was seen", c->gen, t);
        c->recovering = 0;
    } else if (c->state == P3D_CTL_STARTING) {
        event(c, "\"event\": \"running\", \"restart\": %d", c->gen);
    }
    go(c, P3D_CTL_RUNNING);
}

/* What begin_replace did. */
enum { REPLACE_NOTHING, REPLACE_UNDER_WAY, REPLACE_STOPPED };

/* Nodes lost[0..nlost) are gone for good: a new placement without them,
 * then every agent retires and starts again on it (one restart). When
 * they ran no rank (spares) nothing moves and the job goes on in the
 * state it is in: REPLACE_NOTHING, the caller carries on. */
static int begin_replace(p3d_ctl *c, const int *lost, int nlost, const char *reason, double now)
{
    char jr[512];
    for (int k = 0; k < nlost; k++)
        if (!c->dead[lost[k]]) {
            c->dead[lost[k]] = 1;
            c->ndead++;
        }
    story(c, now, "%s", reason);
    int was_recovering = c->recovering;
    if (!c->recovering)
        c->fail_seen = now;
    c->recovering = 1;
    for (int k = 0; k < nlost; k++)
        if (lost[k] == c->cfg.leader) {
            summary_fmt(c, "par3drun: root cause: %s; it is the leader's own node (the job controller runs there) "
                           "and cannot be replaced: put the leader on a node that runs no ranks (docs/launch.md, "
                           "\"When a node dies\")\n", reason);
            stop(c, SIGTERM, P3D_EXIT_LOST, now);
            return REPLACE_STOPPED;
        }
    if (!c->ops.replace || !c->ops.respawn) {
        summary_fmt(c, "par3drun: root cause: %s; no spare to replace it (--spares K keeps some; an --emulate job "
                       "and a multi-node leader replace nodes in this version)\n", reason);
        stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return REPLACE_STOPPED;
    }
    if (c->gen >= c->cfg.max_restarts) {
        summary_fmt(c, "par3drun: root cause: %s; no restart left to replace it (--max-restarts %d, every restart "
                       "counts)\n", reason, c->cfg.max_restarts);
        stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return REPLACE_STOPPED;
    }
    c->gen++;
    char *msg = NULL;
    int rr = c->ops.replace(c->ops.ctx, lost, nlost, c->gen, reason, &msg);
    if (rr > 0) {
        /* the lost nodes ran no rank (spares): nothing to restart */
        c->gen--;
        say(c, "par3drun: %s; %s\n", reason, msg ? msg : "it ran no rank");
        story(c, now, "%s", msg ? msg : "it ran no rank");
        free(msg);
        c->recovering = was_recovering;
        return REPLACE_NOTHING;
    }
    if (rr < 0) {
        summary_fmt(c, "par3drun: root cause: %s; cannot replace it: %s\n", reason, msg ? msg : "no placement");
        free(msg);
        event(c, "\"event\": \"replace_failed\", \"reason\": %s", jstr(reason, jr, sizeof jr));
        stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return REPLACE_STOPPED;
    }
    c->replaced += nlost;
    say(c, "par3drun: %s; %s; restarting all ranks (restart %d of %d)\n", reason, msg ? msg : "replaced", c->gen,
        c->cfg.max_restarts);
    story(c, now, "%s; restart %d", msg ? msg : "replaced", c->gen);
    free(msg);
    event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"replacement\"", c->gen);
    go(c, P3D_CTL_REPLACING); /* before the orders: the transport retires on them */
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
    return REPLACE_UNDER_WAY;
}

/* The failure c->pend is restarted in place: every rank again, one
 * restart more. */
static void restart_in_place(p3d_ctl *c, double now)
{
    char how[64];
    p3d_failure_how(c->pend.code, c->pend.sig, how, sizeof how);
    if (c->gen >= c->cfg.max_restarts) {
        summary_fmt(c, "par3drun: root cause: rank %d failed (%s); no restart left (--max-restarts %d)\n",
                    c->pend.rank, how, c->cfg.max_restarts);
        stop(c, SIGTERM, c->pend.code > 0 ? c->pend.code : P3D_EXIT_LOST, now);
        return;
    }
    /* not the root cause yet: one line; the summary is printed once, for
     * the failure that ends the job */
    c->gen++;
    if (c->pend.rank >= 0)
        say(c, "par3drun: rank %d failed (%s); restarting all ranks (restart %d of %d)\n", c->pend.rank, how, c->gen,
            c->cfg.max_restarts);
    else
        say(c, "par3drun: node %s could not start its ranks (%s); restarting all ranks (restart %d of %d)\n",
            c->cfg.names[c->pend.a], how, c->gen, c->cfg.max_restarts);
    for (int k = 0; k < c->cfg.nagents; k++)
        c->done_gen[k] = -1;
    go(c, P3D_CTL_RESTARTING);
    event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"in-place\"", c->gen);
    p3d_amsg r = {.type = P3D_AM_RESTART, .gen = c->gen};
    c->ops.send(c->ops.ctx, -1, &r);
}

/* REPLACING: once every agent is gone, the transport starts the live ones
 * again on the new placement. */
static void respawn(p3d_ctl *c)
{
    if (c->ops.respawn(c->ops.ctx, c->gen, c->dead) < 0) {
        set_summary(c, strdup("par3drun: root cause: cannot start the agents again after a replacement\n"));
        if (c->code < 0)
            c->code = P3D_EXIT_LOST;
        go(c, P3D_CTL_STOPPING);
        check_done(c);
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
    go(c, P3D_CTL_RESTARTING);
}

/* ---- the handlers: one per (state, event) cell of the table ------------ */

static void on_up(p3d_ctl *c, const ctl_ev *e)
{
    if (e->m->gen == c->gen)
        c->up_gen[e->a] = e->m->gen;
}

static void on_done(p3d_ctl *c, const ctl_ev *e)
{
    if (e->m->gen == c->gen)
        c->done_gen[e->a] = e->m->gen;
}

static void on_fail(p3d_ctl *c, const ctl_ev *e)
{
    const p3d_amsg *m = e->m;
    if (m->gen != c->gen)
        return; /* a consequence of a failure already being handled */
    char how[64], jn[160];
    p3d_failure_how(m->code, m->sig, how, sizeof how);
    const char *name = c->cfg.names[e->a];
    event(c, "\"event\": \"failure\", \"node\": %s, \"rank\": %d, \"cause\": \"%s\", \"exit_code\": %d, "
             "\"signal\": %d",
          jstr(name, jn, sizeof jn), m->rank, m->rank >= 0 ? "rank failed" : "ranks could not start", m->code, m->sig);
    if (c->gen < c->cfg.max_restarts) {
        c->pend.a = e->a;
        c->pend.rank = m->rank;
        c->pend.code = m->code;
        c->pend.sig = m->sig;
        if (!c->recovering)
            c->fail_seen = e->now;
        c->recovering = 1;
        /* --health-check first: a node that fails it is replaced instead */
        if (c->ops.health && c->ops.health(c->ops.ctx, c->dead) == 0) {
            memset(c->lostq, 0, (size_t)c->cfg.nagents);
            c->health_at = e->now + c->cfg.health_timeout + 2 * P3D_CTL_SLACK;
            go(c, P3D_CTL_CHECKING);
            return;
        }
        restart_in_place(c, e->now);
        return;
    }
    char *s = NULL;
    if (m->text && m->text[0]) {
        s = strdup(m->text);
    } else if (asprintf(&s, "par3drun: root cause: %s %d on node %s %s (%s)\n",
                        m->rank >= 0 ? "rank" : "node rank", m->rank >= 0 ? m->rank : e->a, name,
                        m->rank >= 0 ? "failed" : "could not start its ranks", how) < 0) {
        s = NULL;
    }
    set_summary(c, s);
    stop(c, SIGTERM, m->code, e->now);
}

/* CHECKING: the nodes that failed the check, and those lost meanwhile, are
 * replaced; when there are none, or they were only spares, the failure
 * that started the check is restarted in place. */
static void on_health(p3d_ctl *c, const ctl_ev *e)
{
    int n = c->cfg.nagents, nlost = 0, first_bad = -1, first_lost = -1;
    int *lost = calloc((size_t)n + 1, sizeof *lost);
    for (int i = 0; lost && i < n; i++) {
        int bad = e->bad && e->bad[i];
        if (c->dead[i] || !(bad || c->lostq[i]))
            continue;
        lost[nlost++] = i;
        if (bad && first_bad < 0)
            first_bad = i;
        if (!bad && first_lost < 0)
            first_lost = i;
    }
    memset(c->lostq, 0, (size_t)n);
    if (nlost) {
        char how[64], why[384];
        p3d_failure_how(c->pend.code, c->pend.sig, how, sizeof how);
        if (first_bad >= 0)
            snprintf(why, sizeof why, "node %s failed its --health-check after rank %d failed (%s)",
                     c->cfg.names[first_bad], c->pend.rank, how);
        else
            snprintf(why, sizeof why, "lost the agent of node %s (node rank %d) during the --health-check after "
                     "rank %d failed (%s)", c->cfg.names[first_lost], first_lost, c->pend.rank, how);
        int r = begin_replace(c, lost, nlost, why, e->now);
        free(lost);
        if (r != REPLACE_NOTHING)
            return;
    } else {
        free(lost);
    }
    restart_in_place(c, e->now);
}

static void on_gone(p3d_ctl *c, const ctl_ev *e)
{
    int a = e->a;
    if (c->gone[a])
        return;
    c->gone[a] = 1;
    c->ngone++;
    if (stopping(c) || c->dead[a])
        return;
    if (c->state == P3D_CTL_REPLACING && c->retiring[a] && (e->clean || c->killed[a]))
        return; /* retired: settle() starts the agents again once all have */
    char why[512], jn[160], jh[300];
    snprintf(why, sizeof why, "lost the agent of node %s (node rank %d): %s", c->cfg.names[a], a,
             e->how && e->how[0] ? e->how : "it ended unasked");
    event(c, "\"event\": \"failure\", \"node\": %s, \"rank\": -1, \"cause\": \"node lost\", \"how\": %s",
          jstr(c->cfg.names[a], jn, sizeof jn), jstr(e->how, jh, sizeof jh));
    if (c->ops.replace && c->ops.respawn) {
        if (c->state == P3D_CTL_CHECKING) {
            /* replaced with the nodes that fail the check */
            c->lostq[a] = 1;
            story(c, e->now, "%s", why);
            return;
        }
        int lost[1] = {a};
        begin_replace(c, lost, 1, why, e->now);
        return;
    }
    summary_fmt(c, "par3drun: root cause: %s\n", why);
    stop(c, SIGTERM, P3D_EXIT_LOST, e->now);
}

static void on_node_sig(p3d_ctl *c, const ctl_ev *e)
{
    char sn[32];
    int sig = e->m->sig > 0 ? e->m->sig : SIGTERM;
    if (!stopping(c))
        say(c, "par3drun: node %s (node rank %d) was stopped by %s; stopping the job (grace %g s)\n",
            c->cfg.names[e->a], e->a, sig_name(sig, sn, sizeof sn), c->cfg.grace);
    stop(c, sig, 128 + sig, e->now);
}

static void on_signal(p3d_ctl *c, const ctl_ev *e)
{
    int sig = e->sig;
    if (sig == SIGUSR1 || sig == SIGUSR2) {
        p3d_amsg m = {.type = P3D_AM_FORWARD, .sig = sig};
        c->ops.send(c->ops.ctx, -1, &m);
        return;
    }
    char sn[32];
    sig_name(sig, sn, sizeof sn);
    if (!stopping(c))
        say(c, "par3drun: %s: stopping %d rank%s on %d node%s (%s to every rank, SIGKILL after the %g s grace; a "
               "second signal skips it)\n",
            sn, c->cfg.nranks, c->cfg.nranks == 1 ? "" : "s", c->cfg.nagents, c->cfg.nagents == 1 ? "" : "s", sn,
            c->cfg.grace);
    else if (sig != SIGQUIT && c->stop_sig != SIGKILL)
        say(c, "par3drun: %s again: SIGKILL to every rank now\n", sn);
    stop(c, sig, 128 + sig, e->now);
}

static void on_abort(p3d_ctl *c, const ctl_ev *e)
{
    if (!stopping(c) && e->how)
        summary_fmt(c, "par3drun: root cause: %s\n", e->how);
    stop(c, SIGKILL, e->code, e->now);
}

static void on_mark_dead(p3d_ctl *c, const ctl_ev *e)
{
    if (c->dead[e->a])
        return;
    c->dead[e->a] = 1;
    c->ndead++;
    if (!c->gone[e->a]) {
        c->gone[e->a] = 1;
        c->ngone++;
    }
}

/* Agents past kill_at are ended by force; past giveup_at they count as
 * gone whatever is left of them (REPLACING and STOPPING). */
static void enforce_deadlines(p3d_ctl *c, double now)
{
    for (int i = 0; now >= c->kill_at && i < c->cfg.nagents; i++)
        if (!c->gone[i] && !c->killed[i]) {
            c->killed[i] = 1;
            if (c->cfg.verbose && c->state == P3D_CTL_STOPPING)
                say(c, "par3drun: the agent of node %s did not end %g s past its grace: ending it by force\n",
                    c->cfg.names[i], P3D_CTL_SLACK);
            c->ops.kill(c->ops.ctx, i);
        }
    for (int i = 0; now >= c->giveup_at && i < c->cfg.nagents; i++)
        if (!c->gone[i]) {
            c->gone[i] = 1;
            c->ngone++;
        }
}

static void on_tick(p3d_ctl *c, const ctl_ev *e)
{
    if (!stopping(c) && c->timeout_at > 0 && e->now >= c->timeout_at) {
        say(c, "par3drun: --timeout %g s reached; stopping the job\n", c->cfg.timeout);
        stop(c, SIGTERM, 124, e->now);
    }
    if (c->state == P3D_CTL_CHECKING && e->now >= c->health_at) {
        say(c, "par3drun: warning: the --health-check result did not come within %g s; the nodes count as "
               "healthy\n", c->cfg.health_timeout + 2 * P3D_CTL_SLACK);
        ctl_ev h = {.type = P3D_CTL_EV_HEALTH, .a = -1, .now = e->now};
        on_health(c, &h);
        return;
    }
    if (c->state == P3D_CTL_REPLACING || c->state == P3D_CTL_STOPPING)
        enforce_deadlines(c, e->now);
}

typedef void (*ctl_handler)(p3d_ctl *c, const ctl_ev *e);

/* What each state does with each event; NULL: nothing (the event is a
 * consequence of one already being handled, or comes too late). */
static const ctl_handler table[P3D_CTL_NSTATES][P3D_CTL_NEVENTS] = {
    [P3D_CTL_STARTING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_FAIL] = on_fail, [P3D_CTL_EV_DONE] = on_done,
                          [P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                          [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort, [P3D_CTL_EV_TICK] = on_tick,
                          [P3D_CTL_EV_MARK_DEAD] = on_mark_dead},
    [P3D_CTL_RUNNING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_FAIL] = on_fail, [P3D_CTL_EV_DONE] = on_done,
                         [P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                         [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort, [P3D_CTL_EV_TICK] = on_tick},
    [P3D_CTL_CHECKING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_DONE] = on_done, [P3D_CTL_EV_NODE_SIG] = on_node_sig,
                          [P3D_CTL_EV_GONE] = on_gone, [P3D_CTL_EV_SIGNAL] = on_signal,
                          [P3D_CTL_EV_ABORT] = on_abort, [P3D_CTL_EV_TICK] = on_tick,
                          [P3D_CTL_EV_HEALTH] = on_health},
    [P3D_CTL_RESTARTING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_FAIL] = on_fail, [P3D_CTL_EV_DONE] = on_done,
                            [P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                            [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort,
                            [P3D_CTL_EV_TICK] = on_tick},
    [P3D_CTL_REPLACING] = {[P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                           [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort,
                           [P3D_CTL_EV_TICK] = on_tick},
    [P3D_CTL_STOPPING] = {[P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                          [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort,
                          [P3D_CTL_EV_TICK] = on_tick},
    [P3D_CTL_DONE] = {0},
};

/* After every event: what it may have completed. An agent gone, up or
 * done can finish a wait whatever the event was, so every wait is checked
 * here, once, instead of by the handlers that might finish it. */
static void settle(p3d_ctl *c, double now)
{
    int n = c->cfg.nagents, live = 0, up = 0, done = 0;
    for (int i = 0; i < n; i++) {
        if (c->gone[i])
            continue;
        live++;
        up += c->up_gen[i] == c->gen;
        done += c->done_gen[i] == c->gen;
    }
    switch (c->state) {
    case P3D_CTL_STARTING:
    case P3D_CTL_RUNNING:
    case P3D_CTL_RESTARTING:
        if (!live) {
            /* every agent lost, none replaced: nothing can move on */
            if (!c->summary)
                set_summary(c, strdup("par3drun: root cause: every node's agent is gone\n"));
            stop(c, SIGTERM, P3D_EXIT_LOST, now);
            break;
        }
        if (c->state != P3D_CTL_RUNNING && up == live)
            all_up(c, now);
        if (done == live)
            stop(c, 0, 0, now);
        break;
    case P3D_CTL_REPLACING:
        if (live)
            break;
        if (now >= c->fence_at) {
            respawn(c);
        } else if (!c->fence_said++) {
            say(c, "par3drun: waiting %.1f s more before the replacement starts: the lost node ends its own ranks by "
                   "then (fencing; --node-timeout)\n", c->fence_at - now);
        }
        break;
    case P3D_CTL_STOPPING:
        check_done(c);
        break;
    default:
        break;
    }
}

static void dispatch(p3d_ctl *c, const ctl_ev *e)
{
    ctl_handler h = table[c->state][e->type];
    c->cause = e->type;
    if (h)
        h(c, e);
    settle(c, e->now);
}

/* ---- the entry points (controller.h) ------------------------------------ */

static int agent_ok(const p3d_ctl *c, int a)
{
    return a >= 0 && a < c->cfg.nagents;
}

void p3d_ctl_message(p3d_ctl *c, int a, const p3d_amsg *m, double now)
{
    if (!agent_ok(c, a) || c->gone[a])
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
    default:
        return;
    }
    dispatch(c, &e);
}

void p3d_ctl_mark_dead(p3d_ctl *c, int a)
{
    if (!agent_ok(c, a))
        return;
    ctl_ev e = {.type = P3D_CTL_EV_MARK_DEAD, .a = a, .now = c->fail_seen};
    ctl_handler h = table[c->state][e.type];
    c->cause = e.type;
    if (h)
        h(c, &e); /* before the start: nothing to settle yet */
}

void p3d_ctl_gone(p3d_ctl *c, int a, const char *how, double now)
{
    p3d_ctl_gone_status(c, a, how, 0, now);
}

void p3d_ctl_gone_status(p3d_ctl *c, int a, const char *how, int clean, double now)
{
    if (!agent_ok(c, a) || c->gone[a])
        return;
    ctl_ev e = {.type = P3D_CTL_EV_GONE, .a = a, .how = how, .clean = clean, .now = now};
    dispatch(c, &e);
}

void p3d_ctl_fence(p3d_ctl *c, int a, double until)
{
    if (agent_ok(c, a) && until > c->fence_at)
        c->fence_at = until;
}

void p3d_ctl_signal(p3d_ctl *c, int sig, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_SIGNAL, .a = -1, .sig = sig, .now = now};
    dispatch(c, &e);
}

void p3d_ctl_abort(p3d_ctl *c, const char *why, int code, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_ABORT, .a = -1, .how = why, .code = code, .now = now};
    dispatch(c, &e);
}

void p3d_ctl_health_result(p3d_ctl *c, const unsigned char *bad, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_HEALTH, .a = -1, .bad = bad, .now = now};
    dispatch(c, &e);
}

void p3d_ctl_tick(p3d_ctl *c, double now)
{
    ctl_ev e = {.type = P3D_CTL_EV_TICK, .a = -1, .now = now};
    dispatch(c, &e);
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
    return agent_ok(c, a) && c->dead[a];
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
