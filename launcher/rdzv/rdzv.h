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
 *     connect to the leader, prove the token without sending it (the
 *     handshake, wire_chan.c), present their version, send their node
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
#include "wire.h"
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
    double timeout; /* seconds, resolved (default grows with nnodes) */
    /* --preflight's TCP ring across the hosts (docs/launch.md,
     * "Preflight"): when this node's JOIN has a ring_port, the leader
     * holds every tree position until all nodes joined and names in each
     * the ring's next node; ring then runs this node's part (it may block
     * for its bounded benchmark) and updates own, this node's gathered
     * record, before the record goes up the tree. NULL: no ring here. */
    void (*ring)(void *ctx, const char *addr, int port, p3d_grec *own);
    void *ring_ctx;
    /* the address this node's listeners bind and the others reach them
     * at (rdzv_addr.c), numeric; "" until the caller knows it (a node's
     * tree port then binds its rendezvous connection's local address) */
    char bind_addr[128];
} p3d_rdzv;

/* Resolves --rdzv (auto, none, static:HOST:PORT, slurm[:HOST], pmix,
 * etcd:URL, NAME:ARG for a plugin) against the environment. Returns 1 with
 * *r filled when a multi-node rendezvous is active, 0 when the job is a
 * single-node one (auto found nothing, or "none"), -1 with *err (exit 2).
 * Caller ends it with p3d_rdzv_close(). */
int p3d_rdzv_open(const p3d_opts *o, p3d_rdzv *r, char **err);
/* The backend's publish step (see p3d_rdzv_ops): 0, or -1 with *err;
 * -2 with *err when it refuses a joiner (--join: exit 2). */
int p3d_rdzv_publish(p3d_rdzv *r, char **err);
void p3d_rdzv_close(p3d_rdzv *r);

/* Leadership held in the backend (etcd; p3d_rdzv_ops's campaign, keep,
 * notify_fd, news): none of these blocks. elects: 1 when the backend
 * decides who leads after a leader is lost (its election), 0 when the
 * job's own majority does. campaign: this node bids to lead (before:
 * the node ranks ahead of it in the succession; until: CLOCK_MONOTONIC
 * seconds, as p3d_now). keep: the job's state for a successor to read
 * (a no-op without an election). notify_fd: readable while news has
 * something (-1 none). news: P3D_RDZV_NEWS_*, with msg. */
int p3d_rdzv_elects(const p3d_rdzv *r);
int p3d_rdzv_campaign(p3d_rdzv *r, const int *before, int nbefore, const char *value, double until, char **err);
int p3d_rdzv_keep(p3d_rdzv *r, const char *text, char **err);
int p3d_rdzv_notify_fd(const p3d_rdzv *r);
int p3d_rdzv_news(p3d_rdzv *r, char *msg, size_t cap);

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

/* ---- the TCP rendezvous (rdzv_tcp.c, rdzv_tree_*.c) ------------------------------------ */

/* Leader: listens on host:port only (port 0: any free one; *bound gets
 * it). Returns the listening fd or -1 with *err. */
int p3d_tcp_listen(const char *host, int port, int *bound, char **err);
/* Connects to host:port by deadline (CLOCK_MONOTONIC seconds, as
 * p3d_now): the connected (blocking) fd, or -1. */
int p3d_tcp_dial(const char *host, int port, double deadline);

/* ---- where a node listens (rdzv_addr.c) ----------------------------------- */

/* The numeric address (IPv4, or IPv6 with its scope) fd's local side is
 * bound to, into out (cap bytes): 0, or -1. */
int p3d_sock_addr(int fd, char *out, size_t cap);
/* The local address of this node on its route to host:port (numeric,
 * into out): what a connection to the leader would come from. 0, or -1
 * with *err. */
int p3d_route_addr(const char *host, int port, char *out, size_t cap, char **err);
/* --bind-addr / P3D_BIND_ADDR (named what in the message): one numeric
 * address, not a wildcard, that this node can bind. 0, or -1 with *err
 * (bad input: exit 2). */
int p3d_bind_addr_check(const char *what, const char *addr, char **err);

/* Leader: tells each connected agent why the job will not start. A reason
 * that starts with P3D_REFUSE_FAILED is a failure of the job (a node
 * failed its health check): the agents exit 1 like the leader; any other
 * refusal is the leader's input (exit 2). */
#define P3D_REFUSE_FAILED "the job cannot start: "
void p3d_tcp_refuse_all(p3d_chan *const *chans, int n, const char *why);

/* Sends a refusal frame (best effort): on a connection that finished its
 * handshake, tagged (p3d_tcp_refuse_chan); before it, in clear. */
void p3d_tcp_refuse(int fd, const char *why);
void p3d_tcp_refuse_chan(p3d_chan *c, const char *why);

/* Sizes of what the tree moved, for --verbose and bench/swarm. */
typedef struct p3d_tree_stats {
    uint64_t bytes_sent; /* by this process on rendezvous sockets */
    uint64_t bytes_recv;
    double t_join;  /* leader: until every record was in */
    double t_place; /* leader: placement + encoding */
    double t_send;  /* leader: distribution to its children */
    size_t json_len, cplace_len;
} p3d_tree_stats;

/* The fan-out: --rdzv-fanout, else P3D_RDZV_FANOUT, else the default.
 * Only the leader's counts. 0 or -1 with *err. */
int p3d_rdzv_fanout(const p3d_opts *o, int *fanout, char **err);

/* Leader: accepts every agent's connection on lfd (the handshake: it
 * proves the job key, wire_chan.c), its JOIN, answers each with its tree
 * position, and collects the records that come up the tree into *g (its
 * own record first, taken from *mine). chans[i]: node rank i's control
 * connection (chans[0] = NULL), the caller's. On failure the joined agents
 * are told why. */
int p3d_tree_gather(int lfd, const p3d_rdzv *r, int fanout, p3d_join *mine, p3d_gather *mine_g, p3d_gather *g,
                    p3d_chan **chans, p3d_join *joins, int verbose, p3d_tree_stats *st, char **err);

/* Leader or interior agent: sends one frame (built, untagged) to each of
 * n channels, each with its own tag (concurrently, non-blocking: a slow
 * child does not hold up its siblings), within timeout seconds. NULL
 * channels are skipped. Returns 0, or -1 with *err naming the node
 * (ranks[i]). */
int p3d_tree_send(p3d_chan *const *chans, const int *ranks, int n, const p3d_wbuf *frame, double timeout,
                  p3d_tree_stats *st, char **err);

/* Agent: the handshake and JOIN with the leader, attach to the tree
 * parent (a handshake too), collect the children's records, send the
 * subtree's up, receive the placement and pass it on. Returns 0 with the
 * control connection (the fate channel, the caller's) in *ctrl and *out
 * filled; -2 with *err when the leader refused this node (the reason
 * quoted: wrong key, version, node rank, a placement that failed: exit
 * 2); -1 with *err when the rendezvous did not complete (leader or tree
 * parent unreachable or gone, or the leader's own timeout: exit 1 on every
 * side). me: this node's record (topo taken). */
int p3d_tree_join(const p3d_rdzv *r, p3d_join *mine, p3d_gather *me, p3d_place_msg *out, int verbose,
                  p3d_tree_stats *st, p3d_chan **ctrl, char **err);

/* ---- rdzv_join.c: a node joining the running job ------------------------ */

/*
 * The leader's join port (par3drun --join; docs/multinode.md, "Adding a
 * node to a running job"): its rendezvous port, kept open once the job
 * runs. A joiner proves the job key (P3D_LINK_CTRL), sends a JOIN of node
 * rank P3D_JOIN_RUNNING, is told its place (the leader is its parent) and
 * sends its record; then it is the caller's to admit or refuse. Strangers
 * get what the rendezvous gives them (small frames, HELLO_DEADLINE, the
 * oldest evicted when the slots are full). The joiner's side is
 * p3d_tree_join with r->boot.node_rank P3D_JOIN_RUNNING.
 */
typedef struct p3d_jport p3d_jport;
/* A joiner handed over: its JOIN, its record (one, with its topology) and
 * its channel (blocking mode), all the caller's (p3d_joiner_free). */
typedef struct p3d_joiner {
    p3d_join j;
    p3d_gather g;
    p3d_chan *ch;
} p3d_joiner;
/* Takes lfd (the leader's rendezvous socket, listening) and r (borrowed:
 * the job key, id and version a joiner must show). NULL with *err (lfd
 * closed). */
p3d_jport *p3d_jport_new(int lfd, const p3d_rdzv *r, char **err);
/* The listening socket (watch it for input); -1 for NULL. */
int p3d_jport_fd(const p3d_jport *p);
/* Accepts what waits, runs the handshakes, reads JOINs and records,
 * without blocking. 1: a joiner in *out (call again for the next); 0:
 * none yet. *next (may be NULL) is set to the next deadline of one held
 * (lowered from what it was). Peers that fail are refused or dropped,
 * said on stderr. */
int p3d_jport_take(p3d_jport *p, double now, double *next, int verbose, p3d_joiner *out);
/* Held peers (their bytes do not wake the listening socket: while any
 * are, call p3d_jport_take again soon). */
int p3d_jport_waiting(const p3d_jport *p);
void p3d_joiner_free(p3d_joiner *j);
void p3d_jport_close(p3d_jport *p);

/* ---- rdzv_failover.c: leader failover's port and dial ---------------- */

/*
 * rdzv_failover.h — the sockets of leader failover (docs/multinode.md,
 * "When the leader dies"): the failover port every node listens on (the
 * gate: where a successor takes the nodes that lost the leader) and the
 * dial of a node to a successor. The frames are wire_rejoin.c's; what the
 * job does with a rejoined node is the controller's (TAKEOVER).
 *
 * Whoever reaches a failover port is a stranger until it proved the job
 * key (the handshake of wire_chan.c, link kind P3D_LINK_GATE) and sent a
 * REJOIN: until then it gets small frames only, P3D_FGATE_DEADLINE
 * seconds, and a bounded slot (the oldest stranger is evicted for a new
 * one).
 */


#define P3D_FGATE_FRAME_MAX 512

/* The most agents (nodes) one job may have (docs/limits.md): every count
 * from the environment is bounded by it before anything is sized by it. */
#define P3D_RDZV_MAX_AGENTS (1ULL << 20)
#define P3D_FGATE_DEADLINE 5.0

typedef struct p3d_fgate p3d_fgate;

/* Listens on host (the address the rendezvous uses: rdzv_addr.c; its
 * family's socket), on a port the kernel picks: *port gets it (the node's
 * JOIN carries it).
 * maxpend bounds the strangers held at once (1..65536). NULL with *err.
 * Free with p3d_fgate_close. */
p3d_fgate *p3d_fgate_open(const char *host, int maxpend, int *port, char **err);
/* The job key the strangers must prove (the gate takes nobody until it
 * is set: the token may come from the backend after the gate opened). */
void p3d_fgate_set_key(p3d_fgate *g, const char *key);
/* The listening socket (watch it for input), -1 when g is NULL. */
int p3d_fgate_fd(const p3d_fgate *g);
/* Accepts what is waiting and runs the strangers' handshakes, without
 * blocking. 1: a node rejoined: *out is its checked REJOIN and *ch its
 * channel (blocking mode, now the caller's); call again for the next.
 * 0: none (yet). Peers without the job key, that sent something else,
 * too much, or nothing within P3D_FGATE_DEADLINE are dropped; each drop is counted and
 * its reason kept (p3d_fgate_dropped) and said on stderr when verbose.
 * *next (may be NULL) is lowered to the next deadline of a stranger. */
int p3d_fgate_take(p3d_fgate *g, int nnodes, double now, double *next, int verbose, p3d_rejoin *out, p3d_chan **ch);
/* How many strangers the gate holds: accepted, their frame not whole yet.
 * Their bytes do not make the listening socket readable: while any are
 * held, call p3d_fgate_take again soon (a frame that arrived just after
 * its connection was accepted is read only then). */
int p3d_fgate_waiting(const p3d_fgate *g);
/* How many strangers were dropped, and why the last one was ("" none). */
int p3d_fgate_dropped(const p3d_fgate *g, const char **last_why);
void p3d_fgate_close(p3d_fgate *g);

/* A node that lost the leader reaches candidate c: connects (bounded by
 * deadline), runs the handshake with key (bounded by hs_deadline: the
 * candidate's loop answers it only once its takeover runs; a reset is
 * tried again, up to 3 times) and sends j. The channel (blocking), or
 * NULL with *err naming the candidate. */
p3d_chan *p3d_failover_dial(const p3d_successor *c, const p3d_rejoin *j, const char *key, double deadline,
                            double hs_deadline, char **err);
/* Reads the candidate's REJOINED answer on ch by deadline (tag checked
 * first). 0 with *out, or -1 with *err (silent past the deadline, closed,
 * or not a valid answer). */
int p3d_failover_answer(p3d_chan *ch, double deadline, p3d_rejoined *out, char **err);

#endif
