/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub_int.h — the hub's state (supervise.c), shared with its other files:
 * the --health-check rounds (hub_health.c), the successor's gate
 * (hub_gate.c), the lines and status.txt (hub_lines.c, hub_status.c).
 * Internal to launcher/run/hub/ (hub.h is the stage's public header).
 */
#ifndef P3D_HUB_INT_H
#define P3D_HUB_INT_H

#include "hub.h"
#include "agent.h"
#include "controller.h"
#include "ranks.h"
#include "rdzv.h"

typedef struct alink {
    int fd;             /* socket pair, or ch's fd; -1 closed */
    p3d_chan *ch;       /* remote: its authenticated channel (owned), NULL closed */
    int remote;         /* a rendezvous connection */
    pid_t pid;          /* local: the agent process, 0 once reaped */
    int broken;         /* remote: a send failed; reported as gone by the loop */
    int reported;       /* p3d_ctl_gone called */
    char how[200];      /* remote, broken while a health check waited: why */
    double heard;       /* when it last sent anything (--node-timeout) */
    int parked;         /* takeover: connected, no agent running (failover) */
    int retire_pending; /* parked and told to retire: gone, said outside the controller */
    int succ_sent;      /* the successor list went to it (L->mn->successors) */
} alink;

/* ---- peers.c: the nodes that do the same work ------------------------- */

#define P3D_PEER_WHAT 48

/* For agents i < n (agent i runs cluster node nodes[i]; ncluster nodes):
 * group[i], equal for nodes whose ranks hold the same (pp, tp, cp, ep)
 * coordinates, -1 for a node without ranks; what[i] "pp stage 3" or "pp
 * stages 0-1". 0, or -1 (out of memory). */
int p3d_peer_groups(const p3d_placement *pl, const int *nodes, int n, size_t ncluster, int *group,
                    char (*what)[P3D_PEER_WHAT]);


struct hub;

/* One --health-check round on every live node (hub_health): the remote
 * nodes asked (C) and their answers (H) awaited, the local checks run by
 * health.c, all on the loop; done once every answer is in or the time is
 * up. */
typedef struct hround {
    int seq;
    double t;
    p3d_health_res *res;
    unsigned char *ask;  /* remote: 1 asked, 2 answered (or lost) */
    unsigned char *gone; /* not checked: lost before the round */
    unsigned char *skip;
    p3d_health_job *job; /* the local checks; NULL once done */
    unsigned timer;      /* the round's time bound */
    void (*done)(struct hub *h, unsigned char *bad);
} hround;

/* The loop's context for link a. */
typedef struct lctx {
    struct hub *h;
    int a;
} lctx;

/* Joiners held at once while the job replaces or checks nodes. */
#define P3D_JOIN_HELD 8

typedef struct hub {
    const p3d_launch *L;
    alink *ln;
    int n;
    int sfd;
    int lock_fd;
    const int *nodes;   /* agent i runs cluster node nodes[i] */
    const char **names; /* owned (the strings are the clusters') */
    p3d_ctl *ctl;
    p3d_outsink sink;
    int health_seq;    /* the latest C request's number */
    int health_warned; /* said that some nodes have no --health-check */
    p3d_loop *loop;
    p3d_io_fn on_link; /* supervise.c's reader of a link (hub_watch) */
    lctx *lc;          /* lc[i]: link i's watcher context */
    hround *round;     /* the --health-check round that runs, or NULL */
    int health_due;    /* the controller asked for --health-check */
    int pre_done;      /* the check before the first start is over */
    unsigned char *pre_bad;
    double next_beat;             /* --node-timeout: the next heartbeat to the nodes */
    double last_check;            /* when hub_beat last looked for silent agents */
    unsigned judged;              /* the controller's judgements the status shows */
    int status_gen, status_state; /* the generation and state it shows */
    int status_warned;
    int tk_me;           /* takeover: this node's agent index, -1 none */
    unsigned gate_timer; /* takeover: the gate is read again (strangers held) */
    /* nodes joining the running job (hub_join.c) */
    int *own_nodes;                 /* nodes[] once a node joined (the first ones copied) */
    p3d_joiner *joining;            /* the one p3d_ctl_join is asked about */
    p3d_joiner held[P3D_JOIN_HELD]; /* held while the job replaces or checks */
    double held_at[P3D_JOIN_HELD];
    int nheld;
    unsigned join_timer; /* the join port is read again (strangers held) */
} hub;

void hub_say(void *ctx, const char *text);
/* hub_say for a line that is no error (the start and end lines, warnings):
 * nothing under --quiet (say.h). */
void hub_note(hub *h, const char *text);
void hub_send_one(hub *h, int a, const char *pkt, size_t len);
/* --health-check on every live node, on the loop; done(h, bad) at the end
 * (hub_health.c). 0, or -1 (out of memory: nothing started). */
int hub_health(hub *h, const unsigned char *dead, void (*done)(hub *, unsigned char *));
/* The round's side of a remote answer (H), of a link gone. */
void hub_round_answer(hub *h, int a, const p3d_amsg *m);
void hub_round_lost(hub *h, int a);
void hub_round_free(hub *h, hround *r);
/* ops.health, and what the loop does once it was called. */
int hub_health_start(void *ctx, const unsigned char *dead);
void hub_health_due(hub *h);
/* hub_status.c: the controller's peer groups from the placement of now;
 * the spares left (ops.spares_left); RUN_DIR/status.txt. */
void hub_peers(hub *h);
int hub_spares_left(void *ctx);
void hub_write_status(hub *h);
/* hub_lines.c: the start and end lines (docs/launch.md), the recovery's
 * words for --verbose and the summary. */
void hub_start_line(hub *h, int nnodes);
void hub_end_line(hub *h, int code);
void hub_recovery_text(const p3d_ctl *c, char *buf, size_t cap);
/* hub_link.c: link a (its fd set) watched on the loop. */
void hub_watch(hub *h, int a);
/* hub_gate.c: the successor's gate readable: the nodes that rejoin. */
void hub_on_gate(p3d_loop *lp, int fd, int ev, void *ctx);
/* The check before the first start: its done. */
void hub_pre_done(hub *h, unsigned char *bad);
/* hub_join.c: nodes joining the running job (--join): the join port
 * watched (start), its readable callback, the joiners held (from the
 * prepare hook) and when they give up, ops.join_accept, and the end
 * (held ones refused, nodes[] freed). */
void hub_join_start(hub *h);
void hub_on_join(p3d_loop *lp, int fd, int ev, void *ctx);
void hub_join_held(hub *h);
double hub_join_deadline(const hub *h);
void hub_join_accept(void *ctx, int a, int gen, int start_now);
void hub_join_end(hub *h);

#endif
