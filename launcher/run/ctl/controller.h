/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller.h — the public header of launcher/run/ctl/, the job controller: one state machine that decides a
 * job's fate from what its agents report, whatever carries the reports.
 *
 * It knows agents only by index (0..nagents-1) and names; it knows no
 * socket, process or node struct. The transports (supervise.c: the local
 * agents' socket pairs and the remote agents' rendezvous connections) call
 * it with events and it answers through the ops: messages to send, agents
 * to end by force, lines for the user. Single node is the case of one
 * agent; --emulate of several local ones; a multi-node leader of one local
 * and n-1 remote ones — the same code decides in every case.
 *
 * What this stage owns: the job's fate — which generation runs, when a
 * failure restarts the ranks in place, when a lost or slow node is
 * replaced by a spare, when the leader's loss hands the job to a
 * successor, and when and with what code the job ends, with the
 * root-cause summary and the recovery story. What it does not own:
 * sockets, processes, placement, the clock (the transports call in with
 * the time; ops do the rest).
 *
 * It is a table, read like s6-supervise's actions[state][event]
 * (controller_table.c; printed in docs/controller.md): every (state,
 * event) cell names a short handler and the states it may move to, or
 * says the event is ignored in that state, or that it cannot happen
 * there. Completions (every agent up, every agent done, every agent gone,
 * a takeover able to act) are events too, which the table raises after
 * the event that completed them; the slow-node detector posts a SLOW
 * event rather than acting. Every change of state goes through one
 * function (ctl_go); --verbose and events.jsonl record each change as
 * "state A -> B (event)", the event being the outside one that caused it.
 * A newcomer reads controller_int.h's file map, then the table.
 *
 *   STARTING --all agents up--> RUNNING --failure, restarts left--> CHECKING
 *      |                           |      (--health-check on every node; no
 *      |                           |       check: straight on)
 *      |                           |   CHECKING --every node healthy, or only
 *      |                           |     spares failed--> RESTARTING (in place)
 *      |                           |   CHECKING --a rank node failed or was
 *      |                           |     lost, a spare found--> REPLACING
 *      |                           |--lost node, restarts left, a spare found-->
 *      |                           |   REPLACING (every agent retires; once all
 *      |                           |   are gone the transport forks them again
 *      |                           |   on the new placement) --> RESTARTING
 *      |                           |  <------all agents up again------ RESTARTING
 *      '-------failure (none left), lost agent (no replacement), signal,
 *              timeout, all done-->
 *   STOPPING --every agent gone (or ended by force past its deadline)--> DONE
 *
 * Leader failover (cfg.failover; docs/launch.md, "When the leader dies").
 * The controller is the job's, wherever it runs: what every node holds
 * (the generation, the dead nodes, the placement) is its state across a
 * change of leader; the rest (who is up, a pending check) is not carried.
 * The successor's controller — a fresh one, or the model test's single
 * one — gets LEADER_LOST (p3d_ctl_leader_lost) in whatever state it is:
 *
 *   any state but STOPPING/DONE --leader lost--> TAKEOVER
 *      TAKEOVER --more than half of the generation's nodes rejoined (or,
 *        with cfg.elect, the backend elected this node), the old leader's
 *        fence passed, and every live node rejoined or cfg.node_timeout
 *        passed since the loss was noticed-->
 *        REPLACING (the old leader and every node that did not rejoin are
 *        lost; generation + 1; every agent is started again) --> RESTARTING
 *      TAKEOVER --the successor lost too--> TAKEOVER (the next one)
 *      TAKEOVER --no majority by cfg.node_timeout (cfg.elect: not elected
 *        by cfg.elect_wait past it, or told so)--> STOPPING (exit 1)
 *   any state but STOPPING/DONE --the node's leadership lapsed (cfg.elect)-->
 *      STOPPING (exit 1)
 *   STOPPING --leader lost--> STOPPING (the nodes were told to end)
 *
 * The majority rule holds on the leader's side as well: a leader that
 * loses half or more of its generation's nodes at once (a partition, or
 * a mass failure it cannot tell from one) stops its ranks at once with
 * SIGKILL and exit 1, so the two halves of a partition never both run.
 * With cfg.elect the backend's quorum decides who succeeds instead: a
 * successor acts only once elected, whatever the number of nodes that
 * rejoined it; the leader keeps its own majority rule and also stops the
 * moment its leadership lapses.
 * With failover off, a lost leader ends the job (exit 1), as before.
 *
 * A lost node is "dead" for the rest of the job: its agent is never
 * started again. Another loss while REPLACING or RESTARTING (two failures
 * in a row) is one more replacement, one more restart; a loss while
 * CHECKING joins the nodes that failed the check. Losing only spares
 * moves nothing: the job goes on in the state it was in (a rank failure
 * that started a check still restarts in place).
 *
 * No progress, no loop (cfg.max_no_progress): every restart — in place,
 * a replacement, a takeover's — first judges the generation that ends
 * against the latest step and checkpoint the progress summaries showed
 * when it started (controller_act.c, ctl_np_*). The restart that would be
 * the max_no_progress-th in a row without a later step or a newer
 * checkpoint is not made: the job stops with cfg.no_progress_code. It is
 * a guard of the cells that restart, like --max-restarts, not a cell of
 * its own: the cell decides between a restart and a stop, and stopping
 * is among its moves already.
 *
 * Fault classification before any remedy (controller_fault.c): a rank
 * failure (F) in STARTING, RUNNING or RESTARTING opens a window of
 * cfg.fault_window seconds (COLLECTING) in which the other ranks'
 * failures of the generation are collected (an agent reports each of
 * its ranks'); it closes early once every rank of every node running
 * ranks reported one, and is not opened when no restart is left (every
 * verdict stops then: fail fast). The verdict: *job* when the first
 * failure's exit code, signal and error line (the rank's error file) are
 * shared by the failures of two nodes or more, or repeat the previous
 * verdict's first failure at the same step after a restart; *node* when
 * only one node's ranks failed while other nodes ran theirs, and for
 * every lost agent; *job* again when the same failure comes from more
 * than half the DP replicas (two at least: cfg.replica_of), which
 * decides a one-node job; *unknown* otherwise. A job fault restarts in place
 * (no health check, no spare, no node excluded) within
 * cfg.max_job_restarts, then stops with the program's exit code; node
 * and unknown are handled as before (health check, restart, or stop). A
 * node lost while collecting is a node fault: it is replaced, and the
 * collected failures count as its consequences.
 *
 *   RUNNING --failure--> COLLECTING --window closed, or every node
 *     reported--> RESTARTING (job, or no check) | CHECKING | STOPPING
 *   COLLECTING --agent lost--> REPLACING (node fault)
 * Preemption (controller_preempt.c; cfg.preempt_sig, docs/launch.md):
 *
 *   STARTING, RUNNING, RESTARTING --preempt--> PREEMPTING (every rank is
 *      sent the preempt signal) --every node done, gone or reporting a
 *      checkpoint newer than the warning, --grace passed, a failure, a
 *      signal, the leader lost--> STOPPING (exit P3D_EXIT_PREEMPTED)
 *   CHECKING, REPLACING, TAKEOVER --preempt--> STOPPING (nothing runs to
 *      checkpoint; exit P3D_EXIT_PREEMPTED)
 *
 * Nodes joining the running job (controller_join.c; par3drun --join,
 * docs/multinode.md "Adding a node to a running job"): JOIN grows the
 * agents by one, a spare that runs no rank, whatever the job does:
 *
 *   STARTING, RUNNING, CHECKING, RESTARTING, COLLECTING --join--> stay
 *      (its agent starts now, on the current generation)
 *   REPLACING --join--> stay (every agent retires: the respawn starts it
 *      with the rest)
 *   STOPPING, PREEMPTING --join--> stay, refused (the job ends); DONE
 *      ignores it (p3d_ctl_join refuses: the job is over)
 *   TAKEOVER --join--> stay, refused: "retry" (the successor's majority
 *      is counted over the generation's nodes; one coming in meanwhile
 *      would move it, so it waits for the next generation)
 *
 * A joined spare is like any other: its loss moves nothing, a lost
 * rank node's ranks may move to it (ops.replace, ops.spares_left).
 *
 * Elastic width (controller_elastic.c; cfg.min_dp > 0, docs/controller.md
 * "Shrink and grow"): a loss no spare can take comes back from ops.replace
 * as 2, a placement on fewer whole DP replicas (>= cfg.min_dp):
 *
 *   STARTING, RUNNING, RESTARTING, COLLECTING, CHECKING, REPLACING, TAKEOVER
 *      --loss, no spare, elastic--> SHRINKING (every agent retires, as in
 *      REPLACING) --all gone--> RESTARTING at the smaller width
 *   (below cfg.min_dp the replace refuses: STOPPING, exit 1)
 *   RUNNING below cfg.full_dp --GROW (the spares hold a whole replica, and
 *      a checkpoint newer than the shrink came or cfg.grow_wait passed)-->
 *      GROWING (every agent retires) --all gone--> RESTARTING wider
 *   SHRINKING, GROWING --loss--> REPLACING | SHRINKING; --preempt--> STOPPING
 *
 * Slow nodes (controller_slow.c): the agents' progress summaries (P) are
 * the PROGRESS event; in RUNNING, every cfg.progress_interval a tick
 * judges each node against its peers (p3d_ctl_set_peers) and reports a
 * slow one; with cfg.slow_replace, at its ranks' next checkpoint or
 * cfg.slow_wait later, the detector posts SLOW and the table replaces it
 * like a lost node (RUNNING --> REPLACING), only while a spare
 * (ops.spares_left) and a restart are left.
 *
 * After every event the table raises what the event may have completed
 * (every agent up, every agent done, every agent gone), so no event order
 * can leave it waiting on an agent that is gone. Every
 * state but RUNNING and STARTING has a deadline (p3d_ctl_deadline); those
 * two wait on the agents, whose transport reports them gone when silent.
 *
 * Deadlines: after a stop order every agent has --grace plus
 * P3D_CTL_SLACK seconds to end; then ops->kill ends it (a local agent is
 * SIGKILLed with its workers, a remote connection is dropped). A second
 * stop signal cuts the grace to nothing. CHECKING waits for the health
 * result up to cfg.health_timeout + 2 * P3D_CTL_SLACK; past that the
 * nodes count as healthy (said) and the ranks restart in place.
 */
#ifndef P3D_CONTROLLER_H
#define P3D_CONTROLLER_H

#include "wire.h"

#include <stdio.h>

/* Seconds past the grace an agent has to end after a stop order. */
#define P3D_CTL_SLACK 2.0

/* Fencing: seconds past a frozen node's own deadline (its --node-timeout
 * after it last heard its upstream) before its replacement may start:
 * the time its processes take to notice and SIGKILL their ranks. */
#define P3D_FENCE_SLACK 1.0

/* Slow nodes: a node is judged only when its peers' median busy time per
 * step is at least this (seconds); below it a ratio shows timer and
 * scheduling noise, not a slow GPU. */
#define P3D_SLOW_MIN_BUSY 0.001

/* --fault-window's default: seconds the other ranks' failures are
 * collected after the first one before the verdict (less when every rank
 * running reported one). */
#define P3D_FAULT_WINDOW 2.0
/* --max-job-restarts's default. */
#define P3D_MAX_JOB_RESTARTS 3

/* The job's code when an agent is lost (ended or disconnected unasked). */
#define P3D_EXIT_LOST 1

/* The job's code when it was preempted and stopped (sysexits.h's
 * EX_TEMPFAIL: try again later — a job script requeues on it). */
#define P3D_EXIT_PREEMPTED 75

typedef enum p3d_ctl_state {
    P3D_CTL_STARTING,
    P3D_CTL_RUNNING,
    P3D_CTL_CHECKING,
    P3D_CTL_RESTARTING,
    P3D_CTL_REPLACING,
    P3D_CTL_STOPPING,
    P3D_CTL_DONE,
    P3D_CTL_TAKEOVER,   /* a successor waits for a majority (failover) */
    P3D_CTL_COLLECTING, /* a rank failed: the others' failures are collected
                           for the fault's class (job, node, unknown) */
    P3D_CTL_PREEMPTING, /* the ranks were told to checkpoint (preemption) */
    P3D_CTL_SHRINKING,  /* a loss past the last spare: every agent retires,
                           then starts again on fewer DP replicas */
    P3D_CTL_GROWING,    /* spares hold whole replicas again: every agent
                           retires, then starts again wider */
    P3D_CTL_NSTATES
} p3d_ctl_state;

/* What moves the controller: one per entry point below. */
typedef enum p3d_ctl_event {
    P3D_CTL_EV_UP,          /* an agent's ranks run (A) */
    P3D_CTL_EV_FAIL,        /* a rank failed, or could not start (F) */
    P3D_CTL_EV_DONE,        /* an agent's ranks all ended 0 (D) */
    P3D_CTL_EV_NODE_SIG,    /* an agent was stopped by a signal (S) */
    P3D_CTL_EV_GONE,        /* an agent ended or disconnected */
    P3D_CTL_EV_SIGNAL,      /* the controller's own process got a signal */
    P3D_CTL_EV_ABORT,       /* the transport cannot go on */
    P3D_CTL_EV_TICK,        /* time passed */
    P3D_CTL_EV_HEALTH,      /* the health checks' result */
    P3D_CTL_EV_MARK_DEAD,   /* a node failed its check before the start */
    P3D_CTL_EV_PROGRESS,    /* an agent's progress summary (P) */
    P3D_CTL_EV_RESUMED,     /* an agent's ranks showed their first life (V) */
    P3D_CTL_EV_LEADER_LOST, /* the controller's own node was lost */
    P3D_CTL_EV_REJOIN,      /* a node reconnected to the successor */
    P3D_CTL_EV_ELECTION,    /* the backend's election said something (etcd) */
    /* Completions: raised by the table itself after an event that may
     * have completed a wait, never by a transport. */
    P3D_CTL_EV_ALL_UP,         /* every agent still there runs the generation */
    P3D_CTL_EV_ALL_DONE,       /* every agent still there ran its ranks to the end */
    P3D_CTL_EV_ALL_GONE,       /* no agent is left (retired, ended, lost) */
    P3D_CTL_EV_TAKEOVER_READY, /* a takeover may act (majority, fence) */
    P3D_CTL_EV_SLOW,           /* a slow node's time to move (the detector's) */
    P3D_CTL_EV_PREEMPT,        /* the scheduler's warning: the preempt signal (or
                             SIGTERM with cfg.preempt_term) reached the
                             controller's process or a node's */
    P3D_CTL_EV_ALL_CKPT,       /* completion: every agent still there is done or
                             reported a checkpoint newer than the warning */
    P3D_CTL_EV_JOIN,           /* a node asks to join the running job as a spare
                             (par3drun --join; p3d_ctl_join) */
    P3D_CTL_EV_GROW,           /* the grow detector's: spares hold a whole replica
                             and a checkpoint newer than the shrink came (or
                             --grow-wait passed): posted like SLOW */
    P3D_CTL_NEVENTS
} p3d_ctl_event;

/* "running", "checking", ...; "failure", "agent-gone", ... */
const char *p3d_ctl_state_name(p3d_ctl_state s);
const char *p3d_ctl_event_name(p3d_ctl_event e);

typedef struct p3d_ctl_ops {
    void *ctx;
    /* sends m to agent a, or to every agent still there when a < 0 */
    void (*send)(void *ctx, int a, const p3d_amsg *m);
    /* agent a missed its deadline: end it by force; the transport reports
     * it with p3d_ctl_gone() once it is gone */
    void (*kill)(void *ctx, int a);
    /* text for the user (whole lines) */
    void (*say)(void *ctx, const char *text);
    /* Optional (NULL: not offered by the transport). */
    /* agents lost[0..nlost) are gone for good: place again without them
     * for restart gen; 0 with a one-line story in *msg, 1 when they ran
     * no rank (spares: nothing to restart), -1 with why */
    int (*replace)(void *ctx, const int *lost, int nlost, int gen, const char *reason, char **msg);
    /* (replace's 2: no spare left and the job is elastic (cfg.min_dp): it
     * was placed again on fewer whole DP replicas, >= cfg.min_dp; the
     * transport told the new width with p3d_ctl_set_width; *msg says it.
     * Below min_dp replace answers -1 naming D, what is left and lost.) */
    /* every agent has retired: start the agents not dead on the current
     * placement, restart count gen; 0, or -1 */
    int (*respawn)(void *ctx, int gen, const unsigned char *dead);
    /* start --health-check on every agent's node not dead[]: it must not
     * block; the transport answers later with p3d_ctl_health_result().
     * 0 started, -1 cannot (the nodes count as healthy). */
    int (*health)(void *ctx, const unsigned char *dead);
    /* one events.jsonl record: the fields, without braces */
    void (*event)(void *ctx, const char *fields);
    /* how many spare nodes are left to take a node's ranks (NULL: none);
     * --slow-node replace asks before it replaces, so that a slow node
     * with no spare left is only reported, never a reason to stop */
    int (*spares_left)(void *ctx);
    /* Elastic jobs (cfg.min_dp > 0; NULL: the job never grows): how many
     * whole DP replicas the spares can hold now under the placement rules
     * (p3d_grow_plan; spares that join the running job count as soon as
     * they are there), 0 none; and the grow itself for restart gen: the
     * job placed again wider (p3d_ctl_set_width told; `when` says what
     * made it due, for its record), 0 with a one-line
     * story in *msg, 1 nothing fits after all, -1 with why. */
    int (*grow_room)(void *ctx);
    int (*grow)(void *ctx, int gen, const char *when, char **msg);
    /* Optional: the cell of (s, e) ran and left the state `to` (the
     * model test counts the cells and checks each move against the
     * table; a transport leaves it NULL). */
    void (*cell)(void *ctx, p3d_ctl_state s, p3d_ctl_event e, p3d_ctl_state to);
    /* Optional (p3d_ctl_join): the node that asked to join is agent a now
     * (cfg.nagents grew by one), a spare with no rank; start_now: the
     * transport starts its agent on generation gen at once (0: REPLACING,
     * every agent retires first: the next respawn starts it with the
     * rest). Called from inside p3d_ctl_join: the transport must not call
     * the controller back from it. */
    void (*join_accept)(void *ctx, int a, int gen, int start_now);
    /* Optional: the node that asked to join is refused; why is for the
     * joiner ("the job is ending", "... retry once it is over"). */
    void (*join_refuse)(void *ctx, const char *name, const char *why);
} p3d_ctl_ops;

typedef struct p3d_ctl_cfg {
    int nagents;
    const char *const *names; /* agent a's node name */
    int nranks;               /* the job's world size (messages) */
    int max_restarts;
    /* no progress, no loop: the job stops with no_progress_code after
     * max_no_progress restarts in a row (0: never) whose ranks reported
     * no later step and no newer checkpoint than before the restart;
     * only once some progress summary came (a program that writes no
     * progress line is never judged) */
    int max_no_progress;
    int no_progress_code;
    /* fault classification (controller_fault.c): a job-scoped fault (the
     * program's own: the same failure on two nodes or more, or at the
     * same step after a restart) restarts in place at most
     * max_job_restarts times (every restart also counts against
     * max_restarts), never on a spare; fault_window: the seconds failures
     * are collected before the verdict (0: decided on the first) */
    int max_job_restarts;
    double fault_window;
    /* rank r's data-parallel replica (its placement's coord[DP]), nranks
     * of them, and how many replicas there are: a fault of more than half
     * the replicas is the job's (copied; NULL: not compared) */
    const int *replica_of;
    int nreplicas;
    double grace;          /* --grace */
    double timeout;        /* --timeout, 0 none */
    double health_timeout; /* the longest a health check may take */
    int verbose;
    int leader; /* the agent of the controller's own node
                                 (a multi-node leader), -1 none */
    double t0;  /* the job's start (story times) */
    /* slow nodes (controller_slow.c); progress_interval 0: off */
    double progress_interval; /* --progress-interval */
    double slow_factor;       /* --slow-factor */
    int slow_windows;         /* --slow-windows */
    int slow_replace;         /* --slow-node replace */
    double slow_wait;         /* --slow-wait */
    /* leader failover (0: --no-failover, or a job of one host) */
    int failover;
    double node_timeout; /* --node-timeout: the majority's deadline */
    /* leadership decided by the rendezvous backend's election (etcd)
     * instead of the majority rule: a successor acts once elected, and
     * waits for that up to elect_wait seconds past its deadline */
    int elect;
    double elect_wait;
    /* preemption (docs/launch.md, "Preemption"): preempt_sig (0: off) is
     * the signal that, reaching the controller's process or any node's,
     * starts it and that every rank is sent; preempt_term: SIGTERM starts
     * it too. The ranks have cfg.grace to report a checkpoint newer than
     * the warning; then they are stopped and the job ends with
     * P3D_EXIT_PREEMPTED. */
    int preempt_sig;
    int preempt_term;
    /* elastic width (docs/launch.md, "Elastic width"): min_dp 0: not
     * elastic (a loss past the last spare stops the job); else the job
     * shrinks down to min_dp whole replicas and grows back to full_dp,
     * at the ranks' first checkpoint newer than the shrink, or grow_wait
     * seconds after the spares could hold a replica (--grow-wait). dp: the
     * width it starts at (a successor's may be below full_dp). */
    int full_dp, min_dp, dp;
    double grow_wait;
} p3d_ctl_cfg;

typedef struct p3d_ctl p3d_ctl;

/* A controller in STARTING at time now; NULL when out of memory. cfg's
 * names are borrowed. */
p3d_ctl *p3d_ctl_new(const p3d_ctl_cfg *cfg, const p3d_ctl_ops *ops, double now);
void p3d_ctl_free(p3d_ctl *c);

/* Events. */
/* A message from agent a (F, D, A, S; others are ignored). */
void p3d_ctl_message(p3d_ctl *c, int a, const p3d_amsg *m, double now);
/* Agent a is gone (process reaped, connection closed). how: what
 * happened, for the root cause when nobody asked it to end. */
void p3d_ctl_gone(p3d_ctl *c, int a, const char *how, double now);
/* The same; clean: the agent ended by itself (exited, not killed by a
 * signal) — what a retiring agent does while REPLACING. */
void p3d_ctl_gone_status(p3d_ctl *c, int a, const char *how, int clean, double now);
/* Before the start: agent a's node failed its health check; it is dead
 * (never started). */
void p3d_ctl_mark_dead(p3d_ctl *c, int a);
/* Fencing: agent a's ranks may still run until `until` (a node lost to a
 * missing heartbeat ends its own ranks by its own deadline, which the
 * leader cannot see). Its replacement starts only after that: no rank
 * runs twice at once. Call it before p3d_ctl_gone for that agent; it is
 * information for that event, not an event of its own. */
void p3d_ctl_fence(p3d_ctl *c, int a, double until);
/* Which agents do the same work (the same pp stage and TP/CP/EP
 * coordinates, across DP replicas): group[a] >= 0 names agent a's peer
 * group, -1 for an agent without ranks; what[a] says it for messages
 * ("pp stage 3", copied). Set at the start and after every replacement
 * (a spare takes its lost node's group); not an event. */
void p3d_ctl_set_peers(p3d_ctl *c, const int *group, const char *const *what);
/* The job runs at another width now (the transport's replace or grow op
 * placed it so): dp replicas, nranks ranks, rank r's replica
 * replica_of[r] (copied; nranks no more than cfg.nranks). Not an event. */
void p3d_ctl_set_width(p3d_ctl *c, int dp, int nranks, const int *replica_of);
/* The controller's own process got sig. */
void p3d_ctl_signal(p3d_ctl *c, int sig, double now);
/* The transport could not start or reach agents: stop with code. */
void p3d_ctl_abort(p3d_ctl *c, const char *why, int code, double now);
/* The health checks ops->health started are over: bad[a] = 1 for each
 * node that failed (bad may be NULL: none). Ignored unless CHECKING. */
void p3d_ctl_health_result(p3d_ctl *c, const unsigned char *bad, double now);
/* Time passed: checks --timeout and the stop deadlines. */
void p3d_ctl_tick(p3d_ctl *c, double now);
/* Failover: the leader's node (cfg.leader) is lost and this controller
 * now runs on agent successor's node; heard: when the old leader was last
 * heard (its ranks are fenced by heard + cfg.node_timeout +
 * P3D_FENCE_SLACK); why: what happened, for the takeover record. The
 * successor itself counts as rejoined. Failover off: the job stops. */
void p3d_ctl_leader_lost(p3d_ctl *c, int successor, double heard, const char *why, double now);
/* Failover: node a reconnected to the successor and said it lost the
 * leader too, holding generation gen. A dead node, or one with an older
 * generation, is refused (told to stop, then ended by force). Ignored
 * outside TAKEOVER. */
void p3d_ctl_rejoin(p3d_ctl *c, int a, int gen, double now);

/* Failover under an election (cfg.elect): what the backend said. WON: this
 * successor leads (TAKEOVER acts as with a majority); NOT_WON: it was not
 * elected in time (the takeover stops, exit 1); LEADERSHIP_LOST: this
 * node's hold on the leadership lapsed (a leader, or a successor, stops
 * its ranks at once, exit 1: another node may be elected). why: for the
 * summary and the events. */
enum { P3D_CTL_ELECT_WON = 1, P3D_CTL_ELECT_NOT_WON = 0, P3D_CTL_ELECT_LOST = -1 };
void p3d_ctl_election(p3d_ctl *c, int news, const char *why, double now);

/* A node asks to join the running job as a spare (par3drun --join; the
 * transport authenticated it and checked that its kind fits the job):
 * name (its node name, copied), addr (where it is, for the record), gpus
 * (its GPUs). STARTING, RUNNING, CHECKING, RESTARTING, COLLECTING: it is
 * accepted and runs no rank; REPLACING: accepted, started by the respawn
 * under way; STOPPING, PREEMPTING: refused, the job is ending; DONE:
 * refused, the job is over (no cell runs, no record);
 * TAKEOVER: refused, to retry once the takeover is over (the successor's
 * majority counts the generation's nodes: a node coming in then would
 * move it). The agent it is now (cfg.nagents - 1, ops.join_accept was
 * called), or -1 refused with *why (static text, ops.join_refuse too). */
int p3d_ctl_join(p3d_ctl *c, const char *name, const char *addr, int gpus, double now, const char **why);

/* Queries. */
/* When p3d_ctl_tick must be called next (monotonic seconds); 0: never
 * (only events move the job on). */
double p3d_ctl_deadline(const p3d_ctl *c);
p3d_ctl_state p3d_ctl_get_state(const p3d_ctl *c);
/* Every agent was told to retire and starts again on a new placement
 * (REPLACING, SHRINKING, GROWING): a stop order now is a retirement. */
int p3d_ctl_retiring(const p3d_ctl *c);
/* A lost node (never started again). */
int p3d_ctl_is_dead(const p3d_ctl *c, int a);
/* The job's exit code (valid in DONE). */
int p3d_ctl_code(const p3d_ctl *c);
/* The latest training step and checkpoint step any agent reported in a
 * progress summary, over every generation (-1: none) — result.json. */
void p3d_ctl_progress_max(const p3d_ctl *c, int *step, int *ckpt);
/* The step of the latest verdict's first failure (its rank's last
 * progress line; -1: none) — result.json's step when no progress summary
 * carried one (a job that fails before the first --progress-interval). */
int p3d_ctl_fault_step(const p3d_ctl *c);
/* The latest fault verdict: "job", "node", "unknown", or "none" when no
 * failure was classified (result.json's "fault"); the job restarts made
 * for job faults. */
const char *p3d_ctl_fault(const p3d_ctl *c);
int p3d_ctl_job_restarts(const p3d_ctl *c);
/* Preemption: 1 when the job was preempted (it ended, or ends, with
 * P3D_EXIT_PREEMPTED); *ckpt: the newest checkpoint every node with ranks
 * reported durable since the warning (-1: not every node did: the job
 * resumes from an older one). */
int p3d_ctl_preempted(const p3d_ctl *c, int *ckpt);
/* The root-cause summary to print once at the end ("" when none). */
const char *p3d_ctl_summary(const p3d_ctl *c);
/* Restarts done, and the longest time from a failure seen to every
 * agent running its ranks again (-1 when no recovery completed: none was
 * needed, or the job ended during one; p3d_ctl_recovering says which). */
int p3d_ctl_restarts(const p3d_ctl *c);
double p3d_ctl_recovery_max(const p3d_ctl *c);
/* The longest time from a failure seen to the first heartbeat or output
 * line of the ranks started again after it (training resumed); -1 when
 * no restarted rank showed life. */
double p3d_ctl_resumed_max(const p3d_ctl *c);
int p3d_ctl_recovering(const p3d_ctl *c);
/* Nodes replaced so far, and the story of the recoveries ("" when none):
 * whole lines, for the summary at the end. */
int p3d_ctl_replaced(const p3d_ctl *c);
const char *p3d_ctl_story(const p3d_ctl *c);
/* The agent whose node runs the controller now (-1 none), and how many
 * takeovers completed (every rank running again after one). */
int p3d_ctl_leader(const p3d_ctl *c);
int p3d_ctl_takeovers(const p3d_ctl *c);
/* Nodes that joined the running job (p3d_ctl_join accepted), and those
 * refused. Agent a joined (it was not one of cfg.nagents at the start). */
int p3d_ctl_joins(const p3d_ctl *c);
int p3d_ctl_join_refusals(const p3d_ctl *c);
int p3d_ctl_joined(const p3d_ctl *c, int a);

/* The width now, the full one and the floor (cfg.min_dp, 0: not
 * elastic); the shrinks and grows so far. */
void p3d_ctl_width(const p3d_ctl *c, int *dp, int *full_dp, int *min_dp);
int p3d_ctl_shrinks(const p3d_ctl *c);
int p3d_ctl_grows(const p3d_ctl *c);
/* "dp 4 -> 3 (node n2 lost) -> 4 (grown at step 40)"; "" when the width
 * never changed (owned by c). */
const char *p3d_ctl_width_history(const p3d_ctl *c);
/* Slow nodes reported so far (the slow events). */
int p3d_ctl_slow_count(const p3d_ctl *c);
/* How many judgements of the progress summaries were made (one per
 * --progress-interval while RUNNING): the status view is written when it
 * moves. */
unsigned p3d_ctl_judgements(const p3d_ctl *c);
/* Agent a's figures of the current generation: 0 when it sent none. */
typedef struct p3d_ctl_fig {
    int step, ckpt, npeers;
    double busy, peer_busy, ratio; /* ratio 0: not judged yet */
    int slow;                      /* reported slow this generation */
    const char *what;              /* "pp stage 3" (owned by c) */
} p3d_ctl_fig;
int p3d_ctl_figures(const p3d_ctl *c, int a, p3d_ctl_fig *f);

/* The table (controller_table.c). A cell runs a handler and may move to
 * the states of next (bit s for state s, P3D_CTL_STAY_BIT: it may stay),
 * or ignores the event (next: stay), or is one the controller cannot
 * meet (next: 0). */
enum { P3D_CTL_CELL_RUN = 1, P3D_CTL_CELL_IGNORED, P3D_CTL_CELL_IMPOSSIBLE };
#define P3D_CTL_STAY_BIT (1u << P3D_CTL_NSTATES)
typedef struct p3d_ctl_cell {
    int kind;            /* P3D_CTL_CELL_*, 0: missing from the table */
    const char *handler; /* RUN: its name, static; else NULL */
    unsigned next;
} p3d_ctl_cell;
/* 0 (and kind 0) when (s, e) is out of range or not in the table. */
int p3d_ctl_cell_info(p3d_ctl_state s, p3d_ctl_event e, p3d_ctl_cell *out);
/* The table as Markdown, a section a state (docs/controller.md). */
void p3d_ctl_table_print(FILE *f);

/* "exit code 3" or "killed by signal 9 (KILL)" (sig > 0). */
void p3d_failure_how(int code, int sig, char *buf, size_t cap);

#endif
