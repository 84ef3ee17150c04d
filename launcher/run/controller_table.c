/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_table.c — what each controller state does with each event:
 * one handler per (state, event) cell, the table that names them, and
 * settle(), run after every event, which finishes whatever the event may
 * have completed. Every state change goes through ctl_go (controller.c).
 */
#include "controller_int.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the handlers: one per (state, event) cell of the table ------------ */

static int count_set(const unsigned char *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += v[i] != 0;
    return k;
}

/* Failover's majority rule on the leader's side: would losing agent a
 * leave this generation with half of its nodes or fewer? (The nodes lost
 * since the generation started, those lost while a check runs, and a.)
 * It holds under an election too: a leader frozen and continued finds
 * its nodes gone to an elected successor, and must not start a
 * generation of its own on what is left before its lease news arrives. */
static int lost_majority(const p3d_ctl *c, int a)
{
    int lost = c->ndead - c->dead0 + count_set(c->lostq, c->cfg.nagents) + !c->lostq[a];
    return 2 * lost >= c->members;
}

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
    ctl_event(c, "\"event\": \"failure\", \"node\": %s, \"rank\": %d, \"cause\": \"%s\", \"exit_code\": %d, "
             "\"signal\": %d",
          ctl_jstr(name, jn, sizeof jn), m->rank, m->rank >= 0 ? "rank failed" : "ranks could not start", m->code, m->sig);
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
            ctl_go(c, P3D_CTL_CHECKING);
            return;
        }
        ctl_restart_in_place(c, e->now);
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
    ctl_set_summary(c, s);
    ctl_stop(c, SIGTERM, m->code, e->now);
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
        int r = ctl_begin_replace(c, lost, nlost, why, e->now);
        free(lost);
        if (r != REPLACE_NOTHING)
            return;
    } else {
        free(lost);
    }
    ctl_restart_in_place(c, e->now);
}

static void on_gone(p3d_ctl *c, const ctl_ev *e)
{
    int a = e->a;
    if (c->gone[a])
        return;
    c->gone[a] = 1;
    c->ngone++;
    if (ctl_stopping(c) || c->dead[a])
        return;
    if (c->state == P3D_CTL_REPLACING && c->retiring[a] && (e->clean || c->killed[a]))
        return; /* retired: settle() starts the agents again once all have */
    if (c->state == P3D_CTL_TAKEOVER) {
        /* a node that rejoined the successor went away again: it counts
         * as lost when the takeover acts (settle) */
        if (c->rejoined[a]) {
            c->rejoined[a] = 0;
            c->nrejoined--;
        }
        return;
    }
    char why[512], jn[160], jh[300];
    snprintf(why, sizeof why, "lost the agent of node %s (node rank %d): %s", c->cfg.names[a], a,
             e->how && e->how[0] ? e->how : "it ended unasked");
    ctl_event(c, "\"event\": \"failure\", \"node\": %s, \"rank\": -1, \"cause\": \"node lost\", \"how\": %s",
          ctl_jstr(c->cfg.names[a], jn, sizeof jn), ctl_jstr(e->how, jh, sizeof jh));
    if (c->cfg.failover && lost_majority(c, a)) {
        /* half or more of the generation gone at once: this side may be
         * the minority of a partition, whose majority elects a successor
         * that starts the ranks again — this side's ranks end now, before
         * that successor's fence passes */
        c->dead[a] = 1;
        c->ndead++;
        ctl_summary_fmt(c, "par3drun: root cause: %s; %d of the %d nodes of restart %d are lost: the leader no "
                        "longer has a majority and stops (majority rule: the two sides of a partition never both "
                        "run; --no-failover turns it off)\n", why, c->ndead - c->dead0 + count_set(c->lostq, c->cfg.nagents),
                        c->members, c->gen);
        ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
        return;
    }
    if (c->ops.replace && c->ops.respawn) {
        if (c->state == P3D_CTL_CHECKING) {
            /* replaced with the nodes that fail the check */
            c->lostq[a] = 1;
            ctl_story(c, e->now, "%s", why);
            return;
        }
        int lost[1] = {a};
        ctl_begin_replace(c, lost, 1, why, e->now);
        return;
    }
    ctl_summary_fmt(c, "par3drun: root cause: %s\n", why);
    ctl_stop(c, SIGTERM, P3D_EXIT_LOST, e->now);
}

static void on_node_sig(p3d_ctl *c, const ctl_ev *e)
{
    char sn[32];
    int sig = e->m->sig > 0 ? e->m->sig : SIGTERM;
    if (!ctl_stopping(c))
        ctl_say(c, "par3drun: node %s (node rank %d) was stopped by %s; stopping the job (grace %g s)\n",
            c->cfg.names[e->a], e->a, ctl_sig_name(sig, sn, sizeof sn), c->cfg.grace);
    ctl_stop(c, sig, 128 + sig, e->now);
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
    ctl_sig_name(sig, sn, sizeof sn);
    if (!ctl_stopping(c))
        ctl_say(c, "par3drun: %s: stopping %d rank%s on %d node%s (%s to every rank, SIGKILL after the %g s grace; a "
               "second signal skips it)\n",
            sn, c->cfg.nranks, c->cfg.nranks == 1 ? "" : "s", c->cfg.nagents, c->cfg.nagents == 1 ? "" : "s", sn,
            c->cfg.grace);
    else if (sig != SIGQUIT && c->stop_sig != SIGKILL)
        ctl_say(c, "par3drun: %s again: SIGKILL to every rank now\n", sn);
    ctl_stop(c, sig, 128 + sig, e->now);
}

static void on_abort(p3d_ctl *c, const ctl_ev *e)
{
    if (!ctl_stopping(c) && e->how)
        ctl_summary_fmt(c, "par3drun: root cause: %s\n", e->how);
    ctl_stop(c, SIGKILL, e->code, e->now);
}

static void on_mark_dead(p3d_ctl *c, const ctl_ev *e)
{
    if (c->dead[e->a])
        return;
    c->dead[e->a] = 1;
    c->ndead++;
    /* never started: not a node of the generation (majority rule) */
    c->members--;
    c->dead0++;
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
                ctl_say(c, "par3drun: the agent of node %s did not end %g s past its grace: ending it by force\n",
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
    if (!ctl_stopping(c) && c->timeout_at > 0 && e->now >= c->timeout_at) {
        ctl_say(c, "par3drun: --timeout %g s reached; stopping the job\n", c->cfg.timeout);
        ctl_stop(c, SIGTERM, 124, e->now);
    }
    if (c->state == P3D_CTL_CHECKING && e->now >= c->health_at) {
        ctl_say(c, "par3drun: warning: the --health-check result did not come within %g s; the nodes count as "
               "healthy\n", c->cfg.health_timeout + 2 * P3D_CTL_SLACK);
        ctl_ev h = {.type = P3D_CTL_EV_HEALTH, .a = -1, .now = e->now};
        on_health(c, &h);
        return;
    }
    if (c->state == P3D_CTL_REPLACING || c->state == P3D_CTL_STOPPING)
        enforce_deadlines(c, e->now);
    if (c->state == P3D_CTL_RUNNING)
        ctl_slow_tick(c, e->now); /* slow nodes judged; --slow-node replace */
}

static void takeover_tick(p3d_ctl *c, double now);
static void takeover_act(p3d_ctl *c, double now);

static void on_tick_takeover(p3d_ctl *c, const ctl_ev *e)
{
    on_tick(c, e);
    if (c->state == P3D_CTL_TAKEOVER)
        takeover_tick(c, e->now);
}

/* A progress summary (controller_slow.c): recorded while ranks run; a
 * slow node's newer checkpoint may start its replacement (RUNNING). */
static void on_progress(p3d_ctl *c, const ctl_ev *e)
{
    ctl_slow_progress(c, e);
}

/* The first sign of life of an agent's restarted ranks (V): the time to
 * training resumed (controller.c). */
static void on_resumed(p3d_ctl *c, const ctl_ev *e)
{
    ctl_resumed(c, e->a, e->m->gen, e->now);
}

/* ---- leader failover (controller.h): LEADER_LOST, REJOIN, TAKEOVER ------ */

static void refuse(p3d_ctl *c, int a, const char *why)
{
    char jn[160], jw[200];
    ctl_event(c, "\"event\": \"rejoin_refused\", \"node\": %s, \"why\": %s", ctl_jstr(c->cfg.names[a], jn, sizeof jn),
              ctl_jstr(why, jw, sizeof jw));
    if (c->cfg.verbose)
        ctl_say(c, "par3drun: node %s reconnected and was refused: %s; it is told to stop\n", c->cfg.names[a], why);
    p3d_amsg m = {.type = P3D_AM_STOP, .sig = SIGKILL, .code = P3D_EXIT_LOST};
    c->ops.send(c->ops.ctx, a, &m);
    c->ops.kill(c->ops.ctx, a);
}

/* The leader's node is lost (e->a: the successor, e->heard: when the old
 * leader was last heard). What every node holds carries over (the
 * generation, the dead nodes); who is up does not: every node fenced its
 * ranks when it lost the leader, and must rejoin the successor. */
static void on_leader_lost(p3d_ctl *c, const ctl_ev *e)
{
    int old = c->cfg.leader, s = e->a, n = c->cfg.nagents;
    const char *why = e->how && e->how[0] ? e->how : "its heartbeat stopped";
    char jo[160], js[160], jw[400];
    if (old >= 0 && !c->dead[old]) {
        c->dead[old] = 1;
        c->ndead++;
    }
    if (old >= 0 && !c->gone[old]) {
        c->gone[old] = 1;
        c->ngone++;
    }
    int ok = c->cfg.failover && old >= 0 && ctl_agent_ok(c, s) && !c->dead[s];
    if (ctl_stopping(c)) {
        /* the nodes were told to end: the successor only sees it done */
        if (ok)
            c->cfg.leader = s;
        return;
    }
    ctl_event(c, "\"event\": \"leader_lost\", \"leader\": %s, \"successor\": %s, \"reason\": %s",
              ctl_jstr(old >= 0 ? c->cfg.names[old] : "", jo, sizeof jo),
              ctl_jstr(ok ? c->cfg.names[s] : "", js, sizeof js), ctl_jstr(why, jw, sizeof jw));
    if (!ok) {
        ctl_summary_fmt(c, "par3drun: root cause: lost the leader's node %s (the job controller ran there): %s; %s\n",
                        old >= 0 ? c->cfg.names[old] : "?", why,
                        c->cfg.failover ? "no node is left to take over" : "--no-failover: the job ends");
        ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
        return;
    }
    c->olds[old] = 1;
    if (!c->in_takeover) {
        c->in_takeover = 1;
        c->old_leader = old;
        c->heard = e->heard;
        free(c->takeover_why);
        c->takeover_why = strdup(why);
    }
    if (!c->recovering)
        c->fail_seen = e->heard;
    c->recovering = 1;
    double nt = c->cfg.node_timeout > 0 ? c->cfg.node_timeout : 10;
    /* the old leader's ranks end by its own deadline: no rank twice */
    if (e->heard + nt + P3D_FENCE_SLACK > c->fence_at)
        c->fence_at = e->heard + nt + P3D_FENCE_SLACK;
    c->takeover_until = e->now + nt;
    c->cfg.leader = s;
    for (int i = 0; i < n; i++) {
        c->up_gen[i] = c->done_gen[i] = -1;
        c->retiring[i] = c->killed[i] = c->lostq[i] = c->rejoined[i] = 0;
        c->gone[i] = i != s;
    }
    c->ngone = n - 1;
    c->rejoined[s] = 1;
    c->nrejoined = 1;
    c->elected = 0; /* a successor lost too: the next one bids anew */
    c->kill_at = c->giveup_at = 0;
    c->fence_said = 0;
    if (c->cfg.elect)
        ctl_say(c, "par3drun: lost the leader's node %s (%s); node %s takes over once etcd elects it (within %g s) "
                "and the nodes of restart %d have rejoined it\n", c->cfg.names[old], why, c->cfg.names[s],
                nt + c->cfg.elect_wait, c->gen);
    else
        ctl_say(c, "par3drun: lost the leader's node %s (%s); node %s takes over once more than half of the %d nodes "
                "of restart %d have rejoined it (within %g s)\n", c->cfg.names[old], why, c->cfg.names[s], c->members,
                c->gen, nt);
    ctl_story(c, e->now, "lost the leader's node %s (%s); %s takes over", c->cfg.names[old], why, c->cfg.names[s]);
    ctl_go(c, P3D_CTL_TAKEOVER);
}

/* Node e->a reconnected to the successor, holding generation e->gen. */
static void on_rejoin(p3d_ctl *c, const ctl_ev *e)
{
    int a = e->a;
    if (c->rejoined[a])
        return;
    if (c->dead[a]) {
        refuse(c, a, "the node was lost before");
        return;
    }
    if (e->gen < c->gen) {
        refuse(c, a, "it holds an older generation");
        return;
    }
    if (e->gen > c->gen)
        c->gen = e->gen; /* the successor missed the last restart order */
    c->rejoined[a] = 1;
    c->nrejoined++;
    if (c->gone[a]) {
        c->gone[a] = 0;
        c->ngone--;
    }
}

/* Outside a takeover, a node that says it lost the leader has fenced its
 * own ranks: it is told to stop, and its loss is handled like any other. */
static void on_rejoin_refuse(p3d_ctl *c, const ctl_ev *e)
{
    refuse(c, e->a, c->dead[e->a] ? "the node was lost before" : "this leader is alive; its node fenced its ranks");
}

/* TAKEOVER with a majority: the old leaders and every node that did not
 * rejoin are lost; the next generation starts on the nodes that did
 * (the one replacement path: their ranks move to spares). */
static void takeover_act(p3d_ctl *c, double now)
{
    int n = c->cfg.nagents, nlost = 0;
    int *lost = calloc((size_t)n + 1, sizeof *lost);
    if (!lost) {
        ctl_set_summary(c, strdup("par3drun: root cause: out of memory during a takeover\n"));
        ctl_stop(c, SIGKILL, P3D_EXIT_LOST, now);
        return;
    }
    for (int i = 0; i < n; i++)
        if (c->olds[i] || (!c->dead[i] && !c->rejoined[i]))
            lost[nlost++] = i;
    memset(c->olds, 0, (size_t)n);
    char why[640];
    snprintf(why, sizeof why, "lost the leader's node %s (node rank %d): %s; node %s took over with %d of the %d nodes "
             "of restart %d", c->cfg.names[c->old_leader], c->old_leader, c->takeover_why ? c->takeover_why : "",
             c->cfg.names[c->cfg.leader], c->nrejoined, c->members, c->gen);
    int r = ctl_begin_replace(c, lost, nlost, why, now);
    free(lost);
    if (r != REPLACE_NOTHING)
        return;
    /* the lost nodes ran no rank; every rank still starts again: each
     * node fenced its own when it lost the leader */
    if (c->gen >= c->cfg.max_restarts) {
        ctl_summary_fmt(c, "par3drun: root cause: %s; no restart left to start the ranks again (--max-restarts %d)\n",
                        why, c->cfg.max_restarts);
        ctl_stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return;
    }
    c->gen++;
    ctl_event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"takeover\"", c->gen);
    ctl_retire_all(c, now);
}

/* TAKEOVER's deadline passed without a majority (or an election): this
 * side stops. */
static void takeover_tick(p3d_ctl *c, double now)
{
    if (ctl_takeover_quorum(c) || now < ctl_takeover_giveup(c))
        return;
    double nt = c->cfg.node_timeout > 0 ? c->cfg.node_timeout : 10;
    if (c->cfg.elect) {
        ctl_summary_fmt(c, "par3drun: root cause: lost the leader's node %s; etcd did not elect node %s within %g s: "
                        "another node leads, or the old leader still holds its lease, so this node stops\n",
                        c->cfg.names[c->old_leader], c->cfg.names[c->cfg.leader], nt + c->cfg.elect_wait);
        ctl_stop(c, SIGKILL, P3D_EXIT_LOST, now);
        return;
    }
    ctl_summary_fmt(c, "par3drun: root cause: lost the leader's node %s; only %d of the %d nodes of restart %d "
                    "rejoined node %s within %g s (--node-timeout): no majority, so this side stops (majority rule: "
                    "the two sides of a partition never both run)\n", c->cfg.names[c->old_leader], c->nrejoined,
                    c->members, c->gen, c->cfg.names[c->cfg.leader], nt);
    ctl_stop(c, SIGKILL, P3D_EXIT_LOST, now);
}

/* What the backend's election said (cfg.elect; e->gen: P3D_CTL_ELECT_*).
 * Ignored unless it can matter: a win or a refusal only while this node
 * bids (TAKEOVER), a lapsed leadership while the job is not ending. */
static void on_election(p3d_ctl *c, const ctl_ev *e)
{
    const char *why = e->how && e->how[0] ? e->how : "the backend said so";
    char jw[600], jn[160];
    if (!c->cfg.elect || ctl_stopping(c))
        return;
    if (e->gen == P3D_CTL_ELECT_WON) {
        if (c->state != P3D_CTL_TAKEOVER || c->elected)
            return;
        c->elected = 1;
        ctl_event(c, "\"event\": \"elected\", \"node\": %s, \"why\": %s",
                  ctl_jstr(c->cfg.names[c->cfg.leader], jn, sizeof jn), ctl_jstr(why, jw, sizeof jw));
        if (c->cfg.verbose)
            ctl_say(c, "par3drun: node %s: %s\n", c->cfg.names[c->cfg.leader], why);
        return;
    }
    if (e->gen == P3D_CTL_ELECT_NOT_WON && c->state != P3D_CTL_TAKEOVER)
        return;
    ctl_event(c, "\"event\": \"%s\", \"why\": %s", e->gen == P3D_CTL_ELECT_NOT_WON ? "not_elected" : "leadership_lost",
              ctl_jstr(why, jw, sizeof jw));
    ctl_summary_fmt(c, "par3drun: root cause: %s: %s; this node stops its ranks (another node may be elected)\n",
                    e->gen == P3D_CTL_ELECT_NOT_WON ? "etcd did not elect this node" : "this node's etcd lease lapsed",
                    why);
    ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
}

typedef void (*ctl_handler)(p3d_ctl *c, const ctl_ev *e);

/* What each state does with each event; NULL: nothing (the event is a
 * consequence of one already being handled, or comes too late). */
static const ctl_handler table[P3D_CTL_NSTATES][P3D_CTL_NEVENTS] = {
    [P3D_CTL_STARTING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_FAIL] = on_fail, [P3D_CTL_EV_DONE] = on_done,
                          [P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                          [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort, [P3D_CTL_EV_TICK] = on_tick,
                          [P3D_CTL_EV_MARK_DEAD] = on_mark_dead, [P3D_CTL_EV_PROGRESS] = on_progress,
                          [P3D_CTL_EV_RESUMED] = on_resumed, [P3D_CTL_EV_LEADER_LOST] = on_leader_lost,
                          [P3D_CTL_EV_REJOIN] = on_rejoin_refuse, [P3D_CTL_EV_ELECTION] = on_election},
    [P3D_CTL_RUNNING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_FAIL] = on_fail, [P3D_CTL_EV_DONE] = on_done,
                         [P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                         [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort, [P3D_CTL_EV_TICK] = on_tick,
                         [P3D_CTL_EV_PROGRESS] = on_progress, [P3D_CTL_EV_RESUMED] = on_resumed,
                         [P3D_CTL_EV_LEADER_LOST] = on_leader_lost, [P3D_CTL_EV_REJOIN] = on_rejoin_refuse, [P3D_CTL_EV_ELECTION] = on_election},
    [P3D_CTL_CHECKING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_DONE] = on_done, [P3D_CTL_EV_NODE_SIG] = on_node_sig,
                          [P3D_CTL_EV_GONE] = on_gone, [P3D_CTL_EV_SIGNAL] = on_signal,
                          [P3D_CTL_EV_ABORT] = on_abort, [P3D_CTL_EV_TICK] = on_tick,
                          [P3D_CTL_EV_HEALTH] = on_health, [P3D_CTL_EV_LEADER_LOST] = on_leader_lost,
                          [P3D_CTL_EV_REJOIN] = on_rejoin_refuse, [P3D_CTL_EV_ELECTION] = on_election},
    [P3D_CTL_RESTARTING] = {[P3D_CTL_EV_UP] = on_up, [P3D_CTL_EV_FAIL] = on_fail, [P3D_CTL_EV_DONE] = on_done,
                            [P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                            [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort,
                            [P3D_CTL_EV_TICK] = on_tick, [P3D_CTL_EV_PROGRESS] = on_progress,
                            [P3D_CTL_EV_RESUMED] = on_resumed, [P3D_CTL_EV_LEADER_LOST] = on_leader_lost,
                            [P3D_CTL_EV_REJOIN] = on_rejoin_refuse, [P3D_CTL_EV_ELECTION] = on_election},
    [P3D_CTL_REPLACING] = {[P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                           [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort,
                           [P3D_CTL_EV_TICK] = on_tick, [P3D_CTL_EV_LEADER_LOST] = on_leader_lost,
                           [P3D_CTL_EV_REJOIN] = on_rejoin_refuse, [P3D_CTL_EV_ELECTION] = on_election},
    [P3D_CTL_STOPPING] = {[P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                          [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort,
                          [P3D_CTL_EV_TICK] = on_tick, [P3D_CTL_EV_LEADER_LOST] = on_leader_lost,
                          [P3D_CTL_EV_REJOIN] = on_rejoin_refuse, [P3D_CTL_EV_ELECTION] = on_election},
    [P3D_CTL_DONE] = {0},
    /* old-generation messages (UP, FAIL, DONE, PROGRESS) and a late
     * health result mean nothing here: every node fenced its ranks */
    [P3D_CTL_TAKEOVER] = {[P3D_CTL_EV_NODE_SIG] = on_node_sig, [P3D_CTL_EV_GONE] = on_gone,
                          [P3D_CTL_EV_SIGNAL] = on_signal, [P3D_CTL_EV_ABORT] = on_abort,
                          [P3D_CTL_EV_TICK] = on_tick_takeover, [P3D_CTL_EV_LEADER_LOST] = on_leader_lost,
                          [P3D_CTL_EV_REJOIN] = on_rejoin, [P3D_CTL_EV_ELECTION] = on_election},
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
                ctl_set_summary(c, strdup("par3drun: root cause: every node's agent is gone\n"));
            ctl_stop(c, SIGTERM, P3D_EXIT_LOST, now);
            break;
        }
        if (c->state != P3D_CTL_RUNNING && up == live)
            ctl_all_up(c, now);
        if (done == live)
            ctl_stop(c, 0, 0, now);
        break;
    case P3D_CTL_REPLACING:
        if (live)
            break;
        if (now >= c->fence_at) {
            ctl_respawn(c);
        } else if (!c->fence_said++) {
            ctl_say(c, "par3drun: waiting %.1f s more before the replacement starts: the lost node ends its own ranks by "
                   "then (fencing; --node-timeout)\n", c->fence_at - now);
        }
        break;
    case P3D_CTL_STOPPING:
        ctl_check_done(c);
        break;
    case P3D_CTL_TAKEOVER:
        /* a majority, the old leader's fence passed, and either every
         * live node of the generation is in or the deadline came (the rest
         * count as lost then): a node that noticed the loss a little later
         * than the others still makes it, where acting at the fence would
         * have lost it and perhaps the spare it needs */
        if (ctl_takeover_quorum(c) && now >= c->fence_at && (ctl_takeover_all_in(c) || now >= c->takeover_until))
            takeover_act(c, now);
        break;
    default:
        break;
    }
}

void ctl_dispatch(p3d_ctl *c, const ctl_ev *e)
{
    ctl_handler h = table[c->state][e->type];
    p3d_ctl_state before = c->state;
    c->cause = e->type;
    if (h)
        h(c, e);
    /* A progress summary changes no agent's up, done or gone, which is
     * all that settle() looks at (O(agents)): it settles only when it
     * moved the state (a slow node's replacement). Every node sends one
     * per interval, so this keeps the leader's cost O(nodes) a round; a
     * first sign of life (one per node a generation) changes none either. */
    if ((e->type != P3D_CTL_EV_PROGRESS && e->type != P3D_CTL_EV_RESUMED) || c->state != before)
        settle(c, e->now);
}
