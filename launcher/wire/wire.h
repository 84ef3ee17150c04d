/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h — every codec the launcher puts on a socket, below the transports
 * that carry them: the frame (type, length, body, and the HMAC tag of the
 * frames a parent sends), the rendezvous messages (HELLO, JOIN, the node
 * record, the placement), the tree's messages, the compact placement and
 * its difference, and the agent protocol (the last section).
 * Pure: no I/O but the frame read/write helpers, nothing of rdzv/ or run/.
 * The letter tables are one per protocol: P3D_MSG_* for frames (below),
 * P3D_AM_* for agent packets (below), which travel inside a frame
 * of type P3D_MSG_FATE when they cross nodes.
 */
#ifndef P3D_WIRE_H
#define P3D_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "p3d/p3d.h"

/* ---- wire format (wire_codec.c) -------------------------------------------- */

/* Every message is a frame: 4-byte big-endian length L (1..P3D_WIRE_MAX),
 * then L bytes: one type byte, then the body. Bodies are sequences of
 * u32 (big-endian), u64, and strings/blobs (u32 length + bytes). Decoding
 * is pure (no I/O, no globals) and checks every length against what is
 * left, so a hostile peer gets an error, never a crash or a huge
 * allocation. */
#define P3D_WIRE_MAX ((uint32_t)64 << 20)
/* The frame header: the length (4 bytes) and the type byte. A built frame
 * (p3d_wbuf after p3d_wbuf_end) is P3D_FRAME_HDR bytes of header, then the
 * body: p3d_frame_body / p3d_frame_body_len give the body, what the
 * decoders and p3d_frame_open take. Nothing else counts header bytes. */
#define P3D_FRAME_HDR 5
/* The wire protocol number, sent in HELLO and JOIN. Kept on one line:
 * tests read it from here (fake_parent.py, multinode_tree.sh,
 * terminal_controls.sh). 2: the distribution tree; 3: the gathered
 * record's health check; 4: the integrity tag of TREE, CPLACE, CDELTA and
 * FATE frames; 5: agent packets in lower-case letters; 6: a GPU's physical
 * index and CUDA_VISIBLE_DEVICES entry in the node record, the v packet;
 * 7: the gathered record's failover port; 8: its --preflight figures; 9:
 * the --preflight TCP ring's ports in JOIN and TREE; 10: every connection
 * opens with the challenge-response of wire_chan.c, no token in JOIN or
 * TJOIN, frames tagged per connection; 11: the f packet's step, error line
 * and frame line; 12: a JOIN of node rank -1 and 0 nodes, a node joining
 * the running job; 13: the placement frames' full_dp and min_dp, the
 * elastic width; 14: their batch figures, for a joined node's ranks; 15:
 * their --fault-window, which every node holds its ranks for. */
#define P3D_WIRE_PROTO 15

enum {
    P3D_MSG_HELLO = 'H',  /* agent -> leader: who I am */
    P3D_MSG_REFUSE = 'N', /* leader -> agent: refused, with the reason */
    P3D_MSG_PLACE = 'P',  /* leader -> agent: the job's placement */
    P3D_MSG_FATE = 'F',   /* both ways: a supervise.c packet, relayed */
    /* the distribution tree (rdzv_tree.c, docs/multinode.md "The tree") */
    P3D_MSG_JOIN = 'J',   /* agent -> leader: who I am, where I listen */
    P3D_MSG_TREE = 'W',   /* leader -> agent: your parent, your children */
    P3D_MSG_TJOIN = 'K',  /* child -> tree parent: its node rank */
    P3D_MSG_GATHER = 'G', /* child -> parent: its subtree's node records */
    P3D_MSG_CPLACE = 'C', /* parent -> child: the compact placement */
    P3D_MSG_CDELTA = 'D', /* leader -> node: a placement made again, as the
                              * difference from the node's (wire_cdelta.c) */
    /* leader failover (wire_rejoin.c, docs/multinode.md "When the leader dies") */
    P3D_MSG_SUCCESSORS = 'S', /* leader -> node: who succeeds, where it listens */
    P3D_MSG_REJOIN = 'L',     /* node -> successor: I lost the leader too */
    P3D_MSG_REJOINED = 'M',   /* successor -> node: taken, or refused and why */
};

/* A growable byte buffer (encoding). */
typedef struct p3d_wbuf {
    unsigned char *p;
    size_t len, cap;
    int oom; /* set on allocation failure; checked at the end */
} p3d_wbuf;

void p3d_wbuf_u32(p3d_wbuf *b, uint32_t v);
void p3d_wbuf_u64(p3d_wbuf *b, uint64_t v);
void p3d_wbuf_bytes(p3d_wbuf *b, const void *p, size_t n);
void p3d_wbuf_str(p3d_wbuf *b, const char *s); /* NULL encodes as "" */
/* Starts a frame of type t (reserves the length); p3d_wbuf_end fills it. */
void p3d_wbuf_begin(p3d_wbuf *b, int type);
int p3d_wbuf_end(p3d_wbuf *b); /* 0, or -1 when oom / over P3D_WIRE_MAX */
/* A built frame's type, body and body length (the frame must hold at
 * least its header: p3d_wbuf_end succeeded). */
static inline int p3d_frame_type(const p3d_wbuf *b)
{
    return b->p[P3D_FRAME_HDR - 1];
}
static inline const unsigned char *p3d_frame_body(const p3d_wbuf *b)
{
    return b->p + P3D_FRAME_HDR;
}
static inline size_t p3d_frame_body_len(const p3d_wbuf *b)
{
    return b->len - P3D_FRAME_HDR;
}
/* What a frame of body length len costs on the wire (--verbose sizes). */
#define P3D_FRAME_BYTES(len) ((len) + P3D_FRAME_HDR)
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
    uint32_t proto; /* P3D_WIRE_PROTO */
    char *version;  /* P3D_VERSION */
    char *job_id;   /* "" when unknown */
    int nnodes, node_rank;
    char *hostname;
    char *addr;                 /* the address others reach this node at */
    int master_port, nccl_port; /* free ports here, used when rank 0 lands here */
    p3d_node *topo;             /* the node record (owned) */
    char *rack;                 /* leaf switch from SLURM_TOPOLOGY_ADDR (alloc.c),
                              * NULL when unknown; optional trailing field: a
                              * HELLO without it still decodes */
} p3d_hello;

/* The job's batch figures as the leader was given them (docs/launch.md,
 * "Elastic width"): --global-batch, --micro-batch, --micro-batches (0: not
 * given) and --batch-tolerance in thousandths of a percent (0: exact).
 * They go with every placement, so that a node that joined the running
 * job (which is given none of them) sets its ranks' batch as every node. */
/* --fault-window's bound (3600 s), in ms as the placement frames carry it */
#define P3D_FAULT_MS_MAX 3600000
/* --fault-window SECONDS as the frames carry it: ms, within 0..MAX */
static inline int p3d_fault_ms(double s)
{
    return !(s > 0) ? 0 : s >= P3D_FAULT_MS_MAX / 1000.0 ? P3D_FAULT_MS_MAX : (int)(s * 1000 + 0.5);
}

typedef struct p3d_wbatch {
    int global, micro, micros, tol_mpct;
} p3d_wbatch;

/* PLACE: the leader's decision, byte for byte the same for every agent
 * except `you`. */
typedef struct p3d_place_msg {
    char *job_id;
    char *master_addr;
    int master_port, nccl_port;
    /* the elastic width (docs/launch.md, "Elastic width"): the job's full
     * data-parallel width and --min-dp (0 0: not elastic); the placement
     * itself holds the width it runs at. A successor goes on from them. */
    int full_dp, min_dp;
    p3d_wbatch batch;
    /* the leader's --fault-window in ms (0..P3D_FAULT_MS_MAX): a node
     * whose rank failed keeps its other ranks running that long for the
     * verdict (docs/launch.md) */
    int fault_ms;
    int nnodes;
    char **names;      /* cluster node names, index = node rank */
    char **hashes;     /* node hash after --nproc-per-node, per node */
    p3d_placement *pl; /* ranks, mesh, policy (owned) */
    char *json;        /* the placement JSON, written on every node */
    size_t json_len;
    unsigned char *raw; /* CPLACE: the body it was decoded from (the
                              * base of a later CDELTA, wire_cdelta.c) */
    size_t raw_len;
} p3d_place_msg;

int p3d_hello_encode(const p3d_hello *h, p3d_wbuf *b);
/* body: the frame's bytes after the type byte. 0 or -1 with *err. */
int p3d_hello_decode(const unsigned char *body, size_t len, p3d_hello *h, char **err);
void p3d_hello_free(p3d_hello *h);

int p3d_place_encode(const p3d_place_msg *m, p3d_wbuf *b);
/* The placement's policy, sources, mesh and world, as PLACE and CPLACE
 * carry them; decoding checks that both grids describe the world it
 * announces: the world, or -1 (r->bad set). */
void p3d_mesh_encode(p3d_wbuf *b, const p3d_placement *pl);
/* A frame's width figures agree with its placement: full_dp 0 and min_dp
 * 0 (not elastic), or min_dp <= the placement's dp <= full_dp. */
int p3d_width_ok(int full_dp, int min_dp, const p3d_placement *pl);
/* The batch figures after the width, in PLACE and CPLACE. Decoding sets
 * r->bad on a figure out of range. */
void p3d_wbatch_encode(p3d_wbuf *b, const p3d_wbatch *w);
void p3d_wbatch_decode(p3d_rbuf *r, p3d_wbatch *w);
int p3d_mesh_decode(p3d_rbuf *r, p3d_placement *pl);
int p3d_place_decode(const unsigned char *body, size_t len, p3d_place_msg *m, char **err);
void p3d_place_msg_free(p3d_place_msg *m);

/* The node record alone (also used by plugins' tests). */
void p3d_node_encode(const p3d_node *n, p3d_wbuf *b);
/* Rebuilds a node: the raw facts are re-derived with p3d_node_finish and
 * the hash must come out as the sender computed it. */
p3d_node *p3d_node_decode(p3d_rbuf *r, char **err);

/* The length of the tag every frame ends with after a connection's
 * handshake (wire_chan.c, p3d_chan). */
#define P3D_TAG_LEN 32

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
    uint32_t first_max; /* > 0: the bound of the first frame (p3d_framer_first_max) */
} p3d_framer;
/* Reads what is available. Returns 1 when a whole frame is ready (take it
 * with p3d_framer_take), 0 when more is needed, -1 at EOF/error (*err
 * says which; "closed" for EOF). */
int p3d_framer_fill(p3d_framer *f, int fd, char **err);
/* Pops the first complete frame: type, body (malloc'd), len; 0 when none. */
int p3d_framer_take(p3d_framer *f, unsigned char **body, size_t *len);
void p3d_framer_free(p3d_framer *f);

/* Before authentication (a peer that has not finished its handshake,
 * wire_chan.c) the input is hostile and its first frame small. The
 * transport reads at most p3d_framer_want() bytes and hands them to
 * p3d_framer_feed as they arrive; the length prefix is judged as soon as
 * its 4 bytes are in, so no byte of a frame over the bound is buffered.
 * What follows the first frame in the same bytes stays queued (the
 * framer is handed on once the peer has joined), and from the first
 * p3d_framer_take on, the framer's frames are bounded by P3D_WIRE_MAX
 * only. */
void p3d_framer_first_max(p3d_framer *f, uint32_t max);
/* How many bytes the next read may take (>= 1): only the rest of the
 * length prefix while it is incomplete under a first-frame bound. */
size_t p3d_framer_want(const p3d_framer *f, size_t room);
/* Appends n bytes (0: judges what is buffered, e.g. after a take). 1: a
 * whole frame is ready (p3d_framer_take); 0: more is needed; -1: a
 * malformed length (*err); -2: the first frame is over the bound (*err).
 * After -1 or -2 the peer is to be dropped. */
int p3d_framer_feed(p3d_framer *f, const unsigned char *p, size_t n, char **err);

/* ---- wire_chan.c: the authenticated channel ----------------------------------- */

/*
 * Every TCP connection between par3drun processes (the control connection
 * and JOIN, the tree links, the failover gate, the preflight ring) starts
 * with a mutual challenge-response and then carries only frames tagged
 * with a key of that connection alone (docs/multinode.md, "Security"):
 *
 *   initiator -> acceptor  AUTH   proto, link kind, nonce_i (32 bytes)
 *   acceptor -> initiator  PROVE  nonce_a, HMAC(K, "p3d-acceptor" || T)
 *   initiator -> acceptor  PROOF  HMAC(K, "p3d-initiator" || T)
 *
 * K: the job key (the token, which never crosses a socket); T: nonce_i ||
 * nonce_a || kind || proto. The acceptor proves first, so an initiator
 * sends nothing but a nonce to a peer that does not hold the key. The
 * session key is HMAC(K, "p3d-session" || T); every later frame ends with
 * HMAC(session, direction || sequence number || type || body), the
 * sequence counted per direction from 0 and never sent: a frame replayed
 * on another connection, later on the same one, or back to its sender
 * fails its tag. A refusal before the handshake ends travels in clear
 * (REFUSE) and is all a stranger can make a peer do.
 */
#define P3D_NONCE_LEN 32
/* What a connection is for: part of T, so a handshake or frame taken from
 * one kind of link does not pass on another. */
enum {
    P3D_LINK_CTRL = 1, /* agent -> leader: JOIN, then the fate channel */
    P3D_LINK_TREE = 2, /* child -> its tree parent: TJOIN, GATHER, CPLACE */
    P3D_LINK_GATE = 3, /* node -> successor's failover port: REJOIN */
    P3D_LINK_RING = 4, /* --preflight: node -> its ring's next node */
};
enum {
    P3D_MSG_AUTH = 'A',  /* initiator's challenge */
    P3D_MSG_PROVE = 'B', /* acceptor's answer and challenge */
    P3D_MSG_PROOF = 'E', /* initiator's answer */
};

/* One side of a handshake in progress. Pure: no I/O (fuzzed in
 * tests/fuzz/fuzz_rdzv_wire.c); the job key is copied in. */
typedef struct p3d_hs {
    int acceptor; /* 1: the side that accepted the connection */
    int kind;     /* P3D_LINK_* */
    int state;    /* 0 waiting for the peer's next frame, 1 done */
    int step;     /* frames taken so far */
    unsigned char key[256];
    size_t klen;
    unsigned char ni[P3D_NONCE_LEN], na[P3D_NONCE_LEN];
} p3d_hs;

/* 2*nbytes random hex digits and a NUL into out (nbytes <= 64) from
 * the kernel's CSPRNG, getrandom(2) (wire_random.c): job tokens, generated job ids, ring
 * keys. 0, or -1 (out empty) when no randomness can be had. */
int p3d_random_hex(char *out, size_t nbytes);

/* Starts a handshake with the job key (1..255 bytes). The initiator's
 * AUTH frame is put in out (reset first; the acceptor's out stays empty).
 * 0, or -1 with *err (no key, no randomness). */
int p3d_hs_start(p3d_hs *h, const char *key, int acceptor, int kind, p3d_wbuf *out, char **err);
/* Takes the peer's next frame (type and body as read). -1 with *err when
 * it is refused (the peer does not hold the key, another link kind or
 * protocol, a malformed frame); 0 when the handshake goes on (send out);
 * 1 when it is done (send out when not empty: the initiator's PROOF). */
int p3d_hs_step(p3d_hs *h, int type, const unsigned char *body, size_t len, p3d_wbuf *out, char **err);
/* Tells a peer whose handshake was refused why (a REFUSE frame in clear,
 * best effort, never blocking). */
void p3d_hs_refuse(int fd, const char *why);
/* Wipes the key copy and nonces. */
void p3d_hs_wipe(p3d_hs *h);

/* A connection after its handshake: one per connection, owned by whoever
 * holds it (p3d_chan_free closes the fd). Nothing else writes to fd. */
typedef struct p3d_chan {
    int fd;
    int acceptor;
    uint64_t tx, rx;      /* sequence numbers, per direction */
    unsigned char sk[32]; /* the session key */
    p3d_framer fr;        /* what was read and not taken yet */
    char peer[160];       /* "ADDR:PORT" or a name, for messages */
} p3d_chan;

/* The channel a finished handshake (state 1) gives fd; the framer fr
 * (what followed the handshake in the same bytes) is moved into it (NULL:
 * none). NULL when out of memory (fd is then not closed). */
p3d_chan *p3d_chan_new(const p3d_hs *h, int fd, p3d_framer *fr, const char *peer);
/* Closes the fd and frees c (NULL is fine). */
void p3d_chan_free(p3d_chan *c);
/* The tag of a frame (p3d_wbuf_end done, without tag) as the next frame
 * c sends; counts it sent. For a transport that sends the same frame to
 * many channels (rdzv's p3d_tree_send): the frame's length must already
 * count the tag (p3d_chan_reserve). 0 or -1. */
int p3d_chan_tag(p3d_chan *c, const p3d_wbuf *frame, unsigned char tag[P3D_TAG_LEN]);
/* Adds P3D_TAG_LEN to a built frame's length prefix (no bytes added): the
 * frame then goes out followed by each channel's own tag. 0 or -1. */
int p3d_chan_reserve(p3d_wbuf *frame);
/* Sends one frame (built, p3d_wbuf_end done) on c, tagged: blocking
 * within stall seconds without progress (p3d_frame_write_bounded). 0 or
 * -1 with *err. */
int p3d_chan_send(p3d_chan *c, const p3d_wbuf *frame, double stall, char **err);
/* Checks the tag at the end of a received body as the next frame from the
 * peer: 0 with *len without the tag, or -1 with *err (the connection is
 * then to be dropped: a tag never fails by accident). */
int p3d_chan_open(p3d_chan *c, int type, const unsigned char *body, size_t *len, char **err);
/* Reads what is available without blocking (fd non-blocking) into the
 * framer: as p3d_framer_fill. */
int p3d_chan_fill(p3d_chan *c, char **err);
/* Pops the next whole frame and checks its tag: its type (> 0) with body
 * (malloc'd) and *len without the tag; 0 when none is whole; -1 with *err
 * when its tag does not match (drop the connection). */
int p3d_chan_take(p3d_chan *c, unsigned char **body, size_t *len, char **err);
/* Reads one frame from a blocking fd by deadline (CLOCK_MONOTONIC, as
 * p3d_now; 0: no deadline) and checks its tag: type (> 0), 0 at EOF, -1
 * with *err. */
int p3d_chan_read(p3d_chan *c, double deadline, unsigned char **body, size_t *len, char **err);

/* The handshake on a blocking, connected fd, by deadline: the channel (it
 * owns fd from then on), or NULL with *err (fd is the caller's still). A
 * REFUSE from the acceptor is quoted in *err and *refused set (may be
 * NULL); *refused is set too when the acceptor does not prove the key. */
p3d_chan *p3d_chan_handshake(int fd, const char *key, int acceptor, int kind, double deadline, const char *peer,
                             int *refused, char **err);

/* ---- the distribution tree (wire_tree.c; the tree itself: launcher/rdzv/rdzv_tree_*.c) ------------------ */

/* Node ranks form a k-ary tree in breadth-first order: the parent of rank
 * i > 0 is (i - 1) / k, its children k*i + 1 .. k*i + k. Every agent keeps
 * one small control connection to the leader (JOIN, then the fate channel:
 * liveness as before); the node records go up and the placement comes down
 * along the tree, so the leader sends O(fan-out x compact placement). */
#define P3D_FANOUT_DEFAULT 32
#define P3D_FANOUT_MAX 1024

/* JOIN: what an agent tells the leader on its control connection. The
 * first three fields are read first, as in HELLO. A node joining the
 * running job (par3drun --join) sends node rank P3D_JOIN_RUNNING and 0
 * nodes: it knows neither (the leader gives it the next node index). */
#define P3D_JOIN_RUNNING (-1)
typedef struct p3d_join {
    uint32_t proto;
    char *version, *job_id;
    int nnodes, node_rank;
    char *hostname;
    char *addr;    /* where this agent listens for its children */
    int port;      /* 1..65535; 0: it listens nowhere (a leaf) */
    int ring_port; /* --preflight: where it takes the previous
                              * node's TCP stream (on addr); 0: no ring */
} p3d_join;

/* TREE: the leader's answer: the parent (0: the leader, on this very
 * connection) and how many children will connect to this agent. */
typedef struct p3d_treepos {
    int parent;
    char *addr; /* the parent's listen address ("" for 0) */
    int port;
    int nchildren;
    int fanout; /* the tree's k: children are k*i+1 .. */
    /* --preflight: the next node of the TCP ring (its JOIN's addr and
     * ring_port); ring_port 0: this node streams to nobody */
    char *ring_addr;
    int ring_port;
} p3d_treepos;

/* TJOIN: a child's node rank, to its tree parent (after the handshake). */
typedef struct p3d_tjoin {
    uint32_t proto;
    char *version, *job_id;
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
    char *hostname, *addr, *rack; /* rack NULL when unknown */
    int master_port, nccl_port;
    int failover_port; /* where a successor takes the nodes
                                    * (rdzv_failover.h); 0: none */
    int topo;
    int health;       /* P3D_GREC_HEALTH_* */
    char *health_how; /* NULL when health is NONE or OK */
    /* the node's own --preflight benchmark, run before it joined: NULL
     * (none), its figures line as the benchmark printed it ("preflight
     * backend=... gflops=G mem_gbps=M ..."), or "failed: REASON"; at most
     * P3D_GREC_HOW_MAX printable bytes. The leader parses it strictly
     * (p3d_preflight_parse): it is a peer's input. */
    char *preflight;
} p3d_grec;

/* GATHER: the records of a subtree, merged at each level. */
typedef struct p3d_gather {
    int ntopos;
    p3d_node **topos; /* owned */
    int nrec;
    p3d_grec *recs; /* owned */
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

/* The compact placement (CPLACE, wire_cplace.c): rank ->
 * node, GPU, local rank (8 bytes a rank), node names, racks, NVLink
 * domains, the distinct topologies and the report's small head and tail.
 * Every node (the leader too) expands it with p3d_cplace_decode into the
 * same p3d_place_msg, placement JSON byte for byte included. */
typedef struct p3d_cplace_in {
    const char *job_id, *master_addr;
    int master_port, nccl_port;
    int full_dp, min_dp; /* as p3d_place_msg's */
    p3d_wbatch batch;
    int fault_ms; /* as p3d_place_msg's */
    const p3d_cluster *cluster;
    const p3d_placement *pl;
    const char *json; /* the leader's own rendering of the report */
} p3d_cplace_in;

/* Encodes; when the compact form does not expand to exactly json (a bug,
 * or a report field it does not carry), the JSON goes along verbatim and
 * *compact is 0. 0 or -1. */
int p3d_cplace_encode(const p3d_cplace_in *in, p3d_wbuf *b, int *compact, char **err);
int p3d_cplace_decode(const unsigned char *body, size_t len, p3d_place_msg *m, char **err);
/* The same, keeping the cluster the compact form describes (every node's
 * name, topology, rack and NVLink domain: all a successor needs to place
 * again, docs/multinode.md "When the leader dies"); *cluster is the
 * caller's (p3d_cluster_free). A placement sent as JSON (not compact)
 * carries no topologies: -1. Node roles are not in it (the JSON says
 * them). */
int p3d_cplace_decode_cluster(const unsigned char *body, size_t len, p3d_place_msg *m, p3d_cluster **cluster,
                              char **err);

/* ---- wire_cdelta.c: a new placement as the difference from the old ---- */

/* FNV-1a 64 of n bytes: names a CPLACE body in a CDELTA. */
uint64_t p3d_delta_hash(const unsigned char *p, size_t n);
/* Appends to out the CDELTA body that turns the CPLACE body old (on bytes)
 * into nw (nn bytes). 0, or -1 (out of memory, or a body over
 * P3D_WIRE_MAX). */
int p3d_delta_make(const unsigned char *old, size_t on, const unsigned char *nw, size_t nn, p3d_wbuf *out);
/* Rebuilds the new body from the old one (on bytes) and a CDELTA body (dn
 * bytes, hostile: every offset and length checked, the result's length
 * and hash too). 0 with *out (malloc'd, *outn bytes), or -1 with *err. */
int p3d_delta_apply(const unsigned char *old, size_t on, const unsigned char *delta, size_t dn, unsigned char **out,
                    size_t *outn, char **err);

/* ---- the agent protocol (agent_proto.c) ------------------------------------ */

/*
 * The messages between an agent (one per node, the parent
 * of the node's workers) and the job controller (controller.c). The only
 * definition of that protocol; agent_proto.c encodes and decodes it.
 *
 * A message is one packet: on a node, a SOCK_SEQPACKET socket pair between
 * the agent and its parent; across nodes, the body of one P3D_MSG_FATE
 * frame of the rendezvous connection (rdzv.h), relayed unchanged. Text, so
 * that a packet can be read in a trace:
 *
 *   "<type> <field> <field> ...\n<text>"
 *
 * | type | direction       | fields             | meaning                                  |
 * |------|-----------------|--------------------|------------------------------------------|
 * | f    | agent -> ctl    | gen code rank sig  | a local rank's failure of generation     |
 * |      |                 |                    | gen: the first, then each other local    |
 * |      |                 |                    | rank's that fails before the agent stops |
 * |      |                 |                    | them (its --fault-window hold, or the    |
 * |      |                 |                    | controller's order): one a rank at most  |
 * |      |                 |                    | (the controller counts a rank once);     |
 * |      |                 | step errline       | exit code (128+sig for a signal), the    |
 * |      |                 | errtime + err line | global rank (-1: the ranks could not be  |
 * |      |                 | + frame line +     | started), the signal (0 for an exit);    |
 * |      |                 | text               | step: the rank's last progress line's    |
 * |      |                 |                    | step (-1: none); from its error file     |
 * |      |                 |                    | (torch's @record): the exception line    |
 * |      |                 |                    | ("ValueError: bad batch", escaped, at    |
 * |      |                 |                    | most P3D_AMSG_ERR_MAX bytes, "" none),   |
 * |      |                 |                    | the innermost frame's file (at most      |
 * |      |                 |                    | P3D_AMSG_WHERE_MAX bytes), its line      |
 * |      |                 |                    | errline (0 unknown) and the time errtime |
 * |      |                 |                    | (Unix seconds, -1 unknown); text: the    |
 * |      |                 |                    | root-cause summary. The controller       |
 * |      |                 |                    | classifies the failure from these        |
 * | d    | agent -> ctl    | gen                | every local rank of gen exited 0         |
 * | a    | agent -> ctl    | gen nranks         | the local ranks of gen are all started   |
 * | s    | agent -> ctl    | sig                | the node (agent or relay) got a stop     |
 * |      |                 |                    | signal: stop the job                     |
 * | r    | ctl -> agent    | gen                | stop the local ranks, start generation   |
 * |      |                 |                    | gen (restart count gen)                  |
 * | t    | ctl -> agent    | sig code           | stop: forward sig (0: none, the ranks    |
 * |      |                 |                    | are done), grace, SIGKILL; the job's     |
 * |      |                 |                    | exit code is code                        |
 * | u    | ctl -> agent    | sig                | forward sig as is (SIGUSR1/2)            |
 * | q    | ctl -> relay    |                    | a node is replaced: end the local ranks  |
 * |      |                 |                    | (grace, SIGKILL), keep the connection,   |
 * |      |                 |                    | then await the new placement (CPLACE)    |
 * | y    | relay -> ctl    |                    | retired: the node's agent is gone        |
 * | c    | ctl -> relay    | seq                | run this node's own --health-check now   |
 * |      |                 |                    | (never a command: the node's own CMD)    |
 * | h    | relay -> ctl    | seq ok + text      | the check's result for request seq: ok 1 |
 * |      |                 |                    | passed (or no --health-check here), 0    |
 * |      |                 |                    | failed; text: how (at most               |
 * |      |                 |                    | P3D_HEALTH_HOW-1 bytes are kept)         |
 * | p    | agent -> ctl    | gen step busy ckpt | progress of the node's ranks in gen (one |
 * |      |                 | nranks             | per --progress-interval at most, only    |
 * |      |                 |                    | when a rank's step advanced): the lowest |
 * |      |                 |                    | step, the median busy time of the last   |
 * |      |                 |                    | step in microseconds, the newest         |
 * |      |                 |                    | checkpoint durable on every reporting    |
 * |      |                 |                    | rank (-1: none), how many ranks report;  |
 * |      |                 |                    | relays forward it unchanged              |
 * | v    | agent -> ctl    | gen                | the first sign of life of the node's     |
 * |      |                 |                    | ranks in gen since they were started: a  |
 * |      |                 |                    | heartbeat (P3D_HEARTBEAT touched) or an  |
 * |      |                 |                    | output line; once per generation; the    |
 * |      |                 |                    | controller's "training resumed" figure   |
 * |      |                 |                    | (relays forward it unchanged)            |
 * | b    | both ways       | ms                 | heartbeat (--node-timeout): the sender   |
 * |      |                 |                    | is alive; ms: the sender's node timeout  |
 * |      |                 |                    | in milliseconds (0: off). A relay takes  |
 * |      |                 |                    | the leader's. Any packet counts as       |
 * |      |                 |                    | heard; B is sent every                   |
 * |      |                 |                    | p3d_beat_interval(timeout) seconds       |
 *
 * The letters are lower case, frame types (P3D_MSG_*, above) upper case:
 * a packet's letter never reads as a frame type, nor the other way round;
 * new letters are also chosen so that their upper case is no frame type
 * ('v', a vital sign: no 'V' frame).
 *
 * Decoding checks every field's range. Across nodes a packet that does
 * not parse, or that travels the wrong way (a type of the other column),
 * is dropped with one line naming the peer and what was wrong
 * (p3d_fate_complain); a FATE frame whose integrity tag does not match
 * (rdzv.h, P3D_TAG_LEN) ends the connection instead (docs/multinode.md,
 * "Frame integrity").
 */

/* The largest packet (header + root-cause text). */
#define P3D_AMSG_MAX 65536
/* The f packet's error line and frame line: the most bytes of each. */
#define P3D_AMSG_ERR_MAX 512
#define P3D_AMSG_WHERE_MAX 300

enum {
    P3D_AM_FAIL = 'f',
    P3D_AM_DONE = 'd',
    P3D_AM_UP = 'a',
    P3D_AM_SIGNAL = 's',
    P3D_AM_RESTART = 'r',
    P3D_AM_STOP = 't',
    P3D_AM_FORWARD = 'u',
    P3D_AM_RETIRE = 'q',
    P3D_AM_RETIRED = 'y',
    P3D_AM_CHECK = 'c',
    P3D_AM_HEALTH = 'h',
    P3D_AM_BEAT = 'b',
    P3D_AM_PROGRESS = 'p',
    P3D_AM_RESUMED = 'v',
};

typedef struct p3d_amsg {
    int type;         /* P3D_AM_* */
    int gen;          /* F D A R P W */
    int code;         /* F T */
    int rank;         /* F */
    int sig;          /* F S T U */
    int nranks;       /* A P */
    int seq;          /* C H */
    int ok;           /* H */
    int ms;           /* B */
    int step;         /* P; F: -1 none */
    int busy_us;      /* P */
    int ckpt;         /* P, -1: none */
    const char *text; /* F H; decoded: points into the packet (NUL-ended) */
    /* F: the rank's error file (torch's @record). One line each, ended by
     * a newline or the NUL (decoded: pointing into the packet, which is
     * not changed, ended by the newline: read up to it, p3d_amsg_line) */
    const char *err;   /* "ValueError: bad batch"; "" or NULL none */
    const char *where; /* the innermost frame's file; "" or NULL unknown */
    int errline;       /* its line, 0 unknown */
    int errts;         /* when it was raised, Unix seconds; -1 unknown */
} p3d_amsg;

/* The length of an f packet's err or where line (up to its newline or
 * NUL; 0 for NULL). */
size_t p3d_amsg_line(const char *s);

/* --node-timeout: how often a heartbeat (B) is sent for a node timeout
 * of timeout seconds: a quarter of it, at most 5 s, at least 50 ms (0
 * when off). */
double p3d_beat_interval(double timeout);

/* Encodes m into buf (cap bytes, at least 64; an f packet 89); the text is cut to fit.
 * Returns the packet length, or -1 for an unknown type. */
int p3d_amsg_encode(const p3d_amsg *m, char *buf, size_t cap);

/* Decodes a packet of len bytes; pkt[len] must be writable (a NUL is put
 * there: m->text points into pkt). 0, or -1 when malformed. */
int p3d_amsg_decode(char *pkt, size_t len, p3d_amsg *m);

/* p3d_amsg_decode that says why: on -1, *why (when why is not NULL) is
 * a short description of what was wrong (valid until the next call on the
 * same thread). */
int p3d_amsg_decode_why(char *pkt, size_t len, p3d_amsg *m, const char **why);
/* 1 when a packet of type may travel down (controller -> agent or
 * relay, down = 1) or up (down = 0), per the table above. */
int p3d_amsg_dir_ok(int type, int down);
/* One line on stderr, "par3drun: PEER: WHAT: OUTCOME", about a packet or
 * frame that was not taken; peer and the formatted what are escaped
 * (termsafe.h). Rate-limited per process: at most 5 lines every 10 s,
 * the lines held back counted in the next one said. */
void p3d_fate_complain(const char *peer, const char *outcome, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Receives one packet from a SOCK_SEQPACKET socket without waiting into
 * buf (cap bytes, one kept for the decoder's NUL). Returns its length,
 * 0 when none is queued, -1 at EOF or on an error. */
long p3d_amsg_recv(int fd, char *buf, size_t cap);

/* Sends a message on a SOCK_SEQPACKET socket (best effort; fd < 0: no-op). */
void p3d_amsg_send(int fd, const p3d_amsg *m);
/* ---- wire_rejoin.c: leader failover ---------------------------------------- */

/* Every frame here travels on an authenticated channel (p3d_chan, the
 * failover gate's or the fate channel's) and is small: a receiver refuses
 * a body over its bound and checks every field's range. */

/* SUCCESSORS: the nodes that may succeed the leader, lowest node rank
 * first (spares included, lost nodes and the leader left out), as of
 * generation gen; at most P3D_FAILOVER_CANDIDATES, whatever the job's
 * size (launcher/run/failover.c picks them). */
#define P3D_FAILOVER_CANDIDATES 8
#define P3D_FAILOVER_ADDR_MAX 255
typedef struct p3d_successor {
    int node_rank;
    char addr[P3D_FAILOVER_ADDR_MAX + 1];
    int port; /* its failover port, 1..65535 */
} p3d_successor;
typedef struct p3d_successors {
    int gen;
    int n;
    p3d_successor c[P3D_FAILOVER_CANDIDATES];
} p3d_successors;

/* REJOIN: a node that lost the leader, to a successor. */
typedef struct p3d_rejoin {
    uint32_t proto; /* P3D_WIRE_PROTO */
    int nnodes, node_rank;
    int gen;             /* the generation its ranks ran */
    int leader;          /* the node rank of the leader it lost */
    uint64_t place_hash; /* p3d_delta_hash of the CPLACE body it holds */
    /* where it is reached, as its rendezvous record said (the successor
     * holds no other node's record: MASTER_ADDR follows rank 0 there) */
    char addr[P3D_FAILOVER_ADDR_MAX + 1];
    int master_port, nccl_port;
    int failover_port; /* its own failover port (0: none), for the
                              * successor's own successor list */
} p3d_rejoin;

/* REJOINED: the successor's answer. accepted 0: refused, the node stops
 * (why says it, at most P3D_REJOIN_WHY_MAX bytes); gen: the successor's
 * generation, newer than an old leader's that asks. */
#define P3D_REJOIN_WHY_MAX 199
typedef struct p3d_rejoined {
    int accepted;
    int gen;
    char why[P3D_REJOIN_WHY_MAX + 1];
} p3d_rejoined;

/* Each builds the frame in out (reset first; the caller frees it; a
 * channel tags it when it is sent): 0, or -1 (a field out of range, out
 * of memory). */
int p3d_successors_frame(const p3d_successors *s, p3d_wbuf *out);
int p3d_rejoin_frame(const p3d_rejoin *r, p3d_wbuf *out);
int p3d_rejoined_frame(const p3d_rejoined *a, p3d_wbuf *out);
/* Each takes a received frame of that type (type and body as
 * p3d_frame_read / p3d_framer_take give them; body is not changed): 0
 * with *out filled, or -1 with *err naming what was wrong (the type, the
 * size, a field and the range it must be in). nnodes: the job's
 * node count as this node knows it. */
int p3d_successors_open(int type, const unsigned char *body, size_t len, int nnodes, p3d_successors *out, char **err);
int p3d_rejoin_open(int type, const unsigned char *body, size_t len, int nnodes, p3d_rejoin *out, char **err);
int p3d_rejoined_open(int type, const unsigned char *body, size_t len, p3d_rejoined *out, char **err);

/* ---- the events.jsonl line (wire_event.c; RUN_DIR/events.jsonl, docs/events.md) ---- */

/* Appends {"ts": UNIX, "t": SECONDS-SINCE-t0, <fields>} as one line; fmt
 * gives the fields ("\"event\": \"start\", ..."). fd < 0: nothing. */
void p3d_event(int fd, double t0, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* s as a JSON string literal (quotes included), cut to fit cap. */
void p3d_json_str(char *buf, size_t cap, const char *s);

#endif
