/* SPDX-License-Identifier: BSD-3-Clause */
/* test_launch_controller.c — the job controller's state machine
 * (controller.c) driven by hand-made events with recording ops, and the
 * agent protocol's encoder/decoder (agent_proto.c): what every transport
 * relies on, without a process or a socket. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller.h"

typedef struct rec {
    char sent[4096]; /* "a:packet-header|" per send */
    char said[4096];
    int killed[4];
} rec;

static void r_send(void *ctx, int a, const p3d_amsg *m)
{
    rec *r = ctx;
    char buf[256];
    int n = p3d_amsg_encode(m, buf, sizeof buf);
    assert_true(n > 0);
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = 0;
    size_t l = strlen(r->sent);
    snprintf(r->sent + l, sizeof r->sent - l, "%d:%s|", a, buf);
}

static void r_kill(void *ctx, int a)
{
    ((rec *)ctx)->killed[a]++;
}

static void r_say(void *ctx, const char *text)
{
    rec *r = ctx;
    size_t l = strlen(r->said);
    snprintf(r->said + l, sizeof r->said - l, "%s", text);
}

static const char *names[] = {"n0", "n1", "n2"};

static p3d_ctl *mk(rec *r, int n, int max_restarts, double timeout)
{
    memset(r, 0, sizeof *r);
    p3d_ctl_cfg cfg = {
        .nagents = n, .names = names, .nranks = 8, .max_restarts = max_restarts, .grace = 3, .timeout = timeout};
    p3d_ctl_ops ops = {.ctx = r, .send = r_send, .kill = r_kill, .say = r_say};
    p3d_ctl *c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(c);
    return c;
}

static void msg(p3d_ctl *c, int a, const char *pkt, double now)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", pkt);
    p3d_amsg m;
    assert_int_equal(p3d_amsg_decode(buf, strlen(buf), &m), 0);
    p3d_ctl_message(c, a, &m, now);
}

static void test_proto_roundtrip(void **st)
{
    (void)st;
    p3d_amsg in[] = {
        {.type = P3D_AM_FAIL,
         .gen = 2,
         .code = 137,
         .rank = 13,
         .sig = 9,
         .text = "par3drun: root cause: x\n  y\n",
         .step = -1,
         .errts = -1},
        {.type = P3D_AM_FAIL, .gen = 0, .code = 1, .rank = -1, .step = -1, .errts = -1},
        {.type = P3D_AM_FAIL,
         .gen = 3,
         .code = 1,
         .rank = 5,
         .step = 3,
         .err = "ValueError: bad batch",
         .where = "/w/train.py",
         .errline = 12,
         .errts = 1796578499,
         .text = "par3drun: root cause: rank 5\n"},
        {.type = P3D_AM_DONE, .gen = 4},
        {.type = P3D_AM_UP, .gen = 1, .nranks = 8},
        {.type = P3D_AM_SIGNAL, .sig = 2},
        {.type = P3D_AM_RESTART, .gen = 3},
        {.type = P3D_AM_STOP, .sig = 15, .code = 124},
        {.type = P3D_AM_FORWARD, .sig = 10},
        {.type = P3D_AM_CHECK, .seq = 7},
        {.type = P3D_AM_HEALTH, .seq = 7, .ok = 0, .text = "its process ended with exit code 1: gpu 3 missing"},
        {.type = P3D_AM_HEALTH, .seq = 2147483647, .ok = 1, .text = "passed"},
        {.type = P3D_AM_BEAT, .ms = 30000},
        {.type = P3D_AM_BEAT, .ms = 0},
        {.type = P3D_AM_RESUMED, .gen = 4},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char buf[512];
        int n = p3d_amsg_encode(&in[i], buf, sizeof buf - 1);
        assert_true(n > 0);
        p3d_amsg out;
        assert_int_equal(p3d_amsg_decode(buf, (size_t)n, &out), 0);
        assert_int_equal(out.type, in[i].type);
        assert_int_equal(out.gen, in[i].gen);
        assert_int_equal(out.code, in[i].code);
        assert_int_equal(out.rank, in[i].rank);
        assert_int_equal(out.sig, in[i].sig);
        assert_int_equal(out.nranks, in[i].nranks);
        assert_int_equal(out.seq, in[i].seq);
        assert_int_equal(out.ok, in[i].ok);
        assert_int_equal(out.ms, in[i].ms);
        assert_string_equal(out.text, in[i].text ? in[i].text : "");
        if (in[i].type == P3D_AM_FAIL) {
            assert_int_equal(out.step, in[i].step);
            assert_int_equal(out.errline, in[i].errline);
            assert_int_equal(out.errts, in[i].errts);
            assert_int_equal(p3d_amsg_line(out.err), p3d_amsg_line(in[i].err));
            assert_int_equal(p3d_amsg_line(out.where), p3d_amsg_line(in[i].where));
            if (in[i].err)
                assert_memory_equal(out.err, in[i].err, strlen(in[i].err));
            if (in[i].where)
                assert_memory_equal(out.where, in[i].where, strlen(in[i].where));
        }
    }
    /* the error line is one line: a newline in it ends it (the frame line
     * and the text stay where they are) */
    p3d_amsg f = {.type = P3D_AM_FAIL,
                  .gen = 1,
                  .code = 1,
                  .rank = 0,
                  .step = 2,
                  .errts = -1,
                  .err = "E: two\nlines",
                  .where = "a.py",
                  .text = "t\n"},
             out;
    char buf[512];
    int n = p3d_amsg_encode(&f, buf, sizeof buf - 1);
    /* the packet is left as it came (a relay forwards it): decoded twice */
    char copy[512];
    memcpy(copy, buf, (size_t)n + 1);
    assert_int_equal(p3d_amsg_decode(buf, (size_t)n, &out), 0);
    assert_memory_equal(buf, copy, (size_t)n);
    assert_int_equal(p3d_amsg_line(out.err), 6);
    assert_memory_equal(out.err, "E: two", 6);
    assert_int_equal(p3d_amsg_line(out.where), 4);
    assert_memory_equal(out.where, "a.py", 4);
    assert_string_equal(out.text, "t\n");
}

static void test_proto_rejects(void **st)
{
    (void)st;
    const char *bad[] = {
        "",
        "X 1\n",
        "B 5000\n",
        "R 1\n",
        "f 1 2 3\n",
        "f 1 2 3 65 -1 0 -1\n\n\n",
        "f -1 2 3 0\n",
        "f 1 256 3 0 -1 0 -1\n\n\n",
        "f 1 2 -2 0\n",
        "d\n",
        "d 1 2\n",
        "d 1\ntext",
        "t 15\n",
        "t 15 0x\n",
        "r 99999999999\n",
        "u  10\n",
        "a 1\n",
        "s +2\n",
        /* the health check's request and answer: seq >= 0, ok 0 or 1, a
         * request carries no text */
        "c\n",
        "c -1\n",
        "c 1 2\n",
        "c 1\nsh -c rm",
        "c 2147483648\n",
        "h 1\n",
        "h 1 2\nx",
        "h -1 1\n",
        "h 1 1 1\n",
        "h 1 -1\n",
        "h x 1\n",
        /* heartbeat: exactly one non-negative ms field, no text */
        "b\n",
        "b -1\n",
        "b 1 2\n",
        "b 1\nx",
        "b 2147483648\n",
        "b 5s\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", bad[i]);
        p3d_amsg m;
        if (p3d_amsg_decode(buf, strlen(buf), &m) == 0)
            fail_msg("accepted malformed packet '%s'", bad[i]);
    }
    /* an embedded NUL is not a packet */
    char nul[] = "d 1\0junk";
    p3d_amsg m;
    assert_int_equal(p3d_amsg_decode(nul, sizeof nul - 1, &m), -1);
    /* a long text is cut to the buffer, never overflows it */
    char big[300];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    char out[200];
    p3d_amsg f = {.type = P3D_AM_FAIL, .gen = 1, .code = 2, .rank = 3, .text = big};
    int n = p3d_amsg_encode(&f, out, sizeof out);
    assert_int_equal(n, (int)strlen(out));
    assert_true(n < (int)sizeof out);
    /* the heartbeat interval: a quarter of the timeout, at most 5 s */
    assert_true(p3d_beat_interval(0) == 0);
    assert_true(p3d_beat_interval(3) == 0.75);
    assert_true(p3d_beat_interval(30) == 5.0);
}

/* A job stopped during a recovery has no recovery figure (never a 0.00 s
 * that reads as an instant one) and says it ended during one. */
static void test_stopped_during_recovery(void **st)
{
    (void)st;
    rec r;
    p3d_ctl *c = mk(&r, 2, 2, 0);
    msg(c, 0, "a 0 4\n", 0.1);
    msg(c, 1, "a 0 4\n", 0.2);
    assert_true(p3d_ctl_recovery_max(c) < 0);
    assert_int_equal(p3d_ctl_recovering(c), 0);
    msg(c, 1, "f 0 3 6 0 -1 0 -1\n\n\nrank 6\n", 1.0);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RESTARTING);
    msg(c, 0, "a 1 4\n", 1.5);
    msg(c, 1, "s 15\n", 1.6); /* stopped before agent 1 is up again */
    p3d_ctl_gone(c, 0, "x", 1.7);
    p3d_ctl_gone(c, 1, "x", 1.8);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_restarts(c), 1);
    assert_true(p3d_ctl_recovery_max(c) < 0);
    assert_int_equal(p3d_ctl_recovering(c), 1);
    p3d_ctl_free(c);
}

static void test_restart_then_root_cause(void **st)
{
    (void)st;
    rec r;
    p3d_ctl *c = mk(&r, 2, 1, 0);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_STARTING);
    msg(c, 0, "a 0 4\n", 0.1);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_STARTING);
    msg(c, 1, "a 0 4\n", 0.2);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RUNNING);
    assert_true(p3d_ctl_deadline(c) == 0); /* nothing wakes an idle job */
    msg(c, 1, "f 0 3 6 0 -1 0 -1\n\n\npar3drun: root cause: rank 6 ...\n", 1.0);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RESTARTING);
    /* the verdict first (a decision on the first failure: no window here) */
    assert_string_equal(r.said, "par3drun: fault: node: only node n1's ranks failed (rank 6, exit code 3) while the "
                                "ranks of 1 other node ran on; restart in place\n"
                                "par3drun: rank 6 failed (exit code 3); restarting all ranks (restart 1 of 1)\n");
    assert_string_equal(r.sent, "-1:r 1|");
    /* the other agent's failure of the old generation is a consequence */
    msg(c, 0, "f 0 143 2 15 -1 0 -1\n\n\n", 1.1);
    assert_string_equal(r.sent, "-1:r 1|");
    msg(c, 0, "a 1 4\n", 1.5);
    msg(c, 1, "a 1 4\n", 2.0);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RUNNING);
    assert_true(p3d_ctl_recovery_max(c) > 0.99 && p3d_ctl_recovery_max(c) < 1.01);
    msg(c, 0, "f 1 7 1 0 -1 0 -1\n\n\npar3drun: root cause: rank 1 the end\n", 3.0);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_STOPPING);
    assert_string_equal(r.sent, "-1:r 1|-1:t 15 7|");
    assert_string_equal(p3d_ctl_summary(c),
                        "par3drun: root cause: rank 1 the end\npar3drun: fault: node: only node "
                        "n0's ranks failed (rank 1, exit code 7) while the ranks of 1 other node ran "
                        "on; stop: no restart left (--max-restarts 1)\n");
    assert_string_equal(p3d_ctl_fault(c), "node");
    p3d_ctl_gone(c, 0, "x", 3.5);
    p3d_ctl_gone(c, 1, "x", 3.6);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(c), 7);
    assert_int_equal(p3d_ctl_restarts(c), 1);
    p3d_ctl_free(c);
}

static void test_all_done(void **st)
{
    (void)st;
    rec r;
    p3d_ctl *c = mk(&r, 2, 0, 0);
    msg(c, 0, "d 0\n", 1);
    assert_string_equal(r.sent, "");
    msg(c, 1, "d 0\n", 1);
    assert_string_equal(r.sent, "-1:t 0 0|");
    p3d_ctl_gone(c, 0, NULL, 1);
    p3d_ctl_gone(c, 1, NULL, 1);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(c), 0);
    assert_string_equal(p3d_ctl_summary(c), "");
    assert_string_equal(r.said, "");
    p3d_ctl_free(c);
}

static void test_lost_agent(void **st)
{
    (void)st;
    rec r;
    p3d_ctl *c = mk(&r, 3, 5, 0);
    p3d_ctl_gone(c, 2, "its process was killed by signal 9 (KILL)", 1);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_STOPPING);
    assert_string_equal(p3d_ctl_summary(c),
                        "par3drun: root cause: lost the agent of node n2 (node rank 2): its process was killed by "
                        "signal 9 (KILL)\n");
    assert_string_equal(r.sent, "-1:t 15 1|");
    /* a lost agent is not restarted in place: no R */
    p3d_ctl_gone(c, 0, NULL, 2);
    p3d_ctl_gone(c, 1, NULL, 2);
    assert_int_equal(p3d_ctl_code(c), P3D_EXIT_LOST);
    p3d_ctl_free(c);
}

static void test_deadlines(void **st)
{
    (void)st;
    rec r;
    p3d_ctl *c = mk(&r, 2, 0, 0);
    p3d_ctl_signal(c, SIGINT, 10);
    assert_string_equal(r.said, "par3drun: SIGINT: stopping 8 ranks on 2 nodes (SIGINT to every rank, SIGKILL "
                                "after the 3 s grace; a second signal skips it)\n");
    assert_string_equal(r.sent, "-1:t 2 130|");
    /* the agents have the grace plus the slack */
    assert_true(p3d_ctl_deadline(c) == 10 + 3 + P3D_CTL_SLACK);
    p3d_ctl_gone(c, 0, NULL, 11);
    p3d_ctl_tick(c, 10 + 3 + P3D_CTL_SLACK - 0.01);
    assert_int_equal(r.killed[1], 0);
    p3d_ctl_tick(c, 10 + 3 + P3D_CTL_SLACK);
    assert_int_equal(r.killed[0], 0);
    assert_int_equal(r.killed[1], 1);
    /* ended by force, yet never reported gone: the controller gives up */
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_STOPPING);
    p3d_ctl_tick(c, 10 + 3 + 2 * P3D_CTL_SLACK);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(c), 130);
    p3d_ctl_free(c);

    /* a second signal: SIGKILL now, the deadline shrinks to the slack */
    c = mk(&r, 1, 0, 0);
    p3d_ctl_signal(c, SIGTERM, 0);
    p3d_ctl_signal(c, SIGTERM, 1);
    assert_string_equal(r.sent, "-1:t 15 143|-1:t 9 143|");
    assert_true(p3d_ctl_deadline(c) == 1 + P3D_CTL_SLACK);
    assert_non_null(strstr(r.said, "par3drun: SIGTERM again: SIGKILL to every rank now\n"));
    p3d_ctl_free(c);
}

static void test_timeout_and_node_signal(void **st)
{
    (void)st;
    rec r;
    p3d_ctl *c = mk(&r, 2, 0, 5);
    assert_true(p3d_ctl_deadline(c) == 5);
    p3d_ctl_tick(c, 4.9);
    assert_string_equal(r.sent, "");
    p3d_ctl_tick(c, 5);
    assert_string_equal(r.said, "par3drun: --timeout 5 s reached; stopping the job\n");
    assert_string_equal(r.sent, "-1:t 15 124|");
    p3d_ctl_free(c);

    c = mk(&r, 3, 0, 0);
    msg(c, 1, "s 2\n", 1);
    assert_string_equal(r.said,
                        "par3drun: node n1 (node rank 1) was stopped by SIGINT; stopping the job (grace 3 s)\n");
    assert_string_equal(r.sent, "-1:t 2 130|");
    for (int a = 0; a < 3; a++)
        p3d_ctl_gone(c, a, NULL, 2);
    assert_int_equal(p3d_ctl_code(c), 130);
    assert_string_equal(p3d_ctl_summary(c), "");
    p3d_ctl_free(c);
}

/* ---- replacement: REPLACING, respawn, no spare, the leader's node -------- */

typedef struct rrec {
    rec r;
    int replace_rc;  /* what the replace op answers */
    int replaced[4]; /* lost agents it was given */
    int nreplaced, respawns, respawn_gen;
    unsigned char dead[4];
} rrec;

static int r_replace(void *ctx, const int *lost, int nlost, int gen, const char *reason, char **msg)
{
    rrec *x = ctx;
    (void)gen;
    assert_non_null(reason);
    for (int k = 0; k < nlost && x->nreplaced < 4; k++)
        x->replaced[x->nreplaced++] = lost[k];
    *msg = strdup(x->replace_rc < 0 ? "no spare node left" : "ranks 0-3 of n1 moved to spare n2");
    return x->replace_rc;
}

static int r_respawn(void *ctx, int gen, const unsigned char *dead)
{
    rrec *x = ctx;
    x->respawns++;
    x->respawn_gen = gen;
    memcpy(x->dead, dead, 3);
    return 0;
}

static p3d_ctl *mk_r(rrec *x, int max_restarts, int leader, int replace_rc)
{
    memset(x, 0, sizeof *x);
    x->replace_rc = replace_rc;
    p3d_ctl_cfg cfg = {
        .nagents = 3, .names = names, .nranks = 8, .max_restarts = max_restarts, .grace = 3, .leader = leader};
    p3d_ctl_ops ops = {
        .ctx = x, .send = r_send, .kill = r_kill, .say = r_say, .replace = r_replace, .respawn = r_respawn};
    p3d_ctl *c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(c);
    return c;
}

/* A health op that only starts the checks (the result comes later). */
static int health_starts;
static int r_health_start(void *ctx, const unsigned char *dead)
{
    (void)ctx;
    assert_int_equal(dead[1], 0);
    health_starts++;
    return 0;
}

/* 3 agents, 2 restarts, replacement and the health op above; x's
 * replace_rc is kept (it says what the replace op answers). */
static p3d_ctl *mk_health(rrec *x)
{
    p3d_ctl_cfg cfg = {
        .nagents = 3, .names = names, .nranks = 8, .max_restarts = 2, .grace = 3, .leader = -1, .health_timeout = 10};
    p3d_ctl_ops ops = {.ctx = x,
                       .send = r_send,
                       .kill = r_kill,
                       .say = r_say,
                       .replace = r_replace,
                       .respawn = r_respawn,
                       .health = r_health_start};
    p3d_ctl *c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(c);
    return c;
}

/* After a failure the health checks run while the controller waits in
 * CHECKING (it never blocks): node 1 failed its check 5 s later and is
 * replaced, and the retire deadline counts from the result, not from the
 * failure (a stale clock would end the others at once). */
static void test_health_replaces_after_the_checks(void **st)
{
    (void)st;
    rrec x;
    memset(&x, 0, sizeof x);
    health_starts = 0;
    p3d_ctl *c = mk_health(&x);
    for (int a = 0; a < 3; a++)
        msg(c, a, "a 0 4\n", 1);
    msg(c, 0, "f 0 3 1 0 -1 0 -1\n\n\n", 2);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_CHECKING);
    assert_int_equal(health_starts, 1);
    assert_true(p3d_ctl_deadline(c) == 2 + 10 + 2 * P3D_CTL_SLACK);
    msg(c, 1, "f 0 1 9 0 -1 0 -1\n\n\n", 3); /* a consequence: ignored */
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_CHECKING);
    unsigned char bad[3] = {0, 1, 0};
    p3d_ctl_health_result(c, bad, 7);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_REPLACING);
    assert_int_equal(x.nreplaced, 1);
    assert_int_equal(x.replaced[0], 1);
    assert_non_null(strstr(p3d_ctl_story(c), "node n1 failed its --health-check after rank 1 failed (exit code 3)"));
    assert_true(p3d_ctl_deadline(c) == 7 + 3 + P3D_CTL_SLACK);
    p3d_ctl_tick(c, 7.5);
    assert_int_equal(x.r.killed[0] + x.r.killed[2], 0);
    p3d_ctl_free(c);
}

/* The compound fault: a rank fails with restarts left and the check after
 * it fails only on a spare. Nothing moves for the spare, and the failed
 * rank is still restarted in place (it used to be dropped: a hang). */
static void test_health_fails_only_on_a_spare(void **st)
{
    (void)st;
    rrec x;
    memset(&x, 0, sizeof x);
    x.replace_rc = 1; /* the replace op: "it ran no rank" */
    p3d_ctl *c = mk_health(&x);
    for (int a = 0; a < 3; a++)
        msg(c, a, a == 2 ? "a 0 0\n" : "a 0 4\n", 1);
    msg(c, 0, "f 0 3 1 0 -1 0 -1\n\n\n", 2);
    unsigned char bad[3] = {0, 0, 1};
    x.r.sent[0] = 0;
    p3d_ctl_health_result(c, bad, 3);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RESTARTING);
    assert_int_equal(p3d_ctl_restarts(c), 1);
    assert_non_null(strstr(x.r.sent, "r 1"));
    assert_non_null(strstr(x.r.said, "rank 1 failed (exit code 3); restarting all ranks (restart 1 of 2)"));
    msg(c, 0, "a 1 4\n", 4);
    msg(c, 1, "a 1 4\n", 4);
    msg(c, 2, "a 1 0\n", 4);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RUNNING);
    for (int a = 0; a < 3; a++)
        msg(c, a, "d 1\n", 5);
    for (int a = 0; a < 3; a++)
        p3d_ctl_gone_status(c, a, "exited", 1, 5.5);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(c), 0);
    p3d_ctl_free(c);
}

static void test_replace_lost_node(void **st)
{
    (void)st;
    rrec x;
    p3d_ctl *c = mk_r(&x, 2, -1, 0);
    for (int a = 0; a < 3; a++)
        msg(c, a, a == 2 ? "a 0 0\n" : "a 0 4\n", 1);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RUNNING);
    p3d_ctl_gone_status(c, 1, "its process was killed by signal 9 (KILL)", 0, 2);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_REPLACING);
    assert_int_equal(x.nreplaced, 1);
    assert_int_equal(x.replaced[0], 1);
    /* the others retire: a stop order to each, none to the lost one */
    assert_string_equal(x.r.sent, "0:t 15 0|2:t 15 0|");
    assert_non_null(strstr(x.r.said, "moved to spare n2; restarting all ranks (restart 1 of 2)"));
    p3d_ctl_gone_status(c, 0, "exited", 1, 2.5);
    assert_int_equal(x.respawns, 0);
    p3d_ctl_gone_status(c, 2, "exited", 1, 2.6);
    assert_int_equal(x.respawns, 1);
    assert_int_equal(x.respawn_gen, 1);
    assert_int_equal(x.dead[1], 1);
    assert_int_equal(x.dead[0] + x.dead[2], 0);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RESTARTING);
    msg(c, 0, "a 1 4\n", 3);
    msg(c, 2, "a 1 4\n", 3.5);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RUNNING);
    assert_true(p3d_ctl_recovery_max(c) > 1.49 && p3d_ctl_recovery_max(c) < 1.51);
    msg(c, 0, "d 1\n", 4);
    msg(c, 2, "d 1\n", 4);
    p3d_ctl_gone_status(c, 0, "exited", 1, 4.1);
    p3d_ctl_gone_status(c, 2, "exited", 1, 4.1);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_DONE);
    assert_int_equal(p3d_ctl_code(c), 0);
    assert_int_equal(p3d_ctl_restarts(c), 1);
    assert_int_equal(p3d_ctl_replaced(c), 1);
    assert_non_null(strstr(p3d_ctl_story(c), "lost the agent of node n1"));
    p3d_ctl_free(c);
}

static void test_replace_second_loss_while_retiring(void **st)
{
    (void)st;
    rrec x;
    p3d_ctl *c = mk_r(&x, 3, -1, 0);
    for (int a = 0; a < 3; a++)
        msg(c, a, "a 0 4\n", 1);
    p3d_ctl_gone_status(c, 1, "killed", 0, 2);
    /* agent 0 killed while retiring: a second loss, a second restart */
    p3d_ctl_gone_status(c, 0, "its process was killed by signal 9 (KILL)", 0, 2.2);
    assert_int_equal(x.nreplaced, 2);
    assert_int_equal(x.replaced[1], 0);
    assert_int_equal(p3d_ctl_restarts(c), 2);
    p3d_ctl_gone_status(c, 2, "exited", 1, 2.5);
    assert_int_equal(x.respawns, 1);
    assert_int_equal(x.respawn_gen, 2);
    assert_int_equal(x.dead[0] + x.dead[1], 2);
    msg(c, 2, "a 2 8\n", 3);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_RUNNING);
    p3d_ctl_free(c);
}

static void test_replace_impossible(void **st)
{
    (void)st;
    rrec x;
    /* no spare: the job stops with exit 1 and says why */
    p3d_ctl *c = mk_r(&x, 2, -1, -1);
    for (int a = 0; a < 3; a++)
        msg(c, a, "a 0 4\n", 1);
    p3d_ctl_gone_status(c, 2, "killed", 0, 2);
    assert_int_equal(p3d_ctl_get_state(c), P3D_CTL_STOPPING);
    assert_non_null(strstr(p3d_ctl_summary(c), "cannot replace it: no spare node left"));
    assert_int_equal(x.respawns, 0);
    p3d_ctl_gone(c, 0, NULL, 3);
    p3d_ctl_gone(c, 1, NULL, 3);
    assert_int_equal(p3d_ctl_code(c), 1);
    p3d_ctl_free(c);
    /* the leader's own node: never replaced, the message names the limit */
    c = mk_r(&x, 2, 0, 0);
    for (int a = 0; a < 3; a++)
        msg(c, a, "a 0 4\n", 1);
    p3d_ctl_gone_status(c, 0, "killed", 0, 2);
    assert_int_equal(x.nreplaced, 0);
    assert_non_null(strstr(p3d_ctl_summary(c), "leader's own node"));
    p3d_ctl_free(c);
    /* no restart left: every restart counts */
    c = mk_r(&x, 0, -1, 0);
    for (int a = 0; a < 3; a++)
        msg(c, a, "a 0 4\n", 1);
    p3d_ctl_gone_status(c, 1, "killed", 0, 2);
    assert_int_equal(x.nreplaced, 0);
    assert_non_null(strstr(p3d_ctl_summary(c), "no restart left to replace it (--max-restarts 0"));
    p3d_ctl_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proto_roundtrip),
        cmocka_unit_test(test_proto_rejects),
        cmocka_unit_test(test_restart_then_root_cause),
        cmocka_unit_test(test_stopped_during_recovery),
        cmocka_unit_test(test_all_done),
        cmocka_unit_test(test_lost_agent),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_timeout_and_node_signal),
        cmocka_unit_test(test_replace_lost_node),
        cmocka_unit_test(test_health_replaces_after_the_checks),
        cmocka_unit_test(test_health_fails_only_on_a_spare),
        cmocka_unit_test(test_replace_second_loss_while_retiring),
        cmocka_unit_test(test_replace_impossible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
