/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode.c — one node of a multi-node job (docs/multinode.md).
 *
 *   rendezvous (rdzv.c bootstrap, rdzv_tree_*.c gather/place)
 *   -> every node: the placement in memory + the same JSON bytes on disk
 *   -> every node forks its agent (agent.c) over a socket pair, exactly
 *      as the single-node launcher does:
 *        leader (node rank 0): runs the job controller (controller.c over
 *          supervise.c's transports): its own agent on the socket pair,
 *          the others over their TCP connections;
 *        other nodes: a relay (relay.c).
 * The messages are wire.h's, relayed as P3D_MSG_FATE frames.
 * The placement itself: mnode_place.c; the leader's succession:
 * mnode_failover.c.
 */
#include "mnode_int.h"
#include "say.h"
#include "prepare.h"
#include "termsafe.h"

#include "controller.h"
#include "agent.h"
#include "hub.h"
#include "rdzv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


/* The leader holds one control connection per node: its descriptor limit
 * is raised to the hard limit when the soft one is too small. */
static int fd_room(int nnodes, char **err)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)nnodes + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        return p3d_err(err,
                       "the leader of %d nodes needs %llu file descriptors; the hard limit is %llu (raise it: "
                       "ulimit -Hn, /etc/security/limits.conf, or systemd LimitNOFILE)",
                       nnodes, (unsigned long long)need, (unsigned long long)rl.rlim_max);
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need * 2 ? need * 2 : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return p3d_err(err, "cannot raise the file descriptor limit to %llu: %s", (unsigned long long)rl.rlim_cur,
                       strerror(errno));
    return 0;
}

/* This node's JOIN and its record as the tree gathers it. */
static int own_record(mnode *m, char **err)
{
    const p3d_hello *h = &m->hello;
    p3d_join *j = &m->join;
    j->proto = P3D_WIRE_PROTO;
    j->version = strdup(P3D_VERSION);
    j->job_id = strdup(m->r->boot.job_id);
    j->nnodes = m->nnodes;
    j->node_rank = m->me;
    j->hostname = strdup(h->hostname);
    j->addr = strdup(h->addr ? h->addr : "");
    j->port = m->me == 0 ? m->r->boot.leader_port : 0;
    j->ring_port = m->ring_port;
    if (!j->version || !j->job_id || !j->hostname || !j->addr)
        return p3d_err(err, "out of memory");
    p3d_node *t = p3d_mnode_node_clone(h->topo, err);
    if (!t)
        return -1;
    /* a joiner's record is the only one of its gather: rank 0 there */
    p3d_grec rec = {.rank = m->me < 0 ? 0 : m->me,
                    .hostname = h->hostname,
                    .addr = h->addr,
                    .rack = h->rack,
                    .master_port = h->master_port,
                    .nccl_port = h->nccl_port,
                    .failover_port = m->gate_port,
                    .health = !m->own_checked    ? P3D_GREC_HEALTH_NONE
                              : m->own_health.ok ? P3D_GREC_HEALTH_OK
                                                 : P3D_GREC_HEALTH_FAILED,
                    .health_how = m->own_health.how,
                    .preflight = m->own_pf_ran ? m->own_pf : NULL};
    return p3d_gather_add(&m->mine, &rec, t, err);
}

/* ---- --health-check before the start (docs/multinode.md) ----------------- */

/* This node's own check, run before it joins (all nodes at once, while
 * they would wait for the rendezvous anyway); the result travels in its
 * gathered record. P3D_NODE is the name this node knows itself by. */
static void own_health(mnode *m, const char *name)
{
    if (!m->o->health_check)
        return;
    m->own_checked = 1;
    p3d_health_run(m->o, &name, 1, NULL, &m->own_health);
    if (!m->own_health.ok)
        p3d_say_error("node %s failed its --health-check before the start (%s)%s", name, m->own_health.how,
                      m->me == 0 ? "" : "; the leader excludes it");
}

/* The leader: every node's pre-start result, from the gathered records,
 * kept for the events and the controller (p3d_gather is freed early). */
static int keep_health(mnode *m, const p3d_gather *g, char **err)
{
    m->health = calloc((size_t)m->nnodes, sizeof *m->health);
    m->checked = calloc((size_t)m->nnodes, 1);
    m->unhealthy = calloc((size_t)m->nnodes, 1);
    if (!m->health || !m->checked || !m->unhealthy)
        return p3d_err(err, "out of memory");
    for (int i = 0; i < g->nrec; i++) {
        const p3d_grec *x = &g->recs[i];
        if (x->rank < 0 || x->rank >= m->nnodes || x->health == P3D_GREC_HEALTH_NONE)
            continue;
        m->checked[x->rank] = 1;
        m->health[x->rank].ok = x->health == P3D_GREC_HEALTH_OK;
        m->unhealthy[x->rank] = x->health == P3D_GREC_HEALTH_FAILED;
        p3d_health_set_how(&m->health[x->rank], m->unhealthy[x->rank] ? x->health_how : "passed");
    }
    return 0;
}

/* The leader, once events.jsonl is open: a "health" event per node that
 * ran its check, a line per excluded node, one warning when the nodes'
 * options disagree. */
static void tell_health(mnode *m, const p3d_launch *L)
{
    int with = 0, without = 0;
    for (int i = 0; i < m->nnodes; i++) {
        with += m->checked[i];
        without += !m->checked[i];
        if (!m->checked[i])
            continue;
        p3d_health_event(L->events_fd, L->t0, m->pm.names[i], &m->health[i]);
        if (!m->health[i].ok)
            p3d_say_error("node %s failed its --health-check before the start (%s): excluded, it runs no rank; a spare "
                          "took its place",
                          m->pm.names[i], m->health[i].how);
    }
    for (int i = 0; m->pf_bad && i < m->nnodes; i++)
        if (m->pf_bad[i] && (m->health[i].ok || !m->checked[i]))
            p3d_say_error("node %s failed the --preflight before the start (%s): excluded, it runs no rank; a spare "
                          "took its place",
                          m->pm.names[i], m->pf.nodes[i].why);
    if (with && without)
        p3d_say_error("warning: %d of %d nodes ran no --health-check (give every node the same options); they count as "
                      "healthy",
                      without, m->nnodes);
}

/* ---- where this node listens ----------------------------------------------- */

/* r->bind_addr, the address every listening socket of this node binds
 * (docs/multinode.md, "Security"): --bind-addr, else the leader's the
 * address its rendezvous port lfd is bound to, another node's the local
 * end of its route to the leader (known once the backend published where
 * the leader is). 0, or -1 with err. */
static int listen_addr(mnode *m, int lfd, char **err)
{
    p3d_rdzv *r = m->r;
    if (m->o->bind_addr)
        snprintf(r->bind_addr, sizeof r->bind_addr, "%s", m->o->bind_addr);
    else if (lfd >= 0 && p3d_sock_addr(lfd, r->bind_addr, sizeof r->bind_addr) < 0)
        return p3d_err(err, "rendezvous: cannot read the address of the leader's own port: %s", strerror(errno));
    else if (lfd < 0 &&
             p3d_route_addr(r->boot.leader_host, r->boot.leader_port, r->bind_addr, sizeof r->bind_addr, err) < 0)
        return -1;
    if (m->o->verbose) {
        char who[32] = "the joining node";
        if (m->me >= 0)
            snprintf(who, sizeof who, "node[%d]", m->me);
        fprintf(stderr, "par3drun: %s: this node's ports listen on %s\n", who, r->bind_addr);
    }
    return 0;
}

/* The failover port, where a successor takes this node if the leader is
 * lost, on r->bind_addr. */
static void open_gate(mnode *m)
{
    if (m->o->no_failover || (m->nnodes < 2 && m->me >= 0))
        return;
    char *fe = NULL;
    /* slots: every node twice (a reconnect that was reset and comes
     * again) and some for strangers, who are evicted oldest first; a
     * joiner does not know the count yet */
    int slots = m->me < 0 ? 256 : m->nnodes < 32760 ? 2 * m->nnodes + 16 : 65536;
    m->gate = p3d_fgate_open(m->r->bind_addr, slots, &m->gate_port, &fe);
    if (!m->gate && m->o->verbose)
        fprintf(stderr, "par3drun: no failover port on this node (%s): a lost leader ends the job\n", fe ? fe : "?");
    free(fe);
}

/* ---- the flow ------------------------------------------------------------- */

/* This node's record (m->hello), named by its Slurm name under Slurm:
 * topology.conf speaks in those, and they differ from the hostname on
 * renamed or fake nodes. host and name (256 bytes each) get the hostname
 * and that name. 0, or -1 with err. */
static int own_hello(mnode *m, char *host, char *name, char **err)
{
    const p3d_opts *o = m->o;
    gethostname(host, 255);
    const char *sn = getenv("SLURMD_NODENAME");
    snprintf(name, 256, "%s", sn && *sn ? sn : host);
    p3d_hello *h = &m->hello;
    h->proto = P3D_WIRE_PROTO;
    h->version = strdup(P3D_VERSION);
    h->nnodes = m->nnodes;
    h->node_rank = m->me;
    h->hostname = strdup(name);
    h->master_port = p3d_free_port();
    h->nccl_port = p3d_prep_nccl_port(&m->prep, 0, h->master_port);
    if (p3d_topo_load(o->topology ? o->topology : "local", &h->topo, err) < 0 ||
        p3d_node_apply_allocation(&h->topo, o->nproc_per_node, err) < 0)
        return -1;
    h->rack = p3d_slurm_env_rack(); /* this node's leaf switch, if Slurm says */
    return 0;
}

/* The leader's rendezvous port (*lfd), the job's token and id, where the
 * others reach it, its failover port, and the rendezvous published. 0, or
 * the exit code with err. */
static int lead_listen(mnode *m, const char *host, int *lfd, char **err)
{
    const p3d_opts *o = m->o;
    p3d_rdzv *r = m->r;
    p3d_hello *h = &m->hello;
    if (!r->boot.leader_host[0])
        snprintf(r->boot.leader_host, sizeof r->boot.leader_host, "%s", host);
    if ((!r->boot.token[0] && p3d_random_hex(r->boot.token, 24) < 0) ||
        (!r->boot.job_id[0] && p3d_random_hex(r->boot.job_id, 6) < 0)) {
        p3d_err(err, "no random bytes for the job's token (getrandom failed)");
        return P3D_EXIT_FAIL;
    }
    h->job_id = strdup(r->boot.job_id);
    h->addr = strdup(r->boot.leader_host);
    *lfd = p3d_tcp_listen(r->boot.leader_host, r->boot.leader_port, &r->boot.leader_port, err);
    if (*lfd < 0 || listen_addr(m, *lfd, err) < 0)
        return P3D_EXIT_FAIL;
    if (o->bind_addr) { /* the others reach this node's listeners there */
        free(h->addr);
        h->addr = strdup(r->bind_addr);
    }
    open_gate(m);
    if (o->verbose)
        fprintf(stderr, "par3drun: rendezvous (%s): leader listening on %s:%d for %d nodes, job %s\n", r->ops->name,
                r->boot.leader_host, r->boot.leader_port, m->nnodes, r->boot.job_id);
    if (p3d_rdzv_publish(r, err) < 0)
        return P3D_EXIT_FAIL;
    return 0;
}

/* The leader: every node's record gathered up the tree on *lfd (closed
 * then), the pre-start checks judged, the placement made and kept, its
 * frame in frame. 0, or the exit code with err (the nodes waiting told). */
static int lead_gather(mnode *m, const char *name, int *lfd, int *fanout, p3d_wbuf *frame, char **err)
{
    const p3d_opts *o = m->o;
    p3d_rdzv *r = m->r;
    if (p3d_rdzv_fanout(o, fanout, err) < 0 || fd_room(m->nnodes, err) < 0)
        return P3D_EXIT_BADINPUT;
    m->joins = calloc((size_t)m->nnodes, sizeof *m->joins);
    m->chans = calloc((size_t)m->nnodes, sizeof *m->chans);
    if (!m->joins || !m->chans) {
        p3d_err(err, "out of memory");
        return P3D_EXIT_BADINPUT;
    }
    own_health(m, name);
    p3d_mnode_own_preflight(m, name);
    p3d_mnode_ring_open(m, name);
    if (own_record(m, err) < 0)
        return P3D_EXIT_BADINPUT;
    p3d_gather g;
    int ge = p3d_tree_gather(*lfd, r, *fanout, &m->join, &m->mine, &g, m->chans, m->joins, o->verbose, &m->st, err);
    p3d_mnode_ring_close(m);
    if (ge < 0)
        return P3D_EXIT_FAIL;
    /* the rendezvous port stays open: nodes join the running job there
     * (--join; without it the socket only holds late agents, who are told
     * the job runs) */
    m->jport = p3d_jport_new(*lfd, r, err);
    *lfd = -1;
    if (!m->jport)
        return P3D_EXIT_BADINPUT;
    int e = keep_health(m, &g, err);
    if (e == 0)
        e = p3d_mnode_judge_preflight(m, &g, err);
    if (e == 0)
        e = p3d_mnode_place_keep(o, r, &g, m->nnodes, frame, &m->st, &m->res, &m->peers, m->pf_json, err);
    p3d_gather_free(&g);
    m->have_res = e == 0;
    if (e == -2)
        p3d_mnode_tell_preflight(m, NULL, -1, 0); /* the figures behind the refusal */
    if (e < 0) {
        /* a failed --health-check that nothing can make up for: the
         * job stops before anything runs, as a lost node would */
        p3d_tcp_refuse_all(m->chans, m->nnodes, *err);
        return e == -2 ? P3D_EXIT_LOST : P3D_EXIT_BADINPUT;
    }
    return 0;
}

/* The leader: the placement frame down the tree (its own children pass it
 * on), then expanded here from the same bytes the agents expand (m->pm).
 * 0, or the exit code with err. */
static int lead_send(mnode *m, int fanout, const p3d_wbuf *frame, char **err)
{
    int nk = m->nnodes - 1 < fanout ? m->nnodes - 1 : fanout;
    int ranks[P3D_FANOUT_MAX];
    for (int i = 0; i < nk; i++)
        ranks[i] = i + 1;
    double t1 = p3d_now();
    int sent = p3d_tree_send(m->chans + 1, ranks, nk, frame, 30 + 0.01 * m->nnodes, &m->st, err);
    if (sent < 0)
        return P3D_EXIT_LOST; /* the others learn through their dropped connections */
    m->st.t_send = p3d_now() - t1;
    if (m->o->verbose)
        fprintf(stderr,
                "par3drun: rendezvous: %d nodes: records in after %.3f s, placed in %.3f s, the placement "
                "(%zu bytes, JSON %zu bytes) sent to %d tree children in %.3f s; the leader sent %llu bytes\n",
                m->nnodes, m->st.t_join, m->st.t_place, m->st.cplace_len, m->st.json_len, nk, m->st.t_send,
                (unsigned long long)m->st.bytes_sent);
    if (p3d_cplace_decode(p3d_frame_body(frame), p3d_frame_body_len(frame), &m->pm, err) < 0)
        return P3D_EXIT_BADINPUT;
    return 0;
}

/* Another node: published, listening, checked, joined up the tree, the
 * placement in m->pm and the connection to its parent in m->up. 0, or the
 * exit code with err. */
static int join_rendezvous(mnode *m, const char *name, char **err)
{
    p3d_rdzv *r = m->r;
    m->hello.job_id = strdup(r->boot.job_id);
    int pr = p3d_rdzv_publish(r, err);
    if (pr < 0)
        return pr == -2 ? P3D_EXIT_BADINPUT : P3D_EXIT_FAIL;
    if (listen_addr(m, -1, err) < 0)
        return P3D_EXIT_FAIL;
    open_gate(m);
    own_health(m, name);
    p3d_mnode_own_preflight(m, name);
    p3d_mnode_ring_open(m, name);
    if (own_record(m, err) < 0)
        return P3D_EXIT_BADINPUT;
    int tj = p3d_tree_join(r, &m->join, &m->mine, &m->pm, m->o->verbose, &m->st, &m->up, err);
    p3d_mnode_ring_close(m);
    /* refused by the leader: 2; no rendezvous (a late agent's
     * "Connection refused" included): 1, as the leader's timeout */
    if (tj < 0 && m->me < 0)
        return p3d_mnode_join_unreached(m, tj, err);
    if (tj < 0)
        return tj == -2 ? P3D_EXIT_BADINPUT : P3D_EXIT_FAIL;
    if (m->me < 0 && p3d_mnode_joined(m, err) < 0)
        return P3D_EXIT_FAIL;
    return 0;
}

/* L->mn->takeover: the successor's join port first (mnode_join.c), so
 * that joiners come here from now on and its leader key names the port,
 * then the takeover (mnode_failover.c). */
static int takeover_joins(void *ctx, int leader, double heard, const char *why, const int *before, int nbefore)
{
    p3d_mnode_join_open(ctx);
    return p3d_mnode_takeover(ctx, leader, heard, why, before, nbefore);
}

/* The launch that runs this node's part of the job (L): the job record
 * from the placement, and what the multi-node flow adds to the one-node
 * launch (adopting a new placement, failover, replacement, the pre-start
 * checks told). */
static void fill_launch(mnode *m, p3d_launch *L)
{
    const p3d_opts *o = m->o;
    m->job.cluster = m->cluster;
    m->job.pl = m->pm.pl;
    m->job.job_id = m->pm.job_id;
    m->job.master_addr = m->pm.master_addr;
    m->job.master_port = m->pm.master_port;
    m->job.nccl_port = m->pm.nccl_port;
    p3d_mnode_width(m);
    p3d_prep_fill(&m->prep, L, m->me == 0);
    m->L = L;
    m->setup = L;
    p3d_mnode_hooks *H = m->hooks;
    H->adopt = p3d_mnode_adopt;
    H->ctx = m;
    H->sent = p3d_mnode_sent;
    H->failover = m->gate != NULL;
    H->key = m->r->boot.token;
    H->gate = m->gate;
    H->takeover = takeover_joins;
    H->takeover_ctx = m;
    H->place_hash = p3d_mnode_place_hash;
    H->rejoined = p3d_mnode_rejoined;
    H->self_addr = m->me == 0 ? m->hello.addr : m->join.addr;
    H->self_master_port = m->hello.master_port;
    H->self_nccl_port = m->hello.nccl_port;
    H->self_failover_port = m->gate ? m->gate_port : 0;
    L->bind_addr = m->r->bind_addr;
    m->elects = H->failover && p3d_rdzv_elects(m->r);
    m->leads = m->me == 0;
    if (m->me == 0) {
        p3d_mnode_elect_setup(m);
        p3d_mnode_sent(m); /* the placement every node got at the rendezvous */
    }
    /* a node that joins the running job is a spare too: with a restart
     * to spend, a lost node may move to it without --spares */
    if (m->me == 0 && m->have_res && (o->spares > 0 || o->max_restarts > 0 || m->res.job.min_dp > 0))
        p3d_mnode_heal_ops(m, L);
    if (m->me == 0 && m->have_res) {
        H->jport = m->jport;
        H->join_check = p3d_mnode_join_check;
        H->join_add = p3d_mnode_join_add;
    }
    if (m->me == 0 && m->checked) {
        p3d_mnode_tell_preflight(m, m->res.cluster, L->events_fd, L->t0);
        tell_health(m, L);
        H->unhealthy = m->unhealthy;
    }
}

/* --verbose: where this node stands in the job. */
static void say_here(const mnode *m, const p3d_launch *L)
{
    if (m->o->verbose) {
        int nl = 0;
        for (int q = 0; q < L->job->pl->world; q++)
            nl += L->job->pl->ranks[q].node == m->me;
        fprintf(stderr,
                "par3drun: node[%d] %s: job %s, %d of %d ranks here, placement %s, MASTER_ADDR=%s "
                "MASTER_PORT=%d\n",
                m->me, m->cluster->nodes[m->me].name, L->job->job_id, nl, L->job->pl->world, m->prep.placement_path,
                L->job->master_addr, L->job->master_port);
    }
}

/* The leader's part: the job controller, our own agent forked here, the
 * others over their rendezvous connections (handed over to it). The job's
 * exit code, or -1 with err out of memory. */
static int lead_run(mnode *m, p3d_launch *L, char **err)
{
    int *nodes = calloc((size_t)m->nnodes, sizeof *nodes);
    if (!nodes) {
        p3d_err(err, "out of memory");
        return -1;
    }
    for (int i = 0; i < m->nnodes; i++)
        nodes[i] = i;
    if (L->mn->failover && m->peers && p3d_mnode_successors(m, 0) == 0) {
        m->hooks->successors = &m->sframe;
        m->succ_list = 1;
    }
    int rc = p3d_hub_run(L, nodes, m->nnodes, m->chans);
    free(nodes);
    return rc;
}

/* Everything m holds, the rendezvous' ring included. */
static void mnode_free(mnode *m)
{
    p3d_chan_free(m->up);
    for (int i = 0; m->chans && i < m->nnodes; i++)
        p3d_chan_free(m->chans[i]);
    for (int i = 0; m->joins && i < m->nnodes; i++)
        p3d_join_free(&m->joins[i]);
    free(m->joins);
    p3d_join_free(&m->join);
    p3d_gather_free(&m->mine);
    free(m->chans);
    p3d_hello_free(&m->hello);
    p3d_mnode_ring_close(m);
    m->r->ring = NULL;
}

/* What m keeps for the job's run: placements, the plan, the failover
 * port and frames, the checks' results. */
static void mnode_free_job(mnode *m)
{
    p3d_place_msg_free(&m->pm);
    p3d_cluster_free(m->cluster);
    for (int i = 0; i < m->nold; i++) {
        p3d_place_msg_free(&m->old_pm[i]);
        p3d_cluster_free(m->old_cl[i]);
    }
    free(m->old_pm);
    free(m->old_cl);
    if (m->have_res)
        p3d_plan_result_free(&m->res);
    p3d_mpeer_free(m->peers, m->nnodes);
    p3d_fgate_close(m->gate);
    p3d_jport_close(m->jport);
    p3d_wbuf_free(&m->sframe);
    p3d_wbuf_free(&m->rframe);
    p3d_wbuf_free(&m->rdelta);
    free(m->health);
    free(m->checked);
    free(m->unhealthy);
    p3d_mnode_preflight_free(m);
}

int p3d_mnode_launch(const p3d_opts *o, p3d_rdzv *r)
{
    mnode M = {.o = o, .r = r, .me = r->boot.node_rank, .nnodes = r->boot.nnodes, .ring_fd = -1};
    mnode *m = &M;
    char *err = NULL;
    int rc = P3D_EXIT_BADINPUT, lfd = -1;
    p3d_wbuf frame = {0};
    p3d_launch L;
    memset(&L, 0, sizeof L);
    L.job = &m->job;
    L.events_fd = -1;
    p3d_mnode_hooks H;
    memset(&H, 0, sizeof H);
    H.elect_fd = -1;
    L.mn = &H;
    m->hooks = &H;

    if ((rc = p3d_prep_begin(o, r->ops->name, &m->prep, &err)) != 0)
        goto out;
    rc = P3D_EXIT_BADINPUT;
    char host[256] = "localhost", name[256];
    if (own_hello(m, host, name, &err) < 0)
        goto out;
    if (m->me == 0) {
        /* the leader: listen, publish, gather, place, send */
        int fanout = 0;
        if ((rc = lead_listen(m, host, &lfd, &err)) != 0 ||
            (rc = lead_gather(m, name, &lfd, &fanout, &frame, &err)) != 0 ||
            (rc = lead_send(m, fanout, &frame, &err)) != 0)
            goto out;
    } else if ((rc = join_rendezvous(m, name, &err)) != 0) {
        goto out;
    }
    rc = P3D_EXIT_BADINPUT;
    /* the failover gate takes nodes that prove the job key (the backend
     * may have handed it over only now: pmix, etcd) */
    p3d_fgate_set_key(m->gate, r->boot.token);
    if (m->pm.nnodes != m->nnodes) {
        p3d_err(&err, "the leader placed on %d nodes, this node expected %d", m->pm.nnodes, m->nnodes);
        goto out;
    }
    {
        p3d_node *t = m->hello.topo;
        m->hello.topo = NULL;
        if (p3d_mnode_local_cluster(o, t, &m->pm, m->me, &m->cluster, &err) < 0)
            goto out;
    }

    /* the run dir: the placement JSON, the same bytes on every node */
    if ((rc = p3d_prep_rundir(&m->prep, m->pm.job_id, m->me, m->pm.pl->world, m->pm.json, m->pm.json_len, &err)) != 0)
        goto out;
    fill_launch(m, &L);
    say_here(m, &L);
    if (m->me == 0) {
        if ((rc = lead_run(m, &L, &err)) < 0)
            rc = P3D_EXIT_FAIL;
    } else {
        rc = p3d_relay_run(&L, m->me, m->up);
        m->up = NULL;
    }
out:
    if (err) {
        p3d_say_error("%s", err);
        if (m->chans && m->me == 0 && rc != 0)
            p3d_tcp_refuse_all(m->chans, m->nnodes, err);
    }
    free(err);
    if (lfd >= 0)
        close(lfd);
    mnode_free(m);
    p3d_prep_finish(&m->prep, &L, rc, L.job->pl ? L.job->pl->world : 0);
    mnode_free_job(m);
    p3d_wbuf_free(&frame);
    return rc;
}

int p3d_rdzv_launch(const p3d_opts *o)
{
    p3d_rdzv r;
    char *err = NULL;
    /* --emulate is a one-host job by definition: inside an allocation it
     * must not turn into a Slurm rendezvous by auto-detection */
    if (o->emulate && (!o->rdzv || !strcmp(o->rdzv, "auto")))
        return -1;
    int k = p3d_rdzv_open(o, &r, &err);
    if (k == 0)
        return -1;
    if (k < 0) {
        p3d_say_error("%s", err ? err : "rendezvous failed");
        free(err);
        return P3D_EXIT_BADINPUT;
    }
    int rc = p3d_mnode_launch(o, &r);
    p3d_rdzv_close(&r);
    return rc;
}
