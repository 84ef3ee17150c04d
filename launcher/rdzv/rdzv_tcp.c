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
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How the leader's gather timeout begins (refusal() tells it apart). */
#define TIMEOUT_TEXT "rendezvous: timed out"
/* How often waiting is reported (terminal or --verbose only). */
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

/* ---- accepting peers: the pre-authentication limits ---------------------- */

typedef struct pending {
    int fd;
    p3d_framer fr;
    char peer[160];
    double since; /* accepted at */
} pending;

/* Before a peer has shown the job token it gets little: HELLO_DEADLINE
 * seconds to send its first frame (JOIN to the leader, TJOIN to a tree
 * parent; an agent sends it right after connecting), and a first frame of
 * at most PREAUTH_FRAME_MAX bytes (both are under 1 KiB; big frames come
 * only from joined agents). When every slot is taken, the oldest
 * unauthenticated peer is evicted for the new one, so idle connections
 * cannot keep an agent out. The leader and every interior agent of the
 * tree apply the same limits. */
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
 * consuming it: a first frame over PREAUTH_FRAME_MAX is refused before any
 * of it is buffered. 1: too big; 0: fine or not known yet. */
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

/* Accepts every queued connection into a free slot (evicting the oldest
 * unauthenticated peer when none is free). */
static void accept_all(int lfd, pending *pd, int maxpend, int verbose)
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
            drop_pending(&pd[slot], "evicted for a newer connection (all slots taken)", verbose);
        }
        keepalive(c);
        pd[slot].fd = c;
        pd[slot].since = p3d_now();
        peer_name(c, pd[slot].peer, sizeof pd[slot].peer);
    }
}

/* Drops peers past their deadline; lowers *until to the next one. */
static void expire_pending(pending *pd, int maxpend, double now, double *until, int verbose)
{
    for (int i = 0; i < maxpend; i++)
        if (pd[i].fd >= 0) {
            if (now - pd[i].since >= HELLO_DEADLINE)
                drop_pending(&pd[i], "no HELLO within 10 s", verbose);
            else if (pd[i].since + HELLO_DEADLINE < *until)
                *until = pd[i].since + HELLO_DEADLINE;
        }
}

/* Reads a pending peer's first frame. Returns its type with *body when
 * complete, 0 when more is needed, -1 when the peer was dropped. */
static int pending_frame(pending *p, unsigned char **body, size_t *len)
{
    if (preauth_too_big(p)) {
        fprintf(stderr, "rendezvous: refused %s: its first frame is over %u bytes (a HELLO is small)\n", p->peer,
                PREAUTH_FRAME_MAX);
        drop_pending(p, "first frame too big", 0);
        return -1;
    }
    char *e = NULL;
    int f = p3d_framer_fill(&p->fr, p->fd, &e);
    free(e);
    if (f < 0) {
        drop_pending(p, "closed", 0);
        return -1;
    }
    if (f == 0)
        return 0;
    *body = NULL;
    *len = 0;
    int type = p3d_framer_take(&p->fr, body, len);
    return type > 0 ? type : 256; /* a type-0 frame: refused below */
}

/* Token, protocol and version: what any peer must show first. NULL when
 * fine, else the reason (in why). */
static const char *auth_verdict(const p3d_rdzv *r, const char *token, uint32_t proto, const char *version,
                                const char *job_id, char *why, size_t cap)
{
    if (!token || !token_eq(token, r->boot.token)) {
        snprintf(why, cap, "wrong job token (an agent of another job, or a different --rdzv-token-file?)");
        return why;
    }
    if (proto != P3D_WIRE_PROTO || !version || strcmp(version, P3D_VERSION) != 0) {
        snprintf(why, cap, "par3drun version mismatch: the leader runs %s (wire protocol %d), this agent %s "
                 "(wire protocol %u): run the same par3drun on every node",
                 P3D_VERSION, P3D_WIRE_PROTO, version ? version : "?", proto);
        return why;
    }
    if (job_id && job_id[0] && r->boot.job_id[0] && strcmp(job_id, r->boot.job_id)) {
        snprintf(why, cap, "job id '%s', the leader runs job '%s'", job_id, r->boot.job_id);
        return why;
    }
    return NULL;
}

/* ---- the tree's shape -------------------------------------------------------- */

static int tree_parent(int i, int k)
{
    return i > 0 ? (i - 1) / k : -1;
}

static int tree_nchildren(int i, int k, int n)
{
    long first = (long)k * i + 1;
    if (first >= n)
        return 0;
    long last = first + k - 1 < n - 1 ? first + k - 1 : n - 1;
    return (int)(last - first + 1);
}

/* Is rank x in the subtree of rank top? */
static int in_subtree(int x, int top, int k)
{
    while (x > top)
        x = tree_parent(x, k);
    return x == top;
}

/* ---- the leader --------------------------------------------------------------- */

/* "node[3] (host), node[7]..." of the ranks with !have[i]; at most ~20. */
static char *rank_list(const p3d_rdzv *r, const unsigned char *have)
{
    p3d_wbuf b = {0};
    int shown = 0, total = 0;
    for (int i = 0; i < r->boot.nnodes; i++) {
        if (have[i])
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

/* Sends a small frame without waiting (a fresh connection's buffer takes
 * it whole); -1 when it could not go out entirely. */
static int send_small(int fd, const p3d_wbuf *b, p3d_tree_stats *st)
{
    ssize_t w;
    do
        w = send(fd, b->p, b->len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w > 0 && st)
        st->bytes_sent += (uint64_t)w;
    return w == (ssize_t)b->len ? 0 : -1;
}

typedef struct leader {
    const p3d_rdzv *r;
    int n, k, verbose;
    int *fds;
    p3d_join *joins;
    p3d_framer *fr;          /* per node rank, for the leader's children's GATHER */
    unsigned char *joined, *have;
    int njoined, nhave;
    p3d_gather *g;
    p3d_tree_stats *st;
} leader;

/* Tells rank x where it hangs in the tree (its parent has joined). */
static int tell_position(leader *L, int x, char **err)
{
    int p = tree_parent(x, L->k);
    p3d_treepos t = {.parent = p, .addr = p > 0 ? L->joins[p].addr : "", .port = p > 0 ? L->joins[p].port : 0,
                     .nchildren = tree_nchildren(x, L->k, L->n), .fanout = L->k};
    if (t.nchildren > 0 && L->joins[x].port == 0)
        return p3d_err(err, "rendezvous: node[%d] (%s) listens nowhere but has %d children in the tree", x,
                       L->joins[x].hostname, t.nchildren);
    p3d_wbuf b = {0};
    int rc = p3d_treepos_encode(&t, &b) == 0 ? send_small(L->fds[x], &b, L->st) : -1;
    p3d_wbuf_free(&b);
    if (rc < 0)
        return p3d_err(err, "rendezvous: cannot tell node[%d] (%s) its place in the tree", x, L->joins[x].hostname);
    return 0;
}

/* A JOIN from a pending peer: joins it (its node rank) or refuses it (0);
 * -1 when the rendezvous cannot go on. */
static int leader_join(leader *L, pending *p, const unsigned char *body, size_t len, int type, char **err)
{
    p3d_join j;
    char why[512], *e = NULL;
    const char *verdict = NULL;
    memset(&j, 0, sizeof j);
    if (type != P3D_MSG_JOIN) {
        snprintf(why, sizeof why, "expected HELLO, got message type %d%s", type,
                 type == P3D_MSG_HELLO ? " (an agent of another par3drun version?)" : "");
        verdict = why;
    } else {
        int d = p3d_join_decode(body, len, &j, &e);
        verdict = auth_verdict(L->r, j.token, j.proto, j.version, d == 0 ? j.job_id : NULL, why, sizeof why);
        if (!verdict && d < 0) {
            snprintf(why, sizeof why, "%s", e ? e : "malformed JOIN");
            verdict = why;
        }
    }
    free(e);
    if (!verdict && j.nnodes != L->n) {
        snprintf(why, sizeof why, "this agent expects %d nodes, the leader %d (--nnodes must be the same everywhere)",
                 j.nnodes, L->n);
        verdict = why;
    } else if (!verdict && (j.node_rank < 1 || j.node_rank >= L->n)) {
        snprintf(why, sizeof why, "node rank %d: expected 1..%d (0 is the leader)", j.node_rank, L->n - 1);
        verdict = why;
    } else if (!verdict && L->joined[j.node_rank]) {
        snprintf(why, sizeof why, "node rank %d already joined (from %s): each node needs its own --node-rank",
                 j.node_rank, L->joins[j.node_rank].addr ? L->joins[j.node_rank].addr : "?");
        verdict = why;
    }
    if (verdict) {
        fprintf(stderr, "rendezvous: refused %s%s%s: %s\n", p->peer, j.hostname ? " " : "", j.hostname ? j.hostname : "",
                verdict);
        p3d_tcp_refuse(p->fd, verdict);
        close(p->fd);
        p->fd = -1;
        p3d_framer_free(&p->fr);
        p3d_join_free(&j);
        return 0;
    }
    int x = j.node_rank;
    int rc = x;
    if (!j.addr[0]) {
        free(j.addr);
        j.addr = strdup(p->peer);
    }
    L->joins[x] = j;
    L->fds[x] = p->fd;
    L->fr[x] = p->fr; /* what came after the JOIN stays queued */
    memset(&p->fr, 0, sizeof p->fr);
    p->fd = -1;
    L->joined[x] = 1;
    L->njoined++;
    /* x learns its parent now if that one is known; x's waiting children
     * learn x */
    int par = tree_parent(x, L->k);
    if ((par == 0 || L->joined[par]) && tell_position(L, x, err) < 0)
        return -1;
    for (int c = 0; c < tree_nchildren(x, L->k, L->n); c++) {
        int y = L->k * x + 1 + c;
        if (L->joined[y] && tell_position(L, y, err) < 0)
            return -1;
    }
    return rc;
}

/* A frame on a joined control connection during the rendezvous: the
 * records of one of the leader's children's subtrees. */
static int leader_frame(leader *L, int x, int type, const unsigned char *body, size_t len, char **err)
{
    if (type != P3D_MSG_GATHER || tree_parent(x, L->k) != 0)
        return 0; /* nothing else is expected yet; ignored */
    p3d_gather g;
    char *e = NULL;
    if (p3d_gather_decode(body, len, L->n, &g, &e) < 0) {
        p3d_err(err, "rendezvous: node[%d] (%s) sent bad records: %s", x, L->joins[x].hostname, e ? e : "?");
        free(e);
        return -1;
    }
    for (int i = 0; i < g.nrec; i++) {
        int y = g.recs[i].rank;
        if (!in_subtree(y, x, L->k) || L->have[y]) {
            p3d_err(err, "rendezvous: node[%d] (%s) sent the record of node[%d], %s", x, L->joins[x].hostname, y,
                    L->have[y] ? "which was already in" : "which is not in its subtree");
            p3d_gather_free(&g);
            return -1;
        }
        L->have[y] = 1;
        L->nhave++;
    }
    if (p3d_gather_merge(L->g, &g, err) < 0)
        return -1;
    return 0;
}

/* Reads a joined control connection: the records of one of the leader's
 * children's subtrees, or the connection's end (fatal: -1 with *err). */
static int leader_conn(leader *L, int x, char **err)
{
    char *e = NULL;
    int f = p3d_framer_fill(&L->fr[x], L->fds[x], &e);
    unsigned char *body;
    size_t len;
    int type, bad = 0;
    while (!bad && (type = p3d_framer_take(&L->fr[x], &body, &len)) > 0) {
        if (L->st)
            L->st->bytes_recv += len + 5;
        bad = leader_frame(L, x, type, body, len, err) < 0;
        free(body);
    }
    if (!bad && f < 0) {
        int nc = tree_nchildren(x, L->k, L->n);
        p3d_err(err, "rendezvous: node[%d] (%s) was lost before the placement was sent (its connection %s)%s", x,
                L->joins[x].hostname, e && !strcmp(e, "closed") ? "closed" : e ? e : "failed",
                nc > 0 ? "; it was an interior agent of the distribution tree: its subtree cannot be reached; "
                         "nothing started"
                       : "; nothing started");
        bad = 1;
        close(L->fds[x]);
        L->fds[x] = -1;
    }
    free(e);
    return bad ? -1 : 0;
}

/* The leader's pending peers: a stack of free slots and epoll, so that a
 * join costs O(1) however many nodes there are (a poll() over every
 * connection per wakeup is O(N^2) over the rendezvous: minutes at 16,384). */
typedef struct lpend {
    pending *pd;
    int maxpend, *free, nfree, ep;
    double next_exp;
} lpend;

#define EV_LISTEN UINT64_MAX

static void lp_release(lpend *P, int slot)
{
    if (P->pd[slot].fd >= 0)
        drop_pending(&P->pd[slot], "dropped", 0);
    P->free[P->nfree++] = slot;
}

static void lp_accept(lpend *P, int lfd, int verbose)
{
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return;
        int slot;
        if (P->nfree > 0) {
            slot = P->free[--P->nfree];
        } else { /* all slots taken: evict the oldest unauthenticated peer */
            slot = 0;
            for (int i = 1; i < P->maxpend; i++)
                if (P->pd[i].since < P->pd[slot].since)
                    slot = i;
            drop_pending(&P->pd[slot], "evicted for a newer connection (all slots taken)", verbose);
        }
        keepalive(c);
        P->pd[slot].fd = c;
        P->pd[slot].since = p3d_now();
        peer_name(c, P->pd[slot].peer, sizeof P->pd[slot].peer);
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)slot};
        epoll_ctl(P->ep, EPOLL_CTL_ADD, c, &ev);
        if (P->next_exp == 0 || P->pd[slot].since + HELLO_DEADLINE < P->next_exp)
            P->next_exp = P->pd[slot].since + HELLO_DEADLINE;
    }
}

/* Peers past their deadline go; scanned only when the earliest is due. */
static void lp_expire(lpend *P, double now, int verbose)
{
    if (P->next_exp == 0 || now < P->next_exp)
        return;
    P->next_exp = 0;
    for (int i = 0; i < P->maxpend; i++)
        if (P->pd[i].fd >= 0) {
            if (now - P->pd[i].since >= HELLO_DEADLINE) {
                drop_pending(&P->pd[i], "no HELLO within 10 s", verbose);
                P->free[P->nfree++] = i;
            } else if (P->next_exp == 0 || P->pd[i].since + HELLO_DEADLINE < P->next_exp) {
                P->next_exp = P->pd[i].since + HELLO_DEADLINE;
            }
        }
}

int p3d_tree_gather(int lfd, const p3d_rdzv *r, int fanout, p3d_join *mine, p3d_gather *mine_g, p3d_gather *g,
                    int *fds, p3d_join *joins, int verbose, p3d_tree_stats *st, char **err)
{
    int n = r->boot.nnodes, rc = -1;
    lpend P = {.maxpend = 2 * n + 16, .ep = -1};
    leader L = {.r = r, .n = n, .k = fanout, .verbose = verbose, .fds = fds, .joins = joins, .g = g, .st = st};
    P.pd = calloc((size_t)P.maxpend, sizeof *P.pd);
    P.free = calloc((size_t)P.maxpend, sizeof *P.free);
    L.fr = calloc((size_t)n, sizeof *L.fr);
    L.joined = calloc((size_t)n, 1);
    L.have = calloc((size_t)n, 1);
    double t0 = p3d_now(), deadline = t0 + r->timeout, next_note = t0 + PROGRESS_EVERY;
    int chatty = verbose || isatty(2);
    struct epoll_event evs[256];
    memset(g, 0, sizeof *g);
    for (int i = 0; i < n; i++)
        fds[i] = -1;
    P.ep = epoll_create1(EPOLL_CLOEXEC);
    if (!P.pd || !P.free || !L.fr || !L.joined || !L.have || P.ep < 0) {
        p3d_err(err, "rendezvous: cannot set up the leader: %s", P.ep < 0 ? strerror(errno) : "out of memory");
        goto out;
    }
    for (int i = 0; i < P.maxpend; i++) {
        P.pd[i].fd = -1;
        P.free[P.nfree++] = P.maxpend - 1 - i;
    }
    {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
        epoll_ctl(P.ep, EPOLL_CTL_ADD, lfd, &ev);
    }
    joins[0] = *mine;
    memset(mine, 0, sizeof *mine);
    L.joined[0] = L.have[0] = 1;
    L.njoined = L.nhave = 1;
    if (p3d_gather_merge(g, mine_g, err) < 0)
        goto out;
    while (L.nhave < n) {
        double now = p3d_now();
        if (now >= deadline) {
            if (L.njoined < n) {
                char *m = rank_list(r, L.joined);
                p3d_err(err, TIMEOUT_TEXT " after %g s: %d/%d nodes joined; never arrived: %s", r->timeout,
                        L.njoined, n, m ? m : "?");
                free(m);
            } else {
                char *m = rank_list(r, L.have);
                p3d_err(err, TIMEOUT_TEXT " after %g s: all %d nodes joined, but the records of %d never came "
                             "up the distribution tree (%s): an interior agent above them is stuck",
                        r->timeout, n, n - L.nhave, m ? m : "?");
                free(m);
            }
            p3d_tcp_refuse_all(fds, n, *err);
            goto out;
        }
        if (chatty && now >= next_note) {
            char *m = rank_list(r, L.joined);
            if (L.njoined < n)
                fprintf(stderr, "rendezvous: %d/%d nodes joined, waiting for %s (%.0f s of %g s)\n", L.njoined, n,
                        m ? m : "?", now - t0, r->timeout);
            else
                fprintf(stderr, "rendezvous: %d/%d nodes joined, %d/%d records in (%.0f s of %g s)\n", n, n,
                        L.nhave, n, now - t0, r->timeout);
            free(m);
            next_note = now + PROGRESS_EVERY;
        }
        lp_expire(&P, now, verbose);
        double until = deadline < next_note || !chatty ? deadline : next_note;
        if (P.next_exp > 0 && P.next_exp < until)
            until = P.next_exp;
        int ne = epoll_wait(P.ep, evs, (int)(sizeof evs / sizeof evs[0]), (int)((until - now) * 1000) + 1);
        if (ne < 0 && errno != EINTR) {
            p3d_err(err, "rendezvous: epoll: %s", strerror(errno));
            goto out;
        }
        for (int q = 0; q < ne; q++) {
            uint64_t o = evs[q].data.u64;
            if (o == EV_LISTEN) {
                lp_accept(&P, lfd, verbose);
                continue;
            }
            if (o < (uint64_t)P.maxpend) {
                pending *p = &P.pd[o];
                if (p->fd < 0)
                    continue; /* dropped meanwhile */
                unsigned char *body = NULL;
                size_t len = 0;
                int fd = p->fd;
                int type = pending_frame(p, &body, &len);
                int x = type > 0 ? leader_join(&L, p, body, len, type, err) : 0;
                free(body);
                if (x > 0) { /* the connection is node rank x's now */
                    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)P.maxpend + (uint64_t)x};
                    epoll_ctl(P.ep, EPOLL_CTL_MOD, fd, &ev);
                }
                if (p->fd < 0)
                    lp_release(&P, (int)o);
                /* what came with the JOIN (nothing, normally) */
                if (x < 0 || (x > 0 && leader_conn(&L, x, err) < 0)) {
                    p3d_tcp_refuse_all(fds, n, *err);
                    goto out;
                }
                continue;
            }
            int x = (int)(o - (uint64_t)P.maxpend);
            if (fds[x] >= 0 && leader_conn(&L, x, err) < 0) {
                p3d_tcp_refuse_all(fds, n, *err);
                goto out;
            }
        }
    }
    for (int x = 1; x < n; x++)
        set_nonblock(fds[x], 0);
    if (st)
        st->t_join = p3d_now() - t0;
    if (verbose)
        fprintf(stderr, "rendezvous: %d/%d nodes joined, records in through a tree of fan-out %d in %.3f s\n", n, n,
                fanout, p3d_now() - t0);
    rc = 0;
out:
    for (int i = 0; P.pd && i < P.maxpend; i++) {
        if (P.pd[i].fd >= 0)
            close(P.pd[i].fd);
        p3d_framer_free(&P.pd[i].fr);
    }
    for (int i = 0; L.fr && i < n; i++)
        p3d_framer_free(&L.fr[i]);
    if (P.ep >= 0)
        close(P.ep);
    free(P.pd);
    free(P.free);
    free(L.fr);
    free(L.joined);
    free(L.have);
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        p3d_gather_free(g);
    }
    return rc;
}

/* ---- sending down the tree ----------------------------------------------------- */

int p3d_tree_send(const int *fds, const int *ranks, int n, const p3d_wbuf *b, double timeout, p3d_tree_stats *st,
                  char **err)
{
    size_t *off = calloc((size_t)n + 1, sizeof *off);
    struct pollfd *pfd = calloc((size_t)n + 1, sizeof *pfd);
    int *who = calloc((size_t)n + 1, sizeof *who);
    int rc = -1;
    double deadline = p3d_now() + timeout;
    if (!off || !pfd || !who) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (;;) {
        int np = 0;
        for (int i = 0; i < n; i++) {
            if (fds[i] < 0 || off[i] >= b->len)
                continue;
            ssize_t w = send(fds[i], b->p + off[i], b->len - off[i], MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                p3d_err(err, "rendezvous: cannot send the placement to node[%d]: %s", ranks[i], strerror(errno));
                goto out;
            }
            if (w > 0) {
                off[i] += (size_t)w;
                if (st)
                    st->bytes_sent += (uint64_t)w;
            }
            if (off[i] < b->len) {
                pfd[np] = (struct pollfd){.fd = fds[i], .events = POLLOUT};
                who[np++] = i;
            }
        }
        if (!np)
            break;
        double left = deadline - p3d_now();
        if (left <= 0) {
            p3d_err(err, "rendezvous: node[%d] did not take the placement within %g s", ranks[who[0]], timeout);
            goto out;
        }
        if (poll(pfd, (nfds_t)np, (int)(left * 1000) + 1) < 0 && errno != EINTR) {
            p3d_err(err, "rendezvous: poll: %s", strerror(errno));
            goto out;
        }
    }
    rc = 0;
out:
    free(off);
    free(pfd);
    free(who);
    return rc;
}
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


/* Connects to host:port, retrying until the deadline. The fd, or -1 with
 * *err (who: "the leader (node rank 0)" or "the tree parent node[3]"). */
static int connect_retry(const char *host, int port, double t0, double deadline, double timeout, const char *who,
                         int me, int chatty, char **err)
{
    int fd = -1, last = 0;
    double next_note = p3d_now() + PROGRESS_EVERY;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    useconds_t backoff = 20000;
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
        usleep(backoff);
        if (backoff < 500000)
            backoff *= 2;
    }
}

/* The leader's refusal on the control connection, quoted. */
/* The leader's REFUSE into *err. Returns 1 when it refused this node (bad
 * input: exit 2), 0 when it is the leader's own rendezvous timeout, which
 * travels as a refusal too: the rendezvous did not complete (exit 1 on
 * both sides; same par3drun version, so the text is the leader's). */
static int refusal(const unsigned char *body, size_t len, const p3d_rdzv *r, char **err)
{
    p3d_rbuf rb = {.p = body, .len = len};
    char *why = p3d_rbuf_str(&rb, 65536);
    p3d_err(err, "rendezvous: the leader at %s:%d refused node[%d]: %s", r->boot.leader_host, r->boot.leader_port,
            r->boot.node_rank, why ? why : "(no reason given)");
    int bad = !(why && !strncmp(why, TIMEOUT_TEXT, strlen(TIMEOUT_TEXT)));
    free(why);
    return bad;
}

typedef struct agentj {
    const p3d_rdzv *r;
    int me, k, ctrl, up, lfd, verbose;
    int nkids;               /* expected children */
    int *kfd;                /* per child slot (child rank - first), -1 */
    p3d_framer *kfr;
    unsigned char *kdone;
    int ndone;
    int refused;             /* the leader refused this node: exit 2 */
    p3d_gather *g;
    p3d_tree_stats *st;
} agentj;

/* A child's TJOIN on a pending connection: adopts it (its slot) or
 * refuses it (-1). */
static int adopt_child(agentj *A, pending *p, const unsigned char *body, size_t len, int type)
{
    p3d_tjoin t;
    char why[512], *e = NULL;
    const char *verdict = NULL;
    int first = A->k * A->me + 1;
    memset(&t, 0, sizeof t);
    if (type != P3D_MSG_TJOIN) {
        snprintf(why, sizeof why, "expected a tree join, got message type %d", type);
        verdict = why;
    } else {
        int d = p3d_tjoin_decode(body, len, &t, &e);
        verdict = auth_verdict(A->r, t.token, t.proto, t.version, d == 0 ? t.job_id : NULL, why, sizeof why);
        if (!verdict && d < 0) {
            snprintf(why, sizeof why, "%s", e ? e : "malformed TJOIN");
            verdict = why;
        }
    }
    free(e);
    if (!verdict && (t.node_rank < first || t.node_rank >= first + A->nkids)) {
        snprintf(why, sizeof why, "node rank %d is not a child of node[%d] in the tree", t.node_rank, A->me);
        verdict = why;
    } else if (!verdict && A->kfd[t.node_rank - first] >= 0) {
        snprintf(why, sizeof why, "node rank %d already attached", t.node_rank);
        verdict = why;
    }
    if (verdict) {
        fprintf(stderr, "rendezvous: node[%d] refused %s: %s\n", A->me, p->peer, verdict);
        p3d_tcp_refuse(p->fd, verdict);
        close(p->fd);
    } else {
        int c = t.node_rank - first;
        if (A->verbose)
            fprintf(stderr, "rendezvous: node[%d] attached its tree child node[%d] (%s)\n", A->me, t.node_rank, p->peer);
        A->kfd[c] = p->fd;
        A->kfr[c] = p->fr; /* its records may have come in the same read */
        memset(&p->fr, 0, sizeof p->fr);
    }
    int slot = verdict ? -1 : t.node_rank - first;
    p->fd = -1;
    p3d_framer_free(&p->fr);
    p3d_tjoin_free(&t);
    return slot;
}

/* Frames from an attached child: its subtree's records. */
static int child_event(agentj *A, int c, char **err)
{
    int x = A->k * A->me + 1 + c;
    char *e = NULL;
    int f = p3d_framer_fill(&A->kfr[c], A->kfd[c], &e);
    unsigned char *body;
    size_t len;
    int type;
    while (f >= 0 && (type = p3d_framer_take(&A->kfr[c], &body, &len)) > 0) {
        if (A->st)
            A->st->bytes_recv += len + 5;
        if (type == P3D_MSG_GATHER && !A->kdone[c]) {
            p3d_gather g;
            char *de = NULL;
            int bad = p3d_gather_decode(body, len, A->r->boot.nnodes, &g, &de) < 0;
            for (int i = 0; !bad && i < g.nrec; i++)
                bad = !in_subtree(g.recs[i].rank, x, A->k);
            if (bad) {
                p3d_err(err, "rendezvous: node[%d] sent bad records to node[%d]: %s", x, A->me,
                        de ? de : "a record outside its subtree");
                free(de);
                if (g.recs)
                    p3d_gather_free(&g);
                free(body);
                free(e);
                return -1;
            }
            A->kdone[c] = 1;
            A->ndone++;
            if (p3d_gather_merge(A->g, &g, err) < 0) {
                free(body);
                free(e);
                return -1;
            }
        }
        free(body);
    }
    if (f < 0) {
        /* the leader notices the lost child too and ends the rendezvous */
        if (A->verbose)
            fprintf(stderr, "rendezvous: node[%d] lost its tree child node[%d] (%s)\n", A->me, x, e ? e : "?");
        close(A->kfd[c]);
        A->kfd[c] = -1;
        p3d_framer_free(&A->kfr[c]);
    }
    free(e);
    return 0;
}

/* Reads one frame exactly (nothing past it: what follows on the control
 * connection is the fate channel's). */
static int read_exact(int fd, unsigned char **body, size_t *len, char **e)
{
    set_nonblock(fd, 0);
    int t = p3d_frame_read(fd, body, len, e);
    set_nonblock(fd, 1);
    if (t == 0)
        p3d_err(e, "closed");
    return t;
}

/* A frame or an EOF on the control or the parent connection. 1: the
 * placement (from the parent) in *out; 0: nothing to act on; -1: the
 * rendezvous is over for this node (*err says why). */
static int updown_event(agentj *A, int fd, int parent, unsigned char **out, size_t *outn, char **err)
{
    unsigned char *body = NULL;
    size_t len = 0;
    char *e = NULL;
    int type = read_exact(fd, &body, &len, &e);
    if (type > 0 && A->st)
        A->st->bytes_recv += len + 5;
    if (type == P3D_MSG_REFUSE) {
        A->refused = refusal(body, len, A->r, err);
        free(body);
        free(e);
        return -1;
    }
    if (type == P3D_MSG_CPLACE && fd == A->up) {
        *out = body;
        *outn = len;
        free(e);
        return 1;
    }
    free(body);
    if (type > 0) {
        free(e);
        return 0;
    }
    if (fd == A->ctrl) {
        p3d_err(err, "rendezvous: node[%d] lost the connection to the leader at %s:%d (%s)", A->me,
                A->r->boot.leader_host, A->r->boot.leader_port, e ? e : "?");
        free(e);
        return -1;
    }
    /* the parent is gone: the leader sees it too and says why; a few
     * seconds for that, then our own words */
    close(A->up);
    A->up = -1;
    struct pollfd c1 = {.fd = A->ctrl, .events = POLLIN};
    if (poll(&c1, 1, 5000) > 0) {
        char *e2 = NULL;
        body = NULL;
        int t2 = read_exact(A->ctrl, &body, &len, &e2);
        if (t2 == P3D_MSG_REFUSE) {
            A->refused = refusal(body, len, A->r, err);
            free(body);
            free(e);
            free(e2);
            return -1;
        }
        free(body);
        free(e2);
    }
    p3d_err(err, "rendezvous: node[%d] lost its tree parent node[%d] before the placement came (%s); the job "
                 "cannot start",
            A->me, parent, e ? e : "?");
    free(e);
    return -1;
}

/* The placement from the parent. 0 with *body, or -1. */
static int wait_place(agentj *A, double until, int parent, unsigned char **out, size_t *outn, char **err)
{
    double t0 = p3d_now();
    for (;;) {
        double now = p3d_now();
        if (now >= until)
            return p3d_err(err, "rendezvous: no placement from the leader at %s:%d after %.0f s",
                           A->r->boot.leader_host, A->r->boot.leader_port, now - t0);
        struct pollfd pfd[2] = {{.fd = A->ctrl, .events = POLLIN}, {.fd = A->up, .events = POLLIN}};
        int np = A->up >= 0 && A->up != A->ctrl ? 2 : 1;
        int pr = poll(pfd, (nfds_t)np, (int)((until - now) * 1000) + 1);
        if (pr < 0 && errno != EINTR)
            return p3d_err(err, "rendezvous: poll: %s", strerror(errno));
        for (int q = 0; q < np && pr > 0; q++) {
            if (!pfd[q].revents)
                continue;
            int k = updown_event(A, pfd[q].fd, parent, out, outn, err);
            if (k != 0)
                return k > 0 ? 0 : -1;
        }
    }
}

/* Attaches the children and collects their records, watching the
 * control and the parent connections. 0 when all are in, or -1. */
static int agent_wait(agentj *A, double until, pending *pd, int maxpend, char **err)
{
    int chatty = A->verbose || isatty(2);
    double t0 = p3d_now(), next_note = t0 + PROGRESS_EVERY;
    int cap = 3 + maxpend + A->nkids;
    struct pollfd *pfd = calloc((size_t)cap, sizeof *pfd);
    int *owner = calloc((size_t)cap, sizeof *owner);
    int rc = -1;
    if (!pfd || !owner) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (;;) {
        if (A->ndone == A->nkids) {
            rc = 0;
            goto out;
        }
        double now = p3d_now();
        if (now >= until) {
            p3d_err(err, "rendezvous: node[%d]: %d of its %d tree children never sent their records", A->me,
                    A->nkids - A->ndone, A->nkids);
            goto out;
        }
        double lim = until;
        if (chatty && next_note < lim)
            lim = next_note;
        if (chatty && now >= next_note) {
            fprintf(stderr, "rendezvous: node[%d] joined, waiting for the other nodes (%.0f s)\n", A->me, now - t0);
            next_note = now + PROGRESS_EVERY;
        }
        expire_pending(pd, maxpend, now, &lim, A->verbose);
        int np = 0;
        pfd[np] = (struct pollfd){.fd = A->ctrl, .events = POLLIN};
        owner[np++] = -1;
        if (A->up != A->ctrl) {
            pfd[np] = (struct pollfd){.fd = A->up, .events = POLLIN};
            owner[np++] = -2;
        }
        if (A->lfd >= 0) {
            pfd[np] = (struct pollfd){.fd = A->lfd, .events = POLLIN};
            owner[np++] = -3;
        }
        for (int i = 0; i < maxpend; i++)
            if (pd[i].fd >= 0) {
                pfd[np] = (struct pollfd){.fd = pd[i].fd, .events = POLLIN};
                owner[np++] = 1000000 + i;
            }
        for (int c = 0; c < A->nkids; c++)
            if (A->kfd[c] >= 0 && !A->kdone[c]) {
                pfd[np] = (struct pollfd){.fd = A->kfd[c], .events = POLLIN};
                owner[np++] = c;
            }
        int pr = poll(pfd, (nfds_t)np, (int)((lim - now) * 1000) + 1);
        if (pr < 0 && errno != EINTR) {
            p3d_err(err, "rendezvous: poll: %s", strerror(errno));
            goto out;
        }
        for (int q = 0; q < np && pr > 0; q++) {
            if (!pfd[q].revents)
                continue;
            int o = owner[q], type;
            unsigned char *body = NULL;
            size_t len = 0;
            if (o == -1 || o == -2) {
                int k = updown_event(A, o == -1 ? A->ctrl : A->up, tree_parent(A->me, A->k), &body, &len, err);
                free(body);
                if (k != 0) {
                    if (k > 0)
                        p3d_err(err, "rendezvous: node[%d] got the placement before it sent its records", A->me);
                    goto out;
                }
            } else if (o == -3) {
                accept_all(A->lfd, pd, maxpend, A->verbose);
            } else if (o >= 1000000) {
                pending *p = &pd[o - 1000000];
                if (p->fd != pfd[q].fd)
                    continue;
                type = pending_frame(p, &body, &len);
                int c = type > 0 ? adopt_child(A, p, body, len, type) : -1;
                free(body);
                if (c >= 0 && child_event(A, c, err) < 0)
                    goto out;
            } else if (child_event(A, o, err) < 0) {
                goto out;
            }
        }
    }
out:
    free(pfd);
    free(owner);
    return rc;
}

int p3d_tree_join(const p3d_rdzv *r, p3d_join *mine, p3d_gather *me, p3d_place_msg *out, int verbose,
                  p3d_tree_stats *st, char **err)
{
    const char *host = r->boot.leader_host;
    int port = r->boot.leader_port, rc = -1, maxpend = 0;
    double t0 = p3d_now(), deadline = t0 + r->timeout;
    int chatty = verbose || isatty(2);
    agentj A = {.r = r, .me = r->boot.node_rank, .ctrl = -1, .up = -1, .lfd = -1, .verbose = verbose, .g = me,
                .st = st};
    pending *pd = NULL;
    p3d_treepos pos;
    p3d_wbuf b = {0};
    unsigned char *body = NULL;
    size_t len = 0;
    memset(&pos, 0, sizeof pos);
    A.ctrl = connect_retry(host, port, t0, deadline, r->timeout, "the leader (node rank 0)", A.me, chatty, err);
    if (A.ctrl < 0)
        goto out;
    /* the address the leader sees us at is the one others reach us at;
     * children attach there */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[128] = "";
    if (getsockname(A.ctrl, (struct sockaddr *)&ss, &sl) == 0)
        getnameinfo((struct sockaddr *)&ss, sl, addr, sizeof addr, NULL, 0, NI_NUMERICHOST);
    free(mine->addr);
    mine->addr = strdup(addr);
    for (int i = 0; i < me->nrec; i++)
        if (me->recs[i].rank == A.me) {
            free(me->recs[i].addr);
            me->recs[i].addr = strdup(addr);
        }
    char *le = NULL;
    A.lfd = p3d_tcp_listen(addr, 0, &mine->port, &le);
    if (A.lfd < 0) {
        /* without a listening socket this node can only be a leaf */
        if (verbose)
            fprintf(stderr, "rendezvous: node[%d] cannot listen for tree children: %s\n", A.me, le);
        mine->port = 0;
    }
    free(le);
    if (p3d_join_encode(mine, &b) < 0 || p3d_frame_write(A.ctrl, &b, NULL) < 0) {
        p3d_err(err, "rendezvous: cannot send to the leader at %s:%d", host, port);
        goto out;
    }
    if (st)
        st->bytes_sent += b.len;
    set_nonblock(A.ctrl, 1);
    /* the position in the tree: when our parent has joined */
    A.up = A.ctrl;
    A.k = 1;
    {
        double until = deadline + 30;
        for (;;) {
            struct pollfd p = {.fd = A.ctrl, .events = POLLIN};
            double now = p3d_now();
            if (now >= until) {
                p3d_err(err, "rendezvous: no answer from the leader at %s:%d after %.0f s", host, port, now - t0);
                goto out;
            }
            int pr = poll(&p, 1, chatty ? 5000 : (int)((until - now) * 1000) + 1);
            if (pr < 0 && errno != EINTR) {
                p3d_err(err, "rendezvous: poll: %s", strerror(errno));
                goto out;
            }
            if (pr == 0) {
                if (chatty)
                    fprintf(stderr, "rendezvous: node[%d] joined, waiting for the other nodes (%.0f s of %g s)\n",
                            A.me, p3d_now() - t0, r->timeout);
                continue;
            }
            char *e = NULL;
            int type = read_exact(A.ctrl, &body, &len, &e);
            if (type > 0 && st)
                st->bytes_recv += len + 5;
            if (type == P3D_MSG_REFUSE) {
                A.refused = refusal(body, len, r, err);
                free(e);
                goto out;
            }
            if (type <= 0) {
                p3d_err(err, "rendezvous: the leader at %s:%d closed the connection: %s", host, port, e ? e : "?");
                free(e);
                goto out;
            }
            free(e);
            if (type == P3D_MSG_TREE) {
                if (p3d_treepos_decode(body, len, &pos, err) < 0)
                    goto out;
                break;
            }
            if (type > 0) {
                p3d_err(err, "rendezvous: the leader sent message type %d, expected the tree position", type);
                goto out;
            }
            free(body);
            body = NULL;
        }
        free(body);
        body = NULL;
    }
    /* the leader's fan-out: our children are k*me+1 .. */
    A.nkids = pos.nchildren;
    A.k = pos.fanout;
    if (pos.parent > 0) {
        char who[64];
        snprintf(who, sizeof who, "the tree parent node[%d]", pos.parent);
        A.up = connect_retry(pos.addr, pos.port, t0, deadline, r->timeout, who, A.me, chatty, err);
        if (A.up < 0)
            goto out;
        p3d_tjoin t = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .token = (char *)r->boot.token,
                       .job_id = (char *)r->boot.job_id, .node_rank = A.me};
        if (p3d_tjoin_encode(&t, &b) < 0 || p3d_frame_write(A.up, &b, NULL) < 0) {
            p3d_err(err, "rendezvous: cannot send to the tree parent node[%d] at %s:%d", pos.parent, pos.addr, pos.port);
            goto out;
        }
        if (st)
            st->bytes_sent += b.len;
        set_nonblock(A.up, 1);
    }
    /* the children: attach, send their subtrees' records */
    maxpend = 2 * A.nkids + 16;
    pd = calloc((size_t)maxpend, sizeof *pd);
    A.kfd = calloc((size_t)A.nkids + 1, sizeof *A.kfd);
    A.kfr = calloc((size_t)A.nkids + 1, sizeof *A.kfr);
    A.kdone = calloc((size_t)A.nkids + 1, 1);
    if (!pd || !A.kfd || !A.kfr || !A.kdone) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < maxpend; i++)
        pd[i].fd = -1;
    for (int c = 0; c < A.nkids; c++)
        A.kfd[c] = -1;
    if (A.nkids == 0 && A.lfd >= 0) {
        close(A.lfd);
        A.lfd = -1;
    }
    if (A.nkids > 0 && verbose)
        fprintf(stderr, "rendezvous: node[%d] listening for its %d tree children on %s:%d\n", A.me, A.nkids,
                mine->addr, mine->port);
    if (agent_wait(&A, deadline + 15, pd, maxpend, err) < 0)
        goto out;
    if (A.lfd >= 0) {
        close(A.lfd);
        A.lfd = -1;
    }
    for (int i = 0; i < maxpend; i++)
        if (pd[i].fd >= 0)
            drop_pending(&pd[i], "the tree children are all in", verbose);
    if (p3d_gather_encode(me, &b) < 0) {
        p3d_err(err, "rendezvous: cannot encode the subtree's records (out of memory, or over %u bytes)",
                P3D_WIRE_MAX);
        goto out;
    }
    set_nonblock(A.up, 0);
    if (p3d_frame_write(A.up, &b, NULL) < 0) {
        p3d_err(err, "rendezvous: cannot send the records to node[%d]", pos.parent);
        goto out;
    }
    set_nonblock(A.up, 1);
    if (st)
        st->bytes_sent += b.len;
    /* the placement: from the parent, passed on to the children */
    if (wait_place(&A, deadline + 30 + 0.01 * r->boot.nnodes, pos.parent, &body, &len, err) < 0)
        goto out;
    if (A.nkids > 0) {
        p3d_wbuf fw = {0};
        p3d_wbuf_begin(&fw, P3D_MSG_CPLACE);
        p3d_wbuf_bytes(&fw, body, len);
        int ranks[P3D_FANOUT_MAX];
        for (int c = 0; c < A.nkids && c < P3D_FANOUT_MAX; c++)
            ranks[c] = A.k * A.me + 1 + c;
        int e = p3d_wbuf_end(&fw) < 0 ? -1 : p3d_tree_send(A.kfd, ranks, A.nkids, &fw, 30, st, err);
        p3d_wbuf_free(&fw);
        if (e < 0)
            goto out;
    }
    if (p3d_cplace_decode(body, len, out, err) < 0)
        goto out;
    set_nonblock(A.ctrl, 0);
    rc = A.ctrl;
    A.ctrl = -1;
out:
    if (A.ctrl >= 0)
        close(A.ctrl);
    if (A.up >= 0 && A.up != A.ctrl && A.up != rc)
        close(A.up);
    if (A.lfd >= 0)
        close(A.lfd);
    for (int i = 0; pd && i < maxpend; i++)
        if (pd[i].fd >= 0) {
            close(pd[i].fd);
            p3d_framer_free(&pd[i].fr);
        }
    for (int c = 0; A.kfd && c < A.nkids; c++) {
        if (A.kfd[c] >= 0)
            close(A.kfd[c]);
        p3d_framer_free(&A.kfr[c]);
    }
    free(pd);
    free(A.kfd);
    free(A.kfr);
    free(A.kdone);
    free(body);
    p3d_treepos_free(&pos);
    p3d_wbuf_free(&b);
    return rc < 0 && A.refused ? -2 : rc;
}
