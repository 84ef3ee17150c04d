/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_table.c — the controller as a table, read like
 * s6-supervise's actions[state][event]: every (state, event) cell names
 * its handler (controller_on.c, controller_takeover.c) and the states it
 * may move to ("stay" when it may leave the state as it is), or says the
 * event is ignored there, or that it cannot happen there. The dispatch
 * runs an outside event's cell, then the SLOW events the slow-node
 * detector posted meanwhile (until one moves the state), then the completions the event may have
 * caused (every agent up, every agent done, every agent gone, a takeover
 * able to act) — each through its own cell, in the state the one before
 * left. docs/controller.md prints the table (test_ctl_table keeps it so).
 */
#include "controller_int.h"

#include <stdio.h>

/* the cells are laid out as a table, a row a state (scripts/format.sh) */
/* clang-format off */
enum { CELL_UNSET, CELL_RUN = P3D_CTL_CELL_RUN, CELL_IGNORED = P3D_CTL_CELL_IGNORED,
       CELL_IMPOSSIBLE = P3D_CTL_CELL_IMPOSSIBLE };

typedef struct ctl_cell {
    ctl_handler h;
    const char *name;
    unsigned next; /* CTL_TO(state) | CTL_STAY */
    unsigned char kind;
} ctl_cell;

#define RUN(h, next) {ctl_##h, "ctl_" #h, (next), CELL_RUN}
#define IGNORED {NULL, NULL, CTL_STAY, CELL_IGNORED}
#define IMPOSSIBLE {NULL, NULL, 0, CELL_IMPOSSIBLE}
#define STAY CTL_STAY
#define RUNNING CTL_TO(P3D_CTL_RUNNING)
#define CHECKING CTL_TO(P3D_CTL_CHECKING)
#define RESTARTING CTL_TO(P3D_CTL_RESTARTING)
#define REPLACING CTL_TO(P3D_CTL_REPLACING)
#define STOPPING CTL_TO(P3D_CTL_STOPPING)
#define DONE CTL_TO(P3D_CTL_DONE)
#define TAKEOVER CTL_TO(P3D_CTL_TAKEOVER)
#define COLLECTING CTL_TO(P3D_CTL_COLLECTING)
#define PREEMPTING CTL_TO(P3D_CTL_PREEMPTING)
#define SHRINKING CTL_TO(P3D_CTL_SHRINKING)
#define GROWING CTL_TO(P3D_CTL_GROWING)
/* where a loss may lead once ranks run: a spare takes it, or (an elastic
 * job with no spare left) fewer replicas run, or the job stops */
#define LOSS_TO (REPLACING | SHRINKING | STOPPING)

/* Cells every state that runs ranks (STARTING, RUNNING, RESTARTING)
 * shares; a row overrides the few where it differs. */
#define LIVE_ROW                                                                                                      \
    [P3D_CTL_EV_UP] = RUN(on_up, STAY), [P3D_CTL_EV_DONE] = RUN(on_done, STAY),                                      \
    [P3D_CTL_EV_FAIL] = RUN(on_fail, STAY | CHECKING | RESTARTING | STOPPING | COLLECTING),                           \
    [P3D_CTL_EV_NODE_SIG] = RUN(on_node_sig, STOPPING),                                                               \
    [P3D_CTL_EV_GONE] = RUN(on_gone_live, STAY | LOSS_TO),                                                            \
    [P3D_CTL_EV_SIGNAL] = RUN(on_signal, STAY | STOPPING), [P3D_CTL_EV_ABORT] = RUN(on_abort, STOPPING),             \
    [P3D_CTL_EV_TICK] = RUN(on_tick_timeout, STAY | STOPPING), [P3D_CTL_EV_HEALTH] = IGNORED,                        \
    [P3D_CTL_EV_MARK_DEAD] = IGNORED, [P3D_CTL_EV_PROGRESS] = RUN(on_progress, STAY),                               \
    [P3D_CTL_EV_RESUMED] = RUN(on_resumed, STAY), [P3D_CTL_EV_LEADER_LOST] = RUN(on_leader_lost, TAKEOVER | STOPPING), \
    [P3D_CTL_EV_REJOIN] = RUN(on_rejoin_refuse, STAY),                                                                \
    [P3D_CTL_EV_ELECTION] = RUN(on_election_live, STAY | STOPPING),                                                   \
    [P3D_CTL_EV_ALL_UP] = RUN(on_all_up, RUNNING), [P3D_CTL_EV_ALL_DONE] = RUN(on_all_done, STOPPING),             \
    [P3D_CTL_EV_ALL_GONE] = RUN(on_all_gone_live, STOPPING), [P3D_CTL_EV_TAKEOVER_READY] = IMPOSSIBLE,              \
    [P3D_CTL_EV_SLOW] = IMPOSSIBLE, PREEMPT_COLS(RUN(on_preempt, PREEMPTING)),                                      \
    [P3D_CTL_EV_JOIN] = RUN(on_join, STAY)

/* The preemption's events in a row: the warning's cell (p); ALL_CKPT is
 * raised in PREEMPTING only. */
#define PREEMPT_COLS(p) [P3D_CTL_EV_PREEMPT] = p, [P3D_CTL_EV_ALL_CKPT] = IMPOSSIBLE, [P3D_CTL_EV_GROW] = IMPOSSIBLE

/* The states where no rank runs for the job: the agents' reports of an
 * older generation (UP, FAIL, DONE, PROGRESS, RESUMED) and a late health
 * result mean nothing there. */
#define QUIET_ROW                                                                                                     \
    [P3D_CTL_EV_UP] = IGNORED, [P3D_CTL_EV_FAIL] = IGNORED, [P3D_CTL_EV_DONE] = IGNORED,                            \
    [P3D_CTL_EV_HEALTH] = IGNORED, [P3D_CTL_EV_MARK_DEAD] = IGNORED, [P3D_CTL_EV_PROGRESS] = IGNORED,               \
    [P3D_CTL_EV_RESUMED] = IGNORED, [P3D_CTL_EV_ALL_UP] = IGNORED, [P3D_CTL_EV_ALL_DONE] = IGNORED,                 \
    [P3D_CTL_EV_TAKEOVER_READY] = IMPOSSIBLE, PREEMPT_COLS(RUN(on_preempt_now, STOPPING)),                         \
    [P3D_CTL_EV_JOIN] = RUN(on_join_ending, STAY)

/* REPLACING, SHRINKING, GROWING: every agent was told to retire; once all
 * are gone they start again on the new placement. A loss on the way is
 * one more replacement (or shrink), from the placement just made. */
#define RETIRE_ROW(loss)                                                                                                \
    QUIET_ROW, [P3D_CTL_EV_NODE_SIG] = RUN(on_node_sig, STOPPING),                                                   \
    [P3D_CTL_EV_GONE] = RUN(on_gone_replacing, STAY | STOPPING | (loss)),                                          \
    [P3D_CTL_EV_SIGNAL] = RUN(on_signal, STAY | STOPPING),                                                            \
    [P3D_CTL_EV_ABORT] = RUN(on_abort, STOPPING), [P3D_CTL_EV_TICK] = RUN(on_tick_replacing, STAY | STOPPING),      \
    [P3D_CTL_EV_LEADER_LOST] = RUN(on_leader_lost, TAKEOVER | STOPPING),                                              \
    [P3D_CTL_EV_REJOIN] = RUN(on_rejoin_refuse, STAY),                                                                \
    [P3D_CTL_EV_ELECTION] = RUN(on_election_live, STAY | STOPPING),                                                   \
    [P3D_CTL_EV_ALL_GONE] = RUN(on_all_retired, STAY | RESTARTING | STOPPING),                                        \
    /* the generation moved on: nobody is up in it before the respawn */                                           \
    [P3D_CTL_EV_ALL_UP] = IMPOSSIBLE, [P3D_CTL_EV_ALL_DONE] = IMPOSSIBLE,                                            \
    /* posted in RUNNING: dropped once one moved the state */                                                       \
    [P3D_CTL_EV_SLOW] = IMPOSSIBLE,                                                                                   \
    /* every agent retires: the respawn starts the joined one too */                                                \
    [P3D_CTL_EV_JOIN] = RUN(on_join_replacing, STAY)

/* Designated initializers override the row macros' defaults: gcc's
 * -Woverride-init says so for every override, which is the point here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#ifdef __clang__
#pragma clang diagnostic ignored "-Winitializer-overrides"
#endif
static const ctl_cell table[P3D_CTL_NSTATES][P3D_CTL_NEVENTS] = {
    [P3D_CTL_STARTING] = {LIVE_ROW, [P3D_CTL_EV_MARK_DEAD] = RUN(on_mark_dead, STAY)},
    [P3D_CTL_RUNNING] = {LIVE_ROW, [P3D_CTL_EV_TICK] = RUN(on_tick_running, STAY | STOPPING),
                         [P3D_CTL_EV_PROGRESS] = RUN(on_progress_running, STAY),
                         [P3D_CTL_EV_ALL_UP] = IGNORED,
                         [P3D_CTL_EV_SLOW] = RUN(on_slow, STAY | LOSS_TO),
                         [P3D_CTL_EV_GROW] = RUN(on_grow, STAY | GROWING)},
    [P3D_CTL_CHECKING] = {LIVE_ROW, [P3D_CTL_EV_FAIL] = IGNORED,
                          [P3D_CTL_EV_GONE] = RUN(on_gone_checking, STAY | STOPPING),
                          [P3D_CTL_EV_TICK] = RUN(on_tick_checking, STAY | LOSS_TO | RESTARTING),
                          [P3D_CTL_EV_HEALTH] = RUN(on_health, LOSS_TO | RESTARTING),
                          [P3D_CTL_EV_PROGRESS] = IGNORED, [P3D_CTL_EV_RESUMED] = IGNORED,
                          [P3D_CTL_EV_ALL_UP] = IGNORED, [P3D_CTL_EV_ALL_DONE] = IGNORED,
                          [P3D_CTL_EV_ALL_GONE] = IGNORED,
                          /* the failed generation is being stopped: nothing to checkpoint */
                          [P3D_CTL_EV_PREEMPT] = RUN(on_preempt_now, STOPPING)},
    /* a failure restarts in place again: RESTARTING is where it stays */
    [P3D_CTL_RESTARTING] = {LIVE_ROW, [P3D_CTL_EV_FAIL] = RUN(on_fail, STAY | CHECKING | STOPPING | COLLECTING),
                            [P3D_CTL_EV_ALL_UP] = RUN(on_all_up_again, RUNNING)},
    [P3D_CTL_REPLACING] = {RETIRE_ROW(SHRINKING)},
    /* a loss past the last spare (elastic): the same retirement, then the
     * ranks start again on fewer replicas */
    [P3D_CTL_SHRINKING] = {RETIRE_ROW(REPLACING)},
    /* the spares hold replicas again: the same retirement, then wider */
    [P3D_CTL_GROWING] = {RETIRE_ROW(REPLACING | SHRINKING)},
    [P3D_CTL_STOPPING] = {QUIET_ROW, [P3D_CTL_EV_NODE_SIG] = RUN(on_node_sig_again, STAY),
                          [P3D_CTL_EV_GONE] = RUN(on_gone_stopping, STAY),
                          [P3D_CTL_EV_SIGNAL] = RUN(on_signal_again, STAY),
                          [P3D_CTL_EV_ABORT] = RUN(on_abort_again, STAY),
                          [P3D_CTL_EV_TICK] = RUN(on_tick_stopping, STAY),
                          [P3D_CTL_EV_LEADER_LOST] = RUN(on_leader_lost_stopping, STAY),
                          [P3D_CTL_EV_REJOIN] = RUN(on_rejoin_refuse, STAY), [P3D_CTL_EV_ELECTION] = IGNORED,
                          [P3D_CTL_EV_ALL_GONE] = RUN(on_all_stopped, DONE), [P3D_CTL_EV_SLOW] = IMPOSSIBLE,
                          [P3D_CTL_EV_PREEMPT] = RUN(on_preempt_stopping, STAY)},
    /* every agent is gone and nothing clears that: the entry points drop
     * an agent's reports once it is gone, and ALL_UP, ALL_DONE need one */
    [P3D_CTL_DONE] = {QUIET_ROW, [P3D_CTL_EV_UP] = IMPOSSIBLE, [P3D_CTL_EV_FAIL] = IMPOSSIBLE,
                      [P3D_CTL_EV_DONE] = IMPOSSIBLE, [P3D_CTL_EV_NODE_SIG] = IMPOSSIBLE,
                      [P3D_CTL_EV_GONE] = IMPOSSIBLE, [P3D_CTL_EV_SIGNAL] = IGNORED, [P3D_CTL_EV_ABORT] = IGNORED,
                      [P3D_CTL_EV_TICK] = IGNORED, [P3D_CTL_EV_PROGRESS] = IMPOSSIBLE,
                      [P3D_CTL_EV_RESUMED] = IMPOSSIBLE, [P3D_CTL_EV_LEADER_LOST] = IGNORED,
                      [P3D_CTL_EV_REJOIN] = IGNORED, [P3D_CTL_EV_ELECTION] = IGNORED,
                      [P3D_CTL_EV_ALL_UP] = IMPOSSIBLE, [P3D_CTL_EV_ALL_DONE] = IMPOSSIBLE,
                      [P3D_CTL_EV_ALL_GONE] = IGNORED, [P3D_CTL_EV_SLOW] = IMPOSSIBLE,
                      [P3D_CTL_EV_PREEMPT] = IGNORED,
                      /* nothing runs once the job is over: p3d_ctl_join refuses */
                      [P3D_CTL_EV_JOIN] = IGNORED},
    /* every node fenced its ranks: nobody is up until the next generation */
    [P3D_CTL_TAKEOVER] = {QUIET_ROW, [P3D_CTL_EV_NODE_SIG] = RUN(on_node_sig, STOPPING),
                          [P3D_CTL_EV_GONE] = RUN(on_gone_takeover, STAY),
                          [P3D_CTL_EV_SIGNAL] = RUN(on_signal, STAY | STOPPING),
                          [P3D_CTL_EV_ABORT] = RUN(on_abort, STOPPING),
                          [P3D_CTL_EV_TICK] = RUN(on_tick_takeover, STAY | STOPPING),
                          [P3D_CTL_EV_LEADER_LOST] = RUN(on_leader_lost, STAY | STOPPING),
                          [P3D_CTL_EV_REJOIN] = RUN(on_rejoin, STAY),
                          [P3D_CTL_EV_ELECTION] = RUN(on_election_takeover, STAY | STOPPING),
                          [P3D_CTL_EV_ALL_UP] = IMPOSSIBLE, [P3D_CTL_EV_ALL_DONE] = IMPOSSIBLE,
                          [P3D_CTL_EV_ALL_GONE] = IGNORED,
                          [P3D_CTL_EV_TAKEOVER_READY] = RUN(on_takeover_act, LOSS_TO),
                          [P3D_CTL_EV_SLOW] = IMPOSSIBLE,
                          /* the majority is counted over the generation's nodes: "retry" */
                          [P3D_CTL_EV_JOIN] = RUN(on_join_takeover, STAY)},
    /* a rank failed: the other nodes' failures are collected for the
     * verdict (job, node, unknown); the ranks that did not fail run on */
    [P3D_CTL_COLLECTING] = {LIVE_ROW,
                            [P3D_CTL_EV_FAIL] = RUN(on_fail_collecting, STAY | CHECKING | RESTARTING | STOPPING),
                            [P3D_CTL_EV_GONE] = RUN(on_gone_collecting,
                                                    STAY | LOSS_TO | CHECKING | RESTARTING),
                            [P3D_CTL_EV_TICK] = RUN(on_tick_collecting, STAY | CHECKING | RESTARTING | STOPPING),
                            [P3D_CTL_EV_ALL_UP] = IGNORED,
                            [P3D_CTL_EV_ALL_DONE] = RUN(on_all_done_collecting, CHECKING | RESTARTING | STOPPING),
                            /* the warning cuts the window short: its verdict, and a
                             * generation with a failed rank cannot checkpoint */
                            [P3D_CTL_EV_PREEMPT] = RUN(on_preempt_collecting, STOPPING),
                            /* a loss that leaves nobody completes the window: the
                             * verdict moved the state before any completion */
                            [P3D_CTL_EV_ALL_GONE] = IMPOSSIBLE},
    /* the ranks were told to checkpoint: nothing restarts or is replaced
     * now, a failure or a lost node only shortens the wait */
    [P3D_CTL_PREEMPTING] = {[P3D_CTL_EV_UP] = RUN(on_up, STAY), [P3D_CTL_EV_DONE] = RUN(on_done, STAY),
                            [P3D_CTL_EV_FAIL] = RUN(on_fail_preempting, STAY | STOPPING),
                            [P3D_CTL_EV_NODE_SIG] = RUN(on_signal_preempting, STOPPING),
                            [P3D_CTL_EV_GONE] = RUN(on_gone_preempting, STAY),
                            [P3D_CTL_EV_SIGNAL] = RUN(on_signal_preempting, STAY | STOPPING),
                            [P3D_CTL_EV_ABORT] = RUN(on_abort, STOPPING),
                            [P3D_CTL_EV_TICK] = RUN(on_tick_preempting, STAY | STOPPING),
                            [P3D_CTL_EV_HEALTH] = IGNORED, [P3D_CTL_EV_MARK_DEAD] = IGNORED,
                            [P3D_CTL_EV_PROGRESS] = RUN(on_progress, STAY),
                            [P3D_CTL_EV_RESUMED] = RUN(on_resumed, STAY),
                            [P3D_CTL_EV_LEADER_LOST] = RUN(on_leader_lost_preempting, STOPPING),
                            [P3D_CTL_EV_REJOIN] = RUN(on_rejoin_refuse, STAY),
                            [P3D_CTL_EV_ELECTION] = RUN(on_election_live, STAY | STOPPING),
                            [P3D_CTL_EV_ALL_UP] = IGNORED,
                            [P3D_CTL_EV_ALL_DONE] = RUN(on_preempt_over, STOPPING),
                            [P3D_CTL_EV_ALL_GONE] = RUN(on_preempt_over, STOPPING),
                            [P3D_CTL_EV_TAKEOVER_READY] = IMPOSSIBLE,
                            /* posted only by RUNNING's tick and progress cells, which never preempt */
                            [P3D_CTL_EV_SLOW] = IMPOSSIBLE,
                            [P3D_CTL_EV_PREEMPT] = RUN(on_preempt_again, STAY | STOPPING),
                            [P3D_CTL_EV_ALL_CKPT] = RUN(on_preempt_over, STOPPING),
                            [P3D_CTL_EV_GROW] = IMPOSSIBLE,
                            /* the job ends once the ranks checkpointed: nothing to join */
                            [P3D_CTL_EV_JOIN] = RUN(on_join_ending, STAY)},
};
/* clang-format on */
#pragma GCC diagnostic pop

/* One cell: its handler, and the transport's look at it (ops.cell). */
static void run_cell(p3d_ctl *c, const ctl_ev *e)
{
    p3d_ctl_state s = c->state;
    const ctl_cell *x = &table[s][e->type];
    if (x->h)
        x->h(c, e);
    if (c->ops.cell)
        c->ops.cell(c->ops.ctx, s, e->type, c->state);
}

/* TAKEOVER may act: a majority (or the election), the old leader's fence
 * passed, and either every live node of the generation is in or the
 * deadline came (the rest count as lost then): a node that noticed the
 * loss a little later than the others still makes it, where acting at
 * the fence would have lost it and perhaps the spare it needs. */
static int takeover_ready(const p3d_ctl *c, double now)
{
    return c->state == P3D_CTL_TAKEOVER && ctl_takeover_quorum(c) && now >= c->fence_at &&
           (ctl_takeover_all_in(c) || now >= c->tk.until);
}

/* The completions due now, in the order they are raised; how many. */
static int completions(const p3d_ctl *c, double now, p3d_ctl_event *due)
{
    int live = 0, up = 0, done = 0, k = 0;
    for (int i = 0; i < c->cfg.nagents; i++) {
        if (c->gone[i])
            continue;
        live++;
        up += c->up_gen[i] == c->gen;
        done += c->done_gen[i] == c->gen;
    }
    if (!live)
        due[k++] = P3D_CTL_EV_ALL_GONE;
    if (live && up == live)
        due[k++] = P3D_CTL_EV_ALL_UP;
    if (live && done == live)
        due[k++] = P3D_CTL_EV_ALL_DONE;
    if (takeover_ready(c, now))
        due[k++] = P3D_CTL_EV_TAKEOVER_READY;
    if (c->state == P3D_CTL_PREEMPTING && ctl_preempt_through(c))
        due[k++] = P3D_CTL_EV_ALL_CKPT;
    return k;
}

/* After an event: what it may have completed. An agent gone, up or done
 * can finish a wait whatever the event was, so every wait is checked here
 * and handed to the table, which knows which states wait for what. Once a
 * completion moves the state, the completions are taken again in the new
 * one (all up, then all done; a stop, then all gone); a few rounds at most. */
static void settle(p3d_ctl *c, double now)
{
    for (int round = 0; round < P3D_CTL_NSTATES; round++) {
        p3d_ctl_event due[5];
        p3d_ctl_state s = c->state;
        int k = completions(c, now, due), moved = 0;
        for (int i = 0; i < k && !moved; i++) {
            ctl_ev e = {.type = due[i], .a = -1, .now = now};
            run_cell(c, &e);
            moved = c->state != s;
        }
        if (!moved)
            return;
    }
}

void ctl_dispatch(p3d_ctl *c, const ctl_ev *e)
{
    p3d_ctl_state before = c->state;
    c->cause = e->type;
    run_cell(c, e);
    /* the SLOW events are for the state that posted them: once one moved
     * it (a replacement began), the rest are dropped */
    p3d_ctl_state posted_in = c->state;
    for (int i = 0; i < c->nposted && c->state == posted_in; i++) {
        ctl_ev s = {.type = P3D_CTL_EV_SLOW, .a = c->posted[i].a, .how = c->posted[i].why, .now = e->now};
        run_cell(c, &s);
    }
    c->nposted = 0;
    /* GROW likewise: posted in RUNNING, dropped once the state moved */
    if (c->els.posted) {
        c->els.posted = 0;
        if (c->state == P3D_CTL_RUNNING) {
            ctl_ev g = {.type = P3D_CTL_EV_GROW, .a = -1, .now = e->now};
            run_cell(c, &g);
        }
    }
    /* A progress summary changes no agent's up, done or gone, which is
     * all the completions look at (O(agents)): it settles only when it
     * moved the state (a slow node's replacement). Every node sends one
     * per interval, so this keeps the leader's cost O(nodes) a round; a
     * first sign of life (one per node a generation) changes none either. */
    if ((e->type != P3D_CTL_EV_PROGRESS && e->type != P3D_CTL_EV_RESUMED) || c->state != before ||
        c->state == P3D_CTL_PREEMPTING) /* a checkpoint may end the wait */
        settle(c, e->now);
}

int p3d_ctl_cell_info(p3d_ctl_state s, p3d_ctl_event e, p3d_ctl_cell *out)
{
    *out = (p3d_ctl_cell){0};
    if (s < 0 || s >= P3D_CTL_NSTATES || e < 0 || e >= P3D_CTL_NEVENTS)
        return 0;
    const ctl_cell *x = &table[s][e];
    *out = (p3d_ctl_cell){.kind = x->kind, .handler = x->name, .next = x->next};
    return x->kind != CELL_UNSET;
}

/* "running, stopping, stay" */
static void print_next(FILE *f, unsigned next)
{
    const char *sep = "";
    for (int s = 0; s <= P3D_CTL_NSTATES; s++)
        if (next & (1u << s)) {
            fprintf(f, "%s%s", sep, s == P3D_CTL_NSTATES ? "stay" : p3d_ctl_state_name((p3d_ctl_state)s));
            sep = ", ";
        }
}

/* The events of row s whose cells are of kind k, on one line. */
static void print_kind(FILE *f, p3d_ctl_state s, int k, const char *what)
{
    const char *sep = "";
    for (int e = 0; e < P3D_CTL_NEVENTS; e++)
        if (table[s][e].kind == k) {
            fprintf(f, "%s%s`%s`", sep, *sep ? "" : what, p3d_ctl_event_name((p3d_ctl_event)e));
            sep = ", ";
        }
    if (*sep)
        fprintf(f, ".\n");
}

void p3d_ctl_table_print(FILE *f)
{
    for (int s = 0; s < P3D_CTL_NSTATES; s++) {
        int head = 0;
        fprintf(f, "### %s\n\n", p3d_ctl_state_name((p3d_ctl_state)s));
        for (int e = 0; e < P3D_CTL_NEVENTS; e++) {
            const ctl_cell *x = &table[s][e];
            if (x->kind != CELL_RUN)
                continue;
            if (!head++)
                fprintf(f, "| event | handler | next state |\n| --- | --- | --- |\n");
            fprintf(f, "| `%s` | `%s` | ", p3d_ctl_event_name((p3d_ctl_event)e), x->name);
            print_next(f, x->next);
            fprintf(f, " |\n");
        }
        fprintf(f, head ? "\n" : "No handler runs: the job is over.\n");
        print_kind(f, (p3d_ctl_state)s, CELL_IGNORED, "Ignored: ");
        print_kind(f, (p3d_ctl_state)s, CELL_IMPOSSIBLE, "Cannot happen: ");
        print_kind(f, (p3d_ctl_state)s, CELL_UNSET, "NOT IN THE TABLE: ");
        if (s + 1 < P3D_CTL_NSTATES)
            fprintf(f, "\n");
    }
}
