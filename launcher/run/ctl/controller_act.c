/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_act.c — what the controller's handlers do, shared by them:
 * the one transition (ctl_go), the stop order, a restart in place, a
 * replacement (place again without the lost nodes, retire every agent,
 * start them again), and the figures of a recovery.
 *
 * Everything here is a reaction to one event; nothing blocks, nothing
 * does I/O except through the ops. The messages it prints are the job's
 * user-visible story, the same for one node, --emulate and a multi-node
 * leader.
 */
#include "controller_int.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ctl_stopping(const p3d_ctl *c)
{
    return c->state == P3D_CTL_STOPPING || c->state == P3D_CTL_DONE;
}

/* The one place the state changes: recorded with the outside event that
 * caused it (--verbose, events.jsonl). A completion the table raised
 * records the event that completed it. */
void ctl_go(p3d_ctl *c, p3d_ctl_state to)
{
    if (to == c->state)
        return;
    const char *from = p3d_ctl_state_name(c->state), *cause = p3d_ctl_event_name(c->cause);
    c->state = to;
    if (c->cfg.verbose)
        ctl_say(c, "par3drun: state %s -> %s (%s)\n", from, p3d_ctl_state_name(to), cause);
    ctl_event(c, "\"event\": \"state\", \"from\": \"%s\", \"to\": \"%s\", \"cause\": \"%s\"", from,
              p3d_ctl_state_name(to), cause);
}

void ctl_mark_lost(p3d_ctl *c, int a)
{
    if (!c->dead[a]) {
        c->dead[a] = 1;
        c->ndead++;
    }
}

void ctl_mark_gone(p3d_ctl *c, int a)
{
    if (!c->gone[a]) {
        c->gone[a] = 1;
        c->ngone++;
    }
}

/* The stop order: sig to every rank (0: none, they are done), SIGKILL
 * after the grace; agents that are still there at kill_at are ended.
 * Once every agent is gone the table's ALL_GONE ends the job (DONE). */
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
            grace = c->end.kill_at - now - P3D_CTL_SLACK;
    } else {
        ctl_go(c, P3D_CTL_STOPPING);
    }
    if (sig == 0 || sig == SIGKILL)
        grace = 0;
    if (grace < 0)
        grace = 0;
    double k = now + grace + P3D_CTL_SLACK;
    if (!c->end.kill_at || k < c->end.kill_at)
        c->end.kill_at = k;
    c->end.giveup_at = c->end.kill_at + P3D_CTL_SLACK;
    c->stop_sig = sig;
    p3d_amsg m = {.type = P3D_AM_STOP, .sig = sig, .code = c->code};
    c->ops.send(c->ops.ctx, -1, &m);
}

int ctl_takeover_all_in(const p3d_ctl *c)
{
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!c->dead[i] && !(c->tk.olds && c->tk.olds[i]) && !c->tk.rejoined[i])
            return 0;
    return 1;
}

int ctl_takeover_quorum(const p3d_ctl *c)
{
    return c->cfg.elect ? c->tk.elected : 2 * c->tk.nrejoined > c->members;
}

double ctl_takeover_giveup(const p3d_ctl *c)
{
    return c->tk.until + (c->cfg.elect ? c->cfg.elect_wait : 0);
}

void ctl_gen_members(p3d_ctl *c)
{
    c->members = c->cfg.nagents - c->ndead;
    c->dead0 = c->ndead;
}

/* The takeover's record: from the old leader's last heartbeat to every
 * rank running under the new one. */
static void takeover_done(p3d_ctl *c, double now)
{
    char jo[160], jn[160], jw[600];
    double t = now - c->heard;
    const char *nl = c->cfg.leader >= 0 ? c->cfg.names[c->cfg.leader] : "";
    ctl_event(c,
              "\"event\": \"takeover\", \"old_leader\": %s, \"new_leader\": %s, \"reason\": %s, "
              "\"restart\": %d, \"heartbeat_to_running_s\": %.3f, \"decided_by\": \"%s\"",
              ctl_jstr(c->cfg.names[c->old_leader], jo, sizeof jo), ctl_jstr(nl, jn, sizeof jn),
              ctl_jstr(c->takeover_why, jw, sizeof jw), c->gen, t, c->cfg.elect ? "election" : "majority");
    ctl_say(c,
            "par3drun: takeover: node %s leads the job now; all ranks running again (restart %d) %.2f s after "
            "the old leader %s was last heard\n",
            nl, c->gen, t, c->cfg.names[c->old_leader]);
    ctl_story(c, now,
              "takeover by %s: all ranks running again (restart %d), %.2f s after the leader's last "
              "heartbeat",
              nl, c->gen, t);
    c->in_takeover = 0;
    c->takeovers++;
    c->old_leader = -1;
}

/* RESTARTING, every agent still there runs generation gen: the recovery's
 * figures (and a takeover's record), then RUNNING. */
void ctl_running_again(p3d_ctl *c, double now)
{
    if (c->in_takeover)
        takeover_done(c, now);
    if (c->els.since > 0) {
        ctl_event(c, "\"event\": \"running\", \"restart\": %d, \"dp\": %d, \"grow_s\": %.3f", c->gen, c->els.dp,
                  now - c->els.since);
        c->els.since = 0;
    }
    if (c->recovering) {
        double t = now - c->fail_seen;
        if (!c->recoveries++ || t > c->recovery_max)
            c->recovery_max = t;
        if (c->cfg.verbose || c->replaced)
            ctl_say(c, "par3drun: restart %d: all ranks running again %.2f s after the failure was seen\n", c->gen, t);
        ctl_event(c, "\"event\": \"running\", \"restart\": %d, \"recovery_s\": %.3f", c->gen, t);
        ctl_story(c, now, "all ranks running again (restart %d), %.2f s after the failure was seen", c->gen, t);
        c->recovering = 0;
    }
    ctl_go(c, P3D_CTL_RUNNING);
}

/* Restart c->gen was ordered for the failure seen at c->fail_seen: the
 * first sign of life of its ranks (V) gives the time to training resumed. */
static void await_resume(p3d_ctl *c)
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
        ctl_say(c,
                "par3drun: restart %d: training resumed %.2f s after the failure was seen (first heartbeat or "
                "output, node %s)\n",
                gen, t, c->cfg.names[a]);
    ctl_event(c, "\"event\": \"resumed\", \"restart\": %d, \"node\": %s, \"resumed_s\": %.3f", gen,
              ctl_jstr(c->cfg.names[a], jn, sizeof jn), t);
    ctl_story(c, now,
              "training resumed (restart %d: first heartbeat or output, node %s), %.2f s after the failure "
              "was seen",
              gen, c->cfg.names[a], t);
}

/* No progress, no loop: the count of restarts in a row without progress
 * that the restart about to be made would bring. The generation that
 * ends is judged against the figures at its own start: a later step or a
 * newer checkpoint in any progress summary is progress. Not judged (0):
 * the first generation (no restart yet), no summary ever (a program that
 * writes no progress line), the rule off. */
int ctl_np_next(const p3d_ctl *c)
{
    if (c->cfg.max_no_progress <= 0 || c->gen == 0 || (c->step_max < 0 && c->ckpt_max < 0))
        return 0;
    if (c->step_max > c->np.step || c->ckpt_max > c->np.ckpt)
        return 0;
    return c->np.count + 1;
}

/* The restart about to be made would be the --max-no-progress-th in a
 * row without progress: the job stops instead, with its own code (do not
 * requeue: it would fail the same way). then: the failure that asked for
 * the restart. 1 when it stopped. */
int ctl_np_stop(p3d_ctl *c, const char *then, double now)
{
    int next = ctl_np_next(c);
    if (c->cfg.max_no_progress <= 0 || next < c->cfg.max_no_progress)
        return 0;
    char jt[512];
    ctl_summary_fmt(c,
                    "par3drun: root cause: no progress: %d restart%s in a row reached no later step than %d and "
                    "no newer checkpoint than %d (--max-no-progress %d), then %s; exit %d: do not requeue\n",
                    next, next == 1 ? "" : "s", c->step_max, c->ckpt_max, c->cfg.max_no_progress, then,
                    c->cfg.no_progress_code);
    ctl_event(c,
              "\"event\": \"no_progress\", \"restarts\": %d, \"step\": %d, \"ckpt\": %d, \"exit_code\": %d, "
              "\"then\": %s",
              next, c->step_max, c->ckpt_max, c->cfg.no_progress_code, ctl_jstr(then, jt, sizeof jt));
    ctl_stop(c, SIGTERM, c->cfg.no_progress_code, now);
    return 1;
}

/* A restart is made (next: np_next before it): its count, and the figures
 * it is judged against. */
void ctl_np_restart(p3d_ctl *c, int next)
{
    c->np.count = next;
    c->np.step = c->step_max;
    c->np.ckpt = c->ckpt_max;
}

/* Why lost[] cannot be replaced at all (the summary's line; the job
 * stops), or NULL. */
static int replace_refused(p3d_ctl *c, const int *lost, int nlost, const char *reason)
{
    for (int k = 0; k < nlost; k++)
        if (lost[k] == c->cfg.leader) {
            ctl_summary_fmt(c,
                            "par3drun: root cause: %s; it is the leader's own node (the job controller runs there) "
                            "and cannot be replaced: put the leader on a node that runs no ranks (docs/launch.md, "
                            "\"When a node dies\")\n",
                            reason);
            return 1;
        }
    if (!c->ops.replace || !c->ops.respawn) {
        ctl_summary_fmt(c,
                        "par3drun: root cause: %s; no spare to replace it (--spares K keeps some; an --emulate job "
                        "and a multi-node leader replace nodes in this version)\n",
                        reason);
        return 1;
    }
    if (c->gen >= c->cfg.max_restarts) {
        ctl_summary_fmt(c,
                        "par3drun: root cause: %s; no restart left to replace it (--max-restarts %d, every restart "
                        "counts)\n",
                        reason, c->cfg.max_restarts);
        return 1;
    }
    return 0;
}

/* ops.replace placed the job on fewer replicas (its p3d_ctl_set_width
 * came first): said, recorded, and every agent retires (SHRINKING). */
static void shrunk(p3d_ctl *c, const int *lost, int nlost, const char *reason, const char *msg, double now)
{
    char why[96];
    c->els.shrinks++;
    snprintf(why, sizeof why, "node %s%s lost", c->cfg.names[lost[0]], nlost > 1 ? " and more" : "");
    ctl_width_note(c, c->els.dp, why, -1);
    c->els.ckpt0 = c->ckpt_max;
    c->els.seen_at = 0;
    c->els.said = 0;
    c->els.poll_at = 0;
    ctl_say(c, "par3drun: %s; no spare left: %s; restarting all ranks at dp %d of %d (restart %d of %d)\n", reason,
            msg ? msg : "shrunk", c->els.dp, c->cfg.full_dp, c->gen, c->cfg.max_restarts);
    ctl_story(c, now, "no spare left: %s; restart %d", msg ? msg : "shrunk", c->gen);
    ctl_event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"shrink\"", c->gen);
    ctl_retire_all(c, P3D_CTL_SHRINKING, now);
}

/* Nodes lost[0..nlost) are gone for good: a new placement without them,
 * then every agent retires and starts again on it (one restart). When
 * they ran no rank (spares) nothing moves and the job goes on in the
 * state it is in: REPLACE_NOTHING, the caller carries on. */
int ctl_begin_replace(p3d_ctl *c, const int *lost, int nlost, const char *reason, double now)
{
    char jr[512];
    for (int k = 0; k < nlost; k++)
        ctl_mark_lost(c, lost[k]);
    ctl_story(c, now, "%s", reason);
    int was_recovering = c->recovering;
    if (!c->recovering)
        c->fail_seen = now;
    c->recovering = 1;
    if (replace_refused(c, lost, nlost, reason)) {
        ctl_stop(c, SIGTERM, P3D_EXIT_LOST, now);
        return REPLACE_STOPPED;
    }
    int next = ctl_np_next(c);
    c->gen++;
    char *msg = NULL;
    int rr = c->ops.replace(c->ops.ctx, lost, nlost, c->gen, reason, &msg);
    if (rr >= 0 && rr != 1 && c->cfg.max_no_progress > 0 && next >= c->cfg.max_no_progress) {
        /* ranks would start again: judged only now, as losing a spare
         * restarts nothing; the placement made for it is not used */
        free(msg);
        c->gen--;
        ctl_np_stop(c, reason, now);
        return REPLACE_STOPPED;
    }
    if (rr == 1) {
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
    ctl_np_restart(c, next);
    await_resume(c);
    if (rr == 2) {
        /* no spare left, an elastic job: fewer whole replicas */
        shrunk(c, lost, nlost, reason, msg, now);
        free(msg);
        return REPLACE_UNDER_WAY;
    }
    c->replaced += nlost;
    ctl_say(c, "par3drun: %s; %s; restarting all ranks (restart %d of %d)\n", reason, msg ? msg : "replaced", c->gen,
            c->cfg.max_restarts);
    ctl_story(c, now, "%s; restart %d", msg ? msg : "replaced", c->gen);
    free(msg);
    ctl_event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"replacement\"", c->gen);
    ctl_retire_all(c, P3D_CTL_REPLACING, now);
    return REPLACE_UNDER_WAY;
}

/* REPLACING, SHRINKING, GROWING (to): every agent still there is told to
 * retire; once all are gone, the table's ALL_GONE starts them again on
 * the current placement. */
void ctl_retire_all(p3d_ctl *c, p3d_ctl_state to, double now)
{
    ctl_go(c, to); /* before the orders: the transport retires on them */
    double k = now + c->cfg.grace + P3D_CTL_SLACK;
    if (!c->end.kill_at || k < c->end.kill_at)
        c->end.kill_at = k;
    c->end.giveup_at = c->end.kill_at + P3D_CTL_SLACK;
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
    char then[160];
    if (c->pend.rank >= 0)
        snprintf(then, sizeof then, "rank %d failed (%s)", c->pend.rank, how);
    else
        snprintf(then, sizeof then, "node %s could not start its ranks (%s)", c->cfg.names[c->pend.a], how);
    if (ctl_np_stop(c, then, now))
        return;
    /* not the root cause yet: one line; the summary is printed once, for
     * the failure that ends the job */
    ctl_np_restart(c, ctl_np_next(c));
    c->gen++;
    await_resume(c);
    if (c->pend.rank >= 0)
        ctl_say(c, "par3drun: rank %d failed (%s); restarting all ranks (restart %d of %d)\n", c->pend.rank, how,
                c->gen, c->cfg.max_restarts);
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

/* REPLACING, every agent gone: the transport starts the live ones again
 * on the new placement. */
void ctl_respawn(p3d_ctl *c)
{
    if (c->ops.respawn(c->ops.ctx, c->gen, c->dead) < 0) {
        ctl_set_summary(c, strdup("par3drun: root cause: cannot start the agents again after a replacement\n"));
        if (c->code < 0)
            c->code = P3D_EXIT_LOST;
        ctl_go(c, P3D_CTL_STOPPING);
        return;
    }
    for (int i = 0; i < c->cfg.nagents; i++)
        if (!c->dead[i]) {
            c->gone[i] = c->retiring[i] = c->killed[i] = 0;
            c->up_gen[i] = c->done_gen[i] = -1;
        }
    c->ngone = c->ndead;
    c->end.kill_at = c->end.giveup_at = 0;
    c->rep.fence_said = 0;
    ctl_gen_members(c);
    ctl_go(c, P3D_CTL_RESTARTING);
}

void ctl_post_slow(p3d_ctl *c, int a, const char *why)
{
    if (c->nposted >= c->cfg.nagents)
        return; /* one a node at the most: a node is posted once a generation */
    struct ctl_post *p = &c->posted[c->nposted++];
    p->a = a;
    snprintf(p->why, sizeof p->why, "%s", why);
}
