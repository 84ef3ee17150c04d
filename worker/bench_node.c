/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_node.c - --bench-node: the short benchmark par3drun --preflight
 * runs on every node before the placement (docs/launch.md, "Preflight").
 *
 * With a usable GPU (--backend cuda, or auto where one is usable) the
 * compute, memory and link figures are the GPUs' (cuda/cuda_bench.cu):
 *   preflight backend=cuda gpus=N gflops=G mem_gbps=M [p2p_gbps=L]
 *             gemm_maxrel=E [tcp_out_mbps=O tcp_in_mbps=I] links=measured|none
 * G and M of the slowest GPU, L of the slowest peer link of the node's
 * fastest class (NVLink where there is NVLink); a GPU whose SGEMM
 * disagrees with the CPU reference fails the benchmark.
 * Otherwise four figures from the CPU, one line on stdout:
 *   preflight backend=cpu gflops=G mem_gbps=M tcp_out_mbps=O tcp_in_mbps=I links=skipped
 * - compute: the CPU backend's gemm (the one training uses), GFLOP/s;
 * - memory: memcpy of a 16 MiB buffer, GB/s copied;
 * - TCP: this node streams to the next one of the ring (--bench-tcp-peer)
 *   while it takes the previous one's stream on the listening socket that
 *   par3drun handed over (--bench-tcp-fd); MB/s as each receiver saw it,
 *   the incoming one measured here, the outgoing one reported back by the
 *   receiver at the end of its stream;
 * - the links inside an NVLink domain: skipped on the CPU backend (said
 *   on the line: "links=skipped").
 * Compute and memory are timed in this thread's CPU time and the best of
 * several repetitions is kept: emulated nodes share one host, and wall time
 * would measure the neighbours (a throttled CPU still takes more CPU time
 * for the same work). Each figure gets about --bench-seconds.
 *
 * --bench-serial (with --bench-tcp-slot I:N:T): compute and memory run in
 * slot I as well, each 2 x --bench-seconds + 0.25 s, after the ring's last
 * slot: one node at a time for nodes that share a host.
 * --bench-tcp-only: the TCP figures alone (a multi-node job measured
 * compute and memory before its rendezvous and runs the ring once the
 * leader named each node's next one); the ring then has all of
 * --connect-timeout, and the line has no gflops or mem_gbps.
 *
 * P3D_WORKER_BENCH_SLOWDOWN=F[:NODE] (a test knob, read only here): every
 * repetition's work is done F times (an integer 1..1000000) and the TCP loop
 * idles F-1 times as long as it worked, on every node or only on node NODE
 * ($P3D_NODE): a slow node for the preflight's tests.
 * P3D_WORKER_BENCH_TCP_SLOWDOWN=F[:NODE], the same for the TCP loop alone
 * (a node with a slow NIC and healthy cores). */
#include "worker.h"
#include "bench_ring_auth.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}
static double wall_now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* The knob for this node: 1 when unset or for another node; 0 on a
 * malformed value (message printed). */
static int slowdown(const char *var)
{
    const char *s = getenv(var), *node = getenv("P3D_NODE");
    int f = 0, n = 0;
    char name[128] = "";
    if (!s || !*s)
        return 1;
    if (sscanf(s, "%d%n", &f, &n) != 1 || f < 1 || f > 1000000 ||
        (s[n] && (s[n] != ':' || sscanf(s + n + 1, "%127s", name) != 1))) {
        fprintf(stderr, "p3d-worker: %s='%s': expected F or F:NODE, F an integer 1..1000000 (a test knob)\n", var, s);
        return 0;
    }
    if (name[0] && (!node || strcmp(node, name)))
        return 1;
    return f;
}

/* The best repetition's CPU seconds for one unit of work (done f times),
 * repeated for about budget seconds of CPU time, 3 times at least. */
static double best_of(void (*work)(void *), void *ctx, int f, double budget)
{
    double best = 1e30, t_end = cpu_now() + budget;
    for (int rep = 0; rep < 3 || cpu_now() < t_end; rep++) {
        double t0 = cpu_now();
        for (int k = 0; k < f; k++)
            work(ctx);
        double t = cpu_now() - t0;
        if (t < best)
            best = t;
        if (rep > 1000)
            break;
    }
    return best;
}

typedef struct gemm_ctx {
    int n;
    float *a, *b, *c;
} gemm_ctx;

static void gemm_once(void *p)
{
    gemm_ctx *g = p;
    p3dw_cpu_ops.gemm(0, 0, g->n, g->n, g->n, g->a, g->b, g->c, 0.0f);
}

typedef struct copy_ctx {
    size_t n;
    char *a, *b;
} copy_ctx;

static void copy_once(void *p)
{
    copy_ctx *c = p;
    memcpy(c->b, c->a, c->n);
    __asm__ __volatile__("" ::"r"(c->b) : "memory"); /* the copy is used */
}

/* ---- TCP on the ring ------------------------------------------------- */

static int connect_peer(const char *peer, double deadline)
{
    char host[256];
    const char *colon = strrchr(peer, ':');
    if (!colon || colon == peer || (size_t)(colon - peer) >= sizeof host || !colon[1]) {
        fprintf(stderr, "p3d-worker: --bench-tcp-peer '%s': expected HOST:PORT\n", peer);
        return -1;
    }
    memcpy(host, peer, (size_t)(colon - peer));
    host[colon - peer] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int e = getaddrinfo(host, colon + 1, &hints, &ai);
    if (e) {
        fprintf(stderr, "p3d-worker: --bench-tcp-peer '%s': %s\n", peer, gai_strerror(e));
        return -1;
    }
    int fd = -1;
    while (fd < 0 && wall_now() < deadline) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            int e = errno;
            close(fd);
            fd = -1;
            errno = e;
            /* the next node listened before anyone was told its port
             * (par3drun opens it first): refused means it is gone */
            if (e == ECONNREFUSED)
                break;
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (fd < 0)
        fprintf(stderr, "p3d-worker: --bench-tcp-peer %s: cannot connect: %s\n", peer, strerror(errno));
    freeaddrinfo(ai);
    return fd;
}

/* The incoming stream is measured in windows of this many seconds and the
 * best window counts: emulated nodes share the host's cores, and a stream
 * that waits for a core measures the neighbours, not the link (a link that
 * is slow all along is slow in every window). */
#define TCP_WINDOW 0.025

/* How long the previous node's connection may take to come: every node
 * connects before anything else, so only a node whose benchmark failed to
 * start, or that hangs, takes longer. */
#define ACCEPT_WAIT 10.0

/* A link whose peer went away (it failed, or hit its own bound and was
 * ended): the link counts as 0 MB/s, this node goes on. */
static void link_warn(const char *what, const char *peer)
{
    fprintf(stderr, "p3d-worker: --bench-node: cannot %s (ring peer %s): %s; that link counts as 0 MB/s\n", what, peer,
            errno ? strerror(errno) : "the connection ended");
}

static void in_lost(int *in_done, int *figure_sent, double *in_mbps, const char *what, const char *peer)
{
    link_warn(what, peer);
    *in_mbps = 0;
    *in_done = *figure_sent = 1;
}

static void out_lost(double *fig, size_t *fig_got, int *out_shut, const char *what, const char *peer)
{
    link_warn(what, peer);
    *fig = 0;
    *fig_got = sizeof *fig;
    *out_shut = 1;
}

/* The port of HOST:PORT (connect_peer checked the form), and of the
 * listening socket: the ring's proofs are bound to the port. */
static int peer_port(const char *peer)
{
    const char *c = strrchr(peer, ':');
    return c ? atoi(c + 1) : 0;
}

static int listen_port(int lfd)
{
    struct sockaddr_storage a;
    socklen_t al = sizeof a;
    if (getsockname(lfd, (struct sockaddr *)&a, &al) < 0)
        return 0;
    return a.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&a)->sin6_port)
                                   : ntohs(((struct sockaddr_in *)&a)->sin_port);
}

/* How long a connection to the ring's port may take to prove the job key:
 * the previous node answers our challenge from its poll loop at once, so
 * only a stranger (or an idle connection) takes longer. */
#define RING_PROOF_WAIT 2.0

enum { RING_CHUNK = 256 * 1024 };

/* Both streams of this node while the ring runs. */
typedef struct ring {
    char *buf; /* RING_CHUNK bytes to send, or received */
    const char *peer;
    const char *key; /* the job key, or NULL: an unkeyed ring (one host's loopback) */
    int lfd, in, out, my_port;
    unsigned char nonce_a[P3DW_RING_NONCE]; /* the next node's challenge, when keyed */
    size_t na_got;
    unsigned char want[32];             /* the next node's answer to our hello */
    unsigned char go[P3DW_RING_ANSWER]; /* what it sent so far: its answer, then 'g' */
    size_t go_len, go_got;
    int go_seen, out_shut, in_done, figure_sent;
    p3dw_ring_cand pool[P3DW_RING_PENDING]; /* connections to our port still proving the key */
    double seconds, send_at, t_first, t_send_end;
    size_t in_bytes, win_bytes, fig_got;
    double win_t, best;
    double t_work;   /* when this turn's work began (after its poll) */
    double fig;      /* the next node's figure for our outgoing stream */
    double *in_mbps; /* ours for the incoming one */
} ring;

/* Bytes of the incoming stream: measured in windows, the best counts; at
 * its end the figure goes back to the previous node. */
static void ring_recv_stream(ring *g)
{
    ssize_t r = recv(g->in, g->buf, RING_CHUNK, MSG_DONTWAIT);
    if (r > 0) {
        double tn = wall_now();
        if (!g->t_first)
            g->t_first = g->win_t = tn;
        g->in_bytes += (size_t)r;
        g->win_bytes += (size_t)r;
        if (tn - g->win_t >= TCP_WINDOW) { /* a window is over: the best so far? */
            double rate = g->win_bytes / (tn - g->win_t) / 1e6;
            if (rate > g->best)
                g->best = rate;
            g->win_t = tn;
            g->win_bytes = 0;
        }
    } else if (r == 0) {
        double t = wall_now() - (g->t_first ? g->t_first : wall_now());
        /* the best window; the whole stream when it had none */
        *g->in_mbps = g->best > 0 ? g->best : t > 0 ? g->in_bytes / t / 1e6 : 0;
        g->in_done = 1;
        if (send(g->in, g->in_mbps, sizeof *g->in_mbps, MSG_NOSIGNAL) != (ssize_t)sizeof *g->in_mbps)
            link_warn("send the previous node its figure", g->peer);
        g->figure_sent = 1;
    } else if (errno != EAGAIN && errno != EINTR) {
        in_lost(&g->in_done, &g->figure_sent, g->in_mbps, "receive the previous node's stream", g->peer);
    }
}

/* The next node's challenge on our outgoing connection, then our hello
 * (64 bytes fit a fresh socket's buffer). 1 when the link is lost. */
static int ring_answer_challenge(ring *g)
{
    unsigned char hello[P3DW_RING_HELLO];
    ssize_t r = recv(g->out, g->nonce_a + g->na_got, sizeof g->nonce_a - g->na_got, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        out_lost(&g->fig, &g->fig_got, &g->out_shut, "hear the next node's challenge", g->peer);
        return 1;
    }
    if (r > 0 && (g->na_got += (size_t)r) == sizeof g->nonce_a &&
        (p3dw_ring_hello(g->key, peer_port(g->peer), g->nonce_a, hello, g->want) < 0 ||
         send(g->out, hello, sizeof hello, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof hello)) {
        out_lost(&g->fig, &g->fig_got, &g->out_shut, "prove the job key to the next node", g->peer);
        return 1;
    }
    return 0;
}

/* What the next node says on our outgoing connection: "go", then our
 * figure. 1 when the link is lost (the turn ends there). */
static int ring_hear_next(ring *g)
{
    ssize_t r;
    if (g->key && g->na_got < sizeof g->nonce_a)
        return ring_answer_challenge(g);
    if (!g->go_seen) {
        r = recv(g->out, g->go + g->go_got, g->go_len - g->go_got, MSG_DONTWAIT);
        if (r > 0 && (g->go_got += (size_t)r) == g->go_len) {
            if (g->go[g->go_len - 1] != 'g' || (g->key && CRYPTO_memcmp(g->go, g->want, 32) != 0)) {
                errno = EACCES;
                out_lost(&g->fig, &g->fig_got, &g->out_shut, "stream: the next node did not prove the job key",
                         g->peer);
                return 1;
            }
            g->go_seen = 1;
        } else if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            out_lost(&g->fig, &g->fig_got, &g->out_shut, "hear the next node start its stream", g->peer);
            return 1;
        }
        return 0;
    }
    r = recv(g->out, (char *)&g->fig + g->fig_got, sizeof g->fig - g->fig_got, MSG_DONTWAIT);
    if (r > 0) {
        g->fig_got += (size_t)r;
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        out_lost(&g->fig, &g->fig_got, &g->out_shut, "get the next node's figure", g->peer);
        return 1;
    }
    return 0;
}

/* One chunk of the outgoing stream, or its end when its time is up. */
static void ring_send_stream(ring *g)
{
    if (!g->t_send_end) /* in a slot: it ends with the slot, even when it began late */
        g->t_send_end = g->send_at > 0 ? g->send_at + g->seconds : wall_now() + g->seconds;
    if (wall_now() >= g->t_send_end) {
        shutdown(g->out, SHUT_WR);
        g->out_shut = 1;
    } else {
        ssize_t w = send(g->out, g->buf, RING_CHUNK, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            out_lost(&g->fig, &g->fig_got, &g->out_shut, "stream to the next node", g->peer);
    }
}

/* One poll over both sides and what it found. 1: the turn ended early
 * (a link lost, or poll interrupted); -1: poll failed. */
static int ring_turn(ring *g, double now)
{
    /* each side watched until it is over: a socket at its end stays readable */
    struct pollfd p[2 + P3DW_RING_PENDING] = {
        {.fd = g->in_done   ? -1
               : g->in >= 0 ? g->in
                            : g->lfd,
         .events = POLLIN},
        {.fd = g->fig_got < sizeof g->fig ? g->out : -1,
         .events = POLLIN | (g->go_seen && !g->out_shut && now >= g->send_at ? POLLOUT : 0)}};
    for (int i = 0; i < P3DW_RING_PENDING; i++) /* the candidates' proofs wake us too */
        p[2 + i] = (struct pollfd){.fd = g->in < 0 ? g->pool[i].fd : -1, .events = POLLIN};
    int wait_ms = 50;
    if (g->go_seen && !g->out_shut && now < g->send_at && (g->send_at - now) * 1000 < wait_ms)
        wait_ms = (int)((g->send_at - now) * 1000) + 1;
    if (poll(p, 2 + P3DW_RING_PENDING, wait_ms) < 0)
        return errno == EINTR ? 1 : -1;
    g->t_work = wall_now();
    if (g->in < 0 && !g->in_done) {
        /* keyed: a connection is the previous node once it answered our
         * challenge; strangers are dropped, and the port stays open for it */
        g->in = p3dw_ring_admit(g->pool, g->lfd, g->key, g->my_port, g->t_work, RING_PROOF_WAIT);
    } else if (g->in >= 0 && !g->in_done && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        ring_recv_stream(g);
    }
    if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && ring_hear_next(g))
        return 1;
    if (g->go_seen && !g->out_shut && (p[1].revents & POLLOUT))
        ring_send_stream(g);
    return 0;
}

/* Sleeps until t (at most max seconds from now). */
static void ring_nap(double now, double t, double max)
{
    struct timespec ts = {0, (long)(((t - now) > max ? max : (t - now)) * 1e9)};
    nanosleep(&ts, NULL);
}

/* One poll loop for both streams of this node. The receiver starts each
 * stream: it sends one byte ("go") once it accepted, the sender then
 * streams for `seconds` and shuts its side down, the receiver measures
 * from the first byte to the end and sends its figure back (8 bytes, a
 * double, MB/s) so that the sender knows its outgoing figure too.
 * timeout bounds the whole of it: a link not done by then is 0 MB/s.
 * send_at > 0 (this clock): the stream starts no earlier (its slot), and
 * the node stays until ring_end, so that no link of the ring is measured
 * while another streams or a node already computes (--bench-tcp-slot). */
static int tcp_ring(int lfd, const char *peer, const char *key, double seconds, int f, double timeout, double send_at,
                    double ring_end, double *out_mbps, double *in_mbps)
{
    ring g = {.buf = malloc(RING_CHUNK),
              .peer = peer,
              .key = key,
              .lfd = lfd,
              .in = -1,
              .out = -1,
              .my_port = listen_port(lfd),
              .go_len = key ? P3DW_RING_ANSWER : 1,
              .seconds = seconds,
              .send_at = send_at,
              .in_mbps = in_mbps};
    int rc = -1;
    double deadline = wall_now() + timeout, idle_until = 0;
    double accept_by = wall_now() + (timeout < ACCEPT_WAIT ? timeout : ACCEPT_WAIT);
    const char *what = NULL;
    *out_mbps = *in_mbps = 0;
    p3dw_ring_pool_init(g.pool);
    if (!g.buf) {
        fprintf(stderr, "p3d-worker: --bench-node: out of memory\n");
        goto out;
    }
    memset(g.buf, 0x5a, RING_CHUNK);
    /* a next node that cannot be reached costs this node its outgoing
     * link (0 MB/s), not its incoming one */
    if ((g.out = connect_peer(peer, deadline)) < 0)
        out_lost(&g.fig, &g.fig_got, &g.out_shut, "connect to the next node", peer);
    while (!(g.in_done && g.figure_sent && g.fig_got == sizeof g.fig) || wall_now() < ring_end) {
        double now = wall_now();
        int over = g.in_done && g.figure_sent && g.fig_got == sizeof g.fig;
        if (now > deadline && over)
            break; /* only the others' slots were left */
        if (g.in < 0 && !g.in_done && now > accept_by) {
            /* every node connects first thing: a previous node that has
             * not by now is not coming (its benchmark failed or hangs) */
            errno = ETIMEDOUT;
            in_lost(&g.in_done, &g.figure_sent, in_mbps, "get the previous node's connection", peer);
            continue;
        }
        if (now > deadline) {
            /* a neighbour that hangs must not take this node with it: the
             * links not done by now count as 0 MB/s, the node goes on */
            fprintf(stderr, "p3d-worker: --bench-node: the TCP ring did not finish within %g s: %s%s%s 0 MB/s\n",
                    timeout, g.in_done ? "" : "the incoming link",
                    !g.in_done && g.fig_got < sizeof g.fig ? " and " : "",
                    g.fig_got < sizeof g.fig ? "the outgoing link" : "");
            if (!g.in_done)
                *in_mbps = 0;
            if (g.fig_got < sizeof g.fig)
                g.fig = 0;
            break;
        }
        if (over) { /* the others' slots */
            ring_nap(now, ring_end, 0.05);
            continue;
        }
        if (now < idle_until) {
            ring_nap(now, idle_until, 1e9);
            continue;
        }
        int turn = ring_turn(&g, now);
        if (turn < 0) {
            what = "poll";
            goto out;
        }
        if (turn > 0)
            continue;
        if (f > 1)
            idle_until = wall_now() + (f - 1) * (wall_now() - g.t_work);
    }
    /* the next node's word: a figure that is not a rate counts as none */
    *out_mbps = isfinite(g.fig) && g.fig >= 0 && g.fig < 1e9 ? g.fig : 0;
    rc = 0;
out:
    if (rc && what)
        fprintf(stderr, "p3d-worker: --bench-node: cannot %s (%s): %s\n", what, peer,
                errno ? strerror(errno) : "the connection ended");
    p3dw_ring_pool_close(g.pool);
    if (g.in >= 0)
        close(g.in);
    if (g.out >= 0)
        close(g.out);
    free(g.buf);
    return rc;
}

/* --bench-tcp-only: this node's part of a multi-node ring alone, bounded by
 * all of --connect-timeout, keyed when par3drun passed the job key on
 * --bench-tcp-key-fd. f: the TCP slowdown knob. */
static int bench_tcp_only(const p3dw_opts *o, int f)
{
    double out_mbps = 0, in_mbps = 0;
    char key[256];
    if (!o->bench_tcp_peer) {
        fprintf(stderr, "p3d-worker: --bench-tcp-only needs --bench-tcp-peer and --bench-tcp-fd\n");
        return -1;
    }
    if (o->bench_tcp_key_fd >= 0 && p3dw_ring_key_load(o->bench_tcp_key_fd, key, sizeof key) < 0) {
        fprintf(stderr, "p3d-worker: --bench-tcp-key-fd %d: cannot read the job key (8..255 bytes of text)\n",
                o->bench_tcp_key_fd);
        return -1;
    }
    if (tcp_ring(o->bench_tcp_fd, o->bench_tcp_peer, o->bench_tcp_key_fd >= 0 ? key : NULL, o->bench_seconds, f,
                 o->connect_timeout, 0, 0, &out_mbps, &in_mbps) < 0)
        return -1;
    printf("preflight backend=cpu tcp_out_mbps=%.4g tcp_in_mbps=%.4g links=skipped\n", out_mbps, in_mbps);
    return 0;
}

int p3dw_bench_node(const p3dw_opts *o)
{
    int f = slowdown("P3D_WORKER_BENCH_SLOWDOWN"), ft = slowdown("P3D_WORKER_BENCH_TCP_SLOWDOWN"), rc = -1, n = 192;
    if (!f || !ft)
        return -1;
    /* the TCP loop's factor, both knobs at once: bounded as each is */
    int fft = (long long)f * ft > 1000000 ? 1000000 : f * ft;
    if (o->bench_tcp_only)
        return bench_tcp_only(o, fft);
    gemm_ctx g = {.n = n};
    copy_ctx c = {.n = 16u << 20};
    g.a = malloc(sizeof(float) * (size_t)n * n);
    g.b = malloc(sizeof(float) * (size_t)n * n);
    g.c = malloc(sizeof(float) * (size_t)n * n);
    c.a = malloc(c.n);
    c.b = malloc(c.n);
    double out_mbps = 0, in_mbps = 0;
    const char *cwhy = NULL;
    const p3dw_cuda_api *cuda = p3dw_cuda_pick(o->backend, &cwhy);
    if (!cuda && !strcmp(o->backend, "cuda")) {
        fprintf(stderr, "p3d-worker: --bench-node --backend cuda: %s\n", cwhy);
        goto out;
    }
    if (!g.a || !g.b || !g.c || !c.a || !c.b) {
        fprintf(stderr, "p3d-worker: --bench-node: out of memory\n");
        goto out;
    }
    /* TCP first: the ring's nodes start together, before compute makes
     * them drift apart (the buffers are filled after it) */
    /* a third of --connect-timeout (par3drun passes its --preflight-timeout)
     * for the ring, so that compute and memory still fit when a
     * neighbour hangs */
    double send_at = 0, ring_end = 0;
    int si = -1;
    if (o->bench_tcp_slot) {
        /* I:N:T: slot I of N, slot 0 starting at T (CLOCK_REALTIME, the
         * host's: emulated nodes share it), each --bench-seconds + 50 ms */
        int sn = 0, k = 0;
        double t0 = 0, slot = o->bench_seconds + 0.05;
        if (sscanf(o->bench_tcp_slot, "%d:%d:%lf%n", &si, &sn, &t0, &k) != 3 || o->bench_tcp_slot[k] || si < 0 ||
            sn < 1 || si >= sn || t0 <= 0) {
            fprintf(stderr,
                    "p3d-worker: --bench-tcp-slot '%s': expected I:N:T (slot I of N, T the start, "
                    "seconds since 1970)\n",
                    o->bench_tcp_slot);
            goto out;
        }
        double off = wall_now() - clock_s(CLOCK_REALTIME);
        send_at = t0 + off + si * slot;
        ring_end = t0 + off + sn * slot;
    }
    /* one host's loopback ring (par3drun's own listeners): no key */
    if (o->bench_tcp_peer && tcp_ring(o->bench_tcp_fd, o->bench_tcp_peer, NULL, o->bench_seconds, fft,
                                      o->connect_timeout / 3, send_at, ring_end, &out_mbps, &in_mbps) < 0)
        goto out;
    if (o->bench_serial && ring_end > 0) {
        /* compute and memory in slot I too, after the ring's last one:
         * nodes that share a host's cores (SMT siblings, caches, memory)
         * measure each other when they compute at once */
        /* 0.1 s after the ring: its last link (node N-1 to node 0) may
         * still be ending when slot 0 would begin */
        double at = ring_end + 0.1 + si * (2 * o->bench_seconds + 0.25);
        for (double now = wall_now(); now < at; now = wall_now()) {
            struct timespec ts = {(time_t)(at - now), (long)((at - now - (time_t)(at - now)) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    if (cuda) {
        p3dw_gpu_figs gf;
        char why[300] = "";
        if (cuda->bench_node(o->bench_seconds, f, &gf, why, sizeof why) < 0) {
            fprintf(stderr, "p3d-worker: --bench-node: %s\n", why[0] ? why : "the GPU benchmark failed");
            goto out;
        }
        printf("preflight backend=cuda gpus=%d gflops=%.4g mem_gbps=%.4g", gf.ngpus, gf.gflops, gf.mem_gbps);
        if (gf.p2p_gbps >= 0)
            printf(" p2p_gbps=%.4g", gf.p2p_gbps);
        printf(" gemm_maxrel=%.3g", gf.gemm_maxrel);
        if (o->bench_tcp_peer)
            printf(" tcp_out_mbps=%.4g tcp_in_mbps=%.4g", out_mbps, in_mbps);
        printf(" links=%s\n", gf.p2p_gbps >= 0 ? "measured" : "none");
        /* which GPU and link are the node's figures: for the people */
        fprintf(stderr, "p3d-worker: --bench-node: %d GPU(s); slowest SGEMM GPU %d, slowest copy GPU %d", gf.ngpus,
                gf.gflops_gpu, gf.mem_gpu);
        if (gf.p2p_gbps >= 0)
            fprintf(stderr, ", slowest of %d peer links GPU %d -> GPU %d", gf.npairs, gf.p2p_a, gf.p2p_b);
        fprintf(stderr, "\n");
        rc = 0;
        goto out;
    }
    for (size_t i = 0; i < (size_t)n * n; i++) {
        g.a[i] = (float)(i % 7) * 0.25f;
        g.b[i] = (float)(i % 5) * 0.5f;
    }
    memset(c.a, 1, c.n);
    memset(c.b, 2, c.n); /* pages in before the timing */
    double tg = best_of(gemm_once, &g, f, o->bench_seconds);
    double tm = best_of(copy_once, &c, f, o->bench_seconds);
    printf("preflight backend=cpu gflops=%.4g mem_gbps=%.4g", 2.0 * n * n * n / tg / 1e9, c.n / tm / 1e9);
    if (o->bench_tcp_peer)
        printf(" tcp_out_mbps=%.4g tcp_in_mbps=%.4g", out_mbps, in_mbps);
    printf(" links=skipped\n");
    rc = 0;
out:
    free(g.a);
    free(g.b);
    free(g.c);
    free(c.a);
    free(c.b);
    return rc;
}
