/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_ctl_table.c — the job controller's table (controller.h,
 * controller_table.c) read as data: every (state, event) cell is a
 * handler with the states it may move to, or ignored, or one that cannot
 * happen — none is left out; the rows keep the job's one-way shape (no
 * way back from STOPPING, nothing runs in DONE, completions handled where
 * they are waited for); and docs/controller.md shows the table exactly as
 * the code has it.
 *
 *   build/tests/test_ctl_table --print   prints the table (Markdown), to
 *                                        paste into docs/controller.md
 *                                        between its two markers
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller.h"
#include "doc_block.h"

#define BEGIN "<!-- table: begin (build/tests/test_ctl_table --print) -->\n"
#define END "<!-- table: end -->\n"

static p3d_ctl_cell cell(int s, int e)
{
    p3d_ctl_cell x;
    p3d_ctl_cell_info((p3d_ctl_state)s, (p3d_ctl_event)e, &x);
    return x;
}

static const char *sn(int s)
{
    return p3d_ctl_state_name((p3d_ctl_state)s);
}

static const char *en(int e)
{
    return p3d_ctl_event_name((p3d_ctl_event)e);
}

/* Every cell filled, and filled consistently with its kind. */
static void test_every_cell(void **st)
{
    (void)st;
    int bad = 0, run = 0, ignored = 0, impossible = 0;
    for (int s = 0; s < P3D_CTL_NSTATES; s++)
        for (int e = 0; e < P3D_CTL_NEVENTS; e++) {
            p3d_ctl_cell x = cell(s, e);
            const char *why = NULL;
            if (!x.kind)
                why = "not in the table";
            else if (x.kind == P3D_CTL_CELL_RUN && (!x.handler || !x.handler[0] || !x.next))
                why = "a handler without a name or a next state";
            else if (x.kind == P3D_CTL_CELL_RUN && (x.next & (1u << s)))
                why = "names its own state (that is \"stay\")";
            else if (x.kind == P3D_CTL_CELL_IGNORED && (x.handler || x.next != P3D_CTL_STAY_BIT))
                why = "ignored, yet with a handler or a move";
            else if (x.kind == P3D_CTL_CELL_IMPOSSIBLE && (x.handler || x.next))
                why = "cannot happen, yet with a handler or a move";
            run += x.kind == P3D_CTL_CELL_RUN;
            ignored += x.kind == P3D_CTL_CELL_IGNORED;
            impossible += x.kind == P3D_CTL_CELL_IMPOSSIBLE;
            if (why) {
                fprintf(stderr, "table: (%s, %s): %s\n", sn(s), en(e), why);
                bad++;
            }
        }
    printf("table: %d states x %d events = %d cells: %d handled, %d ignored, %d cannot happen\n", P3D_CTL_NSTATES,
           P3D_CTL_NEVENTS, P3D_CTL_NSTATES * P3D_CTL_NEVENTS, run, ignored, impossible);
    assert_int_equal(bad, 0);
    assert_int_equal(run + ignored + impossible, P3D_CTL_NSTATES * P3D_CTL_NEVENTS);
    p3d_ctl_cell out;
    assert_int_equal(p3d_ctl_cell_info(P3D_CTL_NSTATES, P3D_CTL_EV_UP, &out), 0);
    assert_int_equal(p3d_ctl_cell_info(P3D_CTL_RUNNING, P3D_CTL_NEVENTS, &out), 0);
    assert_int_equal(out.kind, 0);
}

/* The job's shape, as the table must keep it. */
static void test_shape(void **st)
{
    (void)st;
    unsigned live = 1u << P3D_CTL_STARTING | 1u << P3D_CTL_RUNNING | 1u << P3D_CTL_CHECKING | 1u << P3D_CTL_RESTARTING |
                    1u << P3D_CTL_REPLACING | 1u << P3D_CTL_TAKEOVER | 1u << P3D_CTL_SHRINKING | 1u << P3D_CTL_GROWING;
    for (int e = 0; e < P3D_CTL_NEVENTS; e++) {
        /* nothing runs once the job is over; nothing leads back from the stop */
        assert_int_not_equal(cell(P3D_CTL_DONE, e).kind, P3D_CTL_CELL_RUN);
        assert_int_equal(cell(P3D_CTL_STOPPING, e).next & live, 0);
        /* a signal, an abort, a node's signal stop the job wherever it runs */
        for (int s = 0; s < P3D_CTL_STOPPING; s++)
            if (e == P3D_CTL_EV_SIGNAL || e == P3D_CTL_EV_ABORT || e == P3D_CTL_EV_NODE_SIG)
                assert_true(cell(s, e).next & 1u << P3D_CTL_STOPPING);
    }
    assert_true(cell(P3D_CTL_TAKEOVER, P3D_CTL_EV_ABORT).next & 1u << P3D_CTL_STOPPING);
    /* a width change retires every agent like a replacement: a signal, an
     * abort or a preemption stops it, all gone starts the ranks again, a
     * loss on the way replaces or shrinks once more; GROW only in RUNNING */
    for (int s = P3D_CTL_SHRINKING; s <= P3D_CTL_GROWING; s++) {
        assert_true(cell(s, P3D_CTL_EV_SIGNAL).next & 1u << P3D_CTL_STOPPING);
        assert_true(cell(s, P3D_CTL_EV_PREEMPT).next & 1u << P3D_CTL_STOPPING);
        assert_true(cell(s, P3D_CTL_EV_ALL_GONE).next & 1u << P3D_CTL_RESTARTING);
        assert_true(cell(s, P3D_CTL_EV_GONE).next & 1u << P3D_CTL_REPLACING);
    }
    assert_true(cell(P3D_CTL_RUNNING, P3D_CTL_EV_GONE).next & 1u << P3D_CTL_SHRINKING);
    assert_true(cell(P3D_CTL_RUNNING, P3D_CTL_EV_GROW).next & 1u << P3D_CTL_GROWING);
    for (int s = 0; s < P3D_CTL_NSTATES; s++)
        if (s != P3D_CTL_RUNNING)
            assert_int_equal(cell(s, P3D_CTL_EV_GROW).kind, P3D_CTL_CELL_IMPOSSIBLE);
    /* the completions, each where it is waited for */
    assert_int_equal(cell(P3D_CTL_STARTING, P3D_CTL_EV_ALL_UP).next, 1u << P3D_CTL_RUNNING);
    assert_int_equal(cell(P3D_CTL_RESTARTING, P3D_CTL_EV_ALL_UP).next, 1u << P3D_CTL_RUNNING);
    assert_int_equal(cell(P3D_CTL_RUNNING, P3D_CTL_EV_ALL_DONE).next, 1u << P3D_CTL_STOPPING);
    assert_int_equal(cell(P3D_CTL_STOPPING, P3D_CTL_EV_ALL_GONE).next, 1u << P3D_CTL_DONE);
    assert_true(cell(P3D_CTL_REPLACING, P3D_CTL_EV_ALL_GONE).next & 1u << P3D_CTL_RESTARTING);
    assert_true(cell(P3D_CTL_TAKEOVER, P3D_CTL_EV_TAKEOVER_READY).next & 1u << P3D_CTL_REPLACING);
    /* only DONE is reached by ALL_GONE from STOPPING: the one way to DONE */
    for (int s = 0; s < P3D_CTL_NSTATES; s++)
        for (int e = 0; e < P3D_CTL_NEVENTS; e++)
            if (cell(s, e).next & 1u << P3D_CTL_DONE)
                assert_true(s == P3D_CTL_STOPPING && e == P3D_CTL_EV_ALL_GONE);
    /* a slow node is acted on only while the ranks run */
    for (int s = 0; s < P3D_CTL_NSTATES; s++)
        if (s != P3D_CTL_RUNNING)
            assert_int_not_equal(cell(s, P3D_CTL_EV_SLOW).kind, P3D_CTL_CELL_RUN);
    /* preemption: where ranks run the warning starts the checkpoint wait;
     * where a recovery is under way the job stops at once; PREEMPTING
     * only ever stops (no restart, no replacement, no takeover), and a
     * signal, an abort or a node's signal may stop it */
    unsigned back = live | 1u << P3D_CTL_PREEMPTING;
    assert_int_equal(cell(P3D_CTL_STARTING, P3D_CTL_EV_PREEMPT).next, 1u << P3D_CTL_PREEMPTING);
    assert_int_equal(cell(P3D_CTL_RUNNING, P3D_CTL_EV_PREEMPT).next, 1u << P3D_CTL_PREEMPTING);
    assert_int_equal(cell(P3D_CTL_RESTARTING, P3D_CTL_EV_PREEMPT).next, 1u << P3D_CTL_PREEMPTING);
    assert_int_equal(cell(P3D_CTL_CHECKING, P3D_CTL_EV_PREEMPT).next, 1u << P3D_CTL_STOPPING);
    assert_int_equal(cell(P3D_CTL_REPLACING, P3D_CTL_EV_PREEMPT).next, 1u << P3D_CTL_STOPPING);
    assert_int_equal(cell(P3D_CTL_TAKEOVER, P3D_CTL_EV_PREEMPT).next, 1u << P3D_CTL_STOPPING);
    for (int e = 0; e < P3D_CTL_NEVENTS; e++) {
        assert_int_equal(cell(P3D_CTL_PREEMPTING, e).next & back, 0);
        if (e == P3D_CTL_EV_SIGNAL || e == P3D_CTL_EV_ABORT || e == P3D_CTL_EV_NODE_SIG || e == P3D_CTL_EV_TICK ||
            e == P3D_CTL_EV_ALL_CKPT || e == P3D_CTL_EV_ALL_DONE || e == P3D_CTL_EV_ALL_GONE)
            assert_true(cell(P3D_CTL_PREEMPTING, e).next & 1u << P3D_CTL_STOPPING);
    }
    for (int s = 0; s < P3D_CTL_NSTATES; s++)
        if (s != P3D_CTL_PREEMPTING)
            assert_int_equal(cell(s, P3D_CTL_EV_ALL_CKPT).kind, P3D_CTL_CELL_IMPOSSIBLE);
}

static char *printed(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    p3d_ctl_table_print(f);
    fclose(f);
    return buf;
}

/* docs/controller.md holds the printed table between its markers. */
static void test_docs(void **st)
{
    (void)st;
    char *t = printed();
    const char *why = doc_block_check("controller.md", BEGIN, END, t);
    if (why) {
        fprintf(stderr,
                "table: docs/controller.md: %s; print it with build/tests/test_ctl_table --print and paste it "
                "between the markers. The code's table:\n%s",
                why, t);
        fail_msg("docs/controller.md is out of date");
    }
    free(t);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--print")) {
        p3d_ctl_table_print(stdout);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_cell),
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_docs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
