/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_on.c — the controller's handlers: each is the work of one or
 * more (state, event) cells of the table (controller_table.c), which names
 * it and the states it may move to. A handler does not look at the state:
 * where a state means something else by an event, it has a handler of its
 * own (on_gone_checking, on_tick_stopping, ...).
 */
#include "controller_int.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_set(const unsigned char *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += v[i] != 0;
    return k;
}

/* ---- the agents' reports ------------------------------------------------ */

void ctl_on_up(p3d_ctl *c, const ctl_ev *e)
{
    if (e->m->gen == c->gen) {
        c->up_gen[e->a] = e->m->gen;
        c->nranks_of[e->a] = e->m->nranks;
    }
}

void ctl_on_done(p3d_ctl *c, const ctl_ev *e)
{
    if (e->m->gen == c->gen)
        c->done_gen[e->a] = e->m->gen;
}

/* A rank failed (or could not start): before any remedy the fault is
 * classified (controller_fault.c): the failure opens a window in which
 * the other nodes' failures are collected (COLLECTING), unless it is
 * already every node's or no restart is left. A failure of an older generation is a
 * consequence of one already being handled. */
void ctl_on_fail(p3d_ctl *c, const ctl_ev *e)
{
    if (e->m->gen != c->gen)
        return;
    ctl_fault_add(c, e);
    /* with no restart left every verdict stops the job: no waiting (a
     * failing job is torn down within its grace) */
    if (ctl_fault_all_in(c) || c->gen >= c->cfg.max_restarts) {
        c->flt.early = !ctl_fault_all_in(c);
        ctl_fault_decide(c, e->now);
        return;
    }
    c->flt.until = e->now + c->cfg.fault_window;
    ctl_go(c, P3D_CTL_COLLECTING);
}

/* COLLECTING: one more node's failure; the verdict once every node's is in. */
void ctl_on_fail_collecting(p3d_ctl *c, const ctl_ev *e)
{
    if (e->m->gen != c->gen)
        return;
    ctl_fault_add(c, e);
    if (ctl_fault_all_in(c))
        ctl_fault_decide(c, e->now);
}

/* COLLECTING: every other node ran its ranks to the end; the failure
 * still needs its verdict. */
void ctl_on_all_done_collecting(p3d_ctl *c, const ctl_ev *e)
{
    ctl_fault_decide(c, e->now);
}

/* CHECKING: the nodes that failed the check, and those lost meanwhile, are
 * replaced; when there are none, or they were only spares, the failure
 * that started the check is restarted in place. */
void ctl_on_health(p3d_ctl *c, const ctl_ev *e)
{
    int n = c->cfg.nagents, nlost = 0, first_bad = -1, first_lost = -1;
    int *lost = calloc((size_t)n + 1, sizeof *lost);
    for (int i = 0; lost && i < n; i++) {
        int bad = e->bad && e->bad[i];
        if (c->dead[i] || !(bad || c->chk.lostq[i]))
            continue;
        lost[nlost++] = i;
        if (bad && first_bad < 0)
            first_bad = i;
        if (!bad && first_lost < 0)
            first_lost = i;
    }
    memset(c->chk.lostq, 0, (size_t)n);
    int r = REPLACE_NOTHING;
    if (nlost) {
        char how[64], why[384];
        p3d_failure_how(c->pend.code, c->pend.sig, how, sizeof how);
        if (first_bad >= 0)
            snprintf(why, sizeof why, "node %s failed its --health-check after rank %d failed (%s)",
                     c->cfg.names[first_bad], c->pend.rank, how);
        else
            snprintf(why, sizeof why,
                     "lost the agent of node %s (node rank %d) during the --health-check after "
                     "rank %d failed (%s)",
                     c->cfg.names[first_lost], first_lost, c->pend.rank, how);
        r = ctl_begin_replace(c, lost, nlost, why, e->now);
    }
    free(lost);
    if (r == REPLACE_NOTHING)
        ctl_restart_in_place(c, e->now);
}

void ctl_on_mark_dead(p3d_ctl *c, const ctl_ev *e)
{
    if (c->dead[e->a])
        return;
    ctl_mark_lost(c, e->a);
    /* never started: not a node of the generation (majority rule) */
    c->members--;
    c->dead0++;
    ctl_mark_gone(c, e->a);
}

void ctl_on_progress(p3d_ctl *c, const ctl_ev *e)
{
    ctl_slow_record(c, e);
}

/* RUNNING: a slow node's newer checkpoint may post its replacement, and a
 * checkpoint newer than a shrink the grow (controller_elastic.c). */
void ctl_on_progress_running(p3d_ctl *c, const ctl_ev *e)
{
    if (ctl_slow_record(c, e)) {
        ctl_slow_ckpt(c, e->a);
        ctl_grow_look(c, e->now); /* a checkpoint newer than the shrink */
    }
}

/* The first sign of life of an agent's restarted ranks (V). */
void ctl_on_resumed(p3d_ctl *c, const ctl_ev *e)
{
    ctl_resumed(c, e->a, e->m->gen, e->now);
}

/* ---- a lost agent -------------------------------------------------------- */

/* Failover's majority rule on the leader's side: would losing agent a
 * leave this generation with half of its nodes or fewer? (The nodes lost
 * since the generation started, those lost while a check runs, and a.)
 * It holds under an election too: a leader frozen and continued finds
 * its nodes gone to an elected successor, and must not start a
 * generation of its own on what is left before its lease news arrives. */
static int lost_majority(const p3d_ctl *c, int a)
{
    int lost = c->ndead - c->dead0 + count_set(c->chk.lostq, c->cfg.nagents) + !c->chk.lostq[a];
    return 2 * lost >= c->members;
}

/* Agent a was lost unasked: its story; 1 when the job stops for it
 * (failover's majority rule, or no way to replace it). */
static int lost_stops(p3d_ctl *c, const ctl_ev *e, char *why, size_t cap)
{
    int a = e->a;
    char jn[160], jh[300];
    snprintf(why, cap, "lost the agent of node %s (node rank %d): %s", c->cfg.names[a], a,
             e->how && e->how[0] ? e->how : "it ended unasked");
    ctl_event(c,
              "\"event\": \"failure\", \"node\": %s, \"rank\": -1, \"cause\": \"node lost\", \"how\": %s, "
              "\"fault\": \"node\"",
              ctl_jstr(c->cfg.names[a], jn, sizeof jn), ctl_jstr(e->how, jh, sizeof jh));
    ctl_fault_lost(c);
    if (c->cfg.failover && lost_majority(c, a)) {
        /* half or more of the generation gone at once: this side may be
         * the minority of a partition, whose majority elects a successor
         * that starts the ranks again — this side's ranks end now, before
         * that successor's fence passes */
        ctl_mark_lost(c, a);
        ctl_summary_fmt(c,
                        "par3drun: root cause: %s; %d of the %d nodes of restart %d are lost: the leader no "
                        "longer has a majority and stops (majority rule: the two sides of a partition never both "
                        "run; --no-failover turns it off)\n",
                        why, c->ndead - c->dead0 + count_set(c->chk.lostq, c->cfg.nagents), c->members, c->gen);
        ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
        return 1;
    }
    if (c->ops.replace && c->ops.respawn)
        return 0;
    ctl_summary_fmt(c, "par3drun: root cause: %s\n", why);
    ctl_stop(c, SIGTERM, P3D_EXIT_LOST, e->now);
    return 1;
}

/* STARTING, RUNNING, RESTARTING: a lost node is replaced. */
void ctl_on_gone_live(p3d_ctl *c, const ctl_ev *e)
{
    char why[512];
    ctl_mark_gone(c, e->a);
    if (c->dead[e->a] || lost_stops(c, e, why, sizeof why))
        return;
    int lost[1] = {e->a};
    ctl_begin_replace(c, lost, 1, why, e->now);
}

/* REPLACING: an agent told to retire that ended by itself (or by force)
 * retired; any other loss is one more replacement. */
void ctl_on_gone_replacing(p3d_ctl *c, const ctl_ev *e)
{
    if (c->retiring[e->a] && (e->clean || c->killed[e->a])) {
        ctl_mark_gone(c, e->a);
        return;
    }
    ctl_on_gone_live(c, e);
}

/* COLLECTING: a lost node is a node fault, replaced as in RUNNING; the
 * failures collected so far were its consequences (recorded so). A lost
 * spare moves nothing: the window goes on, and may be complete now. */
void ctl_on_gone_collecting(p3d_ctl *c, const ctl_ev *e)
{
    ctl_on_gone_live(c, e);
    if (c->state != P3D_CTL_COLLECTING)
        ctl_fault_consequences(c);
    else if (ctl_fault_all_in(c))
        ctl_fault_decide(c, e->now);
}

/* CHECKING: a lost node joins the nodes that fail the check. */
void ctl_on_gone_checking(p3d_ctl *c, const ctl_ev *e)
{
    char why[512];
    ctl_mark_gone(c, e->a);
    if (c->dead[e->a] || lost_stops(c, e, why, sizeof why))
        return;
    c->chk.lostq[e->a] = 1;
    ctl_story(c, e->now, "%s", why);
}

void ctl_on_gone_stopping(p3d_ctl *c, const ctl_ev *e)
{
    ctl_mark_gone(c, e->a);
}

/* TAKEOVER: a node that rejoined the successor went away again; it counts
 * as lost when the takeover acts. */
void ctl_on_gone_takeover(p3d_ctl *c, const ctl_ev *e)
{
    ctl_mark_gone(c, e->a);
    if (!c->dead[e->a] && c->tk.rejoined[e->a]) {
        c->tk.rejoined[e->a] = 0;
        c->tk.nrejoined--;
    }
}

/* ---- stop requests --------------------------------------------------------- */

void ctl_on_node_sig(p3d_ctl *c, const ctl_ev *e)
{
    char sn[32];
    int sig = e->m->sig > 0 ? e->m->sig : SIGTERM;
    ctl_say(c, "par3drun: node %s (node rank %d) was stopped by %s; stopping the job (grace %g s)\n",
            c->cfg.names[e->a], e->a, ctl_sig_name(sig, sn, sizeof sn), c->cfg.grace);
    ctl_stop(c, sig, 128 + sig, e->now);
}

/* STOPPING: a node's signal is a second stop request (no more grace). */
void ctl_on_node_sig_again(p3d_ctl *c, const ctl_ev *e)
{
    int sig = e->m->sig > 0 ? e->m->sig : SIGTERM;
    ctl_stop(c, sig, 128 + sig, e->now);
}

/* SIGUSR1/2 go to every rank as they are; 1 when sig was one. */
static int forwarded(p3d_ctl *c, int sig)
{
    if (sig != SIGUSR1 && sig != SIGUSR2)
        return 0;
    p3d_amsg m = {.type = P3D_AM_FORWARD, .sig = sig};
    c->ops.send(c->ops.ctx, -1, &m);
    return 1;
}

void ctl_on_signal(p3d_ctl *c, const ctl_ev *e)
{
    int sig = e->sig;
    char sn[32];
    if (forwarded(c, sig))
        return;
    ctl_sig_name(sig, sn, sizeof sn);
    ctl_say(c,
            "par3drun: %s: stopping %d rank%s on %d node%s (%s to every rank, SIGKILL after the %g s grace; a "
            "second signal skips it)\n",
            sn, c->cfg.nranks, c->cfg.nranks == 1 ? "" : "s", c->cfg.nagents, c->cfg.nagents == 1 ? "" : "s", sn,
            c->cfg.grace);
    ctl_stop(c, sig, 128 + sig, e->now);
}

/* STOPPING: a second signal cuts the grace (SIGQUIT aside). */
void ctl_on_signal_again(p3d_ctl *c, const ctl_ev *e)
{
    int sig = e->sig;
    char sn[32];
    if (forwarded(c, sig))
        return;
    ctl_sig_name(sig, sn, sizeof sn);
    if (sig != SIGQUIT && c->stop_sig != SIGKILL)
        ctl_say(c, "par3drun: %s again: SIGKILL to every rank now\n", sn);
    ctl_stop(c, sig, 128 + sig, e->now);
}

void ctl_on_abort(p3d_ctl *c, const ctl_ev *e)
{
    if (e->how)
        ctl_summary_fmt(c, "par3drun: root cause: %s\n", e->how);
    ctl_stop(c, SIGKILL, e->code, e->now);
}

void ctl_on_abort_again(p3d_ctl *c, const ctl_ev *e)
{
    ctl_stop(c, SIGKILL, e->code, e->now);
}

/* ---- deadlines (TICK) ------------------------------------------------------- */

/* --timeout reached: 1 when the job stops for it. */
static int timed_out(p3d_ctl *c, double now)
{
    if (!(c->timeout_at > 0 && now >= c->timeout_at))
        return 0;
    ctl_say(c, "par3drun: --timeout %g s reached; stopping the job\n", c->cfg.timeout);
    ctl_stop(c, SIGTERM, 124, now);
    return 1;
}

/* Agents past kill_at are ended by force; past giveup_at they count as
 * gone whatever is left of them (REPLACING and STOPPING). stopping: the
 * job is being stopped (--verbose says why an agent is ended). */
static void enforce_deadlines(p3d_ctl *c, double now, int stopping)
{
    for (int i = 0; now >= c->end.kill_at && i < c->cfg.nagents; i++)
        if (!c->gone[i] && !c->killed[i]) {
            c->killed[i] = 1;
            if (c->cfg.verbose && stopping)
                ctl_say(c, "par3drun: the agent of node %s did not end %g s past its grace: ending it by force\n",
                        c->cfg.names[i], P3D_CTL_SLACK);
            c->ops.kill(c->ops.ctx, i);
        }
    for (int i = 0; now >= c->end.giveup_at && i < c->cfg.nagents; i++)
        ctl_mark_gone(c, i);
}

/* STARTING, RESTARTING: only --timeout (the agents report the rest). */
void ctl_on_tick_timeout(p3d_ctl *c, const ctl_ev *e)
{
    timed_out(c, e->now);
}

/* RUNNING: --timeout, then the slow nodes judged (controller_slow.c; it
 * posts a SLOW event for a slow node whose time has come). */
void ctl_on_tick_running(p3d_ctl *c, const ctl_ev *e)
{
    if (!timed_out(c, e->now)) {
        ctl_slow_tick(c, e->now);
        ctl_grow_look(c, e->now);
    }
}

/* CHECKING: --timeout, or no result by its deadline: the nodes count as
 * healthy. */
void ctl_on_tick_checking(p3d_ctl *c, const ctl_ev *e)
{
    if (timed_out(c, e->now) || e->now < c->chk.health_at)
        return;
    ctl_say(c,
            "par3drun: warning: the --health-check result did not come within %g s; the nodes count as "
            "healthy\n",
            c->cfg.health_timeout + 2 * P3D_CTL_SLACK);
    ctl_ev h = {.type = P3D_CTL_EV_HEALTH, .a = -1, .now = e->now};
    ctl_on_health(c, &h);
}

/* COLLECTING: --timeout, or the window closed: the verdict. */
void ctl_on_tick_collecting(p3d_ctl *c, const ctl_ev *e)
{
    if (!timed_out(c, e->now) && e->now >= c->flt.until)
        ctl_fault_decide(c, e->now);
}

/* REPLACING: --timeout, and the retiring agents' deadlines (a stop keeps
 * the earlier of the two kill times). */
void ctl_on_tick_replacing(p3d_ctl *c, const ctl_ev *e)
{
    int stopping = timed_out(c, e->now);
    enforce_deadlines(c, e->now, stopping);
}

void ctl_on_tick_stopping(p3d_ctl *c, const ctl_ev *e)
{
    enforce_deadlines(c, e->now, 1);
}

/* TAKEOVER: --timeout, or its deadline passed without a majority (or an
 * election): this side stops. */
void ctl_on_tick_takeover(p3d_ctl *c, const ctl_ev *e)
{
    if (timed_out(c, e->now) || ctl_takeover_quorum(c) || e->now < ctl_takeover_giveup(c))
        return;
    double nt = c->cfg.node_timeout > 0 ? c->cfg.node_timeout : 10;
    if (c->cfg.elect)
        ctl_summary_fmt(c,
                        "par3drun: root cause: lost the leader's node %s; etcd did not elect node %s within %g s: "
                        "another node leads, or the old leader still holds its lease, so this node stops\n",
                        c->cfg.names[c->old_leader], c->cfg.names[c->cfg.leader], nt + c->cfg.elect_wait);
    else
        ctl_summary_fmt(c,
                        "par3drun: root cause: lost the leader's node %s; only %d of the %d nodes of restart %d "
                        "rejoined node %s within %g s (--node-timeout): no majority, so this side stops (majority "
                        "rule: the two sides of a partition never both run)\n",
                        c->cfg.names[c->old_leader], c->tk.nrejoined, c->members, c->gen, c->cfg.names[c->cfg.leader],
                        nt);
    ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
}

/* ---- completions (raised by the table after an event) --------------------- */

/* STARTING: the job runs. */
void ctl_on_all_up(p3d_ctl *c, const ctl_ev *e)
{
    (void)e;
    ctl_event(c, "\"event\": \"running\", \"restart\": %d", c->gen);
    ctl_go(c, P3D_CTL_RUNNING);
}

/* RESTARTING: it runs again after a recovery. */
void ctl_on_all_up_again(p3d_ctl *c, const ctl_ev *e)
{
    ctl_running_again(c, e->now);
}

/* Every agent still there ran its ranks to the end. */
void ctl_on_all_done(p3d_ctl *c, const ctl_ev *e)
{
    ctl_stop(c, 0, 0, e->now);
}

/* Every agent lost, none replaced: nothing can move on. */
void ctl_on_all_gone_live(p3d_ctl *c, const ctl_ev *e)
{
    if (!c->summary)
        ctl_set_summary(c, strdup("par3drun: root cause: every node's agent is gone\n"));
    ctl_stop(c, SIGTERM, P3D_EXIT_LOST, e->now);
}

/* REPLACING: every agent retired; the live ones start again once the lost
 * nodes' fence passed (said once while it has not). */
void ctl_on_all_retired(p3d_ctl *c, const ctl_ev *e)
{
    if (e->now >= c->fence_at)
        ctl_respawn(c);
    else if (!c->rep.fence_said++)
        ctl_say(c,
                "par3drun: waiting %.1f s more before the replacement starts: the lost node ends its own ranks by "
                "then (fencing; --node-timeout)\n",
                c->fence_at - e->now);
}

void ctl_on_all_stopped(p3d_ctl *c, const ctl_ev *e)
{
    (void)e;
    ctl_go(c, P3D_CTL_DONE);
}

/* ---- the slow node's time has come (posted by controller_slow.c) ---------- */

void ctl_on_slow(p3d_ctl *c, const ctl_ev *e)
{
    char why[96], text[320], reason[512];
    const char *no = ctl_slow_cannot(c, e->a, why, sizeof why);
    ctl_slow_text(c, e->a, text, sizeof text);
    if (no) {
        ctl_say(c, "par3drun: %s; not replaced: %s\n", text, no);
        return;
    }
    snprintf(reason, sizeof reason, "%s, replaced %s", text, e->how);
    int lost[1] = {e->a};
    ctl_begin_replace(c, lost, 1, reason, e->now);
}
