/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_takeover.c — the handlers of leader failover (controller.h):
 * the leader's node lost (LEADER_LOST), nodes rejoining the successor
 * (REJOIN), the backend's election (ELECTION), and the takeover acting
 * once it may (TAKEOVER_READY, raised by the table). The table
 * (controller_table.c) names the cells each one serves.
 */
#include "controller_int.h"

#include "p3d/base.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The old leader (cfg.leader) is dead and gone; 1 when successor s may
 * take over. */
static int leader_gone(p3d_ctl *c, int s)
{
    int old = c->cfg.leader;
    if (old >= 0) {
        ctl_mark_lost(c, old);
        ctl_mark_gone(c, old);
    }
    return c->cfg.failover && old >= 0 && ctl_agent_ok(c, s) && !c->dead[s];
}

/* STOPPING: the nodes were told to end; the successor only sees it done. */
void ctl_on_leader_lost_stopping(p3d_ctl *c, const ctl_ev *e)
{
    if (leader_gone(c, e->a))
        c->cfg.leader = e->a;
}

/* The takeover begins (or begins again: the successor lost too). What
 * every node holds carries over (the generation, the dead nodes); who is
 * up does not: every node fenced its ranks when it lost the leader, and
 * must rejoin the successor. */
static void takeover_begin(p3d_ctl *c, const ctl_ev *e, int old, const char *why)
{
    int s = e->a, n = c->cfg.nagents;
    c->tk.olds[old] = 1;
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
    c->tk.until = e->now + nt;
    c->cfg.leader = s;
    for (int i = 0; i < n; i++) {
        c->up_gen[i] = c->done_gen[i] = -1;
        c->retiring[i] = c->killed[i] = c->chk.lostq[i] = c->tk.rejoined[i] = 0;
        c->gone[i] = i != s;
    }
    c->ngone = n - 1;
    c->tk.rejoined[s] = 1;
    c->tk.nrejoined = 1;
    c->tk.elected = 0; /* a successor lost too: the next one bids anew */
    c->end.kill_at = c->end.giveup_at = 0;
    c->rep.fence_said = 0;
    if (c->cfg.elect)
        ctl_say(c,
                "par3drun: lost the leader's node %s (%s); node %s takes over once etcd elects it (within %g s) "
                "and the nodes of restart %d have rejoined it\n",
                c->cfg.names[old], why, c->cfg.names[s], nt + c->cfg.elect_wait, c->gen);
    else
        ctl_say(c,
                "par3drun: lost the leader's node %s (%s); node %s takes over once more than half of the %d nodes "
                "of restart %d have rejoined it (within %g s)\n",
                c->cfg.names[old], why, c->cfg.names[s], c->members, c->gen, nt);
    ctl_story(c, e->now, "lost the leader's node %s (%s); %s takes over", c->cfg.names[old], why, c->cfg.names[s]);
    ctl_go(c, P3D_CTL_TAKEOVER);
}

/* The leader's node is lost (e->a: the successor, e->heard: when the old
 * leader was last heard): a takeover, or without failover the stop. */
void ctl_on_leader_lost(p3d_ctl *c, const ctl_ev *e)
{
    int old = c->cfg.leader, s = e->a;
    const char *why = e->how && e->how[0] ? e->how : "its heartbeat stopped";
    char jo[160], js[160], jw[400];
    int ok = leader_gone(c, s);
    ctl_event(c, "\"event\": \"leader_lost\", \"leader\": %s, \"successor\": %s, \"reason\": %s",
              ctl_jstr(old >= 0 ? c->cfg.names[old] : "", jo, sizeof jo),
              ctl_jstr(ok ? c->cfg.names[s] : "", js, sizeof js), ctl_jstr(why, jw, sizeof jw));
    if (ok) {
        takeover_begin(c, e, old, why);
        return;
    }
    ctl_summary_fmt(c, "par3drun: root cause: lost the leader's node %s (the job controller ran there): %s; %s\n",
                    old >= 0 ? c->cfg.names[old] : "?", why,
                    c->cfg.failover ? "no node is left to take over" : "--no-failover: the job ends");
    ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
}

/* TAKEOVER: node e->a reconnected to the successor, holding generation
 * e->gen. */
void ctl_on_rejoin(p3d_ctl *c, const ctl_ev *e)
{
    int a = e->a;
    if (c->tk.rejoined[a])
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
    c->tk.rejoined[a] = 1;
    c->tk.nrejoined++;
    if (c->gone[a]) {
        c->gone[a] = 0;
        c->ngone--;
    }
}

/* Outside a takeover, a node that says it lost the leader has fenced its
 * own ranks: it is told to stop, and its loss is handled like any other. */
void ctl_on_rejoin_refuse(p3d_ctl *c, const ctl_ev *e)
{
    refuse(c, e->a, c->dead[e->a] ? "the node was lost before" : "this leader is alive; its node fenced its ranks");
}

/* TAKEOVER_READY: a majority (or the election), the old leader's fence
 * passed, and every live node is in or the deadline came. The old leaders
 * and every node that did not rejoin are lost; the next generation starts
 * on the nodes that did (the one replacement path: their ranks move to
 * spares). */
void ctl_on_takeover_act(p3d_ctl *c, const ctl_ev *e)
{
    int n = c->cfg.nagents, nlost = 0;
    int *lost = calloc((size_t)n + 1, sizeof *lost);
    if (!lost) {
        ctl_set_summary(c, strdup("par3drun: root cause: out of memory during a takeover\n"));
        ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
        return;
    }
    for (int i = 0; i < n; i++)
        if (c->tk.olds[i] || (!c->dead[i] && !c->tk.rejoined[i]))
            lost[nlost++] = i;
    memset(c->tk.olds, 0, (size_t)n);
    char why[640];
    snprintf(why, sizeof why,
             "lost the leader's node %s (node rank %d): %s; node %s took over with %d of the %d nodes "
             "of restart %d",
             c->cfg.names[c->old_leader], c->old_leader, c->takeover_why ? c->takeover_why : "",
             c->cfg.names[c->cfg.leader], c->tk.nrejoined, c->members, c->gen);
    int r = ctl_begin_replace(c, lost, nlost, why, e->now);
    free(lost);
    if (r != REPLACE_NOTHING)
        return;
    /* the lost nodes ran no rank; every rank still starts again: each
     * node fenced its own when it lost the leader */
    if (c->gen >= c->cfg.max_restarts) {
        ctl_summary_fmt(c, "par3drun: root cause: %s; no restart left to start the ranks again (--max-restarts %d)\n",
                        why, c->cfg.max_restarts);
        ctl_stop(c, SIGTERM, P3D_EXIT_LOST, e->now);
        return;
    }
    if (ctl_np_stop(c, why, e->now))
        return;
    ctl_np_restart(c, ctl_np_next(c));
    c->gen++;
    ctl_event(c, "\"event\": \"restart\", \"restart\": %d, \"kind\": \"takeover\"", c->gen);
    ctl_retire_all(c, P3D_CTL_REPLACING, e->now);
}

/* Not elected in time (why), or this node's leadership lapsed: it stops. */
static void election_stop(p3d_ctl *c, const ctl_ev *e, const char *why)
{
    char jw[600];
    ctl_event(c, "\"event\": \"%s\", \"why\": %s", e->gen == P3D_CTL_ELECT_NOT_WON ? "not_elected" : "leadership_lost",
              ctl_jstr(why, jw, sizeof jw));
    ctl_summary_fmt(c, "par3drun: root cause: %s: %s; this node stops its ranks (another node may be elected)\n",
                    e->gen == P3D_CTL_ELECT_NOT_WON ? "etcd did not elect this node" : "this node's etcd lease lapsed",
                    why);
    ctl_stop(c, SIGKILL, P3D_EXIT_LOST, e->now);
}

/* A leader (no takeover under way): a win or a refusal means nothing;
 * any other news is a lapsed leadership. */
void ctl_on_election_live(p3d_ctl *c, const ctl_ev *e)
{
    if (c->cfg.elect && e->gen != P3D_CTL_ELECT_WON && e->gen != P3D_CTL_ELECT_NOT_WON)
        election_stop(c, e, e->how && e->how[0] ? e->how : "the backend said so");
}

/* A successor bidding: a win lets the takeover act; anything else stops. */
void ctl_on_election_takeover(p3d_ctl *c, const ctl_ev *e)
{
    const char *why = e->how && e->how[0] ? e->how : "the backend said so";
    char jw[600], jn[160];
    if (!c->cfg.elect)
        return;
    if (e->gen != P3D_CTL_ELECT_WON) {
        election_stop(c, e, why);
        return;
    }
    if (c->tk.elected)
        return;
    c->tk.elected = 1;
    ctl_event(c, "\"event\": \"elected\", \"node\": %s, \"why\": %s",
              ctl_jstr(c->cfg.names[c->cfg.leader], jn, sizeof jn), ctl_jstr(why, jw, sizeof jw));
    if (c->cfg.verbose)
        ctl_say(c, "par3drun: node %s: %s\n", c->cfg.names[c->cfg.leader], why);
}
