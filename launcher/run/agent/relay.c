/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * relay.c — a multi-node job's node other than the leader: it forks the
 * node's agent (as the leader and a single-node launcher do) and relays
 * between it and the leader's controller. It decides nothing about the
 * job; it keeps its own node's deadlines:
 *   - a stop order from the leader (or a signal here) gives the agent
 *     --grace + P3D_CTL_SLACK to end, then its process tree is SIGKILLed;
 *   - a lost leader ends the local ranks at once, by SIGKILL: nobody can
 *     decide any more, and the leader may already have replaced this
 *     node (fencing: no rank runs beside its replacement);
 *   - heartbeats (B) to its agent, which ends the ranks by itself when
 *     the relay goes silent (the relay frozen while its ranks run on);
 *   - --node-timeout (r_beat): heartbeats to the leader; a leader or an
 *     agent silent for the timeout counts as lost (frozen).
 * A signal here (scancel signals every node; a Ctrl-C one) stops the local
 * ranks at once and tells the leader, which stops the others.
 * A node replaced elsewhere (docs/multinode.md, "When a node dies"): a
 * retire order ends the local ranks as a stop does but keeps the
 * connection; once the agent is gone the relay says so (Y), takes the
 * restart count (R) and the new placement (a CPLACE frame), has mnode.c
 * adopt it and forks the agent again.
 * Leader failover (failover.h, docs/multinode.md "When the leader dies"):
 * with the successor list the leader sent (S), a lost leader still ends
 * the local ranks at once, but the relay then reaches the first candidate
 * that answers: taken, it waits there as a retired node for the new
 * placement; it is the candidate itself: its takeover (L->mn->takeover) runs
 * the job's controller from here on; refused, or nobody answers, or no
 * list: exit 1, as before.
 * The relay is a table (p3d_relay_cell, agent.h; docs/agent.md): its
 * states and the events that move them, every change through relay_go.
 */
#include "controller.h"
#include "ranks.h"
#include "agent.h"
#include "termsafe.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdzv.h"

typedef struct relay relay;
typedef void (*relay_handler)(relay *r);

struct relay {
    const p3d_launch *L;
    int me, up, sfd, local; /* up: upch's fd, -1 */
    p3d_chan *upch;         /* the leader (or its successor): the fate channel */
    pid_t agent;
    int agent_status;
    int code; /* the job's code once known, -1 */
    p3d_loop *loop;
    p3d_stopper stop;     /* the agent is ended by force when its time is up */
    p3d_health_job *hjob; /* our --health-check, while it runs */
    int hseq;
    p3d_health_res hres;
    int next_gen;        /* the restart count for the agent forked next */
    int leader;          /* the node rank of our upstream now */
    p3d_successors succ; /* the leader's last successor list (S) */
    int have_succ;
    /* the machine: its state, the outside event being handled (the cause
     * of every change it makes), the cell that runs, an event it posted */
    p3d_relay_state state;
    p3d_relay_event cause;
    unsigned cell_next;
    int posted; /* an event + 1, 0: none */
    /* what the event brings (valid while its cell runs) */
    struct {
        const p3d_amsg *m; /* the packets' events */
        int sig;           /* SIGNAL, USR, PREEMPT */
        int type;          /* PLACEMENT: the frame */
        const unsigned char *body;
        size_t len;
    } ev;
    /* --node-timeout (r_beat) */
    double beat_to;     /* the leader's node timeout (its B says; ours until then) */
    double next_beat;   /* our next heartbeat to the leader */
    double heard_up;    /* when the leader last sent anything */
    double heard_local; /* when our agent last sent anything */
    double last_check;
    /* STOPPING: the signal that stopped it (a second one kills), and the
     * slack after the kill, then we leave */
    struct {
        int last_sig;
        unsigned give_up;
    } stopping;
    /* FAILOVER and SUCCEEDING: the lost leader, when it was last heard and
     * why it counts as lost; the candidates ahead of us not reached */
    struct {
        int old;
        double heard;
        char why[200];
        int before[P3D_FAILOVER_CANDIDATES];
        int nbefore;
    } lost;
    /* RELAYING: the first rank failure of the agent's generation fail_gen
     * (-1: none since the last restart), said with "the leader stops the
     * job" once: at once when no restart is left, else when the leader's
     * stop order follows it (the job-restart budget ended, say) */
    struct {
        int gen, rank, code, sig, said;
    } fail;
};

static void r_dispatch(relay *r, p3d_relay_event ev);

static void r_close_up(relay *r)
{
    if (r->up < 0)
        return;
    p3d_loop_unwatch(r->loop, r->up);
    p3d_chan_free(r->upch); /* closes up */
    r->upch = NULL;
    r->up = -1;
}

static void r_close_local(relay *r)
{
    if (r->local < 0)
        return;
    p3d_loop_unwatch(r->loop, r->local);
    close(r->local);
    r->local = -1;
}

static void r_local(relay *r, const p3d_amsg *m)
{
    char buf[256];
    int n = p3d_amsg_encode(m, buf, sizeof buf);
    if (n > 0 && r->local >= 0)
        while (send(r->local, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR)
            ;
}

static void r_up(relay *r, const char *pkt, size_t len)
{
    if (r->up >= 0 && p3d_fate_send(r->upch, pkt, len) < 0)
        r_close_up(r);
}

static void r_up_msg(relay *r, const p3d_amsg *m)
{
    char buf[P3D_HEALTH_HOW + 64];
    int n = p3d_amsg_encode(m, buf, sizeof buf);
    if (n > 0)
        r_up(r, buf, (size_t)n);
}

static const char *r_name(const relay *r)
{
    return r->L->job->cluster->nodes[r->me].name;
}

/* ---- the one transition ---------------------------------------------------- */

/* Every change of state: checked against the running cell's moves (a
 * move the table does not list is a bug, said), said with --verbose. */
static void relay_go(relay *r, p3d_relay_state to)
{
    if (to == r->state)
        return;
    if (!(r->cell_next & P3D_NODE_TO(to)))
        fprintf(stderr, "par3drun: node %s: relay: %s -> %s (%s) is not in the table\n", r_name(r),
                p3d_relay_state_name(r->state), p3d_relay_state_name(to), p3d_relay_event_name(r->cause));
    if (r->L->o->verbose)
        fprintf(stderr, "par3drun: node %s: relay: state %s -> %s (%s)\n", r_name(r), p3d_relay_state_name(r->state),
                p3d_relay_state_name(to), p3d_relay_event_name(r->cause));
    r->state = to;
}

/* ---- what the handlers share ----------------------------------------------- */

/* Stops the local ranks with sig; the agent must be gone by the grace
 * plus the slack. */
static void r_stop(relay *r, int sig, int code)
{
    if (r->code < 0)
        r->code = code;
    double grace = sig == 0 || sig == SIGKILL ? 0 : r->L->o->grace;
    p3d_stopper_begin(&r->stop, grace + P3D_CTL_SLACK);
    p3d_amsg t = {.type = P3D_AM_STOP, .sig = sig, .code = r->code};
    r_local(r, &t);
    relay_go(r, P3D_RELAY_STOPPING);
}

/* Our heartbeat to the leader when it is due (--node-timeout, r_beat). */
static void r_send_beat(relay *r, double now)
{
    double iv = p3d_beat_interval(r->beat_to);
    if (iv <= 0 || r->up < 0 || now < r->next_beat)
        return;
    p3d_amsg b = {.type = P3D_AM_BEAT, .ms = (int)(r->beat_to * 1000)};
    r_up_msg(r, &b);
    /* the same beat to our agent, at the same moment: it ends its ranks by
     * itself when we go silent, by the deadline the leader fences us with
     * (the leader's timeout after it last heard us; fencing) */
    r_local(r, &b);
    r->next_beat = now + iv;
}

static void r_health_done(void *ctx, int nbad)
{
    relay *r = ctx;
    (void)nbad;
    r->hjob = NULL;
    r_dispatch(r, P3D_RELAY_EV_HEALTH_DONE);
}

/* The node's first failed rank of the generation ends the job: said once. */
static void r_say_stop(relay *r)
{
    char how[64];
    if (r->fail.gen < 0 || r->fail.said)
        return;
    r->fail.said = 1;
    p3d_failure_how(r->fail.code, r->fail.sig, how, sizeof how);
    fprintf(stderr, "par3drun: node %s: rank %d failed (%s); the leader stops the job\n", r_name(r), r->fail.rank, how);
}

/* ---- the handlers: one cell each, or a few that mean the same ---------------- */

/* HEALTH_DONE: our check's end answers the leader's C with H. */
static void on_health_done(relay *r)
{
    if (!r->hres.ok)
        fprintf(stderr, "par3drun: node %s failed its --health-check (%s)\n", r_name(r), r->hres.how);
    p3d_amsg h = {.type = P3D_AM_HEALTH, .seq = r->hseq, .ok = r->hres.ok, .text = r->hres.how};
    r_up_msg(r, &h);
}

/* CHECK: our own --health-check runs on the loop (health.c; the leader's
 * time bound is ours plus slack) while the heartbeats go on, and its end
 * answers H. A node without one answers ok, P3D_HEALTH_NONE, at once. A
 * newer request replaces one that runs (the leader gave up on the older
 * one). */
static void on_check(relay *r)
{
    const char *name = r_name(r);
    p3d_health_cancel(r->hjob);
    r->hjob = NULL;
    r->hseq = r->ev.m->seq;
    r->hres = (p3d_health_res){.ok = 1};
    if (!r->L->o->health_check) {
        p3d_health_set_how(&r->hres, P3D_HEALTH_NONE);
        on_health_done(r);
        return;
    }
    r->hjob = p3d_health_start(r->loop, r->L->o, &name, 1, NULL, &r->hres, r_health_done, r);
    if (!r->hjob)
        on_health_done(r);
}

/* LEADER_BEAT: the leader's timeout rules. */
static void on_leader_beat(relay *r)
{
    double to = r->ev.m->ms / 1000.0;
    if (to != r->beat_to)
        r->next_beat = 0; /* our next beat at once, then at its pace */
    r->beat_to = to;
}

/* RETIRE: the agent ends its ranks as a stop does (the connection kept);
 * once it is gone we say so (AGENT_ENDED in RETIRING). */
static void on_retire(relay *r)
{
    p3d_stopper_clear(&r->stop);
    p3d_stopper_begin(&r->stop, r->L->o->grace + P3D_CTL_SLACK);
    p3d_amsg t = {.type = P3D_AM_STOP, .sig = SIGTERM, .code = 0};
    r_local(r, &t);
    relay_go(r, P3D_RELAY_RETIRING);
}

/* RESTART while the agent runs: that failure did not end the job. */
static void on_restart(relay *r)
{
    r->fail.gen = -1;
    r_local(r, r->ev.m);
}

/* RESTART while retired: the restart count of the agent forked next. */
static void on_restart_parked(relay *r)
{
    r->fail.gen = -1;
    r->next_gen = r->ev.m->gen;
}

/* STOP: the leader's order ends the local ranks. */
static void on_stop(relay *r)
{
    const p3d_amsg *m = r->ev.m;
    if (m->code != 0 && r->state != P3D_RELAY_STOPPING)
        r_say_stop(r); /* a stop after our rank's failure: it ended the job */
    r->code = m->code;
    r_stop(r, m->sig, m->code);
}

/* PACKET, USR: for the agent (nothing when it is gone). */
static void on_packet(relay *r)
{
    r_local(r, r->ev.m);
}

static void on_usr(relay *r)
{
    p3d_amsg u = {.type = P3D_AM_FORWARD, .sig = r->ev.sig};
    r_local(r, &u);
}

/* AGENT_PACKET while the ranks run: up to the leader; the generation's
 * first rank failure noted (an agent reports every rank's). */
static void on_agent_packet(relay *r)
{
    const p3d_amsg *m = r->ev.m;
    if (m->type != P3D_AM_FAIL || m->rank < 0 || m->gen == r->fail.gen)
        return;
    r->fail.gen = m->gen;
    r->fail.rank = m->rank;
    r->fail.code = m->code;
    r->fail.sig = m->sig;
    r->fail.said = 0;
    if (m->gen >= r->L->o->max_restarts)
        r_say_stop(r);
}

/* AGENT_CLOSED while the ranks run: our agent is gone unasked. */
static void on_agent_closed(relay *r)
{
    if (r->code < 0)
        r->code = P3D_EXIT_LOST;
}

/* AGENT_SILENT: our agent is frozen: ended with its process tree, and the
 * node counts as lost (the connection closes, the leader replaces the
 * node when it can). */
static void on_agent_silent(relay *r)
{
    fprintf(stderr,
            "par3drun: node %s: its agent sent no heartbeat for %.1f s (frozen; --node-timeout %g): ending it "
            "and its ranks\n",
            r_name(r), p3d_now() - r->heard_local, r->L->o->node_timeout);
    p3d_kill_tree(r->agent, SIGKILL);
    r_close_local(r);
    if (r->code < 0)
        r->code = P3D_EXIT_LOST;
}

/* AGENT_ENDED where the relay ends with its agent. */
static void on_agent_ended(relay *r)
{
    relay_go(r, P3D_RELAY_DONE);
    p3d_loop_stop(r->loop);
}

/* AGENT_ENDED while parked: a node whose code is decided, or whose
 * leader's connection failed (a send to it), ends. */
static void on_agent_ended_parked(relay *r)
{
    if (r->up < 0 || r->code >= 0)
        on_agent_ended(r);
}

/* AGENT_ENDED while retiring: our ranks are gone: tell the leader (Y),
 * await the placement (or end, as a parked node would). */
static void on_agent_retired(relay *r)
{
    p3d_amsg y = {.type = P3D_AM_RETIRED};
    r_up_msg(r, &y);
    p3d_stopper_clear(&r->stop);
    p3d_loop_cancel(r->loop, r->stopping.give_up);
    r->stopping.give_up = 0;
    relay_go(r, P3D_RELAY_PARKED);
    on_agent_ended_parked(r);
}

/* SUCCESSORS: who succeeds the leader (checked when it was read). */
static void on_successors(relay *r)
{
    r->have_succ = 1;
    if (r->L->o->verbose)
        fprintf(stderr, "par3drun: node %s: the successor list of restart %d: %d candidate%s, node rank %d first\n",
                r_name(r), r->succ.gen, r->succ.n, r->succ.n == 1 ? "" : "s", r->succ.n ? r->succ.c[0].node_rank : -1);
}

/* PLACEMENT while the ranks run: the placement grew (a node joined the
 * running job as a spare), adopted here, nothing restarts. A node that
 * cannot adopt it runs on; it only does not know the new node (said). */
static void on_grown(relay *r)
{
    const p3d_mnode_hooks *mn = r->L->mn;
    char *e = NULL;
    if (mn && mn->adopt && mn->adopt(mn->ctx, r->ev.type, r->ev.body, r->ev.len, -1, &e) == 0) {
        if (r->L->o->verbose)
            fprintf(stderr, "par3drun: node %s: a node joined the job: %zu nodes now\n", r_name(r),
                    r->L->job->cluster->nnodes);
    } else {
        fprintf(stderr, "par3drun: warning: node %s: cannot take the placement with a joined node: %s\n", r_name(r),
                e ? e : "?");
    }
    free(e);
}

/* PLACEMENT while parked: adopt it, fork the agent again; one that cannot
 * be adopted ends the node, exit 1. */
static void on_placement(relay *r)
{
    char *e = NULL;
    int cl[2] = {r->sfd, r->up};
    const p3d_mnode_hooks *mn = r->L->mn;
    if (r->code >= 0)
        return;
    if (!mn || !mn->adopt || mn->adopt(mn->ctx, r->ev.type, r->ev.body, r->ev.len, r->next_gen, &e) < 0 ||
        p3d_agent_fork(r->L, r->me, cl, 2, &r->agent, &r->local) < 0) {
        fprintf(stderr, "par3drun: node %s: cannot restart on the new placement: %s\n", r_name(r),
                e ? e : strerror(errno));
        free(e);
        r->code = P3D_EXIT_FAIL;
        r_stop(r, SIGKILL, P3D_EXIT_FAIL);
        return;
    }
    r->heard_local = p3d_now();
    relay_go(r, P3D_RELAY_RELAYING);
}

/* FORGED: nothing more from the leader is believed (the connection is
 * closed already); the local ranks stop, exit 1. */
static void on_forged(relay *r)
{
    r_stop(r, SIGKILL, P3D_EXIT_FAIL);
}

/* The leader is lost (LEADER_LOST, LEADER_SILENT): the local ranks end
 * now, by SIGKILL, whatever comes next (fencing). With failover and a
 * successor list the successors are dialed next (DIAL, posted); else the
 * relay ends, exit 1. */
static void r_leader_gone(relay *r, double heard, const char *why)
{
    const p3d_mnode_hooks *mn = r->L->mn;
    if (!mn || !mn->failover || !r->have_succ || r->code >= 0) {
        r_stop(r, SIGKILL, P3D_EXIT_LOST);
        return;
    }
    p3d_stopper_clear(&r->stop);
    p3d_loop_cancel(r->loop, r->stopping.give_up); /* a retire's: its agent is killed now */
    r->stopping.give_up = 0;
    if (r->agent)
        p3d_kill_tree(r->agent, SIGKILL);
    r_close_local(r);
    r->lost.old = r->leader;
    r->lost.heard = heard;
    snprintf(r->lost.why, sizeof r->lost.why, "%s", why);
    relay_go(r, P3D_RELAY_FAILOVER);
    r->posted = P3D_RELAY_EV_DIAL + 1;
}

static void on_leader_lost(relay *r)
{
    fprintf(stderr,
            "par3drun: node %s: lost the connection to the rendezvous leader (%s): ending the local ranks now (it "
            "may have replaced this node)\n",
            r_name(r), r->L->job->cluster->nodes[r->leader].name);
    r_leader_gone(r, r->heard_up, "its connection closed");
}

/* LEADER_SILENT: frozen or cut off: as when its connection drops. */
static void on_leader_silent(relay *r)
{
    double now = p3d_now();
    char why[120];
    fprintf(stderr,
            "par3drun: node %s: no heartbeat from the rendezvous leader (%s) for %.1f s (frozen or cut off; "
            "--node-timeout %g): stopping the local ranks\n",
            r_name(r), r->L->job->cluster->nodes[0].name, now - r->heard_up, r->beat_to);
    r_close_up(r);
    snprintf(why, sizeof why, "no heartbeat for %.1f s", now - r->heard_up);
    r_leader_gone(r, r->heard_up, why); /* fencing: no grace */
}

/* One candidate of the successor list, dialed: 1 it took this node (our
 * upstream now), 0 it did not answer, -1 it refused (said). Blocking is
 * bounded: each candidate gets the node timeout plus the slack to answer
 * (it notices the loss itself by then), and there is nothing else to
 * watch: our agent is being killed. */
static int r_dial_one(relay *r, const p3d_successor *c)
{
    const p3d_mnode_hooks *mn = r->L->mn;
    char *e = NULL;
    p3d_rejoin j = {.proto = P3D_WIRE_PROTO,
                    .nnodes = (int)r->L->job->cluster->nnodes,
                    .node_rank = r->me,
                    .gen = r->next_gen,
                    .leader = r->lost.old,
                    .place_hash = mn->place_hash ? mn->place_hash(mn->ctx) : 0,
                    .master_port = mn->self_master_port,
                    .nccl_port = mn->self_nccl_port,
                    .failover_port = mn->self_failover_port};
    snprintf(j.addr, sizeof j.addr, "%s", mn->self_addr && mn->self_addr[0] ? mn->self_addr : "127.0.0.1");
    double until = p3d_now() + (r->beat_to > 0 ? r->beat_to : 30) + 2 * P3D_CTL_SLACK;
    p3d_chan *ch = p3d_failover_dial(c, &j, mn->key, p3d_now() + 2 * P3D_CTL_SLACK, until, &e);
    p3d_rejoined a;
    if (ch && p3d_failover_answer(ch, until, &a, &e) == 0) {
        if (!a.accepted) {
            fprintf(stderr, "par3drun: node %s: the successor node rank %d refused this node: %s\n", r_name(r),
                    c->node_rank, p3d_tesc(a.why));
            p3d_chan_free(ch);
            return -1;
        }
        if (r->L->o->verbose)
            fprintf(stderr, "par3drun: node %s: lost the leader (%s); rejoined its successor, node rank %d\n",
                    r_name(r), r->lost.why, c->node_rank);
        r_close_up(r);
        r->upch = ch;
        r->up = ch->fd;
        r->leader = c->node_rank;
        r->heard_up = p3d_now();
        r->next_beat = 0;
        return 1;
    }
    p3d_chan_free(ch);
    fprintf(stderr, "par3drun: node %s: the successor node rank %d did not take this node: %s\n", r_name(r),
            c->node_rank, e ? e : "no answer");
    free(e);
    return 0;
}

/* DIAL: the first candidate of the successor list that answers takes this
 * node (it waits there, parked, for the new placement), or this node is
 * the candidate and takes over; refused, or nobody answers: exit 1. */
static void on_dial(relay *r)
{
    unsigned char tried[P3D_FAILOVER_CANDIDATES] = {0};
    r->lost.nbefore = 0;
    for (int k; (k = p3d_failover_next(&r->succ, tried)) >= 0;) {
        tried[k] = 1;
        const p3d_successor *c = &r->succ.c[k];
        if (c->node_rank == r->lost.old)
            continue;
        if (c->node_rank == r->me) {
            fprintf(stderr, "par3drun: node %s: lost the leader (%s); this node is its successor: taking over\n",
                    r_name(r), r->lost.why);
            relay_go(r, P3D_RELAY_SUCCEEDING);
            p3d_loop_stop(r->loop);
            return;
        }
        int got = r_dial_one(r, c);
        if (got > 0) {
            relay_go(r, P3D_RELAY_PARKED); /* the new placement comes (R, then CPLACE) */
            return;
        }
        if (got < 0) {
            r_stop(r, SIGKILL, P3D_EXIT_LOST);
            return;
        }
        if (r->lost.nbefore < P3D_FAILOVER_CANDIDATES)
            r->lost.before[r->lost.nbefore++] = c->node_rank;
    }
    fprintf(stderr,
            "par3drun: node %s: lost the leader (%s) and no successor took this node: ending, exit 1 "
            "(majority rule: a side without a majority stops)\n",
            r_name(r), r->lost.why);
    r_stop(r, SIGKILL, P3D_EXIT_LOST);
}

/* SIGNAL: the local ranks stop at once and the leader is told (it stops
 * the others); asked twice, no more grace. */
static void on_signal(relay *r)
{
    int sig = r->ev.sig;
    p3d_amsg s = {.type = P3D_AM_SIGNAL, .sig = sig};
    r_up_msg(r, &s);
    int again = r->state == P3D_RELAY_STOPPING && r->stopping.last_sig;
    r->stopping.last_sig = sig;
    r_stop(r, again && sig != SIGQUIT ? SIGKILL : sig, 128 + sig);
}

/* PREEMPT: the scheduler's warning: the leader tells every node's ranks. */
static void on_preempt(relay *r)
{
    p3d_amsg s = {.type = P3D_AM_SIGNAL, .sig = r->ev.sig};
    r_up_msg(r, &s);
}

/* PREEMPT while stopping: no warning any more, a plain signal. */
static void on_preempt_late(relay *r)
{
    if (r->ev.sig == SIGUSR1 || r->ev.sig == SIGUSR2)
        on_usr(r);
    else
        on_signal(r);
}

static void r_give_up(p3d_loop *l, void *ctx)
{
    relay *r = ctx;
    (void)l;
    r->stopping.give_up = 0;
    r_dispatch(r, P3D_RELAY_EV_GIVE_UP);
}

/* GRACE_OVER: the agent's process tree by force, and the slack for its
 * end. */
static void on_grace_over(relay *r)
{
    if (r->agent)
        p3d_kill_tree(r->agent, SIGKILL);
    if (!r->stopping.give_up)
        r->stopping.give_up = p3d_loop_at(r->loop, p3d_now() + P3D_CTL_SLACK, r_give_up, r);
}

/* GIVE_UP: the agent did not end even by force: we leave. */
static void on_give_up(relay *r)
{
    relay_go(r, P3D_RELAY_DONE);
    p3d_loop_stop(r->loop);
}

/* ---- the table --------------------------------------------------------------- */

typedef struct relay_cell {
    relay_handler h;
    const char *name;
    unsigned next;
    unsigned char kind;
} relay_cell;

#define RUN(h, next)                                                                                                   \
    {                                                                                                                  \
        h, #h, (next), P3D_NODE_CELL_RUN                                                                               \
    }
#define IGNORED                                                                                                        \
    {                                                                                                                  \
        NULL, NULL, P3D_NODE_STAY, P3D_NODE_CELL_IGNORED                                                               \
    }
#define IMPOSSIBLE                                                                                                     \
    {                                                                                                                  \
        NULL, NULL, 0, P3D_NODE_CELL_IMPOSSIBLE                                                                        \
    }
#define STAY P3D_NODE_STAY
#define RELAYING P3D_NODE_TO(P3D_RELAY_RELAYING)
#define RETIRING P3D_NODE_TO(P3D_RELAY_RETIRING)
#define PARKED P3D_NODE_TO(P3D_RELAY_PARKED)
#define FAILOVER P3D_NODE_TO(P3D_RELAY_FAILOVER)
#define STOPPING P3D_NODE_TO(P3D_RELAY_STOPPING)
#define SUCCEEDING P3D_NODE_TO(P3D_RELAY_SUCCEEDING)
#define DONE P3D_NODE_TO(P3D_RELAY_DONE)

/* What the leader's packets and the node's own events do in every state
 * the relay still has a leader and a loop in; the rows override where
 * they differ. */
#define LIVE_ROW                                                                                                       \
    [P3D_RELAY_EV_CHECK] = RUN(on_check, STAY), [P3D_RELAY_EV_LEADER_BEAT] = RUN(on_leader_beat, STAY),                \
    [P3D_RELAY_EV_STOP] = RUN(on_stop, STOPPING), [P3D_RELAY_EV_PACKET] = RUN(on_packet, STAY),                        \
    [P3D_RELAY_EV_SUCCESSORS] = RUN(on_successors, STAY), [P3D_RELAY_EV_PLACEMENT] = IGNORED,                          \
    [P3D_RELAY_EV_FORGED] = RUN(on_forged, STOPPING),                                                                  \
    [P3D_RELAY_EV_LEADER_LOST] = RUN(on_leader_lost, FAILOVER | STOPPING),                                             \
    [P3D_RELAY_EV_LEADER_SILENT] = RUN(on_leader_silent, FAILOVER | STOPPING), [P3D_RELAY_EV_DIAL] = IMPOSSIBLE,       \
    [P3D_RELAY_EV_SIGNAL] = RUN(on_signal, STOPPING), [P3D_RELAY_EV_USR] = RUN(on_usr, STAY),                          \
    [P3D_RELAY_EV_PREEMPT] = RUN(on_preempt, STAY), [P3D_RELAY_EV_HEALTH_DONE] = RUN(on_health_done, STAY)

/* Where the loop is over: whatever is still delivered means nothing. */
#define OVER_ROW                                                                                                       \
    [P3D_RELAY_EV_AGENT_PACKET] = IGNORED, [P3D_RELAY_EV_AGENT_CLOSED] = IGNORED,                                      \
    [P3D_RELAY_EV_AGENT_SILENT] = IGNORED, [P3D_RELAY_EV_AGENT_ENDED] = IGNORED, [P3D_RELAY_EV_CHECK] = IGNORED,       \
    [P3D_RELAY_EV_LEADER_BEAT] = IGNORED, [P3D_RELAY_EV_RETIRE] = IGNORED, [P3D_RELAY_EV_RESTART] = IGNORED,           \
    [P3D_RELAY_EV_STOP] = IGNORED, [P3D_RELAY_EV_PACKET] = IGNORED, [P3D_RELAY_EV_SUCCESSORS] = IGNORED,               \
    [P3D_RELAY_EV_PLACEMENT] = IGNORED, [P3D_RELAY_EV_FORGED] = IGNORED, [P3D_RELAY_EV_LEADER_LOST] = IGNORED,         \
    [P3D_RELAY_EV_LEADER_SILENT] = IGNORED, [P3D_RELAY_EV_DIAL] = IMPOSSIBLE, [P3D_RELAY_EV_SIGNAL] = IGNORED,         \
    [P3D_RELAY_EV_USR] = IGNORED, [P3D_RELAY_EV_PREEMPT] = IGNORED, [P3D_RELAY_EV_GRACE_OVER] = IGNORED,               \
    [P3D_RELAY_EV_GIVE_UP] = IGNORED, [P3D_RELAY_EV_HEALTH_DONE] = IGNORED

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#ifdef __clang__
#pragma clang diagnostic ignored "-Winitializer-overrides"
#endif
static const relay_cell table[P3D_RELAY_NSTATES][P3D_RELAY_NEVENTS] = {
    [P3D_RELAY_RELAYING] =
        {LIVE_ROW, [P3D_RELAY_EV_AGENT_PACKET] = RUN(on_agent_packet, STAY),
         [P3D_RELAY_EV_AGENT_CLOSED] = RUN(on_agent_closed, STAY),
         [P3D_RELAY_EV_AGENT_SILENT] = RUN(on_agent_silent, STAY),
         [P3D_RELAY_EV_AGENT_ENDED] = RUN(on_agent_ended, DONE), [P3D_RELAY_EV_RETIRE] = RUN(on_retire, RETIRING),
         [P3D_RELAY_EV_RESTART] = RUN(on_restart, STAY), [P3D_RELAY_EV_PLACEMENT] = RUN(on_grown, STAY),
         [P3D_RELAY_EV_GRACE_OVER] = IMPOSSIBLE, [P3D_RELAY_EV_GIVE_UP] = IMPOSSIBLE},
    [P3D_RELAY_RETIRING] =
        {LIVE_ROW, [P3D_RELAY_EV_AGENT_PACKET] = IGNORED, [P3D_RELAY_EV_AGENT_CLOSED] = IGNORED,
         [P3D_RELAY_EV_AGENT_SILENT] = IGNORED, [P3D_RELAY_EV_AGENT_ENDED] = RUN(on_agent_retired, PARKED | DONE),
         [P3D_RELAY_EV_RETIRE] = IGNORED, [P3D_RELAY_EV_RESTART] = RUN(on_restart_parked, STAY),
         [P3D_RELAY_EV_GRACE_OVER] = RUN(on_grace_over, STAY), [P3D_RELAY_EV_GIVE_UP] = RUN(on_give_up, DONE)},
    [P3D_RELAY_PARKED] =
        {LIVE_ROW, [P3D_RELAY_EV_AGENT_PACKET] = IMPOSSIBLE, [P3D_RELAY_EV_AGENT_CLOSED] = IMPOSSIBLE,
         [P3D_RELAY_EV_AGENT_SILENT] = IMPOSSIBLE, [P3D_RELAY_EV_AGENT_ENDED] = RUN(on_agent_ended_parked, STAY | DONE),
         [P3D_RELAY_EV_RETIRE] = IGNORED, [P3D_RELAY_EV_RESTART] = RUN(on_restart_parked, STAY),
         [P3D_RELAY_EV_PLACEMENT] = RUN(on_placement, RELAYING | STOPPING), [P3D_RELAY_EV_GRACE_OVER] = IMPOSSIBLE,
         [P3D_RELAY_EV_GIVE_UP] = IMPOSSIBLE},
    [P3D_RELAY_FAILOVER] = {OVER_ROW,
                            [P3D_RELAY_EV_AGENT_PACKET] = IMPOSSIBLE,
                            [P3D_RELAY_EV_AGENT_CLOSED] = IMPOSSIBLE,
                            [P3D_RELAY_EV_AGENT_SILENT] = IMPOSSIBLE,
                            [P3D_RELAY_EV_AGENT_ENDED] = IMPOSSIBLE,
                            [P3D_RELAY_EV_CHECK] = IMPOSSIBLE,
                            [P3D_RELAY_EV_LEADER_BEAT] = IMPOSSIBLE,
                            [P3D_RELAY_EV_RETIRE] = IMPOSSIBLE,
                            [P3D_RELAY_EV_RESTART] = IMPOSSIBLE,
                            [P3D_RELAY_EV_STOP] = IMPOSSIBLE,
                            [P3D_RELAY_EV_PACKET] = IMPOSSIBLE,
                            [P3D_RELAY_EV_SUCCESSORS] = IMPOSSIBLE,
                            [P3D_RELAY_EV_PLACEMENT] = IMPOSSIBLE,
                            [P3D_RELAY_EV_FORGED] = IMPOSSIBLE,
                            [P3D_RELAY_EV_LEADER_LOST] = IMPOSSIBLE,
                            [P3D_RELAY_EV_LEADER_SILENT] = IMPOSSIBLE,
                            [P3D_RELAY_EV_DIAL] = RUN(on_dial, PARKED | SUCCEEDING | STOPPING),
                            [P3D_RELAY_EV_SIGNAL] = IMPOSSIBLE,
                            [P3D_RELAY_EV_USR] = IMPOSSIBLE,
                            [P3D_RELAY_EV_PREEMPT] = IMPOSSIBLE,
                            [P3D_RELAY_EV_GRACE_OVER] = IMPOSSIBLE,
                            [P3D_RELAY_EV_GIVE_UP] = IMPOSSIBLE,
                            [P3D_RELAY_EV_HEALTH_DONE] = IMPOSSIBLE},
    [P3D_RELAY_STOPPING] =
        {LIVE_ROW, [P3D_RELAY_EV_AGENT_PACKET] = IGNORED, [P3D_RELAY_EV_AGENT_CLOSED] = IGNORED,
         [P3D_RELAY_EV_AGENT_SILENT] = IGNORED, [P3D_RELAY_EV_AGENT_ENDED] = RUN(on_agent_ended, DONE),
         [P3D_RELAY_EV_RETIRE] = IGNORED, [P3D_RELAY_EV_RESTART] = RUN(on_restart, STAY),
         [P3D_RELAY_EV_STOP] = RUN(on_stop, STAY), [P3D_RELAY_EV_FORGED] = RUN(on_forged, STAY),
         [P3D_RELAY_EV_LEADER_LOST] = IGNORED, [P3D_RELAY_EV_LEADER_SILENT] = IGNORED,
         [P3D_RELAY_EV_SIGNAL] = RUN(on_signal, STAY), [P3D_RELAY_EV_PREEMPT] = RUN(on_preempt_late, STAY),
         [P3D_RELAY_EV_GRACE_OVER] = RUN(on_grace_over, STAY), [P3D_RELAY_EV_GIVE_UP] = RUN(on_give_up, DONE)},
    [P3D_RELAY_SUCCEEDING] = {OVER_ROW},
    [P3D_RELAY_DONE] = {OVER_ROW},
};
#pragma GCC diagnostic pop

static const char *const state_names[P3D_RELAY_NSTATES] = {"relaying", "retiring",   "parked", "failover",
                                                           "stopping", "succeeding", "done"};
static const char *const event_names[P3D_RELAY_NEVENTS] = {
    "agent-packet", "agent-closed", "agent-silent", "agent-ended", "check",   "leader-beat", "retire",        "restart",
    "stop",         "packet",       "successors",   "placement",   "forged",  "leader-lost", "leader-silent", "dial",
    "signal",       "usr-signal",   "preempt",      "grace-over",  "give-up", "health-done"};

const char *p3d_relay_state_name(int s)
{
    return s >= 0 && s < P3D_RELAY_NSTATES ? state_names[s] : "?";
}

const char *p3d_relay_event_name(int e)
{
    return e >= 0 && e < P3D_RELAY_NEVENTS ? event_names[e] : "?";
}

int p3d_relay_cell(int s, int e, p3d_node_cell *out)
{
    memset(out, 0, sizeof *out);
    if (s < 0 || s >= P3D_RELAY_NSTATES || e < 0 || e >= P3D_RELAY_NEVENTS)
        return 0;
    const relay_cell *c = &table[s][e];
    *out = (p3d_node_cell){.kind = c->kind, .handler = c->name, .next = c->next};
    return 1;
}

/* One outside event through its cell, then the event the cell posted
 * (DIAL), in the state the cell left. A cell that cannot happen is
 * dropped (test_node_tables keeps the table honest). */
static void r_dispatch(relay *r, p3d_relay_event ev)
{
    r->cause = ev;
    for (;;) {
        const relay_cell *c = &table[r->state][ev];
        r->cell_next = c->next;
        if (c->kind == P3D_NODE_CELL_RUN)
            c->h(r);
        if (!r->posted)
            break;
        ev = (p3d_relay_event)(r->posted - 1);
        r->posted = 0;
    }
}

/* ---- the transports: what raises the events ------------------------------------ */

static void r_packet(relay *r, p3d_relay_event ev, const p3d_amsg *m)
{
    r->ev.m = m;
    r_dispatch(r, ev);
    r->ev.m = NULL;
}

/* A packet from the leader: its event. */
static void r_from_leader(void *ctx, const p3d_amsg *m)
{
    relay *r = ctx;
    p3d_relay_event ev = m->type == P3D_AM_CHECK     ? P3D_RELAY_EV_CHECK
                         : m->type == P3D_AM_BEAT    ? P3D_RELAY_EV_LEADER_BEAT
                         : m->type == P3D_AM_RETIRE  ? P3D_RELAY_EV_RETIRE
                         : m->type == P3D_AM_RESTART ? P3D_RELAY_EV_RESTART
                         : m->type == P3D_AM_STOP    ? P3D_RELAY_EV_STOP
                                                     : P3D_RELAY_EV_PACKET;
    r_packet(r, ev, m);
}

/* The agent's packets go up as they are (its heartbeats are for us; we
 * send our own), and each is an event. */
static void r_from_agent(relay *r)
{
    char buf[P3D_AMSG_MAX + 1];
    for (;;) {
        long n = p3d_amsg_recv(r->local, buf, sizeof buf);
        if (n == 0)
            return;
        if (n < 0) {
            r_close_local(r);
            r_dispatch(r, P3D_RELAY_EV_AGENT_CLOSED);
            return;
        }
        r->heard_local = p3d_now();
        p3d_amsg m;
        int ok = p3d_amsg_decode(buf, (size_t)n, &m) == 0;
        if (ok && m.type == P3D_AM_BEAT)
            continue;
        r_up(r, buf, (size_t)n);
        if (ok)
            r_packet(r, P3D_RELAY_EV_AGENT_PACKET, &m);
    }
}

static void r_child(p3d_loop *l, pid_t p, int st, void *ctx)
{
    relay *r = ctx;
    (void)l;
    if (p == r->agent) {
        r->agent = 0;
        r->agent_status = st;
        /* what its ranks left behind ends with it (agent_link.c) */
        p3d_kill_session(p);
    }
}

static void r_signal(p3d_loop *l, int sig, void *ctx)
{
    relay *r = ctx;
    (void)l;
    r->ev.sig = sig;
    if (p3d_preempts(r->L->o, sig) && r->up >= 0)
        r_dispatch(r, P3D_RELAY_EV_PREEMPT);
    else if (sig == SIGUSR1 || sig == SIGUSR2)
        r_dispatch(r, P3D_RELAY_EV_USR);
    else
        r_dispatch(r, P3D_RELAY_EV_SIGNAL);
}

/* The successor list, checked: tagged like every frame from the leader.
 * 0, or -1 (said): the connection is not to be read again. */
static int r_successors(relay *r, const char *peer, int type, unsigned char *body, size_t len)
{
    char *se = NULL;
    int nn = r->L->job->cluster->nnodes > 0 ? (int)r->L->job->cluster->nnodes : 1;
    if (p3d_successors_open(type, body, len, nn, &r->succ, &se) < 0) {
        fprintf(stderr, "par3drun: node %s: the successor list from %s: %s\n", r_name(r), peer, se ? se : "refused");
        free(se);
        return -1;
    }
    r->heard_up = p3d_now();
    r_dispatch(r, P3D_RELAY_EV_SUCCESSORS);
    return 0;
}

/* Frames from the leader: packets, the successor list, and the placement.
 * 0, 2 (a frame failed its integrity check: the connection is not to be
 * read again), -1 (gone). */
static int r_read_up(relay *r, char **e)
{
    int got = p3d_chan_fill(r->upch, e);
    unsigned char *body;
    size_t len;
    int type = 0;
    char *te = NULL;
    char peer[300];
    snprintf(peer, sizeof peer, "node %s: the rendezvous leader (%s)", r_name(r), r->L->job->cluster->nodes[0].name);
    while (r->upch && (type = p3d_chan_take(r->upch, &body, &len, &te)) > 0) {
        p3d_amsg m;
        if (type == P3D_MSG_SUCCESSORS) {
            int bad = r_successors(r, peer, type, body, len);
            free(body);
            if (bad < 0)
                return 2;
            continue;
        }
        int k = p3d_fate_take(peer, 1, type, body, len, &m);
        r->heard_up = p3d_now();
        if (k == 1)
            r_from_leader(r, &m);
        else if (k == 2) {
            r->ev.type = type;
            r->ev.body = body;
            r->ev.len = len;
            r_dispatch(r, P3D_RELAY_EV_PLACEMENT);
            r->ev.body = NULL;
        }
        free(body);
    }
    if (!r->upch)
        return 0; /* a cell closed it (a stop's packet; not this loop's business) */
    if (type < 0) {
        /* not from the leader as sent: nothing more on this connection is
         * believed (what is still buffered behind it included); the local
         * ranks stop, exit 1 */
        p3d_fate_forged(peer, 1, te);
        free(te);
        return 2;
    }
    return got < 0 ? -1 : 0;
}

/* --node-timeout, the relay's half (supervise.c's hub_beat the leader's):
 * a heartbeat (B) to the leader every p3d_beat_interval of the leader's
 * timeout, sent from this loop whatever the relay waits for (its agent, a
 * retire, the new placement). A leader silent for its timeout is frozen or
 * cut off (LEADER_SILENT); our own agent silent for our --node-timeout is
 * frozen (AGENT_SILENT). Returns when to come back. */
static double r_beat(relay *r, double now)
{
    double tl = r->L->o->node_timeout, ivu = p3d_beat_interval(r->beat_to), ivl = p3d_beat_interval(tl);
    double next = 0;
    /* not running ourselves for a while: unread packets, look next round */
    int stalled = r->last_check && now - r->last_check > (ivu > ivl ? ivu : ivl) + 1.0;
    r->last_check = now;
    if (ivu > 0 && r->up >= 0) {
        r_send_beat(r, now);
        next = r->next_beat;
        if (r->up >= 0 && !stalled && r->state != P3D_RELAY_STOPPING && now - r->heard_up > r->beat_to)
            r_dispatch(r, P3D_RELAY_EV_LEADER_SILENT);
        else if (r->up >= 0 && r->heard_up + r->beat_to + 0.01 < next)
            next = r->heard_up + r->beat_to + 0.01;
    }
    /* judged while the ranks run (the agent's own end is awaited otherwise) */
    if (ivl > 0 && r->local >= 0 && r->agent && r->state == P3D_RELAY_RELAYING) {
        if (!stalled && now - r->heard_local > tl)
            r_dispatch(r, P3D_RELAY_EV_AGENT_SILENT);
        else if (!next || r->heard_local + tl + 0.01 < next)
            next = r->heard_local + tl + 0.01;
    }
    return next;
}

static void r_on_local(p3d_loop *l, int fd, int ev, void *ctx)
{
    (void)l, (void)fd, (void)ev;
    r_from_agent(ctx);
}

static void r_on_up(p3d_loop *l, int fd, int ev, void *ctx)
{
    relay *r = ctx;
    (void)l, (void)fd, (void)ev;
    char *e = NULL;
    int u = r_read_up(r, &e);
    free(e);
    if (u == 0)
        return;
    r_close_up(r);
    r_dispatch(r, u == 2 ? P3D_RELAY_EV_FORGED : P3D_RELAY_EV_LEADER_LOST);
}

/* The stopper's time is up (RETIRING, STOPPING). */
static void r_kill(void *ctx)
{
    r_dispatch(ctx, P3D_RELAY_EV_GRACE_OVER);
}

/* Before each wait: the agent's end (AGENT_ENDED), the heartbeats and their
 * judgement (r_beat), the watched connections brought up to date. */
static double r_prepare(p3d_loop *l, double now, void *ctx)
{
    relay *r = ctx;
    if (!r->agent && r->local < 0)
        r_dispatch(r, P3D_RELAY_EV_AGENT_ENDED);
    if (p3d_loop_stopped(l))
        return 0;
    double dl = r_beat(r, now);
    if (r->local >= 0)
        p3d_loop_watch(l, r->local, P3D_LOOP_IN, r_on_local, r);
    if (r->up >= 0)
        p3d_loop_watch(l, r->up, P3D_LOOP_IN, r_on_up, r);
    return dl;
}

int p3d_relay_run(const p3d_launch *L, int me, p3d_chan *upch)
{
    int up = upch ? upch->fd : -1;
    relay R = {.L = L,
               .me = me,
               .up = up,
               .upch = upch,
               .sfd = -1,
               .local = -1,
               .code = -1,
               .fail = {.gen = -1},
               .beat_to = L->o->node_timeout,
               .leader = 0,
               .state = P3D_RELAY_RELAYING,
               .next_gen = L->job->gen0}; /* a node that joined the running job starts on the job's */
    relay *r = &R;
    r->heard_up = r->heard_local = p3d_now();
    r->loop = NULL;
    int rc = P3D_EXIT_FAIL;
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    r->sfd = p3d_signalfd();
    r->loop = p3d_loop_new();
    p3d_stopper_init(&r->stop, r->loop, r_kill, r);
    if (r->loop)
        p3d_loop_child_default(r->loop, r_child, r);
    int cl[2] = {r->sfd, up};
    if (r->sfd < 0 || !r->loop || p3d_loop_signals(r->loop, r->sfd, r_signal, r) < 0 ||
        p3d_loop_prepare(r->loop, r_prepare, r) < 0 || p3d_agent_fork(L, me, cl, 2, &r->agent, &r->local) < 0) {
        fprintf(stderr, "par3drun: cannot set up the node supervisor: %s\n", strerror(errno));
        goto out;
    }
    if (p3d_loop_run(r->loop) < 0)
        fprintf(stderr, "par3drun: node %s: the event loop failed: %s\n", r_name(r), strerror(errno));
    if (r->agent)
        p3d_kill_tree(r->agent, SIGKILL);
    p3d_health_cancel(r->hjob);
    r->hjob = NULL;
    p3d_sweep_children();
    rc = r->code >= 0 ? r->code : p3d_code_of(r->agent_status);
out:
    r_close_local(r);
    r_close_up(r);
    if (r->loop)
        p3d_loop_free(r->loop); /* closes the signalfd */
    else if (r->sfd >= 0)
        close(r->sfd);
    if (r->state == P3D_RELAY_SUCCEEDING && L->mn && L->mn->takeover) /* this node leads the job from here on */
        rc = L->mn->takeover(L->mn->takeover_ctx, r->lost.old, r->lost.heard, r->lost.why, r->lost.before,
                             r->lost.nbefore);
    return rc;
}
