/*
 * rdzv_tcp.c — the TCP rendezvous every backend ends in (rdzv.h): the
 * leader listens on one address, agents connect with retries, present the
 * job token and their version, send their node record; the leader waits
 * for all and sends the placement. One poll() loop on the leader, so 256
 * agents joining at once cost one accept and one read each.
 */
#include "rdzv.h"

#include "launch.h"

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
#include <time.h>
#include <unistd.h>

/* How often waiting is reported (terminal or --verbose only). */
/* how the leader's gather timeout begins (p3d_tcp_join tells it from a refusal) */
#define TIMEOUT_TEXT "rendezvous: timed out"
#define PROGRESS_EVERY 5.0

static int set_nonblock(int fd, int on)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -1;
    return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* A peer that vanishes without a FIN (node power loss, partition) is
 * noticed within ~15 s instead of the kernel's two hours. */
static void keepalive(int fd)
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
                       : e == EADDRNOTAVAIL ? " (not an address of this node)" : "");
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    set_nonblock(fd, 1);
    return fd;
}

/* Token comparison that takes the same time wherever the strings differ. */
static int token_eq(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++)
        d |= (unsigned char)(a[i] ^ b[lb ? i % lb : 0]);
    return d == 0;
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
        set_nonblock(fd, 0);
        p3d_frame_write(fd, &b, NULL);
    }
    p3d_wbuf_free(&b);
}

void p3d_tcp_refuse_all(const int *fds, int n, const char *why)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            p3d_tcp_refuse(fds[i], why);
}

static void peer_name(int fd, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char h[128] = "?", p[16] = "?";
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(buf, cap, "%s:%s", h, p);
}

/* "0-3,7" style list of the node ranks not yet in, with hostnames when the
 * backend knows them; at most ~20 named. */
static char *missing_list(const p3d_rdzv *r, const p3d_hello *all)
{
    p3d_wbuf b = {0};
    int shown = 0, total = 0;
    for (int i = 0; i < r->boot.nnodes; i++) {
        if (all[i].version)
            continue;
        total++;
        if (shown >= 20)
            continue;
        char one[300];
        const char *h = r->boot.hostnames && r->boot.hostnames[i] && r->boot.hostnames[i][0] ? r->boot.hostnames[i]
                                                                                             : NULL;
        int n = snprintf(one, sizeof one, "%snode[%d]%s%s%s", shown ? ", " : "", i, h ? " (" : "", h ? h : "",
                         h ? ")" : "");
        p3d_wbuf_bytes(&b, one, (size_t)n);
        shown++;
    }
    if (total > shown) {
        char more[64];
        int n = snprintf(more, sizeof more, " and %d more", total - shown);
        p3d_wbuf_bytes(&b, more, (size_t)n);
    }
    p3d_wbuf_bytes(&b, "", 1);
    if (b.oom) {
        p3d_wbuf_free(&b);
        return NULL;
    }
    return (char *)b.p;
}

typedef struct pending {
    int fd;
    p3d_framer fr;
    char peer[160];
    double since; /* accepted at */
} pending;

/* Before a peer has shown the job token it gets little: HELLO_DEADLINE
 * seconds to send its HELLO (an agent sends it right after connecting),
 * and a first frame of at most PREAUTH_FRAME_MAX bytes (a HELLO of a node
 * with 64 GPUs and NICs is a few KiB; big frames come only from joined
 * agents). When every slot is taken, the oldest unauthenticated peer is
 * evicted for the new one, so idle connections cannot keep an agent out. */
#define HELLO_DEADLINE 10.0
#define PREAUTH_FRAME_MAX (1u << 20)

static void drop_pending(pending *p, const char *why, int verbose)
{
    if (verbose)
        fprintf(stderr, "rendezvous: dropped %s before its HELLO: %s\n", p->peer, why);
    close(p->fd);
    p->fd = -1;
    p3d_framer_free(&p->fr);
}

/* The length the peer announces for its first frame, read without
 * consuming it: a HELLO over PREAUTH_FRAME_MAX is refused before any of it
 * is buffered. 1: too big; 0: fine or not known yet. */
static int preauth_too_big(const pending *p)
{
    unsigned char h[4];
    if (p->fr.len >= 4) {
        uint32_t n = (uint32_t)p->fr.buf[0] << 24 | (uint32_t)p->fr.buf[1] << 16 | (uint32_t)p->fr.buf[2] << 8 |
                     p->fr.buf[3];
        return n > PREAUTH_FRAME_MAX;
    }
    if (p->fr.len > 0 || recv(p->fd, h, 4, MSG_PEEK) != 4)
        return 0;
    uint32_t n = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    return n > PREAUTH_FRAME_MAX;
}

/* Checks one HELLO; NULL when it may join, else the reason (static). */
static const char *hello_verdict(const p3d_rdzv *r, const p3d_hello *h, const p3d_hello *all, char *why,
                                 size_t cap)
{
    if (!h->token || !token_eq(h->token, r->boot.token)) {
        snprintf(why, cap, "wrong job token (an agent of another job, or a different --rdzv-token-file?)");
        return why;
    }
    if (h->proto != P3D_WIRE_PROTO || !h->version || strcmp(h->version, P3D_VERSION) != 0) {
        snprintf(why, cap, "par3drun version mismatch: the leader runs %s (wire protocol %d), this agent %s "
                 "(wire protocol %u): run the same par3drun on every node",
                 P3D_VERSION, P3D_WIRE_PROTO, h->version ? h->version : "?", h->proto);
        return why;
    }
    if (h->nnodes != r->boot.nnodes) {
        snprintf(why, cap, "this agent expects %d nodes, the leader %d (--nnodes must be the same everywhere)",
                 h->nnodes, r->boot.nnodes);
        return why;
    }
    if (h->node_rank < 1 || h->node_rank >= r->boot.nnodes) {
        snprintf(why, cap, "node rank %d: expected 1..%d (0 is the leader)", h->node_rank, r->boot.nnodes - 1);
        return why;
    }
    if (all[h->node_rank].version) {
        snprintf(why, cap, "node rank %d already joined (from %s): each node needs its own --node-rank",
                 h->node_rank, all[h->node_rank].addr ? all[h->node_rank].addr : "?");
        return why;
    }
    if (h->job_id && h->job_id[0] && all[0].job_id && all[0].job_id[0] && strcmp(h->job_id, all[0].job_id)) {
        snprintf(why, cap, "job id '%s', the leader runs job '%s'", h->job_id, all[0].job_id);
        return why;
    }
    return NULL;
}

int p3d_tcp_gather(int lfd, const p3d_rdzv *r, p3d_hello *mine, p3d_hello *all, int *fds, int verbose,
                   char **err)
{
    int n = r->boot.nnodes, joined = 1, rc = -1;
    int maxpend = 2 * n + 16;
    pending *pd = calloc((size_t)maxpend, sizeof *pd);
    struct pollfd *pfd = calloc((size_t)maxpend + 1, sizeof *pfd);
    double t0 = p3d_now(), deadline = t0 + r->timeout, next_note = t0 + PROGRESS_EVERY;
    int chatty = verbose || isatty(2);
    if (!pd || !pfd) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < maxpend; i++)
        pd[i].fd = -1;
    for (int i = 0; i < n; i++)
        fds[i] = -1;
    all[0] = *mine;
    memset(mine, 0, sizeof *mine);
    while (joined < n) {
        double now = p3d_now();
        if (now >= deadline) {
            char *m = missing_list(r, all);
            p3d_err(err, TIMEOUT_TEXT " after %g s: %d/%d nodes joined; never arrived: %s", r->timeout,
                    joined, n, m ? m : "?");
            free(m);
            p3d_tcp_refuse_all(fds, n, *err);
            goto out;
        }
        if (chatty && now >= next_note) {
            char *m = missing_list(r, all);
            fprintf(stderr, "rendezvous: %d/%d nodes joined, waiting for %s (%.0f s of %g s)\n", joined, n,
                    m ? m : "?", now - t0, r->timeout);
            free(m);
            next_note = now + PROGRESS_EVERY;
        }
        double until = deadline < next_note || !chatty ? deadline : next_note;
        for (int i = 0; i < maxpend; i++)
            if (pd[i].fd >= 0) {
                if (now - pd[i].since >= HELLO_DEADLINE)
                    drop_pending(&pd[i], "no HELLO within 10 s", verbose);
                else if (pd[i].since + HELLO_DEADLINE < until)
                    until = pd[i].since + HELLO_DEADLINE;
            }
        int np = 0;
        pfd[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (int i = 0; i < maxpend; i++)
            if (pd[i].fd >= 0)
                pfd[np++] = (struct pollfd){.fd = pd[i].fd, .events = POLLIN};
        int ms = (int)((until - now) * 1000) + 1;
        int pr = poll(pfd, (nfds_t)np, ms);
        if (pr < 0 && errno != EINTR) {
            p3d_err(err, "rendezvous: poll: %s", strerror(errno));
            goto out;
        }
        if (pr <= 0)
            continue;
        if (pfd[0].revents) {
            for (;;) {
                int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0)
                    break;
                int slot = -1;
                for (int i = 0; i < maxpend && slot < 0; i++)
                    if (pd[i].fd < 0)
                        slot = i;
                if (slot < 0) { /* all slots taken: evict the oldest unauthenticated peer */
                    slot = 0;
                    for (int i = 1; i < maxpend; i++)
                        if (pd[i].since < pd[slot].since)
                            slot = i;
                    drop_pending(&pd[slot], "evicted for a newer connection (all slots taken)", verbose);
                }
                keepalive(c);
                pd[slot].fd = c;
                pd[slot].since = p3d_now();
                peer_name(c, pd[slot].peer, sizeof pd[slot].peer);
            }
        }
        for (int k = 1; k < np; k++) {
            if (!pfd[k].revents)
                continue;
            pending *p = NULL;
            for (int i = 0; i < maxpend && !p; i++)
                if (pd[i].fd == pfd[k].fd)
                    p = &pd[i];
            if (!p)
                continue;
            if (preauth_too_big(p)) {
                fprintf(stderr, "rendezvous: refused %s: its first frame is over %u bytes (a HELLO is small)\n",
                        p->peer, PREAUTH_FRAME_MAX);
                drop_pending(p, "first frame too big", 0);
                continue;
            }
            char *e = NULL;
            int f = p3d_framer_fill(&p->fr, p->fd, &e);
            if (f < 0) {
                free(e);
                close(p->fd);
                p->fd = -1;
                p3d_framer_free(&p->fr);
                continue;
            }
            if (f == 0)
                continue;
            unsigned char *body = NULL;
            size_t len = 0;
            int type = p3d_framer_take(&p->fr, &body, &len);
            p3d_hello h;
            char why[512];
            const char *verdict = NULL;
            memset(&h, 0, sizeof h);
            if (type != P3D_MSG_HELLO) {
                snprintf(why, sizeof why, "expected HELLO, got message type %d", type);
                verdict = why;
            } else if (p3d_hello_decode(body, len, &h, &e) < 0) {
                /* proto/version/token were read first: a newer agent is
                 * told about the version, not about a malformed record */
                verdict = hello_verdict(r, &h, all, why, sizeof why);
                if (!verdict) {
                    snprintf(why, sizeof why, "%s", e ? e : "malformed HELLO");
                    verdict = why;
                }
            } else {
                verdict = hello_verdict(r, &h, all, why, sizeof why);
            }
            free(e);
            free(body);
            if (verdict) {
                fprintf(stderr, "rendezvous: refused %s%s%s: %s\n", p->peer, h.hostname ? " " : "",
                        h.hostname ? h.hostname : "", verdict);
                p3d_tcp_refuse(p->fd, verdict);
                close(p->fd);
                p3d_hello_free(&h);
            } else {
                if (!h.addr || !h.addr[0]) {
                    free(h.addr);
                    h.addr = strdup(p->peer);
                }
                all[h.node_rank] = h;
                fds[h.node_rank] = p->fd;
                set_nonblock(p->fd, 0);
                joined++;
            }
            p->fd = -1;
            p3d_framer_free(&p->fr);
        }
    }
    if (verbose)
        fprintf(stderr, "rendezvous: %d/%d nodes joined in %.3f s\n", n, n, p3d_now() - t0);
    rc = 0;
out:
    for (int i = 0; pd && i < maxpend; i++) {
        if (pd[i].fd >= 0)
            close(pd[i].fd);
        p3d_framer_free(&pd[i].fr);
    }
    free(pd);
    free(pfd);
    if (rc < 0)
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0) {
                close(fds[i]);
                fds[i] = -1;
            }
    return rc;
}

int p3d_tcp_broadcast(const int *fds, int n, const p3d_wbuf *b, const p3d_hello *all, char **err)
{
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue;
        struct timeval tv = {.tv_sec = 30};
        setsockopt(fds[i], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        char *e = NULL;
        if (p3d_frame_write(fds[i], b, &e) < 0) {
            p3d_err(err, "rendezvous: cannot send the placement to node[%d] (%s): %s", i,
                    all[i].hostname ? all[i].hostname : "?", e ? e : "?");
            free(e);
            return -1;
        }
    }
    return 0;
}

/* One connect attempt bounded by the deadline: the fd, or -1 with errno. */
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
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        double left = deadline - p3d_now();
        int ms = left > 0 ? (int)(left * 1000) + 1 : 0;
        if (ms > 5000)
            ms = 5000; /* a silent host: try again rather than block */
        int pr = poll(&p, 1, ms);
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (pr <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
            close(fd);
            errno = pr == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            return -1;
        }
    }
    set_nonblock(fd, 0);
    keepalive(fd);
    return fd;
}

int p3d_tcp_join(const p3d_rdzv *r, p3d_hello *mine, p3d_place_msg *out, int verbose, char **err)
{
    const char *host = r->boot.leader_host;
    int port = r->boot.leader_port, fd = -1, rc = -1;
    double t0 = p3d_now(), deadline = t0 + r->timeout, next_note = t0 + PROGRESS_EVERY;
    int chatty = verbose || isatty(2), last = 0;
    unsigned char *body = NULL;
    p3d_wbuf b = {0};
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    useconds_t backoff = 20000;
    while (fd < 0) {
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
            break;
        double now = p3d_now();
        if (now >= deadline) {
            p3d_err(err, "rendezvous: cannot reach the leader (node rank 0) at %s:%d within %g s: %s", host, port,
                    r->timeout, g ? gai_strerror(g) : strerror(last));
            goto out;
        }
        if (chatty && now >= next_note) {
            fprintf(stderr, "rendezvous: node[%d] waiting for the leader at %s:%d (%.0f s of %g s: %s)\n",
                    r->boot.node_rank, host, port, now - t0, r->timeout, g ? gai_strerror(g) : strerror(last));
            next_note = now + PROGRESS_EVERY;
        }
        usleep(backoff);
        if (backoff < 500000)
            backoff *= 2;
    }
    /* the address the leader sees us at is the one others reach us at */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char me[128] = "";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, me, sizeof me, NULL, 0, NI_NUMERICHOST);
    free(mine->addr);
    mine->addr = strdup(me);
    if (p3d_hello_encode(mine, &b) < 0) {
        p3d_err(err, "rendezvous: cannot encode this node's record (out of memory)");
        goto out;
    }
    char *e = NULL;
    if (p3d_frame_write(fd, &b, &e) < 0) {
        p3d_err(err, "rendezvous: cannot send to the leader at %s:%d: %s", host, port, e);
        free(e);
        goto out;
    }
    /* The leader answers when every node is in (or its timeout passed, and
     * then it says so): wait for our timeout plus time to place. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        double now = p3d_now(), until = deadline + 30 + 0.01 * r->boot.nnodes;
        if (now >= until) {
            p3d_err(err, "rendezvous: no placement from the leader at %s:%d after %.0f s", host, port, now - t0);
            goto out;
        }
        int pr = poll(&p, 1, chatty ? 5000 : (int)((until - now) * 1000) + 1);
        if (pr < 0 && errno != EINTR) {
            p3d_err(err, "rendezvous: poll: %s", strerror(errno));
            goto out;
        }
        if (pr > 0)
            break;
        if (chatty)
            fprintf(stderr, "rendezvous: node[%d] joined, waiting for the other nodes (%.0f s of %g s)\n",
                    r->boot.node_rank, p3d_now() - t0, r->timeout);
    }
    size_t len = 0;
    int type = p3d_frame_read(fd, &body, &len, &e);
    if (type <= 0) {
        p3d_err(err, "rendezvous: the leader at %s:%d closed the connection%s%s", host, port, e ? ": " : "",
                e ? e : "");
        free(e);
        goto out;
    }
    if (type == P3D_MSG_REFUSE) {
        p3d_rbuf rb = {.p = body, .len = len};
        char *why = p3d_rbuf_str(&rb, 65536);
        p3d_err(err, "rendezvous: the leader at %s:%d refused node[%d]: %s", host, port, r->boot.node_rank,
                why ? why : "(no reason given)");
        /* the leader's own timeout travels as a refusal too: that is the
         * rendezvous not completing (exit 1 on both sides), not this
         * node's input being wrong (same par3drun version: the text is
         * the leader's p3d_tcp_gather message) */
        rc = why && !strncmp(why, TIMEOUT_TEXT, strlen(TIMEOUT_TEXT)) ? -1 : -2;
        free(why);
        goto out;
    }
    if (type != P3D_MSG_PLACE) {
        p3d_err(err, "rendezvous: the leader sent message type %d, expected the placement", type);
        goto out;
    }
    if (p3d_place_decode(body, len, out, err) < 0)
        goto out;
    rc = fd;
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    free(body);
    p3d_wbuf_free(&b);
    return rc;
}
