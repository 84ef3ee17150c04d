/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv.h — multi-node rendezvous (docs/multinode.md).
 *
 * One par3drun agent runs per node. Whatever started them (srun, mpirun,
 * a remote shell, an etcd-coordinated scheduler), they meet in two steps:
 *
 *  1. bootstrap — a backend answers "how many nodes, which one am I, where
 *     does the leader (node rank 0) listen, what is the job's token". The
 *     backends: static (from the command line), slurm (from the job's
 *     environment), pmix and etcd (plugins, because they need libpmix and
 *     libcurl that the core binary must not link).
 *  2. the TCP rendezvous (rdzv_tcp.c), the same for every backend: agents
 *     connect to the leader, present token and version, send their node
 *     record; the leader waits for all, places once, sends every agent the
 *     same placement bytes; the connections stay open as the job-fate
 *     channel (failure reports up, stop orders down, a dropped connection
 *     is a lost agent).
 *
 * Why bootstrap-only backends: the gather/publish/fate logic is written
 * and tested once, and a plugin stays small (it cannot call p3d_*
 * functions: the executable does not export them).
 */
#ifndef P3D_RDZV_H
#define P3D_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "opts.h"
#include "p3d/p3d.h"
#include "p3d/plugin.h"

/* ---- backends (rdzv.c, plugins/rdzv_*) ----------------------------------- */

/* p3d_rdzv_boot and p3d_rdzv_ops, the backend plugin API, are public:
 * p3d/plugin.h. */

/* A resolved backend with its state. */
typedef struct p3d_rdzv {
    const p3d_rdzv_ops *ops;
    void *state;
    p3d_rdzv_boot boot;
    double timeout;          /* seconds, resolved (default grows with nnodes) */
} p3d_rdzv;

/* Resolves --rdzv (auto, none, static:HOST:PORT, slurm[:HOST], pmix,
 * etcd:URL, NAME:ARG for a plugin) against the environment. Returns 1 with
 * *r filled when a multi-node rendezvous is active, 0 when the job is a
 * single-node one (auto found nothing, or "none"), -1 with *err (exit 2).
 * Caller ends it with p3d_rdzv_close(). */
int p3d_rdzv_open(const p3d_opts *o, p3d_rdzv *r, char **err);
/* The backend's publish step (see p3d_rdzv_ops). */
int p3d_rdzv_publish(p3d_rdzv *r, char **err);
void p3d_rdzv_close(p3d_rdzv *r);

/* The built-in backends, for tests (rdzv.c). */
extern const p3d_rdzv_ops p3d_rdzv_static;
extern const p3d_rdzv_ops p3d_rdzv_slurm;
extern const p3d_rdzv_ops p3d_rdzv_k8s;
/* --rdzv k8s without a HOST: the leader (index 0) of the pod named
 * hostname (ending in -index) whose DNS name is fqdn
 * (hostname.SUBDOMAIN.NAMESPACE.svc...). Writes out, or returns
 * P3D_PLUGIN_FAIL with msg. */
int p3d_k8s_leader_host(const char *hostname, const char *fqdn, long index, char *out, size_t cap, char *msg,
                        size_t mcap);
/* Registers them in the plugin registry (idempotent; p3d_rdzv_open does). */
int p3d_rdzv_register_builtins(char **err);

/* Default --rdzv-timeout for n nodes: 60 s + 0.1 s per node. */
double p3d_rdzv_default_timeout(int nnodes);

/* Reads a token file: the first line, surrounding whitespace dropped;
 * 8..255 bytes. 0 or -1 with *err naming the file. */
int p3d_rdzv_read_token(const char *path, char *tok, size_t cap, char **err);

/* ---- wire format (rdzv_wire.c) -------------------------------------------- */

/* Every message is a frame: 4-byte big-endian length L (1..P3D_WIRE_MAX),
 * then L bytes: one type byte, then the body. Bodies are sequences of
 * u32 (big-endian), u64, and strings/blobs (u32 length + bytes). Decoding
 * is pure (no I/O, no globals) and checks every length against what is
 * left, so a hostile peer gets an error, never a crash or a huge
 * allocation. */
#define P3D_WIRE_MAX ((uint32_t)64 << 20)
#define P3D_WIRE_PROTO 4       /* wire protocol number, sent in HELLO and JOIN
                                * (2: the distribution tree; 3: the
                                * gathered record's health check; 4: the
                                * integrity tag of TREE, CPLACE, CDELTA
                                * and FATE frames) */

enum {
    P3D_MSG_HELLO = 'H',     /* agent -> leader: who I am */
    P3D_MSG_REFUSE = 'N',    /* leader -> agent: refused, with the reason */
    P3D_MSG_PLACE = 'P',     /* leader -> agent: the job's placement */
    P3D_MSG_FATE = 'F',      /* both ways: a supervise.c packet, relayed */
    /* the distribution tree (rdzv_tree.c, docs/multinode.md "The tree") */
    P3D_MSG_JOIN = 'J',      /* agent -> leader: who I am, where I listen */
    P3D_MSG_TREE = 'W',      /* leader -> agent: your parent, your children */
    P3D_MSG_TJOIN = 'K',     /* child -> tree parent: token and node rank */
    P3D_MSG_GATHER = 'G',    /* child -> parent: its subtree's node records */
    P3D_MSG_CPLACE = 'C',    /* parent -> child: the compact placement */
    P3D_MSG_CDELTA = 'D',    /* leader -> node: a placement made again, as the
                              * difference from the node's (mnode_delta.c) */
};

/* A growable byte buffer (encoding). */
typedef struct p3d_wbuf {
    unsigned char *p;
    size_t len, cap;
    int oom;                 /* set on allocation failure; checked at the end */
} p3d_wbuf;

void p3d_wbuf_u32(p3d_wbuf *b, uint32_t v);
void p3d_wbuf_u64(p3d_wbuf *b, uint64_t v);
void p3d_wbuf_bytes(p3d_wbuf *b, const void *p, size_t n);
void p3d_wbuf_str(p3d_wbuf *b, const char *s);  /* NULL encodes as "" */
/* Starts a frame of type t (reserves the length); p3d_wbuf_end fills it. */
void p3d_wbuf_begin(p3d_wbuf *b, int type);
int p3d_wbuf_end(p3d_wbuf *b);  /* 0, or -1 when oom / over P3D_WIRE_MAX */
void p3d_wbuf_free(p3d_wbuf *b);

/* A cursor over a received body (decoding). Any failed read sets bad and
 * returns zeros, so a decoder reads everything and checks bad once. */
typedef struct p3d_rbuf {
    const unsigned char *p;
    size_t len, off;
    int bad;
} p3d_rbuf;

uint32_t p3d_rbuf_u32(p3d_rbuf *r);
uint64_t p3d_rbuf_u64(p3d_rbuf *r);
/* A string of at most max bytes without NUL bytes; malloc'd copy (NULL
 * and bad set when malformed). */
char *p3d_rbuf_str(p3d_rbuf *r, size_t max);
/* A signed int sent as u32; outside lo..hi sets bad. */
int p3d_rbuf_int(p3d_rbuf *r, int lo, int hi);
void p3d_wbuf_int(p3d_wbuf *b, int v);
/* A blob of at most max bytes: pointer into the buffer, *n its length. */
const unsigned char *p3d_rbuf_blob(p3d_rbuf *r, size_t max, size_t *n);

/* HELLO: what an agent tells the leader. */
typedef struct p3d_hello {
    uint32_t proto;          /* P3D_WIRE_PROTO */
    char *version;           /* P3D_VERSION */
    char *token;
    char *job_id;            /* "" when unknown */
    int nnodes, node_rank;
    char *hostname;
    char *addr;              /* the address others reach this node at */
    int master_port, nccl_port;   /* free ports here, used when rank 0 lands here */
    p3d_node *topo;          /* the node record (owned) */
    char *rack;              /* leaf switch from SLURM_TOPOLOGY_ADDR (alloc.c),
                              * NULL when unknown; optional trailing field: a
                              * HELLO without it still decodes */
} p3d_hello;

/* PLACE: the leader's decision, byte for byte the same for every agent
 * except `you`. */
typedef struct p3d_place_msg {
    char *job_id;
    char *master_addr;
    int master_port, nccl_port;
    int nnodes;
    char **names;            /* cluster node names, index = node rank */
    char **hashes;           /* node hash after --nproc-per-node, per node */
    p3d_placement *pl;       /* ranks, mesh, policy (owned) */
    char *json;              /* the placement JSON, written on every node */
    size_t json_len;
    unsigned char *raw;      /* CPLACE: the body it was decoded from (the
                              * base of a later CDELTA, mnode_delta.c) */
    size_t raw_len;
} p3d_place_msg;

int p3d_hello_encode(const p3d_hello *h, p3d_wbuf *b);
/* body: the frame's bytes after the type byte. 0 or -1 with *err. */
int p3d_hello_decode(const unsigned char *body, size_t len, p3d_hello *h,
                     char **err);
void p3d_hello_free(p3d_hello *h);

int p3d_place_encode(const p3d_place_msg *m, p3d_wbuf *b);
/* The placement's policy, sources, mesh and world, as PLACE and CPLACE
 * carry them; decoding checks that both grids describe the world it
 * announces: the world, or -1 (r->bad set). */
void p3d_mesh_encode(p3d_wbuf *b, const p3d_placement *pl);
int p3d_mesh_decode(p3d_rbuf *r, p3d_placement *pl);
int p3d_place_decode(const unsigned char *body, size_t len, p3d_place_msg *m,
                     char **err);
void p3d_place_msg_free(p3d_place_msg *m);

/* The node record alone (also used by plugins' tests). */
void p3d_node_encode(const p3d_node *n, p3d_wbuf *b);
/* Rebuilds a node: the raw facts are re-derived with p3d_node_finish and
 * the hash must come out as the sender computed it. */
p3d_node *p3d_node_decode(p3d_rbuf *r, char **err);

/* Frames that travel down the tree (TREE, CPLACE, CDELTA) and the fate
 * channel's FATE frames (both ways) end with a tag: HMAC-SHA256, keyed by
 * the job token both ends hold (the one JOIN and TJOIN present), over the
 * type byte and the body before the tag (docs/multinode.md "Frame
 * integrity"). A receiver checks the tag before it decodes anything; a
 * frame whose tag does not match is never decoded. REFUSE carries none (a
 * refused agent may hold another token; it only ends the agent). */
#define P3D_TAG_LEN 32
/* out = in (a whole frame, p3d_wbuf_end done) with the tag appended and
 * its length fixed; out is reset first and freed by the caller. 0, or -1
 * (out of memory, over P3D_WIRE_MAX, libcrypto failed). */
int p3d_frame_seal(const p3d_wbuf *in, const char *key, p3d_wbuf *out);
/* Checks the tag at the end of body (len bytes after the type byte):
 * 0 with *len shortened to the body without the tag, or -1 with *err
 * saying what was wrong (too short to hold a tag, or a tag that does not
 * match). Pure: fuzzed in tests/fuzz/fuzz_rdzv_wire.c. */
int p3d_frame_open(int type, const unsigned char *body, size_t *len, const char *key, char **err);
/* The key of this process's fate channel: the job token, set once the
 * rendezvous has it (mnode.c), read by p3d_fate_send/p3d_fate_read and
 * the relay. One process serves one job, so one key. "" until set. */
void p3d_wire_set_key(const char *key);
const char *p3d_wire_key(void);

/* Reads one frame from a blocking fd. Returns the type (>0) with *body
 * (malloc'd) and *len, 0 at a clean EOF before any byte, -1 with *err. */
int p3d_frame_read(int fd, unsigned char **body, size_t *len, char **err);
/* Writes all of b to fd (blocking). 0 or -1 with *err. */
int p3d_frame_write(int fd, const p3d_wbuf *b, char **err);
/* Writes all of b without ever blocking in send(); waits for the socket
 * to take more only while the peer keeps reading: stall seconds without
 * progress fail it (the caller drops the peer). The fate channel's
 * writes (supervise.c): a hung or overloaded agent costs the leader at
 * most P3D_FATE_STALL seconds once, then it is a lost agent. */
int p3d_frame_write_bounded(int fd, const p3d_wbuf *b, double stall, char **err);
#define P3D_FATE_STALL 5.0

/* Incremental reader for non-blocking sockets. */
typedef struct p3d_framer {
    unsigned char *buf;
    size_t len, cap;
} p3d_framer;
/* Reads what is available. Returns 1 when a whole frame is ready (take it
 * with p3d_framer_take), 0 when more is needed, -1 at EOF/error (*err
 * says which; "closed" for EOF). */
int p3d_framer_fill(p3d_framer *f, int fd, char **err);
/* Pops the first complete frame: type, body (malloc'd), len; 0 when none. */
int p3d_framer_take(p3d_framer *f, unsigned char **body, size_t *len);
void p3d_framer_free(p3d_framer *f);

/* ---- the TCP rendezvous (rdzv_tcp.c, rdzv_tree_*.c) ------------------------------------ */

/* Leader: listens on host:port only (port 0: any free one; *bound gets
 * it). Returns the listening fd or -1 with *err. */
int p3d_tcp_listen(const char *host, int port, int *bound, char **err);

/* Leader: tells each connected agent why the job will not start. A reason
 * that starts with P3D_REFUSE_FAILED is a failure of the job (a node
 * failed its health check): the agents exit 1 like the leader; any other
 * refusal is the leader's input (exit 2). */
#define P3D_REFUSE_FAILED "the job cannot start: "
void p3d_tcp_refuse_all(const int *fds, int n, const char *why);

/* Sends a refusal frame (best effort). */
void p3d_tcp_refuse(int fd, const char *why);

/* ---- the distribution tree (rdzv_tree_wire.c, rdzv_tree.c) ------------------ */

/* Node ranks form a k-ary tree in breadth-first order: the parent of rank
 * i > 0 is (i - 1) / k, its children k*i + 1 .. k*i + k. Every agent keeps
 * one small control connection to the leader (JOIN, then the fate channel:
 * liveness as before); the node records go up and the placement comes down
 * along the tree, so the leader sends O(fan-out x compact placement). */
#define P3D_FANOUT_DEFAULT 32
#define P3D_FANOUT_MAX 1024

/* JOIN: what an agent tells the leader on its control connection. The
 * first three fields are read first, as in HELLO. */
typedef struct p3d_join {
    uint32_t proto;
    char *version, *token, *job_id;
    int nnodes, node_rank;
    char *hostname;
    char *addr;              /* where this agent listens for its children */
    int port;                /* 1..65535; 0: it listens nowhere (a leaf) */
} p3d_join;

/* TREE: the leader's answer: the parent (0: the leader, on this very
 * connection) and how many children will connect to this agent. */
typedef struct p3d_treepos {
    int parent;
    char *addr;              /* the parent's listen address ("" for 0) */
    int port;
    int nchildren;
    int fanout;              /* the tree's k: children are k*i+1 .. */
} p3d_treepos;

/* TJOIN: a child presents the token to its tree parent. */
typedef struct p3d_tjoin {
    uint32_t proto;
    char *version, *token, *job_id;
    int node_rank;
} p3d_tjoin;

/* One node's record as gathered: the topology by index into the
 * message's table of distinct topologies (most clusters have one or two). */
/* A record's pre-start --health-check (the node ran its own before it
 * joined): not run (no --health-check there), passed, or failed with a
 * reason of at most P3D_GREC_HOW_MAX bytes. */
enum { P3D_GREC_HEALTH_NONE = 0, P3D_GREC_HEALTH_OK = 1, P3D_GREC_HEALTH_FAILED = 2 };
#define P3D_GREC_HOW_MAX 199

typedef struct p3d_grec {
    int rank;
    char *hostname, *addr, *rack;  /* rack NULL when unknown */
    int master_port, nccl_port;
    int topo;
    int health;                    /* P3D_GREC_HEALTH_* */
    char *health_how;              /* NULL when health is NONE or OK */
} p3d_grec;

/* GATHER: the records of a subtree, merged at each level. */
typedef struct p3d_gather {
    int ntopos;
    p3d_node **topos;        /* owned */
    int nrec;
    p3d_grec *recs;          /* owned */
} p3d_gather;

int p3d_join_encode(const p3d_join *j, p3d_wbuf *b);
int p3d_join_decode(const unsigned char *body, size_t len, p3d_join *j, char **err);
void p3d_join_free(p3d_join *j);
int p3d_treepos_encode(const p3d_treepos *t, p3d_wbuf *b);
int p3d_treepos_decode(const unsigned char *body, size_t len, p3d_treepos *t, char **err);
void p3d_treepos_free(p3d_treepos *t);
int p3d_tjoin_encode(const p3d_tjoin *t, p3d_wbuf *b);
int p3d_tjoin_decode(const unsigned char *body, size_t len, p3d_tjoin *t, char **err);
void p3d_tjoin_free(p3d_tjoin *t);
int p3d_gather_encode(const p3d_gather *g, p3d_wbuf *b);
/* nnodes bounds the ranks; every topology is re-derived and its hash
 * checked, as in HELLO. */
int p3d_gather_decode(const unsigned char *body, size_t len, int nnodes, p3d_gather *g, char **err);
/* Moves src's records into dst; topologies with the same hash are kept
 * once. 0 or -1 (out of memory). */
int p3d_gather_merge(p3d_gather *dst, p3d_gather *src, char **err);
/* Adds one record (strings copied, topo taken: shared by hash). */
int p3d_gather_add(p3d_gather *g, const p3d_grec *r, p3d_node *topo, char **err);
void p3d_gather_free(p3d_gather *g);

/* The compact placement (CPLACE, launcher/run/mnode_compact.c): rank ->
 * node, GPU, local rank (8 bytes a rank), node names, racks, NVLink
 * domains, the distinct topologies and the report's small head and tail.
 * Every node (the leader too) expands it with p3d_cplace_decode into the
 * same p3d_place_msg, placement JSON byte for byte included. */
typedef struct p3d_cplace_in {
    const char *job_id, *master_addr;
    int master_port, nccl_port;
    const p3d_cluster *cluster;
    const p3d_placement *pl;
    const char *json;        /* the leader's own rendering of the report */
} p3d_cplace_in;

/* Encodes; when the compact form does not expand to exactly json (a bug,
 * or a report field it does not carry), the JSON goes along verbatim and
 * *compact is 0. 0 or -1. */
int p3d_cplace_encode(const p3d_cplace_in *in, p3d_wbuf *b, int *compact, char **err);
int p3d_cplace_decode(const unsigned char *body, size_t len, p3d_place_msg *m, char **err);

/* Sizes of what the tree moved, for --verbose and bench/swarm. */
typedef struct p3d_tree_stats {
    uint64_t bytes_sent;     /* by this process on rendezvous sockets */
    uint64_t bytes_recv;
    double t_join;           /* leader: until every record was in */
    double t_place;          /* leader: placement + encoding */
    double t_send;           /* leader: distribution to its children */
    size_t json_len, cplace_len;
} p3d_tree_stats;

/* The fan-out: --rdzv-fanout, else P3D_RDZV_FANOUT, else the default.
 * Only the leader's counts. 0 or -1 with *err. */
int p3d_rdzv_fanout(const p3d_opts *o, int *fanout, char **err);

/* Leader: accepts every agent's JOIN on lfd, answers each with its tree
 * position, and collects the records that come up the tree into *g (its
 * own record first, taken from *mine). fds[i]: node rank i's control
 * connection (fds[0] = -1). On failure the joined agents are told why. */
int p3d_tree_gather(int lfd, const p3d_rdzv *r, int fanout, p3d_join *mine, p3d_gather *mine_g, p3d_gather *g,
                    int *fds, p3d_join *joins, int verbose, p3d_tree_stats *st, char **err);

/* Leader or interior agent: sends one frame to each of n fds (concurrently,
 * non-blocking: a slow child does not hold up its siblings), within
 * timeout seconds. Returns 0, or -1 with *err naming the node (ranks[i]). */
int p3d_tree_send(const int *fds, const int *ranks, int n, const p3d_wbuf *b, double timeout, p3d_tree_stats *st,
                  char **err);

/* Agent: JOIN to the leader, attach to the tree parent, collect the
 * children's records, send the subtree's up, receive the placement and
 * pass it on. Returns the control connection (the fate channel) with *out
 * filled; -2 with *err when the leader refused this node (the reason
 * quoted: wrong token, version, node rank, a placement that failed: exit
 * 2); -1 with *err when the rendezvous did not complete (leader or tree
 * parent unreachable or gone, or the leader's own timeout: exit 1 on every
 * side). me: this node's record (topo taken). */
int p3d_tree_join(const p3d_rdzv *r, p3d_join *mine, p3d_gather *me, p3d_place_msg *out, int verbose,
                  p3d_tree_stats *st, char **err);

/* ---- the multi-node launch (mnode.c) ----------------------------------------- */

/* Runs this node's part of a multi-node job; returns its exit code. */
int p3d_mnode_launch(const p3d_opts *o, p3d_rdzv *r);

/* Entry from cmd_launch.c: returns -1 when no rendezvous is active (the
 * single-node path goes on), else the exit code of the multi-node job. */
int p3d_rdzv_launch(const p3d_opts *o);

#endif
