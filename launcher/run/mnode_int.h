/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode_int.h — what one node of a multi-node job keeps (mnode.c: the
 * flow, node replacement, health; mnode_failover.c: the leader's
 * succession; mnode_preflight.c: --preflight). Only those files include
 * it.
 */
#ifndef P3D_MNODE_INT_H
#define P3D_MNODE_INT_H

#include "mnode.h"
#include "prepare.h"

#include "controller.h"
#include "agent.h"
#include "hub.h"
#include "preflight.h"
#include "rundir.h"

typedef struct mnode {
    const p3d_opts *o;
    p3d_jobstate job; /* the placement of now, which L->job reads */
    p3d_rdzv *r;
    int me, nnodes;
    p3d_hello hello;      /* this node's record (topology owned here) */
    p3d_place_msg pm;     /* the placement as received */
    p3d_cluster *cluster; /* names of all nodes; only our topology */
    p3d_prep prep;        /* program, environment, run dir (prepare.h) */
    p3d_chan **chans;     /* leader: the channel per node rank (NULL
                                  self/lost) */
    p3d_join *joins;      /* leader: every node's JOIN */
    p3d_join join;        /* this node's JOIN */
    p3d_gather mine;      /* this node's record, as the tree gathers it */
    p3d_tree_stats st;
    p3d_chan *up;           /* others: the channel to the leader */
    const p3d_launch *L;    /* the job, as the agents get it (read-only) */
    p3d_launch *setup;      /* the same, for this file's setups only: the
                                  first, and a takeover's (the controller's
                                  role begins: a setup of its own) */
    p3d_mnode_hooks *hooks; /* L->mn, writable here (agent.h) */
    p3d_plan_result res;    /* leader: the placement (replacements) */
    int have_res;
    p3d_mpeer *peers; /* leader: every node's MASTER_ADDR/ports */
    p3d_fgate *gate;  /* failover: where a successor takes nodes */
    int gate_port;
    p3d_wbuf sframe;                   /* leader: the successor list (each node's
                                  channel tags it) */
    int succ_list;                     /* leader: sframe is sent (L->mn->successors) */
    p3d_wbuf rframe;                   /* leader: the latest replacement's CPLACE */
    p3d_wbuf rdelta;                   /*   and as a CDELTA against base */
    const unsigned char *base;         /* leader: the CPLACE body every node holds: */
    size_t base_len;                   /*   raw of m->pm or an old_pm (kept to the end) */
    p3d_health_res own_health;         /* this node's pre-start --health-check */
    int own_checked;                   /*   run (this node has --health-check) */
    p3d_health_res *health;            /* leader: every node's, by node rank */
    unsigned char *checked;            /*   which ran one */
    unsigned char *unhealthy;          /*   which failed it (L->mn->unhealthy) */
    char own_pf[P3D_GREC_HOW_MAX + 1]; /* this node's --preflight line */
    int own_pf_ran;                    /*   (it has --preflight) */
    int ring_fd;                       /*   its TCP ring's listening socket, -1 */
    int ring_port;                     /*   (in its JOIN; 0: none) */
    p3d_preflight pf;                  /* leader: the verdict on every node's */
    int have_pf;
    char *pf_json;         /*   as placement.json's "preflight" object */
    char **pf_names;       /*   "host:rank" until the cluster names them */
    unsigned char *pf_bad; /*   which it excluded */
    p3d_place_msg *old_pm; /* placements replaced: kept to the end */
    p3d_cluster **old_cl;  /*   (names are borrowed from them) */
    int nold;
    p3d_jport *jport; /* leader: the join port (--join), NULL none */
    int jport_port;   /*   its port (a successor's: in its leader key) */
    int elects;       /* the backend elects the leader (etcd) */
    int leads;        /*   this node holds the leadership there */
} mnode;

/* The placement placed again (mnode_heal.c). A deep copy of a node
 * record, through the wire encoding (which also proves the record
 * survives the trip the agents' records take); NULL with *err. */
p3d_node *p3d_mnode_node_clone(const p3d_node *n, char **err);
/* The width figures every node
 * holds (the placement frame's) into m->job: full_dp while the job runs
 * below its full width, and min_dp. */
void p3d_mnode_width(mnode *m);
/* L->mn->adopt, every node:
 * a CPLACE or CDELTA body becomes this node's placement for restart gen
 * (gen < 0: the cluster grew, nothing restarts). */
int p3d_mnode_adopt(void *ctx, int type, const unsigned char *body, size_t len, int gen, char **err);
/* L->replace: a lost node's ranks move to a spare (or, elastic, whole
 * replicas go); the leader sends the new placement down. */
int p3d_mnode_replace(void *ctx, const int *lost, int nlost, int restart, const char *reason, char **msg);
/* L->grow_room, L->grow: an elastic job grows back on spares. */
int p3d_mnode_grow_room(void *ctx);
int p3d_mnode_grow(void *ctx, int restart, const char *when, char **msg);
/* L->replace (and for an elastic job L->grow_room, L->grow) set to the
 * above, with m as their context: the leader's and a successor's. */
void p3d_mnode_heal_ops(mnode *m, p3d_launch *L);
/* L->mn->sent (mnode_failover.c): every node now holds the newest placement: the
 * differences of the next replacement are taken against it. */
void p3d_mnode_sent(void *ctx);

/* A node joining the running job (mnode_join.c; docs/multinode.md,
 * "Adding a node to a running job"): L->join_check and L->join_add, the
 * leader's; and the joiner's own index and starting generation once its
 * rendezvous gave it the placement (its last node), read from the
 * leader's restart packet. 0, or -1 with *err. */
int p3d_mnode_join_check(void *ctx, const p3d_joiner *jn, char **name, char **why);
int p3d_mnode_join_add(void *ctx, const p3d_joiner *jn, char **err);
int p3d_mnode_joined(mnode *m, char **err);
/* A successor taking over (p3d_mnode_takeover): its own join port, so
 * that nodes can join the job it leads now; on the job's rendezvous port
 * (r->boot.leader_port) at this node's address when that is free, else
 * on any (m->jport_port says which), the hub's L->mn hooks set. Said on
 * stderr either way; no port (said) leaves the job without joins. */
void p3d_mnode_join_open(mnode *m);
/* The joiner did not get in (p3d_tree_join's tj < 0): the exit code,
 * *err told where a failed-over job takes joiners now. */
int p3d_mnode_join_unreached(const mnode *m, int tj, char **err);

/* Leader failover (mnode_failover.c; docs/multinode.md, "When the leader
 * dies"): L->mn->place_hash, rejoined and takeover, and the leader's
 * successor list into m->sframe (0, or -1: no failover then). */
uint64_t p3d_mnode_place_hash(void *ctx);
void p3d_mnode_rejoined(void *ctx, int node, const char *addr, int master_port, int nccl_port, int failover_port);
int p3d_mnode_takeover(void *ctx, int leader, double heard, const char *why, const int *before, int nbefore);
/* The election (a backend that holds leadership, etcd): the leader keeps
 * the job's state current there (after every placement every node holds)
 * and both it and a successor hear its news in the hub (L->mn->elect_*). */
void p3d_mnode_keep(mnode *m);
void p3d_mnode_elect_setup(mnode *m);
/* The successor list of generation gen into m->sframe (mnode_heal.c): 0,
 * or -1 (no failover then). */
int p3d_mnode_successors(mnode *m, int gen);

/* --preflight (mnode_preflight.c): this node's own benchmark before it
 * joins (into m->own_pf); the leader's verdict on the gathered records (an
 * excluded node's record marked failed, P3D_MNODE_PF_PREFIX and the
 * reason, and m->unhealthy set: keep_health runs first), 0 or -1 with
 * *err; its table (stderr, unless --quiet) and events once the cluster
 * names the nodes (c NULL: the "host:rank" names); the leader's state
 * freed. */
void p3d_mnode_own_preflight(mnode *m, const char *name);
/* The TCP ring across the hosts: its listening socket opened before the
 * join (m->ring_fd, m->ring_port; r->ring set), and closed (idempotent). */
void p3d_mnode_ring_open(mnode *m, const char *name);
void p3d_mnode_ring_close(mnode *m);
int p3d_mnode_judge_preflight(mnode *m, p3d_gather *g, char **err);
void p3d_mnode_tell_preflight(mnode *m, const p3d_cluster *c, int events_fd, double t0);
void p3d_mnode_preflight_free(mnode *m);

#endif
