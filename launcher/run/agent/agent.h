/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent.h — the public header of launcher/run/agent/: what runs on a node
 * for the job. A node's agent (agent.c) runs its local ranks until the
 * controller says the job is over; the link to it (agent_link.c) forks a
 * local agent on a socket pair and carries fate packets over a
 * rendezvous connection; on a multi-node node other than the leader the
 * relay (relay.c) forks the agent and relays between it and the leader's
 * controller, and, when the leader is lost, dials its successor, chosen
 * from the bounded successor list the leader sent (failover.c; docs/
 * multinode.md, "When the leader dies"; pure: no socket, no clock).
 */
#ifndef P3D_AGENT_H
#define P3D_AGENT_H

#include "ranks.h"
#include "rdzv.h"
#include "wire.h"

/* What a multi-node job adds to p3d_launch (L->mn; NULL on one node and
 * under --emulate): filled by the multi-node flow (mnode.c,
 * mnode_failover.c) before the hub or the relay starts; the relay and
 * the hub read it. Pointers are borrowed from the flow, which outlives
 * both. */
typedef struct p3d_mnode_hooks {
    /* docs/multinode.md, "When a node dies": a relay hands a new placement
     * frame's body (type: P3D_MSG_CPLACE or P3D_MSG_CDELTA) to adopt,
     * which makes it the node's placement for restart gen (placement.json
     * replaced, the previous one kept); sent(ctx) says that every node now
     * holds job->cplace (the next difference's base). ctx for both, and for
     * place_hash and rejoined. */
    int (*adopt)(void *ctx, int type, const unsigned char *body, size_t len, int gen, char **err);
    void (*sent)(void *ctx);
    void *ctx;
    /* The leader: unhealthy[i] set when node rank i failed its own
     * --health-check before the rendezvous (placed with no ranks, never
     * asked again); NULL: none. */
    const unsigned char *unhealthy;
    /* Leader failover (docs/multinode.md, "When the leader dies"):
     * failover on (no --no-failover, a TCP multi-node job); this node's
     * failover port; on a node that finds itself the successor,
     * takeover(ctx, leader, heard, why, before, nbefore) runs the job's
     * controller from here on and returns the node's exit code;
     * before[0..nbefore): the candidates ahead of this one in the
     * successor list that it could not reach (an election needs them gone). */
    int failover;
    struct p3d_fgate *gate;
    int (*takeover)(void *ctx, int leader, double heard, const char *why, const int *before, int nbefore);
    void *takeover_ctx;
    /* Leadership held in the rendezvous backend (etcd's election; NULL
     * elect_news: none, the majority rule decides): the descriptor the
     * hub watches while this node leads or bids to (-1: none), and its
     * news (P3D_RDZV_NEWS_*, msg: what it says). */
    int elect_fd;
    int (*elect_news)(void *ctx, char *msg, size_t cap);
    void *elect_ctx;
    /* What a rejoining node tells the successor about itself, and what
     * the successor checks against: the hash of the CPLACE body held,
     * this node's address and ports (failover_port 0: none). */
    uint64_t (*place_hash)(void *ctx);
    const char *self_addr;
    int self_master_port, self_nccl_port, self_failover_port;
    /* The successor: a node rejoined (its address and ports, for the
     * placement's MASTER_ADDR when rank 0 lands there). */
    void (*rejoined)(void *ctx, int node, const char *addr, int master_port, int nccl_port, int failover_port);
    /* The job key (the token): what a failover dial proves. */
    const char *key;
    /* The leader: the successor list (S, untagged), sent to each node once
     * it first speaks on the fate channel (it holds its placement then:
     * nothing else is read on its connection before); NULL: none. */
    const struct p3d_wbuf *successors;
    /* The leader: nodes joining the running job (par3drun --join;
     * docs/multinode.md, "Adding a node to a running job"), on ctx: the
     * join port (NULL: none); join_check: whether the joiner fits the job
     * (its kind, its --health-check), 0 with *name (the name it will have,
     * malloc'd) or -1 with *why (the joiner is refused with it); join_add:
     * the joiner appended to the cluster as a spare (the next node index),
     * the grown placement adopted here and set as job->cplace for every
     * node, the successor list rebuilt; 0 or -1 with *err. */
    struct p3d_jport *jport;
    int (*join_check)(void *ctx, const struct p3d_joiner *jn, char **name, char **why);
    int (*join_add)(void *ctx, const struct p3d_joiner *jn, char **err);
} p3d_mnode_hooks;

/* The first max (at most P3D_FAILOVER_CANDIDATES) node ranks that may
 * succeed: ascending, the leader and the lost nodes (lost[i] != 0; NULL:
 * none) left out, spares included. Writes them to out; returns how many. */
int p3d_failover_candidates(int nnodes, int leader, const unsigned char *lost, int *out, int max);

/* The successor list for generation gen: the candidates above with the
 * address and failover port every node told the leader (addr[i], port[i]
 * by node rank; a node without a port, 0, is no candidate: it cannot be
 * reached). 0, or -1 when an address is over P3D_FAILOVER_ADDR_MAX. */
int p3d_failover_list(int nnodes, int leader, const unsigned char *lost, const char *const *addr, const int *port,
                      int gen, p3d_successors *out);

/* The candidate a node that lost the leader tries now: the first of s not
 * marked unreachable (tried[i] != 0 for s->c[i]; NULL: none tried). Its
 * index, or -1 when every candidate was tried (the node stops, exit 1). */
int p3d_failover_next(const p3d_successors *s, const unsigned char *tried);

/* More than half of members: what a successor needs before it acts (the
 * majority rule; the controller's TAKEOVER counts the same way). */
static inline int p3d_failover_majority(int rejoined, int members)
{
    return members > 0 && 2 * (long)rejoined > (long)members;
}

/* ---- the relay's and the agent's machines, as tables ---------------------
 * Read like the controller's (docs/controller.md) and s6-supervise's
 * actions[state][event]: every (state, event) cell names its handler and
 * the states it may move to (P3D_NODE_STAY: it may leave the state as it
 * is), or says the event means nothing there (ignored), or that it cannot
 * meet that state. Every change of state goes through one function per
 * machine, which says it with --verbose ("relay: state A -> B (event)").
 * docs/agent.md prints both tables (test_node_tables keeps it so). */
enum { P3D_NODE_CELL_RUN = 1, P3D_NODE_CELL_IGNORED, P3D_NODE_CELL_IMPOSSIBLE };
#define P3D_NODE_STAY (1u << 31)
#define P3D_NODE_TO(s) (1u << (s))
typedef struct p3d_node_cell {
    int kind;            /* P3D_NODE_CELL_*; 0: not in the table */
    const char *handler; /* RUN only */
    unsigned next;       /* P3D_NODE_TO(state) | P3D_NODE_STAY */
} p3d_node_cell;

/* relay.c: a node other than the leader. */
typedef enum p3d_relay_state {
    P3D_RELAY_RELAYING,   /* its agent runs the node's ranks; packets go both ways */
    P3D_RELAY_RETIRING,   /* a retire order: the agent ends, then Y */
    P3D_RELAY_PARKED,     /* Y sent, or rejoined a successor: awaiting R and the placement */
    P3D_RELAY_FAILOVER,   /* the leader lost: the agent killed, the successors dialed */
    P3D_RELAY_STOPPING,   /* the node's ranks end for good; the relay ends with its agent */
    P3D_RELAY_SUCCEEDING, /* this node succeeds the leader: the takeover runs after the loop */
    P3D_RELAY_DONE,       /* the agent is gone: the loop ends */
    P3D_RELAY_NSTATES
} p3d_relay_state;
typedef enum p3d_relay_event {
    P3D_RELAY_EV_AGENT_PACKET,  /* a packet from the agent */
    P3D_RELAY_EV_AGENT_CLOSED,  /* the agent's socket closed */
    P3D_RELAY_EV_AGENT_SILENT,  /* the agent silent for --node-timeout */
    P3D_RELAY_EV_AGENT_ENDED,   /* completion: no agent, no socket to it */
    P3D_RELAY_EV_CHECK,         /* the leader asks for a --health-check (C) */
    P3D_RELAY_EV_LEADER_BEAT,   /* the leader's heartbeat (B) */
    P3D_RELAY_EV_RETIRE,        /* the leader retires this node (Y wanted) */
    P3D_RELAY_EV_RESTART,       /* the restart count (R) */
    P3D_RELAY_EV_STOP,          /* the leader's stop order (T) */
    P3D_RELAY_EV_PACKET,        /* any other packet for the agent */
    P3D_RELAY_EV_SUCCESSORS,    /* the successor list (S) */
    P3D_RELAY_EV_PLACEMENT,     /* a CPLACE or CDELTA frame */
    P3D_RELAY_EV_FORGED,        /* a frame failed its integrity check */
    P3D_RELAY_EV_LEADER_LOST,   /* the leader's connection closed */
    P3D_RELAY_EV_LEADER_SILENT, /* the leader silent for its timeout */
    P3D_RELAY_EV_DIAL,          /* posted: the successors are dialed */
    P3D_RELAY_EV_SIGNAL,        /* INT, TERM, HUP, QUIT here */
    P3D_RELAY_EV_USR,           /* USR1/USR2 that is no preemption warning */
    P3D_RELAY_EV_PREEMPT,       /* the scheduler's warning */
    P3D_RELAY_EV_GRACE_OVER,    /* the agent's time to end is up */
    P3D_RELAY_EV_GIVE_UP,       /* it did not end even by force */
    P3D_RELAY_EV_HEALTH_DONE,   /* our --health-check ended */
    P3D_RELAY_NEVENTS
} p3d_relay_event;
const char *p3d_relay_state_name(int s);
const char *p3d_relay_event_name(int e);
/* Cell (s, e) of the relay's table into *out: 1, or 0 (out of range; *out
 * zeroed). */
int p3d_relay_cell(int s, int e, p3d_node_cell *out);

/* agent.c: a node's agent. */
typedef enum p3d_agent_state {
    P3D_AGENT_STARTING, /* the next generation starts once no rank runs (the first, or a restart order's) */
    P3D_AGENT_RUNNING,  /* the generation's ranks run */
    P3D_AGENT_HOLDING,  /* a rank failed: the others run on for --fault-window */
    P3D_AGENT_STOPPING, /* the ranks are stopped, the controller not heard yet */
    P3D_AGENT_IDLE,     /* no rank runs: the controller's word awaited */
    P3D_AGENT_ENDING,   /* the job's end (stop order, signal, lost upstream): exit once empty */
    P3D_AGENT_EXITED,   /* the loop ends */
    P3D_AGENT_NSTATES
} p3d_agent_state;
typedef enum p3d_agent_event {
    P3D_AGENT_EV_RANK_FAIL,  /* a rank exited with a failure */
    P3D_AGENT_EV_ALL_EXITED, /* completion: no rank runs */
    P3D_AGENT_EV_TICK,       /* before each wait: --hang-timeout judged */
    P3D_AGENT_EV_HOLD_OVER,  /* the hold after a failure is over */
    P3D_AGENT_EV_BEAT,       /* the upstream's heartbeat (B) */
    P3D_AGENT_EV_RESTART,    /* the controller's restart order (R) */
    P3D_AGENT_EV_STOP,       /* the controller's stop order (T) */
    P3D_AGENT_EV_FORWARD,    /* a signal for the ranks (U) */
    P3D_AGENT_EV_UP_LOST,    /* the upstream's socket closed */
    P3D_AGENT_EV_FENCE,      /* the upstream silent for its timeout */
    P3D_AGENT_EV_SIGNAL,     /* INT, TERM, HUP, QUIT here */
    P3D_AGENT_EV_USR,        /* USR1/USR2 that is no preemption warning */
    P3D_AGENT_EV_PREEMPT,    /* the scheduler's warning */
    P3D_AGENT_NEVENTS
} p3d_agent_event;
const char *p3d_agent_state_name(int s);
const char *p3d_agent_event_name(int e);
int p3d_agent_cell(int s, int e, p3d_node_cell *out);

/* ---- agent.c ------------------------------------------------------------- */

/* Runs node `node`'s local ranks until the controller (on upstream, a
 * SOCK_SEQPACKET socket, wire.h) says the job is over; returns the
 * agent's exit code. Blocks SIGCHLD and the forwarded signals for its own
 * signalfd. */
int p3d_agent_run(const p3d_launch *L, int node, int upstream);


/* ---- agent_link.c: how the hub reaches an agent --------------------------- */

/* Forks the agent of node `node` on a new socket pair; the child closes
 * close_fds first (what belongs to the parent). 0, or -1 with errno. */
int p3d_agent_fork(const p3d_launch *L, int node, const int *close_fds, int nclose, pid_t *pid, int *sock);

/* Sends one agent_proto packet as a P3D_MSG_FATE frame on a node's
 * channel (wire.h, p3d_chan: tagged with its session key). 0 or -1. */
struct p3d_chan;
int p3d_fate_send(struct p3d_chan *ch, const char *pkt, size_t len);
/* Reads what a node's channel has (tags checked) and calls fn for each
 * well-formed agent_proto message (p3d_fate_take). -1 (with *err) when
 * the connection is gone or a frame failed its tag check (the caller
 * drops it). peer: the node's name. */
int p3d_fate_read(struct p3d_chan *ch, const char *peer, void (*fn)(void *ctx, const p3d_amsg *m), void *ctx,
                  char **err);
/* One frame of the fate channel from peer (a node name), read by the
 * leader (down = 0) or a relay (down = 1), its tag already checked by the
 * channel. 1: a FATE packet that travels this way is in *m (its text
 * points into body, which must have a writable byte past len); 2 (down
 * only): a CPLACE or CDELTA frame, for the caller; 0: dropped with one
 * line (p3d_fate_complain). */
int p3d_fate_take(const char *peer, int down, int type, unsigned char *body, size_t len, p3d_amsg *m);
/* Says, once per process and rate-limited, that a frame from peer failed
 * its tag check (why): the connection is ended by the caller. */
void p3d_fate_forged(const char *peer, int down, const char *why);

/* ---- relay.c ------------------------------------------------------------- */

/* A multi-node node other than the leader: forks its agent and relays
 * between it and the leader's controller on up (taken over). Returns the
 * node's exit code (the job's, as the leader decided it). */
int p3d_relay_run(const p3d_launch *L, int me, struct p3d_chan *up);

#endif
