/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_tree_leader.c — the leader's side of the TCP rendezvous (rdzv.h,
 * p3d_tree_gather): every agent's handshake and JOIN on one epoll loop (a join costs
 * O(1) however many nodes there are), each one told its place in the
 * distribution tree, the records gathered from the leader's own children.
 *
 * With --preflight's TCP ring (the leader's own JOIN has a ring_port, and
 * r->ring is set) the positions wait until every node joined: each then
 * names the ring's next node (the next node rank with a ring port, after
 * the last the first), every node streams to its next one at once, and
 * the leader runs its own part (r->ring) before it takes the records of
 * its children, which queue meanwhile. A node without a ring port (it ran
 * no --preflight) is left out of the ring.
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

/* ---- the leader --------------------------------------------------------------- */

/* "node[3] (host), node[7]..." of the ranks with !have[i]; at most ~20. */
static char *rank_list(const p3d_rdzv *r, const unsigned char *have)
{
    p3d_wbuf b = {0};
    int shown = 0, total = 0;
    for (int i = 0; i < r->boot.nnodes; i++) {
        if (have[i])
            continue;
        total++;
        if (shown >= 20)
            continue;
        char one[300];
        const char *h =
            r->boot.hostnames && r->boot.hostnames[i] && r->boot.hostnames[i][0] ? r->boot.hostnames[i] : NULL;
        int n = snprintf(one, sizeof one, "%snode[%d]%s%s%s", shown ? ", " : "", i, h ? " (" : "", h ? h : "",
                         h ? ")" : "");
        p3d_wbuf_bytes(&b, one, (size_t)n);
        shown++;
    }
    if (total > shown) {
        char more[64];
        int n = snprintf(more, sizeof more, " and %d more", total - shown);
        p3d_wbuf_bytes(&b, more, (size_t)n);
    }
    p3d_wbuf_bytes(&b, "", 1);
    if (b.oom) {
        p3d_wbuf_free(&b);
        return NULL;
    }
    return (char *)b.p;
}

typedef struct leader {
    const p3d_rdzv *r;
    int n, k, verbose;
    p3d_chan **ch; /* per node rank: its control connection */
    p3d_join *joins;
    unsigned char *joined, *have;
    int njoined, nhave;
    int ring;     /* --preflight's TCP ring: positions once all joined */
    int ring_due; /* they went out: the leader's own part is due */
    p3d_gather *g;
    p3d_tree_stats *st;
} leader;

/* The ring's next node after x: the next node rank with a ring port
 * (cyclic), -1 when x is the only one or has none itself. */
static int ring_next(const leader *L, int x)
{
    if (!L->ring || L->joins[x].ring_port <= 0)
        return -1;
    for (int k = 1; k < L->n; k++) {
        int y = (x + k) % L->n;
        if (L->joins[y].ring_port > 0)
            return y;
    }
    return -1;
}

/* Tells rank x where it hangs in the tree (its parent has joined). */
static int tell_position(leader *L, int x, char **err)
{
    int p = rz_tree_parent(x, L->k);
    int nx = ring_next(L, x);
    p3d_treepos t = {.parent = p,
                     .addr = p > 0 ? L->joins[p].addr : "",
                     .port = p > 0 ? L->joins[p].port : 0,
                     .nchildren = rz_tree_nchildren(x, L->k, L->n),
                     .fanout = L->k,
                     .ring_addr = nx >= 0 ? L->joins[nx].addr : "",
                     .ring_port = nx >= 0 ? L->joins[nx].ring_port : 0};
    if (t.nchildren > 0 && L->joins[x].port == 0)
        return p3d_err(err, "rendezvous: node[%d] (%s) listens nowhere but has %d children in the tree", x,
                       p3d_tesc(L->joins[x].hostname), t.nchildren);
    p3d_wbuf b = {0};
    /* small: a fresh connection's buffer takes it whole */
    int rc = p3d_treepos_encode(&t, &b) == 0 ? p3d_chan_send(L->ch[x], &b, 1.0, NULL) : -1;
    if (rc == 0 && L->st)
        L->st->bytes_sent += b.len + P3D_TAG_LEN;
    p3d_wbuf_free(&b);
    if (rc < 0)
        return p3d_err(err, "rendezvous: cannot tell node[%d] (%s) its place in the tree", x,
                       p3d_tesc(L->joins[x].hostname));
    return 0;
}

/* A JOIN from a pending peer: joins it (its node rank) or refuses it (0);
 * -1 when the rendezvous cannot go on. */
static int leader_join(leader *L, pending *p, const unsigned char *body, size_t len, int type, char **err)
{
    p3d_join j;
    char why[512], *e = NULL;
    const char *verdict = NULL;
    memset(&j, 0, sizeof j);
    if (type != P3D_MSG_JOIN) {
        snprintf(why, sizeof why, "expected HELLO, got message type %d%s", type,
                 type == P3D_MSG_HELLO ? " (an agent of another par3drun version?)" : "");
        verdict = why;
    } else {
        int d = p3d_join_decode(body, len, &j, &e);
        verdict = rz_auth_verdict(L->r, j.proto, j.version, d == 0 ? j.job_id : NULL, why, sizeof why);
        if (!verdict && d < 0) {
            snprintf(why, sizeof why, "%s", e ? e : "malformed JOIN");
            verdict = why;
        }
    }
    free(e);
    if (!verdict && j.node_rank == P3D_JOIN_RUNNING) {
        snprintf(why, sizeof why,
                 "the job has not started yet (its rendezvous still gathers its %d nodes): --join "
                 "adds a node to a running job; try again once it runs",
                 L->n);
        verdict = why;
    } else if (!verdict && j.nnodes != L->n) {
        snprintf(why, sizeof why, "this agent expects %d nodes, the leader %d (--nnodes must be the same everywhere)",
                 j.nnodes, L->n);
        verdict = why;
    } else if (!verdict && (j.node_rank < 1 || j.node_rank >= L->n)) {
        snprintf(why, sizeof why, "node rank %d: expected 1..%d (0 is the leader)", j.node_rank, L->n - 1);
        verdict = why;
    } else if (!verdict && L->joined[j.node_rank]) {
        snprintf(why, sizeof why, "node rank %d already joined (from %s): each node needs its own --node-rank",
                 j.node_rank, L->joins[j.node_rank].addr ? L->joins[j.node_rank].addr : "?");
        verdict = why;
    }
    if (verdict) {
        rz_refuse_joiner(p, "rendezvous", j.hostname, verdict);
        p3d_join_free(&j);
        return 0;
    }
    int x = j.node_rank;
    int rc = x;
    if (!j.addr[0]) {
        free(j.addr);
        j.addr = strdup(p->peer);
    }
    L->joins[x] = j;
    L->ch[x] = p->ch; /* what came after the JOIN stays queued in it */
    p->ch = NULL;
    p->fd = -1;
    p3d_hs_wipe(&p->hs);
    p->hs_on = 0;
    L->joined[x] = 1;
    L->njoined++;
    if (L->ring) {
        /* every position once all joined: the ring's next nodes are known */
        for (int y = 1; L->njoined == L->n && y < L->n; y++)
            if (tell_position(L, y, err) < 0)
                return -1;
        L->ring_due = L->njoined == L->n;
        return rc;
    }
    /* x learns its parent now if that one is known; x's waiting children
     * learn x */
    int par = rz_tree_parent(x, L->k);
    if ((par == 0 || L->joined[par]) && tell_position(L, x, err) < 0)
        return -1;
    for (int c = 0; c < rz_tree_nchildren(x, L->k, L->n); c++) {
        int y = L->k * x + 1 + c;
        if (L->joined[y] && tell_position(L, y, err) < 0)
            return -1;
    }
    return rc;
}

/* A frame on a joined control connection during the rendezvous: the
 * records of one of the leader's children's subtrees. */
static int leader_frame(leader *L, int x, int type, const unsigned char *body, size_t len, char **err)
{
    if (type != P3D_MSG_GATHER || rz_tree_parent(x, L->k) != 0)
        return 0; /* nothing else is expected yet; ignored */
    p3d_gather g;
    char *e = NULL;
    if (p3d_gather_decode(body, len, L->n, &g, &e) < 0) {
        p3d_err(err, "rendezvous: node[%d] (%s) sent bad records: %s", x, p3d_tesc(L->joins[x].hostname),
                e ? p3d_tesc(e) : "?");
        free(e);
        return -1;
    }
    for (int i = 0; i < g.nrec; i++) {
        int y = g.recs[i].rank;
        if (!rz_in_subtree(y, x, L->k) || L->have[y]) {
            p3d_err(err, "rendezvous: node[%d] (%s) sent the record of node[%d], %s", x, p3d_tesc(L->joins[x].hostname),
                    y, L->have[y] ? "which was already in" : "which is not in its subtree");
            p3d_gather_free(&g);
            return -1;
        }
        L->have[y] = 1;
        L->nhave++;
    }
    if (p3d_gather_merge(L->g, &g, err) < 0)
        return -1;
    return 0;
}

/* Reads a joined control connection: the records of one of the leader's
 * children's subtrees, or the connection's end (fatal: -1 with *err). */
static int leader_conn(leader *L, int x, char **err)
{
    char *e = NULL;
    int f = p3d_chan_fill(L->ch[x], &e);
    unsigned char *body;
    size_t len;
    int type, bad = 0;
    while (!bad && (type = p3d_chan_take(L->ch[x], &body, &len, &e)) > 0) {
        if (L->st)
            L->st->bytes_recv += P3D_FRAME_BYTES(len + P3D_TAG_LEN);
        bad = leader_frame(L, x, type, body, len, err) < 0;
        free(body);
    }
    if (!bad && type < 0) {
        p3d_err(err, "rendezvous: node[%d] (%s): %s", x, p3d_tesc(L->joins[x].hostname), e ? e : "?");
        bad = 1;
    }
    if (!bad && f < 0) {
        int nc = rz_tree_nchildren(x, L->k, L->n);
        p3d_err(err, "rendezvous: node[%d] (%s) was lost before the placement was sent (its connection %s)%s", x,
                p3d_tesc(L->joins[x].hostname),
                e && !strcmp(e, "closed") ? "closed"
                : e                       ? e
                                          : "failed",
                nc > 0 ? "; it was an interior agent of the distribution tree: its subtree cannot be reached; "
                         "nothing started"
                       : "; nothing started");
        bad = 1;
        p3d_chan_free(L->ch[x]);
        L->ch[x] = NULL;
    }
    free(e);
    return bad ? -1 : 0;
}

/* The leader's pending peers: a stack of free slots and epoll, so that a
 * join costs O(1) however many nodes there are (a poll() over every
 * connection per wakeup is O(N^2) over the rendezvous: minutes at 16,384). */
typedef struct lpend {
    pending *pd;
    int maxpend, *free, nfree, ep;
    double next_exp;
} lpend;

#define EV_LISTEN UINT64_MAX

static void lp_release(lpend *P, int slot)
{
    if (P->pd[slot].fd >= 0)
        rz_drop_pending(&P->pd[slot], "dropped", 0);
    P->free[P->nfree++] = slot;
}

static void lp_accept(lpend *P, int lfd, int verbose)
{
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return;
        int slot;
        if (P->nfree > 0) {
            slot = P->free[--P->nfree];
        } else { /* all slots taken: evict the oldest unauthenticated peer */
            slot = 0;
            for (int i = 1; i < P->maxpend; i++)
                if (P->pd[i].since < P->pd[slot].since)
                    slot = i;
            rz_drop_pending(&P->pd[slot], "evicted for a newer connection (all slots taken)", verbose);
        }
        rz_keepalive(c);
        P->pd[slot].fd = c;
        P->pd[slot].since = p3d_now();
        rz_peer_name(c, P->pd[slot].peer, sizeof P->pd[slot].peer);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)slot};
        epoll_ctl(P->ep, EPOLL_CTL_ADD, c, &ev);
        if (P->next_exp == 0 || P->pd[slot].since + HELLO_DEADLINE < P->next_exp)
            P->next_exp = P->pd[slot].since + HELLO_DEADLINE;
    }
}

/* Peers past their deadline go; scanned only when the earliest is due. */
static void lp_expire(lpend *P, double now, int verbose)
{
    if (P->next_exp == 0 || now < P->next_exp)
        return;
    P->next_exp = 0;
    for (int i = 0; i < P->maxpend; i++)
        if (P->pd[i].fd >= 0) {
            if (now - P->pd[i].since >= HELLO_DEADLINE) {
                rz_drop_pending(&P->pd[i], "no HELLO within 10 s", verbose);
                P->free[P->nfree++] = i;
            } else if (P->next_exp == 0 || P->pd[i].since + HELLO_DEADLINE < P->next_exp) {
                P->next_exp = P->pd[i].since + HELLO_DEADLINE;
            }
        }
}

/* The refusal at the deadline: who never joined, or whose records never
 * came up the tree. */
static void gather_timeout(leader *L, char **err)
{
    const p3d_rdzv *r = L->r;
    int n = L->n;
    if (L->njoined < n) {
        char *m = rank_list(r, L->joined);
        p3d_err(err, TIMEOUT_TEXT " after %g s: %d/%d nodes joined; never arrived: %s", r->timeout, L->njoined, n,
                m ? m : "?");
        free(m);
    } else {
        char *m = rank_list(r, L->have);
        p3d_err(err,
                TIMEOUT_TEXT " after %g s: all %d nodes joined, but the records of %d never came "
                             "up the distribution tree (%s): an interior agent above them is stuck",
                r->timeout, n, n - L->nhave, m ? m : "?");
        free(m);
    }
}

/* The progress line every PROGRESS_EVERY seconds (verbose, or a terminal). */
static void gather_note(leader *L, double now, double t0)
{
    char *m = rank_list(L->r, L->joined);
    if (L->njoined < L->n)
        fprintf(stderr, "rendezvous: %d/%d nodes joined, waiting for %s (%.0f s of %g s)\n", L->njoined, L->n,
                m ? m : "?", now - t0, L->r->timeout);
    else
        fprintf(stderr, "rendezvous: %d/%d nodes joined, %d/%d records in (%.0f s of %g s)\n", L->n, L->n, L->nhave,
                L->n, now - t0, L->r->timeout);
    free(m);
}

/* One epoll event: the listening socket (accept), a pending connection
 * (its handshake and JOIN: it becomes node x's), or node x's channel.
 * -1 with *err when the rendezvous must end. */
static int gather_event(leader *L, lpend *P, int lfd, uint64_t o, char **err)
{
    if (o == EV_LISTEN) {
        lp_accept(P, lfd, L->verbose);
        return 0;
    }
    if (o >= (uint64_t)P->maxpend) {
        int x = (int)(o - (uint64_t)P->maxpend);
        return L->ch[x] && leader_conn(L, x, err) < 0 ? -1 : 0;
    }
    pending *p = &P->pd[o];
    if (p->fd < 0)
        return 0; /* dropped meanwhile */
    unsigned char *body = NULL;
    size_t len = 0;
    int fd = p->fd;
    int type = rz_pending_auth(p, L->r->boot.token, P3D_LINK_CTRL, &body, &len);
    int x = type > 0 ? leader_join(L, p, body, len, type, err) : 0;
    free(body);
    if (x > 0) { /* the connection is node rank x's now */
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)P->maxpend + (uint64_t)x};
        epoll_ctl(P->ep, EPOLL_CTL_MOD, fd, &ev);
    }
    if (p->fd < 0)
        lp_release(P, (int)o);
    /* what came with the JOIN (nothing, normally) */
    return x < 0 || (x > 0 && leader_conn(L, x, err) < 0) ? -1 : 0;
}

/* The pending slots (2n + 16), the bookkeeping, epoll on the listening
 * socket, and the leader's own join as node 0. */
static int gather_setup(lpend *P, leader *L, int lfd, p3d_join *mine, p3d_gather *mine_g, char **err)
{
    int n = L->n;
    P->pd = calloc((size_t)P->maxpend, sizeof *P->pd);
    P->free = calloc((size_t)P->maxpend, sizeof *P->free);
    L->joined = calloc((size_t)n, 1);
    L->have = calloc((size_t)n, 1);
    memset(L->g, 0, sizeof *L->g);
    for (int i = 0; i < n; i++)
        L->ch[i] = NULL;
    P->ep = epoll_create1(EPOLL_CLOEXEC);
    if (!P->pd || !P->free || !L->joined || !L->have || P->ep < 0)
        return p3d_err(err, "rendezvous: cannot set up the leader: %s", P->ep < 0 ? strerror(errno) : "out of memory");
    for (int i = 0; i < P->maxpend; i++) {
        P->pd[i].fd = -1;
        P->free[P->nfree++] = P->maxpend - 1 - i;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
    epoll_ctl(P->ep, EPOLL_CTL_ADD, lfd, &ev);
    L->joins[0] = *mine;
    memset(mine, 0, sizeof *mine);
    L->joined[0] = L->have[0] = 1;
    L->njoined = L->nhave = 1;
    L->ring = L->r->ring && L->joins[0].ring_port > 0 && n > 1;
    return p3d_gather_merge(L->g, mine_g, err);
}

/* The leader's own part of the ring, while the others run theirs. */
static void gather_ring(leader *L)
{
    L->ring_due = 0;
    int nx = ring_next(L, 0);
    for (int i = 0; nx >= 0 && i < L->g->nrec; i++)
        if (L->g->recs[i].rank == 0)
            L->r->ring(L->r->ring_ctx, L->joins[nx].addr, L->joins[nx].ring_port, &L->g->recs[i]);
}

int p3d_tree_gather(int lfd, const p3d_rdzv *r, int fanout, p3d_join *mine, p3d_gather *mine_g, p3d_gather *g,
                    p3d_chan **chans, p3d_join *joins, int verbose, p3d_tree_stats *st, char **err)
{
    int n = r->boot.nnodes, rc = -1;
    lpend P = {.maxpend = 2 * n + 16, .ep = -1};
    leader L = {.r = r, .n = n, .k = fanout, .verbose = verbose, .ch = chans, .joins = joins, .g = g, .st = st};
    double t0 = p3d_now(), deadline = t0 + r->timeout, next_note = t0 + PROGRESS_EVERY;
    int chatty = verbose || isatty(2);
    struct epoll_event evs[256];
    if (gather_setup(&P, &L, lfd, mine, mine_g, err) < 0)
        goto out;
    while (L.nhave < n) {
        if (L.ring_due)
            gather_ring(&L);
        double now = p3d_now();
        if (now >= deadline) {
            gather_timeout(&L, err);
            p3d_tcp_refuse_all(chans, n, *err);
            goto out;
        }
        if (chatty && now >= next_note) {
            gather_note(&L, now, t0);
            next_note = now + PROGRESS_EVERY;
        }
        lp_expire(&P, now, verbose);
        double until = deadline < next_note || !chatty ? deadline : next_note;
        if (P.next_exp > 0 && P.next_exp < until)
            until = P.next_exp;
        int ne = epoll_wait(P.ep, evs, (int)(sizeof evs / sizeof evs[0]), (int)((until - now) * 1000) + 1);
        if (ne < 0 && errno != EINTR) {
            p3d_err(err, "rendezvous: epoll: %s", strerror(errno));
            goto out;
        }
        for (int q = 0; q < ne; q++)
            if (gather_event(&L, &P, lfd, evs[q].data.u64, err) < 0) {
                p3d_tcp_refuse_all(chans, n, *err);
                goto out;
            }
    }
    for (int x = 1; x < n; x++)
        rz_set_nonblock(chans[x]->fd, 0);
    if (st)
        st->t_join = p3d_now() - t0;
    if (verbose)
        fprintf(stderr, "rendezvous: %d/%d nodes joined, records in through a tree of fan-out %d in %.3f s\n", n, n,
                fanout, p3d_now() - t0);
    rc = 0;
out:
    for (int i = 0; P.pd && i < P.maxpend; i++)
        rz_drop_pending(&P.pd[i], "the rendezvous is over", 0);
    if (P.ep >= 0)
        close(P.ep);
    free(P.pd);
    free(P.free);
    free(L.joined);
    free(L.have);
    if (rc < 0) {
        for (int i = 0; i < n; i++) {
            p3d_chan_free(chans[i]);
            chans[i] = NULL;
        }
        p3d_gather_free(g);
    }
    return rc;
}
