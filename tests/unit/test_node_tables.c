/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_node_tables.c — the relay's and the agent's machines (agent.h,
 * relay.c, agent.c) read as data, as test_ctl_table reads the
 * controller's: every (state, event) cell is a handler with the states it
 * may move to, or ignored, or one that cannot happen — none is left out;
 * a walk over the table from the first state reaches every state and
 * every handled cell, and from every state reaches the end; the rows keep
 * each machine's one-way shape (after a stop, a fence or a lost leader no
 * agent or generation starts again; a generation starts only where no
 * rank runs); and docs/agent.md shows both tables exactly as the code has
 * them.
 *
 *   build/tests/test_node_tables --print relay   the relay's table (Markdown)
 *   build/tests/test_node_tables --print agent   the agent's
 * to paste into docs/agent.md between each table's two markers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "doc_block.h"

typedef struct machine {
    const char *name; /* "relay", "agent" */
    int nstates, nevents, first;
    int end_mask; /* the states the machine ends in */
    const char *(*sname)(int);
    const char *(*ename)(int);
    int (*cell)(int, int, p3d_node_cell *);
} machine;

static const machine relay_m = {"relay",
                                P3D_RELAY_NSTATES,
                                P3D_RELAY_NEVENTS,
                                P3D_RELAY_RELAYING,
                                1 << P3D_RELAY_DONE | 1 << P3D_RELAY_SUCCEEDING,
                                p3d_relay_state_name,
                                p3d_relay_event_name,
                                p3d_relay_cell};
static const machine agent_m = {"agent",
                                P3D_AGENT_NSTATES,
                                P3D_AGENT_NEVENTS,
                                P3D_AGENT_STARTING,
                                1 << P3D_AGENT_EXITED,
                                p3d_agent_state_name,
                                p3d_agent_event_name,
                                p3d_agent_cell};

static p3d_node_cell cell(const machine *m, int s, int e)
{
    p3d_node_cell x;
    m->cell(s, e, &x);
    return x;
}

/* ---- the printed table -------------------------------------------------------- */

static void print_next(FILE *f, const machine *m, unsigned next)
{
    const char *sep = "";
    for (int s = 0; s < m->nstates; s++)
        if (next & P3D_NODE_TO(s)) {
            fprintf(f, "%s%s", sep, m->sname(s));
            sep = ", ";
        }
    if (next & P3D_NODE_STAY)
        fprintf(f, "%sstay", sep);
}

static void print_kind(FILE *f, const machine *m, int s, int kind, const char *what)
{
    const char *sep = what;
    for (int e = 0; e < m->nevents; e++)
        if (cell(m, s, e).kind == kind) {
            fprintf(f, "%s`%s`", sep, m->ename(e));
            sep = ", ";
        }
    if (sep != what)
        fprintf(f, ".\n");
}

static void print_table(FILE *f, const machine *m)
{
    for (int s = 0; s < m->nstates; s++) {
        int head = 0;
        fprintf(f, "#### %s\n\n", m->sname(s));
        for (int e = 0; e < m->nevents; e++) {
            p3d_node_cell x = cell(m, s, e);
            if (x.kind != P3D_NODE_CELL_RUN)
                continue;
            if (!head++)
                fprintf(f, "| event | handler | next state |\n| --- | --- | --- |\n");
            fprintf(f, "| `%s` | `%s` | ", m->ename(e), x.handler);
            print_next(f, m, x.next);
            fprintf(f, " |\n");
        }
        fprintf(f, head ? "\n" : "No handler runs: the loop is over.\n");
        print_kind(f, m, s, P3D_NODE_CELL_IGNORED, "Ignored: ");
        print_kind(f, m, s, P3D_NODE_CELL_IMPOSSIBLE, "Cannot happen: ");
        print_kind(f, m, s, 0, "NOT IN THE TABLE: ");
        if (s + 1 < m->nstates)
            fprintf(f, "\n");
    }
}

/* ---- well-formed --------------------------------------------------------------- */

static void check_cells(const machine *m)
{
    int bad = 0, run = 0, ignored = 0, impossible = 0;
    unsigned all = (1u << m->nstates) - 1;
    for (int s = 0; s < m->nstates; s++)
        for (int e = 0; e < m->nevents; e++) {
            p3d_node_cell x = cell(m, s, e);
            const char *why = NULL;
            if (!x.kind)
                why = "not in the table";
            else if (x.kind == P3D_NODE_CELL_RUN && (!x.handler || !x.handler[0] || !x.next))
                why = "a handler without a name or a next state";
            else if (x.kind == P3D_NODE_CELL_RUN && (x.next & P3D_NODE_TO(s)))
                why = "names its own state (that is \"stay\")";
            else if (x.next & ~(all | P3D_NODE_STAY))
                why = "moves to a state that does not exist";
            else if (x.kind == P3D_NODE_CELL_IGNORED && (x.handler || x.next != P3D_NODE_STAY))
                why = "ignored, yet with a handler or a move";
            else if (x.kind == P3D_NODE_CELL_IMPOSSIBLE && (x.handler || x.next))
                why = "cannot happen, yet with a handler or a move";
            run += x.kind == P3D_NODE_CELL_RUN;
            ignored += x.kind == P3D_NODE_CELL_IGNORED;
            impossible += x.kind == P3D_NODE_CELL_IMPOSSIBLE;
            if (why) {
                fprintf(stderr, "%s table: (%s, %s): %s\n", m->name, m->sname(s), m->ename(e), why);
                bad++;
            }
        }
    printf("%s table: %d states x %d events = %d cells: %d handled, %d ignored, %d cannot happen\n", m->name,
           m->nstates, m->nevents, m->nstates * m->nevents, run, ignored, impossible);
    assert_int_equal(bad, 0);
    assert_int_equal(run + ignored + impossible, m->nstates * m->nevents);
    p3d_node_cell out;
    assert_int_equal(m->cell(m->nstates, 0, &out), 0);
    assert_int_equal(m->cell(0, m->nevents, &out), 0);
    assert_int_equal(out.kind, 0);
    assert_string_equal(m->sname(m->nstates), "?");
    assert_string_equal(m->ename(-1), "?");
}

/* The states reachable from those in from (a mask), through handled cells. */
static unsigned reach(const machine *m, unsigned from)
{
    unsigned seen = from, grew = 1;
    while (grew) {
        grew = 0;
        for (int s = 0; s < m->nstates; s++)
            for (int e = 0; seen & 1u << s && e < m->nevents; e++) {
                p3d_node_cell x = cell(m, s, e);
                unsigned to = x.kind == P3D_NODE_CELL_RUN ? x.next & ~P3D_NODE_STAY : 0;
                if (to & ~seen) {
                    seen |= to;
                    grew = 1;
                }
            }
    }
    return seen;
}

/* The model walk: from the first state every state is reached (so every
 * handled cell can run), and from every state an end is. */
static void check_walk(const machine *m)
{
    unsigned all = (1u << m->nstates) - 1;
    assert_int_equal(reach(m, 1u << m->first), all);
    for (int s = 0; s < m->nstates; s++)
        if (!(reach(m, 1u << s) & (unsigned)m->end_mask))
            fail_msg("%s table: no way from %s to an end", m->name, m->sname(s));
    /* the end states run nothing and lead nowhere */
    for (int s = 0; s < m->nstates; s++)
        for (int e = 0; (m->end_mask & 1 << s) && e < m->nevents; e++)
            assert_int_not_equal(cell(m, s, e).kind, P3D_NODE_CELL_RUN);
}

/* The cells that move into state to (from any state but to). */
static int entries(const machine *m, int to, int *from, int *ev, int max)
{
    int n = 0;
    for (int s = 0; s < m->nstates; s++)
        for (int e = 0; e < m->nevents; e++)
            if (s != to && cell(m, s, e).next & P3D_NODE_TO(to) && n < max) {
                from[n] = s;
                ev[n++] = e;
            }
    return n;
}

static void test_relay_cells(void **st)
{
    (void)st;
    check_cells(&relay_m);
    check_walk(&relay_m);
}

static void test_agent_cells(void **st)
{
    (void)st;
    check_cells(&agent_m);
    check_walk(&agent_m);
}

/* The relay's shape. */
static void test_relay_shape(void **st)
{
    (void)st;
    const machine *m = &relay_m;
    unsigned live = P3D_NODE_TO(P3D_RELAY_RELAYING) | P3D_NODE_TO(P3D_RELAY_RETIRING) | P3D_NODE_TO(P3D_RELAY_PARKED) |
                    P3D_NODE_TO(P3D_RELAY_FAILOVER);
    /* never two agents at once: an agent is forked again only from PARKED,
     * where none is left (no agent event can happen there), on the new
     * placement */
    int from[64], ev[64];
    int n = entries(m, P3D_RELAY_RELAYING, from, ev, 64);
    assert_int_equal(n, 1);
    assert_int_equal(from[0], P3D_RELAY_PARKED);
    assert_int_equal(ev[0], P3D_RELAY_EV_PLACEMENT);
    assert_int_equal(cell(m, P3D_RELAY_PARKED, P3D_RELAY_EV_AGENT_PACKET).kind, P3D_NODE_CELL_IMPOSSIBLE);
    assert_int_equal(cell(m, P3D_RELAY_PARKED, P3D_RELAY_EV_AGENT_SILENT).kind, P3D_NODE_CELL_IMPOSSIBLE);
    /* PARKED is reached only once the agent ended (retired) or was killed
     * for a failover */
    n = entries(m, P3D_RELAY_PARKED, from, ev, 64);
    for (int k = 0; k < n; k++)
        assert_true((from[k] == P3D_RELAY_RETIRING && ev[k] == P3D_RELAY_EV_AGENT_ENDED) ||
                    (from[k] == P3D_RELAY_FAILOVER && ev[k] == P3D_RELAY_EV_DIAL));
    for (int e = 0; e < m->nevents; e++) {
        /* nothing leads back from STOPPING: after a stop order, a signal or
         * a lost leader without a successor no rank of this node runs again */
        assert_int_equal(cell(m, P3D_RELAY_STOPPING, e).next & live, 0);
        /* FAILOVER only dials */
        if (e != P3D_RELAY_EV_DIAL)
            assert_int_equal(cell(m, P3D_RELAY_FAILOVER, e).kind, P3D_NODE_CELL_IMPOSSIBLE);
    }
    for (int s = 0; s < m->nstates; s++) {
        if (!(P3D_NODE_TO(s) & live) || s == P3D_RELAY_FAILOVER)
            continue;
        /* a stop order, a signal, a forged frame stop the node wherever its
         * agent may run */
        assert_true(cell(m, s, P3D_RELAY_EV_STOP).next & P3D_NODE_TO(P3D_RELAY_STOPPING));
        assert_true(cell(m, s, P3D_RELAY_EV_SIGNAL).next & P3D_NODE_TO(P3D_RELAY_STOPPING));
        assert_true(cell(m, s, P3D_RELAY_EV_FORGED).next & P3D_NODE_TO(P3D_RELAY_STOPPING));
        /* fencing: a lost or silent leader ends the agent (a failover kills
         * it, or the node stops), never keeps it running */
        unsigned gone = P3D_NODE_TO(P3D_RELAY_FAILOVER) | P3D_NODE_TO(P3D_RELAY_STOPPING);
        assert_int_equal(cell(m, s, P3D_RELAY_EV_LEADER_LOST).next, gone);
        assert_int_equal(cell(m, s, P3D_RELAY_EV_LEADER_SILENT).next, gone);
    }
    /* the successor takes over only from a dial */
    n = entries(m, P3D_RELAY_SUCCEEDING, from, ev, 64);
    assert_int_equal(n, 1);
    assert_int_equal(from[0], P3D_RELAY_FAILOVER);
    /* a new placement restarts only a parked node; a relaying one adopts
     * it in place (the cluster grew: a node joined) and stays; anywhere
     * else it means nothing */
    for (int s = 0; s < m->nstates; s++)
        if (s != P3D_RELAY_PARKED && s != P3D_RELAY_RELAYING)
            assert_int_not_equal(cell(m, s, P3D_RELAY_EV_PLACEMENT).kind, P3D_NODE_CELL_RUN);
    assert_int_equal(cell(m, P3D_RELAY_RELAYING, P3D_RELAY_EV_PLACEMENT).next, P3D_NODE_STAY);
}

/* The agent's shape. */
static void test_agent_shape(void **st)
{
    (void)st;
    const machine *m = &agent_m;
    unsigned ranks = P3D_NODE_TO(P3D_AGENT_STARTING) | P3D_NODE_TO(P3D_AGENT_RUNNING) | P3D_NODE_TO(P3D_AGENT_HOLDING) |
                     P3D_NODE_TO(P3D_AGENT_STOPPING) | P3D_NODE_TO(P3D_AGENT_IDLE);
    /* never two generations at once: a generation starts only from
     * STARTING, when no rank runs (ALL_EXITED) */
    int from[64], ev[64];
    int n = entries(m, P3D_AGENT_RUNNING, from, ev, 64);
    assert_int_equal(n, 1);
    assert_int_equal(from[0], P3D_AGENT_STARTING);
    assert_int_equal(ev[0], P3D_AGENT_EV_ALL_EXITED);
    /* a restart order is the only way into STARTING */
    n = entries(m, P3D_AGENT_STARTING, from, ev, 64);
    for (int k = 0; k < n; k++)
        assert_int_equal(ev[k], P3D_AGENT_EV_RESTART);
    for (int e = 0; e < m->nevents; e++) {
        /* after a stop order, a signal, a lost upstream or a fence no rank
         * starts again: ENDING leads to EXITED only */
        assert_int_equal(cell(m, P3D_AGENT_ENDING, e).next & ranks, 0);
    }
    for (int s = 0; s < m->nstates; s++) {
        if (!(P3D_NODE_TO(s) & ranks))
            continue;
        /* fencing and the job's end, wherever ranks may run */
        assert_int_equal(cell(m, s, P3D_AGENT_EV_FENCE).next, P3D_NODE_TO(P3D_AGENT_ENDING));
        assert_int_equal(cell(m, s, P3D_AGENT_EV_UP_LOST).next, P3D_NODE_TO(P3D_AGENT_ENDING));
        assert_int_equal(cell(m, s, P3D_AGENT_EV_SIGNAL).next, P3D_NODE_TO(P3D_AGENT_ENDING));
        assert_int_equal(cell(m, s, P3D_AGENT_EV_STOP).next, P3D_NODE_TO(P3D_AGENT_ENDING));
        /* the controller hears of every rank failure while ranks run */
        if (s == P3D_AGENT_RUNNING || s == P3D_AGENT_HOLDING)
            assert_int_equal(cell(m, s, P3D_AGENT_EV_RANK_FAIL).kind, P3D_NODE_CELL_RUN);
    }
    /* no rank runs in IDLE: a failure cannot happen there */
    assert_int_equal(cell(m, P3D_AGENT_IDLE, P3D_AGENT_EV_RANK_FAIL).kind, P3D_NODE_CELL_IMPOSSIBLE);
    /* the agent exits only once no rank runs */
    for (int s = 0; s < m->nstates; s++)
        for (int e = 0; e < m->nevents; e++)
            if (cell(m, s, e).next & P3D_NODE_TO(P3D_AGENT_EXITED))
                assert_int_equal(e, P3D_AGENT_EV_ALL_EXITED);
}

/* ---- docs/agent.md ------------------------------------------------------------ */

static char *printed(const machine *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    print_table(f, m);
    fclose(f);
    return buf;
}

/* docs/agent.md holds each printed table between its markers. */
static void check_doc(const machine *m)
{
    char begin[160], end[80];
    snprintf(begin, sizeof begin, "<!-- %s table: begin (build/tests/test_node_tables --print %s) -->\n", m->name,
             m->name);
    snprintf(end, sizeof end, "<!-- %s table: end -->\n", m->name);
    char *t = printed(m);
    const char *why = doc_block_check("agent.md", begin, end, t);
    if (why) {
        fprintf(stderr,
                "docs/agent.md: the %s table: %s; print it with build/tests/test_node_tables --print %s and "
                "paste it between the markers %s and %s. The code's table:\n%s",
                m->name, why, m->name, begin, end, t);
        fail_msg("docs/agent.md is out of date");
    }
    free(t);
}

static void test_docs(void **st)
{
    (void)st;
    check_doc(&relay_m);
    check_doc(&agent_m);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--print")) {
        const machine *m = argc > 2 && !strcmp(argv[2], "agent")   ? &agent_m
                           : argc > 2 && !strcmp(argv[2], "relay") ? &relay_m
                                                                   : NULL;
        if (!m) {
            fprintf(stderr, "usage: test_node_tables --print relay|agent\n");
            return 2;
        }
        print_table(stdout, m);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_cells), cmocka_unit_test(test_agent_cells), cmocka_unit_test(test_relay_shape),
        cmocka_unit_test(test_agent_shape), cmocka_unit_test(test_docs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
