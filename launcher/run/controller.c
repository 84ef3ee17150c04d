/*
 * controller.c — the job controller's state machine (controller.h).
 *
 * Everything here is a reaction to one event; nothing blocks, nothing
 * does I/O except through the ops. The messages it prints are the job's
 * user-visible story, the same for one node, --emulate and a multi-node
 * leader.
 */
#include "controller.h"

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
};

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
    if (!c->up_gen || !c->done_gen || !c->gone || !c->killed) {
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
    free(c->summary);
    free(c);
}

static void set_summary(p3d_ctl *c, char *s)
{
    free(c->summary);
    c->summary = s;
}

static int stopping(const p3d_ctl *c)
{
    return c->state == P3D_CTL_STOPPING || c->state == P3D_CTL_DONE;
}

static void check_done(p3d_ctl *c)
{
    if (c->state == P3D_CTL_STOPPING && c->ngone >= c->cfg.nagents)
        c->state = P3D_CTL_DONE;
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
        c->state = P3D_CTL_STOPPING;
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

static void all_up(p3d_ctl *c, double now)
{
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!c->gone[i] && c->up_gen[i] != c->gen)
            return;
    if (c->state == P3D_CTL_RESTARTING) {
        double t = now - c->fail_seen;
        if (t > c->recovery_max)
            c->recovery_max = t;
        if (c->cfg.verbose)
            say(c, "par3drun: restart %d: all ranks running again %.2f s after the failure was seen\n", c->gen, t);
    }
    c->state = P3D_CTL_RUNNING;
}

static void failed(p3d_ctl *c, int a, const p3d_amsg *m, double now)
{
    if (m->gen != c->gen || stopping(c))
        return; /* a consequence of a failure already being handled */
    char how[64];
    p3d_failure_how(m->code, m->sig, how, sizeof how);
    const char *name = c->cfg.names[a];
    if (c->gen < c->cfg.max_restarts) {
        /* not the root cause yet: one line; the summary is printed once,
         * for the failure that ends the job */
        c->gen++;
        if (m->rank >= 0)
            say(c, "par3drun: rank %d failed (%s); restarting all ranks (restart %d of %d)\n", m->rank, how,
                c->gen, c->cfg.max_restarts);
        else
            say(c, "par3drun: node %s could not start its ranks (%s); restarting all ranks (restart %d of %d)\n",
                name, how, c->gen, c->cfg.max_restarts);
        for (int k = 0; k < c->cfg.nagents; k++)
            c->done_gen[k] = -1;
        c->state = P3D_CTL_RESTARTING;
        c->fail_seen = now;
        p3d_amsg r = {.type = P3D_AM_RESTART, .gen = c->gen};
        c->ops.send(c->ops.ctx, -1, &r);
        return;
    }
    char *s = NULL;
    if (m->text && m->text[0]) {
        s = strdup(m->text);
    } else if (asprintf(&s, "par3drun: root cause: %s %d on node %s %s (%s)\n",
                        m->rank >= 0 ? "rank" : "node rank", m->rank >= 0 ? m->rank : a, name,
                        m->rank >= 0 ? "failed" : "could not start its ranks", how) < 0) {
        s = NULL;
    }
    set_summary(c, s);
    stop(c, SIGTERM, m->code, now);
}

void p3d_ctl_message(p3d_ctl *c, int a, const p3d_amsg *m, double now)
{
    if (a < 0 || a >= c->cfg.nagents || c->gone[a])
        return;
    switch (m->type) {
    case P3D_AM_FAIL:
        failed(c, a, m, now);
        break;
    case P3D_AM_UP:
        if (m->gen == c->gen) {
            c->up_gen[a] = m->gen;
            if (c->state == P3D_CTL_STARTING || c->state == P3D_CTL_RESTARTING)
                all_up(c, now);
        }
        break;
    case P3D_AM_DONE: {
        if (m->gen != c->gen)
            break;
        c->done_gen[a] = m->gen;
        for (int k = 0; k < c->cfg.nagents; k++)
            if (!c->gone[k] && c->done_gen[k] != c->gen)
                return;
        if (!stopping(c))
            stop(c, 0, 0, now);
        break;
    }
    case P3D_AM_SIGNAL: {
        char sn[32];
        int sig = m->sig > 0 ? m->sig : SIGTERM;
        if (!stopping(c))
            say(c, "par3drun: node %s (node rank %d) was stopped by %s; stopping the job (grace %g s)\n",
                c->cfg.names[a], a, sig_name(sig, sn, sizeof sn), c->cfg.grace);
        stop(c, sig, 128 + sig, now);
        break;
    }
    default:
        break;
    }
}

void p3d_ctl_gone(p3d_ctl *c, int a, const char *how, double now)
{
    if (a < 0 || a >= c->cfg.nagents || c->gone[a])
        return;
    c->gone[a] = 1;
    c->ngone++;
    if (!stopping(c)) {
        char *s = NULL;
        if (asprintf(&s, "par3drun: root cause: lost the agent of node %s (node rank %d): %s\n", c->cfg.names[a], a,
                     how && how[0] ? how : "it ended unasked") < 0)
            s = NULL;
        set_summary(c, s);
        stop(c, SIGTERM, P3D_EXIT_LOST, now);
    }
    check_done(c);
}

void p3d_ctl_signal(p3d_ctl *c, int sig, double now)
{
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
    stop(c, sig, 128 + sig, now);
}

void p3d_ctl_abort(p3d_ctl *c, const char *why, int code, double now)
{
    if (!stopping(c) && why) {
        char *s = NULL;
        if (asprintf(&s, "par3drun: root cause: %s\n", why) < 0)
            s = NULL;
        set_summary(c, s);
    }
    stop(c, SIGKILL, code, now);
}

void p3d_ctl_tick(p3d_ctl *c, double now)
{
    if (!stopping(c) && c->timeout_at > 0 && now >= c->timeout_at) {
        say(c, "par3drun: --timeout %g s reached; stopping the job\n", c->cfg.timeout);
        stop(c, SIGTERM, 124, now);
    }
    if (c->state != P3D_CTL_STOPPING)
        return;
    if (now >= c->kill_at)
        for (int i = 0; i < c->cfg.nagents; i++)
            if (!c->gone[i] && !c->killed[i]) {
                c->killed[i] = 1;
                if (c->cfg.verbose)
                    say(c, "par3drun: the agent of node %s did not end %g s past its grace: ending it by force\n",
                        c->cfg.names[i], P3D_CTL_SLACK);
                c->ops.kill(c->ops.ctx, i);
            }
    if (now >= c->giveup_at)
        for (int i = 0; i < c->cfg.nagents; i++)
            if (!c->gone[i]) {
                c->gone[i] = 1;
                c->ngone++;
            }
    check_done(c);
}

double p3d_ctl_deadline(const p3d_ctl *c)
{
    if (c->state == P3D_CTL_DONE)
        return 0;
    if (c->state == P3D_CTL_STOPPING) {
        for (int i = 0; i < c->cfg.nagents; i++)
            if (!c->gone[i] && !c->killed[i])
                return c->kill_at;
        return c->giveup_at;
    }
    return c->timeout_at;
}

p3d_ctl_state p3d_ctl_get_state(const p3d_ctl *c)
{
    return c->state;
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
    return c->recovery_max;
}
