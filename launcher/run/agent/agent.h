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
