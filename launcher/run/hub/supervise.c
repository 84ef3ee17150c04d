/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * supervise.c — the job controller's hub: the event loop that feeds
 * controller.c and carries out what it answers (the --health-check rounds
 * are hub_health.c's, forking and fate packets agent_link.c's, the
 * successor's gate hub_gate.c's).
 *
 * An agent is reached one of two ways, and the loop does not care which:
 *   local   a forked agent process (supervise.c forks it) on a
 *           SOCK_SEQPACKET socket pair: one packet, one message. Gone when
 *           the process is reaped; ended by force with its whole process
 *           tree (workers and their children included).
 *   remote  a multi-node agent's rendezvous connection (rdzv.h): each
 *           message is one P3D_MSG_FATE frame. Gone when the connection
 *           drops; ended by force by dropping it (its node's relay stops
 *           the ranks when it loses the leader).
 * One node, --emulate (n local agents) and a multi-node leader (its own
 * local agent and n-1 remote ones) all run p3d_hub_run below.
 *
 * It runs on the event loop (loop.h): signals through its signalfd, every
 * link as an fd watcher, the agents' exits through the loop's reaping,
 * --health-check rounds as watchers and a timer (hub_health), the
 * controller's deadline and the heartbeats (hub_beat) as what the prepare
 * hook names; the terminal is written without waiting. Nothing blocks.
 */
#include "hub_int.h"
#include "say.h"
#include "ranks.h"
#include "result.h"
#include "rundir.h"
#include "termsafe.h"
#include "rdzv.h"
#include "tcpstore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the hub -------------------------------------------------------------- */


static void hub_send(void *ctx, int a, const p3d_amsg *m)
{
    hub *h = ctx;
    char buf[256], rbuf[64];
    int len = p3d_amsg_encode(m, buf, sizeof buf);
    if (len <= 0)
        return;
    if (m->type == P3D_AM_RESTART) /* a fresh agent store for the generation */
        p3d_store_generation(h->L->store, m->gen);
    /* a retire order (REPLACING, SHRINKING, GROWING) keeps a remote node's
     * connection: its relay ends the ranks and awaits the new placement */
    p3d_amsg q = {.type = P3D_AM_RETIRE};
    int rlen = m->type == P3D_AM_STOP && p3d_ctl_retiring(h->ctl) ? p3d_amsg_encode(&q, rbuf, sizeof rbuf) : -1;
    for (int i = a < 0 ? 0 : a; i < (a < 0 ? h->n : a + 1); i++) {
        if (h->ln[i].parked && m->type == P3D_AM_STOP && (rlen > 0 || !h->ln[i].remote)) {
            /* no agent runs there (a takeover): retired already; said to
             * the controller from the loop, not from inside its send */
            h->ln[i].retire_pending = 1;
            continue;
        }
        if (rlen > 0 && h->ln[i].remote)
            hub_send_one(h, i, rbuf, (size_t)rlen);
        else
            hub_send_one(h, i, buf, (size_t)len);
    }
}

static void hub_kill(void *ctx, int a)
{
    hub *h = ctx;
    alink *l = &h->ln[a];
    if (l->remote)
        l->broken = 1; /* dropped by the loop, outside the controller */
    else if (l->pid > 0)
        p3d_kill_tree(l->pid, SIGKILL);
}

static void hub_close(hub *h, alink *l)
{
    if (l->fd >= 0) {
        p3d_loop_unwatch(h->loop, l->fd);
        if (!l->ch)
            close(l->fd);
    }
    p3d_chan_free(l->ch); /* closes its fd */
    l->ch = NULL;
    l->fd = -1;
}


static void hub_gone(hub *h, int a, const char *how, int clean)
{
    alink *l = &h->ln[a];
    hub_round_lost(h, a);
    if (l->reported)
        return;
    l->reported = 1;
    p3d_ctl_gone_status(h->ctl, a, how, clean, p3d_now());
}

/* Forks the agent of agent index i; the agent keeps none of our
 * descriptors but its own. */
static int hub_fork(hub *h, int i)
{
    int nc = 0;
    int ns = p3d_store_fds(h->L->store, NULL, 0);
    int *close_fds = calloc((size_t)h->n + 3 + (size_t)ns, sizeof *close_fds);
    if (!close_fds)
        return -1;
    nc += p3d_store_fds(h->L->store, close_fds, ns); /* the agent store's */
    close_fds[nc++] = h->sfd;
    close_fds[nc++] = h->lock_fd;
    for (int k = 0; k < h->n; k++)
        if (h->ln[k].fd >= 0)
            close_fds[nc++] = h->ln[k].fd;
    int rc = p3d_agent_fork(h->L, h->nodes[i], close_fds, nc, &h->ln[i].pid, &h->ln[i].fd);
    h->ln[i].heard = p3d_now();
    if (rc == 0)
        hub_watch(h, i);
    free(close_fds);
    return rc;
}

/* ---- replacement (controller.h ops) -------------------------------------- */

static int *hub_replicas(const p3d_placement *pl, int *nrep);

/* The job runs at another width (a shrink, a grow): the controller's
 * world, replicas and width follow the placement of now. */
static void hub_width(hub *h)
{
    int nrep = 0;
    int *rep = hub_replicas(h->L->job->pl, &nrep);
    p3d_ctl_set_width(h->ctl, p3d_mesh_size(&h->L->job->pl->mesh, P3D_DIM_DP), h->L->job->pl->world, rep);
    free(rep);
}

static int hub_replace(void *ctx, const int *lost, int nlost, int gen, const char *reason, char **msg)
{
    hub *h = ctx;
    int *idx = calloc((size_t)nlost + 1, sizeof *idx);
    if (!idx)
        return -1;
    for (int k = 0; k < nlost; k++)
        idx[k] = h->nodes[lost[k]];
    int rc = h->L->replace(h->L->replace_ctx, idx, nlost, gen, reason, msg);
    free(idx);
    if (rc == 2)
        hub_width(h); /* shrunk: the controller's figures follow */
    /* only spares lost, nothing restarts: the successor list built
     * without them goes to every node the next time it speaks */
    for (int i = 0; rc == 1 && h->L->mn && h->L->mn->successors && i < h->n; i++)
        h->ln[i].succ_sent = 0;
    return rc;
}

static int hub_grow_room(void *ctx)
{
    hub *h = ctx;
    return h->L->grow_room(h->L->replace_ctx);
}

static int hub_grow(void *ctx, int gen, const char *when, char **msg)
{
    hub *h = ctx;
    int rc = h->L->grow(h->L->replace_ctx, gen, when, msg);
    if (rc == 0)
        hub_width(h);
    return rc;
}

static int hub_respawn(void *ctx, int gen, const unsigned char *dead)
{
    hub *h = ctx;
    /* local: L->job->gen0 was set by the replacement; remote: the restart
     * count, then the new placement's frame, on the kept connection */
    char buf[64];
    p3d_amsg r = {.type = P3D_AM_RESTART, .gen = gen};
    int len = p3d_amsg_encode(&r, buf, sizeof buf), any = 0;
    const p3d_wbuf *frame = h->L->job->cdelta ? h->L->job->cdelta : h->L->job->cplace;
    for (int i = 0; i < h->n; i++) {
        alink *l = &h->ln[i];
        if (dead[i])
            continue;
        l->reported = 0;
        l->parked = l->retire_pending = 0;
        if (l->remote) {
            if (l->fd < 0 || l->broken || !frame || len <= 0)
                return -1;
            hub_send_one(h, i, buf, (size_t)len);
            int wr = !l->broken ? p3d_chan_send(l->ch, frame, P3D_FATE_STALL, NULL) : -1;
            if (wr < 0)
                return -1;
            any = 1;
            l->heard = p3d_now();
            l->succ_sent = 0; /* the successor list again, once it speaks: built without the lost nodes */
            continue;
        }
        hub_close(h, l);
        l->broken = 0;
        if (hub_fork(h, i) < 0)
            return -1;
    }
    if (any && h->L->mn && h->L->mn->sent)
        h->L->mn->sent(h->L->mn->ctx);
    hub_peers(h);
    return 0;
}

static void hub_event(void *ctx, const char *fields)
{
    hub *h = ctx;
    p3d_event(h->L->events_fd, h->L->t0, "%s", fields);
}

static double hub_beat(hub *h, double now, int check);

static int hub_read_local(hub *h, int a)
{
    alink *l = &h->ln[a];
    char buf[P3D_AMSG_MAX + 1];
    while (l->fd >= 0) {
        long n = p3d_amsg_recv(l->fd, buf, sizeof buf);
        if (n == 0)
            return 0;
        if (n < 0) {
            hub_close(h, l);
            return -1;
        }
        l->heard = p3d_now();
        p3d_amsg m;
        if (p3d_amsg_decode(buf, (size_t)n, &m) == 0)
            p3d_ctl_message(h->ctl, a, &m, p3d_now());
    }
    return -1;
}

typedef struct remote_ctx {
    hub *h;
    int a;
} remote_ctx;

static void hub_remote_msg(void *ctx, const p3d_amsg *m)
{
    remote_ctx *rc = ctx;
    rc->h->ln[rc->a].heard = p3d_now();
    if (m->type == P3D_AM_HEALTH) {
        hub_round_answer(rc->h, rc->a, m);
        return;
    }
    if (m->type == P3D_AM_RETIRED) {
        /* its ranks are gone; the connection stays for the new placement */
        hub_gone(rc->h, rc->a, NULL, 1);
        return;
    }
    p3d_ctl_message(rc->h->ctl, rc->a, m, p3d_now());
}

/* Reads the frames of remote agent a. */
static void hub_read_remote(hub *h, int a)
{
    alink *l = &h->ln[a];
    char *e = NULL;
    remote_ctx rc = {h, a};
    if (h->L->mn && h->L->mn->successors && !l->succ_sent && !l->broken) {
        /* the node speaks: it holds its placement, so the next frame it
         * reads may be the successor list */
        l->succ_sent = 1;
        if (p3d_chan_send(l->ch, h->L->mn->successors, P3D_FATE_STALL, NULL) < 0)
            l->broken = 1;
    }
    if (!l->ch || p3d_fate_read(l->ch, h->L->job->cluster->nodes[h->nodes[a]].name, hub_remote_msg, &rc, &e) < 0) {
        char how[256];
        snprintf(how, sizeof how, "the connection %s (killed, crashed, or the node is down)",
                 e && !strcmp(e, "closed") ? "closed"
                 : e                       ? e
                                           : "failed");
        hub_close(h, l);
        hub_gone(h, a, how, 0);
    }
    free(e);
}

/* --node-timeout: the hub hears every agent at least every
 * p3d_beat_interval (its heartbeat B, or any other packet); one silent for
 * the timeout is frozen (SIGSTOP, a kernel hang, a stuck NFS read) or cut
 * off while its kernel still answers TCP. It is lost exactly like a dropped
 * connection or a dead agent process: its link is closed first (a retire
 * order never waits on it), a local one is ended with its process tree.
 * The remote nodes get the hub's heartbeat (with the timeout, which their
 * relays adopt). check 0: send only (the hub is busy, reading nothing).
 * Returns when to come back (0: off). */
static double hub_beat(hub *h, double now, int check)
{
    double to = h->L->o->node_timeout, iv = p3d_beat_interval(to);
    if (iv <= 0)
        return 0;
    if (now >= h->next_beat) {
        char buf[64];
        p3d_amsg b = {.type = P3D_AM_BEAT, .ms = (int)(to * 1000)};
        int len = p3d_amsg_encode(&b, buf, sizeof buf);
        /* the local agents too: each ends its ranks by itself when we
         * go silent (agent.c, fencing) */
        for (int i = 0; i < h->n && len > 0; i++)
            hub_send_one(h, i, buf, (size_t)len);
        h->next_beat = now + iv;
    }
    double next = h->next_beat;
    /* we were not running for a while ourselves (stopped, or busy placing):
     * what the agents sent meanwhile is still unread, look next round */
    int stalled = h->last_check && now - h->last_check > iv + 1.0;
    if (check)
        h->last_check = now;
    if (stalled)
        check = 0;
    for (int i = 0; i < h->n; i++) {
        alink *l = &h->ln[i];
        if (l->fd < 0 || l->reported)
            continue;
        if (check && now - l->heard > to) {
            char how[160];
            snprintf(how, sizeof how, "no heartbeat for %.1f s (frozen or cut off; --node-timeout %g)", now - l->heard,
                     to);
            /* fencing: a frozen remote node's own processes end its ranks
             * by its deadline (relay.c, agent.c); no replacement before */
            if (l->remote)
                p3d_ctl_fence(h->ctl, i, l->heard + to + P3D_FENCE_SLACK);
            hub_close(h, l);
            if (!l->remote && l->pid > 0)
                p3d_kill_tree(l->pid, SIGKILL);
            hub_gone(h, i, how, 0);
            continue;
        }
        if (l->heard + to < next)
            next = l->heard + to + 0.01;
    }
    return next;
}

/* A child exited (the loop reaped it): an agent, or a descendant
 * reparented to us (nothing to do). */
static void hub_child(p3d_loop *lp, pid_t p, int status, void *ctx)
{
    hub *h = ctx;
    (void)lp;
    for (int i = 0; i < h->n; i++) {
        alink *l = &h->ln[i];
        if (l->remote || l->pid != p)
            continue;
        l->pid = 0;
        /* fenced like a node of its own: what it started (its ranks'
         * children, adopted by us now) ends before anything replaces it */
        p3d_kill_session(p);
        /* its last packets (a failure report may be in flight) */
        hub_read_local(h, i);
        hub_close(h, l);
        char how[128];
        p3d_exit_how(status, how, sizeof how);
        hub_gone(h, i, how, WIFEXITED(status));
    }
}

static void hub_on_signal(p3d_loop *lp, int sig, void *ctx)
{
    hub *h = ctx;
    (void)lp;
    p3d_ctl_signal(h->ctl, sig, p3d_now());
}

static void hub_on_link(p3d_loop *lp, int fd, int ev, void *ctx)
{
    lctx *c = ctx;
    hub *h = c->h;
    (void)ev;
    if (h->ln[c->a].fd != fd) {
        p3d_loop_unwatch(lp, fd);
        return;
    }
    if (h->ln[c->a].remote)
        hub_read_remote(h, c->a);
    else
        hub_read_local(h, c->a); /* EOF: gone once reaped */
}

/* Before each wait: the controller's clock moved on, a health round it
 * asked for started, the heartbeats sent and judged, the links whose send
 * failed reported lost; the earliest deadline of all that. */
static double hub_prepare(p3d_loop *lp, double now, void *ctx)
{
    hub *h = ctx;
    p3d_sink_flush(&h->sink);
    p3d_ctl_tick(h->ctl, now);
    if (p3d_ctl_get_state(h->ctl) == P3D_CTL_DONE) {
        p3d_loop_stop(lp);
        return 0;
    }
    /* rewritten after each judgement, and once one is out, at every new
     * generation or state too: after a node replacement the ranks report
     * no progress for a while, and a view of the old generation would
     * stand there as if nothing had happened */
    if (p3d_ctl_judgements(h->ctl) != h->judged || (h->judged && (p3d_ctl_restarts(h->ctl) != h->status_gen ||
                                                                  (int)p3d_ctl_get_state(h->ctl) != h->status_state))) {
        h->judged = p3d_ctl_judgements(h->ctl);
        hub_write_status(h);
    }
    hub_health_due(h);
    double bd = hub_beat(h, p3d_now(), 1);
    for (int i = 0; i < h->n; i++)
        if (h->ln[i].retire_pending && !h->ln[i].reported) {
            h->ln[i].retire_pending = 0;
            hub_gone(h, i, NULL, 1);
        }
    for (int i = 0; i < h->n; i++)
        if (h->ln[i].broken && !h->ln[i].reported) {
            /* a send that failed: the node may be frozen (its buffer
             * full), so its own deadline fences it as above */
            if (h->ln[i].remote && h->L->o->node_timeout > 0)
                p3d_ctl_fence(h->ctl, i, h->ln[i].heard + h->L->o->node_timeout + P3D_FENCE_SLACK);
            hub_close(h, &h->ln[i]);
            hub_gone(h, i, h->ln[i].how[0] ? h->ln[i].how : "the connection failed (cannot send to it)", 0);
        }
    if (p3d_ctl_get_state(h->ctl) == P3D_CTL_DONE) {
        p3d_loop_stop(lp);
        return 0;
    }
    hub_join_held(h);
    double dl = p3d_ctl_deadline(h->ctl), jd = hub_join_deadline(h);
    if (bd > 0 && (!dl || bd < dl))
        dl = bd;
    if (jd > 0 && (!dl || jd < dl))
        dl = jd;
    double sd = p3d_sink_watch(&h->sink, lp);
    if (sd > 0 && (!dl || sd < dl))
        dl = sd;
    return dl;
}

static void hub_loop(hub *h)
{
    /* Many nodes: every pass costs O(nodes) (the poll set, the beat scan),
     * and the heartbeats alone wake the leader nodes/interval times a
     * second (16,384 nodes, 5 s: ~3,300). Passes at most every 10 ms then,
     * each taking every packet that came meanwhile: the work is bounded by
     * 100 passes a second, a message waits at most 10 ms longer. */
    if (h->n > 256)
        p3d_loop_pace(h->loop, 0.010);
    if (p3d_loop_prepare(h->loop, hub_prepare, h) < 0 || p3d_loop_run(h->loop) < 0)
        p3d_ctl_abort(h->ctl, "the event loop failed", P3D_EXIT_FAIL, p3d_now());
}

/* ---- leader failover: the successor's gate, the election ------------------ */

/* The backend's election said something (L->mn->elect_fd readable): every
 * piece of news to the controller. */
static void hub_on_elect(p3d_loop *lp, int fd, int ev, void *ctx)
{
    (void)lp, (void)fd, (void)ev;
    hub *h = ctx;
    char msg[1200];
    for (int k; (k = h->L->mn->elect_news(h->L->mn->elect_ctx, msg, sizeof msg)) != P3D_RDZV_NEWS_NONE;) {
        int news = k == P3D_RDZV_NEWS_WON       ? P3D_CTL_ELECT_WON
                   : k == P3D_RDZV_NEWS_NOT_WON ? P3D_CTL_ELECT_NOT_WON
                                                : P3D_CTL_ELECT_LOST;
        p3d_ctl_election(h->ctl, news, msg, p3d_now());
    }
}

typedef struct hub_tk {
    int me, leader;
    double heard;
    const char *why;
} hub_tk;

/* Rank r's data-parallel replica, for the fault verdict's "most replicas"
 * (caller frees; NULL out of memory: not compared), and how many. */
static int *hub_replicas(const p3d_placement *pl, int *nrep)
{
    int *rep = malloc(((size_t)pl->world + 1) * sizeof *rep);
    *nrep = 0;
    for (int r = 0; rep && r < pl->world; r++) {
        rep[r] = pl->ranks[r].coord[P3D_DIM_DP];
        if (rep[r] + 1 > *nrep)
            *nrep = rep[r] + 1;
    }
    return rep;
}

/* The backend's election decides who succeeds the leader (cfg.elect). */
static int hub_elects(const p3d_launch *L)
{
    return L->mn && L->mn->failover && L->mn->elect_news && L->mn->elect_fd >= 0;
}

/* Link i for agent i: a remote connection handed over (chans), or a local
 * agent forked later; all of them watched. 1 when any agent is remote. */
static int hub_links(hub *h, p3d_chan **chans, const hub_tk *tk)
{
    int remote = 0;
    for (int i = 0; i < h->n; i++) {
        h->names[i] = h->L->job->cluster->nodes[h->nodes[i]].name;
        h->ln[i].ch = chans ? chans[i] : NULL;
        h->ln[i].fd = h->ln[i].ch ? h->ln[i].ch->fd : -1;
        if (chans)
            chans[i] = NULL; /* the hub's now */
        h->ln[i].remote = h->ln[i].fd >= 0 || (tk && i != tk->me);
        h->ln[i].parked = tk != NULL; /* takeover: nothing runs until the next generation */
        h->ln[i].heard = p3d_now();
        remote |= h->ln[i].remote;
        h->lc[i] = (lctx){h, i};
        hub_watch(h, i);
    }
    return remote;
}

/* The controller, configured from the options and wired to the hub's
 * actions (h->ctl). 0, or -1 out of memory (said). */
static int hub_new_ctl(hub *h, int leader)
{
    const p3d_launch *L = h->L;
    p3d_ctl_cfg cfg = {
        .nagents = h->n,
        .names = h->names,
        .nranks = L->job->pl->world,
        .max_restarts = L->o->max_restarts,
        .max_no_progress = L->o->max_no_progress,
        .no_progress_code = L->o->no_progress_exit_code,
        .max_job_restarts = L->o->max_job_restarts,
        .fault_window = L->o->fault_window,
        .grace = L->o->grace,
        .timeout = L->o->timeout,
        .verbose = L->o->verbose,
        .health_timeout = L->o->health_check_timeout + P3D_CTL_SLACK,
        .leader = leader,
        .t0 = L->t0,
        .failover = L->mn && L->mn->failover,
        .node_timeout = L->o->node_timeout,
        .progress_interval = L->o->progress_interval,
        .slow_factor = L->o->slow_factor,
        .slow_windows = L->o->slow_windows,
        .slow_wait = L->o->slow_wait,
        .slow_replace = L->o->slow_node && !strcmp(L->o->slow_node, "replace"),
        .elect = hub_elects(L),
        .elect_wait = (L->o->node_timeout > 0 ? L->o->node_timeout : 30) + 2 * P3D_CTL_SLACK,
        .preempt_term = L->o->preempt_on_term,
        .dp = p3d_mesh_size(&L->job->pl->mesh, P3D_DIM_DP),
        .full_dp = L->job->full_dp > 0 ? L->job->full_dp : p3d_mesh_size(&L->job->pl->mesh, P3D_DIM_DP),
        .min_dp = L->job->min_dp,
        .grow_wait = L->o->grow_wait,
    };
    int *replicas = hub_replicas(L->job->pl, &cfg.nreplicas);
    cfg.replica_of = replicas;
    if (p3d_preempt_signal(L->o, &cfg.preempt_sig, NULL) < 0)
        cfg.preempt_sig = 0; /* checked before the start: cannot happen */
    p3d_ctl_ops ops = {.ctx = h,
                       .send = hub_send,
                       .kill = hub_kill,
                       .say = hub_say,
                       .event = hub_event,
                       .spares_left = hub_spares_left};
    /* a replacement starts the agents again on a new placement: local
     * ones forked again, remote ones sent the new placement (a multi-node
     * leader's replace sets L->job->cplace) */
    if (L->replace) {
        ops.replace = hub_replace;
        ops.respawn = hub_respawn;
    }
    if (L->replace && L->grow && L->grow_room) {
        ops.grow_room = hub_grow_room;
        ops.grow = hub_grow;
    }
    if (L->o->health_check)
        ops.health = hub_health_start;
    if (L->mn && L->mn->jport)
        ops.join_accept = hub_join_accept;
    h->ctl = p3d_ctl_new(&cfg, &ops, p3d_now());
    free(replicas); /* the controller keeps a copy */
    if (!h->ctl) {
        fprintf(stderr, "par3drun: cannot set up the supervisor: out of memory\n");
        return -1;
    }
    return 0;
}

/* --health-check before the first start, on a job of local agents only:
 * the loop runs it before anything else is on it. The nodes that failed
 * are set in bad; how many. */
static int hub_pre_check(hub *h, unsigned char *bad)
{
    int pre_bad = 0;
    h->pre_bad = bad;
    if (hub_health(h, NULL, hub_pre_done) < 0)
        memset(bad, 1, (size_t)h->n);
    else
        while (!h->pre_done && p3d_loop_once(h->loop, 0) == 0)
            ;
    for (int i = 0; i < h->n; i++)
        pre_bad += bad[i];
    return pre_bad;
}

/* Before the first start: a node that failed its check is excluded like a
 * lost one, its ranks placed on a spare (not a restart); a multi-node job
 * did this at the rendezvous (mnode.c, L->mn->unhealthy). Without a spare the
 * job ends before it started. */
static void hub_replace_pre_bad(hub *h, const unsigned char *bad)
{
    int nnodes = h->n;
    int *lost = calloc((size_t)nnodes + 1, sizeof *lost), nlost = 0;
    char *msg = NULL, why[256];
    for (int i = 0; lost && i < nnodes; i++)
        if (bad[i])
            lost[nlost++] = i;
    snprintf(why, sizeof why, "node %s failed its --health-check before the start", h->names[lost ? lost[0] : 0]);
    if (!lost || !h->L->replace || hub_replace(h, lost, nlost, 0, why, &msg) < 0) {
        char *s = NULL;
        if (asprintf(&s, "%s; cannot replace it: %s", why,
                     msg              ? msg
                     : !h->L->replace ? "no spare (--spares K keeps some)"
                                      : "out of memory") < 0)
            s = NULL;
        p3d_ctl_abort(h->ctl, s ? s : why, P3D_EXIT_LOST, p3d_now());
        free(s);
        for (int k = 0; k < nnodes; k++)
            hub_gone(h, k, NULL, 1);
    } else {
        char line[600];
        snprintf(line, sizeof line, "par3drun: %s; %s\n", why, msg ? msg : "replaced");
        hub_say(h, line);
        for (int k = 0; k < nlost; k++)
            p3d_ctl_mark_dead(h->ctl, lost[k]);
    }
    free(msg);
    free(lost);
}

/* Fork the local agents of the nodes that may run (not remote, not bad,
 * not parked); a fork that fails ends the job, its agents and the ones
 * after it gone. */
static void hub_start_agents(hub *h, const unsigned char *bad)
{
    for (int i = 0; i < h->n && p3d_ctl_get_state(h->ctl) != P3D_CTL_DONE; i++) {
        if (h->ln[i].remote || bad[i] || h->ln[i].parked)
            continue;
        if (hub_fork(h, i) < 0) {
            char why[160];
            snprintf(why, sizeof why, "cannot start the agent of node %s: %s", h->names[i], strerror(errno));
            p3d_ctl_abort(h->ctl, why, P3D_EXIT_FAIL, p3d_now());
            for (int k = i; k < h->n; k++)
                if (!h->ln[k].remote)
                    hub_gone(h, k, NULL, 0);
            break;
        }
    }
}

/* The job's end told: the controller's summary, what happened (a node
 * replaced, the width history), the end line, RUN_DIR/result.json and the "end" event. */
static void hub_tell_end(hub *h, int code)
{
    const p3d_launch *L = h->L;
    const char *sum = p3d_ctl_summary(h->ctl);
    if (sum[0])
        hub_say(h, sum);
    const char *st = p3d_ctl_story(h->ctl), *wh = p3d_ctl_width_history(h->ctl);
    if ((p3d_ctl_replaced(h->ctl) > 0 || wh[0]) && st[0]) {
        char head[512], rec[256], wc[64] = "";
        hub_recovery_text(h->ctl, rec, sizeof rec);
        int ns = p3d_ctl_shrinks(h->ctl), ng = p3d_ctl_grows(h->ctl);
        if (ns || ng)
            snprintf(wc, sizeof wc, ", %d shrink%s, %d grow%s", ns, ns == 1 ? "" : "s", ng, ng == 1 ? "" : "s");
        snprintf(head, sizeof head, "par3drun: what happened: %d node%s replaced%s, %d restart%s, %s, exit %d\n",
                 p3d_ctl_replaced(h->ctl), p3d_ctl_replaced(h->ctl) == 1 ? "" : "s", wc, p3d_ctl_restarts(h->ctl),
                 p3d_ctl_restarts(h->ctl) == 1 ? "" : "s", rec, code);
        hub_say(h, head);
        hub_say(h, st);
    } else if (p3d_ctl_joins(h->ctl) > 0 && st[0]) {
        hub_say(h, st); /* the joins, and what else happened */
    }
    if (wh[0]) {
        char line[320];
        snprintf(line, sizeof line, "par3drun: width: %s\n", wh);
        hub_say(h, line);
    }
    char rmax[32] = "null", smax[32] = "null";
    if (p3d_ctl_recovery_max(h->ctl) >= 0)
        snprintf(rmax, sizeof rmax, "%.3f", p3d_ctl_recovery_max(h->ctl));
    if (p3d_ctl_resumed_max(h->ctl) >= 0)
        snprintf(smax, sizeof smax, "%.3f", p3d_ctl_resumed_max(h->ctl));
    if (L->o->cmd != P3D_CMD_AGENT) {
        hub_end_line(h, code);
        p3d_result_end(L, h->ctl, code); /* RUN_DIR/result.json */
    }
    p3d_event(L->events_fd, L->t0,
              "\"event\": \"end\", \"exit_code\": %d, \"restarts\": %d, \"replaced\": %d, "
              "\"recovery_max_s\": %s, \"resumed_max_s\": %s, \"ended_during_recovery\": %s, \"joined\": %d",
              code, p3d_ctl_restarts(h->ctl), p3d_ctl_replaced(h->ctl), rmax, smax,
              p3d_ctl_recovering(h->ctl) ? "true" : "false", p3d_ctl_joins(h->ctl));
}

static int hub_run(const p3d_launch *L, const int *nodes, int nnodes, p3d_chan **chans, const hub_tk *tk)
{
    hub H = {.L = L, .n = nnodes, .sfd = -1, .nodes = nodes, .tk_me = tk ? tk->me : -1};
    hub *h = &H;
    int code = P3D_EXIT_FAIL, lock_fd = p3d_output_lock_open(L), remote = 0;
    const p3d_mnode_hooks *mn = L->mn; /* NULL: one node, --emulate */
    const char **names = calloc((size_t)nnodes + 1, sizeof *names);
    unsigned char *bad = calloc((size_t)nnodes + 1, 1);
    h->ln = calloc((size_t)nnodes + 1, sizeof *h->ln);
    h->names = names;
    h->lock_fd = lock_fd;
    p3d_sink_init(&h->sink, 1, 2, lock_fd);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    h->sfd = p3d_signalfd();
    h->loop = p3d_loop_new();
    h->on_link = hub_on_link;
    h->lc = calloc((size_t)nnodes + 1, sizeof *h->lc);
    if (h->sfd < 0 || !names || !bad || !h->ln || !h->loop || !h->lc ||
        p3d_loop_signals(h->loop, h->sfd, hub_on_signal, h) < 0) {
        fprintf(stderr, "par3drun: cannot set up the supervisor: %s\n", strerror(errno));
        goto out;
    }
    p3d_loop_child_default(h->loop, hub_child, h);
    if (L->store && p3d_store_attach(L->store, h->loop) < 0) {
        fprintf(stderr, "par3drun: cannot set up the supervisor: cannot serve the agent store: %s\n", strerror(errno));
        goto out;
    }
    remote = hub_links(h, chans, tk);
    if (hub_new_ctl(h, tk ? tk->leader : chans && !h->ln[0].ch ? 0 : -1) < 0)
        goto out;
    hub_peers(h);
    hub_join_start(h);
    if (hub_elects(L) && p3d_loop_watch(h->loop, L->mn->elect_fd, P3D_LOOP_IN, hub_on_elect, h) < 0) {
        fprintf(stderr, "par3drun: cannot set up the supervisor: cannot watch the election: %s\n", strerror(errno));
        goto out;
    }
    for (int i = 0; mn && mn->unhealthy && i < nnodes; i++)
        if (mn->unhealthy[i]) {
            /* multi-node: failed its own check before the rendezvous; the
             * placement gave it no rank (mnode.c), it waits idle */
            bad[i] = 1;
            p3d_ctl_mark_dead(h->ctl, i);
        }
    /* (a successor: those were lost before, not members of this generation) */
    if (tk) {
        /* the successor: the nodes rejoin on the gate; the controller
         * acts once a majority did (controller.h, TAKEOVER) */
        remote = 1;
        if (!mn || !mn->gate || p3d_loop_watch(h->loop, p3d_fgate_fd(mn->gate), P3D_LOOP_IN, hub_on_gate, h) < 0) {
            fprintf(stderr, "par3drun: cannot take over: no failover port\n");
            goto out;
        }
        p3d_ctl_leader_lost(h->ctl, tk->me, tk->heard, tk->why, p3d_now());
    }
    if (L->o->health_check && !remote && hub_pre_check(h, bad) > 0)
        hub_replace_pre_bad(h, bad);
    p3d_event(L->events_fd, L->t0, "\"event\": \"start\", \"ranks\": %d, \"nodes\": %d, \"restart\": %d",
              L->job->pl->world, nnodes, L->job->gen0);
    if (L->o->cmd != P3D_CMD_AGENT)
        hub_start_line(h, nnodes);
    hub_start_agents(h, bad);
    hub_loop(h);
    if (h->judged)
        hub_write_status(h); /* the view of the end */
    /* the recovery figures are the end line's (hub_end_line): one summary */
    code = p3d_ctl_code(h->ctl);
out:
    hub_join_end(h);
    /* subreaper sweep: anything reparented to us dies with the job */
    for (int i = 0; h->ln && i < h->n; i++)
        if (h->ln[i].pid > 0)
            p3d_kill_tree(h->ln[i].pid, SIGKILL);
    p3d_sweep_children();
    if (h->ctl)
        hub_tell_end(h, code);
    p3d_sink_close(&h->sink);
    hub_round_free(h, h->round);
    for (int i = 0; h->ln && i < h->n; i++) {
        hub_close(h, &h->ln[i]); /* remote connections were handed over too */
    }
    p3d_ctl_free(h->ctl);
    free(h->ln);
    free(h->lc);
    free(h->names); /* grown past names[] when a node joined */
    free(bad);
    p3d_store_attach(L->store, NULL); /* the store outlives this loop */
    if (h->loop)
        p3d_loop_free(h->loop); /* closes the signalfd */
    else if (h->sfd >= 0)
        close(h->sfd);
    if (lock_fd >= 0)
        close(lock_fd);
    return code;
}

int p3d_hub_run(const p3d_launch *L, const int *nodes, int nnodes, p3d_chan **remote)
{
    return hub_run(L, nodes, nnodes, remote, NULL);
}

int p3d_hub_takeover(const p3d_launch *L, const int *nodes, int nnodes, int me, int leader, double heard,
                     const char *why)
{
    hub_tk tk = {.me = me, .leader = leader, .heard = heard, .why = why};
    return hub_run(L, nodes, nnodes, NULL, &tk);
}

int p3d_launcher_run(const p3d_launch *L, const int *nodes, int nnodes)
{
    return p3d_hub_run(L, nodes, nnodes, NULL);
}
