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
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdzv.h"

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

p3d_store *p3d_store_listen(const char *host, int port, int *bound, char **err)
{
    int fd = p3d_tcp_listen(host, port, bound, err);
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
