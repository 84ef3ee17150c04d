/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_tree_agent.c — an agent's side of the TCP rendezvous (rdzv.h,
 * p3d_tree_join): JOIN to the leader (the fate channel), attach to the tree
 * parent, collect the children's records, send the subtree's up, receive
 * the placement and pass it on.
 */
#include "rdzv_tcp_internal.h"
#include "termsafe.h"

#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The leader's refusal on the control connection, quoted. */
/* The leader's REFUSE into *err. Returns 1 when it refused this node (bad
 * input: exit 2), 0 when it is the leader's own rendezvous timeout or a
 * failure of the job (P3D_REFUSE_FAILED), which travel as refusals too:
 * the job did not start (exit 1 on both sides; same par3drun version, so
 * the text is the leader's). */
static int refusal(const unsigned char *body, size_t len, const p3d_rdzv *r, char **err)
{
    p3d_rbuf rb = {.p = body, .len = len};
    char *why = p3d_rbuf_str(&rb, 65536);
    char who[32] = "this node (--join)";
    if (r->boot.node_rank != P3D_JOIN_RUNNING)
        snprintf(who, sizeof who, "node[%d]", r->boot.node_rank);
    p3d_err(err, "rendezvous: the leader at %s:%d refused %s: %s", r->boot.leader_host, r->boot.leader_port, who,
            why ? why : "(no reason given)");
    int bad = !(why && (!strncmp(why, TIMEOUT_TEXT, strlen(TIMEOUT_TEXT)) ||
                        !strncmp(why, P3D_REFUSE_FAILED, strlen(P3D_REFUSE_FAILED))));
    free(why);
    return bad;
}

typedef struct agentj {
    const p3d_rdzv *r;
    int me, k, lfd, verbose;
    p3d_chan *ctrl, *up; /* the leader; the tree parent (== ctrl when
                              * the parent is the leader) */
    int nkids;           /* expected children */
    p3d_chan **kch;      /* per child slot (child rank - first), NULL */
    unsigned char *kdone;
    int ndone;
    int refused; /* the leader refused this node: exit 2 */
    p3d_gather *g;
    p3d_tree_stats *st;
    double t0, deadline; /* the join's start, the rendezvous' timeout */
    int chatty;          /* progress lines (--verbose or a terminal) */
} agentj;

/* A child's TJOIN on a pending connection: adopts it (its slot) or
 * refuses it (-1). */
static int adopt_child(agentj *A, pending *p, const unsigned char *body, size_t len, int type)
{
    p3d_tjoin t;
    char why[512], *e = NULL;
    const char *verdict = NULL;
    int first = A->k * A->me + 1;
    memset(&t, 0, sizeof t);
    if (type != P3D_MSG_TJOIN) {
        snprintf(why, sizeof why, "expected a tree join, got message type %d", type);
        verdict = why;
    } else {
        int d = p3d_tjoin_decode(body, len, &t, &e);
        verdict = rz_auth_verdict(A->r, t.proto, t.version, d == 0 ? t.job_id : NULL, why, sizeof why);
        if (!verdict && d < 0) {
            snprintf(why, sizeof why, "%s", e ? e : "malformed TJOIN");
            verdict = why;
        }
    }
    free(e);
    if (!verdict && (t.node_rank < first || t.node_rank >= first + A->nkids)) {
        snprintf(why, sizeof why, "node rank %d is not a child of node[%d] in the tree", t.node_rank, A->me);
        verdict = why;
    } else if (!verdict && A->kch[t.node_rank - first]) {
        snprintf(why, sizeof why, "node rank %d already attached", t.node_rank);
        verdict = why;
    }
    if (verdict) {
        fprintf(stderr, "rendezvous: node[%d] refused %s: %s\n", A->me, p->peer, p3d_tesc(verdict));
        p3d_tcp_refuse_chan(p->ch, verdict);
        rz_drop_pending(p, "refused", 0);
    } else {
        int c = t.node_rank - first;
        if (A->verbose)
            fprintf(stderr, "rendezvous: node[%d] attached its tree child node[%d] (%s)\n", A->me, t.node_rank,
                    p->peer);
        A->kch[c] = p->ch; /* its records may have come in the same read */
        p->ch = NULL;
        p->fd = -1;
        rz_drop_pending(p, "attached", 0);
    }
    int slot = verdict ? -1 : t.node_rank - first;
    p3d_tjoin_free(&t);
    return slot;
}

/* Frames from an attached child: its subtree's records. */
static int child_event(agentj *A, int c, char **err)
{
    int x = A->k * A->me + 1 + c;
    char *e = NULL;
    int f = p3d_chan_fill(A->kch[c], &e);
    unsigned char *body;
    size_t len;
    int type;
    while ((type = p3d_chan_take(A->kch[c], &body, &len, &e)) > 0) {
        if (A->st)
            A->st->bytes_recv += P3D_FRAME_BYTES(len + P3D_TAG_LEN);
        if (type == P3D_MSG_GATHER && !A->kdone[c]) {
            p3d_gather g;
            char *de = NULL;
            int bad = p3d_gather_decode(body, len, A->r->boot.nnodes, &g, &de) < 0;
            for (int i = 0; !bad && i < g.nrec; i++)
                bad = !rz_in_subtree(g.recs[i].rank, x, A->k);
            if (bad) {
                p3d_err(err, "rendezvous: node[%d] sent bad records to node[%d]: %s", x, A->me,
                        de ? de : "a record outside its subtree");
                free(de);
                if (g.recs)
                    p3d_gather_free(&g);
                free(body);
                free(e);
                return -1;
            }
            A->kdone[c] = 1;
            A->ndone++;
            if (p3d_gather_merge(A->g, &g, err) < 0) {
                free(body);
                free(e);
                return -1;
            }
        }
        free(body);
    }
    if (f < 0 || type < 0) {
        /* the leader notices the lost child too and ends the rendezvous */
        if (A->verbose || type < 0)
            fprintf(stderr, "rendezvous: node[%d] lost its tree child node[%d] (%s)\n", A->me, x,
                    e ? p3d_tesc(e) : "?");
        p3d_chan_free(A->kch[c]);
        A->kch[c] = NULL;
    }
    free(e);
    return 0;
}

/* Reads one frame exactly, its tag checked (nothing past it: what
 * follows on the control connection is the fate channel's). */
static int read_exact(p3d_chan *c, unsigned char **body, size_t *len, char **e)
{
    rz_set_nonblock(c->fd, 0);
    int t = p3d_chan_read(c, 0, body, len, e);
    rz_set_nonblock(c->fd, 1);
    if (t == 0)
        p3d_err(e, "closed");
    return t;
}

/* A frame or an EOF on the control or the parent connection. 1: the
 * placement (from the parent) in *out; 0: nothing to act on; -1: the
 * rendezvous is over for this node (*err says why). */
static int updown_event(agentj *A, p3d_chan *fd, int parent, unsigned char **out, size_t *outn, char **err)
{
    unsigned char *body = NULL;
    size_t len = 0;
    char *e = NULL;
    int type = read_exact(fd, &body, &len, &e);
    if (type > 0 && A->st)
        A->st->bytes_recv += P3D_FRAME_BYTES(len + P3D_TAG_LEN);
    if (type == P3D_MSG_REFUSE) {
        A->refused = refusal(body, len, A->r, err);
        free(body);
        free(e);
        return -1;
    }
    if (type == P3D_MSG_CPLACE && fd == A->up) {
        *out = body;
        *outn = len;
        free(e);
        return 1;
    }
    free(body);
    if (type > 0 && (fd == A->up || type != P3D_MSG_FATE)) {
        /* a tree parent sends the placement and nothing else; the leader
         * (on the control connection) the placement when it is our
         * parent, else only fate packets (heartbeats: the leader's supervisor
         * may be running before the placement reached us) */
        p3d_err(err,
                "rendezvous: node[%d]: %s sent message type %d where the placement (type %d) was expected: "
                "refused",
                A->me, fd == A->ctrl ? "the leader" : "its tree parent", type, P3D_MSG_CPLACE);
        free(e);
        return -1;
    }
    if (type > 0) {
        free(e);
        return 0;
    }
    if (fd == A->ctrl) {
        p3d_err(err, "rendezvous: node[%d] lost the connection to the leader at %s:%d (%s)", A->me,
                A->r->boot.leader_host, A->r->boot.leader_port, e ? e : "?");
        free(e);
        return -1;
    }
    /* the parent is gone: the leader sees it too and says why; a few
     * seconds for that, then our own words */
    p3d_chan_free(A->up);
    A->up = NULL;
    if (p3d_wait_fd(A->ctrl->fd, P3D_LOOP_IN, p3d_now() + 5) > 0) {
        char *e2 = NULL;
        body = NULL;
        int t2 = read_exact(A->ctrl, &body, &len, &e2);
        if (t2 == P3D_MSG_REFUSE) {
            A->refused = refusal(body, len, A->r, err);
            free(body);
            free(e);
            free(e2);
            return -1;
        }
        free(body);
        free(e2);
    }
    p3d_err(err,
            "rendezvous: node[%d] lost its tree parent node[%d] before the placement came (%s); the job "
            "cannot start",
            A->me, parent, e ? e : "?");
    free(e);
    return -1;
}

typedef struct placewait {
    agentj *A;
    int parent, k;
    unsigned char **out;
    size_t *outn;
    char **err;
} placewait;

/* Which of the control and parent connections fd is. */
static p3d_chan *updown_of(agentj *A, int fd)
{
    return A->up && A->up->fd == fd ? A->up : A->ctrl;
}

static void place_event(p3d_loop *l, int fd, int ev, void *ctx)
{
    placewait *w = ctx;
    (void)ev;
    w->k = updown_event(w->A, updown_of(w->A, fd), w->parent, w->out, w->outn, w->err);
    if (w->k != 0)
        p3d_loop_stop(l);
}

/* The placement from the parent. 0 with *body, or -1. */
static int wait_place(agentj *A, double until, int parent, unsigned char **out, size_t *outn, char **err)
{
    double t0 = p3d_now();
    placewait w = {.A = A, .parent = parent, .out = out, .outn = outn, .err = err};
    p3d_loop *l = p3d_loop_new();
    if (!l || p3d_loop_watch(l, A->ctrl->fd, P3D_LOOP_IN, place_event, &w) < 0 ||
        (A->up && A->up != A->ctrl && p3d_loop_watch(l, A->up->fd, P3D_LOOP_IN, place_event, &w) < 0)) {
        p3d_loop_free(l);
        return p3d_err(err, "out of memory");
    }
    while (!p3d_loop_stopped(l)) {
        double now = p3d_now();
        if (now >= until) {
            p3d_loop_free(l);
            return p3d_err(err, "rendezvous: no placement from the leader at %s:%d after %.0f s",
                           A->r->boot.leader_host, A->r->boot.leader_port, now - t0);
        }
        if (p3d_loop_once(l, until) < 0) {
            p3d_loop_free(l);
            return p3d_err(err, "rendezvous: %s", strerror(errno));
        }
    }
    p3d_loop_free(l);
    return w.k > 0 ? 0 : -1;
}

/* agent_wait's state on its loop: which fd is whose (a pending
 * connection, a child slot) and how it ended. */
typedef struct kidwait {
    agentj *A;
    pending *pd;
    int maxpend, rc; /* rc: 1 all in, -1 failed (err set) */
    char **err;
    int *watched, nwatched;
} kidwait;

static void kw_updown(p3d_loop *l, int fd, int ev, void *ctx)
{
    kidwait *w = ctx;
    (void)ev;
    unsigned char *body = NULL;
    size_t len = 0;
    int k = updown_event(w->A, updown_of(w->A, fd), rz_tree_parent(w->A->me, w->A->k), &body, &len, w->err);
    free(body);
    if (k != 0) {
        if (k > 0)
            p3d_err(w->err, "rendezvous: node[%d] got the placement before it sent its records", w->A->me);
        w->rc = -1;
        p3d_loop_stop(l);
    }
}

static void kw_accept(p3d_loop *l, int fd, int ev, void *ctx)
{
    kidwait *w = ctx;
    (void)l;
    (void)ev;
    rz_accept_all(fd, w->pd, w->maxpend, w->A->verbose);
}

/* A pending connection or an adopted child's: which one is found by fd
 * (the watched set is rebuilt before every wait, kw_prepare). */
static void kw_peer(p3d_loop *l, int fd, int ev, void *ctx)
{
    kidwait *w = ctx;
    agentj *A = w->A;
    (void)ev;
    for (int i = 0; i < w->maxpend; i++)
        if (w->pd[i].fd == fd) {
            unsigned char *body = NULL;
            size_t len = 0;
            int type = rz_pending_auth(&w->pd[i], A->r->boot.token, P3D_LINK_TREE, &body, &len);
            int c = type > 0 ? adopt_child(A, &w->pd[i], body, len, type) : -1;
            free(body);
            if (c >= 0 && child_event(A, c, w->err) < 0) {
                w->rc = -1;
                p3d_loop_stop(l);
            }
            return;
        }
    for (int c = 0; c < A->nkids; c++)
        if (A->kch[c] && A->kch[c]->fd == fd && !A->kdone[c]) {
            if (child_event(A, c, w->err) < 0) {
                w->rc = -1;
                p3d_loop_stop(l);
            }
            return;
        }
}

static double kw_prepare(p3d_loop *l, double now, void *ctx)
{
    kidwait *w = ctx;
    agentj *A = w->A;
    if (A->ndone == A->nkids) {
        w->rc = 1;
        p3d_loop_stop(l);
        return 0;
    }
    double lim = 1e300;
    rz_expire_pending(w->pd, w->maxpend, now, &lim, A->verbose);
    if (lim >= 1e300)
        lim = 0;
    for (int k = 0; k < w->nwatched; k++)
        p3d_loop_unwatch(l, w->watched[k]);
    w->nwatched = 0;
    for (int i = 0; i < w->maxpend; i++)
        if (w->pd[i].fd >= 0 && p3d_loop_watch(l, w->pd[i].fd, P3D_LOOP_IN, kw_peer, w) == 0)
            w->watched[w->nwatched++] = w->pd[i].fd;
    for (int c = 0; c < A->nkids; c++)
        if (A->kch[c] && !A->kdone[c] && p3d_loop_watch(l, A->kch[c]->fd, P3D_LOOP_IN, kw_peer, w) == 0)
            w->watched[w->nwatched++] = A->kch[c]->fd;
    return lim;
}

/* Attaches the children and collects their records, watching the
 * control and the parent connections. 0 when all are in, or -1. */
static int agent_wait(agentj *A, double until, pending *pd, int maxpend, char **err)
{
    int chatty = A->verbose || isatty(2);
    double t0 = p3d_now(), next_note = t0 + PROGRESS_EVERY;
    kidwait w = {.A = A, .pd = pd, .maxpend = maxpend, .err = err};
    w.watched = calloc((size_t)maxpend + (size_t)A->nkids + 1, sizeof *w.watched);
    p3d_loop *l = p3d_loop_new();
    if (!w.watched || !l || p3d_loop_watch(l, A->ctrl->fd, P3D_LOOP_IN, kw_updown, &w) < 0 ||
        (A->up != A->ctrl && p3d_loop_watch(l, A->up->fd, P3D_LOOP_IN, kw_updown, &w) < 0) ||
        (A->lfd >= 0 && p3d_loop_watch(l, A->lfd, P3D_LOOP_IN, kw_accept, &w) < 0) ||
        p3d_loop_prepare(l, kw_prepare, &w) < 0) {
        p3d_err(err, "out of memory");
        w.rc = -1;
    }
    while (!w.rc) {
        double now = p3d_now();
        if (now >= until) {
            p3d_err(err, "rendezvous: node[%d]: %d of its %d tree children never sent their records", A->me,
                    A->nkids - A->ndone, A->nkids);
            w.rc = -1;
            break;
        }
        if (chatty && now >= next_note) {
            fprintf(stderr, "rendezvous: node[%d] joined, waiting for the other nodes (%.0f s)\n", A->me, now - t0);
            next_note = now + PROGRESS_EVERY;
        }
        if (p3d_loop_once(l, chatty && next_note < until ? next_note : until) < 0) {
            p3d_err(err, "rendezvous: %s", strerror(errno));
            w.rc = -1;
        }
    }
    p3d_loop_free(l);
    free(w.watched);
    return w.rc > 0 ? 0 : -1;
}

/* Connects to host:port and runs the handshake as its initiator: the
 * channel, or NULL with *err (*refused: the peer refused us in clear). */
static p3d_chan *dial_auth(const p3d_rdzv *r, const char *host, int port, int kind, double t0, double deadline,
                           const char *who, int chatty, int *refused, char **err)
{
    int fd = rz_connect_retry(host, port, t0, deadline, r->timeout, who, r->boot.node_rank, chatty, err);
    if (fd < 0)
        return NULL;
    char peer[400], *e = NULL;
    snprintf(peer, sizeof peer, "%s at %s:%d", who, host, port);
    p3d_chan *c = p3d_chan_handshake(fd, r->boot.token, 0, kind, deadline + 30, peer, refused, &e);
    if (!c) {
        close(fd);
        p3d_err(err, "rendezvous: node[%d]: %s: %s", r->boot.node_rank, peer, e ? e : "?");
    }
    free(e);
    return c;
}

/* Joins at the leader (A->ctrl): the address others reach this node at
 * in mine and in its own record, a listening socket for tree children
 * there (A->lfd, or none: a leaf), the join record sent. 0, or -1. */
static int join_leader(agentj *A, p3d_join *mine, p3d_wbuf *b, char **err)
{
    const p3d_rdzv *r = A->r;
    const char *host = r->boot.leader_host;
    int port = r->boot.leader_port;
    p3d_gather *me = A->g;
    A->ctrl = dial_auth(r, host, port, P3D_LINK_CTRL, A->t0, A->deadline, "the leader (node rank 0)", A->chatty,
                        &A->refused, err);
    if (!A->ctrl)
        return -1;
    /* the address the leader sees us at is the one others reach us at
     * (or the node's --bind-addr); children attach there */
    char addr[128] = "";
    if (r->bind_addr[0])
        snprintf(addr, sizeof addr, "%s", r->bind_addr);
    else
        p3d_sock_addr(A->ctrl->fd, addr, sizeof addr);
    free(mine->addr);
    mine->addr = strdup(addr);
    for (int i = 0; i < me->nrec; i++)
        if (me->recs[i].rank == A->me) {
            free(me->recs[i].addr);
            me->recs[i].addr = strdup(addr);
        }
    char *le = NULL;
    A->lfd = p3d_tcp_listen(addr, 0, &mine->port, &le);
    if (A->lfd < 0) {
        /* without a listening socket this node can only be a leaf */
        if (A->verbose)
            fprintf(stderr, "rendezvous: node[%d] cannot listen for tree children: %s\n", A->me, le);
        mine->port = 0;
    }
    free(le);
    if (p3d_join_encode(mine, b) < 0 || p3d_chan_send(A->ctrl, b, 30, NULL) < 0)
        return p3d_err(err, "rendezvous: cannot send to the leader at %s:%d", host, port);
    if (A->st)
        A->st->bytes_sent += b->len;
    rz_set_nonblock(A->ctrl->fd, 1);
    return 0;
}

/* The position in the tree (pos), which the leader sends when this
 * node's parent has joined; a progress line every 5 s meanwhile. 0, or -1
 * (a refusal sets A->refused). */
static int await_position(agentj *A, p3d_treepos *pos, char **err)
{
    const p3d_rdzv *r = A->r;
    const char *host = r->boot.leader_host;
    int port = r->boot.leader_port, rc = -1;
    unsigned char *body = NULL;
    size_t len = 0;
    double until = A->deadline + 30;
    for (;;) {
        double now = p3d_now();
        if (now >= until) {
            p3d_err(err, "rendezvous: no answer from the leader at %s:%d after %.0f s", host, port, now - A->t0);
            goto out;
        }
        int pr = p3d_wait_fd(A->ctrl->fd, P3D_LOOP_IN, A->chatty && now + 5 < until ? now + 5 : until);
        if (pr < 0) {
            p3d_err(err, "rendezvous: %s", strerror(errno));
            goto out;
        }
        if (pr == 0) {
            if (A->chatty)
                fprintf(stderr, "rendezvous: node[%d] joined, waiting for the other nodes (%.0f s of %g s)\n", A->me,
                        p3d_now() - A->t0, r->timeout);
            continue;
        }
        char *e = NULL;
        int type = read_exact(A->ctrl, &body, &len, &e);
        if (type > 0 && A->st)
            A->st->bytes_recv += P3D_FRAME_BYTES(len + P3D_TAG_LEN);
        if (type == P3D_MSG_REFUSE) {
            A->refused = refusal(body, len, r, err);
            free(e);
            goto out;
        }
        if (type <= 0) {
            p3d_err(err, "rendezvous: the leader at %s:%d closed the connection: %s", host, port, e ? e : "?");
            free(e);
            goto out;
        }
        free(e);
        if (type == P3D_MSG_TREE) {
            char *te = NULL;
            if (p3d_treepos_decode(body, len, pos, &te) < 0) {
                p3d_err(err, "rendezvous: node[%d] refused the tree position from the leader at %s:%d: %s", A->me, host,
                        port, te ? te : "?");
                free(te);
                goto out;
            }
            break;
        }
        if (type > 0) {
            p3d_err(err, "rendezvous: the leader sent message type %d, expected the tree position", type);
            goto out;
        }
        free(body);
        body = NULL;
    }
    rc = 0;
out:
    free(body);
    return rc;
}

/* Attaches to the tree parent named in pos (A->up), unless the parent is
 * the leader itself (A->up stays A->ctrl). 0, or -1. */
static int dial_parent(agentj *A, const p3d_treepos *pos, p3d_wbuf *b, char **err)
{
    if (pos->parent <= 0)
        return 0;
    char who[64];
    snprintf(who, sizeof who, "the tree parent node[%d]", pos->parent);
    int refused = 0;
    A->up = dial_auth(A->r, pos->addr, pos->port, P3D_LINK_TREE, A->t0, A->deadline, who, A->chatty, &refused, err);
    if (!A->up)
        return -1;
    p3d_tjoin t = {.proto = P3D_WIRE_PROTO,
                   .version = P3D_VERSION,
                   .job_id = (char *)A->r->boot.job_id,
                   .node_rank = A->me};
    if (p3d_tjoin_encode(&t, b) < 0 || p3d_chan_send(A->up, b, 30, NULL) < 0)
        return p3d_err(err, "rendezvous: cannot send to the tree parent node[%d] at %s:%d", pos->parent, pos->addr,
                       pos->port);
    if (A->st)
        A->st->bytes_sent += b->len;
    rz_set_nonblock(A->up->fd, 1);
    return 0;
}

/* The children: attached on A->lfd (closed then), their subtrees' records
 * gathered into A->g; *pd (*maxpend slots) the connections not yet
 * proven, the caller's to drop. 0, or -1. */
static int gather_children(agentj *A, const p3d_join *mine, pending **pd, int *maxpend, char **err)
{
    *maxpend = 2 * A->nkids + 16;
    *pd = calloc((size_t)*maxpend, sizeof **pd);
    A->kch = calloc((size_t)A->nkids + 1, sizeof *A->kch);
    A->kdone = calloc((size_t)A->nkids + 1, 1);
    if (!*pd || !A->kch || !A->kdone)
        return p3d_err(err, "out of memory");
    for (int i = 0; i < *maxpend; i++)
        (*pd)[i].fd = -1;
    if (A->nkids == 0 && A->lfd >= 0) {
        close(A->lfd);
        A->lfd = -1;
    }
    if (A->nkids > 0 && A->verbose)
        fprintf(stderr, "rendezvous: node[%d] listening for its %d tree children on %s:%d\n", A->me, A->nkids,
                mine->addr, mine->port);
    if (agent_wait(A, A->deadline + 15, *pd, *maxpend, err) < 0)
        return -1;
    if (A->lfd >= 0) {
        close(A->lfd);
        A->lfd = -1;
    }
    for (int i = 0; i < *maxpend; i++)
        if ((*pd)[i].fd >= 0)
            rz_drop_pending(&(*pd)[i], "the tree children are all in", A->verbose);
    return 0;
}

/* The subtree's records (A->g) up to the parent. 0, or -1. */
static int send_records_up(agentj *A, int parent, p3d_wbuf *b, char **err)
{
    if (p3d_gather_encode(A->g, b) < 0)
        return p3d_err(err, "rendezvous: cannot encode the subtree's records (out of memory, or over %u bytes)",
                       P3D_WIRE_MAX);
    if (p3d_chan_send(A->up, b, 30, NULL) < 0)
        return p3d_err(err, "rendezvous: cannot send the records to node[%d]", parent);
    if (A->st)
        A->st->bytes_sent += b->len + P3D_TAG_LEN;
    return 0;
}

/* The placement (body, its tag verified by read_exact) verified before
 * anything else sees it: the whole decode into out; only a placement this
 * node would run on goes to its children, as the same bytes (each with
 * its own tag). 0, or -1 (out freed). */
static int pass_placement(agentj *A, int parent, const unsigned char *body, size_t len, p3d_place_msg *out, char **err)
{
    char *e = NULL;
    if (p3d_cplace_decode(body, len, out, &e) < 0) {
        p3d_err(err, "rendezvous: node[%d] refused the placement from %s: %s", A->me,
                parent > 0 ? "its tree parent" : "the leader", e ? e : "?");
        free(e);
        return -1;
    }
    if (A->nkids == 0)
        return 0;
    p3d_wbuf fw = {0};
    p3d_wbuf_begin(&fw, P3D_MSG_CPLACE);
    p3d_wbuf_bytes(&fw, body, len);
    int ranks[P3D_FANOUT_MAX];
    for (int c = 0; c < A->nkids && c < P3D_FANOUT_MAX; c++)
        ranks[c] = A->k * A->me + 1 + c;
    int rc = p3d_wbuf_end(&fw) < 0 ? -1 : p3d_tree_send(A->kch, ranks, A->nkids, &fw, 30, A->st, err);
    p3d_wbuf_free(&fw);
    if (rc < 0)
        p3d_place_msg_free(out);
    return rc < 0 ? -1 : 0;
}

int p3d_tree_join(const p3d_rdzv *r, p3d_join *mine, p3d_gather *me, p3d_place_msg *out, int verbose,
                  p3d_tree_stats *st, p3d_chan **ctrl, char **err)
{
    int rc = -1, maxpend = 0;
    agentj A = {.r = r, .me = r->boot.node_rank, .lfd = -1, .verbose = verbose, .g = me, .st = st};
    A.t0 = p3d_now();
    A.deadline = A.t0 + r->timeout;
    A.chatty = verbose || isatty(2);
    pending *pd = NULL;
    p3d_treepos pos;
    p3d_wbuf b = {0};
    unsigned char *body = NULL;
    size_t len = 0;
    memset(&pos, 0, sizeof pos);
    *ctrl = NULL;
    if (join_leader(&A, mine, &b, err) < 0)
        goto out;
    /* the position in the tree: when our parent has joined */
    A.up = A.ctrl;
    A.k = 1;
    if (await_position(&A, &pos, err) < 0)
        goto out;
    /* --preflight's TCP ring: this node's part, now that the leader named
     * the next node (every node got its position at once); the record
     * that goes up the tree carries its figures */
    if (pos.ring_port > 0 && r->ring)
        for (int i = 0; i < me->nrec; i++)
            if (me->recs[i].rank == A.me)
                r->ring(r->ring_ctx, pos.ring_addr, pos.ring_port, &me->recs[i]);
    /* the leader's fan-out: our children are k*me+1 .. */
    A.nkids = pos.nchildren;
    A.k = pos.fanout;
    if (dial_parent(&A, &pos, &b, err) < 0 || gather_children(&A, mine, &pd, &maxpend, err) < 0 ||
        send_records_up(&A, pos.parent, &b, err) < 0)
        goto out;
    /* the placement: from the parent, passed on to the children */
    if (wait_place(&A, A.deadline + 30 + 0.01 * r->boot.nnodes, pos.parent, &body, &len, err) < 0 ||
        pass_placement(&A, pos.parent, body, len, out, err) < 0)
        goto out;
    rz_set_nonblock(A.ctrl->fd, 0);
    rc = 0;
    if (A.up == A.ctrl)
        A.up = NULL;
    *ctrl = A.ctrl;
    A.ctrl = NULL;
out:
    if (A.up && A.up != A.ctrl)
        p3d_chan_free(A.up);
    p3d_chan_free(A.ctrl);
    if (A.lfd >= 0)
        close(A.lfd);
    for (int i = 0; pd && i < maxpend; i++)
        rz_drop_pending(&pd[i], "the rendezvous is over", 0);
    for (int c = 0; A.kch && c < A.nkids; c++)
        p3d_chan_free(A.kch[c]);
    free(pd);
    free(A.kch);
    free(A.kdone);
    free(body);
    p3d_treepos_free(&pos);
    p3d_wbuf_free(&b);
    return rc < 0 && A.refused ? -2 : rc;
}
