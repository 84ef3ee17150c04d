/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * swarm.c — bench/swarm: one process plays N agents of a multi-node job
 * against a real leader, to measure the rendezvous at 1,024..16,384 nodes
 * on one small machine (issue 16; bench/swarm.sh runs it).
 *
 *   swarm N [FANOUT] [TP PP]
 *   swarm detect N [INTERVALS]   (the slow-node detection at the leader: below)
 *
 * The leader is a forked child running the launcher's own code
 * (p3d_tree_gather, p3d_mnode_place, p3d_tree_send: what mnode.c runs);
 * its peak RSS is the child's ru_maxrss. The N-1 agents live in this
 * process: one epoll loop, real TCP on loopback, the project's wire code
 * (JOIN, TREE, TJOIN, GATHER, CPLACE encoders and decoders, p3d_gather_merge
 * at every interior agent). Every simulated node has the same 8-GPU record
 * (an nvidia-smi fixture), 32 nodes a rack. A few agents (the last rank, a
 * leaf under the leader, an interior one) expand the placement they got and
 * compare the JSON with the leader's. Prints one JSON object.
 *
 * File descriptors: the agents hold ~3 per simulated agent, the leader ~1
 * per node. The soft limit is raised to the hard one; when that is too
 * small for one process (20,000 here: 16,384 agents need ~50,000), the
 * agents are dealt to P forked players (rank % P), each with its own epoll
 * loop, talking to each other over the same loopback TCP.
 */
#include "cli.h"
#include "controller.h"
#include "agent.h"
#include "loop.h"
#include "mnode.h"
#include "rdzv.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "swarm-bench-token-0123456789"

static int N, K, P = 1, W = 0;
static int leader_port;

static void die(const char *what, const char *e)
{
    fprintf(stderr, "swarm: %s: %s\n", what, e ? e : strerror(errno));
    exit(1);
}

/* ---- the leader (a child process) -------------------------------------------- */

typedef struct lead_out {
    double t_join, t_place, t_send, t_total;
    uint64_t sent, recv;
    size_t json_len, cplace_len;
    uint64_t json_hash;
    int ok;
    /* SWARM_REPLACE=1: a node lost after the placement, placed again */
    double t_replace, t_rexpand;
    size_t rframe_len, delta_len;
    double t_delta;
    int moved;
} lead_out;

static int replace_mode(void)
{
    const char *e = getenv("SWARM_REPLACE");
    return e && strcmp(e, "1") == 0;
}

static void leader(int lfd, int port, const char *topo, int tp, int pp, int wfd)
{
    char ns[16], tps[16], pps[16], ks[16], sps[16];
    snprintf(ns, sizeof ns, "%d", N);
    snprintf(sps, sizeof sps, "%d", replace_mode() ? N / 32 : 0); /* one spare a rack */
    snprintf(tps, sizeof tps, "%d", tp);
    snprintf(pps, sizeof pps, "%d", pp);
    snprintf(ks, sizeof ks, "%d", K);
    char *argv[] = {"par3drun", "--tp", tps, "--pp", pps, "--nnodes", ns, "--node-rank", "0", "--rdzv-fanout", ks,
                    "--spares", sps, "--topology", (char *)topo, "--", "true", NULL};
    p3d_opts o;
    char *err = NULL;
    if (p3d_cli_parse((int)(sizeof argv / sizeof argv[0]) - 1, argv, &o, &err) < 0)
        die("options", err);
    p3d_rdzv r;
    memset(&r, 0, sizeof r);
    r.ops = &p3d_rdzv_static;
    r.boot.nnodes = N;
    snprintf(r.boot.leader_host, sizeof r.boot.leader_host, "127.0.0.1");
    r.boot.leader_port = port;
    snprintf(r.boot.token, sizeof r.boot.token, TOKEN);
    snprintf(r.boot.job_id, sizeof r.boot.job_id, "swarm");
    r.timeout = 120;
    lead_out out = {0};
    double t0 = p3d_now();
    p3d_tree_stats st = {0};
    p3d_node *t = NULL;
    if (p3d_topo_load(topo, &t, &err) < 0)
        die(topo, err);
    p3d_gather mine = {0}, g;
    p3d_grec rec = {.rank = 0, .hostname = "sim0", .addr = "127.0.0.1", .rack = "r0", .master_port = 29500};
    if (p3d_gather_add(&mine, &rec, t, &err) < 0)
        die("record", err);
    p3d_join j = {.proto = P3D_WIRE_PROTO, .version = strdup(P3D_VERSION), .job_id = strdup("swarm"), .nnodes = N, .hostname = strdup("sim0"), .addr = strdup("127.0.0.1"),
                  .port = port};
    p3d_chan **chans = calloc((size_t)N, sizeof *chans);
    p3d_join *joins = calloc((size_t)N, sizeof *joins);
    if (p3d_tree_gather(lfd, &r, K, &j, &mine, &g, chans, joins, 0, &st, &err) < 0)
        die("gather", err);
    p3d_wbuf frame = {0};
    p3d_plan_result keep;
    p3d_mpeer *peers = NULL;
    if (p3d_mnode_place_keep(&o, &r, &g, N, &frame, &st, &keep, &peers, NULL, &err) < 0)
        die("place", err);
    int nk = N - 1 < K ? N - 1 : K, ranks[P3D_FANOUT_MAX];
    for (int i = 0; i < nk; i++)
        ranks[i] = i + 1;
    double t1 = p3d_now();
    if (p3d_tree_send(chans + 1, ranks, nk, &frame, 60, &st, &err) < 0)
        die("send", err);
    out.t_send = p3d_now() - t1;
    out.t_total = p3d_now() - t0;
    p3d_place_msg pm;
    if (p3d_cplace_decode(frame.p + 5, frame.len - 5, &pm, &err) < 0)
        die("expand", err);
    out.t_join = st.t_join;
    out.t_place = st.t_place;
    out.sent = st.bytes_sent;
    out.recv = st.bytes_recv;
    out.json_len = st.json_len;
    out.cplace_len = st.cplace_len;
    out.json_hash = p3d_delta_hash((const unsigned char *)pm.json, pm.json_len);
    if (replace_mode()) {
        /* what the leader does when node N/2 is lost (mnode.c
         * mnode_replace): place again with job.previous, render, encode;
         * the frame then goes to every surviving node over its control
         * connection. Timed here, not sent (the players have hung up). */
        int lost = N / 2, *was = NULL;
        char *msg = NULL;
        double t2 = p3d_now();
        if (p3d_replace_place(&o, &keep, &lost, 1, 1, "swarm", -1, t2, &was, &msg) != 0)
            die("replace", msg);
        p3d_report_in in = p3d_plan_report_in(&keep);
        char *json = p3d_report_json(&in);
        p3d_wbuf rf = {0};
        int compact = 0;
        if (!json || p3d_mnode_encode(&o, "swarm", &keep, peers, json, &rf, &compact, &err) < 0)
            die("replace encode", err);
        out.t_replace = p3d_now() - t2;
        for (int q = 0; q < keep.pl->world; q++)
            out.moved += keep.pl->ranks[q].node != was[q];
        out.rframe_len = rf.len;
        /* what mnode.c sends instead: the difference from the placement
         * every node holds (mnode_delta.c), checked by applying it */
        p3d_wbuf dl = {0};
        t2 = p3d_now();
        if (p3d_delta_make(frame.p + 5, frame.len - 5, rf.p + 5, rf.len - 5, &dl) < 0)
            die("delta", "cannot make the difference");
        out.t_delta = p3d_now() - t2;
        out.delta_len = dl.len + 5;
        unsigned char *back = NULL;
        size_t backn = 0;
        if (p3d_delta_apply(frame.p + 5, frame.len - 5, dl.p, dl.len, &back, &backn, &err) < 0 ||
            backn != rf.len - 5 || memcmp(back, rf.p + 5, backn) != 0)
            die("delta", err ? err : "applied, it is not the new placement");
        free(back);
        p3d_wbuf_free(&dl);
        p3d_place_msg rm;
        t2 = p3d_now();
        if (p3d_cplace_decode(rf.p + 5, rf.len - 5, &rm, &err) < 0)
            die("replace expand", err);
        out.t_rexpand = p3d_now() - t2;
        if (rm.json_len != strlen(json) || memcmp(rm.json, json, rm.json_len) != 0)
            die("replace expand", "the expanded JSON differs from the leader's");
        p3d_place_msg_free(&rm);
        p3d_wbuf_free(&rf);
        free(json);
        free(was);
        free(msg);
    }
    out.ok = 1;
    if (write(wfd, &out, sizeof out) != (ssize_t)sizeof out)
        die("pipe", NULL);
    /* the agents hang up once they have the placement */
    for (int i = 1; i < N; i++) {
        char b[64];
        if (chans[i])
            while (read(chans[i]->fd, b, sizeof b) > 0)
                ;
    }
    _exit(0);
}

/* ---- the swarm ------------------------------------------------------------------ */

typedef struct conn {
    int fd, agent, kind;         /* kind: 0 ctrl, 1 up (to parent), 2 child link, 3 listen */
    p3d_framer fr;
    p3d_hs hs;                   /* the handshake (wire_chan.c), then */
    p3d_chan *ch;                /*   the channel's keys and counters */
    p3d_wbuf after;              /* initiator: the first frame, sent with its proof */
    p3d_wbuf after2;             /*   and the records, when they were ready before it */
    const unsigned char *out;    /* pending output (not owned unless own) */
    size_t outlen, outoff;
    unsigned char *own;
    int waiting;                 /* EPOLLOUT armed */
} conn;

typedef struct sagent {
    int rank, parent, nkids, kids_in, lport;
    conn *ctrl, *up, *lis;
    conn **kids;
    p3d_gather g;
    int state;                   /* 0 joining, 1 gathering, 2 sent records, 3 done */
} sagent;

static int ep;
static sagent *ag;
static unsigned char *cplace;    /* the placement frame as first received */
static size_t cplace_len;
static int ndone;
static int pending_out;
static int mine_total;
static double t_start;        /* connections with output still queued */
static int started, joined; /* JOINs sent, TREE answers received */
#define LAUNCH_WAVE 1024
static uint64_t *sent;
static p3d_node *shared_topo;
static int samples[3];
static uint64_t sample_hash[3];

static void watch(conn *c, int out)
{
    struct epoll_event e = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e) < 0)
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
}

static conn *new_conn(int fd, int agent, int kind)
{
    conn *c = calloc(1, sizeof *c);
    c->fd = fd;
    c->agent = agent;
    c->kind = kind;
    watch(c, 0);
    return c;
}

static void flush(conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w <= 0) {
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (!c->waiting) {
                    c->waiting = 1;
                    pending_out++;
                    watch(c, 1);
                }
                return;
            }
            die("send", NULL);
        }
        c->outoff += (size_t)w;
        sent[c->agent] += (uint64_t)w;
    }
    free(c->own);
    c->own = NULL;
    c->out = NULL;
    c->outlen = c->outoff = 0;
    if (c->waiting) {
        c->waiting = 0;
        pending_out--;
        watch(c, 0);
    }
}

static void queue(conn *c, const unsigned char *p, size_t n, int copy)
{
    if (copy) {
        c->own = malloc(n);
        memcpy(c->own, p, n);
        p = c->own;
    }
    c->out = p;
    c->outlen = n;
    c->outoff = 0;
    flush(c);
}

static void queue_wbuf(conn *c, p3d_wbuf *b)
{
    queue(c, b->p, b->len, 1);
    p3d_wbuf_free(b);
}

/* Appends frame b, tagged as c's next frame, to out (as p3d_chan_send puts
 * it on the wire). */
static void tag_into(conn *c, const p3d_wbuf *b, p3d_wbuf *out)
{
    unsigned char tag[P3D_TAG_LEN];
    p3d_wbuf f = {0};
    p3d_wbuf_bytes(&f, b->p, b->len);
    if (!c->ch || f.oom || p3d_chan_reserve(&f) < 0 || p3d_chan_tag(c->ch, b, tag) < 0)
        die("tag", "cannot tag a frame");
    p3d_wbuf_bytes(out, f.p, f.len);
    p3d_wbuf_bytes(out, tag, sizeof tag);
    p3d_wbuf_free(&f);
}

/* Queues frame b on c's channel, tagged. */
static void queue_frame(conn *c, p3d_wbuf *b)
{
    p3d_wbuf out = {0};
    tag_into(c, b, &out);
    p3d_wbuf_free(b);
    queue_wbuf(c, &out);
}

/* Starts the handshake on c: the initiator's challenge goes out (first is
 * sent once the peer proved the key), an acceptor waits for one. */
static void start_auth(conn *c, int acceptor, int kind, p3d_wbuf *first)
{
    p3d_wbuf out = {0};
    char *err = NULL;
    if (p3d_hs_start(&c->hs, TOKEN, acceptor, kind, &out, &err) < 0)
        die("handshake", err);
    if (first) {
        c->after = *first;
        memset(first, 0, sizeof *first);
    }
    if (out.len)
        queue_wbuf(c, &out);
    p3d_wbuf_free(&out);
}

/* A handshake frame on c. */
static void auth_step(conn *c, int type, const unsigned char *body, size_t len)
{
    p3d_wbuf out = {0};
    char *err = NULL;
    int rc = p3d_hs_step(&c->hs, type, body, len, &out, &err);
    if (rc < 0)
        die("handshake", err);
    if (rc == 1 && !(c->ch = p3d_chan_new(&c->hs, c->fd, NULL, "swarm")))
        die("handshake", "out of memory");
    if (rc == 1 && c->after.len) {
        tag_into(c, &c->after, &out);
        p3d_wbuf_free(&c->after);
    }
    if (rc == 1 && c->after2.len) {
        tag_into(c, &c->after2, &out);
        p3d_wbuf_free(&c->after2);
    }
    if (out.len)
        queue_wbuf(c, &out);
    p3d_wbuf_free(&out);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS))
        die("connect", NULL);
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    return fd;
}

/* The subtree's records go up once every child's are in. */
static void send_up(sagent *a)
{
    if (a->state != 1 || a->kids_in < a->nkids)
        return;
    p3d_wbuf b = {0};
    char *err = NULL;
    if (p3d_gather_encode(&a->g, &b) < 0)
        die("gather encode", NULL);
    if (!a->nkids)
        a->g.topos[0] = NULL; /* a leaf's record points at the shared topology */
    p3d_gather_free(&a->g);
    (void)err;
    a->state = 2;
    if (!a->up->ch) { /* the parent has not proved the key yet */
        a->up->after2 = b;
        return;
    }
    queue_frame(a->up, &b);
}

static void got_place(sagent *a, const unsigned char *body, size_t len)
{
    if (!cplace) {
        cplace_len = len + 5;
        cplace = malloc(cplace_len);
        p3d_wbuf b = {0};
        p3d_wbuf_begin(&b, P3D_MSG_CPLACE);
        p3d_wbuf_bytes(&b, body, len);
        p3d_wbuf_end(&b);
        memcpy(cplace, b.p, cplace_len);
        p3d_wbuf_free(&b);
    } else if (len + 5 != cplace_len || memcmp(cplace + 5, body, len)) {
        die("placement", "two agents received different bytes");
    }
    for (int c = 0; c < a->nkids; c++) {
        /* the same bytes, each child's own tag */
        p3d_wbuf f = {0};
        p3d_wbuf_bytes(&f, cplace, cplace_len);
        queue_frame(a->kids[c], &f);
    }
    a->state = 3;
    ndone++;
    if (ndone == mine_total && getenv("SWARM_VERBOSE"))
        fprintf(stderr, "swarm: player %d: all %d agents have the placement at %.3f s\n", W, ndone, p3d_now() - t_start);
}

static void on_frame(conn *c, int type, unsigned char *body, size_t len)
{
    sagent *a = &ag[c->agent];
    char *err = NULL;
    if (type == P3D_MSG_REFUSE)
        die("refused", (const char *)body + 4);
    if (c->kind == 0 && type == P3D_MSG_TREE) {
        p3d_treepos t;
        if (p3d_treepos_decode(body, len, &t, &err) < 0)
            die("tree", err);
        if (t.parent != a->parent || t.nchildren != a->nkids)
            die("tree", "the leader's tree differs from k-ary order");
        if (t.parent == 0) {
            a->up = c;
        } else {
            a->up = new_conn(connect_to(t.port), a->rank, 1);
            p3d_tjoin tj = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .job_id = "swarm",
                            .node_rank = a->rank};
            p3d_wbuf b = {0};
            p3d_tjoin_encode(&tj, &b);
            start_auth(a->up, 0, P3D_LINK_TREE, &b);
        }
        p3d_treepos_free(&t);
        joined++;
        if (joined == mine_total && getenv("SWARM_VERBOSE"))
            fprintf(stderr, "swarm: player %d: all %d agents have their tree position at %.3f s\n", W, joined,
                    p3d_now() - t_start);
        a->state = 1;
        send_up(a);
    } else if (c->kind == 2 && type == P3D_MSG_TJOIN) {
        p3d_tjoin t;
        if (p3d_tjoin_decode(body, len, &t, &err) < 0)
            die("tjoin", err);
        int slot = t.node_rank - (K * a->rank + 1);
        if (slot < 0 || slot >= a->nkids)
            die("tjoin", "not my child");
        a->kids[slot] = c;
        p3d_tjoin_free(&t);
    } else if (c->kind == 2 && type == P3D_MSG_GATHER) {
        p3d_gather g;
        if (p3d_gather_decode(body, len, N, &g, &err) < 0 || p3d_gather_merge(&a->g, &g, &err) < 0)
            die("gather", err);
        a->kids_in++;
        send_up(a);
    } else if (c == a->up && type == P3D_MSG_CPLACE) {
        /* its tag was checked (on_event), as a real agent checks it */
        got_place(a, body, len);
    }
}

static void on_event(conn *c, uint32_t ev)
{
    if (c->kind == 3) {
        for (;;) {
            int fd = accept4(c->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                return;
            int on = 1; /* as the real agents' accepted connections (keepalive()) */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
            start_auth(new_conn(fd, c->agent, 2), 1, P3D_LINK_TREE, NULL);
        }
    }
    if (ev & EPOLLOUT)
        flush(c);
    if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    char *err = NULL;
    int f = p3d_framer_fill(&c->fr, c->fd, &err);
    unsigned char *body;
    size_t len;
    int type;
    while ((type = p3d_framer_take(&c->fr, &body, &len)) > 0) {
        if (!c->ch)
            auth_step(c, type, body, len);
        else if (p3d_chan_open(c->ch, type, body, &len, &err) < 0)
            die("tag", err);
        else
            on_frame(c, type, body, len);
        free(body);
    }
    if (f < 0) {
        free(err);
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    }
}

/* Starts simulated agent i: its listening socket (interior), its record,
 * its control connection and JOIN. */
static void start_agent(int i)
{
    char *err = NULL;
    sagent *a = &ag[i];
    a->rank = i;
    a->parent = (i - 1) / K;
    long first = (long)K * i + 1;
    a->nkids = first >= N ? 0 : (int)((first + K - 1 < N - 1 ? first + K - 1 : N - 1) - first + 1);
    if (a->nkids) {
        a->kids = calloc((size_t)a->nkids, sizeof *a->kids);
        int l = p3d_tcp_listen("127.0.0.1", 0, &a->lport, &err);
        if (l < 0)
            die("listen", err);
        a->lis = new_conn(l, i, 3);
    }
    /* this node's record: the shared topology, its name and rack */
    char host[32], rack[32];
    snprintf(host, sizeof host, "sim%d", i);
    snprintf(rack, sizeof rack, "r%d", i / 32);
    p3d_wbuf nb = {0};
    p3d_node_encode(shared_topo, &nb);
    p3d_rbuf rb = {.p = nb.p, .len = nb.len};
    p3d_node *t = a->nkids ? p3d_node_decode(&rb, &err) : NULL;
    p3d_wbuf_free(&nb);
    p3d_grec rec = {.rank = i, .hostname = host, .addr = "127.0.0.1", .rack = rack, .master_port = 29500};
    if (t) {
        p3d_gather_add(&a->g, &rec, t, &err);
    } else {
        /* a leaf's records: its own, on the shared topology (no copy) */
        p3d_grec *r = calloc(1, sizeof *r);
        *r = rec;
        r->hostname = strdup(host);
        r->addr = strdup("127.0.0.1");
        r->rack = strdup(rack);
        p3d_node **tp1 = malloc(sizeof *tp1);
        *tp1 = shared_topo;
        a->g = (p3d_gather){.ntopos = 1, .topos = tp1, .nrec = 1, .recs = r};
    }
    a->ctrl = new_conn(connect_to(leader_port), i, 0);
    p3d_join j = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .job_id = "swarm",
                  .nnodes = N, .node_rank = i, .hostname = host, .addr = "127.0.0.1", .port = a->lport};
    p3d_wbuf b = {0};
    p3d_join_encode(&j, &b);
    start_auth(a->ctrl, 0, P3D_LINK_CTRL, &b);
}

/* ---- swarm detect: the slow-node detection's cost at the leader -------- */

/* swarm detect N [INTERVALS]: N simulated nodes each hold a connection to
 * a leader process (a forked child, as in a multi-node job: one fate
 * connection per node) and send, once per interval, the compact per-node
 * progress summary an agent sends (agent_proto.h's 'p', encoded by
 * p3d_amsg_encode, sent by p3d_fate_send: a sealed FATE frame). The leader
 * runs what supervise.c runs for them: p3d_fate_read (framing, the HMAC
 * check, the strict decode) per readable connection, p3d_ctl_message into
 * the real controller, and once per interval p3d_ctl_tick, where
 * controller_slow.c judges every node against its peers (16 peer groups,
 * one per pp stage of tp8 pp16 on 8-GPU nodes). Node N/2 is 3x slower
 * (busy 1.5 s vs 0.5 s +-20%): the detection must name it, and only it.
 * The clock the controller sees is virtual (one --progress-interval of 5 s
 * per round), the CPU time is real: getrusage(RUSAGE_SELF) of the leader
 * around each round (all N packets read, decoded, handed over, and the
 * judgement), and the judgement alone (CPU clock around p3d_ctl_tick).
 * Prints one JSON object. */
typedef struct det_out {
    int ok, rounds, slow_reports, slow_node_named, running;
    double cpu_round_med, cpu_round_max, cpu_tick_med, cpu_tick_max;
    size_t frame_bytes;
    char line[200];
} det_out;

static void det_send(void *ctx, int a, const p3d_amsg *m) { (void)ctx, (void)a, (void)m; }
static void det_kill(void *ctx, int a) { (void)ctx, (void)a; }
static void det_event(void *ctx, const char *f) { (void)ctx, (void)f; }
static void det_say(void *ctx, const char *text)
{
    det_out *o = ctx;
    if (strstr(text, "slower than")) {
        o->slow_reports++;
        if (!o->line[0])
            snprintf(o->line, sizeof o->line, "%s", text);
    }
}

static double cpu_rusage(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double cpu_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

typedef struct det_lead {
    p3d_ctl *ctl;
    int a;
    double now;
    int got;
} det_lead;

static void det_msg(void *ctx, const p3d_amsg *m)
{
    det_lead *d = ctx;
    p3d_ctl_message(d->ctl, d->a, m, d->now);
    d->got++;
}

#define DET_INTERVAL 5.0
#define DET_GROUPS 16

static void det_leader(int lfd, int rounds, int *go, int np, int wfd)
{
    det_out o = {0};
    int *fd_of = calloc((size_t)N, sizeof *fd_of), *group = calloc((size_t)N, sizeof *group);
    char **names = calloc((size_t)N, sizeof *names), **what = calloc((size_t)N, sizeof *what);
    p3d_chan **ch = calloc((size_t)N, sizeof *ch);
    double *cr = calloc((size_t)rounds + 1, sizeof *cr), *ct = calloc((size_t)rounds + 1, sizeof *ct);
    if (!fd_of || !group || !names || !what || !ch || !cr || !ct)
        die("leader", "out of memory");
    int ep = epoll_create1(0);
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) & ~O_NONBLOCK);
    for (int k = 0; k < N; k++) {
        int fd = accept(lfd, NULL, NULL);
        uint32_t a = 0;
        char *e = NULL;
        if (fd < 0 || read(fd, &a, sizeof a) != (ssize_t)sizeof a || a >= (uint32_t)N)
            die("leader accept", NULL);
        /* each player authenticates one connection at a time */
        if (!(ch[a] = p3d_chan_handshake(fd, TOKEN, 1, P3D_LINK_CTRL, p3d_now() + 60, "player", NULL, &e)))
            die("leader handshake", e);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fd_of[a] = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = a};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll", NULL);
    }
    for (int a = 0; a < N; a++) {
        char nm[16], wt[32];
        snprintf(nm, sizeof nm, "n%05d", a);
        snprintf(wt, sizeof wt, "pp stage %d", a % DET_GROUPS);
        names[a] = strdup(nm);
        what[a] = strdup(wt);
        group[a] = a % DET_GROUPS;
    }
    double t = 1000.0;
    p3d_ctl_cfg cfg = {.nagents = N, .names = (const char *const *)names, .nranks = N * 8, .grace = 10,
                       .health_timeout = 30, .leader = -1, .t0 = t, .progress_interval = DET_INTERVAL,
                       .slow_factor = 1.3, .slow_windows = 3};
    p3d_ctl_ops ops = {.ctx = &o, .send = det_send, .kill = det_kill, .say = det_say, .event = det_event};
    p3d_ctl *c = p3d_ctl_new(&cfg, &ops, t);
    if (!c)
        die("leader", "no controller");
    p3d_ctl_set_peers(c, group, (const char *const *)what);
    struct epoll_event evs[256];
    for (int r = 0; r <= rounds; r++) {
        /* round 0: every node's ranks are up (A); then one summary each */
        det_lead d = {.ctl = c, .now = t};
        double c0 = cpu_rusage();
        while (d.got < N) {
            int ne = epoll_wait(ep, evs, 256, 10000);
            if (ne <= 0)
                die("leader", ne == 0 ? "the nodes went quiet" : NULL);
            for (int i = 0; i < ne; i++) {
                char *err = NULL;
                d.a = (int)evs[i].data.u32;
                if (p3d_fate_read(ch[d.a], names[d.a], det_msg, &d, &err) < 0)
                    die("leader read", err);
            }
        }
        t += r ? DET_INTERVAL : 0.001;
        double k0 = cpu_clock();
        p3d_ctl_tick(c, t);
        double k1 = cpu_clock(), c1 = cpu_rusage();
        if (r == 0)
            o.running = p3d_ctl_get_state(c) == P3D_CTL_RUNNING;
        else {
            cr[r - 1] = c1 - c0;
            ct[r - 1] = k1 - k0;
        }
        for (int w = 0; w < np; w++)
            if (write(go[w], "g", 1) != 1)
                die("leader", "a player is gone");
    }
    o.rounds = rounds;
    p3d_ctl_fig f;
    o.slow_node_named = p3d_ctl_figures(c, N / 2, &f) == 1 && f.slow;
    qsort(cr, (size_t)rounds, sizeof *cr, cmp_dbl);
    qsort(ct, (size_t)rounds, sizeof *ct, cmp_dbl);
    o.cpu_round_med = cr[rounds / 2];
    o.cpu_round_max = cr[rounds - 1];
    o.cpu_tick_med = ct[rounds / 2];
    o.cpu_tick_max = ct[rounds - 1];
    o.ok = 1;
    if (write(wfd, &o, sizeof o) != (ssize_t)sizeof o)
        die("leader", "cannot report");
    _exit(0);
}

/* Player w's nodes (a % P == w): connect, then one packet per node and
 * round, the next round once the leader says go. */
static void det_player(int port, int rounds, int go)
{
    int n = 0;
    p3d_chan **fd = calloc((size_t)N / P + 2, sizeof *fd);
    for (int a = W; a < N; a += P) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        uint32_t id = (uint32_t)a;
        if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 ||
            write(s, &id, sizeof id) != (ssize_t)sizeof id)
            die("player connect", NULL);
        char *e = NULL;
        if (!(fd[n++] = p3d_chan_handshake(s, TOKEN, 0, P3D_LINK_CTRL, p3d_now() + 60, "leader", NULL, &e)))
            die("player handshake", e);
    }
    for (int r = 0; r <= rounds; r++) {
        for (int k = 0, a = W; k < n; k++, a += P) {
            p3d_amsg m = {.type = P3D_AM_UP, .gen = 0, .nranks = 8};
            if (r > 0) {
                /* +-20% noise, the same for every run; node N/2 3x slower */
                int noise = (int)(((unsigned)a * 7919u + (unsigned)r * 104729u) % 41u) - 20;
                int busy = 500000 * (100 + noise) / 100;
                m = (p3d_amsg){.type = P3D_AM_PROGRESS, .gen = 0, .step = r * 10, .busy_us =
                               a == N / 2 ? 3 * busy : busy, .ckpt = -1, .nranks = 8};
            }
            char pkt[128];
            int len = p3d_amsg_encode(&m, pkt, sizeof pkt);
            if (len < 0 || p3d_fate_send(fd[k], pkt, (size_t)len) < 0)
                die("player send", NULL);
        }
        char g;
        if (read(go, &g, 1) != 1)
            die("player", "the leader is gone");
    }
    _exit(0);
}

static int detect_main(int argc, char **argv)
{
    if (argc < 2 || (N = atoi(argv[1])) < 2) {
        fprintf(stderr, "usage: swarm detect N [INTERVALS]   (N >= 2; INTERVALS default 10)\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    if (rounds < 4) {
        fprintf(stderr, "swarm detect: INTERVALS >= 4 (the detection needs 3 in a row)\n");
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)N + 256) {
        fprintf(stderr, "swarm detect: the leader needs %d file descriptors; ulimit -Hn is %llu\n", N + 256,
                (unsigned long long)rl.rlim_cur);
        return 1;
    }
    P = (int)(((rlim_t)N + rl.rlim_cur - 257) / (rl.rlim_cur - 256));
    signal(SIGPIPE, SIG_IGN);
    char *err = NULL;
    int port = 0, lfd = p3d_tcp_listen("127.0.0.1", 0, &port, &err);
    if (lfd < 0)
        die("listen", err);
    int rp[2], (*go)[2] = calloc((size_t)P, sizeof *go);
    if (!go || pipe(rp) < 0)
        die("pipe", NULL);
    for (int w = 0; w < P; w++)
        if (pipe(go[w]) < 0)
            die("pipe", NULL);
    pid_t lp = fork();
    if (lp == 0) {
        int *gw = calloc((size_t)P, sizeof *gw);
        for (int w = 0; w < P; w++)
            gw[w] = go[w][1];
        det_leader(lfd, rounds, gw, P, rp[1]);
    }
    close(lfd);
    close(rp[1]);
    for (W = 0; W < P; W++)
        if (fork() == 0)
            det_player(port, rounds, go[W][0]);
    det_out o;
    if (read(rp[0], &o, sizeof o) != (ssize_t)sizeof o || !o.ok)
        die("leader", "no figures");
    while (wait(NULL) > 0)
        ;
    free(go);
    /* what one summary costs on the wire: the tagged FATE frame */
    p3d_amsg m = {.type = P3D_AM_PROGRESS, .gen = 0, .step = 100, .busy_us = 500000, .ckpt = 90, .nranks = 8};
    char pkt[128];
    int len = p3d_amsg_encode(&m, pkt, sizeof pkt);
    p3d_wbuf b = {0};
    p3d_wbuf_begin(&b, P3D_MSG_FATE);
    p3d_wbuf_bytes(&b, pkt, (size_t)len);
    if (p3d_wbuf_end(&b) == 0)
        o.frame_bytes = b.len + P3D_TAG_LEN;
    p3d_wbuf_free(&b);
    char *nl = strchr(o.line, '\n');
    if (nl)
        *nl = 0;
    printf("{\"bench\": \"swarm-detect\", \"nodes\": %d, \"peer_groups\": %d, \"intervals\": %d, "
           "\"players\": %d, \"packet_bytes\": %d, \"frame_bytes\": %zu, "
           "\"leader_cpu_s_per_interval\": {\"median\": %.6f, \"max\": %.6f}, "
           "\"judgement_cpu_s_per_interval\": {\"median\": %.6f, \"max\": %.6f}, "
           "\"running\": %s, \"slow_reports\": %d, \"slow_node_named\": %s, \"line\": \"%s\"}\n",
           N, DET_GROUPS, o.rounds, P, len, o.frame_bytes, o.cpu_round_med, o.cpu_round_max, o.cpu_tick_med,
           o.cpu_tick_max, o.running ? "true" : "false", o.slow_reports, o.slow_node_named ? "true" : "false",
           o.line);
    return o.running && o.slow_reports == 1 && o.slow_node_named ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "detect"))
        return detect_main(argc - 1, argv + 1);
    if (argc < 2) {
        fprintf(stderr, "usage: swarm N [FANOUT] [TP PP]   (P3D_DATA_DIR: the source tree)\n");
        return 2;
    }
    N = atoi(argv[1]);
    K = argc > 2 ? atoi(argv[2]) : P3D_FANOUT_DEFAULT;
    int tp = argc > 4 ? atoi(argv[3]) : 8, pp = argc > 4 ? atoi(argv[4]) : 16;
    if (N < 2 || K < 1 || K > P3D_FANOUT_MAX) {
        fprintf(stderr, "swarm: N >= 2, FANOUT 1..%d\n", P3D_FANOUT_MAX);
        return 2;
    }
    const char *dd = getenv("P3D_DATA_DIR");
    char topo[4096];
    snprintf(topo, sizeof topo, "%s/tests/fixtures/realdata/topo/dgx-a100_12nic.txt", dd ? dd : ".");
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)N + 256) {
        fprintf(stderr, "swarm: the leader needs %d file descriptors; ulimit -Hn is %llu\n", N + 256,
                (unsigned long long)rl.rlim_cur);
        return 1;
    }
    P = (int)(((rlim_t)N * 3 + rl.rlim_cur - 1025) / (rl.rlim_cur - 1024));
    if (P < 1)
        P = 1;
    signal(SIGPIPE, SIG_IGN);
    char *err = NULL;
    int port = 0;
    int lfd = p3d_tcp_listen("127.0.0.1", 0, &port, &err);
    if (lfd < 0)
        die("listen", err);
    leader_port = port;
    int pp_[2];
    if (pipe(pp_) < 0)
        die("pipe", NULL);
    double t0 = p3d_now();
    pid_t lp = fork();
    if (lp == 0) {
        close(pp_[0]);
        leader(lfd, port, topo, tp, pp, pp_[1]);
    }
    close(lfd);
    close(pp_[1]);
    int rp[2];
    if (pipe(rp) < 0)
        die("pipe", NULL);
    pid_t *players = calloc((size_t)P, sizeof *players);
    for (W = 0; W < P; W++)
        if ((players[W] = fork()) == 0)
            break;
    if (W == P) {
        /* the parent: collects the players' and the leader's figures */
        close(rp[1]);
        uint64_t busy = 0, xs[64][5];
        double t_all = 0, t_exp = 0;
        int same = 1, checked = 0;
        for (int w = 0; w < P && w < 64; w++) {
            if (read(rp[0], xs[w], sizeof xs[w]) != (ssize_t)sizeof xs[w])
                die("player", "no figures");
            if (xs[w][0] > busy)
                busy = xs[w][0];
            double td;
            memcpy(&td, &xs[w][3], sizeof td);
            if (td > t_all)
                t_all = td;
            memcpy(&td, &xs[w][4], sizeof td);
            if (td > t_exp)
                t_exp = td;
        }
        lead_out lo;
        if (read(pp_[0], &lo, sizeof lo) != (ssize_t)sizeof lo || !lo.ok)
            die("leader", "no figures");
        for (int w = 0; w < P && w < 64; w++)
            if (xs[w][2]) {
                checked++;
                same &= xs[w][1] == lo.json_hash;
            }
        same &= checked > 0;
        int stt;
        struct rusage ru;
        wait4(lp, &stt, 0, &ru);
        for (int w = 0; w < P; w++)
            waitpid(players[w], &stt, 0);
        double bound = 4.0 * (double)lo.json_len + 65536.0 * K;
        if (lo.rframe_len)
            fprintf(stderr, "swarm: replacement of node %d: %d ranks moved, placed again + encoded in %.3f s; "
                            "the whole placement %zu bytes (x %d surviving nodes: %.1f MB from the leader), the "
                            "difference sent instead %zu bytes (%.1f MB; made in %.3f s); a node expands it in "
                            "%.3f s\n",
                    N / 2, lo.moved, lo.t_replace, lo.rframe_len, N - 2, (double)lo.rframe_len * (N - 2) / 1e6,
                    lo.delta_len, (double)lo.delta_len * (N - 2) / 1e6, lo.t_delta, lo.t_rexpand);
        printf("{\"nodes\": %d, \"gpus\": %d, \"fanout\": %d, \"tp\": %d, \"pp\": %d, \"players\": %d, "
               "\"join_s\": %.3f, \"place_s\": %.3f, \"send_s\": %.3f, \"total_s\": %.3f, \"node_expand_s\": %.3f, \"json_bytes\": %zu, "
               "\"cplace_bytes\": %zu, \"leader_sent\": %llu, \"leader_bound\": %.0f, \"leader_recv\": %llu, "
               "\"busiest_agent_sent\": %llu, \"leader_rss_mib\": %.1f, \"leader_cpu_s\": %.2f, \"samples_same_json\": %s, "
               "\"within\": {\"bytes\": %s, \"time_30s\": %s, \"rss_2gib\": %s}}\n",
               N, N * 8, K, tp, pp, P, lo.t_join, lo.t_place, lo.t_send, t_all, t_exp, lo.json_len, lo.cplace_len,
               (unsigned long long)lo.sent, bound, (unsigned long long)lo.recv, (unsigned long long)busy,
               ru.ru_maxrss / 1024.0, ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6, same ? "true" : "false", (double)lo.sent <= bound ? "true" : "false",
               t_all < 30 ? "true" : "false", ru.ru_maxrss < 2 * 1024 * 1024 ? "true" : "false");
        free(players);
        fflush(stdout);
        return same ? 0 : 1;
    }
    close(rp[0]);
    close(pp_[0]);
    /* a player: thousands of 40-150 KiB frames come and go; keep them in
     * the heap rather than mmap/munmap each (page faults and TLB flushes
     * were most of the players' time). The leader keeps glibc's defaults. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (p3d_topo_load(topo, &shared_topo, &err) < 0)
        die(topo, err);
    ep = epoll_create1(EPOLL_CLOEXEC);
    ag = calloc((size_t)N, sizeof *ag);
    sent = calloc((size_t)N, sizeof *sent);
    samples[0] = N - 1;
    samples[1] = K < N - 1 ? K : 1;
    samples[2] = 1;
    int mine_n = 0;
    for (int i = 1; i < N; i++)
        mine_n += i % P == W;
    /* agents start in waves: at most LAUNCH_WAVE JOINs in flight, so the
     * leader's accept queue (net.core.somaxconn) does not overflow into
     * SYN retransmits, which would measure the kernel's backoff */
    int next = W ? W : P;
    mine_total = mine_n;
    t_start = t0;
    struct epoll_event evs[256];
    while (ndone < mine_n) {
        for (; next < N && started - joined < LAUNCH_WAVE / P; next += P) {
            start_agent(next);
            started++;
        }
        int k = epoll_wait(ep, evs, 256, 120000);
        if (k <= 0)
            die("epoll", k == 0 ? "no progress for 120 s" : NULL);
        for (int i = 0; i < k; i++)
            on_event(evs[i].data.ptr, evs[i].events);
    }
    /* the placement still queued for children in other players goes out */
    while (pending_out > 0) {
        int k = epoll_wait(ep, evs, 256, 120000);
        if (k <= 0)
            die("epoll", k == 0 ? "no progress for 120 s" : NULL);
        for (int i = 0; i < k; i++)
            on_event(evs[i].data.ptr, evs[i].events);
    }
    if (getenv("SWARM_VERBOSE"))
        fprintf(stderr, "swarm: player %d: %d agents done at %.3f s\n", W, mine_n, p3d_now() - t0);
    /* every agent got the same bytes (checked on arrival); the samples
     * expand them as a node would (each node its own, in parallel on a
     * real cluster): timed apart */
    double t_done = p3d_now() - t0, t_exp = 0;
    for (int i = 0; i < 3; i++)
        if (samples[i] % P == W) {
            p3d_place_msg m;
            char *e2 = NULL;
            if (p3d_cplace_decode(cplace + 5, cplace_len - 5, &m, &e2) < 0)
                die("expand", e2);
            sample_hash[i] = p3d_delta_hash((const unsigned char *)m.json, m.json_len);
            p3d_place_msg_free(&m);
            t_exp = p3d_now() - t0 - t_done;
        }
    /* busiest sender here; the JSON a sample here expanded (the parent
     * compares it with the leader's) */
    uint64_t x[5] = {0, 0, 0, 0, 0};
    memcpy(&x[3], &t_done, sizeof t_done);
    memcpy(&x[4], &t_exp, sizeof t_exp);
    for (int i = 1; i < N; i++)
        if (sent[i] > x[0])
            x[0] = sent[i];
    for (int i = 0; i < 3; i++)
        if (samples[i] % P == W && sample_hash[i]) {
            if (x[2] && x[1] != sample_hash[i])
                x[1] = 1; /* two samples differ: matches nothing */
            else
                x[1] = sample_hash[i];
            x[2] = 1;
        }
    /* keep the connections open until every player is done: the parent
     * reads the figures, the leader ends when the control connections
     * close (at exit) */
    if (write(rp[1], x, sizeof x) != (ssize_t)sizeof x)
        die("pipe", NULL);
    sleep(1);
    _exit(0);
}
