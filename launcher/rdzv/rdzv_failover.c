/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_failover.c — the failover port and the dial to a successor
 * (rdzv_failover.h). Each stranger has a fixed buffer of
 * P3D_FGATE_FRAME_MAX + 4 bytes and only ever reads up to the end of the
 * one frame it announced; a longer announcement is refused before its
 * body is read.
 */
#include "rdzv.h"
#include "rdzv_tcp_internal.h"

#include "loop.h"
#include "p3d/base.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct stranger {
    int fd;
    double since;
    size_t len;
    unsigned char buf[P3D_FGATE_FRAME_MAX + 4];
} stranger;

struct p3d_fgate {
    int lfd;
    int maxpend;
    stranger *s;
    int dropped;
    char why[200];
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Every interface, IPv6 and IPv4 at once: one AF_INET6 socket with
 * IPV6_V6ONLY off (IPv4 peers arrive as ::ffff:a.b.c.d). -1 where the
 * host has no IPv6 (the caller then listens on 0.0.0.0). */
static int listen_dual(int *port)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int off = 0, on = 1;
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    socklen_t al = sizeof a;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(fd, 4096) < 0 || getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin6_port);
    return fd;
}

int p3d_tcp_listen_any(int *port, char **err)
{
    int fd = listen_dual(port);
    if (fd < 0 && (fd = p3d_tcp_listen("0.0.0.0", 0, port, err)) >= 0)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

p3d_fgate *p3d_fgate_open(const char *host, int maxpend, int *port, char **err)
{
    if (maxpend < 1 || maxpend > 65536) {
        p3d_err(err, "failover: %d connection slots: 1..65536 expected", maxpend);
        return NULL;
    }
    p3d_fgate *g = calloc(1, sizeof *g);
    if (g)
        g->s = calloc((size_t)maxpend, sizeof *g->s);
    if (!g || !g->s) {
        free(g);
        p3d_err(err, "out of memory");
        return NULL;
    }
    g->maxpend = maxpend;
    for (int i = 0; i < maxpend; i++)
        g->s[i].fd = -1;
    char *e = NULL;
    g->lfd = host ? -1 : listen_dual(port);
    if (g->lfd < 0)
        g->lfd = p3d_tcp_listen(host ? host : "0.0.0.0", 0, port, &e);
    if (g->lfd < 0) {
        p3d_err(err, "failover port: %s", e ? e : "cannot listen");
        free(e);
        free(g->s);
        free(g);
        return NULL;
    }
    return g;
}

int p3d_fgate_fd(const p3d_fgate *g)
{
    return g ? g->lfd : -1;
}

static void drop(p3d_fgate *g, stranger *s, int verbose, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void drop(p3d_fgate *g, stranger *s, int verbose, const char *fmt, ...)
{
    char peer[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->why, sizeof g->why, fmt, ap);
    va_end(ap);
    if (verbose) {
        rz_peer_name(s->fd, peer, sizeof peer);
        fprintf(stderr, "par3drun: failover port: dropped %s: %s\n", peer, g->why);
    }
    close(s->fd);
    s->fd = -1;
    s->len = 0;
    g->dropped++;
}

static void accept_all(p3d_fgate *g, double now, int verbose)
{
    for (;;) {
        int c = accept4(g->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return;
        int slot = -1;
        for (int i = 0; i < g->maxpend && slot < 0; i++)
            if (g->s[i].fd < 0)
                slot = i;
        if (slot < 0) {
            slot = 0;
            for (int i = 1; i < g->maxpend; i++)
                if (g->s[i].since < g->s[slot].since)
                    slot = i;
            drop(g, &g->s[slot], verbose, "evicted for a newer connection (all %d slots taken)", g->maxpend);
        }
        g->s[slot].fd = c;
        g->s[slot].since = now;
        g->s[slot].len = 0;
    }
}

/* Reads what s sent, up to the end of its one frame. 1: complete; 0: not
 * yet; -1: dropped. */
static int fill(p3d_fgate *g, stranger *s, int verbose)
{
    for (;;) {
        size_t want = 4;
        if (s->len >= 4) {
            uint32_t n = be32(s->buf);
            if (n < 1 || n > P3D_FGATE_FRAME_MAX) {
                drop(g, s, verbose, "its first frame announces %u bytes: a reconnect is 1..%d", n,
                     P3D_FGATE_FRAME_MAX);
                return -1;
            }
            want = 4 + (size_t)n;
        }
        if (s->len >= want && s->len > 4)
            return 1;
        ssize_t k = recv(s->fd, s->buf + s->len, want - s->len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k <= 0) {
            drop(g, s, verbose, "%s before its reconnect frame was whole", k < 0 ? strerror(errno) : "closed");
            return -1;
        }
        s->len += (size_t)k;
    }
}

int p3d_fgate_waiting(const p3d_fgate *g)
{
    int k = 0;
    for (int i = 0; g && i < g->maxpend; i++)
        k += g->s[i].fd >= 0;
    return k;
}

int p3d_fgate_take(p3d_fgate *g, const char *key, int nnodes, double now, double *next, int verbose,
                   p3d_rejoin *out, int *fd)
{
    accept_all(g, now, verbose);
    for (int i = 0; i < g->maxpend; i++) {
        stranger *s = &g->s[i];
        if (s->fd < 0)
            continue;
        int f = fill(g, s, verbose);
        if (f < 0)
            continue;
        if (f == 0) {
            if (now - s->since >= P3D_FGATE_DEADLINE)
                drop(g, s, verbose, "no reconnect frame within %g s", P3D_FGATE_DEADLINE);
            else if (next && s->since + P3D_FGATE_DEADLINE < *next)
                *next = s->since + P3D_FGATE_DEADLINE;
            continue;
        }
        char *e = NULL;
        size_t n = be32(s->buf);
        if (p3d_rejoin_open(s->buf[4], s->buf + 5, n - 1, key, nnodes, out, &e) < 0) {
            drop(g, s, verbose, "%s", e ? e : "not a reconnect");
            free(e);
            continue;
        }
        *fd = s->fd;
        s->fd = -1;
        s->len = 0;
        rz_set_nonblock(*fd, 0);
        return 1;
    }
    return 0;
}

int p3d_fgate_dropped(const p3d_fgate *g, const char **last_why)
{
    if (last_why)
        *last_why = g->why;
    return g->dropped;
}

void p3d_fgate_close(p3d_fgate *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->maxpend; i++)
        if (g->s[i].fd >= 0)
            close(g->s[i].fd);
    if (g->lfd >= 0)
        close(g->lfd);
    free(g->s);
    free(g);
}

/* One connect, bounded by deadline: a candidate that refuses is gone (its
 * process ended), so it is not tried again (unlike the rendezvous, which
 * waits for a leader still starting): the caller moves on to the next. */
static int dial_once(const char *host, int port, double deadline, const char *who, char **err)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0)
        return p3d_err(err, "failover: cannot resolve %s: %s", who, gai_strerror(g));
    int fd = -1, e = ECONNREFUSED;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
            e = errno;
            close(fd);
            fd = -1;
            continue;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        int w = p3d_wait_fd(fd, P3D_LOOP_OUT, deadline);
        if (w <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            e = w == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return p3d_err(err, "failover: cannot reach %s: %s", who, strerror(e));
    rz_set_nonblock(fd, 0);
    rz_keepalive(fd);
    return fd;
}

int p3d_tcp_dial(const char *host, int port, double deadline)
{
    char who[320], *e = NULL;
    snprintf(who, sizeof who, "%s:%d", host, port);
    int fd = dial_once(host, port, deadline, who, &e);
    free(e);
    return fd;
}

int p3d_failover_dial(const p3d_successor *c, const p3d_rejoin *j, const char *key, double deadline, char **err)
{
    char who[320];
    p3d_wbuf w = {0};
    snprintf(who, sizeof who, "the successor node rank %d (%s:%d)", c->node_rank, c->addr, c->port);
    if (p3d_rejoin_frame(j, key, &w) < 0) {
        p3d_wbuf_free(&w);
        return p3d_err(err, "failover: cannot build the reconnect frame for %s", who);
    }
    int fd = dial_once(c->addr, c->port, deadline, who, err);
    if (fd >= 0 && p3d_frame_write(fd, &w, err) < 0) {
        close(fd);
        fd = -1;
    }
    p3d_wbuf_free(&w);
    return fd;
}

int p3d_failover_answer(int fd, const char *key, double deadline, p3d_rejoined *out, char **err)
{
    unsigned char buf[P3D_FGATE_FRAME_MAX + 4];
    size_t len = 0, want = 4;
    while (len < want) {
        int w = p3d_wait_fd(fd, P3D_LOOP_IN, deadline);
        if (w <= 0)
            return p3d_err(err, "failover: no answer from the successor by the deadline");
        ssize_t k = recv(fd, buf + len, want - len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return p3d_err(err, "failover: the successor %s", k < 0 ? strerror(errno) : "closed the connection");
        len += (size_t)k;
        if (len == 4) {
            uint32_t n = be32(buf);
            if (n < 1 || n > P3D_FGATE_FRAME_MAX)
                return p3d_err(err, "failover: the successor's answer announces %u bytes: 1..%d expected", n,
                               P3D_FGATE_FRAME_MAX);
            want = 4 + n;
        }
    }
    return p3d_rejoined_open(buf[4], buf + 5, want - 5, key, out, err);
}
