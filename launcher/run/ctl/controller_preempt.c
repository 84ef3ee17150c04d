/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_preempt.c — preemption (docs/launch.md, "Preemption"): the
 * handlers of the PREEMPT event and of the PREEMPTING state's cells.
 *
 * A scheduler that takes the nodes back warns first (Slurm's
 * --signal=B:USR1@120, a cloud's spot notice turned into SIGTERM). The
 * warning is worth a checkpoint: every rank is told (cfg.preempt_sig, the
 * agents also touch P3D_PREEMPT), and the job waits — at most cfg.grace —
 * until every node is done or reported a checkpoint newer than the newest
 * one known at the warning. Then the ranks are stopped and the job ends
 * with P3D_EXIT_PREEMPTED, which a job script requeues on; the restarted
 * job resumes from that checkpoint. Nothing restarts or replaces while
 * PREEMPTING: a failure or a lost node only shortens the wait.
 */
#include "controller_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Agent a has nothing more to write: gone, lost, done in this
 * generation, or it reported a checkpoint newer than the warning's. */
static int through(const p3d_ctl *c, int a)
{
    const struct ctl_prog *p = &c->prog[a];
    return c->gone[a] || c->dead[a] || c->done_gen[a] == c->gen ||
           (p->gen == c->gen && p->ckpt >= 0 && p->ckpt > c->pre.ckpt0);
}

int ctl_preempt_through(const p3d_ctl *c)
{
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!through(c, i))
            return 0;
    return 1;
}

int p3d_ctl_preempted(const p3d_ctl *c, int *ckpt)
{
    int low = -1, seen = 0;
    /* the newest checkpoint every node that reported this generation
     * holds: the bundled worker's, like most, is complete only once
     * every rank wrote its shard */
    for (int i = 0; c->pre.at > 0 && i < c->cfg.nagents; i++) {
        const struct ctl_prog *p = &c->prog[i];
        if (p->gen != c->gen)
            continue;
        if (!seen++ || p->ckpt < low)
            low = p->ckpt;
    }
    *ckpt = low;
    return c->pre.at > 0;
}

/* The root cause a preempted job ends with; why: how the wait ended. */
static void verdict(p3d_ctl *c, const char *why)
{
    int ckpt;
    char sn[32], step[96];
    p3d_ctl_preempted(c, &ckpt);
    if (ckpt > c->pre.ckpt0)
        snprintf(step, sizeof step, "checkpoint at step %d", ckpt);
    else if (ckpt >= 0)
        snprintf(step, sizeof step, "no newer checkpoint than step %d", ckpt);
    else
        snprintf(step, sizeof step, "no checkpoint reported");
    ctl_summary_fmt(c, "par3drun: root cause: preempted (%s %s): %s; %s; exit %d: requeue to resume\n",
                    ctl_sig_name(c->pre.sig, sn, sizeof sn), c->pre.where, why, step, P3D_EXIT_PREEMPTED);
    char jw[300];
    ctl_event(c, "\"event\": \"preempted\", \"ckpt\": %d, \"ckpt_before\": %d, \"why\": %s, \"exit_code\": %d", ckpt,
              c->pre.ckpt0, ctl_jstr(why, jw, sizeof jw), P3D_EXIT_PREEMPTED);
}

/* The warning's signal and where it came from (NODE_SIG: a node's). */
static void note_warning(p3d_ctl *c, const ctl_ev *e)
{
    c->pre.sig = e->sig > 0 ? e->sig : SIGTERM;
    if (e->a >= 0)
        snprintf(c->pre.where, sizeof c->pre.where, "to node %.40s", c->cfg.names[e->a]);
    else
        snprintf(c->pre.where, sizeof c->pre.where, "to par3drun");
    c->pre.at = e->now;
    c->pre.ckpt0 = c->ckpt_max;
}

/* STARTING, RUNNING, RESTARTING: tell every rank, wait for checkpoints. */
void ctl_on_preempt(p3d_ctl *c, const ctl_ev *e)
{
    char sn[32], pn[32], after[48] = "";
    note_warning(c, e);
    c->pre.until = e->now + c->cfg.grace;
    ctl_sig_name(c->cfg.preempt_sig, pn, sizeof pn);
    if (c->pre.ckpt0 >= 0)
        snprintf(after, sizeof after, " newer than step %d", c->pre.ckpt0);
    ctl_say(c,
            "par3drun: preempted (%s %s): %s to every rank; waiting up to %g s (--grace) for every node's "
            "checkpoint%s or end, then stopping (exit %d; a second SIGTERM or SIGINT stops at once)\n",
            ctl_sig_name(c->pre.sig, sn, sizeof sn), c->pre.where, pn, c->cfg.grace, after, P3D_EXIT_PREEMPTED);
    ctl_event(c, "\"event\": \"preempt\", \"signal\": %d, \"ckpt_before\": %d, \"grace\": %g", c->pre.sig, c->pre.ckpt0,
              c->cfg.grace);
    ctl_story(c, e->now, "preempted (%s %s): waiting for the ranks' checkpoint", sn, c->pre.where);
    p3d_amsg m = {.type = P3D_AM_FORWARD, .sig = c->cfg.preempt_sig};
    c->ops.send(c->ops.ctx, -1, &m);
    ctl_go(c, P3D_CTL_PREEMPTING);
}

/* COLLECTING: a rank failed and the window was still collecting the
 * others' failures. The warning wins: the failures so far get their
 * verdict and evidence (said, in events.jsonl, in result.json's fault) and
 * nothing restarts. No complete checkpoint can be written with a rank
 * gone (a failure during the wait ends it likewise): the job ends now,
 * from the checkpoint it had. */
void ctl_on_preempt_collecting(p3d_ctl *c, const ctl_ev *e)
{
    const struct ctl_failure *p = &c->flt.f[0];
    char remedy[160], how[64], why[256];
    p3d_failure_how(p->code, p->sig, how, sizeof how);
    snprintf(why, sizeof why, "%s %d on node %.40s %s (%s) before the warning: no complete checkpoint can be written",
             p->rank >= 0 ? "rank" : "node rank", p->rank >= 0 ? p->rank : p->a, c->cfg.names[p->a],
             p->rank >= 0 ? "failed" : "could not start its ranks", how);
    snprintf(remedy, sizeof remedy,
             "none: a preemption warning came %.1f s into the %g s window, the job ends (nothing restarts)",
             e->now - c->flt.first_at, c->cfg.fault_window);
    note_warning(c, e);
    ctl_fault_cut(c, remedy, e->now);
    verdict(c, why);
    ctl_stop(c, SIGTERM, P3D_EXIT_PREEMPTED, e->now);
}

/* CHECKING, REPLACING, TAKEOVER: no generation runs to checkpoint (the
 * ranks were stopped for a recovery): the job ends now, from the
 * checkpoint it had. */
void ctl_on_preempt_now(p3d_ctl *c, const ctl_ev *e)
{
    char why[96];
    note_warning(c, e);
    snprintf(why, sizeof why, "during a recovery (%s): no rank was running to checkpoint",
             p3d_ctl_state_name(c->state));
    verdict(c, why);
    ctl_stop(c, SIGTERM, P3D_EXIT_PREEMPTED, e->now);
}

/* PREEMPTING: the warning again is nothing new; a SIGTERM that preempts
 * (cfg.preempt_term) asked a second time stops at once. */
void ctl_on_preempt_again(p3d_ctl *c, const ctl_ev *e)
{
    char sn[32];
    if (e->sig == c->cfg.preempt_sig)
        return;
    ctl_say(c, "par3drun: %s again: SIGKILL to every rank now\n", ctl_sig_name(e->sig, sn, sizeof sn));
    verdict(c, "stopped at once by a second signal");
    ctl_stop(c, SIGKILL, P3D_EXIT_PREEMPTED, e->now);
}

/* STOPPING: the warning changes nothing; a SIGTERM that would preempt is
 * a second stop request there (no more grace). */
void ctl_on_preempt_stopping(p3d_ctl *c, const ctl_ev *e)
{
    if (e->sig != c->cfg.preempt_sig)
        ctl_on_signal_again(c, e);
}

/* PREEMPTING: any other signal to par3drun (SIGINT, SIGHUP, ...) or to a
 * node stops at once; SIGUSR1/2 that are not the preempt signal still go
 * to the ranks as they are. */
void ctl_on_signal_preempting(p3d_ctl *c, const ctl_ev *e)
{
    int sig = e->type == P3D_CTL_EV_NODE_SIG ? (e->m->sig > 0 ? e->m->sig : SIGTERM) : e->sig;
    char sn[32];
    if (e->type == P3D_CTL_EV_SIGNAL && (sig == SIGUSR1 || sig == SIGUSR2)) {
        p3d_amsg m = {.type = P3D_AM_FORWARD, .sig = sig};
        c->ops.send(c->ops.ctx, -1, &m);
        return;
    }
    ctl_say(c, "par3drun: %s during the preemption wait: SIGKILL to every rank now\n",
            ctl_sig_name(sig, sn, sizeof sn));
    verdict(c, "stopped at once by a second signal");
    ctl_stop(c, SIGKILL, P3D_EXIT_PREEMPTED, e->now);
}

/* PREEMPTING: a rank failed (one that does not handle the preempt signal
 * dies of it): the rest of the generation cannot go on with it, so the
 * wait is over; the others get SIGTERM and the grace. */
void ctl_on_fail_preempting(p3d_ctl *c, const ctl_ev *e)
{
    const p3d_amsg *m = e->m;
    if (m->gen != c->gen)
        return;
    char how[64], why[160];
    p3d_failure_how(m->code, m->sig, how, sizeof how);
    snprintf(why, sizeof why, "rank %d on node %.40s %s during the wait", m->rank, c->cfg.names[e->a], how);
    verdict(c, why);
    ctl_stop(c, SIGTERM, P3D_EXIT_PREEMPTED, e->now);
}

/* PREEMPTING: a lost node is not replaced (the job is going away); the
 * others may still checkpoint — the newest every node holds is what the
 * verdict reports. */
void ctl_on_gone_preempting(p3d_ctl *c, const ctl_ev *e)
{
    char jn[160];
    ctl_mark_gone(c, e->a);
    ctl_mark_lost(c, e->a);
    ctl_say(c, "par3drun: lost the agent of node %s (node rank %d) during the preemption wait: %s; not replaced\n",
            c->cfg.names[e->a], e->a, e->how && e->how[0] ? e->how : "it ended unasked");
    ctl_event(c, "\"event\": \"failure\", \"node\": %s, \"rank\": -1, \"cause\": \"node lost while preempting\"",
              ctl_jstr(c->cfg.names[e->a], jn, sizeof jn));
}

/* PREEMPTING: --grace ran out (or --timeout came): stop the ranks that
 * are still there, whatever they are writing. */
void ctl_on_tick_preempting(p3d_ctl *c, const ctl_ev *e)
{
    char why[256];
    int late = 0, first = -1;
    if (!(c->timeout_at > 0 && e->now >= c->timeout_at) && e->now < c->pre.until)
        return;
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!through(c, i) && !late++)
            first = i;
    snprintf(why, sizeof why, "the %g s --grace ran out before %d node%s (%.40s%s) reported a newer checkpoint",
             c->cfg.grace, late, late == 1 ? "" : "s", first >= 0 ? c->cfg.names[first] : "?", late > 1 ? ", ..." : "");
    ctl_say(c, "par3drun: %s; stopping the ranks\n", why);
    verdict(c, why);
    ctl_stop(c, SIGTERM, P3D_EXIT_PREEMPTED, e->now);
}

/* PREEMPTING: the controller's node was lost. Its successor would start
 * a generation the scheduler is taking the nodes from: the job ends. */
void ctl_on_leader_lost_preempting(p3d_ctl *c, const ctl_ev *e)
{
    ctl_on_leader_lost_stopping(c, e); /* the old leader is lost, the successor holds the job */
    verdict(c, "the leader's node was lost during the wait (no takeover while preempting)");
    ctl_stop(c, SIGTERM, P3D_EXIT_PREEMPTED, e->now);
}

/* PREEMPTING: every node checkpointed, is done or is gone: the ranks
 * still there are stopped (none is: no signal). */
void ctl_on_preempt_over(p3d_ctl *c, const ctl_ev *e)
{
    int left = 0;
    for (int i = 0; i < c->cfg.nagents; i++)
        left += !c->gone[i] && c->done_gen[i] != c->gen;
    verdict(c, e->type == P3D_CTL_EV_ALL_GONE ? "every node's agent is gone"
               : left                         ? "every node reported its checkpoint"
                                              : "every rank ended");
    ctl_stop(c, left ? SIGTERM : 0, P3D_EXIT_PREEMPTED, e->now);
}
