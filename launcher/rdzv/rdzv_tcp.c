/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_tcp.c — the TCP rendezvous every backend ends in (rdzv.h), its
 * shared part: listening and refusing, the pre-authentication limits that
 * the leader and every interior agent apply, the shape of the distribution
 * tree, and sending one frame down to many children. The leader's gather
 * is in rdzv_tree_leader.c, an agent's join in rdzv_tree_agent.c.
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


int rz_set_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* A peer that vanishes without a FIN (node power loss, partition) is
 * noticed within ~15 s instead of the kernel's two hours. */
void rz_keepalive(int fd)
{
    int on = 1, idle = 5, intvl = 2, cnt = 5;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

int p3d_tcp_listen(const char *host, int port, int *bound, char **err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0)
        return p3d_err(err, "rendezvous: cannot resolve the leader address '%s': %s", host, gai_strerror(g));
    int fd = -1, e = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        /* bound to this address only: the rendezvous is not reachable on
         * the node's other interfaces */
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 4096) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return p3d_err(err, "rendezvous: cannot listen on %s:%d: %s%s", host, port, strerror(e),
                       e == EADDRINUSE ? " (another job on this port? give another one, or --rdzv-timeout to retry)"
                       : e == EADDRNOTAVAIL ? " (not an address of this node)"
                                            : "");
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
    rz_set_nonblock(fd, 1);
    return fd;
}

void p3d_tcp_refuse(int fd, const char *why)
{
    p3d_wbuf b = {0};
    p3d_wbuf_begin(&b, P3D_MSG_REFUSE);
    p3d_wbuf_str(&b, why);
    if (p3d_wbuf_end(&b) == 0) {
        /* best effort and bounded: a peer that does not read is dropped */
        struct timeval tv = {.tv_sec = 1};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        rz_set_nonblock(fd, 0);
        p3d_frame_write(fd, &b, NULL);
    }
    p3d_wbuf_free(&b);
}

void p3d_tcp_refuse_chan(p3d_chan *c, const char *why)
{
    p3d_wbuf b = {0};
    p3d_wbuf_begin(&b, P3D_MSG_REFUSE);
    p3d_wbuf_str(&b, why);
    /* best effort and bounded: a peer that does not read is dropped */
    if (c && p3d_wbuf_end(&b) == 0)
        p3d_chan_send(c, &b, 1.0, NULL);
    p3d_wbuf_free(&b);
}

void p3d_tcp_refuse_all(p3d_chan *const *chans, int n, const char *why)
{
    for (int i = 0; chans && i < n; i++)
        if (chans[i])
            p3d_tcp_refuse_chan(chans[i], why);
}

void rz_peer_name(int fd, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char h[128] = "?", p[16] = "?";
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(buf, cap, "%s:%s", h, p);
}

/* ---- accepting peers: the pre-authentication limits ---------------------- */


void rz_drop_pending(pending *p, const char *why, int verbose)
{
    if (verbose)
        fprintf(stderr, "rendezvous: dropped %s before it joined: %s\n", p->peer, p3d_tesc(why));
    if (why != p->why)
        snprintf(p->why, sizeof p->why, "%s", why);
    if (p->ch)
        p3d_chan_free(p->ch);
    else if (p->fd >= 0)
        close(p->fd);
    p->ch = NULL;
    p->fd = -1;
    p3d_framer_free(&p->fr);
    p3d_hs_wipe(&p->hs);
    p->hs_on = 0;
}

/* Accepts every queued connection into a free slot (evicting the oldest
 * unauthenticated peer when none is free). */
void rz_accept_all(int lfd, pending *pd, int maxpend, int verbose)
{
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return;
        int slot = -1;
        for (int i = 0; i < maxpend && slot < 0; i++)
            if (pd[i].fd < 0)
                slot = i;
        if (slot < 0) {
            slot = 0;
            for (int i = 1; i < maxpend; i++)
                if (pd[i].since < pd[slot].since)
                    slot = i;
            rz_drop_pending(&pd[slot], "evicted for a newer connection (all slots taken)", verbose);
        }
        rz_keepalive(c);
        pd[slot].fd = c;
        pd[slot].since = p3d_now();
        rz_peer_name(c, pd[slot].peer, sizeof pd[slot].peer);
    }
}

/* Drops peers past their deadline; lowers *until to the next one. */
void rz_expire_pending(pending *pd, int maxpend, double now, double *until, int verbose)
{
    for (int i = 0; i < maxpend; i++)
        if (pd[i].fd >= 0) {
            if (now - pd[i].since >= HELLO_DEADLINE)
                rz_drop_pending(&pd[i], "no HELLO within 10 s", verbose);
            else if (pd[i].since + HELLO_DEADLINE < *until)
                *until = pd[i].since + HELLO_DEADLINE;
        }
}

/* Reads a pending peer's first frame: this file moves the bytes, the
 * framer (wire.h) judges them (a first frame over PREAUTH_FRAME_MAX is
 * refused as soon as its length is in, before any of it is buffered).
 * Returns its type with *body when complete, 0 when more is needed, -1
 * when the peer was dropped. */
static int rz_pending_frame(pending *p, unsigned char **body, size_t *len)
{
    unsigned char chunk[4096];
    int f = 0;
    if (!p->fr.first_max)
        p3d_framer_first_max(&p->fr, PREAUTH_FRAME_MAX);
    if (p->fr.len) { /* what came with the last frame first */
        char *e = NULL;
        f = p3d_framer_feed(&p->fr, NULL, 0, &e);
        free(e);
        if (f < 0) {
            rz_drop_pending(p, f == -2 ? "a frame over the bound before its handshake" : "a malformed frame", 0);
            return -1;
        }
    }
    while (f == 0) {
        ssize_t k = recv(p->fd, chunk, p3d_framer_want(&p->fr, sizeof chunk), 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k <= 0) {
            rz_drop_pending(p, "closed", 0);
            return -1;
        }
        char *e = NULL;
        f = p3d_framer_feed(&p->fr, chunk, (size_t)k, &e);
        free(e);
        if (f == -2) {
            fprintf(stderr, "rendezvous: refused %s: a frame over %u bytes before its handshake (they are small)\n",
                    p->peer, PREAUTH_FRAME_MAX);
            rz_drop_pending(p, "a frame over the bound before its handshake", 0);
            return -1;
        }
        if (f < 0) {
            rz_drop_pending(p, "closed", 0);
            return -1;
        }
    }
    *body = NULL;
    *len = 0;
    int type = p3d_framer_take(&p->fr, body, len);
    return type > 0 ? type : 256; /* a type-0 frame: refused below */
}

/* The handshake's next step on a frame that came. 1 done (p->ch set), 0
 * more is needed, -1 dropped. */
static int pending_step(pending *p, int type, const unsigned char *b, size_t n)
{
    p3d_wbuf out = {0};
    char *e = NULL;
    int rc = p3d_hs_step(&p->hs, type, b, n, &out, &e);
    if (rc < 0) {
        fprintf(stderr, "rendezvous: refused %s: %s\n", p->peer, p3d_tesc(e ? e : "?"));
        if (type != P3D_MSG_REFUSE)
            p3d_hs_refuse(p->fd, e ? e : "refused");
        char why[sizeof p->why];
        snprintf(why, sizeof why, "refused: %s", e ? e : "?");
        rz_drop_pending(p, why, 0);
    } else if (out.len && p3d_frame_write_bounded(p->fd, &out, 1.0, NULL) < 0) {
        rz_drop_pending(p, "did not read the handshake", 0);
        rc = -1;
    } else if (rc == 1 && !(p->ch = p3d_chan_new(&p->hs, p->fd, &p->fr, p->peer))) {
        rz_drop_pending(p, "out of memory", 0);
        rc = -1;
    }
    free(e);
    p3d_wbuf_free(&out);
    return rc;
}

int rz_pending_auth(pending *p, const char *key, int kind, unsigned char **body, size_t *len)
{
    *body = NULL;
    *len = 0;
    if (!p->hs_on) {
        p3d_wbuf none = {0};
        char *e = NULL;
        p->hs_on = 1;
        if (p3d_hs_start(&p->hs, key, 1, kind, &none, &e) < 0) {
            fprintf(stderr, "rendezvous: cannot take %s: %s\n", p->peer, p3d_tesc(e ? e : "?"));
            free(e);
            rz_drop_pending(p, "no key", 0);
            return -1;
        }
    }
    while (!p->ch) {
        unsigned char *b = NULL;
        size_t n = 0;
        char peer[sizeof p->peer];
        int proved = p->hs.step == 1; /* our proof went out: its answer is due */
        snprintf(peer, sizeof peer, "%s", p->peer);
        int type = rz_pending_frame(p, &b, &n);
        if (type < 0 && proved) {
            snprintf(p->why, sizeof p->why,
                     "it left the handshake after the challenge: wrong job token (another "
                     "job's agent, a different --rdzv-token-file, or a stranger)");
            fprintf(stderr, "rendezvous: refused %s: %s\n", peer, p->why);
        }
        int k = type > 0 ? pending_step(p, type, b, n) : type;
        free(b);
        /* a step taken: what came with its frame is judged next (the
         * socket may not wake us again for bytes already read) */
        if (k < 0 || type == 0)
            return k;
    }
    char *e = NULL;
    int f = p3d_chan_fill(p->ch, &e);
    int type = p3d_chan_take(p->ch, body, len, &e);
    if (type < 0 || (type == 0 && f < 0)) {
        char why[sizeof p->why];
        snprintf(why, sizeof why, "after its handshake: %s", e ? e : "closed");
        if (type < 0)
            fprintf(stderr, "rendezvous: dropped %s %s\n", p->peer, p3d_tesc(why));
        rz_drop_pending(p, why, 0);
        type = -1;
    }
    free(e);
    return type;
}

void rz_refuse_joiner(pending *p, const char *who, const char *host, const char *verdict)
{
    fprintf(stderr, "%s: refused %s%s%s: %s\n", who, p->peer, host ? " " : "", host ? p3d_tesc(host) : "",
            p3d_tesc(verdict));
    p3d_tcp_refuse_chan(p->ch, verdict);
    rz_drop_pending(p, "refused", 0);
}

/* Protocol, version and job id: what any peer must show with its first
 * frame. NULL when fine, else the reason (in why). */
const char *rz_auth_verdict(const p3d_rdzv *r, uint32_t proto, const char *version, const char *job_id, char *why,
                            size_t cap)
{
    if (proto != P3D_WIRE_PROTO || !version || strcmp(version, P3D_VERSION) != 0) {
        snprintf(why, cap,
                 "par3drun version mismatch: the leader runs %s (wire protocol %d), this agent %s "
                 "(wire protocol %u): run the same par3drun on every node",
                 P3D_VERSION, P3D_WIRE_PROTO, version ? p3d_tesc(version) : "?", proto);
        return why;
    }
    if (job_id && job_id[0] && r->boot.job_id[0] && strcmp(job_id, r->boot.job_id)) {
        snprintf(why, cap, "job id '%s', the leader runs job '%s'", p3d_tesc(job_id), p3d_tesc(r->boot.job_id));
        return why;
    }
    return NULL;
}

/* ---- the tree's shape -------------------------------------------------------- */

int rz_tree_parent(int i, int k)
{
    return i > 0 ? (i - 1) / k : -1;
}

int rz_tree_nchildren(int i, int k, int n)
{
    long first = (long)k * i + 1;
    if (first >= n)
        return 0;
    long last = first + k - 1 < n - 1 ? first + k - 1 : n - 1;
    return (int)(last - first + 1);
}

/* Is rank x in the subtree of rank top? */
int rz_in_subtree(int x, int top, int k)
{
    while (x > top)
        x = rz_tree_parent(x, k);
    return x == top;
}

/* ---- sending down the tree ----------------------------------------------------- */

typedef struct treesend {
    p3d_chan *const *ch;
    const int *ranks;
    int n, left, failed;
    const p3d_wbuf *b;   /* the frame, its length counting the tag */
    unsigned char *tags; /* child i's tag: P3D_TAG_LEN bytes at i */
    size_t *off;
    p3d_tree_stats *st;
    char **err;
} treesend;

/* Sends what child i's socket takes now; 1 when its copy is all out, 0
 * when more waits, -1 (said) when the send failed. */
static int ts_push(treesend *t, int i)
{
    size_t all = t->b->len + P3D_TAG_LEN;
    while (t->off[i] < all) {
        size_t o = t->off[i];
        const unsigned char *p = o < t->b->len ? t->b->p + o : t->tags + (size_t)i * P3D_TAG_LEN + (o - t->b->len);
        size_t k = o < t->b->len ? t->b->len - o : all - o;
        ssize_t w = send(t->ch[i]->fd, p, k, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w <= 0) {
            p3d_err(t->err, "rendezvous: cannot send the placement to node[%d]: %s", t->ranks[i],
                    w < 0 ? strerror(errno) : "nothing sent");
            return -1;
        }
        t->off[i] += (size_t)w;
        if (t->st)
            t->st->bytes_sent += (uint64_t)w;
    }
    return 1;
}

static void ts_writable(p3d_loop *l, int fd, int ev, void *ctx)
{
    treesend *t = ctx;
    (void)ev;
    for (int i = 0; i < t->n; i++)
        if (t->ch[i] && t->ch[i]->fd == fd && t->off[i] < t->b->len + P3D_TAG_LEN) {
            int k = ts_push(t, i);
            if (k < 0) {
                t->failed = 1;
                p3d_loop_stop(l);
            } else if (k > 0) {
                p3d_loop_unwatch(l, fd);
                if (--t->left == 0)
                    p3d_loop_stop(l);
            }
            return;
        }
    p3d_loop_unwatch(l, fd);
}

int p3d_tree_send(p3d_chan *const *chans, const int *ranks, int n, const p3d_wbuf *frame, double timeout,
                  p3d_tree_stats *st, char **err)
{
    p3d_wbuf fb = {0};
    treesend t = {.ch = chans, .ranks = ranks, .n = n, .b = &fb, .st = st, .err = err};
    t.off = calloc((size_t)n + 1, sizeof *t.off);
    t.tags = calloc((size_t)n + 1, P3D_TAG_LEN);
    p3d_loop *l = p3d_loop_new();
    int rc = -1;
    double deadline = p3d_now() + timeout;
    p3d_wbuf_bytes(&fb, frame->p, frame->len);
    if (!t.off || !t.tags || !l || fb.oom || p3d_chan_reserve(&fb) < 0) {
        p3d_err(err, "out of memory");
        goto out;
    }
    /* each child's copy: the same frame, its own connection's tag */
    for (int i = 0; i < n; i++)
        if (chans[i] && p3d_chan_tag(chans[i], frame, t.tags + (size_t)i * P3D_TAG_LEN) < 0) {
            p3d_err(err, "rendezvous: cannot tag the placement for node[%d] (libcrypto)", ranks[i]);
            goto out;
        }
    /* every child's copy starts at once; the loop sends the rest as each
     * socket takes it */
    for (int i = 0; i < n; i++) {
        if (!chans[i])
            continue;
        int k = ts_push(&t, i);
        if (k < 0)
            goto out;
        if (k == 0) {
            if (p3d_loop_watch(l, chans[i]->fd, P3D_LOOP_OUT, ts_writable, &t) < 0) {
                p3d_err(err, "out of memory");
                goto out;
            }
            t.left++;
        }
    }
    while (t.left > 0 && !t.failed) {
        if (p3d_now() >= deadline) {
            int i = 0;
            while (i < n && (!chans[i] || t.off[i] >= fb.len + P3D_TAG_LEN))
                i++;
            p3d_err(err, "rendezvous: node[%d] did not take the placement within %g s", ranks[i < n ? i : 0], timeout);
            goto out;
        }
        if (p3d_loop_once(l, deadline) < 0) {
            p3d_err(err, "rendezvous: %s", strerror(errno));
            goto out;
        }
    }
    rc = t.failed ? -1 : 0;
out:
    p3d_loop_free(l);
    free(t.off);
    free(t.tags);
    p3d_wbuf_free(&fb);
    return rc;
}
