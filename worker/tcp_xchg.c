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
        if (c->posted && !c->post_done && tag == c->post_tag && len == c->post_len &&
            !inbox_has(c, tag)) {
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
            fprintf(stderr, "p3d-worker: rank %d: out of memory for a %llu-byte message "
                            "from rank %d\n", w->rank, (unsigned long long)len, peer);
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
        short ev = (short)((held(w, &w->c[r]) ? 0 : POLLIN) |
                           (r == wpeer || r == wpeer2 ? POLLOUT : 0));
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
    fprintf(stderr, "p3d-worker: rank %d: connection to rank %d %s (%s) while %s (%s): did "
                    "rank %d exit or crash?\n", w->rank, peer, c->err ? "failed" : "closed",
            c->err ? strerror(c->err) : "end of stream", doing, w->activity, peer);
    return -1;
}

static int have_conn(tcp_world *w, int peer)
{
    if (w->c[peer].fd >= 0 || w->c[peer].closed)
        return 1;
    fprintf(stderr, "p3d-worker: rank %d: internal error: no connection to rank %d (%s)\n",
            w->rank, peer, w->activity);
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
int tcp_exchange(tcp_world *w, uint32_t tag, int to, const void *sbuf, size_t slen, int from,
                    void *rbuf, size_t rlen, void (*add)(void *, const void *, size_t), size_t es)
{
    conn *sc = to >= 0 ? &w->c[to] : NULL, *rc = from >= 0 ? &w->c[from] : NULL;
    unsigned char hdr[16], cts[16];
    size_t hoff = sizeof hdr, off = 0, coff = sizeof cts;
    int ret = -1, sdone = !sc, rdone = !rc, wait_cts = sc && w->strict;
    if ((sc && !have_conn(w, to)) || (rc && !have_conn(w, from)))
        return -1;
    if (sc) {
        put32(hdr, tag);
        put32(hdr + 4, 0);
        put64(hdr + 8, slen);
        hoff = 0;
    }
    if (rc) {
        rc->posted = 1;
        rc->post_done = 0;
        rc->direct = 0;
        rc->post_tag = tag;
        rc->post_buf = rbuf;
        rc->post_len = rlen;
        rc->post_got = 0;
        rc->post_add = add;
        rc->post_es = es;
        if (w->strict) {
            /* Posted: now the sender may start. */
            put32(cts, tag | CTS_BIT);
            put32(cts + 4, 0);
            put64(cts + 8, 0);
            coff = 0;
        }
    }
    double deadline = now_s() + w->op_timeout;
    for (;;) {
        size_t before = hoff + off + coff + (rc ? rc->post_got : 0);
        int was_rdone = rdone, was_wait = wait_cts;
        while (coff < sizeof cts) {
            if (rc->closed) {
                peer_gone(w, from, "posting a receive");
                goto out;
            }
            ssize_t k = send(rc->fd, cts + coff, sizeof cts - coff, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                if (errno != EINTR)
                    tcp_conn_close(rc, errno);
                continue;
            }
            coff += (size_t)k;
        }
        if (wait_cts) {
            msg *m = inbox_take(sc, tag | CTS_BIT);
            if (!m) {
                drain(w, to);
                m = inbox_take(sc, tag | CTS_BIT);
            }
            if (m) {
                free(m);
                wait_cts = 0;
            } else if (sc->closed) {
                peer_gone(w, to, "waiting for the receiver");
                goto out;
            }
        }
        while (!sdone && !wait_cts) {
            if (sc->closed) {
                peer_gone(w, to, "sending");
                goto out;
            }
            struct iovec iov[2];
            int niov = 0;
            if (hoff < sizeof hdr)
                iov[niov++] = (struct iovec){hdr + hoff, sizeof hdr - hoff};
            if (off < slen)
                iov[niov++] = (struct iovec){(char *)sbuf + off, slen - off};
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
            ssize_t k = sendmsg(sc->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                if (errno != EINTR)
                    tcp_conn_close(sc, errno);
                continue;
            }
            size_t kk = (size_t)k, h = sizeof hdr - hoff;
            if (kk >= h) {
                hoff = sizeof hdr;
                off += kk - h;
            } else {
                hoff += kk;
            }
            sdone = hoff == sizeof hdr && off == slen;
        }
        if (!rdone) {
            msg *m = inbox_take(rc, tag);
            if (m && m->len != rlen) {
                fprintf(stderr, "p3d-worker: rank %d: message from rank %d has %zu bytes, "
                                "expected %zu (%s): ranks disagree on the model shape?\n",
                        w->rank, from, m->len, rlen, w->activity);
                free(m);
                goto out;
            }
            if (m) {
                /* It arrived before this receive was posted. */
                if (add)
                    add(rbuf, m->data, rlen / es);
                else
                    memcpy(rbuf, m->data, rlen);
                free(m);
                rdone = 1;
                /* Done: hold the connection, or the next message (maybe
                 * already on its way) would be read into this buffer. */
                rc->post_done = 1;
            } else {
                drain(w, from);
                rdone = rc->post_done;
                /* A message that was already being read into the inbox
                 * when this receive was posted is taken on the next turn. */
                if (!rdone && !inbox_has(rc, tag) && rc->closed) {
                    peer_gone(w, from, "receiving");
                    goto out;
                }
            }
        }
        if (sdone && rdone && coff == sizeof cts)
            break;
        if (hoff + off + coff + (rc ? rc->post_got : 0) != before || rdone != was_rdone ||
            wait_cts != was_wait)
            deadline = now_s() + w->op_timeout;
        if (rc && !rdone && inbox_has(rc, tag))
            continue;
        if (progress(w, sdone || wait_cts ? -1 : to, coff < sizeof cts ? from : -1, deadline)) {
            if (wait_cts)
                fprintf(stderr, "p3d-worker: rank %d: rank %d did not post the receive matching "
                                "my %zu-byte send within %.0f s (%s; --p2p strict: a send "
                                "waits for its receive): a deadlock, or rank %d is stuck\n",
                        w->rank, to, slen, w->op_timeout, w->activity, to);
            else if (!sdone)
                fprintf(stderr, "p3d-worker: rank %d: sending %zu bytes to rank %d did not "
                                "finish within %.0f s (%s): rank %d does not receive\n",
                        w->rank, slen, to, w->op_timeout, w->activity, to);
            else
                fprintf(stderr, "p3d-worker: rank %d: no message from rank %d within %.0f s "
                                "(%s)\n", w->rank, from, w->op_timeout, w->activity);
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
        return tcp_msg_send(w, 0, WORLD_TAG, mine, each) ||
                       tcp_msg_recv(w, 0, WORLD_TAG, a, each * (size_t)w->size)
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
int tcp_sendrecv(tcp_comm *c, int to, const void *sbuf, size_t slen, int from, void *rbuf,
                 size_t rlen)
{
    return tcp_exchange(c->w, c->tag, to >= 0 ? c->members[to] : -1, sbuf, slen,
                    from >= 0 ? c->members[from] : -1, rbuf, rlen, NULL, 1);
}
