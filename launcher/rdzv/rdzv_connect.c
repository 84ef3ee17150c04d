/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_connect.c — an agent reaching the leader or its tree parent: one
 * non-blocking connect bounded by the loop's wait, retried with a growing
 * pause (a retry timer, not a sleep) until the rendezvous deadline, with
 * a progress line now and then.
 */
#include "rdzv_tcp_internal.h"

#include "loop.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int connect_once(const struct addrinfo *a, double deadline)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        double now = p3d_now(), until = deadline < now + 5 ? deadline : now + 5; /* a silent host: try again */
        int pr = p3d_wait_fd(fd, P3D_LOOP_OUT, until > now ? until : now);
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (pr <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            close(fd);
            errno = pr == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            return -1;
        }
    }
    rz_set_nonblock(fd, 0);
    rz_keepalive(fd);
    return fd;
}


/* Connects to host:port, retrying until the deadline. The fd, or -1 with
 * *err (who: "the leader (node rank 0)" or "the tree parent node[3]"). */
int rz_connect_retry(const char *host, int port, double t0, double deadline, double timeout, const char *who, int me,
                     int chatty, char **err)
{
    int fd = -1, last = 0;
    double next_note = p3d_now() + PROGRESS_EVERY;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    double backoff = 0.020;
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        int g = getaddrinfo(host, ps, &hints, &ai);
        if (g == 0) {
            for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
                fd = connect_once(a, deadline);
                if (fd < 0)
                    last = errno;
            }
            freeaddrinfo(ai);
        } else {
            last = ENOENT;
        }
        if (fd >= 0)
            return fd;
        double now = p3d_now();
        if (now >= deadline) {
            p3d_err(err, "rendezvous: cannot reach %s at %s:%d within %g s: %s", who, host, port, timeout,
                    g ? gai_strerror(g) : strerror(last));
            return -1;
        }
        if (chatty && now >= next_note) {
            fprintf(stderr, "rendezvous: node[%d] waiting for %s at %s:%d (%.0f s of %g s: %s)\n", me, who, host, port,
                    now - t0, timeout, g ? gai_strerror(g) : strerror(last));
            next_note = now + PROGRESS_EVERY;
        }
        /* the retry timer: nothing else to wait for yet */
        double at = p3d_now() + backoff;
        p3d_wait_fd(-1, 0, at < deadline ? at : deadline);
        if (backoff < 0.5)
            backoff *= 2;
    }
}
