/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_int.h — the job controller's insides, shared by its two
 * files: controller.c (the actions, the entry points, the queries) and
 * controller_table.c (the (state, event) table, its handlers, and the
 * settling after every event). Nothing outside the controller includes it.
 */
#ifndef P3D_CONTROLLER_INT_H
#define P3D_CONTROLLER_INT_H

#include "controller.h"

#include <stddef.h>

struct p3d_ctl {
    p3d_ctl_cfg cfg;
    p3d_ctl_ops ops;
    p3d_ctl_state state;
    int gen;
    int *up_gen;           /* last generation agent a reported started, -1 */
    int *done_gen;         /* last generation agent a reported done, -1 */
    unsigned char *gone;   /* agent a ended / disconnected */
    unsigned char *killed; /* ops->kill called for a */
    int ngone;
    int code;              /* -1 undecided */
    char *summary;
    int stop_sig;          /* the signal of the stop order (0: done) */
    int stops;             /* stop requests seen */
    double timeout_at;     /* --timeout deadline, 0 none */
    double kill_at;        /* STOPPING: agents still there are ended then */
    double giveup_at;      /* STOPPING: past this, DONE whatever is left */
    double fail_seen;      /* RESTARTING: when the failure was seen */
    double recovery_max;
    int recoveries;        /* recoveries completed (recovery_max valid) */
    int recovering;        /* a failure seen, not every rank running again */
    int resume_gen;        /* the restart awaiting its first sign of life, -1 */
    double resume_from;    /* when its failure was seen */
    double resumed_max;
    int resumes;           /* restarts whose ranks showed life (resumed_max valid) */
    unsigned char *dead;   /* agent a's node is lost for good */
    unsigned char *retiring; /* REPLACING: a was told to end */
    int ndead;
    int replaced;
    char *story;           /* the recoveries, whole lines */
    unsigned char *lostq;  /* CHECKING: agents lost while the checks ran */
    double health_at;      /* CHECKING: past this, no result is awaited */
    struct {
        int a, rank, code, sig;
    } pend;                /* CHECKING: the failure that started it */
    p3d_ctl_event cause;   /* the event being handled (state records) */
    double fence_at;       /* no respawn before (p3d_ctl_fence) */
    int fence_said;
    /* leader failover (controller_table.c, TAKEOVER) */
    int members;           /* the generation's nodes (not dead at its start) */
    int dead0;             /* ndead when the generation started */
    unsigned char *rejoined; /* TAKEOVER: a reconnected to the successor */
    int nrejoined;
    unsigned char *olds;   /* TAKEOVER: the lost leaders (two in a row) */
    int old_leader;        /* the first lost leader of this takeover */
    double heard;          /* when it was last heard */
    double takeover_until; /* TAKEOVER: no majority by then: stop */
    char *takeover_why;
    int in_takeover;       /* a takeover began, not every rank running yet */
    int takeovers;         /* completed */
    int elected;           /* TAKEOVER with cfg.elect: the backend elected us */
    /* slow nodes (controller_slow.c): per agent */
    struct ctl_prog {
        int gen;           /* generation of the figures below, -1 none */
        int step, ckpt, nranks;
        double busy;       /* median busy s per step of its ranks */
        int fresh;         /* a summary came since the last judgement */
        int windows;       /* judged slow this many intervals in a row */
        int flagged;       /* reported slow in generation flagged - 1 */
        double flag_at;    /* when */
        int flag_ckpt;     /* its checkpoint then */
        double ratio, peer_busy;
        int npeers;
        int group;         /* peer group, -1 none */
        unsigned said;     /* JUDGE_SAID_*: told once a job (judge.h) */
        char what[48];
    } *prog;
    int *order;            /* scratch: agents by (group, busy) */
    double eval_at;        /* the next judgement, 0 none yet */
    int nslow;
    unsigned njudged;
};

/* One event, as the entry points hand it to the table. */
typedef struct ctl_ev {
    p3d_ctl_event type;
    int a;                    /* the agent, -1 none */
    const p3d_amsg *m;        /* UP, FAIL, DONE, NODE_SIG */
    const char *how;          /* GONE: what happened; ABORT: why */
    int clean;                /* GONE: ended by itself */
    int sig;                  /* SIGNAL */
    int code;                 /* ABORT */
    int gen;                  /* REJOIN: the node's generation */
    double heard;             /* LEADER_LOST: the old leader last heard */
    const unsigned char *bad; /* HEALTH */
    double now;
} ctl_ev;

/* What ctl_begin_replace did. */
enum { REPLACE_NOTHING, REPLACE_UNDER_WAY, REPLACE_STOPPED };

/* Messages (whole lines), events.jsonl records, story lines, summaries. */
void ctl_say(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ctl_event(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ctl_story(p3d_ctl *c, double now, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ctl_summary_fmt(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ctl_set_summary(p3d_ctl *c, char *s);
const char *ctl_jstr(const char *s, char *buf, size_t cap);
const char *ctl_sig_name(int sig, char *buf, size_t cap);

/* The actions. */
int ctl_stopping(const p3d_ctl *c);
int ctl_agent_ok(const p3d_ctl *c, int a);
void ctl_go(p3d_ctl *c, p3d_ctl_state to); /* the one transition */
void ctl_check_done(p3d_ctl *c);
void ctl_stop(p3d_ctl *c, int sig, int code, double now);
void ctl_all_up(p3d_ctl *c, double now);
void ctl_await_resume(p3d_ctl *c);
void ctl_resumed(p3d_ctl *c, int a, int gen, double now);
int ctl_begin_replace(p3d_ctl *c, const int *lost, int nlost, const char *reason, double now);
void ctl_restart_in_place(p3d_ctl *c, double now);
void ctl_respawn(p3d_ctl *c);
void ctl_retire_all(p3d_ctl *c, double now); /* -> REPLACING */
/* TAKEOVER: every node of the generation that is neither dead nor an old
 * leader has rejoined the successor. */
int ctl_takeover_all_in(const p3d_ctl *c);
/* TAKEOVER may act (fence and arrivals aside): a majority rejoined, or
 * with cfg.elect the backend elected this node. When it gives up without. */
int ctl_takeover_quorum(const p3d_ctl *c);
double ctl_takeover_giveup(const p3d_ctl *c);
/* The generation starts: its members are the nodes not dead now. */
void ctl_gen_members(p3d_ctl *c);

/* Slow nodes (controller_slow.c). */
int ctl_slow_init(p3d_ctl *c);
void ctl_slow_free(p3d_ctl *c);
void ctl_slow_progress(p3d_ctl *c, const ctl_ev *e); /* a P summary */
void ctl_slow_tick(p3d_ctl *c, double now);          /* RUNNING: judge, act */
double ctl_slow_deadline(const p3d_ctl *c);          /* RUNNING, 0 none */

/* The table: e through the handler of (state, e->type), then settle. */
void ctl_dispatch(p3d_ctl *c, const ctl_ev *e);

#endif
