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
 * placement; it is the candidate itself: its takeover (L->takeover) runs
 * the job's controller from here on; refused, or nobody answers, or no
 * list: exit 1, as before.
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

typedef struct relay {
    const p3d_launch *L;
    int me, up, sfd, local; /* up: upch's fd, -1 */
    p3d_chan *upch;    /* the leader (or its successor): the fate channel */
    pid_t agent;
    int agent_status;
    int code;          /* the job's code once known, -1 */
    int stopping;
    int last_sig;
    p3d_loop *loop;
    p3d_stopper stop;  /* the agent is ended by force when its time is up */
    unsigned give_up;  /* then, the slack for its end, then we leave */
    p3d_health_job *hjob; /* our --health-check, while it runs */
    int hseq;
    p3d_health_res hres;
    int retiring;      /* retire order: the agent ends, then a new placement */
    int retired;       /* Y sent: awaiting R and the CPLACE frame */
    int next_gen;      /* the restart count for the agent forked next */
    /* --node-timeout (r_beat) */
    double beat_to;    /* the leader's node timeout (its B says; ours until then) */
    double next_beat;  /* our next heartbeat to the leader */
    double heard_up;   /* when the leader last sent anything */
    double heard_local; /* when our agent last sent anything */
    double last_check;
    /* leader failover */
    p3d_successors succ; /* the leader's last successor list (S) */
    int have_succ;
    int leader;        /* the node rank of our upstream now */
    int succeed;       /* we are the successor: takeover after the loop */
    double lost_heard; /* the lost leader was last heard then */
    int before[P3D_FAILOVER_CANDIDATES]; /* candidates ahead of us, not reached */
    int nbefore;
    char lost_why[200];
    /* the first rank failure of the agent's generation fail_gen (-1: none
     * since the last restart), said with "the leader stops the job" once:
     * at once when no restart is left, else when the leader's stop order
     * follows it (the job-restart budget ended, say) */
    int fail_gen, fail_rank, fail_code, fail_sig, fail_said;
} relay;

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

/* Stops the local ranks with sig; the agent must be gone by the grace
 * plus the slack. */
static void r_stop(relay *r, int sig, int code)
{
    if (r->code < 0)
        r->code = code;
    double grace = sig == 0 || sig == SIGKILL ? 0 : r->L->o->grace;
    p3d_stopper_begin(&r->stop, grace + P3D_CTL_SLACK);
    r->stopping = 1;
    p3d_amsg t = {.type = P3D_AM_STOP, .sig = sig, .code = r->code};
    r_local(r, &t);
}

/* Our heartbeat to the leader when it is due (--node-timeout, r_beat). */
static void r_send_beat(relay *r, double now)
{
    double iv = p3d_beat_interval(r->beat_to);
    if (iv <= 0 || r->up < 0 || now < r->next_beat)
        return;
    char buf[64];
    p3d_amsg b = {.type = P3D_AM_BEAT, .ms = (int)(r->beat_to * 1000)};
    int n = p3d_amsg_encode(&b, buf, sizeof buf);
    if (n > 0)
        r_up(r, buf, (size_t)n);
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
    const char *name = r->L->job->cluster->nodes[r->me].name;
    if (!r->hres.ok)
        fprintf(stderr, "par3drun: node %s failed its --health-check (%s)\n", name, r->hres.how);
    char buf[P3D_HEALTH_HOW + 64];
    p3d_amsg h = {.type = P3D_AM_HEALTH, .seq = r->hseq, .ok = r->hres.ok, .text = r->hres.how};
    int n = p3d_amsg_encode(&h, buf, sizeof buf);
    if (n > 0)
        r_up(r, buf, (size_t)n);
}

/* The leader asks for this node's health (C): our own --health-check runs
 * on the loop (health.c; the leader's time bound is ours plus slack) while
 * the heartbeats go on, and its end answers H. A node without one answers
 * ok, P3D_HEALTH_NONE, at once. A newer request replaces one that runs
 * (the leader gave up on the older one). */
static void r_health(relay *r, int seq)
{
    const char *name = r->L->job->cluster->nodes[r->me].name;
    p3d_health_cancel(r->hjob);
    r->hjob = NULL;
    r->hseq = seq;
    r->hres = (p3d_health_res){.ok = 1};
    if (!r->L->o->health_check) {
        p3d_health_set_how(&r->hres, P3D_HEALTH_NONE);
        r_health_done(r, 0);
        return;
    }
    r->hjob = p3d_health_start(r->loop, r->L->o, &name, 1, NULL, &r->hres, r_health_done, r);
    if (!r->hjob)
        r_health_done(r, 1);
}

/* The node's first failed rank of the generation ends the job: said once. */
static void r_say_stop(relay *r)
{
    char how[64];
    if (r->fail_gen < 0 || r->fail_said)
        return;
    r->fail_said = 1;
    p3d_failure_how(r->fail_code, r->fail_sig, how, sizeof how);
    fprintf(stderr, "par3drun: node %s: rank %d failed (%s); the leader stops the job\n",
            r->L->job->cluster->nodes[r->me].name, r->fail_rank, how);
}

static void r_from_leader(void *ctx, const p3d_amsg *m)
{
    relay *r = ctx;
    if (m->type == P3D_AM_CHECK) {
        r_health(r, m->seq);
        return;
    }
    if (m->type == P3D_AM_BEAT) {
        double to = m->ms / 1000.0; /* the leader's timeout rules */
        if (to != r->beat_to)
            r->next_beat = 0; /* our next beat at once, then at its pace */
        r->beat_to = to;
        return;
    }
    if (m->type == P3D_AM_RETIRE) {
        if (r->stopping || r->retiring)
            return;
        r->retiring = 1;
        p3d_stopper_clear(&r->stop);
        p3d_stopper_begin(&r->stop, r->L->o->grace + P3D_CTL_SLACK);
        p3d_amsg t = {.type = P3D_AM_STOP, .sig = SIGTERM, .code = 0};
        r_local(r, &t);
        return;
    }
    if (m->type == P3D_AM_RESTART)
        r->fail_gen = -1; /* restarted: that failure did not end the job */
    if (m->type == P3D_AM_RESTART && r->retiring) {
        r->next_gen = m->gen;
        return;
    }
    if (m->type == P3D_AM_STOP) {
        if (m->code != 0 && !r->stopping)
            r_say_stop(r); /* a stop after our rank's failure: it ended the job */
        r->retiring = r->retired = 0;
        r->code = m->code;
        r_stop(r, m->sig, m->code);
        return;
    }
    r_local(r, m);
}

static int r_from_agent(relay *r)
{
    char buf[P3D_AMSG_MAX + 1];
    for (;;) {
        long n = p3d_amsg_recv(r->local, buf, sizeof buf);
        if (n == 0)
            return 0;
        if (n < 0) {
            r_close_local(r);
            return -1;
        }
        r->heard_local = p3d_now();
        p3d_amsg m;
        int ok = p3d_amsg_decode(buf, (size_t)n, &m) == 0;
        if (ok && m.type == P3D_AM_BEAT)
            continue; /* for us; we send our own to the leader */
        r_up(r, buf, (size_t)n);
        if (ok && m.type == P3D_AM_FAIL && !r->stopping && !r->retiring && m.rank >= 0 && m.gen != r->fail_gen) {
            /* the generation's first: an agent reports every rank's */
            r->fail_gen = m.gen;
            r->fail_rank = m.rank;
            r->fail_code = m.code;
            r->fail_sig = m.sig;
            r->fail_said = 0;
            if (m.gen >= r->L->o->max_restarts)
                r_say_stop(r);
        }
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
    int preempts = p3d_preempts(r->L->o, sig) && r->up >= 0 && !r->stopping;
    if ((sig == SIGUSR1 || sig == SIGUSR2) && !preempts) {
        p3d_amsg u = {.type = P3D_AM_FORWARD, .sig = sig};
        r_local(r, &u);
        return;
    }
    char buf[64];
    p3d_amsg s = {.type = P3D_AM_SIGNAL, .sig = sig};
    int n = p3d_amsg_encode(&s, buf, sizeof buf);
    if (n > 0)
        r_up(r, buf, (size_t)n);
    if (preempts)
        return; /* the scheduler's warning: the leader tells every node's ranks */
    int again = r->stopping && r->last_sig;
    r->last_sig = sig;
    r_stop(r, again && sig != SIGQUIT ? SIGKILL : sig, 128 + sig);
}

/* The new placement arrived (a retired relay): adopt it, fork the agent
 * again. 0, or -1 (said; the local side is over). */
static int r_adopt(relay *r, int type, const unsigned char *body, size_t len)
{
    char *e = NULL;
    int cl[2] = {r->sfd, r->up};
    if (!r->L->adopt || r->L->adopt(r->L->adopt_ctx, type, body, len, r->next_gen, &e) < 0 ||
        p3d_agent_fork(r->L, r->me, cl, 2, &r->agent, &r->local) < 0) {
        fprintf(stderr, "par3drun: node %s: cannot restart on the new placement: %s\n",
                r->L->job->cluster->nodes[r->me].name, e ? e : strerror(errno));
        free(e);
        r->code = P3D_EXIT_FAIL;
        return -1;
    }
    r->retiring = r->retired = 0;
    r->heard_local = p3d_now();
    return 0;
}

/* The placement grew while the ranks run (a node joined the running job
 * as a spare): adopted here, nothing restarts. A node that cannot adopt
 * it runs on; it only does not know the new node (said). */
static void r_grown(relay *r, int type, const unsigned char *body, size_t len)
{
    char *e = NULL;
    if (r->L->adopt && r->L->adopt(r->L->adopt_ctx, type, body, len, -1, &e) == 0) {
        if (r->L->o->verbose)
            fprintf(stderr, "par3drun: node %s: a node joined the job: %zu nodes now\n",
                    r->L->job->cluster->nodes[r->me].name, r->L->job->cluster->nnodes);
    } else {
        fprintf(stderr, "par3drun: warning: node %s: cannot take the placement with a joined node: %s\n",
                r->L->job->cluster->nodes[r->me].name, e ? e : "?");
    }
    free(e);
}

/* The leader is lost (its connection dropped, or it fell silent): the
 * local ranks end now, by SIGKILL, whatever comes next (fencing). With
 * failover, the first candidate of the successor list that answers takes
 * this node (it waits there, retired, for the new placement), or this
 * node is the candidate and takes over; otherwise the relay ends, exit 1.
 * Each candidate gets the node timeout plus the slack to answer: it
 * notices the loss itself by then. Blocking here is bounded, and there is
 * nothing else to watch: our agent is being killed. */
static void r_lost_leader(relay *r, double heard, const char *why)
{
    const char *name = r->L->job->cluster->nodes[r->me].name;
    if (!r->L->failover || !r->have_succ || r->stopping || r->code >= 0) {
        r_stop(r, SIGKILL, P3D_EXIT_LOST);
        return;
    }
    r->retiring = 1; /* our agent's end is not a loss of our own */
    p3d_stopper_clear(&r->stop);
    if (r->agent)
        p3d_kill_tree(r->agent, SIGKILL);
    r_close_local(r);
    int old = r->leader;
    unsigned char tried[P3D_FAILOVER_CANDIDATES] = {0};
    r->nbefore = 0;
    for (int k; (k = p3d_failover_next(&r->succ, tried)) >= 0;) {
        tried[k] = 1;
        const p3d_successor *c = &r->succ.c[k];
        if (c->node_rank == old)
            continue;
        if (c->node_rank == r->me) {
            fprintf(stderr, "par3drun: node %s: lost the leader (%s); this node is its successor: taking over\n",
                    name, why);
            r->succeed = 1;
            r->lost_heard = heard;
            snprintf(r->lost_why, sizeof r->lost_why, "%s", why);
            r->leader = old;
            p3d_loop_stop(r->loop);
            return;
        }
        char *e = NULL;
        p3d_rejoin j = {.proto = P3D_WIRE_PROTO, .nnodes = (int)r->L->job->cluster->nnodes, .node_rank = r->me,
                        .gen = r->next_gen, .leader = old,
                        .place_hash = r->L->place_hash ? r->L->place_hash(r->L->adopt_ctx) : 0,
                        .master_port = r->L->self_master_port, .nccl_port = r->L->self_nccl_port,
                        .failover_port = r->L->self_failover_port};
        snprintf(j.addr, sizeof j.addr, "%s", r->L->self_addr && r->L->self_addr[0] ? r->L->self_addr : "127.0.0.1");
        double until = p3d_now() + (r->beat_to > 0 ? r->beat_to : 30) + 2 * P3D_CTL_SLACK;
        p3d_chan *ch = p3d_failover_dial(c, &j, r->L->key, p3d_now() + 2 * P3D_CTL_SLACK, until, &e);
        p3d_rejoined a;
        if (ch && p3d_failover_answer(ch, until, &a, &e) == 0) {
            if (!a.accepted) {
                fprintf(stderr, "par3drun: node %s: the successor node rank %d refused this node: %s\n", name,
                        c->node_rank, p3d_tesc(a.why));
                p3d_chan_free(ch);
                r->retiring = 0;
                r_stop(r, SIGKILL, P3D_EXIT_LOST);
                return;
            }
            if (r->L->o->verbose)
                fprintf(stderr, "par3drun: node %s: lost the leader (%s); rejoined its successor, node rank %d\n",
                        name, why, c->node_rank);
            r_close_up(r);
            r->upch = ch;
            r->up = ch->fd;
            r->leader = c->node_rank;
            r->retired = 1; /* parked: the new placement comes (R, then CPLACE) */
            r->heard_up = p3d_now();
            r->next_beat = 0;
            return;
        }
        p3d_chan_free(ch);
        if (r->nbefore < P3D_FAILOVER_CANDIDATES)
            r->before[r->nbefore++] = c->node_rank;
        fprintf(stderr, "par3drun: node %s: the successor node rank %d did not take this node: %s\n", name,
                c->node_rank, e ? e : "no answer");
        free(e);
    }
    fprintf(stderr, "par3drun: node %s: lost the leader (%s) and no successor took this node: ending, exit 1 "
                    "(majority rule: a side without a majority stops)\n", name, why);
    r->retiring = 0;
    r_stop(r, SIGKILL, P3D_EXIT_LOST);
}

/* Frames from the leader: relayed packets, and (retired) the placement.
 * 0, 1 (the new placement could not be adopted), 2 (a frame failed its
 * integrity check: the connection is not to be read again), -1 (gone). */
static int r_read_up(relay *r, char **e)
{
    int got = p3d_chan_fill(r->upch, e);
    unsigned char *body;
    size_t len;
    int type, rc = 0;
    char *te = NULL;
    char peer[300];
    snprintf(peer, sizeof peer, "node %s: the rendezvous leader (%s)", r->L->job->cluster->nodes[r->me].name,
             r->L->job->cluster->nodes[0].name);
    while ((type = p3d_chan_take(r->upch, &body, &len, &te)) > 0) {
        p3d_amsg m;
        if (type == P3D_MSG_SUCCESSORS) {
            /* who succeeds the leader: tagged like every frame from it */
            char *se = NULL;
            if (p3d_successors_open(type, body, len, r->L->job->cluster->nnodes > 0
                                        ? (int)r->L->job->cluster->nnodes : 1, &r->succ, &se) < 0) {
                fprintf(stderr, "par3drun: node %s: the successor list from %s: %s\n",
                        r->L->job->cluster->nodes[r->me].name, peer, se ? se : "refused");
                free(se);
                free(body);
                return 2;
            }
            r->have_succ = 1;
            r->heard_up = p3d_now();
            if (r->L->o->verbose)
                fprintf(stderr, "par3drun: node %s: the successor list of restart %d: %d candidate%s, node rank %d "
                                "first\n",
                        r->L->job->cluster->nodes[r->me].name, r->succ.gen, r->succ.n, r->succ.n == 1 ? "" : "s",
                        r->succ.n ? r->succ.c[0].node_rank : -1);
            free(body);
            continue;
        }
        int k = p3d_fate_take(peer, 1, type, body, len, &m);
        r->heard_up = p3d_now();
        if (k == 1)
            r_from_leader(r, &m);
        else if (k == 2 && r->retired && !r->stopping && r->code < 0) {
            if (r_adopt(r, type, body, len) < 0)
                rc = 1;
        } else if (k == 2 && !r->retiring && !r->stopping && r->code < 0) {
            r_grown(r, type, body, len); /* running: a node joined */
        }
        free(body);
    }
    if (type < 0) {
        /* not from the leader as sent: nothing more on this connection is
         * believed (what is still buffered behind it included); the local
         * ranks stop, exit 1 */
        p3d_fate_forged(peer, 1, te);
        free(te);
        return 2;
    }
    return got < 0 ? -1 : rc;
}

/* --node-timeout, the relay's half (supervise.c's hub_beat the leader's):
 * a heartbeat (B) to the leader every p3d_beat_interval of the leader's
 * timeout, sent from this loop whatever the relay waits for (its agent, a
 * retire, the new placement). A leader silent for its timeout is frozen or
 * cut off: the local ranks stop, exit 1, as when its connection drops. Our
 * own agent silent for our --node-timeout is frozen: it is ended with its
 * process tree and the node counts as lost (the connection closes, the
 * leader replaces the node when it can). Returns when to come back. */
static double r_beat(relay *r, double now)
{
    const char *name = r->L->job->cluster->nodes[r->me].name;
    double tl = r->L->o->node_timeout, ivu = p3d_beat_interval(r->beat_to), ivl = p3d_beat_interval(tl);
    double next = 0;
    /* not running ourselves for a while: unread packets, look next round */
    int stalled = r->last_check && now - r->last_check > (ivu > ivl ? ivu : ivl) + 1.0;
    r->last_check = now;
    if (ivu > 0 && r->up >= 0) {
        r_send_beat(r, now);
        next = r->next_beat;
        if (r->up >= 0 && !stalled && !r->stopping && now - r->heard_up > r->beat_to) {
            fprintf(stderr,
                    "par3drun: node %s: no heartbeat from the rendezvous leader (%s) for %.1f s (frozen or cut off; "
                    "--node-timeout %g): stopping the local ranks\n",
                    name, r->L->job->cluster->nodes[0].name, now - r->heard_up, r->beat_to);
            r_close_up(r);
            char why[120];
            snprintf(why, sizeof why, "no heartbeat for %.1f s", now - r->heard_up);
            r_lost_leader(r, r->heard_up, why); /* fencing: no grace */
        } else if (r->up >= 0 && r->heard_up + r->beat_to + 0.01 < next) {
            next = r->heard_up + r->beat_to + 0.01;
        }
    }
    if (ivl > 0 && r->local >= 0 && r->agent && !r->stopping && !r->retiring) {
        if (!stalled && now - r->heard_local > tl) {
            fprintf(stderr,
                    "par3drun: node %s: its agent sent no heartbeat for %.1f s (frozen; --node-timeout %g): ending it "
                    "and its ranks\n",
                    name, now - r->heard_local, tl);
            p3d_kill_tree(r->agent, SIGKILL);
            r_close_local(r);
            if (r->code < 0)
                r->code = P3D_EXIT_LOST;
        } else if (!next || r->heard_local + tl + 0.01 < next) {
            next = r->heard_local + tl + 0.01;
        }
    }
    return next;
}

static void r_on_local(p3d_loop *l, int fd, int ev, void *ctx)
{
    relay *r = ctx;
    (void)l;
    (void)fd;
    (void)ev;
    if (r_from_agent(r) < 0 && !r->stopping && !r->retiring && r->code < 0)
        r->code = P3D_EXIT_LOST; /* our agent is gone unasked */
}

static void r_on_up(p3d_loop *l, int fd, int ev, void *ctx)
{
    relay *r = ctx;
    (void)l;
    (void)fd;
    (void)ev;
    char *e = NULL;
    int u = r_read_up(r, &e);
    if (u == 2)
        r_close_up(r); /* a frame failed its integrity check: nothing more from there */
    if (u > 0)
        r_stop(r, SIGKILL, P3D_EXIT_FAIL);
    if (u < 0) {
        r_close_up(r);
        if (!r->stopping) {
            fprintf(stderr,
                    "par3drun: node %s: lost the connection to the rendezvous leader (%s): ending the local ranks "
                    "now (it may have replaced this node)\n",
                    r->L->job->cluster->nodes[r->me].name, r->L->job->cluster->nodes[r->leader].name);
            r_lost_leader(r, r->heard_up, "its connection closed");
        }
    }
    free(e);
}

static void r_give_up(p3d_loop *l, void *ctx)
{
    relay *r = ctx;
    r->give_up = 0;
    p3d_loop_stop(l); /* the agent did not end even by force: we leave */
}

/* The stopper's time is up: the agent's process tree by force, and the
 * slack for its end. */
static void r_kill(void *ctx)
{
    relay *r = ctx;
    if (r->agent)
        p3d_kill_tree(r->agent, SIGKILL);
    if (!r->give_up)
        r->give_up = p3d_loop_at(r->loop, p3d_now() + P3D_CTL_SLACK, r_give_up, r);
}

/* Before each wait: a retired agent's end said to the leader, the end of
 * the relay decided, the heartbeats and their judgement (r_beat), the
 * watched connections brought up to date. */
static double r_prepare(p3d_loop *l, double now, void *ctx)
{
    relay *r = ctx;
    if (r->retiring && !r->retired && !r->agent && r->local < 0) {
        /* our ranks are gone: tell the leader, await the placement */
        char buf[64];
        p3d_amsg y = {.type = P3D_AM_RETIRED};
        int n = p3d_amsg_encode(&y, buf, sizeof buf);
        if (n > 0)
            r_up(r, buf, (size_t)n);
        r->retired = 1;
        p3d_stopper_clear(&r->stop);
        p3d_loop_cancel(l, r->give_up);
        r->give_up = 0;
    }
    if (!r->agent && r->local < 0 && (!r->retiring || r->up < 0 || r->code >= 0)) {
        p3d_loop_stop(l);
        return 0;
    }
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
    /* next_gen: the generation this node's agent starts on (a node that
     * joined the running job starts on the job's) */
    relay R = {.L = L, .me = me, .up = up, .upch = upch, .sfd = -1, .local = -1, .code = -1, .fail_gen = -1,
               .beat_to = L->o->node_timeout, .leader = 0, .next_gen = L->job->gen0};
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
        fprintf(stderr, "par3drun: node %s: the event loop failed: %s\n", L->job->cluster->nodes[me].name,
                strerror(errno));
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
    if (r->succeed && L->takeover) /* this node leads the job from here on */
        rc = L->takeover(L->takeover_ctx, r->leader, r->lost_heard, r->lost_why, r->before, r->nbefore);
    return rc;
}
