/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_int.h — the job controller's insides. Nothing outside the
 * controller includes it. Its files, each using only those below it:
 *
 *   controller.c        the entry points (controller.h), lifecycle, queries
 *   controller_table.c  the table: (state, event) -> handler, next states;
 *                       the dispatch, and the completions it raises
 *   controller_on.c     the handlers, one short function a cell
 *   controller_slow.c   the slow-node detector (it posts SLOW events)
 *   controller_fault.c  fault classification: the window's failures, the
 *                       verdict (job, node, unknown) and its remedy
 *   controller_preempt.c  preemption: the PREEMPT event, PREEMPTING's cells
 *   controller_elastic.c  the width: the grow detector (it posts GROW) and
 *                       the grow (GROWING); a shrink is a replacement
 *                       that came back narrower (controller_act.c)
 *   controller_act.c    the actions the handlers share: the one transition
 *                       (ctl_go), stop, restart, replace, respawn
 *   controller_text.c   names, lines for the user, events.jsonl records
 *   controller_join.c   nodes joining the running job: JOIN's cells, the
 *                       per-agent arrays grown by one
 *
 * Data that matters in one state lives in that state's struct (chk,
 * end, rep, tk); the rest is the job's across states.
 */
#ifndef P3D_CONTROLLER_INT_H
#define P3D_CONTROLLER_INT_H

#include "controller.h"

#include <stddef.h>

/* A bit of a cell's next-state set: one per state, and "stay". */
#define CTL_TO(s) (1u << (s))
#define CTL_STAY (1u << P3D_CTL_NSTATES)

/* One event, as the entry points hand it to the table. */
typedef struct ctl_ev {
    p3d_ctl_event type;
    int a;                    /* the agent, -1 none */
    const p3d_amsg *m;        /* UP, FAIL, DONE, NODE_SIG, PROGRESS, RESUMED */
    const char *how;          /* GONE: what happened; ABORT: why; SLOW: when */
    int clean;                /* GONE: ended by itself */
    int sig;                  /* SIGNAL */
    int code;                 /* ABORT */
    int gen;                  /* REJOIN: the node's generation; ELECTION: news;
                                 JOIN: the joiner's GPUs */
    const char *addr;         /* JOIN: where the joiner is (how: its name) */
    double heard;             /* LEADER_LOST: the old leader last heard */
    const unsigned char *bad; /* HEALTH */
    double now;
} ctl_ev;

/* A SLOW event waiting for the table (controller_slow.c posts them while
 * a handler runs; the dispatch hands them on after it). */
struct ctl_post {
    int a;
    char why[96];
};

/* One rank failure of the classification window (an F packet), owned. */
struct ctl_failure {
    int a, rank, code, sig, step, errline, errts;
    char *err, *where, *text; /* bounded copies; "" none */
};

struct p3d_ctl {
    p3d_ctl_cfg cfg;
    p3d_ctl_ops ops;
    p3d_ctl_state state;
    p3d_ctl_event cause; /* the outside event being handled (state records) */
    int gen;
    /* per agent */
    int *up_gen;             /* last generation agent a reported started, -1 */
    int *done_gen;           /* last generation agent a reported done, -1 */
    unsigned char *gone;     /* agent a ended / disconnected */
    unsigned char *killed;   /* ops->kill called for a */
    unsigned char *dead;     /* agent a's node is lost for good */
    unsigned char *retiring; /* told to end before a respawn (REPLACING) */
    int ngone;               /* always the count of gone[] */
    int ndead;
    /* the job's end */
    int code; /* -1 undecided */
    char *summary;
    int stop_sig;      /* the signal of the stop order (0: done) */
    int stops;         /* stop requests seen */
    double timeout_at; /* --timeout deadline, 0 none */
    /* recoveries, across the states one passes through */
    struct {
        int a, rank, code, sig;
    } pend;           /* the rank failure being recovered from */
    double fail_seen; /* when the failure being recovered from was seen */
    double recovery_max;
    int recoveries;     /* recoveries completed (recovery_max valid) */
    int recovering;     /* a failure seen, not every rank running again */
    int resume_gen;     /* the restart awaiting its first sign of life, -1 */
    double resume_from; /* when its failure was seen */
    double resumed_max;
    int resumes; /* restarts whose ranks showed life (resumed_max valid) */
    int replaced;
    int step_max, ckpt_max; /* the latest step and checkpoint reported, -1 */
    struct {
        int count;      /* restarts in a row whose ranks made no progress */
        int step, ckpt; /* step_max, ckpt_max at the last restart */
    } np;               /* no progress, no loop (cfg.max_no_progress) */
    char *story;        /* the recoveries, whole lines */
    double fence_at;    /* no respawn before (p3d_ctl_fence) */
    /* leader failover across states: the generation's members (majority
     * rule) and the takeover under way until every rank runs again */
    int members;     /* the generation's nodes (not dead at its start) */
    int dead0;       /* ndead when the generation started */
    int in_takeover; /* a takeover began, not every rank running yet */
    int old_leader;  /* the first lost leader of this takeover */
    double heard;    /* when it was last heard */
    char *takeover_why;
    int takeovers; /* completed */
    /* CHECKING */
    struct {
        unsigned char *lostq; /* agents lost while the checks ran */
        double health_at;     /* past this, no result is awaited */
    } chk;
    /* REPLACING and STOPPING: the agents' deadlines */
    struct {
        double kill_at;   /* agents still there are ended by force then */
        double giveup_at; /* past this, they count as gone */
    } end;
    /* REPLACING */
    struct {
        int fence_said; /* the wait for the lost node's fence was said */
    } rep;
    /* TAKEOVER */
    struct {
        unsigned char *rejoined; /* a reconnected to the successor */
        int nrejoined;
        unsigned char *olds; /* the lost leaders (two in a row) */
        double until;        /* no majority by then: stop */
        int elected;         /* with cfg.elect: the backend elected us */
    } tk;
    /* slow nodes (controller_slow.c): per agent */
    struct ctl_prog {
        int gen; /* generation of the figures below, -1 none */
        int step, ckpt, nranks;
        double busy;    /* median busy s per step of its ranks */
        int fresh;      /* a summary came since the last judgement */
        int windows;    /* judged slow this many intervals in a row */
        int flagged;    /* reported slow in generation flagged - 1 */
        double flag_at; /* when */
        int flag_ckpt;  /* its checkpoint then */
        double ratio, peer_busy;
        int npeers;
        int group;     /* peer group, -1 none */
        unsigned said; /* JUDGE_SAID_*: told once a job (judge.h) */
        char what[48];
    } * prog;
    int *order;     /* scratch: agents by (group, busy) */
    double eval_at; /* the next judgement, 0 none yet */
    int nslow;
    unsigned njudged;
    struct ctl_post *posted; /* SLOW events for the table, nagents at most */
    int nposted;
    /* fault classification (controller_fault.c) */
    int *nranks_of; /* ranks agent a reported started (A), -1 unknown */
    struct {
        struct ctl_failure *f;  /* this window's failures, first first, one a rank
                                  (or one a node that could not start its ranks) */
        int n, cap;             /* cap: nranks + nagents */
        int *of;                /* failures agent a sent in this window */
        unsigned char *whole;   /* agent a's ranks could not start (rank -1) */
        unsigned char *rank_in; /* rank r's failure is in the window */
        int *replica;           /* rank r's DP replica (cfg.replica_of's copy), NULL unknown */
        int nreplicas;
        unsigned char *seen;     /* scratch: nagents + nreplicas marks (classify) */
        double until;            /* COLLECTING: the verdict is due then */
        double first_at;         /* when the window's first failure came */
        struct ctl_failure last; /* the previous verdict's first failure */
        int have_last;
        const char *verdict; /* the latest ("job", ...), NULL none */
        int early;           /* decided on the first failure (no restart left) */
        int job_restarts;
    } flt;
    /* nodes that joined the running job (controller_join.c) */
    struct {
        const char **names; /* every agent's name once one joined (cfg.names
                               points here then): the first ones borrowed */
        char **own;         /* the joined ones' names, owned */
        int n, refused;     /* accepted, refused */
        int first;          /* the agents at the start (cfg.nagents then) */
        int result;         /* the last JOIN's answer: its agent, -1 refused */
        const char *why;    /* the refusal (static) */
    } join;
    /* preemption (controller_preempt.c; PREEMPTING and the verdict) */
    struct {
        double at;      /* when the warning came, 0: never */
        double until;   /* the checkpoint wait ends then (--grace) */
        int sig;        /* the signal that warned */
        int ckpt0;      /* the newest checkpoint known then, -1 */
        char where[64]; /* "to par3drun", "to node n3" */
    } pre;
    /* the elastic width (controller_elastic.c; SHRINKING, GROWING and the
     * grow detector in RUNNING) */
    struct {
        int dp;         /* replicas running now (cfg.full_dp when full) */
        int nranks_cap; /* cfg.nranks at the start: the arrays' size */
        int nrep_cap;   /* the replicas the fault arrays hold */
        int shrinks, grows;
        int ckpt0;      /* ckpt_max at the latest shrink: a grow waits
                              for a newer one (or cfg.grow_wait) */
        double seen_at; /* since when the spares hold a replica, 0 not */
        double poll_at; /* the next look at the spares */
        int posted;     /* GROW posted for the table */
        int said;       /* the wait for the grow was said */
        double since;   /* a grow began then (its running record), 0 */
        char hist[256]; /* "dp 4 -> 3 (node n2 lost) -> 4 (grown at step 40)" */
    } els;
};

/* What ctl_begin_replace did. */
enum { REPLACE_NOTHING, REPLACE_UNDER_WAY, REPLACE_STOPPED };

static inline int ctl_agent_ok(const p3d_ctl *c, int a)
{
    return a >= 0 && a < c->cfg.nagents;
}

/* controller_text.c: names, lines (whole), records, story, summaries. */
void ctl_say(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ctl_event(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ctl_story(p3d_ctl *c, double now, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ctl_summary_fmt(p3d_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ctl_set_summary(p3d_ctl *c, char *s);
const char *ctl_jstr(const char *s, char *buf, size_t cap);
const char *ctl_sig_name(int sig, char *buf, size_t cap);
/* The width history's next step: " -> dp (why)", or "(why n)" for n >= 0. */
void ctl_width_note(p3d_ctl *c, int dp, const char *why, int n);

/* controller_act.c: the actions. */
int ctl_stopping(const p3d_ctl *c);
void ctl_go(p3d_ctl *c, p3d_ctl_state to); /* the one transition */
void ctl_stop(p3d_ctl *c, int sig, int code, double now);
void ctl_running_again(p3d_ctl *c, double now); /* RESTARTING -> RUNNING */
void ctl_resumed(p3d_ctl *c, int a, int gen, double now);
int ctl_begin_replace(p3d_ctl *c, const int *lost, int nlost, const char *reason, double now);
void ctl_restart_in_place(p3d_ctl *c, double now);
/* No progress, no loop (cfg.max_no_progress): the count of restarts in a
 * row without progress that the next restart would bring; the stop when
 * it reaches the limit (then: the failure that asked for the restart; 1
 * when it stopped); and the restart's record (next: ctl_np_next before). */
int ctl_np_next(const p3d_ctl *c);
int ctl_np_stop(p3d_ctl *c, const char *then, double now);
void ctl_np_restart(p3d_ctl *c, int next);
void ctl_respawn(p3d_ctl *c);
/* -> to (REPLACING, SHRINKING, GROWING): every agent retires */
void ctl_retire_all(p3d_ctl *c, p3d_ctl_state to, double now);
void ctl_mark_lost(p3d_ctl *c, int a); /* dead for good */
void ctl_mark_gone(p3d_ctl *c, int a);
/* TAKEOVER: every node of the generation that is neither dead nor an old
 * leader has rejoined the successor. */
int ctl_takeover_all_in(const p3d_ctl *c);
/* TAKEOVER may act (fence and arrivals aside): a majority rejoined, or
 * with cfg.elect the backend elected this node. When it gives up without. */
int ctl_takeover_quorum(const p3d_ctl *c);
double ctl_takeover_giveup(const p3d_ctl *c);
/* The generation starts: its members are the nodes not dead now. */
void ctl_gen_members(p3d_ctl *c);
/* A SLOW event for agent a, handed to the table after the running cell. */
void ctl_post_slow(p3d_ctl *c, int a, const char *why);

/* controller_fault.c: fault classification. */
int ctl_fault_init(p3d_ctl *c);
void ctl_fault_free(p3d_ctl *c);
/* A failure for the window (e: a FAIL of the generation); a second one of
 * the same agent is dropped. */
void ctl_fault_add(p3d_ctl *c, const ctl_ev *e);
/* Every node running ranks reported a failure: the verdict need not wait. */
int ctl_fault_all_in(const p3d_ctl *c);
/* The window's verdict, recorded, and its remedy. */
void ctl_fault_decide(p3d_ctl *c, double now);
/* The window cut short by an event that takes the job elsewhere (a
 * preemption warning): its failures get their verdict and evidence, said
 * with remedy (what happens instead), and nothing restarts; the window is
 * empty after. */
void ctl_fault_cut(p3d_ctl *c, const char *remedy, double now);
/* An agent was lost: a node fault (the verdict result.json shows). */
void ctl_fault_lost(p3d_ctl *c);
/* COLLECTING left for a lost node (replaced, or the job stopped): the
 * window's failures are recorded as its consequences. */
void ctl_fault_consequences(p3d_ctl *c);

/* controller_slow.c: the slow-node detector. */
int ctl_slow_init(p3d_ctl *c);
void ctl_slow_free(p3d_ctl *c);
int ctl_slow_record(p3d_ctl *c, const ctl_ev *e); /* a P summary; 0 stale */
void ctl_slow_ckpt(p3d_ctl *c, int a);            /* RUNNING: a checkpoint may post SLOW */
void ctl_slow_tick(p3d_ctl *c, double now);       /* RUNNING: judge; post SLOW when due */
double ctl_slow_deadline(const p3d_ctl *c);       /* RUNNING, 0 none */
/* Why agent a cannot be replaced now (NULL: it can). */
const char *ctl_slow_cannot(const p3d_ctl *c, int a, char *buf, size_t cap);
/* "node x is 2.00x slower than its 3 peers (...)" */
void ctl_slow_text(const p3d_ctl *c, int a, char *buf, size_t cap);

/* controller_elastic.c: the grow detector in RUNNING (progress and
 * tick): looks at the spares, posts GROW when its time came; and when it
 * wants the next tick (0 none). (A shrink is a replacement that came
 * back narrower: controller_act.c.) */
void ctl_grow_look(p3d_ctl *c, double now);
double ctl_grow_deadline(const p3d_ctl *c);

/* controller_preempt.c: every agent is done, gone, or reported a
 * checkpoint newer than the preemption warning's (ALL_CKPT is due). */
int ctl_preempt_through(const p3d_ctl *c);

/* controller_join.c: what JOIN's cells keep, freed with the controller. */
void ctl_join_free(p3d_ctl *c);

/* controller_on.c: the handlers, one a (state, event) cell. */
typedef void (*ctl_handler)(p3d_ctl *c, const ctl_ev *e);
/* the handlers by file, as many a line as fit (scripts/format.sh) */
/* clang-format off */
#define CTL_HANDLERS(X)                                                                                      \
    /* controller_on.c */                                                                                    \
    X(on_up) X(on_done) X(on_fail) X(on_health) X(on_mark_dead) X(on_progress) X(on_progress_running)       \
    X(on_resumed) X(on_gone_live) X(on_gone_checking) X(on_gone_replacing) X(on_gone_stopping)               \
    X(on_gone_takeover) X(on_node_sig) X(on_node_sig_again) X(on_signal) X(on_signal_again) X(on_abort)      \
    X(on_abort_again) X(on_tick_timeout) X(on_tick_running) X(on_tick_checking) X(on_tick_replacing)         \
    X(on_tick_stopping) X(on_tick_takeover) X(on_all_up) X(on_all_up_again) X(on_all_done)                   \
    X(on_all_gone_live) X(on_all_retired) X(on_all_stopped) X(on_slow)                                       \
    X(on_fail_collecting) X(on_gone_collecting) X(on_tick_collecting) X(on_all_done_collecting)              \
    /* controller_takeover.c */                                                                              \
    X(on_leader_lost) X(on_leader_lost_stopping) X(on_rejoin) X(on_rejoin_refuse) X(on_election_live)        \
    X(on_election_takeover) X(on_takeover_act)                                                               \
    /* controller_preempt.c */                                                                               \
    X(on_preempt) X(on_preempt_collecting) X(on_preempt_now) X(on_preempt_again) X(on_preempt_stopping)     \
    X(on_signal_preempting) X(on_fail_preempting) X(on_gone_preempting) X(on_tick_preempting)                \
    X(on_leader_lost_preempting) X(on_preempt_over)                                                          \
    /* controller_join.c */                                                                                  \
    X(on_join) X(on_join_replacing) X(on_join_ending) X(on_join_takeover)                                    \
    /* controller_elastic.c */                                                                               \
    X(on_grow)
/* clang-format on */
#define CTL_DECLARE(h) void ctl_##h(p3d_ctl *c, const ctl_ev *e);
CTL_HANDLERS(CTL_DECLARE)
#undef CTL_DECLARE

/* controller_table.c: e through the cell of (state, e->type), the SLOW
 * events it posted, then the completions (all up, all done, all gone, a
 * takeover's quorum) each through its cell. */
void ctl_dispatch(p3d_ctl *c, const ctl_ev *e);

#endif
