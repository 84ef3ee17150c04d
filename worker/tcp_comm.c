/* tcp_comm.c - the CPU backend's communicator: TCP between ranks.
 *
 * Bootstrap: rank 0 binds MASTER_PORT (SO_REUSEADDR; the launcher picked a
 * free port), every other rank connects to MASTER_ADDR:MASTER_PORT with
 * retries until a deadline and says hello (job hash, rank, world size, its
 * own listening port).  Rank 0 answers with everyone's address.  The star
 * connections to rank 0 carry the world collectives (allgather, barrier)
 * used at start and end.  After the splits, tcp_world_connect() opens the
 * direct connections each communicator needs (ring neighbours only).
 *
 * Progress: every socket is non-blocking and every message is framed
 * (tag, length).  One routine, exchange(), moves data: it sends to one
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
 *
 * All-reduce: a ring of n members, the buffer cut into n segments;
 * n-1 reduce-scatter steps (send one segment to the right while receiving
 * and summing another from the left) then n-1 all-gather steps.  Each
 * member sends and receives 2(n-1)/n of the buffer, the least a ring can.
 */
#include "worker.h"

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

#define HELLO_MAGIC 0x70336477u /* "p3dw" */
#define WORLD_TAG 1u
/* --p2p strict: a receiver posts its receive by sending a clear-to-send
 * frame with the message's tag | CTS_BIT (no payload); a sender starts only
 * once it holds one.  One CTS admits one message. */
#define CTS_BIT 0x80000000u
/* Staging buffer of a summing receive: received bytes are added into the
 * destination piece by piece while still in cache. */
#define STAGE_BYTES (256u << 10)

typedef struct msg {
    struct msg *next;
    uint32_t tag;
    size_t len;
    char data[];
} msg;

typedef struct conn {
    int fd;           /* -1: none */
    int closed;       /* peer closed or reset: nothing more will come */
    int err;          /* errno of the failure, 0 for a clean EOF */
    msg *head, *tail; /* complete messages not yet received (owned) */
    unsigned char hdr[16];
    size_t hdr_got;
    msg *cur;         /* message being read into the inbox (owned) */
    size_t cur_got;
    /* The posted receive (exchange()): the next message with post_tag and
     * post_len goes to post_buf (borrowed, valid while posted), summed into
     * it when post_add is set; direct while its payload is being read. */
    int posted, post_done, direct;
    uint32_t post_tag;
    char *post_buf;
    size_t post_len, post_got, post_es;
    void (*post_add)(void *dst, const void *src, size_t n);
} conn;

struct tcp_world {
    int rank, size;
    double op_timeout, connect_timeout;
    int listen_fd;
    uint64_t job_hash;
    uint32_t *addr;   /* IPv4, network order, per rank */
    uint16_t *port;   /* listening port, host order, per rank */
    conn *c;          /* per rank */
    char *need;       /* ranks this process needs a direct connection to */
    uint32_t next_tag;
    char activity[64];
    struct pollfd *pfd;
    int *pfd_peer;
    char *stage;      /* STAGE_BYTES, for summing receives (owned) */
    int strict;       /* --p2p strict: sends wait for the matching receive */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t get64(const unsigned char *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
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

static int listen_on(int port, int *out_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
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

/* Connects to ip:port (network-order ip), retrying refused connections until
 * the deadline: the listener may not be up yet. */
static int connect_retry(uint32_t ip, int port, double deadline)
{
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = ip;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            tune(fd);
            return fd;
        }
        int e = errno;
        close(fd);
        if (e != ECONNREFUSED && e != EINTR && e != ETIMEDOUT && e != ENETUNREACH &&
            e != EHOSTUNREACH) {
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
        fprintf(stderr, "p3d-worker: rank %d: ignoring a connection that is not from this job "
                        "(wrong magic or P3D_JOB_ID)\n", w->rank);
        return -1;
    }
    uint32_t r = get32(h + 12), ws = get32(h + 16);
    if ((int)ws != w->size || r >= ws || (int)r == w->rank) {
        fprintf(stderr, "p3d-worker: rank %d: peer says rank %u of world %u, expected a rank "
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

static void conn_close(conn *c, int err)
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

tcp_world *tcp_world_init(const p3dw_env *e, double connect_timeout, double op_timeout)
{
    tcp_world *w = calloc(1, sizeof *w);
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
    int myport = 0;
    if (w->rank == 0) {
        /* The launcher checked MASTER_PORT was free a moment ago; a TIME_WAIT
         * leftover is fine with SO_REUSEADDR, a real owner is retried briefly. */
        while ((w->listen_fd = listen_on(e->master_port, &myport)) < 0) {
            if (errno != EADDRINUSE || now_s() >= deadline) {
                fprintf(stderr, "p3d-worker: rank 0: cannot listen on MASTER_PORT %d: %s\n",
                        e->master_port, strerror(errno));
                goto out;
            }
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    } else if ((w->listen_fd = listen_on(0, &myport)) < 0) {
        fprintf(stderr, "p3d-worker: rank %d: cannot open a listening socket: %s\n", w->rank,
                strerror(errno));
        goto out;
    }
    w->port[w->rank] = (uint16_t)myport;
    size_t tbl_len = (size_t)w->size * 6;
    unsigned char *tbl = calloc(1, tbl_len);
    if (!tbl)
        goto out;
    if (w->rank == 0) {
        int joined = 1;
        while (joined < w->size) {
            uint32_t ip;
            int fd = accept_until(w->listen_fd, deadline, &ip);
            if (fd < 0) {
                fprintf(stderr, "p3d-worker: rank 0: only %d of %d ranks connected to port %d "
                                "within %.0f s; missing:", joined, w->size, e->master_port,
                        connect_timeout);
                for (int r = 1; r < w->size; r++)
                    if (w->c[r].fd < 0)
                        fprintf(stderr, " %d", r);
                fprintf(stderr, "\n");
                free(tbl);
                goto out;
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
        for (int r = 0; r < w->size; r++) {
            memcpy(tbl + 6 * r, &w->addr[r], 4);
            tbl[6 * r + 4] = (unsigned char)(w->port[r] >> 8);
            tbl[6 * r + 5] = (unsigned char)w->port[r];
        }
        for (int r = 1; r < w->size; r++)
            if (io_full(w->c[r].fd, tbl, tbl_len, deadline, 1)) {
                fprintf(stderr, "p3d-worker: rank 0: sending the address table to rank %d: %s\n",
                        r, strerror(errno));
                free(tbl);
                goto out;
            }
    } else {
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        int gai = getaddrinfo(e->master_addr, NULL, &hints, &ai);
        if (gai) {
            fprintf(stderr, "p3d-worker: rank %d: MASTER_ADDR '%s': %s\n", w->rank,
                    e->master_addr, gai_strerror(gai));
            free(tbl);
            goto out;
        }
        uint32_t ip = ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr;
        freeaddrinfo(ai);
        int fd = connect_retry(ip, e->master_port, deadline);
        if (fd < 0) {
            fprintf(stderr, "p3d-worker: rank %d: no connection to rank 0 at %s:%d within %.0f s: %s\n",
                    w->rank, e->master_addr, e->master_port, connect_timeout, strerror(errno));
            free(tbl);
            goto out;
        }
        w->c[0].fd = fd;
        unsigned char h[24];
        make_hello(w, h);
        if (io_full(fd, h, sizeof h, deadline, 1) || io_full(fd, tbl, tbl_len, deadline, 0)) {
            fprintf(stderr, "p3d-worker: rank %d: bootstrap with rank 0 at %s:%d failed: %s\n",
                    w->rank, e->master_addr, e->master_port,
                    errno == EPIPE ? "rank 0 closed the connection" : strerror(errno));
            free(tbl);
            goto out;
        }
        for (int r = 0; r < w->size; r++) {
            memcpy(&w->addr[r], tbl + 6 * r, 4);
            w->port[r] = (uint16_t)(tbl[6 * r + 4] << 8 | tbl[6 * r + 5]);
        }
        w->addr[0] = ip;
    }
    free(tbl);
    for (int r = 0; r < w->size; r++)
        if (w->c[r].fd >= 0)
            set_nonblock(w->c[r].fd);
    ok = 1;
out:
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

int tcp_world_rank(const tcp_world *w) { return w->rank; }
void tcp_world_set_strict(tcp_world *w, int strict) { w->strict = strict; }
int tcp_world_size(const tcp_world *w) { return w->size; }

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
            conn_close(c, errno);
        return 1;
    }
    if (k == 0) {
        conn_close(c, 0);
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
                conn_close(c, errno);
            return;
        }
        if (k == 0) {
            conn_close(c, 0);
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
            conn_close(c, ENOMEM);
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
static int exchange(tcp_world *w, uint32_t tag, int to, const void *sbuf, size_t slen, int from,
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
                    conn_close(rc, errno);
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
                    conn_close(sc, errno);
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
            conn_close(rc, EPROTO);
        rc->posted = 0;
        rc->direct = 0;
    }
    return ret;
}

static int msg_send(tcp_world *w, int peer, uint32_t tag, const void *buf, size_t len)
{
    return exchange(w, tag, peer, buf, len, -1, NULL, 0, NULL, 1);
}

static int msg_recv(tcp_world *w, int peer, uint32_t tag, void *buf, size_t len)
{
    return exchange(w, tag, -1, NULL, 0, peer, buf, len, NULL, 1);
}

int tcp_world_send(tcp_world *w, int to, const void *buf, size_t len)
{
    return msg_send(w, to, WORLD_TAG, buf, len);
}

int tcp_world_recv(tcp_world *w, int from, void *buf, size_t len)
{
    return msg_recv(w, from, WORLD_TAG, buf, len);
}

int tcp_world_allgather(tcp_world *w, const void *mine, void *all, size_t each)
{
    char *a = all;
    memmove(a + (size_t)w->rank * each, mine, each);
    if (w->rank != 0)
        return msg_send(w, 0, WORLD_TAG, mine, each) ||
                       msg_recv(w, 0, WORLD_TAG, a, each * (size_t)w->size)
                   ? -1
                   : 0;
    for (int r = 1; r < w->size; r++)
        if (msg_recv(w, r, WORLD_TAG, a + (size_t)r * each, each))
            return -1;
    for (int r = 1; r < w->size; r++)
        if (msg_send(w, r, WORLD_TAG, a, each * (size_t)w->size))
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

int tcp_comm_split(tcp_world *w, int colour, int key, tcp_comm *c)
{
    int rc = -1;
    int mine[2] = {colour, key}, *all = malloc(sizeof mine * (size_t)w->size);
    memset(c, 0, sizeof *c);
    if (!all || tcp_world_allgather(w, mine, all, sizeof mine))
        goto out;
    c->w = w;
    c->tag = w->next_tag++;
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
        int fd = connect_retry(w->addr[p], w->port[p], deadline);
        unsigned char h[24];
        make_hello(w, h);
        if (fd < 0 || io_full(fd, h, sizeof h, deadline, 1)) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &w->addr[p], ip, sizeof ip);
            fprintf(stderr, "p3d-worker: rank %d: cannot connect to rank %d at %s:%d: %s\n",
                    w->rank, p, ip, w->port[p], strerror(errno));
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
                fprintf(stderr, "p3d-worker: rank %d: unexpected connection from rank %d\n",
                        w->rank, r);
            close(fd);
            continue;
        }
        add_conn(w, r, fd);
        expect--;
    }
    return 0;
}

static void add_f32(void *dst, const void *src, size_t n)
{
    float *d = dst;
    const float *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] += s[i];
}

static void add_f64(void *dst, const void *src, size_t n)
{
    double *d = dst;
    const double *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] += s[i];
}

/* Ring all-reduce (sum): n-1 reduce-scatter steps then n-1 all-gather
 * steps, segment i = [count*i/n, count*(i+1)/n).  Each step sends one
 * segment to the right while the segment from the left is received and
 * summed in place (exchange()): no temporary, no copy out of an inbox.
 * Each segment is summed once, in ring order (dst += incoming, the same
 * order whatever the chunking), then copied around: every member ends with
 * bitwise equal results, and the same ones on every run. */
int tcp_allreduce(tcp_comm *c, void *buf, size_t count, tcp_dtype t)
{
    int n = c->size;
    if (n == 1)
        return 0;
    size_t es = t == TCP_F32 ? sizeof(float) : sizeof(double);
    void (*add)(void *, const void *, size_t) = t == TCP_F32 ? add_f32 : add_f64;
    int right = c->members[(c->rank + 1) % n], left = c->members[(c->rank + n - 1) % n];
    char *b = buf;
#define SEG_OFF(i) (count * (size_t)(i) / (size_t)n)
#define SEG_LEN(i) (SEG_OFF((i) + 1) - SEG_OFF(i))
    for (int s = 0; s < n - 1; s++) {
        int sc = (c->rank - s + 2 * n) % n, rcv = (c->rank - s - 1 + 2 * n) % n;
        if (exchange(c->w, c->tag, right, b + SEG_OFF(sc) * es, SEG_LEN(sc) * es, left,
                     b + SEG_OFF(rcv) * es, SEG_LEN(rcv) * es, add, es))
            return -1;
    }
    for (int s = 0; s < n - 1; s++) {
        int sc = (c->rank + 1 - s + 2 * n) % n, rcv = (c->rank - s + 2 * n) % n;
        if (exchange(c->w, c->tag, right, b + SEG_OFF(sc) * es, SEG_LEN(sc) * es, left,
                     b + SEG_OFF(rcv) * es, SEG_LEN(rcv) * es, NULL, es))
            return -1;
    }
#undef SEG_OFF
#undef SEG_LEN
    return 0;
}

int tcp_sendrecv(tcp_comm *c, int to, const void *sbuf, size_t slen, int from, void *rbuf,
                 size_t rlen)
{
    return exchange(c->w, c->tag, to >= 0 ? c->members[to] : -1, sbuf, slen,
                    from >= 0 ? c->members[from] : -1, rbuf, rlen, NULL, 1);
}
