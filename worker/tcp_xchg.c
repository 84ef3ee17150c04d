/* SPDX-License-Identifier: BSD-3-Clause */
/* tcp_xchg.c - the progress engine of the CPU backend's TCP communicator.
 *
 * Progress: every socket is non-blocking and every message is framed
 * (tag, length).  One routine, tcp_exchange(), moves data: it sends to one
 * peer and receives from another at the same time, and whenever it waits
 * it polls ALL its connections.  A receive is "posted" first: when the
 * expected message's header arrives, its payload is read straight into the
 * destination (or, for the all-reduce, through a small cache-resident
 * staging buffer and summed into the destination) - no copy.  Anything
 * else that arrives goes into per-peer inboxes, so a write never waits on a
 * peer that is itself blocked writing (the 1F1B exchanges would otherwise
 * deadlock once a message exceeds the socket buffers), and receives match
 * by (peer, tag) in FIFO order.  An op fails when nothing moves for the
 * op timeout; a peer that closes its socket is an error only when
 * something is still expected from it.
 */
#include "tcp_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>


/* Appends the message being read to the inbox. */
static void complete(conn *c)
{
    if (c->tail)
        c->tail->next = c->cur;
    else
        c->head = c->cur;
    c->tail = c->cur;
    c->cur = NULL;
    c->hdr_got = 0;
}

/* Unlinks and returns the oldest inbox message with this tag, or NULL. */
static msg *inbox_take(conn *c, uint32_t tag)
{
    msg *prev = NULL;
    for (msg *m = c->head; m; prev = m, m = m->next) {
        if (m->tag != tag)
            continue;
        if (prev)
            prev->next = m->next;
        else
            c->head = m->next;
        if (c->tail == m)
            c->tail = prev;
        m->next = NULL;
        return m;
    }
    return NULL;
}

static int inbox_has(const conn *c, uint32_t tag)
{
    for (const msg *m = c->head; m; m = m->next)
        if (m->tag == tag)
            return 1;
    return 0;
}

/* Reads more of the message that goes to the posted receive.  A plain
 * receive reads straight into the destination; a summing one reads into
 * the world's staging buffer (small enough to stay in cache) and adds each
 * full piece into the destination.  Returns 1 when drain() must stop (no
 * data, connection gone, or the posted message is complete). */
static int read_direct(tcp_world *w, conn *c)
{
    size_t left = c->post_len - c->post_got, fill0 = 0, want;
    char *dst;
    if (c->post_add) {
        fill0 = c->post_got % STAGE_BYTES;
        dst = w->stage + fill0;
        want = STAGE_BYTES - fill0 < left ? STAGE_BYTES - fill0 : left;
    } else {
        dst = c->post_buf + c->post_got;
        want = left;
    }
    ssize_t k = recv(c->fd, dst, want, 0);
    if (k < 0) {
        if (errno == EINTR)
            return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            tcp_conn_close(c, errno);
        return 1;
    }
    if (k == 0) {
        tcp_conn_close(c, 0);
        return 1;
    }
    c->post_got += (size_t)k;
    if (c->post_add) {
        size_t fill = fill0 + (size_t)k;
        /* Pieces start at multiples of STAGE_BYTES (a multiple of the
         * element size), so a piece is whole elements once full or last. */
        if (fill == STAGE_BYTES || c->post_got == c->post_len)
            c->post_add(c->post_buf + (c->post_got - fill), w->stage, fill / c->post_es);
    }
    if (c->post_got < c->post_len)
        return 0;
    c->direct = 0;
    c->post_done = 1;
    return 1;
}

/* A connection whose posted receive is complete is "held": the next
 * message (the peer may already be a step ahead) stays in the kernel until
 * the next receive is posted, instead of detouring through the inbox. */
static int held(const tcp_world *w, const conn *c)
{
    /* In strict mode a held connection could hide the peer's clear-to-send
     * behind it; no unexpected payload can come anyway (every payload was
     * admitted by a posted receive), so nothing is held. */
    return !w->strict && c->posted && c->post_done;
}

/* Reads whatever is available on peer's socket: the posted message into
 * its destination, anything else into the inbox. */
static void drain(tcp_world *w, int peer)
{
    conn *c = &w->c[peer];
    while (c->fd >= 0) {
        if (c->direct) {
            if (read_direct(w, c))
                return;
            continue;
        }
        if (held(w, c))
            return;
        int in_hdr = c->hdr_got < sizeof c->hdr;
        ssize_t k = in_hdr ? recv(c->fd, c->hdr + c->hdr_got, sizeof c->hdr - c->hdr_got, 0)
                           : recv(c->fd, c->cur->data + c->cur_got, c->cur->len - c->cur_got, 0);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                tcp_conn_close(c, errno);
            return;
        }
        if (k == 0) {
            tcp_conn_close(c, 0);
            return;
        }
        if (!in_hdr) {
            c->cur_got += (size_t)k;
            if (c->cur_got == c->cur->len)
                complete(c);
            continue;
        }
        c->hdr_got += (size_t)k;
        if (c->hdr_got < sizeof c->hdr)
            continue;
        uint32_t tag = get32(c->hdr);
        uint64_t len = get64(c->hdr + 8);
        /* The posted receive takes the message only if no older one with
         * the same tag waits in the inbox (FIFO per tag) and the length
         * agrees (a wrong length goes to the inbox, where the receiver
         * finds it and reports both lengths). */
        if (c->posted && !c->post_done && tag == c->post_tag && len == c->post_len && !inbox_has(c, tag)) {
            c->hdr_got = 0;
            c->post_got = 0;
            if (len == 0)
                c->post_done = 1;
            else
                c->direct = 1;
            continue;
        }
        c->cur = malloc(sizeof *c->cur + len);
        if (!c->cur) {
            fprintf(stderr,
                    "p3d-worker: rank %d: out of memory for a %llu-byte message "
                    "from rank %d\n",
                    w->rank, (unsigned long long)len, peer);
            tcp_conn_close(c, ENOMEM);
            return;
        }
        c->cur->next = NULL;
        c->cur->tag = tag;
        c->cur->len = len;
        c->cur_got = 0;
        if (len == 0)
            complete(c);
    }
}

/* One poll over every open connection (held ones only for writing),
 * draining the readable ones; wpeer >= 0 also waits for that socket to be
 * writable.  Returns 0, or -1 when the deadline passed. */
static int progress(tcp_world *w, int wpeer, int wpeer2, double deadline)
{
    int n = 0;
    for (int r = 0; r < w->size; r++) {
        if (w->c[r].fd < 0)
            continue;
        short ev = (short)((held(w, &w->c[r]) ? 0 : POLLIN) | (r == wpeer || r == wpeer2 ? POLLOUT : 0));
        /* A held socket is left out: POLLERR/POLLHUP on it would make
         * poll() return at once, every time, until it is posted again. */
        if (!ev)
            continue;
        w->pfd[n].fd = w->c[r].fd;
        w->pfd[n].events = ev;
        w->pfd[n].revents = 0;
        w->pfd_peer[n++] = r;
    }
    double left = deadline - now_s();
    if (left <= 0)
        return -1;
    int k = poll(w->pfd, (nfds_t)n, left > 1 ? 1000 : (int)(left * 1000) + 1);
    if (k < 0 && errno != EINTR) {
        fprintf(stderr, "p3d-worker: rank %d: poll: %s\n", w->rank, strerror(errno));
        return -1;
    }
    for (int i = 0; k > 0 && i < n; i++)
        if ((w->pfd[i].events & POLLIN) && (w->pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
            drain(w, w->pfd_peer[i]);
    return 0;
}

static int peer_gone(tcp_world *w, int peer, const char *doing)
{
    conn *c = &w->c[peer];
    fprintf(stderr,
            "p3d-worker: rank %d: connection to rank %d %s (%s) while %s (%s): did "
            "rank %d exit or crash?\n",
            w->rank, peer, c->err ? "failed" : "closed", c->err ? strerror(c->err) : "end of stream", doing,
            w->activity, peer);
    return -1;
}

static int have_conn(tcp_world *w, int peer)
{
    if (w->c[peer].fd >= 0 || w->c[peer].closed)
        return 1;
    fprintf(stderr, "p3d-worker: rank %d: internal error: no connection to rank %d (%s)\n", w->rank, peer, w->activity);
    return 0;
}

/* Sends slen bytes to `to` while receiving rlen bytes from `from` (either
 * side off with -1; they may be the same peer), both framed with tag.  The
 * received bytes land in rbuf, or are summed into it (add, element size es)
 * when add is set.  Both directions advance in one loop, so a ring step
 * streams to the right while it drains the left; other connections are
 * drained into their inboxes meanwhile (a peer blocked writing to us is
 * never left waiting on us).  The op fails when nothing moves for
 * op_timeout seconds, or a peer it needs has gone.  Returns 0 or -1. */
/* One exchange in flight: what is sent, what is received, how far each is. */
typedef struct xchg {
    tcp_world *w;
    uint32_t tag;
    int to, from;
    conn *sc, *rc; /* the connections, NULL for a side that is off */
    const void *sbuf;
    size_t slen;
    void *rbuf;
    size_t rlen;
    void (*add)(void *, const void *, size_t);
    size_t es;
    unsigned char hdr[16], cts[16]; /* the send's header; strict mode's clear-to-send */
    size_t hoff, off, coff;         /* bytes of each sent so far */
    int sdone, rdone, wait_cts;
} xchg;

/* Posts the receive on x->rc (strict mode: queues the clear-to-send). */
static void post_receive(xchg *x)
{
    conn *rc = x->rc;
    rc->posted = 1;
    rc->post_done = 0;
    rc->direct = 0;
    rc->post_tag = x->tag;
    rc->post_buf = x->rbuf;
    rc->post_len = x->rlen;
    rc->post_got = 0;
    rc->post_add = x->add;
    rc->post_es = x->es;
    if (x->w->strict) {
        /* Posted: now the sender may start. */
        put32(x->cts, x->tag | CTS_BIT);
        put32(x->cts + 4, 0);
        put64(x->cts + 8, 0);
        x->coff = 0;
    }
}

/* As much of the clear-to-send as the socket takes now. */
static int push_cts(xchg *x)
{
    while (x->coff < sizeof x->cts) {
        if (x->rc->closed)
            return peer_gone(x->w, x->from, "posting a receive");
        ssize_t k = send(x->rc->fd, x->cts + x->coff, sizeof x->cts - x->coff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno != EINTR)
                tcp_conn_close(x->rc, errno);
            continue;
        }
        x->coff += (size_t)k;
    }
    return 0;
}

/* Strict mode: has the receiver's clear-to-send come? */
static int take_cts(xchg *x)
{
    msg *m = inbox_take(x->sc, x->tag | CTS_BIT);
    if (!m) {
        drain(x->w, x->to);
        m = inbox_take(x->sc, x->tag | CTS_BIT);
    }
    if (m) {
        free(m);
        x->wait_cts = 0;
    } else if (x->sc->closed) {
        return peer_gone(x->w, x->to, "waiting for the receiver");
    }
    return 0;
}

/* As much of the header and payload as the socket takes now. */
static int push_send(xchg *x)
{
    while (!x->sdone && !x->wait_cts) {
        if (x->sc->closed)
            return peer_gone(x->w, x->to, "sending");
        struct iovec iov[2];
        int niov = 0;
        if (x->hoff < sizeof x->hdr)
            iov[niov++] = (struct iovec){x->hdr + x->hoff, sizeof x->hdr - x->hoff};
        if (x->off < x->slen)
            iov[niov++] = (struct iovec){(char *)x->sbuf + x->off, x->slen - x->off};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        ssize_t k = sendmsg(x->sc->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno != EINTR)
                tcp_conn_close(x->sc, errno);
            continue;
        }
        size_t kk = (size_t)k, h = sizeof x->hdr - x->hoff;
        if (kk >= h) {
            x->hoff = sizeof x->hdr;
            x->off += kk - h;
        } else {
            x->hoff += kk;
        }
        x->sdone = x->hoff == sizeof x->hdr && x->off == x->slen;
    }
    return 0;
}

/* The receive: from the inbox when the message came before it was
 * posted, else whatever the socket has now. */
static int pull_recv(xchg *x)
{
    tcp_world *w = x->w;
    conn *rc = x->rc;
    msg *m = inbox_take(rc, x->tag);
    if (m && m->len != x->rlen) {
        fprintf(stderr,
                "p3d-worker: rank %d: message from rank %d has %zu bytes, "
                "expected %zu (%s): ranks disagree on the model shape?\n",
                w->rank, x->from, m->len, x->rlen, w->activity);
        free(m);
        return -1;
    }
    if (m) {
        /* It arrived before this receive was posted. */
        if (x->add)
            x->add(x->rbuf, m->data, x->rlen / x->es);
        else
            memcpy(x->rbuf, m->data, x->rlen);
        free(m);
        x->rdone = 1;
        /* Done: hold the connection, or the next message (maybe
         * already on its way) would be read into this buffer. */
        rc->post_done = 1;
    } else {
        drain(w, x->from);
        x->rdone = rc->post_done;
        /* A message that was already being read into the inbox
         * when this receive was posted is taken on the next turn. */
        if (!x->rdone && !inbox_has(rc, x->tag) && rc->closed)
            return peer_gone(w, x->from, "receiving");
    }
    return 0;
}

/* What did not finish when nothing moved for op_timeout seconds. */
static void say_timeout(const xchg *x)
{
    const tcp_world *w = x->w;
    if (x->wait_cts)
        fprintf(stderr,
                "p3d-worker: rank %d: rank %d did not post the receive matching "
                "my %zu-byte send within %.0f s (%s; --p2p strict: a send "
                "waits for its receive): a deadlock, or rank %d is stuck\n",
                w->rank, x->to, x->slen, w->op_timeout, w->activity, x->to);
    else if (!x->sdone)
        fprintf(stderr,
                "p3d-worker: rank %d: sending %zu bytes to rank %d did not "
                "finish within %.0f s (%s): rank %d does not receive\n",
                w->rank, x->slen, x->to, w->op_timeout, w->activity, x->to);
    else
        fprintf(stderr,
                "p3d-worker: rank %d: no message from rank %d within %.0f s "
                "(%s)\n",
                w->rank, x->from, w->op_timeout, w->activity);
}

/* Bytes moved so far, both directions: progress resets the deadline. */
static size_t moved(const xchg *x)
{
    return x->hoff + x->off + x->coff + (x->rc ? x->rc->post_got : 0);
}

/* Sends slen bytes to `to` while receiving rlen bytes from `from` (either
 * side off with -1; they may be the same peer), both framed with tag.  The
 * received bytes land in rbuf, or are summed into it (add, element size es)
 * when add is set.  Both directions advance in one loop, so a ring step
 * streams to the right while it drains the left; other connections are
 * drained into their inboxes meanwhile (a peer blocked writing to us is
 * never left waiting on us).  The op fails when nothing moves for
 * op_timeout seconds, or a peer it needs has gone.  Returns 0 or -1. */
int tcp_exchange(tcp_world *w, uint32_t tag, int to, const void *sbuf, size_t slen, int from, void *rbuf, size_t rlen,
                 void (*add)(void *, const void *, size_t), size_t es)
{
    xchg x = {.w = w,
              .tag = tag,
              .to = to,
              .from = from,
              .sbuf = sbuf,
              .slen = slen,
              .rbuf = rbuf,
              .rlen = rlen,
              .add = add,
              .es = es};
    conn *sc = x.sc = to >= 0 ? &w->c[to] : NULL, *rc = x.rc = from >= 0 ? &w->c[from] : NULL;
    int ret = -1;
    x.hoff = sizeof x.hdr;
    x.coff = sizeof x.cts;
    x.sdone = !sc;
    x.rdone = !rc;
    x.wait_cts = sc && w->strict;
    if ((sc && !have_conn(w, to)) || (rc && !have_conn(w, from)))
        return -1;
    if (sc) {
        put32(x.hdr, tag);
        put32(x.hdr + 4, 0);
        put64(x.hdr + 8, slen);
        x.hoff = 0;
    }
    if (rc)
        post_receive(&x);
    double deadline = now_s() + w->op_timeout;
    for (;;) {
        size_t before = moved(&x);
        int was_rdone = x.rdone, was_wait = x.wait_cts;
        if (push_cts(&x) < 0 || (x.wait_cts && take_cts(&x) < 0) || push_send(&x) < 0 ||
            (!x.rdone && pull_recv(&x) < 0))
            goto out;
        if (x.sdone && x.rdone && x.coff == sizeof x.cts)
            break;
        if (moved(&x) != before || x.rdone != was_rdone || x.wait_cts != was_wait)
            deadline = now_s() + w->op_timeout;
        if (rc && !x.rdone && inbox_has(rc, tag))
            continue;
        if (progress(w, x.sdone || x.wait_cts ? -1 : to, x.coff < sizeof x.cts ? from : -1, deadline)) {
            say_timeout(&x);
            goto out;
        }
    }
    ret = 0;
out:
    if (rc) {
        /* Failing half-way through a message leaves the stream unframed:
         * nothing more can be read from it. */
        if (rc->direct)
            tcp_conn_close(rc, EPROTO);
        rc->posted = 0;
        rc->direct = 0;
    }
    return ret;
}

int tcp_msg_send(tcp_world *w, int peer, uint32_t tag, const void *buf, size_t len)
{
    return tcp_exchange(w, tag, peer, buf, len, -1, NULL, 0, NULL, 1);
}

int tcp_msg_recv(tcp_world *w, int peer, uint32_t tag, void *buf, size_t len)
{
    return tcp_exchange(w, tag, -1, NULL, 0, peer, buf, len, NULL, 1);
}

int tcp_world_send(tcp_world *w, int to, const void *buf, size_t len)
{
    return tcp_msg_send(w, to, WORLD_TAG, buf, len);
}

int tcp_world_recv(tcp_world *w, int from, void *buf, size_t len)
{
    return tcp_msg_recv(w, from, WORLD_TAG, buf, len);
}

int tcp_world_allgather(tcp_world *w, const void *mine, void *all, size_t each)
{
    char *a = all;
    memmove(a + (size_t)w->rank * each, mine, each);
    if (w->rank != 0)
        return tcp_msg_send(w, 0, WORLD_TAG, mine, each) || tcp_msg_recv(w, 0, WORLD_TAG, a, each * (size_t)w->size)
                   ? -1
                   : 0;
    for (int r = 1; r < w->size; r++)
        if (tcp_msg_recv(w, r, WORLD_TAG, a + (size_t)r * each, each))
            return -1;
    for (int r = 1; r < w->size; r++)
        if (tcp_msg_send(w, r, WORLD_TAG, a, each * (size_t)w->size))
            return -1;
    return 0;
}

int tcp_world_barrier(tcp_world *w)
{
    char one = 1, *all = malloc((size_t)w->size);
    int rc = all ? tcp_world_allgather(w, &one, all, 1) : -1;
    free(all);
    return rc;
}
int tcp_sendrecv(tcp_comm *c, int to, const void *sbuf, size_t slen, int from, void *rbuf, size_t rlen)
{
    return tcp_exchange(c->w, c->tag, to >= 0 ? c->members[to] : -1, sbuf, slen, from >= 0 ? c->members[from] : -1,
                        rbuf, rlen, NULL, 1);
}
