/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_tcp_internal.h — what the three parts of the TCP rendezvous share
 * (private to launcher/rdzv/): rdzv_tcp.c (sockets, the pre-authentication
 * limits, the tree's shape, sending down the tree), rdzv_tree_leader.c
 * (the leader's gather) and rdzv_tree_agent.c (an agent's join, its
 * children, the placement passed on).
 */
#ifndef P3D_RDZV_TCP_INTERNAL_H
#define P3D_RDZV_TCP_INTERNAL_H

#include "rdzv.h"

#include <stddef.h>
#include <stdint.h>

/* How the leader's gather timeout begins (refusal() tells it apart). */
#define TIMEOUT_TEXT "rendezvous: timed out"
/* How often waiting is reported (terminal or --verbose only). */
#define PROGRESS_EVERY 5.0

typedef struct pending {
    int fd;
    p3d_framer fr;
    char peer[160];
    double since; /* accepted at */
    int hs_on;    /* the handshake began (hs) */
    p3d_hs hs;
    p3d_chan *ch;  /* the handshake is done: the peer proved the job key;
                   * fd is ch's then */
    char why[200]; /* why it was last dropped (kept after the drop) */
} pending;

/* Before a peer has proved the job key it gets little: HELLO_DEADLINE
 * seconds for its handshake and first frame (JOIN to the leader, TJOIN to
 * a tree parent; an agent sends them right after connecting), and
 * handshake frames of at most PREAUTH_FRAME_MAX bytes (they are under
 * 100; big frames come only from authenticated agents). When every slot
 * is taken, the oldest unauthenticated peer is evicted for the new one,
 * so idle connections cannot keep an agent out. The leader and every
 * interior agent of the tree apply the same limits. */
#define HELLO_DEADLINE 10.0
#define PREAUTH_FRAME_MAX 2048u

/* O_NONBLOCK on (1) or off (0); 0 or -1. */
int rz_set_nonblock(int fd, int on);

/* TCP keepalive and no Nagle on a rendezvous connection. */
void rz_keepalive(int fd);

/* "ADDR:PORT" of fd's peer, for messages. */
void rz_peer_name(int fd, char *buf, size_t cap);

/* Closes an unauthenticated peer (saying why when verbose). */
void rz_drop_pending(pending *p, const char *why, int verbose);

/* Accepts every waiting connection into a free slot of pd (evicting the
 * oldest unauthenticated peer when all are taken). */
void rz_accept_all(int lfd, pending *pd, int maxpend, int verbose);

/* Drops peers past HELLO_DEADLINE; *until gets the next deadline. */
void rz_expire_pending(pending *pd, int maxpend, double now, double *until, int verbose);

/* A pending peer's handshake (acceptor side, link kind) on what arrived,
 * then its first frame after it, tag checked: its type (>0) with the body
 * (p->ch is then set: the peer proved the job key), 0 not yet complete,
 * -1 dropped (closed, malformed, over PREAUTH_FRAME_MAX, refused: said on
 * stderr). */
int rz_pending_auth(pending *p, const char *key, int kind, unsigned char **body, size_t *len);

/* Refuses a peer that proved the key but sent a JOIN it cannot join
 * with: said on stderr (who: "rendezvous", "par3drun: join port"; host:
 * its JOIN's, may be NULL), told why on its channel, dropped. */
void rz_refuse_joiner(pending *p, const char *who, const char *host, const char *verdict);

/* Why a peer's protocol/version/job id is refused (into why), or NULL
 * when it may join (the job key it proved in the handshake). */
const char *rz_auth_verdict(const p3d_rdzv *r, uint32_t proto, const char *version, const char *job_id, char *why,
                            size_t cap);

/* The k-ary heap of node ranks: parent of i (-1 for the leader), */
int rz_tree_parent(int i, int k);

/* how many children i has among n nodes, */
int rz_tree_nchildren(int i, int k, int n);

/* and whether x is in the subtree of top. */
int rz_in_subtree(int x, int top, int k);

/* Connects to host:port, retrying until the deadline (rdzv_connect.c).
 * The fd (blocking, keepalive on), or -1 with *err naming who ("the
 * leader (node rank 0)", "the tree parent node[3]"). */
int rz_connect_retry(const char *host, int port, double t0, double deadline, double timeout, const char *who, int me,
                     int chatty, char **err);

#endif
