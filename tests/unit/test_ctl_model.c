/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_ctl_model.c — a model test of the job controller (controller.h):
 * no process, no socket; a small simulated cluster answers the
 * controller's ops the way the transports do.
 *
 * Every sequence: a random cluster (2-5 agents, some spares, the leader's
 * own node or not, --max-restarts 0-3, a --timeout or not), a random
 * number of faults in any order (rank failures, lost agents, lost spares,
 * failed health checks on any subset of nodes, spares included, signals,
 * node signals, aborts, time jumps, stale messages, a respawn that fails),
 * then a cluster that only does what it is told. Checked after every
 * event: the restart count never exceeds --max-restarts and never goes
 * down; a lost node stays dead and is never started again, and its
 * replacement never before the lost node's fence (no rank twice); CHECKING,
 * REPLACING and STOPPING always have a deadline; once the faults stop the
 * controller reaches DONE within a bounded number of events, with an exit
 * code the cause of the stop allows. Every (state, event) cell of the
 * table (completions included) must be visited but those the table says
 * cannot happen, which must never run; every move a cell makes must be
 * one the table names for it (ops.cell). A fingerprint of everything the
 * controller did through its ops is printed: a change meant to keep
 * behaviour keeps it (compare figures of one compiler: the order in which
 * a call's arguments draw random numbers is the compiler's). Progress summaries (P) come at random too, from
 * a node that is sometimes slow, with checkpoints that advance: a slow
 * node is replaced only when a spare and a restart are left, and a
 * progress summary never stops the job. The sequence that hung the job before the table
 * (a rank failure, then a health check failing only on a spare) is seed 0.
 *
 * No progress, no loop (cfg.max_no_progress = seed % 4, 0: off): the
 * model counts restarts in a row without progress itself, from the
 * controller's figures (p3d_ctl_progress_max) at each restart it sees.
 * Checked: no restart is the max_no_progress-th in a row without
 * progress; every stop with NP_CODE was due; some such stops happen,
 * some after a node was replaced during the count (a second fault);
 * no_progress_case plays that second fault by hand.
 *
 * Leader failover (cfg.failover, in half of the sequences): the leader's
 * node is lost at random in every state, again while the takeover waits
 * (two successive losses), and nodes rejoin the successor at random, with
 * stale generations and from dead nodes too. Checked: the old leader
 * stays dead; the successor starts the ranks again only after a majority
 * of the generation's nodes rejoined it, only on nodes that did, and
 * never before the old leader's fence; TAKEOVER always has a deadline.
 * A partition into two sides (partition_case): the leader's side and the
 * successor's side, each with its own controller; never do both run
 * ranks again, and a side with half of the nodes or fewer stops with 1.
 *
 * Under an election (cfg.elect, half of the failover sequences: etcd
 * decides who leads, not the majority): the backend's news comes at
 * random in every state (won, not won, this node's lease lapsed). Checked:
 * a successor starts the ranks again only after it was elected in that
 * takeover; a node whose leadership lapsed stops with 1. The partition
 * then splits etcd's side too: only the side that keeps etcd may run.
 *
 * Fault classification (cfg.max_job_restarts = seed / 4 % 4, a window of
 * 0-2 s): the random failures carry the same error and step or not.
 * Checked: a job-scoped verdict never runs a --health-check and never
 * spends a spare; the job restarts never exceed --max-job-restarts;
 * COLLECTING always has a deadline; a stop a verdict ordered ends with the
 * failure's code. fault_case plays the second faults by hand: a node lost
 * while the window collects, a job fault on the replacement's first step,
 * the same failure at the same step after a restart, the budget spent,
 * and a job fault while a takeover restarts the ranks. rank_fault_case
 * plays the verdict at rank level (an agent reports each of its ranks'
 * failures; cfg.replica_of says each rank's replica): a node lost while
 * the window holds one node's rank failures, one node's every rank and
 * replica failing while the others run on (the node's), a preemption
 * warning during COLLECTING, and a one-node job whose failures in one
 * replica of two are not the job's but one in each replica are.
 * Preemption (cfg.preempt_sig SIGUSR1, cfg.preempt_term in half): a
 * further SEQUENCES / 4 random sequences, after the fingerprint (so that
 * it still compares with the figures before preemption), where SIGUSR1 to
 * the controller or to a node is the scheduler's warning. The cluster
 * answers a warning with checkpoints or ends. Checked: entering
 * PREEMPTING tells every agent (FORWARD of the preempt signal); PREEMPTING
 * has a deadline, never restarts nor respawns; its wait ends by a
 * timer only once --grace (or --timeout) passed; a job stopped from
 * PREEMPTING, or by a warning during a recovery, ends with
 * P3D_EXIT_PREEMPTED (an abort's or a lapsed leadership's code aside).
 * preempt_cases plays the second faults by hand: a node lost during the
 * wait, a warning during a takeover, the grace running out while a node
 * still writes, and a second SIGTERM (cfg.preempt_term).
 *
 * Nodes joining the running job (p3d_ctl_join, par3drun --join): a
 * further SEQUENCES / 4 random sequences, after the fingerprint too,
 * where a node asks to join at random in every state. Checked: a join in
 * STOPPING, DONE, PREEMPTING or TAKEOVER is refused with a reason, any
 * other is accepted as the next agent, a spare, started at once except
 * while REPLACING (the respawn starts it; never before); the joined agents
 * then take part in everything above (lost, replaced, used as spares).
 * join_cases plays the second faults by hand: a join during a takeover
 * (refused, "retry"; accepted once it is over), a join during a
 * replacement, the joined node lost before it is used, and the joined
 * node taking a lost node's ranks.
 *
 * Elastic width (cfg.min_dp; docs/controller.md, "Shrink and grow"): a
 * further SEQUENCES / 4 random sequences (and SEQUENCES / 8 with
 * preemption), after the fingerprint, where a node with ranks holds one
 * data-parallel replica, --min-dp is 1 to the full width, and spares may
 * join a shrunk job later (par3drun --join). A loss no spare can take
 * shrinks the job (SHRINKING); below --min-dp the replace refuses and
 * the job stops with 1. Checked after every event: the controller's width
 * is the cluster's; RUNNING never below --min-dp nor above the full
 * width; the nodes holding ranks are exactly dp distinct live ones (never
 * a GPU twice, none on a lost node); a grow only in RUNNING, below full
 * width, within --max-restarts, and only at a checkpoint newer than the
 * shrink or --grow-wait after the spares could hold a replica; SHRINKING
 * and GROWING always have a deadline. The global batch is not the
 * controller's: the transport keeps it (p3d_width, tested in
 * test_elastic and by tests/integration/launch_shrink.sh's --verify).
 * elastic_cases plays the second faults by hand: a loss during a shrink,
 * a loss at exactly --min-dp (the stop names D), a preemption during a
 * shrink and during a grow, a grow at a checkpoint and one by
 * --grow-wait, a loss during a grow, the leader lost after a shrink (the
 * successor keeps full and minimum width) and 2000 grows followed by
 * random faults (a failure of the old generation during the grow, ...).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <signal.h>

#include "controller.h"

#define MAXA 6
#define SEQUENCES 20000

static const char *names[MAXA] = {"n0", "n1", "n2", "n3", "n4", "n5"};

typedef struct env {
    int n, leader, max_restarts;
    double timeout;
    int rank_node[MAXA];                /* runs ranks (a spare: 0) */
    int alive[MAXA];                    /* its process is there (the cluster's view) */
    int told_stop[MAXA];                /* a stop or retire order since it started */
    int killed[MAXA];                   /* ops.kill: it will be reported gone */
    int gen[MAXA];                      /* the generation its ranks run */
    int up_sent[MAXA], done_sent[MAXA]; /* generation reported, -1 */
    int was_dead[MAXA];
    int health_pending;
    int respawn_fail;   /* a fault: the next respawn fails */
    int respawn_failed; /* it did: whatever event completed it, exit 1 */
    double fence_at;    /* a lost agent's ranks may run until then */
    int last_restarts;
    int stop_cause;       /* the event that moved it to STOPPING, -1 */
    int stop_in_takeover; /*   from TAKEOVER (a takeover that could not place) */
    int stop_sig, stop_code, fail_code;
    int slow;      /* the node whose ranks are slow, -1 none */
    int ckpt;      /* the checkpoint the ranks report */
    int intervals; /* progress rounds left before the ranks are done */
    int failover;  /* cfg.failover */
    double node_timeout;
    int members;       /* the generation's nodes (the majority's base) */
    int tk;            /* a takeover waits for its respawn */
    int tk_members;    /* members when it began */
    int tk_rej[MAXA];  /* rejoined the successor (accepted) */
    int crashed[MAXA]; /* its node is gone: it never rejoins */
    int elect;         /* cfg.elect: etcd elects the successor */
    int tk_won;        /*   this takeover was elected */
    int no_win;        /*   (a partition) etcd is on the other side */
    int losses;        /* leader losses in this sequence */
    int respawned;     /* respawns that succeeded */
    /* no progress, no loop (cfg.max_no_progress): the model's own count */
    int max_np;           /* --max-no-progress, 0 off */
    int np_run;           /* restarts in a row without progress */
    int np_step, np_ckpt; /* the controller's figures at the last restart */
    int np_replaced;      /* a node was replaced within that run */
    int np_stopped;       /* it stopped the job with NP_CODE, rightly */
    int last_replaced;
    /* fault classification: the model's own view */
    int max_job;       /* --max-job-restarts */
    int job_now;       /* a job verdict in the event being handled */
    int cut_now;       /* a window's verdict cut short by a warning, in it */
    int verdict_stop;  /* a verdict's remedy was a stop */
    const char *f_err; /* the next F's error line and step */
    int f_step;
    /* preemption (cfg.preempt_sig = SIGUSR1) */
    int preempt, preempt_term;
    double grace, pre_at; /* cfg.grace; when PREEMPTING began */
    int told_ckpt[MAXA];  /* its ranks were sent the preempt signal */
    int fwd_all;          /* a FORWARD of it to every agent was sent */
    int pre_stop;         /* the stop came from PREEMPTING, or from a warning */
    /* elastic width (cfg.min_dp): a node with ranks holds one replica */
    int elastic, full_dp, min_dp, dp;
    double grow_wait;
    int shrink_ckpt;   /* the controller's checkpoint at the last shrink */
    double room_since; /* since when the spares could hold a replica, -1 */
    int late[MAXA];    /* a spare that joins the running job later */
    p3d_ctl *c;
    double now;
    uint64_t rng;
    int seed;
    char trace[8192];
} env;

static unsigned long cells[P3D_CTL_NSTATES][P3D_CTL_NEVENTS];
static unsigned long total_events;
static unsigned long slow_seen;                 /* slow nodes reported, all sequences */
static unsigned long slow_moved;                /* ... and replaced */
static unsigned long takeovers;                 /* completed, all sequences */
static unsigned long doubles;                   /* sequences with two leader losses or more */
static unsigned long refused;                   /* rejoins refused */
static unsigned long parts_major, parts_minor;  /* partitions: successor ran / stopped */
static unsigned long elected_runs, lease_stops; /* takeovers after a won election; stops on a lapsed lease */
static unsigned long np_stops, np_stops_mixed;  /* no-progress stops; ... with a node replaced in the run */
static unsigned long job_verdicts, node_verdicts, unknown_verdicts, job_stops, cut_verdicts; /* fault classification */
static int model_preempt;                                                  /* setup: the sequences with preemption on */
static int model_join;                                                     /* random_event: nodes join at random */
static unsigned long joins_ok, joins_refused, joins_replacing, joins_used; /* join figures */
static int model_elastic;                                                  /* setup: the sequences with --min-dp */
static unsigned long shrinks, grows, below_d;                              /* elastic figures, all sequences */
static unsigned long pre_waits, pre_ckpt_ends, pre_grace_ends, pre_now_ends; /* preemption figures */
#define NP_CODE 93
/* Everything the controller did through its ops, all sequences: an
 * FNV-1a digest that a change meant to keep behaviour must keep. */
static uint64_t fingerprint = 0xcbf29ce484222325ull;

static void fp_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        fingerprint ^= b[i];
        fingerprint *= 0x100000001b3ull;
    }
}

static void fp_str(const char *s)
{
    fp_bytes(s ? s : "", s ? strlen(s) + 1 : 1);
}

static void fp_int(int v)
{
    fp_bytes(&v, sizeof v);
}

static unsigned rnd(env *e, unsigned n)
{
    e->rng ^= e->rng << 13;
    e->rng ^= e->rng >> 7;
    e->rng ^= e->rng << 17;
    return n ? (unsigned)(e->rng % n) : 0;
}

static void tr(env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tr(env *e, const char *fmt, ...)
{
    size_t l = strlen(e->trace);
    if (l > sizeof e->trace - 200) {
        memmove(e->trace, e->trace + 2000, l - 2000 + 1);
        l -= 2000;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->trace + l, sizeof e->trace - l, fmt, ap);
    va_end(ap);
}

static void broken(env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void broken(env *e, const char *fmt, ...)
{
    char m[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    fprintf(stderr, "model: seed %d: %s\nthe last events:\n%s", e->seed, m, e->trace);
    fail_msg("seed %d: %s", e->seed, m);
}

/* ---- the ops: a cluster that does what it is told ------------------------ */

static int ndead_now(env *e)
{
    int k = 0;
    for (int i = 0; i < e->n; i++)
        k += p3d_ctl_is_dead(e->c, i);
    return k;
}

static void o_send(void *ctx, int a, const p3d_amsg *m)
{
    env *e = ctx;
    fp_str("send");
    fp_int(a);
    fp_int(m->type);
    fp_int(m->sig);
    fp_int(m->code);
    fp_int(m->gen);
    if (m->type == P3D_AM_RESTART)
        e->members = e->n - ndead_now(e);
    for (int i = a < 0 ? 0 : a; i < (a < 0 ? e->n : a + 1); i++) {
        if (!e->alive[i])
            continue;
        if (m->type == P3D_AM_STOP)
            e->told_stop[i] = 1;
        else if (m->type == P3D_AM_RESTART)
            e->gen[i] = m->gen;
        else if (m->type == P3D_AM_FORWARD && e->preempt && m->sig == SIGUSR1)
            e->told_ckpt[i] = 1;
    }
    if (m->type == P3D_AM_FORWARD && e->preempt && m->sig == SIGUSR1 && a < 0)
        e->fwd_all = 1;
}

static void o_kill(void *ctx, int a)
{
    env *e = ctx;
    fp_str("kill");
    fp_int(a);
    if (a < 0 || a >= e->n)
        broken(e, "kill of agent %d", a);
    e->killed[a] = 1;
}

static void o_say(void *ctx, const char *text)
{
    env *e = ctx;
    fp_str(text);
    size_t l = strlen(text);
    if (!l || text[l - 1] != '\n')
        broken(e, "a message that is not whole lines: %s", text);
}

static void o_event(void *ctx, const char *fields)
{
    env *e = ctx;
    fp_str(fields);
    static const char head[] = "\"event\": \"fault\", ";
    if (strncmp(fields, head, sizeof head - 1))
        return;
    int job = strstr(fields, "\"fault\": \"job\"") != NULL, stop = strstr(fields, "\"remedy\": \"stop") != NULL;
    job_verdicts += (unsigned long)job;
    node_verdicts += strstr(fields, "\"fault\": \"node\"") != NULL;
    unknown_verdicts += strstr(fields, "\"fault\": \"unknown\"") != NULL;
    job_stops += (unsigned long)(job && stop);
    e->job_now |= job;
    e->verdict_stop |= stop;
    if (strstr(fields, "\"remedy\": \"none: a preemption warning came")) {
        e->cut_now = 1;
        cut_verdicts++;
    }
}

/* Every cell that ran (completions included): counted, and its move
 * checked against the table (controller.h, p3d_ctl_cell_info). */
static void o_cell(void *ctx, p3d_ctl_state s, p3d_ctl_event ev, p3d_ctl_state to)
{
    env *e = ctx;
    p3d_ctl_cell x;
    cells[s][ev]++;
    if (!p3d_ctl_cell_info(s, ev, &x))
        broken(e, "cell (%s, %s) is not in the table", p3d_ctl_state_name(s), p3d_ctl_event_name(ev));
    if (x.kind == P3D_CTL_CELL_IMPOSSIBLE)
        broken(e, "cell (%s, %s) ran, and the table says it cannot happen", p3d_ctl_state_name(s),
               p3d_ctl_event_name(ev));
    if (!(x.next & (to == s ? P3D_CTL_STAY_BIT : 1u << to)))
        broken(e, "cell (%s, %s) moved to %s, which the table does not name", p3d_ctl_state_name(s),
               p3d_ctl_event_name(ev), to == s ? "stay" : p3d_ctl_state_name(to));
}

static int o_spares_left(void *ctx);

/* Elastic: no spare can take the lost replicas; the job runs on fewer,
 * never below --min-dp (then the transport refuses, naming D). */
static int model_shrink(env *e, char **msg)
{
    fp_str("shrink");
    /* every replica on a dead node goes: the lost ones, and one whose node
     * failed its check before the start (the model keeps its ranks there) */
    int need = 0;
    for (int i = 0; i < e->n; i++)
        need += e->rank_node[i] && p3d_ctl_is_dead(e->c, i);
    if (e->dp - need < e->min_dp) {
        below_d++;
        char buf[128];
        snprintf(buf, sizeof buf, "no spare left and %d replicas would be left, below --min-dp %d", e->dp - need,
                 e->min_dp);
        *msg = strdup(buf);
        return -1;
    }
    for (int i = 0; i < e->n; i++)
        if (p3d_ctl_is_dead(e->c, i))
            e->rank_node[i] = 0;
    e->dp -= need;
    int ckpt;
    p3d_ctl_progress_max(e->c, &ckpt, &e->shrink_ckpt);
    (void)ckpt;
    e->room_since = -1;
    shrinks++;
    p3d_ctl_set_width(e->c, e->dp, 4 * e->dp, NULL);
    *msg = strdup("dropped the lost replicas");
    return 2;
}

/* The spares' room for whole replicas (a spare node holds one). */
static int o_grow_room(void *ctx)
{
    env *e = ctx;
    int room = 0;
    for (int i = 0; i < e->n; i++)
        room += !e->rank_node[i] && !p3d_ctl_is_dead(e->c, i) && e->alive[i] && !e->late[i];
    if (room > e->full_dp - e->dp)
        room = e->full_dp - e->dp;
    if (room <= 0)
        e->room_since = -1;
    else if (e->room_since < 0)
        e->room_since = e->now;
    return room;
}

/* The grow: only in RUNNING below the full width, at a checkpoint newer
 * than the shrink or --grow-wait after the spares could hold a replica. */
static int o_grow(void *ctx, int gen, const char *when, char **msg)
{
    env *e = ctx;
    int step, ckpt;
    fp_str("grow");
    fp_int(gen);
    p3d_ctl_progress_max(e->c, &step, &ckpt);
    /* the record says what made the grow due: the checkpoint or the wait */
    if (!when || (ckpt > e->shrink_ckpt) != (strstr(when, "checkpoint step") != NULL))
        broken(e, "a grow whose reason '%s' does not match checkpoint %d (shrink's %d)", when ? when : "(null)", ckpt,
               e->shrink_ckpt);
    if (p3d_ctl_get_state(e->c) != P3D_CTL_RUNNING)
        broken(e, "a grow in %s", p3d_ctl_state_name(p3d_ctl_get_state(e->c)));
    if (e->dp >= e->full_dp)
        broken(e, "a grow at full width %d", e->dp);
    if (gen > e->max_restarts)
        broken(e, "a grow for restart %d past --max-restarts %d", gen, e->max_restarts);
    if (!(ckpt > e->shrink_ckpt) && !(e->room_since >= 0 && e->now >= e->room_since + e->grow_wait - 1e-9))
        broken(e, "a grow at %.2f without a checkpoint newer than %d or --grow-wait %g (spares since %.2f)", e->now,
               e->shrink_ckpt, e->grow_wait, e->room_since);
    int room = o_grow_room(e);
    if (room <= 0) {
        *msg = strdup("no spare fits");
        return 1;
    }
    for (int i = 0; i < e->n && room; i++)
        if (!e->rank_node[i] && !p3d_ctl_is_dead(e->c, i) && e->alive[i] && !e->late[i]) {
            e->rank_node[i] = 1;
            e->dp++;
            room--;
        }
    e->room_since = -1;
    grows++;
    p3d_ctl_set_width(e->c, e->dp, 4 * e->dp, NULL);
    *msg = strdup("replicas added on the spares");
    return 0;
}

static int o_replace(void *ctx, const int *lost, int nlost, int gen, const char *reason, char **msg)
{
    env *e = ctx;
    fp_str("replace");
    fp_bytes(lost, (size_t)nlost * sizeof *lost);
    fp_int(gen);
    fp_str(reason);
    if (gen > e->max_restarts)
        broken(e, "replace for restart %d past --max-restarts %d", gen, e->max_restarts);
    if (!reason || !reason[0])
        broken(e, "replace without a reason");
    int need = 0;
    for (int k = 0; k < nlost; k++) {
        if (!p3d_ctl_is_dead(e->c, lost[k]))
            broken(e, "replace of agent %d that is not dead", lost[k]);
        need += e->rank_node[lost[k]];
    }
    if (strstr(reason, "slower than")) {
        /* --slow-node replace asked only with a spare and a restart left */
        if (nlost != 1 || !need || !o_spares_left(e))
            broken(e, "a slow node replaced without a spare: %s", reason);
        slow_moved++;
    }
    if (!need) {
        *msg = strdup("it ran no rank");
        return 1;
    }
    int have = 0;
    for (int i = 0; i < e->n; i++)
        have += !e->rank_node[i] && !p3d_ctl_is_dead(e->c, i) && !e->late[i];
    if (have < need && e->elastic)
        return model_shrink(e, msg);
    if (have < need) {
        *msg = strdup("no spare node left");
        return -1;
    }
    for (int i = 0; i < e->n && need; i++)
        if (!e->rank_node[i] && !p3d_ctl_is_dead(e->c, i) && !e->late[i]) {
            e->rank_node[i] = 1;
            joins_used += (unsigned long)p3d_ctl_joined(e->c, i); /* a joined spare takes ranks */
            need--;
        }
    for (int k = 0; k < nlost; k++)
        e->rank_node[lost[k]] = 0;
    *msg = strdup("moved to a spare");
    return 0;
}

static int o_respawn(void *ctx, int gen, const unsigned char *dead)
{
    env *e = ctx;
    fp_str("respawn");
    fp_int(gen);
    fp_bytes(dead, (size_t)e->n);
    tr(e, "  respawn gen %d\n", gen);
    if (p3d_ctl_get_state(e->c) == P3D_CTL_PREEMPTING)
        broken(e, "a respawn while preempting");
    for (int i = 0; i < e->n; i++) {
        if (e->was_dead[i] && !dead[i])
            broken(e, "respawn starts agent %d again, lost before", i);
        if (!dead[i] && e->alive[i] && !e->told_stop[i] && !e->killed[i])
            broken(e, "respawn while agent %d still runs untold", i);
    }
    if (e->now < e->fence_at)
        broken(e, "respawn at %.2f before a lost node's fence %.2f: a rank could run twice", e->now, e->fence_at);
    if (e->tk) {
        /* a takeover: only nodes that rejoined start, and only with a
         * majority of the generation's nodes */
        int started = 0;
        for (int i = 0; i < e->n; i++)
            if (!dead[i]) {
                started++;
                if (!e->tk_rej[i])
                    broken(e, "takeover respawn starts agent %d, which did not rejoin", i);
            }
        if (e->elect && !e->tk_won)
            broken(e, "takeover respawn before the election was won");
        if (!e->elect && 2 * started <= e->tk_members)
            broken(e, "takeover respawn with %d of %d nodes: no majority", started, e->tk_members);
        elected_runs += e->elect;
        if (dead[e->leader])
            broken(e, "takeover respawn without its successor %d", e->leader);
    }
    if (e->respawn_fail) {
        e->respawn_fail = 0;
        e->respawn_failed = 1;
        return -1;
    }
    if (e->tk)
        takeovers++;
    e->tk = 0;
    e->respawned++;
    e->members = e->n - ndead_now(e);
    for (int i = 0; i < e->n; i++)
        if (!dead[i]) {
            e->alive[i] = 1;
            e->told_stop[i] = e->killed[i] = 0;
            e->gen[i] = gen;
            e->up_sent[i] = e->done_sent[i] = -1;
        }
    return 0;
}

static int o_health(void *ctx, const unsigned char *dead)
{
    env *e = ctx;
    fp_str("health");
    fp_bytes(dead, (size_t)e->n);
    if (e->health_pending)
        broken(e, "a second health check started before the first one's result");
    if (e->job_now)
        broken(e, "a job-scoped fault started a --health-check (it may cost a spare)");
    if (rnd(e, 20) == 0)
        return -1; /* cannot check: healthy */
    e->health_pending = 1;
    return 0;
}

static int o_spares_left(void *ctx)
{
    env *e = ctx;
    int n = 0;
    for (int i = 0; i < e->n; i++)
        n += !e->rank_node[i] && !p3d_ctl_is_dead(e->c, i) && !e->late[i];
    return n;
}

/* A node joined as agent a: the cluster grows (a spare), its agent starts
 * now on generation gen, or with the respawn under way (start_now 0). */
static void o_join_accept(void *ctx, int a, int gen, int start_now)
{
    env *e = ctx;
    fp_str("join");
    fp_int(a);
    p3d_ctl_state s = p3d_ctl_get_state(e->c);
    if (a != e->n || a >= MAXA)
        broken(e, "a joined node became agent %d, the cluster has %d", a, e->n);
    if (s == P3D_CTL_STOPPING || s == P3D_CTL_DONE || s == P3D_CTL_TAKEOVER || s == P3D_CTL_PREEMPTING)
        broken(e, "a node joined in %s", p3d_ctl_state_name(s));
    int retiring = s == P3D_CTL_REPLACING || s == P3D_CTL_SHRINKING || s == P3D_CTL_GROWING;
    if (start_now != !retiring)
        broken(e, "a node joined in %s, started %s", p3d_ctl_state_name(s), start_now ? "now" : "later");
    e->n = a + 1;
    e->members += start_now; /* a node of this generation (a retirement: of the next) */
    e->rank_node[a] = 0;
    e->alive[a] = start_now;
    e->gen[a] = gen;
    e->up_sent[a] = e->done_sent[a] = -1;
    e->told_stop[a] = e->killed[a] = e->was_dead[a] = e->crashed[a] = e->told_ckpt[a] = 0;
    /* after a takeover acted (its retirement under way) the joiner came to
     * this leader itself: connected here like a node that rejoined */
    e->tk_rej[a] = e->tk != 0;
    joins_ok++;
    joins_replacing += !start_now;
}

static void o_join_refuse(void *ctx, const char *name, const char *why)
{
    env *e = ctx;
    fp_str("join-refused");
    fp_str(why);
    if (!name || !why || !*why)
        broken(e, "a join refused without a reason");
    joins_refused++;
}

/* ---- the events ------------------------------------------------------------ */

/* No progress, no loop, as the model sees it: a restart judges the
 * generation that ends against the controller's figures (latest step and
 * checkpoint reported) at the previous restart; the restart that would
 * be the max_np-th in a row without progress is a stop with NP_CODE. */
static int np_would(const env *e)
{
    int sm, cm;
    p3d_ctl_progress_max(e->c, &sm, &cm);
    if (!e->max_np || e->last_restarts == 0 || (sm < 0 && cm < 0) || sm > e->np_step || cm > e->np_ckpt)
        return 0;
    return e->np_run + 1;
}

static void np_check(env *e, p3d_ctl_state before, p3d_ctl_state s, int r)
{
    /* a restart that stopped the job at once (no placement: the count
     * moved, no rank starts again) is no restart to judge */
    if (r > e->last_restarts && s != P3D_CTL_STOPPING && s != P3D_CTL_DONE) {
        int next = np_would(e);
        if (e->max_np && next >= e->max_np)
            broken(e, "restart %d is the %d-th in a row without progress (--max-no-progress %d)", r, next, e->max_np);
        e->np_replaced = next ? e->np_replaced || p3d_ctl_replaced(e->c) > e->last_replaced : 0;
        e->np_run = next;
        p3d_ctl_progress_max(e->c, &e->np_step, &e->np_ckpt);
    }
    e->last_replaced = p3d_ctl_replaced(e->c);
    /* (a shrink's stop can end the job at once: every agent already gone) */
    if ((s == P3D_CTL_STOPPING || s == P3D_CTL_DONE) && before != P3D_CTL_STOPPING && before != P3D_CTL_DONE &&
        p3d_ctl_code(e->c) == NP_CODE && e->max_np) {
        if (np_would(e) < e->max_np)
            broken(e, "stopped for no progress after %d restarts without (--max-no-progress %d)", e->np_run, e->max_np);
        e->np_stopped = 1;
        np_stops++;
        np_stops_mixed += (unsigned long)e->np_replaced;
    }
}

/* Preemption, after every event: the wait begins by telling every agent,
 * never restarts, and ends by a timer only past its grace. */
static void preempt_check(env *e, p3d_ctl_state before, p3d_ctl_event ev, p3d_ctl_state s, int r)
{
    if (s == P3D_CTL_PREEMPTING && before != s) {
        if (!e->fwd_all)
            broken(e, "PREEMPTING without the preempt signal sent to every agent");
        e->pre_at = e->now;
        pre_waits++;
    }
    if (s == P3D_CTL_PREEMPTING && r > e->last_restarts)
        broken(e, "a restart while preempting");
    int stopped = (s == P3D_CTL_STOPPING || s == P3D_CTL_DONE) && before != P3D_CTL_STOPPING && before != P3D_CTL_DONE;
    if (!stopped || !(before == P3D_CTL_PREEMPTING || ev == P3D_CTL_EV_PREEMPT))
        return;
    e->pre_stop = 1;
    if (before != P3D_CTL_PREEMPTING) {
        pre_now_ends++;
    } else if (ev == P3D_CTL_EV_TICK && p3d_ctl_code(e->c) == P3D_EXIT_PREEMPTED) {
        if (e->now < e->pre_at + e->grace && !(e->timeout > 0 && e->now >= e->timeout))
            broken(e, "the preemption wait ended by a timer at %.2f, its grace runs to %.2f", e->now,
                   e->pre_at + e->grace);
        pre_grace_ends++;
    } else if (ev == P3D_CTL_EV_PROGRESS || ev == P3D_CTL_EV_DONE || ev == P3D_CTL_EV_GONE) {
        pre_ckpt_ends++;
    }
}

static void after(env *e, p3d_ctl_state before, p3d_ctl_event ev, int sig, int code)
{
    p3d_ctl_state s = p3d_ctl_get_state(e->c);
    total_events++;
    if (s >= P3D_CTL_NSTATES)
        broken(e, "state %d out of range", (int)s);
    if (before == P3D_CTL_DONE && s != P3D_CTL_DONE)
        broken(e, "left DONE");
    int r = p3d_ctl_restarts(e->c);
    if (r > e->max_restarts)
        broken(e, "%d restarts, --max-restarts %d", r, e->max_restarts);
    if (r < e->last_restarts)
        broken(e, "the restart count went down");
    np_check(e, before, s, r);
    if (e->job_now && p3d_ctl_replaced(e->c) > e->last_replaced)
        broken(e, "a job-scoped fault spent a spare");
    if (p3d_ctl_job_restarts(e->c) > e->max_job)
        broken(e, "%d job restarts, --max-job-restarts %d", p3d_ctl_job_restarts(e->c), e->max_job);
    if (s == P3D_CTL_COLLECTING && !(p3d_ctl_deadline(e->c) > 0))
        broken(e, "collecting without a deadline");
    /* a warning while the window collects: its failures get their verdict,
     * and only then */
    int cut = before == P3D_CTL_COLLECTING && ev == P3D_CTL_EV_PREEMPT && s == P3D_CTL_STOPPING;
    if (cut && !e->cut_now)
        broken(e, "a warning during COLLECTING dropped the window's failures without a verdict");
    if (e->cut_now && !cut)
        broken(e, "a window cut short by a warning, but the event was %s in %s", p3d_ctl_event_name(ev),
               p3d_ctl_state_name(before));
    e->job_now = e->cut_now = 0;
    e->last_restarts = r;
    for (int i = 0; i < e->n; i++) {
        if (e->was_dead[i] && !p3d_ctl_is_dead(e->c, i))
            broken(e, "agent %d came back from the dead", i);
        e->was_dead[i] |= p3d_ctl_is_dead(e->c, i);
    }
    preempt_check(e, before, ev, s, r);
    if (e->elastic) {
        int dp, full, min;
        p3d_ctl_width(e->c, &dp, &full, &min);
        if (dp != e->dp || full != e->full_dp || min != e->min_dp)
            broken(e, "width %d (full %d, min %d), the cluster runs %d", dp, full, min, e->dp);
        if (s == P3D_CTL_RUNNING && (dp < min || dp > full))
            broken(e, "running at dp %d outside [%d, %d]", dp, min, full);
        int held = 0;
        for (int i = 0; i < e->n; i++)
            held += e->rank_node[i];
        if (held != e->dp) /* one replica a node: never a node (a GPU) twice, none lost */
            broken(e, "%d nodes hold ranks at dp %d", held, e->dp);
    }
    if ((s == P3D_CTL_CHECKING || s == P3D_CTL_REPLACING || s == P3D_CTL_STOPPING || s == P3D_CTL_TAKEOVER ||
         s == P3D_CTL_PREEMPTING || s == P3D_CTL_SHRINKING || s == P3D_CTL_GROWING) &&
        !(p3d_ctl_deadline(e->c) > 0))
        broken(e, "state %s without a deadline", p3d_ctl_state_name(s));
    if (s != P3D_CTL_CHECKING && before == P3D_CTL_CHECKING)
        e->health_pending = 0; /* a late result is ignored */
    if (ev == P3D_CTL_EV_PROGRESS && (s == P3D_CTL_STOPPING || s == P3D_CTL_DONE) && before != s &&
        before != P3D_CTL_PREEMPTING) /* there a checkpoint ends the wait */
        broken(e, "a progress summary stopped the job (a slow node must never stop it)");
    if (ev == P3D_CTL_EV_RESUMED && s != before)
        broken(e, "a first sign of life (V) moved the state %s -> %s", p3d_ctl_state_name(before),
               p3d_ctl_state_name(s));
    if (p3d_ctl_resumed_max(e->c) >= 0 && !r)
        broken(e, "a training-resumed figure without a restart");
    if ((s == P3D_CTL_STOPPING || s == P3D_CTL_DONE) && before != P3D_CTL_STOPPING && before != P3D_CTL_DONE) {
        e->stop_cause = (int)ev;
        e->stop_sig = sig;
        e->stop_code = code;
        e->stop_in_takeover = before == P3D_CTL_TAKEOVER;
    }
}

#define DISPATCH(e, ev, sig, code, call)                                                                               \
    do {                                                                                                               \
        p3d_ctl_state b_ = p3d_ctl_get_state((e)->c);                                                                  \
        call;                                                                                                          \
        after((e), b_, (ev), (sig), (code));                                                                           \
    } while (0)

/* sig is the scheduler's warning in this sequence */
static int preempts(const env *e, int sig)
{
    return e->preempt && (sig == SIGUSR1 || (sig == SIGTERM && e->preempt_term));
}

static void msg(env *e, int a, int type, int gen, int rank, int code, int sig)
{
    /* a spare runs no rank: its A says 0 (the fault window waits for
     * every rank of the nodes that run some) */
    p3d_amsg m = {.type = type,
                  .gen = gen,
                  .rank = rank,
                  .code = code,
                  .sig = sig,
                  .nranks = e->rank_node[a] ? 4 : 0,
                  .step = -1,
                  .errts = -1};
    if (type == P3D_AM_FAIL) {
        m.err = e->f_err;
        m.step = e->f_step;
    }
    p3d_ctl_event ev = type == P3D_AM_UP     ? P3D_CTL_EV_UP
                       : type == P3D_AM_DONE ? P3D_CTL_EV_DONE
                       : type == P3D_AM_FAIL ? P3D_CTL_EV_FAIL
                       : preempts(e, sig)    ? P3D_CTL_EV_PREEMPT
                                             : P3D_CTL_EV_NODE_SIG;
    tr(e, "%7.2f %-10s %c from %d gen %d rank %d code %d sig %d\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)),
       type, a, gen, rank, code, sig);
    if (ev == P3D_CTL_EV_FAIL)
        e->fail_code = code;
    DISPATCH(e, ev, sig, code, p3d_ctl_message(e->c, a, &m, e->now));
    if (type == P3D_AM_UP)
        e->up_sent[a] = gen;
    if (type == P3D_AM_DONE)
        e->done_sent[a] = gen;
}

static void gone(env *e, int a, int clean)
{
    tr(e, "%7.2f %-10s gone %d%s\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)), a, clean ? " clean" : "");
    e->alive[a] = 0;
    if (p3d_ctl_get_state(e->c) == P3D_CTL_TAKEOVER)
        e->tk_rej[a] = 0; /* it went away before the takeover acted */
    if (!clean && !e->killed[a])
        e->crashed[a] = 1;
    if (!clean && rnd(e, 2)) {
        /* lost to a missing heartbeat: its ranks end by its own deadline */
        double until = e->now + rnd(e, 300) / 100.0;
        tr(e, "        fence %d until %.2f\n", a, until);
        p3d_ctl_fence(e->c, a, until);
        if (until > e->fence_at)
            e->fence_at = until;
    }
    DISPATCH(e, P3D_CTL_EV_GONE, 0, 0, p3d_ctl_gone_status(e->c, a, clean ? "exited" : "crashed", clean, e->now));
}

static void health(env *e, int faults)
{
    unsigned char bad[MAXA] = {0};
    for (int i = 0; faults && i < e->n; i++)
        bad[i] = rnd(e, 3) == 0;
    tr(e, "%7.2f %-10s health bad %d%d%d%d%d\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)), bad[0], bad[1],
       bad[2], bad[3], bad[4]);
    e->health_pending = 0;
    DISPATCH(e, P3D_CTL_EV_HEALTH, 0, 0, p3d_ctl_health_result(e->c, bad, e->now));
}

/* Agent a's first sign of life of its generation (V), or a stale one. */
static void resumed(env *e, int a)
{
    p3d_amsg m = {.type = P3D_AM_RESUMED, .gen = e->gen[a] - (rnd(e, 4) == 0)};
    tr(e, "%7.2f %-10s V from %d gen %d\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)), a, m.gen);
    DISPATCH(e, P3D_CTL_EV_RESUMED, 0, 0, p3d_ctl_message(e->c, a, &m, e->now));
}

/* Agent a's progress summary: busy 0.1 s, 3x on the slow node, steps and
 * checkpoints that advance (or a stale generation). */
static void progress(env *e, int a)
{
    if (rnd(e, 3) == 0)
        e->ckpt += 1 + (int)rnd(e, 3);
    int gen = e->gen[a] - (rnd(e, 8) == 0);
    p3d_amsg m = {.type = P3D_AM_PROGRESS,
                  .gen = gen,
                  .step = 10 * e->ckpt + 1,
                  .busy_us = (a == e->slow ? 300000 : 100000) + (int)rnd(e, 20000),
                  .ckpt = e->ckpt - 1,
                  .nranks = 4};
    tr(e, "%7.2f %-10s P from %d gen %d busy %d ckpt %d\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)), a, gen,
       m.busy_us, m.ckpt);
    DISPATCH(e, P3D_CTL_EV_PROGRESS, 0, 0, p3d_ctl_message(e->c, a, &m, e->now));
}

static void tick(env *e)
{
    tr(e, "%7.2f %-10s tick\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)));
    DISPATCH(e, P3D_CTL_EV_TICK, 0, 0, p3d_ctl_tick(e->c, e->now));
}

/* An interval: the summaries of the agents still there (each missing one
 * time in skip), then the controller's deadline (its judgement). */
static void progress_round(env *e, unsigned skip)
{
    for (int i = 0; i < e->n; i++)
        if (e->alive[i] && (!skip || rnd(e, skip)))
            progress(e, i);
    if (p3d_ctl_get_state(e->c) == P3D_CTL_RUNNING) {
        /* the transport ticks before every wait: the first tick names
         * the judgement's deadline, the next ones come at it */
        if (p3d_ctl_deadline(e->c) > e->now)
            e->now = p3d_ctl_deadline(e->c);
        tick(e);
    }
}

static void signal_ev(env *e, int sig)
{
    tr(e, "%7.2f %-10s signal %d\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)), sig);
    DISPATCH(e, preempts(e, sig) ? P3D_CTL_EV_PREEMPT : P3D_CTL_EV_SIGNAL, sig == SIGUSR1 ? 0 : sig, 0,
             p3d_ctl_signal(e->c, sig, e->now));
}

/* The leader's node is lost: every node fences its ranks; the lowest
 * node not dead whose par3drun is there succeeds. */
static void leader_lost(env *e)
{
    int old = e->leader, succ = -1;
    for (int i = 0; i < e->n && succ < 0; i++)
        if (i != old && !p3d_ctl_is_dead(e->c, i) && !e->crashed[i])
            succ = i;
    double heard = e->now - rnd(e, 100) / 100.0;
    p3d_ctl_state b = p3d_ctl_get_state(e->c);
    tr(e, "%7.2f %-10s leader %d lost, successor %d, heard %.2f\n", e->now, p3d_ctl_state_name(b), old, succ, heard);
    /* preempting: the job ends anyway, no takeover starts it again */
    int stopping = b == P3D_CTL_STOPPING || b == P3D_CTL_DONE || b == P3D_CTL_PREEMPTING;
    if (old >= 0) {
        e->alive[old] = 0;
        e->crashed[old] = 1;
        e->tk_rej[old] = 0;
    }
    e->losses++;
    int ok = e->failover && old >= 0 && succ >= 0;
    if (ok && !stopping) {
        for (int i = 0; i < e->n; i++) {
            e->alive[i] = 0; /* fenced: each node killed its own ranks */
            e->told_stop[i] = e->killed[i] = e->tk_rej[i] = 0;
        }
        e->alive[succ] = 1;
        e->tk_rej[succ] = 1;
        e->tk_won = 0; /* every leader loss: a new bid */
        if (!e->tk)
            e->tk_members = e->members;
        e->tk = 1;
        if (heard + e->node_timeout + P3D_FENCE_SLACK > e->fence_at)
            e->fence_at = heard + e->node_timeout + P3D_FENCE_SLACK;
    }
    if (ok)
        e->leader = succ;
    DISPATCH(e, P3D_CTL_EV_LEADER_LOST, 0, 0, p3d_ctl_leader_lost(e->c, succ, heard, "its heartbeat stopped", e->now));
    if (old >= 0 && b != P3D_CTL_DONE && !p3d_ctl_is_dead(e->c, old))
        broken(e, "the old leader %d is not dead after its loss", old);
    if (ok && !stopping && p3d_ctl_get_state(e->c) != P3D_CTL_TAKEOVER)
        broken(e, "leader lost in %s: state %s, not takeover", p3d_ctl_state_name(b),
               p3d_ctl_state_name(p3d_ctl_get_state(e->c)));
    if (!ok && !stopping && !(p3d_ctl_get_state(e->c) == P3D_CTL_STOPPING || p3d_ctl_get_state(e->c) == P3D_CTL_DONE))
        broken(e, "leader lost without a successor and the job goes on");
}

/* The backend's election says news (P3D_CTL_ELECT_*). */
static void election(env *e, int news)
{
    p3d_ctl_state b = p3d_ctl_get_state(e->c);
    tr(e, "%7.2f %-10s election %d\n", e->now, p3d_ctl_state_name(b), news);
    DISPATCH(e, P3D_CTL_EV_ELECTION, 0, 0, p3d_ctl_election(e->c, news, "etcd said so", e->now));
    p3d_ctl_state s = p3d_ctl_get_state(e->c);
    int stopped = s == P3D_CTL_STOPPING || s == P3D_CTL_DONE;
    if (!e->elect)
        return;
    if (news == P3D_CTL_ELECT_WON && b == P3D_CTL_TAKEOVER)
        e->tk_won = 1;
    if (news == P3D_CTL_ELECT_LOST && b != P3D_CTL_STOPPING && b != P3D_CTL_DONE) {
        if (!stopped)
            broken(e, "the leadership lapsed in %s and the job goes on (%s)", p3d_ctl_state_name(b),
                   p3d_ctl_state_name(s));
        lease_stops++;
    }
    if (news == P3D_CTL_ELECT_NOT_WON && b == P3D_CTL_TAKEOVER && !stopped)
        broken(e, "not elected and the takeover goes on");
}

/* Node a reconnects to the successor with generation gen. */
static void rejoin(env *e, int a, int gen)
{
    tr(e, "%7.2f %-10s rejoin %d gen %d\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)), a, gen);
    int was_killed = e->killed[a];
    int was_dead = p3d_ctl_is_dead(e->c, a);
    e->killed[a] = 0;
    p3d_ctl_state b = p3d_ctl_get_state(e->c);
    DISPATCH(e, P3D_CTL_EV_REJOIN, 0, 0, p3d_ctl_rejoin(e->c, a, gen, e->now));
    if (e->killed[a]) {
        refused++;
        if (!e->alive[a])
            e->killed[a] = was_killed;
        return;
    }
    e->killed[a] = was_killed;
    if (b == P3D_CTL_TAKEOVER) {
        if (was_dead)
            broken(e, "a dead node %d rejoined", a);
        if (!e->alive[a]) {
            e->alive[a] = 1;
            e->gen[a] = gen;
            e->up_sent[a] = e->done_sent[a] = -1;
        }
        e->tk_rej[a] = 1;
    }
}

/* A node asks to join the running job (the next name; none past MAXA). */
static void join(env *e)
{
    if (e->n >= MAXA)
        return;
    p3d_ctl_state b = p3d_ctl_get_state(e->c);
    int n = e->n, a;
    const char *why = NULL;
    tr(e, "%7.2f %-10s join %s\n", e->now, p3d_ctl_state_name(b), names[n]);
    DISPATCH(e, P3D_CTL_EV_JOIN, 0, 0, a = p3d_ctl_join(e->c, names[n], "10.0.0.9", 8, e->now, &why));
    int ending = b == P3D_CTL_STOPPING || b == P3D_CTL_DONE || b == P3D_CTL_PREEMPTING || b == P3D_CTL_TAKEOVER;
    if (ending && (a != -1 || !why || !*why || e->n != n))
        broken(e, "a join in %s: agent %d, not refused with a reason", p3d_ctl_state_name(b), a);
    if (!ending && (a != n || e->n != n + 1 || !p3d_ctl_joined(e->c, a)))
        broken(e, "a join in %s: agent %d of %d, not accepted", p3d_ctl_state_name(b), a, e->n);
    if (b == P3D_CTL_TAKEOVER && !strstr(why ? why : "", "retry"))
        broken(e, "a join refused during a takeover without a retry: %s", why ? why : "");
    /* no join cell moves the state; in a retirement the completion raised
     * after it may (all gone, the fence passed: the respawn a tick would
     * have made) */
    int retiring = b == P3D_CTL_REPLACING || b == P3D_CTL_SHRINKING || b == P3D_CTL_GROWING;
    p3d_ctl_state now = p3d_ctl_get_state(e->c);
    if (now != b && !(retiring && (now == P3D_CTL_RESTARTING || now == P3D_CTL_STOPPING)))
        broken(e, "a join moved the state %s -> %s", p3d_ctl_state_name(b),
               p3d_ctl_state_name(p3d_ctl_get_state(e->c)));
}

/* A node not rejoined yet, at random (-1 none), and the generation it
 * holds (now and then a stale one). */
static int pick_rejoin(env *e, int *gen)
{
    int k = 0, idx[MAXA];
    for (int i = 0; i < e->n; i++)
        if (!e->tk_rej[i] && !e->crashed[i])
            idx[k++] = i;
    if (!k)
        return -1;
    int a = idx[rnd(e, (unsigned)k)];
    *gen = p3d_ctl_restarts(e->c) - (rnd(e, 6) == 0);
    return a;
}

static int pick_alive(env *e)
{
    int k = 0, idx[MAXA];
    for (int i = 0; i < e->n; i++)
        if (e->alive[i])
            idx[k++] = i;
    return k ? idx[rnd(e, (unsigned)k)] : -1;
}

/* One fault, or one ordinary event, at random. */
static void join_late(env *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->late[i]) {
            tr(e, "%7.2f %-10s spare %d joins\n", e->now, p3d_ctl_state_name(p3d_ctl_get_state(e->c)), i);
            e->late[i] = 0;
            return;
        }
}

static void random_event(env *e)
{
    if (e->elastic && e->dp < e->full_dp && rnd(e, 6) == 0)
        join_late(e); /* a shrunk job; only here: the other sequences' stream is that of before */
    int a = pick_alive(e);
    if (model_join && rnd(e, 10) == 0) {
        join(e);
        return;
    }
    e->now += rnd(e, 4) == 0 ? rnd(e, 8) : rnd(e, 100) / 100.0;
    switch (rnd(e, 24)) {
    case 23:
        /* the election's news: in a takeover mostly a win (unless etcd
         * is on the other side of a partition) */
        if (e->elect || rnd(e, 8) == 0) {
            unsigned k = rnd(e, 8);
            int news = k < 5 ? P3D_CTL_ELECT_WON : k < 7 ? P3D_CTL_ELECT_NOT_WON : P3D_CTL_ELECT_LOST;
            if (!(e->no_win && news == P3D_CTL_ELECT_WON))
                election(e, news);
        }
        break;
    case 22:
        if (a >= 0)
            resumed(e, a);
        break;
    case 19:
        if (rnd(e, 3) == 0 && (e->failover || rnd(e, 4) == 0))
            leader_lost(e);
        break;
    case 20:
    case 21: {
        int g = 0, r = pick_rejoin(e, &g);
        if (r < 0 && rnd(e, 2))
            r = (int)rnd(e, (unsigned)e->n); /* a dead one, or one already in */
        if (r >= 0 && (p3d_ctl_get_state(e->c) == P3D_CTL_TAKEOVER || rnd(e, 4) == 0))
            rejoin(e, r, g);
        break;
    }
    case 16:
    case 17:
    case 18: /* an interval: every agent's summary (those still there) */ progress_round(e, 4); break;
    case 0:
    case 1:
        if (a >= 0)
            msg(e, a, P3D_AM_UP, e->gen[a] - (int)rnd(e, 2), 0, 0, 0);
        break;
    case 2:
    case 3:
        if (a >= 0) {
            /* the program's own bug (the same error, at step 3) or a node's */
            e->f_err = rnd(e, 2) ? "ValueError: bad batch" : "";
            e->f_step = rnd(e, 2) ? 3 : -1;
            msg(e, a, P3D_AM_FAIL, e->gen[a], e->rank_node[a] ? (int)rnd(e, 4) : -1, 3, rnd(e, 2) ? 0 : 9);
        }
        break;
    case 4:
        if (a >= 0)
            msg(e, a, P3D_AM_DONE, e->gen[a], 0, 0, 0);
        break;
    case 5:
    case 6:
        if (a >= 0)
            gone(e, a, e->told_stop[a] && rnd(e, 2));
        break;
    case 7:
        if (e->health_pending || rnd(e, 3) == 0)
            health(e, 1);
        break;
    case 8:
        if (rnd(e, 3) == 0)
            signal_ev(e, rnd(e, 2) ? SIGTERM : SIGUSR1);
        break;
    case 9:
        if (a >= 0 && rnd(e, 3) == 0)
            msg(e, a, P3D_AM_SIGNAL, 0, 0, 0, e->preempt && rnd(e, 2) ? SIGUSR1 : SIGTERM);
        break;
    case 10:
        if (rnd(e, 6) == 0) {
            tr(e, "%7.2f abort\n", e->now);
            DISPATCH(e, P3D_CTL_EV_ABORT, 0, 2, p3d_ctl_abort(e->c, "the transport failed", 2, e->now));
        }
        break;
    case 11: e->respawn_fail = rnd(e, 4) == 0; break;
    case 12:
        if (p3d_ctl_get_state(e->c) != P3D_CTL_STARTING && a >= 0) {
            tr(e, "%7.2f mark-dead %d (ignored past the start)\n", e->now, a);
            DISPATCH(e, P3D_CTL_EV_MARK_DEAD, 0, 0, p3d_ctl_mark_dead(e->c, a));
        }
        break;
    default:
        if (rnd(e, 2)) {
            double d = p3d_ctl_deadline(e->c);
            if (d > e->now)
                e->now = d;
        }
        tick(e);
        break;
    }
}

/* What a cluster with no more faults does next; 0 when it has nothing to
 * do and the controller has no deadline either (stuck). */
static int cooperative_event(env *e)
{
    p3d_ctl_state s = p3d_ctl_get_state(e->c);
    if (e->health_pending && s == P3D_CTL_CHECKING) {
        health(e, 0);
        return 1;
    }
    for (int i = 0; i < e->n; i++)
        if (e->alive[i] && e->killed[i]) {
            gone(e, i, 0);
            return 1;
        }
    if (s == P3D_CTL_TAKEOVER)
        for (int i = 0; i < e->n; i++)
            if (!e->tk_rej[i] && !e->crashed[i] && !p3d_ctl_is_dead(e->c, i)) {
                rejoin(e, i, p3d_ctl_restarts(e->c));
                return 1;
            }
    if (s == P3D_CTL_TAKEOVER && e->elect && !e->tk_won && !e->no_win) {
        election(e, P3D_CTL_ELECT_WON);
        return 1;
    }
    for (int i = 0; i < e->n; i++)
        if (e->alive[i] && e->told_stop[i]) {
            gone(e, i, 1);
            return 1;
        }
    for (int i = 0; i < e->n; i++)
        if (e->alive[i] && e->up_sent[i] != e->gen[i]) {
            msg(e, i, P3D_AM_UP, e->gen[i], 0, 0, 0);
            return 1;
        }
    if (s == P3D_CTL_PREEMPTING)
        for (int i = 0; i < e->n; i++)
            if (e->alive[i] && e->told_ckpt[i] == 1) {
                /* the ranks checkpoint (odd nodes) or end after it (even) */
                e->told_ckpt[i] = 2;
                if (i % 2) {
                    e->ckpt++;
                    p3d_amsg m = {.type = P3D_AM_PROGRESS,
                                  .gen = e->gen[i],
                                  .step = 10 * e->ckpt,
                                  .busy_us = 1000,
                                  .ckpt = e->ckpt,
                                  .nranks = 4};
                    tr(e, "%7.2f %-10s P from %d ckpt %d (preempted)\n", e->now, p3d_ctl_state_name(s), i, m.ckpt);
                    DISPATCH(e, P3D_CTL_EV_PROGRESS, 0, 0, p3d_ctl_message(e->c, i, &m, e->now));
                } else {
                    msg(e, i, P3D_AM_DONE, e->gen[i], 0, 0, 0);
                }
                return 1;
            }
    if (s == P3D_CTL_RUNNING && e->elastic && e->dp < e->full_dp)
        for (int i = 0; i < e->n; i++)
            if (e->late[i]) {
                join_late(e); /* a spare joins the shrunk job: it may grow */
                return 1;
            }
    if (s == P3D_CTL_RUNNING && e->intervals > 0) {
        /* the ranks run a few intervals before they are done */
        e->intervals--;
        progress_round(e, 0);
        return 1;
    }
    if (s == P3D_CTL_RUNNING)
        for (int i = 0; i < e->n; i++)
            if (e->alive[i] && e->done_sent[i] != e->gen[i]) {
                msg(e, i, P3D_AM_DONE, e->gen[i], 0, 0, 0);
                return 1;
            }
    double d = p3d_ctl_deadline(e->c);
    if (d <= 0)
        return 0;
    if (d > e->now)
        e->now = d;
    tick(e);
    return 1;
}

static void check_code(env *e)
{
    int code = p3d_ctl_code(e->c), ok;
    switch (e->stop_cause) {
    case P3D_CTL_EV_SIGNAL:
    case P3D_CTL_EV_NODE_SIG: ok = code == 128 + e->stop_sig; break;
    case P3D_CTL_EV_ABORT: ok = code == e->stop_code; break;
    case P3D_CTL_EV_FAIL: ok = code == e->fail_code || code == P3D_EXIT_LOST; break;
    case P3D_CTL_EV_DONE:
    case P3D_CTL_EV_UP: ok = code == 0; break;
    case P3D_CTL_EV_ELECTION: /* not elected, or the leadership lapsed */ ok = code == P3D_EXIT_LOST; break;
    case P3D_CTL_EV_TICK: ok = code == 124 || code == P3D_EXIT_LOST || code == 0 || code == e->fail_code; break;
    default: /* GONE, HEALTH: a loss, or the last agent's work was done */
        ok = code == P3D_EXIT_LOST || code == 0 || code == e->fail_code;
        break;
    }
    /* REPLACING x all-gone respawns after any event (a SIGUSR1 too): a failed respawn
     * stops the job with P3D_EXIT_LOST, whatever the event was */
    if (e->respawn_failed && code == P3D_EXIT_LOST)
        ok = 1;
    /* a takeover acts (takeover-ready) after whatever event ends its wait (the
     * last node rejoining, or any event past its fence and deadline); one
     * that cannot place (no spare for the old leader's ranks) ends the job
     * with P3D_EXIT_LOST */
    if (e->stop_in_takeover && code == P3D_EXIT_LOST)
        ok = 1;
    if (code == 124 && e->timeout <= 0)
        ok = 0;
    /* a stop np_check found right (whichever event brought the restart) */
    if (e->np_stopped && code == NP_CODE)
        ok = 1;
    /* a verdict's stop (the window closed on a tick, or on the last
     * node's done) ends with the failure's code */
    if (e->verdict_stop && (code == e->fail_code || code == P3D_EXIT_LOST))
        ok = 1;
    /* preempted: that code, but for an abort's own or a lapsed leadership */
    if (e->pre_stop)
        ok = code == P3D_EXIT_PREEMPTED || (e->stop_cause == P3D_CTL_EV_ABORT && code == e->stop_code) ||
             (e->stop_cause == P3D_CTL_EV_ELECTION && code == P3D_EXIT_LOST);
    if (!ok)
        broken(e, "exit code %d after a stop caused by %s", code,
               e->stop_cause >= 0 ? p3d_ctl_event_name((p3d_ctl_event)e->stop_cause) : "nothing");
}

/* Elastic sequences (drawn only there: the others' random stream is that
 * of before): every node with ranks holds one replica; --min-dp 1 to the
 * full width; --grow-wait 0-3 s; spares can refill a shrunk job. */
static void elastic_cfg(env *e, int spares, p3d_ctl_cfg *cfg, p3d_ctl_ops *ops)
{
    e->elastic = 1;
    e->full_dp = e->dp = e->n - spares;
    e->min_dp = 1 + (int)rnd(e, (unsigned)e->full_dp);
    e->grow_wait = rnd(e, 4);
    e->shrink_ckpt = -1;
    e->room_since = -1;
    cfg->full_dp = e->full_dp;
    cfg->min_dp = e->min_dp;
    cfg->grow_wait = e->grow_wait;
    ops->grow_room = o_grow_room;
    ops->grow = o_grow;
    for (int i = e->full_dp; i < e->n; i++)
        e->late[i] = rnd(e, 4) != 0; /* joins later (par3drun --join) */
    /* restarts enough for a shrink and a grow, mostly; a few intervals
     * of running at the end, where a spare joins a shrunk job */
    e->intervals = 2 + (int)rnd(e, 4);
    e->max_restarts = cfg->max_restarts = 1 + (int)rnd(e, 4);
    if (!ops->replace && rnd(e, 2)) {
        ops->replace = o_replace;
        ops->respawn = o_respawn;
    }
}

static void setup(env *e, int seed)
{
    memset(e, 0, sizeof *e);
    e->f_step = -1;
    e->seed = seed;
    e->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0x100000001b3ull + 1);
    for (int k = 0; k < 4; k++)
        rnd(e, 1);
    e->n = 2 + (int)rnd(e, 4);
    int spares = (int)rnd(e, (unsigned)(e->n < 3 ? e->n : 3));
    e->leader = rnd(e, 3) == 0 ? 0 : -1;
    e->failover = (int)rnd(e, 2);
    if (e->failover)
        e->leader = (int)rnd(e, (unsigned)e->n);
    e->node_timeout = 1 + rnd(e, 4);
    e->max_restarts = (int)rnd(e, 4);
    e->timeout = rnd(e, 4) == 0 ? 5 + rnd(e, 60) : 0;
    e->stop_cause = -1;
    e->slow = rnd(e, 2) ? (int)rnd(e, (unsigned)e->n) : -1;
    e->intervals = (int)rnd(e, 6);
    for (int i = 0; i < e->n; i++) {
        e->rank_node[i] = i < e->n - spares;
        e->alive[i] = 1;
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    e->elect = e->failover && rnd(e, 2);
    /* from the seed, not the random stream: the sequences stay those of
     * before the rule (with max_np 0 their fingerprint is unchanged) */
    e->max_np = seed % 4;
    e->np_step = e->np_ckpt = -1;
    e->max_job = (seed / 4) % 4;
    e->f_step = -1;
    p3d_ctl_cfg cfg = {.nagents = e->n,
                       .names = names,
                       .nranks = 4 * e->n,
                       .max_restarts = e->max_restarts,
                       .max_no_progress = e->max_np,
                       .no_progress_code = NP_CODE,
                       .max_job_restarts = e->max_job,
                       .fault_window = (seed / 16) % 3,
                       .grace = rnd(e, 4),
                       .timeout = e->timeout,
                       .leader = e->leader,
                       .health_timeout = 1 + rnd(e, 5),
                       .failover = e->failover,
                       .node_timeout = e->node_timeout,
                       .elect = e->elect,
                       .elect_wait = e->node_timeout + 4,
                       .verbose = seed % 2};
    /* preemption: from the flag and the seed, not the random stream */
    e->preempt = model_preempt;
    e->preempt_term = model_preempt && seed % 3 == 0;
    e->grace = cfg.grace;
    cfg.preempt_sig = e->preempt ? SIGUSR1 : 0;
    cfg.preempt_term = e->preempt_term;
    if (rnd(e, 4)) {
        cfg.progress_interval = 0.2 + rnd(e, 5) / 10.0;
        cfg.slow_factor = 1.3;
        cfg.slow_windows = 1 + (int)rnd(e, 3);
        cfg.slow_replace = (int)rnd(e, 2);
        cfg.slow_wait = rnd(e, 6);
    }
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .spares_left = o_spares_left,
                       .join_accept = o_join_accept,
                       .join_refuse = o_join_refuse};
    if (rnd(e, 5)) {
        ops.replace = o_replace;
        ops.respawn = o_respawn;
    }
    if (rnd(e, 3))
        ops.health = o_health;
    if (model_elastic)
        elastic_cfg(e, spares, &cfg, &ops);
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
    /* the nodes with ranks do the same work (one group), or two halves */
    int group[MAXA];
    int halves = (int)rnd(e, 2);
    for (int i = 0; i < e->n; i++)
        group[i] = e->rank_node[i] ? (halves ? i % 2 : 0) : -1;
    p3d_ctl_set_peers(e->c, group, NULL);
    /* before the start: nodes that failed their check (never started);
     * the transport starts a job only when some node is left to run it */
    for (int i = 1; i < e->n; i++)
        if (i != e->leader && rnd(e, 12) == 0) {
            e->alive[i] = 0;
            tr(e, "   0.00 starting   mark-dead %d\n", i);
            DISPATCH(e, P3D_CTL_EV_MARK_DEAD, 0, 0, p3d_ctl_mark_dead(e->c, i));
        }
    e->members = e->n - ndead_now(e);
}

/* Faults stop: the controller must end within a bounded number of events. */
static void finish(env *e)
{
    int steps = 0;
    while (p3d_ctl_get_state(e->c) != P3D_CTL_DONE) {
        if (++steps > 60 * e->n + 60)
            broken(e, "not DONE %d events after the last fault (state %s)", steps,
                   p3d_ctl_state_name(p3d_ctl_get_state(e->c)));
        if (!cooperative_event(e))
            broken(e, "stuck: state %s, no deadline, nothing left for the agents to do",
                   p3d_ctl_state_name(p3d_ctl_get_state(e->c)));
    }
    check_code(e);
    /* DONE ignores whatever still comes */
    for (int k = 0; k < 12; k++)
        random_event(e);
    if (p3d_ctl_get_state(e->c) != P3D_CTL_DONE)
        broken(e, "left DONE");
    slow_seen += (unsigned long)p3d_ctl_slow_count(e->c);
    doubles += e->losses >= 2;
    p3d_ctl_free(e->c);
}

/* Seed 0: the sequence that hung before the table. 3 agents, node 2 a
 * spare, one restart: everyone up, rank 1 fails, the check fails only on
 * the spare. The failed rank must restart in place and the job end 0. */
static void seed_zero(env *e)
{
    memset(e, 0, sizeof *e);
    e->f_step = -1;
    e->n = 3;
    e->leader = -1;
    e->max_restarts = 1;
    e->stop_cause = -1;
    e->rng = 1;
    for (int i = 0; i < 3; i++) {
        e->rank_node[i] = i < 2;
        e->alive[i] = 1;
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    p3d_ctl_cfg cfg = {
        .nagents = 3, .names = names, .nranks = 8, .max_restarts = 1, .grace = 1, .leader = -1, .health_timeout = 3};
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .replace = o_replace,
                       .respawn = o_respawn,
                       .health = o_health};
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
    for (int i = 0; i < 3; i++)
        msg(e, i, P3D_AM_UP, 0, 0, 0, 0);
    msg(e, 0, P3D_AM_FAIL, 0, 1, 3, 0);
    while (!e->health_pending)
        e->health_pending = o_health(e, NULL) == 0; /* o_health may refuse at random: not here */
    unsigned char bad[3] = {0, 0, 1};
    e->health_pending = 0;
    DISPATCH(e, P3D_CTL_EV_HEALTH, 0, 0, p3d_ctl_health_result(e->c, bad, 1));
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RESTARTING);
    assert_int_equal(p3d_ctl_restarts(e->c), 1);
    int steps = 0;
    while (p3d_ctl_get_state(e->c) != P3D_CTL_DONE && steps++ < 100)
        assert_true(cooperative_event(e));
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(e->c), 0);
    p3d_ctl_free(e->c);
}


/* Every agent lost and none replaced, in STARTING (variant 0), RUNNING (1)
 * and RESTARTING (2): the transport says each lost node ran no rank, so
 * nothing is placed again and the last loss leaves nobody. No transport
 * of ours does that, and the random sequences never get there; the table
 * must still end the job (ALL_GONE), not wait for an agent that is gone. */
static void all_gone_case(env *e, int variant)
{
    memset(e, 0, sizeof *e);
    e->f_step = -1;
    e->n = 2;
    e->leader = -1;
    e->max_restarts = 2;
    e->stop_cause = -1;
    e->seed = -1 - variant;
    e->rng = 11 + (uint64_t)variant;
    for (int i = 0; i < 2; i++) {
        e->alive[i] = 1; /* rank_node 0: "it ran no rank" */
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    p3d_ctl_cfg cfg = {
        .nagents = 2, .names = names, .nranks = 8, .max_restarts = 2, .grace = 1, .leader = -1, .health_timeout = 3};
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .replace = o_replace,
                       .respawn = o_respawn};
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
    for (int i = 0; variant >= 1 && i < 2; i++)
        msg(e, i, P3D_AM_UP, 0, 0, 0, 0);
    if (variant == 2)
        msg(e, 0, P3D_AM_FAIL, 0, 1, 3, 0); /* no --health-check: a restart in place */
    assert_int_equal(p3d_ctl_get_state(e->c), variant == 0   ? P3D_CTL_STARTING
                                              : variant == 1 ? P3D_CTL_RUNNING
                                                             : P3D_CTL_RESTARTING);
    gone(e, 0, 0);
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(e->c), P3D_EXIT_LOST);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "every node's agent is gone"));
    p3d_ctl_free(e->c);
}

/* A progress summary of step 5, checkpoint 4 from agent a (the same every
 * time: no progress). */
static void same_progress(env *e, int a)
{
    p3d_amsg m = {
        .type = P3D_AM_PROGRESS, .gen = p3d_ctl_restarts(e->c), .step = 5, .busy_us = 100000, .ckpt = 4, .nranks = 4};
    DISPATCH(e, P3D_CTL_EV_PROGRESS, 0, 0, p3d_ctl_message(e->c, a, &m, e->now));
}

/* Directed: no progress with a second fault. --max-no-progress 2; two
 * nodes with ranks and a spare. A rank fails (restart 1, in place); the
 * same step and checkpoint again, then node 1 is lost (restart 2, on the
 * spare: the first without progress); the same again and a rank fails:
 * that restart would be the second in a row without progress, so the job
 * stops with NP_CODE after 2 restarts although --max-restarts has 3 left. */
static void no_progress_case(env *e)
{
    memset(e, 0, sizeof *e);
    e->f_step = -1;
    e->n = 3;
    e->leader = -1;
    e->max_restarts = 5;
    e->max_np = 2;
    e->np_step = e->np_ckpt = -1;
    e->stop_cause = -1;
    e->seed = -10;
    e->rng = 99;
    for (int i = 0; i < 3; i++) {
        e->rank_node[i] = i < 2;
        e->alive[i] = 1;
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    p3d_ctl_cfg cfg = {.nagents = 3,
                       .names = names,
                       .nranks = 8,
                       .max_restarts = 5,
                       .grace = 1,
                       .leader = -1,
                       .health_timeout = 3,
                       .max_no_progress = 2,
                       .no_progress_code = NP_CODE};
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .replace = o_replace,
                       .respawn = o_respawn,
                       .spares_left = o_spares_left};
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 200 && p3d_ctl_get_state(e->c) != P3D_CTL_RUNNING; k++)
            if (!cooperative_event(e))
                break;
        assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RUNNING);
        assert_int_equal(p3d_ctl_restarts(e->c), round);
        same_progress(e, 0);
        if (round == 1)
            gone(e, 1, 0); /* the second fault: a node lost during the count */
        else
            msg(e, 0, P3D_AM_FAIL, round, 1, 3, 0);
    }
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_int_equal(p3d_ctl_restarts(e->c), 2);
    assert_int_equal(p3d_ctl_replaced(e->c), 1);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "no progress: 2 restarts in a row"));
    assert_int_equal(p3d_ctl_code(e->c), NP_CODE); /* decided at the stop */
    assert_true(e->np_stopped);                    /* and found due by the model */
    finish(e);                                     /* DONE with that code (check_code), then freed */
}

/* A preemption case's controller: n nodes with ranks, failover as asked
 * (leader 0), grace 5 s, the preempt signal SIGUSR1 (term: SIGTERM too);
 * every node up and reporting checkpoint 4, the job RUNNING. */
static void preempt_setup(env *e, int n, int failover, int term, int seed)
{
    memset(e, 0, sizeof *e);
    e->n = n;
    e->leader = failover ? 0 : -1;
    e->failover = failover;
    e->node_timeout = 1;
    e->max_restarts = 3;
    e->stop_cause = -1;
    e->seed = seed;
    e->rng = (uint64_t)(1000 - seed);
    e->preempt = 1;
    e->preempt_term = term;
    e->grace = 5;
    e->np_step = e->np_ckpt = -1;
    for (int i = 0; i < n; i++) {
        e->rank_node[i] = 1;
        e->alive[i] = 1;
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    p3d_ctl_cfg cfg = {.nagents = n,
                       .names = names,
                       .nranks = 4 * n,
                       .max_restarts = 3,
                       .grace = 5,
                       .leader = e->leader,
                       .health_timeout = 3,
                       .failover = failover,
                       .node_timeout = 1,
                       .preempt_sig = SIGUSR1,
                       .preempt_term = term};
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .replace = o_replace,
                       .respawn = o_respawn,
                       .spares_left = o_spares_left};
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
    e->members = n;
    for (int i = 0; i < n; i++)
        msg(e, i, P3D_AM_UP, 0, 0, 0, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RUNNING);
    e->ckpt = 4;
    for (int i = 0; i < n; i++) {
        p3d_amsg m = {.type = P3D_AM_PROGRESS, .gen = 0, .step = 41, .busy_us = 1000, .ckpt = 4, .nranks = 4};
        DISPATCH(e, P3D_CTL_EV_PROGRESS, 0, 0, p3d_ctl_message(e->c, i, &m, e->now));
    }
}

/* Node a reports checkpoint ckpt of generation 0. */
static void preempt_ckpt(env *e, int a, int ckpt)
{
    p3d_amsg m = {.type = P3D_AM_PROGRESS, .gen = 0, .step = 10 * ckpt, .busy_us = 1000, .ckpt = ckpt, .nranks = 4};
    DISPATCH(e, P3D_CTL_EV_PROGRESS, 0, 0, p3d_ctl_message(e->c, a, &m, e->now));
}

/* Elastic, directed: n agents, the first `ranked` hold one replica each,
 * the rest spares that join later; --min-dp min, --grow-wait 30. Every
 * agent up: RUNNING. */
static void elastic_setup(env *e, int n, int ranked, int min, int failover)
{
    memset(e, 0, sizeof *e);
    e->n = n;
    e->leader = failover ? 0 : -1;
    e->failover = failover;
    e->node_timeout = 1;
    e->max_restarts = 5;
    e->stop_cause = -1;
    e->rng = 4242;
    e->np_step = e->np_ckpt = -1;
    e->elastic = 1;
    e->full_dp = e->dp = ranked;
    e->min_dp = min;
    e->grow_wait = 30;
    e->shrink_ckpt = -1;
    e->room_since = -1;
    e->grace = 5;
    for (int i = 0; i < n; i++) {
        e->rank_node[i] = i < ranked;
        e->late[i] = i >= ranked;
        e->alive[i] = 1;
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    p3d_ctl_cfg cfg = {.nagents = n,
                       .names = names,
                       .nranks = 4 * n,
                       .max_restarts = 5,
                       .grace = 5,
                       .leader = e->leader,
                       .health_timeout = 3,
                       .failover = failover,
                       .node_timeout = 1,
                       .preempt_sig = SIGUSR1,
                       .full_dp = ranked,
                       .min_dp = min,
                       .grow_wait = 30,
                       .progress_interval = 1,
                       .slow_factor = 1.3,
                       .slow_windows = 1};
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .replace = o_replace,
                       .respawn = o_respawn,
                       .spares_left = o_spares_left,
                       .grow_room = o_grow_room,
                       .grow = o_grow};
    e->preempt = 1;
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
    e->members = n;
    for (int i = 0; i < n; i++)
        msg(e, i, P3D_AM_UP, 0, 0, 0, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RUNNING);
}

/* Every agent told to retire goes, and every agent restarted comes up:
 * until the state is s (a bounded number of events). */
static void elastic_until(env *e, p3d_ctl_state s)
{
    for (int k = 0; k < 40 && p3d_ctl_get_state(e->c) != s; k++)
        if (!cooperative_event(e))
            break;
    assert_int_equal(p3d_ctl_get_state(e->c), s);
}

static void elastic_width(env *e, int want)
{
    int dp, full, min;
    p3d_ctl_width(e->c, &dp, &full, &min);
    assert_int_equal(dp, want);
}

/* Node a reports checkpoint ckpt in the generation it runs. */
static void elastic_ckpt(env *e, int a, int ckpt)
{
    p3d_amsg m = {
        .type = P3D_AM_PROGRESS, .gen = e->gen[a], .step = 10 * ckpt, .busy_us = 1000, .ckpt = ckpt, .nranks = 4};
    DISPATCH(e, P3D_CTL_EV_PROGRESS, 0, 0, p3d_ctl_message(e->c, a, &m, e->now));
}

/* 5 agents, 4 replicas, --min-dp 2: node 3 lost, shrunk to 3 and running
 * again; the late spare 4 joins. */
static void elastic_shrunk(env *e, int failover)
{
    elastic_setup(e, 5, 4, 2, failover);
    e->now = 1;
    gone(e, 3, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_SHRINKING);
    elastic_until(e, P3D_CTL_RUNNING);
    elastic_width(e, 3);
    join_late(e);
}

static void elastic_end(env *e, int code)
{
    elastic_until(e, P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(e->c), code);
    finish(e);
}

/* Random second faults during a grow: a shrunk job grows at a
 * checkpoint, then anything may happen (seed's stream). */
static void elastic_grow_random(env *e, int seed)
{
    elastic_shrunk(e, seed % 2);
    e->rng = 0x2545f4914f6cdd1dull ^ (uint64_t)seed * 0x9e3779b97f4a7c15ull;
    e->seed = seed;
    e->ckpt = 7;
    elastic_ckpt(e, 0, 7);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_GROWING);
    int faults = 1 + (int)rnd(e, 12);
    for (int k = 0; k < faults && p3d_ctl_get_state(e->c) != P3D_CTL_DONE; k++)
        random_event(e);
    finish(e);
}

/* Directed: the second faults of a width change. */
static void elastic_cases(env *e)
{
    for (int seed = 1; seed <= 2000; seed++)
        elastic_grow_random(e, seed);
    /* a loss with no spare: SHRINKING; a second loss during it shrinks
     * again; at exactly D a third loss stops the job (exit 1), naming D */
    elastic_setup(e, 4, 4, 2, 0);
    e->now = 1;
    gone(e, 3, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_SHRINKING);
    elastic_width(e, 3);
    gone(e, 2, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_SHRINKING);
    elastic_width(e, 2);
    elastic_until(e, P3D_CTL_RUNNING);
    assert_int_equal(p3d_ctl_shrinks(e->c), 2);
    assert_string_equal(p3d_ctl_width_history(e->c), "dp 4 -> 3 (node n3 lost) -> 2 (node n2 lost)");
    e->now = 2;
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "below --min-dp 2"));
    elastic_end(e, P3D_EXIT_LOST);

    /* the scheduler's warning during a shrink: nothing runs to checkpoint */
    elastic_setup(e, 4, 4, 2, 0);
    gone(e, 3, 0);
    signal_ev(e, SIGUSR1);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    elastic_end(e, P3D_EXIT_PREEMPTED);

    /* a grow at the first checkpoint newer than the shrink (not before:
     * a joined spare alone waits); a failure of the old generation
     * during the grow means nothing; back at full width */
    elastic_shrunk(e, 0);
    e->now = 3;
    tick(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RUNNING);
    elastic_ckpt(e, 0, 7);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_GROWING);
    msg(e, 1, P3D_AM_FAIL, e->gen[1], 4, 3, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_GROWING);
    elastic_until(e, P3D_CTL_RUNNING);
    elastic_width(e, 4);
    assert_int_equal(p3d_ctl_grows(e->c), 1);
    assert_string_equal(p3d_ctl_width_history(e->c), "dp 4 -> 3 (node n3 lost) -> 4 (grown at step 70)");
    elastic_end(e, 0);

    /* no checkpoint: the grow comes --grow-wait after the spare joined,
     * not before; a preemption during it stops the job */
    elastic_shrunk(e, 0);
    e->now = 3;
    tick(e);
    e->now = 32.5;
    tick(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RUNNING);
    e->now = 33.5;
    tick(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_GROWING);
    signal_ev(e, SIGUSR1);
    elastic_end(e, P3D_EXIT_PREEMPTED);

    /* a loss during the grow: no spare for it, so it shrinks again */
    elastic_shrunk(e, 0);
    elastic_ckpt(e, 0, 7);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_GROWING);
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_SHRINKING);
    elastic_until(e, P3D_CTL_RUNNING);
    elastic_width(e, 3);
    elastic_end(e, 0);

    /* the leader lost after a shrink: the successor keeps the width's
     * figures and, with no spare for the leader's replica, shrinks to D */
    elastic_shrunk(e, 1);
    e->late[4] = 1; /* the spare is not there yet */
    e->now = 5;
    leader_lost(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_TAKEOVER);
    elastic_until(e, P3D_CTL_RUNNING);
    int dp, full, min;
    p3d_ctl_width(e->c, &dp, &full, &min);
    assert_true(dp == 2 && full == 4 && min == 2);
    elastic_end(e, 0);
}

/* Directed: preemption with second faults. */
static void preempt_cases(env *e)
{
    int ck;
    /* 1. A node lost during the wait: not replaced, the others' checkpoints
     *    end it; the checkpoint every node holds stays the old one. */
    preempt_setup(e, 3, 0, 0, -20);
    e->now = 1;
    signal_ev(e, SIGUSR1);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_PREEMPTING);
    assert_true(e->told_ckpt[0] && e->told_ckpt[1] && e->told_ckpt[2]);
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_PREEMPTING);
    assert_true(p3d_ctl_is_dead(e->c, 1));
    preempt_ckpt(e, 0, 5);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_PREEMPTING);
    preempt_ckpt(e, 2, 5);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_int_equal(p3d_ctl_restarts(e->c), 0);
    assert_int_equal(p3d_ctl_replaced(e->c), 0);
    assert_true(p3d_ctl_preempted(e->c, &ck));
    assert_int_equal(ck, 4); /* node 1 never wrote step 5 */
    assert_non_null(strstr(p3d_ctl_summary(e->c), "preempted (SIGUSR1 to par3drun)"));
    finish(e);
    /* 2. A warning during a takeover: no generation runs, the job ends now. */
    preempt_setup(e, 3, 1, 0, -21);
    e->now = 1;
    leader_lost(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_TAKEOVER);
    msg(e, 1, P3D_AM_SIGNAL, 0, 0, 0, SIGUSR1); /* a node heard it */
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_int_equal(p3d_ctl_code(e->c), P3D_EXIT_PREEMPTED);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "to node n1"));
    finish(e);
    /* 3. The grace runs out while node 1 still writes: a tick before it
     *    changes nothing, the one at it stops the ranks with SIGTERM. */
    preempt_setup(e, 2, 0, 0, -22);
    e->now = 10;
    signal_ev(e, SIGUSR1);
    preempt_ckpt(e, 0, 6);
    e->now = 12;
    tick(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_PREEMPTING);
    assert_true(p3d_ctl_deadline(e->c) <= 15.0);
    e->now = 15;
    tick(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_int_equal(p3d_ctl_code(e->c), P3D_EXIT_PREEMPTED);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "--grace ran out before 1 node (n1)"));
    assert_true(e->told_stop[0] && e->told_stop[1]);
    finish(e);
    /* 4. --preempt-on-term: SIGTERM preempts, a second one stops at once. */
    preempt_setup(e, 2, 0, 1, -23);
    signal_ev(e, SIGTERM);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_PREEMPTING);
    signal_ev(e, SIGUSR1); /* the warning again: nothing new */
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_PREEMPTING);
    signal_ev(e, SIGTERM);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_int_equal(p3d_ctl_code(e->c), P3D_EXIT_PREEMPTED);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "second signal"));
    finish(e);
}

/* A partition: nodes side[i] = 1 lose the leader (node 0) and elect node
 * first among them; the leader loses them. Each side has its own
 * controller (env a: the leader's, env b: the successor's). The side with
 * more than half of the nodes may go on; the other stops with exit 1;
 * never both run ranks again. */
static void partition_case(env *ea, env *eb, int seed)
{
    setup(ea, seed);
    int n = ea->n;
    if (ea->leader < 0 || !ea->failover)
        goto plain;
    /* everyone up first */
    for (int i = 0; i < n; i++)
        if (ea->alive[i])
            msg(ea, i, P3D_AM_UP, 0, 0, 0, 0);
    if (p3d_ctl_get_state(ea->c) != P3D_CTL_RUNNING)
        goto plain;
    int side[MAXA] = {0}, nb = 0, first = -1, members = ea->members;
    for (int i = 0; i < n; i++)
        if (i != ea->leader && ea->alive[i] && rnd(ea, 2)) {
            side[i] = 1;
            nb++;
            if (first < 0)
                first = i;
        }
    if (!nb)
        goto plain;
    /* the successor's side: a controller of its own, as a successor
     * builds it, told the leader is lost */
    *eb = *ea;
    eb->seed = -seed;
    eb->trace[0] = 0;
    p3d_ctl_cfg cfg = {.nagents = n,
                       .names = names,
                       .nranks = 4 * n,
                       .max_restarts = ea->max_restarts,
                       .grace = 1,
                       .leader = ea->leader,
                       .health_timeout = 2,
                       .failover = 1,
                       .node_timeout = ea->node_timeout,
                       .elect = ea->elect,
                       .elect_wait = ea->node_timeout + 4};
    /* under an election etcd is on one side: the leader's (it keeps its
     * lease; the successor is never elected) or the successor's (the
     * leader's lease lapses) */
    int etcd_with_leader = ea->elect && rnd(ea, 2);
    eb->no_win = etcd_with_leader;
    p3d_ctl_ops ops = {.ctx = eb,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .spares_left = o_spares_left,
                       .replace = o_replace,
                       .respawn = o_respawn};
    eb->c = p3d_ctl_new(&cfg, &ops, ea->now);
    assert_non_null(eb->c);
    for (int i = 0; i < n; i++) {
        if (p3d_ctl_is_dead(ea->c, i))
            p3d_ctl_mark_dead(eb->c, i);
        eb->alive[i] = 0;
        eb->crashed[i] = !side[i]; /* the other side never reaches it */
        eb->tk_rej[i] = 0;
        eb->up_sent[i] = eb->done_sent[i] = -1;
    }
    eb->respawned = 0;
    eb->losses = 0;
    eb->fence_at = 0;
    eb->members = members;
    ea->respawned = 0;
    /* both sides notice within a heartbeat of each other */
    ea->now += ea->node_timeout;
    eb->now = ea->now;
    for (int i = 0; i < n; i++)
        if (side[i]) {
            ea->crashed[i] = 1;
            gone(ea, i, 0);
        }
    if (ea->elect && !etcd_with_leader)
        election(ea, P3D_CTL_ELECT_LOST);
    int a_goes_on = p3d_ctl_get_state(ea->c) != P3D_CTL_STOPPING && p3d_ctl_get_state(ea->c) != P3D_CTL_DONE;
    if (ea->elect && !etcd_with_leader && a_goes_on)
        broken(ea, "partition: the leader's lease lapsed and it goes on");
    if (a_goes_on && 2 * nb >= members) /* it may stop for other reasons (no spare) */
        broken(ea, "partition: the leader kept %d of %d nodes and %s", members - nb, members,
               a_goes_on ? "goes on" : "stopped");
    eb->leader = ea->leader;
    leader_lost(eb);
    if (etcd_with_leader && rnd(ea, 2))
        election(eb, P3D_CTL_ELECT_NOT_WON); /* else its bid runs out of time */
    finish(ea);
    int b_ran = 0;
    while (p3d_ctl_get_state(eb->c) != P3D_CTL_DONE) {
        b_ran |= eb->respawned > 0;
        if (!cooperative_event(eb))
            broken(eb, "partition: the successor's side is stuck");
    }
    b_ran |= eb->respawned > 0;
    if (b_ran && a_goes_on)
        broken(eb, "partition: both sides run (%d of %d nodes with the successor)", nb, members);
    if (b_ran && etcd_with_leader)
        broken(eb, "partition: the successor ran without etcd's election");
    if (!ea->elect && b_ran && 2 * nb <= members) /* with a majority it may stop too: no spare, no restart left */
        broken(eb, "partition: the successor ran with %d of %d nodes", nb, members);
    if (!b_ran && p3d_ctl_code(eb->c) != P3D_EXIT_LOST)
        broken(eb, "partition: the successor's side stopped with %d, not 1", p3d_ctl_code(eb->c));
    if (b_ran)
        parts_major++;
    else
        parts_minor++;
    finish(eb);
    return;
plain:
    finish(ea);
}

/* Directed: fault classification with second faults. Nodes 0-2 run
 * ranks, node 3 is a spare; --max-job-restarts 2, a window of 2 s, a
 * --health-check offered (a job fault must never run it). takeover: the
 * leader is node 3, lost while the job runs (failover). */
enum { FAULT_PLAIN, FAULT_PREEMPT, FAULT_ONE_NODE };

/* mode FAULT_PREEMPT: SIGUSR1 is the scheduler's warning; FAULT_ONE_NODE:
 * only node 0 runs ranks (4 of them, tp 2 x dp 2: rank r in replica r/2),
 * the other three are spares. Otherwise rank r is in replica r % 4: every
 * node holds every replica (a pipeline across the nodes). */
static void fault_setup(env *e, int takeover, int mode)
{
    static const int rep_across[12] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}, rep_one[4] = {0, 0, 1, 1};
    int one = mode == FAULT_ONE_NODE;
    memset(e, 0, sizeof *e);
    e->f_step = -1;
    e->n = 4;
    e->leader = takeover ? 3 : -1;
    e->failover = takeover;
    e->node_timeout = 1;
    e->max_restarts = 5;
    e->max_job = 2;
    e->np_step = e->np_ckpt = -1;
    e->stop_cause = -1;
    e->seed = -20 - takeover;
    e->rng = 7;
    e->preempt = mode == FAULT_PREEMPT;
    e->grace = 1;
    for (int i = 0; i < 4; i++) {
        e->rank_node[i] = one ? i == 0 : i < 3;
        e->alive[i] = 1;
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    e->members = 4;
    p3d_ctl_cfg cfg = {.nagents = 4,
                       .names = names,
                       .nranks = one ? 4 : 12,
                       .max_restarts = 5,
                       .grace = 1,
                       .leader = e->leader,
                       .health_timeout = 3,
                       .max_job_restarts = 2,
                       .fault_window = 2,
                       .failover = takeover,
                       .node_timeout = 1,
                       .replica_of = one ? rep_one : rep_across,
                       .nreplicas = one ? 2 : 4,
                       .preempt_sig = e->preempt ? SIGUSR1 : 0};
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .replace = o_replace,
                       .respawn = o_respawn,
                       .health = o_health,
                       .spares_left = o_spares_left};
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
}

/* Cooperative events until state s (or none is left). */
static void until_state(env *e, p3d_ctl_state s)
{
    for (int k = 0; k < 300 && p3d_ctl_get_state(e->c) != s; k++)
        if (!cooperative_event(e))
            break;
    assert_int_equal(p3d_ctl_get_state(e->c), s);
}

/* Every rank of every node that runs ranks now fails the same way (the
 * program's bug): one f packet a rank, as an agent sends them. */
static void all_fail(env *e)
{
    e->f_err = "ValueError: bad batch";
    e->f_step = 3;
    for (int i = 0, k = 0; i < e->n; i++) {
        if (!e->alive[i] || !e->rank_node[i] || p3d_ctl_is_dead(e->c, i))
            continue;
        for (int r = 0; r < 4; r++) /* the k-th node running ranks: 4k.. */
            msg(e, i, P3D_AM_FAIL, e->gen[i], 4 * k + r, 1, 0);
        k++;
    }
}

static void fault_case(env *e)
{
    fault_setup(e, 0, FAULT_PLAIN);
    until_state(e, P3D_CTL_RUNNING);
    /* 1. a node lost while the window collects: a node fault, replaced */
    e->f_err = "RuntimeError: connection closed";
    e->f_step = 3;
    msg(e, 0, P3D_AM_FAIL, 0, 0, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_COLLECTING);
    assert_true(p3d_ctl_deadline(e->c) == e->now + 2);
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_REPLACING);
    assert_string_equal(p3d_ctl_fault(e->c), "node");
    assert_int_equal(p3d_ctl_replaced(e->c), 1);
    /* 2. a job fault on the replacement's first step: every node, the
     * same error: in place, no spare, no check */
    until_state(e, P3D_CTL_RUNNING);
    all_fail(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RESTARTING); /* every node reported: no wait */
    assert_string_equal(p3d_ctl_fault(e->c), "job");
    assert_int_equal(p3d_ctl_job_restarts(e->c), 1);
    assert_int_equal(p3d_ctl_replaced(e->c), 1);
    /* 3. the same failure at the same step after the restart, on one
     * node only: still the job's (decided when the window closes) */
    until_state(e, P3D_CTL_RUNNING);
    msg(e, 0, P3D_AM_FAIL, e->gen[0], 0, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_COLLECTING);
    until_state(e, P3D_CTL_RESTARTING);
    assert_string_equal(p3d_ctl_fault(e->c), "job");
    assert_int_equal(p3d_ctl_job_restarts(e->c), 2);
    /* 4. the budget spent: the program's exit code, said so */
    until_state(e, P3D_CTL_RUNNING);
    all_fail(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_int_equal(p3d_ctl_code(e->c), 1);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "no job restart left (--max-job-restarts 2)"));
    assert_int_equal(p3d_ctl_replaced(e->c), 1);
    finish(e);

    /* 5. a job fault during a takeover: the leader (node 3) lost while
     * the job runs; the successor restarts the ranks, which all fail the
     * same way before they are all up: in place, the takeover completes */
    fault_setup(e, 1, FAULT_PLAIN);
    until_state(e, P3D_CTL_RUNNING);
    leader_lost(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_TAKEOVER);
    until_state(e, P3D_CTL_RESTARTING);
    int r = p3d_ctl_restarts(e->c);
    all_fail(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RESTARTING);
    assert_int_equal(p3d_ctl_restarts(e->c), r + 1);
    assert_string_equal(p3d_ctl_fault(e->c), "job");
    assert_int_equal(p3d_ctl_job_restarts(e->c), 1);
    until_state(e, P3D_CTL_RUNNING);
    assert_int_equal(p3d_ctl_takeovers(e->c), 1);
    finish(e);
}

/* Node a's ranks (those listed, -1 ends) fail with err at step 3. */
static void ranks_fail(env *e, int a, const char *err, const int *ranks)
{
    e->f_err = err;
    e->f_step = 3;
    for (int k = 0; ranks[k] >= 0; k++)
        msg(e, a, P3D_AM_FAIL, e->gen[a], ranks[k], 1, 0);
}

/* The verdict at rank level (an agent reports each of its ranks'
 * failures), with second faults. */
static void rank_fault_case(env *e)
{
    static const int r01[] = {0, 1, -1}, r0123[] = {0, 1, 2, 3, -1}, r02[] = {0, 2, -1}, r0[] = {0, -1};
    /* 1. a node lost while the window holds two rank failures of node 0:
     *    the loss ends the window, a node fault, replaced */
    fault_setup(e, 0, FAULT_PLAIN);
    until_state(e, P3D_CTL_RUNNING);
    ranks_fail(e, 0, "RuntimeError: connection closed", r01);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_COLLECTING); /* node 0's other ranks run on */
    assert_true(p3d_ctl_deadline(e->c) == e->now + 2);
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_REPLACING);
    assert_string_equal(p3d_ctl_fault(e->c), "node");
    assert_int_equal(p3d_ctl_replaced(e->c), 1);
    finish(e);
    /* 2. every rank of node 0 fails the same way, so every replica (each
     *    node holds all four) while nodes 1 and 2 run on: the node's, not
     *    the job's: the window runs out, then the --health-check */
    fault_setup(e, 0, FAULT_PLAIN);
    until_state(e, P3D_CTL_RUNNING);
    ranks_fail(e, 0, "CUDA error: an illegal memory access", r0123);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_COLLECTING);
    e->now += 2;
    tick(e);
    assert_string_equal(p3d_ctl_fault(e->c), "node");
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_CHECKING);
    assert_int_equal(p3d_ctl_job_restarts(e->c), 0);
    finish(e);
    /* 3. a preemption warning while the window collects: the failure so
     *    far gets its verdict (node 0's alone while nodes 1, 2 run on);
     *    with a rank failed no complete checkpoint can come: the job ends
     *    now with the preempted code, nothing restarts */
    fault_setup(e, 0, FAULT_PREEMPT);
    until_state(e, P3D_CTL_RUNNING);
    ranks_fail(e, 0, "ValueError: bad batch", r0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_COLLECTING);
    unsigned long cut0 = cut_verdicts;
    signal_ev(e, SIGUSR1);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_STOPPING);
    assert_int_equal(p3d_ctl_code(e->c), P3D_EXIT_PREEMPTED);
    assert_string_equal(p3d_ctl_fault(e->c), "node");
    assert_int_equal(cut_verdicts, cut0 + 1);
    assert_non_null(strstr(p3d_ctl_summary(e->c), "rank 0 on node"));
    ranks_fail(e, 0, "ValueError: bad batch", r01 + 1); /* node 0's next rank, while stopping */
    assert_int_equal(p3d_ctl_restarts(e->c), 0);
    assert_int_equal(p3d_ctl_replaced(e->c), 0);
    finish(e);
    /* 4. one node runs every rank: two ranks of replica 0 (one of two) are
     *    not most replicas; one in each replica is the job's */
    fault_setup(e, 0, FAULT_ONE_NODE);
    until_state(e, P3D_CTL_RUNNING);
    ranks_fail(e, 0, "ValueError: bad batch", r01);
    e->now += 2;
    tick(e);
    assert_string_equal(p3d_ctl_fault(e->c), "unknown");
    until_state(e, P3D_CTL_RUNNING);
    ranks_fail(e, 0, "OSError: No space left on device", r02);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_COLLECTING); /* ranks 1 and 3 run on */
    e->now += 2;
    tick(e);
    assert_string_equal(p3d_ctl_fault(e->c), "job");
    assert_int_equal(p3d_ctl_job_restarts(e->c), 1);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RESTARTING); /* no check, no spare */
    assert_int_equal(p3d_ctl_replaced(e->c), 0);
    /*    and a node lost while the window collects the one node's ranks */
    until_state(e, P3D_CTL_RUNNING);
    ranks_fail(e, 0, "OSError: No space left on device", r0);
    gone(e, 0, 0);
    assert_string_equal(p3d_ctl_fault(e->c), "node");
    finish(e);
}

/* A cluster for join_cases: n agents, the first `ranked` with ranks, the
 * rest spares, failover on with agent 0 leading; everyone up, RUNNING. */
static void join_setup(env *e, int n, int ranked, int seed)
{
    memset(e, 0, sizeof *e);
    e->f_step = -1;
    e->n = n;
    e->leader = 0;
    e->failover = 1;
    e->node_timeout = 2;
    e->max_restarts = 3;
    e->stop_cause = -1;
    e->seed = seed;
    e->rng = 77 + (uint64_t)-seed;
    for (int i = 0; i < n; i++) {
        e->rank_node[i] = i < ranked;
        e->alive[i] = 1;
        e->up_sent[i] = e->done_sent[i] = -1;
    }
    p3d_ctl_cfg cfg = {.nagents = n,
                       .names = names,
                       .nranks = 4 * ranked,
                       .max_restarts = 3,
                       .grace = 1,
                       .leader = 0,
                       .health_timeout = 3,
                       .failover = 1,
                       .node_timeout = 2};
    p3d_ctl_ops ops = {.ctx = e,
                       .send = o_send,
                       .kill = o_kill,
                       .say = o_say,
                       .event = o_event,
                       .cell = o_cell,
                       .replace = o_replace,
                       .respawn = o_respawn,
                       .spares_left = o_spares_left,
                       .join_accept = o_join_accept,
                       .join_refuse = o_join_refuse};
    e->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(e->c);
    e->members = n;
    for (int i = 0; i < n; i++)
        msg(e, i, P3D_AM_UP, 0, 0, 0, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RUNNING);
}

/* A join case's end: the job ends 0 once the cluster only cooperates. */
static void join_done(env *e)
{
    until_state(e, P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(e->c), 0);
    p3d_ctl_free(e->c);
}

/* Directed: a join's second faults. (1) A join during a takeover is
 * refused with "retry"; once the successor runs the ranks again the same
 * node is accepted. (2) A join while a lost node is replaced: accepted,
 * started by the respawn with the rest, not before. (3) The joined spare
 * is lost before it ran anything: nothing moves, the job ends 0. (4) Two
 * nodes, no spare; a node joins, then a rank node is lost: its ranks move
 * to the joined node, which runs them to the end. */
static void join_cases(env *e)
{
    const char *why = NULL;
    /* (1) */
    join_setup(e, 3, 2, -40);
    leader_lost(e);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_TAKEOVER);
    assert_int_equal(p3d_ctl_join(e->c, names[3], "10.0.0.3", 8, e->now, &why), -1);
    assert_non_null(strstr(why, "retry"));
    assert_int_equal(p3d_ctl_joins(e->c), 0);
    e->now += 5;
    until_state(e, P3D_CTL_RUNNING);
    join(e);
    assert_int_equal(p3d_ctl_joins(e->c), 1);
    assert_int_equal(p3d_ctl_join_refusals(e->c), 1);
    assert_true(e->alive[3] && !e->rank_node[3]);
    until_state(e, P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(e->c), 0);
    assert_non_null(strstr(p3d_ctl_story(e->c), "node n3 joined as a spare"));
    p3d_ctl_free(e->c);
    /* (2) */
    join_setup(e, 3, 2, -41);
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_REPLACING);
    join(e);
    assert_int_equal(e->n, 4);
    assert_false(e->alive[3]); /* the respawn starts it */
    until_state(e, P3D_CTL_RUNNING);
    assert_true(e->alive[3] && !e->rank_node[3] && e->rank_node[2]);
    assert_int_equal(e->gen[3], p3d_ctl_restarts(e->c));
    join_done(e);
    /* (3) */
    join_setup(e, 2, 2, -42);
    join(e);
    msg(e, 2, P3D_AM_UP, 0, 0, 0, 0);
    gone(e, 2, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_RUNNING);
    assert_int_equal(p3d_ctl_restarts(e->c), 0);
    assert_int_equal(p3d_ctl_replaced(e->c), 0);
    join_done(e);
    /* (4) */
    join_setup(e, 2, 2, -43);
    join(e);
    msg(e, 2, P3D_AM_UP, 0, 0, 0, 0);
    assert_int_equal(o_spares_left(e), 1);
    gone(e, 1, 0);
    assert_int_equal(p3d_ctl_get_state(e->c), P3D_CTL_REPLACING);
    assert_true(e->rank_node[2] && !e->rank_node[1]); /* the lost node's ranks went to the joined one */
    until_state(e, P3D_CTL_RUNNING);
    assert_true(e->alive[2] && e->gen[2] == 1);
    assert_int_equal(p3d_ctl_replaced(e->c), 1);
    join_done(e);
}

/* One random sequence: seed's setup, then lo + rnd(span) random events
 * (fewer when the job is done first), then the end checks. */
static void play(env *e, int seed, int lo, int span)
{
    setup(e, seed);
    int faults = lo + (int)rnd(e, span);
    for (int k = 0; k < faults && p3d_ctl_get_state(e->c) != P3D_CTL_DONE; k++)
        random_event(e);
    finish(e);
}

static void test_model(void **st)
{
    (void)st;
    env *e = calloc(1, sizeof *e), *e2 = calloc(1, sizeof *e2);
    assert_non_null(e);
    assert_non_null(e2);
    seed_zero(e);
    for (int seed = 1; seed <= SEQUENCES / 4; seed++)
        partition_case(e, e2, SEQUENCES + seed);
    for (int seed = 1; seed <= SEQUENCES; seed++)
        play(e, seed, 0, 40);
    /* the figure to compare across a change meant to keep behaviour: the
     * random sequences' (the directed cases below came with the table) */
    uint64_t fp_random = fingerprint;
    for (int v = 0; v < 3; v++)
        all_gone_case(e, v);
    no_progress_case(e);
    fault_case(e);
    rank_fault_case(e);
    model_preempt = 1;
    for (int seed = 1; seed <= SEQUENCES / 4; seed++)
        play(e, 3 * SEQUENCES + seed, 0, 40);
    model_preempt = 0;
    preempt_cases(e);
    model_join = 1;
    for (int seed = 1; seed <= SEQUENCES / 4; seed++) {
        model_preempt = seed % 2; /* joins while preempting too */
        play(e, 4 * SEQUENCES + seed, 0, 40);
    }
    model_join = model_preempt = 0;
    join_cases(e);
    /* elastic: after the fingerprint too (cfg.min_dp draws numbers); nodes
     * join at random here as well (a join while shrinking or growing) */
    model_elastic = model_join = 1;
    for (int seed = 1; seed <= SEQUENCES / 4; seed++)
        play(e, 6 * SEQUENCES + seed, 20, 100); /* time for a shrink, a join and a grow */
    model_preempt = 1;
    for (int seed = 1; seed <= SEQUENCES / 8; seed++)
        play(e, 7 * SEQUENCES + seed, 0, 40);
    model_preempt = model_elastic = model_join = 0;
    elastic_cases(e);
    int visited = 0, missing = 0, handled = 0, ignored = 0, impossible = 0;
    for (int st = 0; st < P3D_CTL_NSTATES; st++)
        for (int v = 0; v < P3D_CTL_NEVENTS; v++) {
            p3d_ctl_cell x;
            p3d_ctl_cell_info((p3d_ctl_state)st, (p3d_ctl_event)v, &x);
            handled += x.kind == P3D_CTL_CELL_RUN;
            ignored += x.kind == P3D_CTL_CELL_IGNORED;
            impossible += x.kind == P3D_CTL_CELL_IMPOSSIBLE;
            if (cells[st][v] || x.kind == P3D_CTL_CELL_IMPOSSIBLE) {
                visited += cells[st][v] > 0;
                continue;
            }
            missing++;
            fprintf(stderr, "model: never saw event %s in state %s\n", p3d_ctl_event_name((p3d_ctl_event)v),
                    p3d_ctl_state_name((p3d_ctl_state)st));
        }
    printf("model: %d states x %d events = %d cells (%d handled, %d ignored, %d cannot happen), %d visited; %d "
           "random sequences + seed 0, %lu events, %lu slow nodes reported, %lu replaced\n",
           P3D_CTL_NSTATES, P3D_CTL_NEVENTS, P3D_CTL_NSTATES * P3D_CTL_NEVENTS, handled, ignored, impossible, visited,
           SEQUENCES, total_events, slow_seen, slow_moved);
    printf("model: behaviour fingerprint %016llx (every say, event, send, kill, replace, respawn, health)\n",
           (unsigned long long)fp_random);
    assert_int_equal(missing, 0);
    assert_true(slow_seen > 0 && slow_moved > 0); /* the sequences do reach the detection */
    printf("model: failover: %lu takeovers completed, %lu sequences with two leader losses or more, %lu rejoins "
           "refused; partitions: %lu successor sides ran, %lu stopped\n",
           takeovers, doubles, refused, parts_major, parts_minor);
    printf("model: election: %lu takeovers ran once elected, %lu stops on a lapsed leadership\n", elected_runs,
           lease_stops);
    assert_true(takeovers > 0 && doubles > 0 && refused > 0 && parts_major > 0 && parts_minor > 0);
    assert_true(elected_runs > 0 && lease_stops > 0);
    printf("model: no progress: %lu stops with exit %d, %lu of them with a node replaced during the count\n", np_stops,
           NP_CODE, np_stops_mixed);
    assert_true(np_stops > 0 && np_stops_mixed > 0);
    printf("model: faults: %lu job verdicts (%lu of them stops), %lu node, %lu unknown; %lu windows cut short by a "
           "preemption warning\n",
           job_verdicts, job_stops, node_verdicts, unknown_verdicts, cut_verdicts);
    assert_true(job_verdicts > job_stops && job_stops > 0 && node_verdicts > 0 && unknown_verdicts > 0);
    assert_true(cut_verdicts > 0);
    printf("model: preemption: %lu waits; ended by every node's checkpoint or end %lu, by the grace %lu; %lu "
           "warnings during a recovery stopped at once\n",
           pre_waits, pre_ckpt_ends, pre_grace_ends, pre_now_ends);
    assert_true(pre_waits > 0 && pre_ckpt_ends > 0 && pre_grace_ends > 0 && pre_now_ends > 0);
    printf("model: joins: %lu accepted (%lu of them while replacing, started by the respawn), %lu refused; the "
           "joined node took a lost node's ranks in %lu sequences\n",
           joins_ok, joins_replacing, joins_refused, joins_used);
    assert_true(joins_ok > 0 && joins_replacing > 0 && joins_refused > 0 && joins_used > 0);
    printf("model: elastic: %lu shrinks, %lu grows, %lu losses refused below --min-dp\n", shrinks, grows, below_d);
    assert_true(shrinks > 0 && grows > 0 && below_d > 0);
    free(e);
    free(e2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
