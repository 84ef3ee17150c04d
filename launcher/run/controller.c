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
    if (!c->up_gen || !c->done_gen || !c->gone || !c->killed || !c->dead || !c->retiring) {
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
    free(c->story);
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
    c->state = P3D_CTL_RUNNING;
}

static void begin_replace(p3d_ctl *c, const int *lost, int nlost, const char *reason, double now);

/* --health-check after a failure: the nodes that fail it are lost. 1 when
 * the job goes on with a replacement (or stops), 0 when every node is
 * healthy. The checks take time: *now moves on by what they took, so that
 * the deadlines that follow (retire, grace) start after them. */
static int health_after_failure(p3d_ctl *c, const char *after, double *now)
{
    if (!c->ops.health)
        return 0;
    unsigned char *bad = calloc((size_t)c->cfg.nagents + 1, 1);
    int *lost = calloc((size_t)c->cfg.nagents + 1, sizeof *lost);
    int nlost = 0;
    double took = 0;
    int nbad = bad && lost ? c->ops.health(c->ops.ctx, c->dead, bad, &took) : 0;
    if (took > 0)
        *now += took;
    if (nbad > 0)
        for (int i = 0; i < c->cfg.nagents; i++)
            if (bad[i] && !c->dead[i])
                lost[nlost++] = i;
    free(bad);
    if (nlost) {
        char why[256];
        snprintf(why, sizeof why, "node %s failed its --health-check after %s", c->cfg.names[lost[0]], after);
        begin_replace(c, lost, nlost, why, *now);
    }
    free(lost);
    return nlost > 0;
}

static void failed(p3d_ctl *c, int a, const p3d_amsg *m, double now)
{
    if (m->gen != c->gen || stopping(c) || c->state == P3D_CTL_REPLACING)
        return; /* a consequence of a failure already being handled */
    char how[64];
    p3d_failure_how(m->code, m->sig, how, sizeof how);
    const char *name = c->cfg.names[a];
    char jn[160];
    event(c, "\"event\": \"failure\", \"node\": %s, \"rank\": %d, \"cause\": \"%s\", \"exit_code\": %d, "
             "\"signal\": %d",
          jstr(name, jn, sizeof jn), m->rank, m->rank >= 0 ? "rank failed" : "ranks could not start", m->code, m->sig);
    if (c->gen < c->cfg.max_restarts) {
        char after[96];
        snprintf(after, sizeof after, "rank %d failed (%s)", m->rank, how);
        if (health_after_failure(c, after, &now))
            return;
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
        if (!c->recovering)
            c->fail_seen = now;
        c->recovering = 1;
        event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"in-place\"", c->gen);
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

/* REPLACING: once every agent is gone, the transport starts the live ones
 * again on the new placement. */
static void maybe_respawn(p3d_ctl *c, double now)
{
    if (c->state != P3D_CTL_REPLACING)
        return;
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!c->gone[i])
            return;
    if (c->ops.respawn(c->ops.ctx, c->gen, c->dead) < 0) {
        c->state = P3D_CTL_STOPPING;
        set_summary(c, strdup("par3drun: root cause: cannot start the agents again after a replacement\n"));
        if (c->code < 0)
            c->code = P3D_EXIT_LOST;
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
    c->state = P3D_CTL_RESTARTING;
    (void)now;
}

/* Nodes lost[0..nlost) are gone for good: a new placement without them,
 * then every agent retires and starts again on it (one restart). */
static void begin_replace(p3d_ctl *c, const int *lost, int nlost, const char *reason, double now)
{
    char jr[512];
    for (int k = 0; k < nlost; k++)
        if (!c->dead[lost[k]]) {
            c->dead[lost[k]] = 1;
            c->ndead++;
        }
    story(c, now, "%s", reason);
    if (!c->recovering)
        c->fail_seen = now;
    c->recovering = 1;
    for (int k = 0; k < nlost; k++)
        if (lost[k] == c->cfg.leader) {
            char *s = NULL;
            if (asprintf(&s, "par3drun: root cause: %s; it is the leader's own node (the job controller runs there) "
                             "and cannot be replaced: put the leader on a node that runs no ranks (docs/launch.md, "
                             "\"When a node dies\")\n", reason) < 0)
                s = NULL;
            set_summary(c, s);
            stop(c, SIGTERM, P3D_EXIT_LOST, now);
            return;
        }
    if (!c->ops.replace || !c->ops.respawn) {
        char *s = NULL;
        if (asprintf(&s, "par3drun: root cause: %s; no spare to replace it (--spares K keeps some; an --emulate job "
                         "and a multi-node leader replace nodes in this version)\n", reason) < 0)
            s = NULL;
        set_summary(c, s);
        stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return;
    }
    if (c->gen >= c->cfg.max_restarts) {
        char *s = NULL;
        if (asprintf(&s, "par3drun: root cause: %s; no restart left to replace it (--max-restarts %d, every restart "
                         "counts)\n", reason, c->cfg.max_restarts) < 0)
            s = NULL;
        set_summary(c, s);
        stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return;
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
        if (c->state == P3D_CTL_RUNNING)
            c->recovering = 0;
        return;
    }
    if (rr < 0) {
        char *s = NULL;
        if (asprintf(&s, "par3drun: root cause: %s; cannot replace it: %s\n", reason, msg ? msg : "no placement") < 0)
            s = NULL;
        set_summary(c, s);
        free(msg);
        event(c, "\"event\": \"replace_failed\", \"reason\": %s", jstr(reason, jr, sizeof jr));
        stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return;
    }
    c->replaced += nlost;
    say(c, "par3drun: %s; %s; restarting all ranks (restart %d of %d)\n", reason, msg ? msg : "replaced", c->gen,
        c->cfg.max_restarts);
    story(c, now, "%s; restart %d", msg ? msg : "replaced", c->gen);
    free(msg);
    event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"replacement\"", c->gen);
    c->state = P3D_CTL_REPLACING;
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
    maybe_respawn(c, now);
}

void p3d_ctl_mark_dead(p3d_ctl *c, int a)
{
    if (a < 0 || a >= c->cfg.nagents || c->dead[a])
        return;
    c->dead[a] = 1;
    c->ndead++;
    if (!c->gone[a]) {
        c->gone[a] = 1;
        c->ngone++;
    }
}

void p3d_ctl_gone(p3d_ctl *c, int a, const char *how, double now)
{
    p3d_ctl_gone_status(c, a, how, 0, now);
}

void p3d_ctl_gone_status(p3d_ctl *c, int a, const char *how, int clean, double now)
{
    if (a < 0 || a >= c->cfg.nagents || c->gone[a])
        return;
    c->gone[a] = 1;
    c->ngone++;
    if (c->state == P3D_CTL_REPLACING && c->retiring[a] && (clean || c->killed[a] || c->dead[a])) {
        maybe_respawn(c, now);
        return;
    }
    if (!stopping(c)) {
        char why[512], jn[160], jh[300];
        snprintf(why, sizeof why, "lost the agent of node %s (node rank %d): %s", c->cfg.names[a], a,
                 how && how[0] ? how : "it ended unasked");
        event(c, "\"event\": \"failure\", \"node\": %s, \"rank\": -1, \"cause\": \"node lost\", \"how\": %s",
              jstr(c->cfg.names[a], jn, sizeof jn), jstr(how, jh, sizeof jh));
        if (c->ops.replace && c->ops.respawn) {
            int lost[1] = {a};
            begin_replace(c, lost, 1, why, now);
            check_done(c);
            return;
        }
        char *s = NULL;
        if (asprintf(&s, "par3drun: root cause: %s\n", why) < 0)
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
    if (c->state == P3D_CTL_REPLACING) {
        /* an agent that does not retire in time is ended (not lost) */
        for (int i = 0; now >= c->kill_at && i < c->cfg.nagents; i++)
            if (!c->gone[i] && !c->killed[i]) {
                c->killed[i] = 1;
                c->ops.kill(c->ops.ctx, i);
            }
        for (int i = 0; now >= c->giveup_at && i < c->cfg.nagents; i++)
            if (!c->gone[i]) {
                c->gone[i] = 1;
                c->ngone++;
            }
        maybe_respawn(c, now);
        return;
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
    if (c->state == P3D_CTL_STOPPING || c->state == P3D_CTL_REPLACING) {
        double t = c->state == P3D_CTL_REPLACING && c->timeout_at > 0 ? c->timeout_at : 0;
        for (int i = 0; i < c->cfg.nagents; i++)
            if (!c->gone[i] && !c->killed[i])
                return t && t < c->kill_at ? t : c->kill_at;
        return t && t < c->giveup_at ? t : c->giveup_at;
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
