/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.h — every codec the launcher puts on a socket, below the transports
 * that carry them: the frame (type, length, body, and the HMAC tag of the
 * frames a parent sends), the rendezvous messages (HELLO, JOIN, the node
 * record, the placement), the tree's messages, the compact placement and
 * its difference, and the agent protocol (agent_proto.h, included here).
 * Pure: no I/O but the frame read/write helpers, nothing of rdzv/ or run/.
 * The letter tables are one per protocol: P3D_MSG_* for frames (below),
 * P3D_AM_* for agent packets (agent_proto.h), which travel inside a frame
 * of type P3D_MSG_FATE when they cross nodes.
 */
#ifndef P3D_WIRE_H
#define P3D_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "agent_proto.h"
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
#define P3D_WIRE_PROTO 5       /* wire protocol number, sent in HELLO and JOIN
                                * (2: the distribution tree; 3: the
                                * gathered record's health check; 4: the
                                * integrity tag of TREE, CPLACE, CDELTA
                                * and FATE frames; 5: agent packets in
                               * lower-case letters) */

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
                              * difference from the node's (wire_cdelta.c) */
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
                              * base of a later CDELTA, wire_cdelta.c) */
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

/* ---- the distribution tree (wire_tree.c; the tree itself: launcher/rdzv/rdzv_tree_*.c) ------------------ */

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

/* The compact placement (CPLACE, wire_cplace.c): rank ->
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

#endif
