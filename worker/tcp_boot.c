/* SPDX-License-Identifier: BSD-3-Clause */
/* tcp_boot.c - the CPU backend's communicator (TCP between ranks): how
 * the ranks find and connect to each other, and the splits.
 *
 * Bootstrap: rank 0 binds MASTER_ADDR:MASTER_PORT (SO_REUSEADDR; the
 * launcher picked a free port; every listener binds one address, never
 * every interface: bind_ip), every other rank connects to MASTER_ADDR:MASTER_PORT with
 * retries until a deadline and says hello (job hash, rank, world size, its
 * own listening port).  Rank 0 answers with everyone's address.  The star
 * connections to rank 0 carry the world collectives (allgather, barrier)
 * used at start and end.  After the splits, tcp_world_connect() opens the
 * direct connections each communicator needs (ring neighbours only).
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

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Small messages (headers, 1F1B activations) must not wait for Nagle.
 * Socket buffer sizes are left to the kernel's autotuning: fixed 4 MiB
 * buffers measured no better on loopback (docs/worker.md) and would cap
 * the window on a real network. */
static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Bootstrap-time I/O on one socket with a deadline (the progress engine is
 * not running yet).  Returns 0, or -1 with errno (ETIMEDOUT, or EPIPE for
 * EOF). */
static int io_full(int fd, void *buf, size_t len, double deadline, int writing)
{
    char *p = buf;
    while (len) {
        double left = deadline - now_s();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pf = {fd, writing ? POLLOUT : POLLIN, 0};
        int n = poll(&pf, 1, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            continue;
        ssize_t k = writing ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            errno = EPIPE;
            return -1;
        }
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

static int listen_on(uint32_t ip, int port, int *out_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = ip};
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, SOMAXCONN) ||
        getsockname(fd, (struct sockaddr *)&a, &al)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *out_port = ntohs(a.sin_port);
    return fd;
}

/* MASTER_ADDR's IPv4 address (network order): 0, or -1 said. */
static int master_ip(const tcp_world *w, const p3dw_env *e, uint32_t *ip)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gai = getaddrinfo(e->master_addr, NULL, &hints, &ai);
    if (gai) {
        fprintf(stderr, "p3d-worker: rank %d: MASTER_ADDR '%s': %s\n", w->rank, e->master_addr, gai_strerror(gai));
        return -1;
    }
    *ip = ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(ai);
    return 0;
}

/* The address this rank listens on (network order), never every
 * interface: P3D_BIND_ADDR (an IPv4 address: par3drun sets it to its
 * node's listening address in a multi-node job, empty on one host), else
 * rank 0 MASTER_ADDR's own, another rank the local end of its route to
 * MASTER_ADDR (what rank 0 sees the rank's connection come from, and so
 * tells the others). 0, or -1 said. */
static int bind_ip(const tcp_world *w, const p3dw_env *e, uint32_t *ip)
{
    const char *b = getenv("P3D_BIND_ADDR");
    struct in_addr in;
    if (master_ip(w, e, ip) < 0)
        return -1;
    if (b && *b) {
        if (inet_pton(AF_INET, b, &in) == 1) {
            *ip = in.s_addr;
            return 0;
        }
        fprintf(stderr,
                "p3d-worker: P3D_BIND_ADDR '%s': expected an IPv4 address of this node (the bundled "
                "worker's TCP backend speaks IPv4)\n",
                b);
        return -1;
    }
    if (w->rank == 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)(e->master_port ? e->master_port : 9)),
                            .sin_addr.s_addr = *ip};
    socklen_t al = sizeof a;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0) {
        *ip = a.sin_addr.s_addr;
        rc = 0;
    } else {
        fprintf(stderr, "p3d-worker: rank %d: no route to MASTER_ADDR %s: %s\n", w->rank, e->master_addr,
                strerror(errno));
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Connects to ip:port (network-order ip) from this rank's own listening
 * address (from; rank 0 hands the address it sees to the others, so it
 * must be the one this rank listens on), retrying refused connections
 * until the deadline: the listener may not be up yet. */
static int connect_retry(uint32_t ip, int port, uint32_t from, double deadline)
{
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = from};
        a.sin_addr.s_addr = ip;
        if (from && bind(fd, (struct sockaddr *)&me, sizeof me) < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            tune(fd);
            return fd;
        }
        int e = errno;
        close(fd);
        if (e != ECONNREFUSED && e != EINTR && e != ETIMEDOUT && e != ENETUNREACH && e != EHOSTUNREACH) {
            errno = e;
            return -1;
        }
        if (now_s() >= deadline) {
            errno = e;
            return -1;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Accepts one connection before the deadline; -1 with ETIMEDOUT if none. */
static int accept_until(int lfd, double deadline, uint32_t *peer_ip)
{
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pf = {lfd, POLLIN, 0};
        int n = poll(&pf, 1, (int)(left * 1000) + 1);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n <= 0)
            continue;
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        int fd = accept4(lfd, (struct sockaddr *)&a, &al, SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED))
            continue;
        if (fd < 0)
            return -1;
        tune(fd);
        if (peer_ip)
            *peer_ip = a.sin_addr.s_addr;
        return fd;
    }
}

static void make_hello(const tcp_world *w, unsigned char h[24])
{
    put32(h, HELLO_MAGIC);
    put64(h + 4, w->job_hash);
    put32(h + 12, (uint32_t)w->rank);
    put32(h + 16, (uint32_t)w->size);
    put32(h + 20, w->port[w->rank]);
}

/* Checks a hello; returns the sender's rank or -1 with a message. */
static int check_hello(const tcp_world *w, const unsigned char h[24], int *port)
{
    if (get32(h) != HELLO_MAGIC || get64(h + 4) != w->job_hash) {
        fprintf(stderr,
                "p3d-worker: rank %d: ignoring a connection that is not from this job "
                "(wrong magic or P3D_JOB_ID)\n",
                w->rank);
        return -1;
    }
    uint32_t r = get32(h + 12), ws = get32(h + 16);
    if ((int)ws != w->size || r >= ws || (int)r == w->rank) {
        fprintf(stderr,
                "p3d-worker: rank %d: peer says rank %u of world %u, expected a rank "
                "< %d other than mine (are two jobs sharing MASTER_PORT?)\n",
                w->rank, r, ws, w->size);
        return -1;
    }
    *port = (int)get32(h + 20);
    return (int)r;
}

static void conn_reset(conn *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

void tcp_conn_close(conn *c, int err)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->closed = 1;
    c->err = err;
}

static void add_conn(tcp_world *w, int peer, int fd)
{
    set_nonblock(fd);
    w->c[peer].fd = fd;
}

void tcp_set_activity(tcp_world *w, const char *what)
{
    snprintf(w->activity, sizeof w->activity, "%s", what);
}

/* Rank 0 on MASTER_PORT, the others on a port of the system's choosing. */
static int open_listener(tcp_world *w, const p3dw_env *e, double deadline)
{
    int myport = 0;
    uint32_t ip = 0;
    if (bind_ip(w, e, &ip) < 0)
        return -1;
    if (w->rank == 0) {
        /* The launcher checked MASTER_PORT was free a moment ago; a TIME_WAIT
         * leftover is fine with SO_REUSEADDR, a real owner is retried briefly. */
        while ((w->listen_fd = listen_on(ip, e->master_port, &myport)) < 0) {
            if (errno != EADDRINUSE || now_s() >= deadline) {
                fprintf(stderr, "p3d-worker: rank 0: cannot listen on MASTER_ADDR:MASTER_PORT %s:%d: %s%s\n",
                        e->master_addr, e->master_port, strerror(errno),
                        errno == EADDRNOTAVAIL ? " (not an address of this node: set P3D_BIND_ADDR)" : "");
                return -1;
            }
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    } else if ((w->listen_fd = listen_on(ip, 0, &myport)) < 0) {
        fprintf(stderr, "p3d-worker: rank %d: cannot open a listening socket: %s\n", w->rank, strerror(errno));
        return -1;
    }
    w->port[w->rank] = (uint16_t)myport;
    w->addr[w->rank] = ip; /* connections to the others come from it */
    return 0;
}

/* Rank 0: every other rank's hello, with its address and port. */
static int root_accept_all(tcp_world *w, const p3dw_env *e, double deadline)
{
    int joined = 1;
    while (joined < w->size) {
        uint32_t ip;
        int fd = accept_until(w->listen_fd, deadline, &ip);
        if (fd < 0) {
            fprintf(stderr,
                    "p3d-worker: rank 0: only %d of %d ranks connected to port %d "
                    "within %.0f s; missing:",
                    joined, w->size, e->master_port, w->connect_timeout);
            for (int r = 1; r < w->size; r++)
                if (w->c[r].fd < 0)
                    fprintf(stderr, " %d", r);
            fprintf(stderr, "\n");
            return -1;
        }
        unsigned char h[24];
        int port, r = -1;
        if (io_full(fd, h, sizeof h, deadline, 0) == 0)
            r = check_hello(w, h, &port);
        if (r < 0 || w->c[r].fd >= 0) {
            if (r >= 0)
                fprintf(stderr, "p3d-worker: rank 0: rank %d connected twice\n", r);
            close(fd);
            continue;
        }
        w->c[r].fd = fd;
        w->addr[r] = ip;
        w->port[r] = (uint16_t)port;
        joined++;
    }
    return 0;
}

/* Rank 0: gathers the ranks and sends each the address table (tbl, 6
 * bytes a rank: IPv4 address, port big-endian). */
static int root_bootstrap(tcp_world *w, const p3dw_env *e, unsigned char *tbl, size_t tbl_len, double deadline)
{
    if (root_accept_all(w, e, deadline) < 0)
        return -1;
    for (int r = 0; r < w->size; r++) {
        memcpy(tbl + 6 * r, &w->addr[r], 4);
        tbl[6 * r + 4] = (unsigned char)(w->port[r] >> 8);
        tbl[6 * r + 5] = (unsigned char)w->port[r];
    }
    for (int r = 1; r < w->size; r++)
        if (io_full(w->c[r].fd, tbl, tbl_len, deadline, 1)) {
            fprintf(stderr, "p3d-worker: rank 0: sending the address table to rank %d: %s\n", r, strerror(errno));
            return -1;
        }
    return 0;
}

/* Any other rank: connects to rank 0, says hello, reads the table. */
static int peer_bootstrap(tcp_world *w, const p3dw_env *e, unsigned char *tbl, size_t tbl_len, double deadline)
{
    uint32_t ip;
    if (master_ip(w, e, &ip) < 0)
        return -1;
    int fd = connect_retry(ip, e->master_port, w->addr[w->rank], deadline);
    if (fd < 0) {
        fprintf(stderr, "p3d-worker: rank %d: no connection to rank 0 at %s:%d within %.0f s: %s\n", w->rank,
                e->master_addr, e->master_port, w->connect_timeout, strerror(errno));
        return -1;
    }
    w->c[0].fd = fd;
    unsigned char h[24];
    make_hello(w, h);
    if (io_full(fd, h, sizeof h, deadline, 1) || io_full(fd, tbl, tbl_len, deadline, 0)) {
        fprintf(stderr, "p3d-worker: rank %d: bootstrap with rank 0 at %s:%d failed: %s\n", w->rank, e->master_addr,
                e->master_port, errno == EPIPE ? "rank 0 closed the connection" : strerror(errno));
        return -1;
    }
    for (int r = 0; r < w->size; r++) {
        memcpy(&w->addr[r], tbl + 6 * r, 4);
        w->port[r] = (uint16_t)(tbl[6 * r + 4] << 8 | tbl[6 * r + 5]);
    }
    w->addr[0] = ip;
    return 0;
}

tcp_world *tcp_world_init(const p3dw_env *e, double connect_timeout, double op_timeout)
{
    tcp_world *w = calloc(1, sizeof *w);
    unsigned char *tbl = NULL;
    int ok = 0;
    if (!w)
        return NULL;
    w->rank = e->rank;
    w->size = e->world;
    w->op_timeout = op_timeout;
    w->connect_timeout = connect_timeout;
    w->listen_fd = -1;
    w->job_hash = fnv1a(e->job_id);
    w->next_tag = WORLD_TAG + 1;
    tcp_set_activity(w, "bootstrap");
    w->addr = calloc(w->size, sizeof *w->addr);
    w->port = calloc(w->size, sizeof *w->port);
    w->c = calloc(w->size, sizeof *w->c);
    w->need = calloc(w->size, 1);
    w->pfd = calloc(w->size, sizeof *w->pfd);
    w->pfd_peer = calloc(w->size, sizeof *w->pfd_peer);
    w->stage = malloc(STAGE_BYTES);
    if (!w->addr || !w->port || !w->c || !w->need || !w->pfd || !w->pfd_peer || !w->stage)
        goto out;
    for (int i = 0; i < w->size; i++)
        conn_reset(&w->c[i]);
    double deadline = now_s() + connect_timeout;
    if (open_listener(w, e, deadline) < 0)
        goto out;
    size_t tbl_len = (size_t)w->size * 6;
    if (!(tbl = calloc(1, tbl_len)))
        goto out;
    if ((w->rank == 0 ? root_bootstrap(w, e, tbl, tbl_len, deadline) : peer_bootstrap(w, e, tbl, tbl_len, deadline)) <
        0)
        goto out;
    for (int r = 0; r < w->size; r++)
        if (w->c[r].fd >= 0)
            set_nonblock(w->c[r].fd);
    ok = 1;
out:
    free(tbl);
    if (!ok) {
        tcp_world_free(w);
        w = NULL;
    }
    return w;
}

void tcp_world_free(tcp_world *w)
{
    if (!w)
        return;
    if (w->c)
        for (int r = 0; r < w->size; r++) {
            conn *c = &w->c[r];
            if (c->fd >= 0)
                close(c->fd);
            while (c->head) {
                msg *m = c->head;
                c->head = m->next;
                free(m);
            }
            free(c->cur);
        }
    if (w->listen_fd >= 0)
        close(w->listen_fd);
    free(w->addr);
    free(w->port);
    free(w->c);
    free(w->need);
    free(w->pfd);
    free(w->pfd_peer);
    free(w->stage);
    free(w);
}

int tcp_world_rank(const tcp_world *w)
{
    return w->rank;
}
void tcp_world_set_strict(tcp_world *w, int strict)
{
    w->strict = strict;
}
int tcp_world_size(const tcp_world *w)
{
    return w->size;
}

int tcp_comm_split(tcp_world *w, int colour, int key, tcp_comm *c)
{
    int rc = -1;
    int mine[2] = {colour, key}, *all = malloc(sizeof mine * (size_t)w->size);
    memset(c, 0, sizeof *c);
    if (!all || tcp_world_allgather(w, mine, all, sizeof mine))
        goto out;
    c->w = w;
    c->tag = w->next_tag++;
    c->colour = colour;
    c->members = malloc(sizeof *c->members * (size_t)w->size);
    if (!c->members)
        goto out;
    /* Members ordered by (key, rank): insertion sort, worlds are small. */
    for (int r = 0; r < w->size; r++) {
        if (all[2 * r] != colour)
            continue;
        int i = c->size++;
        while (i > 0 && all[2 * c->members[i - 1] + 1] > all[2 * r + 1]) {
            c->members[i] = c->members[i - 1];
            i--;
        }
        c->members[i] = r;
    }
    for (int i = 0; i < c->size; i++)
        if (c->members[i] == w->rank)
            c->rank = i;
    if (c->size > 1) {
        w->need[c->members[(c->rank + 1) % c->size]] = 1;
        w->need[c->members[(c->rank + c->size - 1) % c->size]] = 1;
    }
    rc = 0;
out:
    free(all);
    return rc;
}

void tcp_comm_connect_all(tcp_comm *c)
{
    for (int i = 0; i < c->size; i++)
        if (c->members[i] != c->w->rank)
            c->w->need[c->members[i]] = 1;
}

void tcp_comm_free(tcp_comm *c)
{
    free(c->members);
    c->members = NULL;
}

int tcp_world_connect(tcp_world *w)
{
    double deadline = now_s() + w->connect_timeout;
    int expect = 0;
    tcp_set_activity(w, "connecting to neighbours");
    /* The lower rank of a pair listens, the higher one connects: both know
     * the pair is needed (ring neighbourhood is symmetric).  Connecting
     * first never waits on the peer's accept() (the kernel completes it). */
    for (int p = 0; p < w->size; p++) {
        if (!w->need[p] || w->c[p].fd >= 0)
            continue;
        if (p > w->rank) {
            expect++;
            continue;
        }
        int fd = connect_retry(w->addr[p], w->port[p], w->addr[w->rank], deadline);
        unsigned char h[24];
        make_hello(w, h);
        if (fd < 0 || io_full(fd, h, sizeof h, deadline, 1)) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &w->addr[p], ip, sizeof ip);
            fprintf(stderr, "p3d-worker: rank %d: cannot connect to rank %d at %s:%d: %s\n", w->rank, p, ip, w->port[p],
                    strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        add_conn(w, p, fd);
    }
    while (expect > 0) {
        int fd = accept_until(w->listen_fd, deadline, NULL);
        if (fd < 0) {
            fprintf(stderr, "p3d-worker: rank %d: no connection from rank", w->rank);
            for (int p = w->rank + 1; p < w->size; p++)
                if (w->need[p] && w->c[p].fd < 0)
                    fprintf(stderr, " %d", p);
            fprintf(stderr, " within %.0f s\n", w->connect_timeout);
            return -1;
        }
        unsigned char h[24];
        int port, r = -1;
        if (io_full(fd, h, sizeof h, deadline, 0) == 0)
            r = check_hello(w, h, &port);
        if (r < 0 || r < w->rank || !w->need[r] || w->c[r].fd >= 0) {
            if (r >= 0)
                fprintf(stderr, "p3d-worker: rank %d: unexpected connection from rank %d\n", w->rank, r);
            close(fd);
            continue;
        }
        add_conn(w, r, fd);
        expect--;
    }
    return 0;
}
