/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcpstore_net.c — the agent store's sockets (tcpstore.h): a listener
 * opened before any rank starts, connections accepted and served through
 * par3drun's event loop. Every fd is non-blocking and close-on-exec; a
 * read or write that would block waits for the loop. The store keeps no
 * deadline of its own: a rank's TCPStore client times out by itself, and
 * a rank that exits closes its connection.
 */
#include "tcpstore_int.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "p3d/base.h"

static void on_client(p3d_loop *l, int fd, int ev, void *ctx);

/* Sends what is queued for client id now; what does not go waits for the
 * loop (P3D_LOOP_OUT). A dead or broken client is dropped. */
static void flush(p3d_store *s, int id)
{
    st_client *c = s->cl[id];
    size_t n = 0;
    const unsigned char *b = p3d_store_output(s, id, &n);
    while (c && !c->dead && n > 0) {
        ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0) {
            c->dead = 1;
            break;
        }
        p3d_store_sent(s, id, (size_t)w);
        b = p3d_store_output(s, id, &n);
    }
    if (c && c->dead) {
        p3d_store_client_drop(s, id);
        return;
    }
    if (c && s->loop && p3d_loop_watch(s->loop, c->fd, P3D_LOOP_IN | (n ? P3D_LOOP_OUT : 0), on_client, c) < 0)
        p3d_store_client_drop(s, id);
}

/* Another client's query gave client id something to send: the loop
 * sends it (never from inside the query being served). */
static void on_output(p3d_store *s, int id)
{
    st_client *c = s->cl[id];
    if (c && c->fd >= 0 && s->loop)
        (void)p3d_loop_watch(s->loop, c->fd, P3D_LOOP_IN | P3D_LOOP_OUT, on_client, c);
}

static void on_client(p3d_loop *l, int fd, int ev, void *ctx)
{
    st_client *c = ctx;
    p3d_store *s = c->s;
    int id = c->id;
    (void)l;
    (void)fd;
    if (ev & P3D_LOOP_IN) {
        unsigned char buf[65536];
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n <= 0 || p3d_store_input(s, id, buf, (size_t)n) < 0) {
            p3d_store_client_drop(s, id); /* gone, or broke the protocol */
            return;
        }
    }
    flush(s, id);
}

static void on_accept(p3d_loop *l, int fd, int ev, void *ctx)
{
    p3d_store *s = ctx;
    (void)l;
    (void)ev;
    /* a few at a time, so that a flood of connections does not hold
     * the loop from everything else it serves */
    for (int k = 0; k < 64; k++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
            return;
        int id = p3d_store_client_new(s, cfd);
        if (id < 0) {
            close(cfd); /* the clients' bound: refused */
            continue;
        }
        if (p3d_loop_watch(s->loop, cfd, P3D_LOOP_IN, on_client, s->cl[id]) < 0)
            p3d_store_client_drop(s, id);
    }
}

/* The listening socket on host:port (close-on-exec, non-blocking), or -1
 * with *err. */
static int store_socket(const char *host, int port, int *bound, char **err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(host, ps, &hints, &ai), fd = -1, e = 0;
    if (g != 0) {
        p3d_err(err, "cannot resolve MASTER_ADDR '%s': %s", host, gai_strerror(g));
        return -1;
    }
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int on = 1;
        if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 ||
                        bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, 4096) < 0)) {
            e = errno;
            close(fd);
            fd = -1;
        } else if (fd < 0) {
            e = errno;
        }
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
    if (fd < 0)
        p3d_err(err, "cannot listen on MASTER_ADDR:MASTER_PORT %s:%d: %s%s", host, port, strerror(e),
                e == EADDRINUSE ? " (give another --master-port, or leave it out for a free one)" : "");
    return fd;
}

p3d_store *p3d_store_listen(const char *host, int port, int *bound, char **err)
{
    int fd = store_socket(host, port, bound, err);
    if (fd < 0)
        return NULL;
    p3d_store *s = p3d_store_new(NULL);
    if (!s) {
        close(fd);
        *err = strdup("out of memory");
        return NULL;
    }
    s->lfd = fd;
    s->on_output = on_output;
    return s;
}

int p3d_store_attach(p3d_store *s, p3d_loop *l)
{
    if (!s)
        return 0;
    for (size_t i = 0; s->loop && i < s->ncl; i++)
        if (s->cl[i] && s->cl[i]->fd >= 0)
            p3d_loop_unwatch(s->loop, s->cl[i]->fd);
    if (s->loop && s->lfd >= 0)
        p3d_loop_unwatch(s->loop, s->lfd);
    s->loop = l;
    if (!l)
        return 0;
    for (size_t i = 0; i < s->ncl; i++)
        if (s->cl[i] && s->cl[i]->fd >= 0 && p3d_loop_watch(l, s->cl[i]->fd, P3D_LOOP_IN, on_client, s->cl[i]) < 0)
            return -1;
    return s->lfd >= 0 ? p3d_loop_watch(l, s->lfd, P3D_LOOP_IN, on_accept, s) : 0;
}

int p3d_store_fds(const p3d_store *s, int *fds, int cap)
{
    int n = 0;
    if (!s)
        return 0;
    if (s->lfd >= 0 && n++ < cap)
        fds[n - 1] = s->lfd;
    for (size_t i = 0; i < s->ncl; i++)
        if (s->cl[i] && s->cl[i]->fd >= 0 && n++ < cap)
            fds[n - 1] = s->cl[i]->fd;
    return n;
}
