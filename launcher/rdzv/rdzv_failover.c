/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_failover.c — the failover port and the dial to a successor
 * (rdzv.h). A stranger is held like the rendezvous' pending peers
 * (rdzv_tcp.c): small handshake frames, a deadline, the oldest evicted
 * when the slots are full; only once it proved the job key is its
 * reconnect frame read.
 */
#include "rdzv.h"
#include "rdzv_tcp_internal.h"

#include "loop.h"
#include "p3d/base.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

struct p3d_fgate {
    int lfd;
    int maxpend;
    pending *s; /* the strangers: accepted, not yet rejoined */
    int dropped;
    char why[200];
    char key[256]; /* the job key the handshake proves */
};

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
    g->lfd = host && *host ? p3d_tcp_listen(host, 0, port, &e) : -1;
    if (g->lfd < 0) {
        p3d_err(err, "failover port: %s", e ? e : "cannot listen");
        free(e);
        free(g->s);
        free(g);
        return NULL;
    }
    return g;
}

void p3d_fgate_set_key(p3d_fgate *g, const char *key)
{
    if (g)
        snprintf(g->key, sizeof g->key, "%s", key ? key : "");
}

int p3d_fgate_fd(const p3d_fgate *g)
{
    return g ? g->lfd : -1;
}

static void drop(p3d_fgate *g, pending *s, int verbose, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void drop(p3d_fgate *g, pending *s, int verbose, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->why, sizeof g->why, fmt, ap);
    va_end(ap);
    if (verbose)
        fprintf(stderr, "par3drun: failover port: dropped %s: %s\n", s->peer, g->why);
    if (s->fd >= 0)
        rz_drop_pending(s, g->why, 0);
    else
        snprintf(s->why, sizeof s->why, "%s", g->why);
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
        rz_peer_name(c, g->s[slot].peer, sizeof g->s[slot].peer);
    }
}

int p3d_fgate_waiting(const p3d_fgate *g)
{
    int k = 0;
    for (int i = 0; g && i < g->maxpend; i++)
        k += g->s[i].fd >= 0;
    return k;
}

int p3d_fgate_take(p3d_fgate *g, int nnodes, double now, double *next, int verbose, p3d_rejoin *out, p3d_chan **ch)
{
    accept_all(g, now, verbose);
    for (int i = 0; i < g->maxpend; i++) {
        pending *s = &g->s[i];
        if (s->fd < 0)
            continue;
        unsigned char *body = NULL;
        size_t len = 0;
        int type = rz_pending_auth(s, g->key, P3D_LINK_GATE, &body, &len);
        if (type < 0) {
            drop(g, s, verbose, "%s", s->why[0] ? s->why : "its handshake failed");
            continue;
        }
        if (type == 0) {
            if (now - s->since >= P3D_FGATE_DEADLINE)
                drop(g, s, verbose, "no reconnect frame within %g s", P3D_FGATE_DEADLINE);
            else if (next && s->since + P3D_FGATE_DEADLINE < *next)
                *next = s->since + P3D_FGATE_DEADLINE;
            continue;
        }
        char *e = NULL;
        int bad = p3d_rejoin_open(type, body, len, nnodes, out, &e) < 0;
        free(body);
        if (bad) {
            drop(g, s, verbose, "%s", e ? e : "not a reconnect");
            free(e);
            continue;
        }
        *ch = s->ch;
        s->ch = NULL;
        s->fd = -1;
        rz_drop_pending(s, "rejoined", 0);
        rz_set_nonblock((*ch)->fd, 0);
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
        rz_drop_pending(&g->s[i], "closed", 0);
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

p3d_chan *p3d_failover_dial(const p3d_successor *c, const p3d_rejoin *j, const char *key, double deadline,
                            double hs_deadline, char **err)
{
    char who[320];
    p3d_wbuf w = {0};
    p3d_chan *ch = NULL;
    snprintf(who, sizeof who, "the successor node rank %d (%s:%d)", c->node_rank, c->addr, c->port);
    if (p3d_rejoin_frame(j, &w) < 0) {
        p3d_wbuf_free(&w);
        p3d_err(err, "failover: cannot build the reconnect frame for %s", who);
        return NULL;
    }
    /* a candidate that resets the connection during the handshake (its
     * slots were full of strangers a moment ago) is tried again while
     * time is left; one that does not prove the job key is not */
    for (int tries = 0; !ch && tries < 3 && p3d_now() < deadline; tries++) {
        char *e = NULL;
        int refused = 0;
        int fd = dial_once(c->addr, c->port, deadline, who, err);
        if (fd < 0)
            break;
        /* the successor answers the handshake from its loop, which runs
         * once its takeover has begun: later than the kernel takes the
         * connection */
        ch = p3d_chan_handshake(fd, key, 0, P3D_LINK_GATE, hs_deadline > deadline ? hs_deadline : deadline, who,
                                &refused, &e);
        if (!ch) {
            close(fd);
            p3d_err(err, "failover: %s: %s", who, e ? e : "the handshake failed");
        }
        free(e);
        if (!ch && refused)
            break;
    }
    if (ch && p3d_chan_send(ch, &w, P3D_FATE_STALL, err) < 0) {
        p3d_chan_free(ch);
        ch = NULL;
    }
    p3d_wbuf_free(&w);
    return ch;
}

int p3d_failover_answer(p3d_chan *ch, double deadline, p3d_rejoined *out, char **err)
{
    unsigned char *body = NULL;
    size_t len = 0;
    char *e = NULL;
    int type = p3d_chan_read(ch, deadline, &body, &len, &e);
    int rc = type > 0 ? p3d_rejoined_open(type, body, len, out, err)
                      : p3d_err(err, "failover: the successor: %s",
                                type == 0 ? "closed the connection"
                                : e       ? e
                                          : "?");
    free(body);
    free(e);
    return rc;
}
