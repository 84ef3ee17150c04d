/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_ctl_slow.c — slow nodes (controller_slow.c), the progress line
 * parser (progress.c), the P message (agent_proto.c) and the peer groups
 * (peers.c), driven by hand: no process, no socket.
 *
 * The controller runs N agents that report a summary every interval; one
 * may be k times slower. Checked: a 2x, 3x and 4x slow node is named
 * after exactly --slow-windows intervals, with its ratio and peers; no
 * node is named under +-20% noise (random per interval, or fixed per
 * node); nodes of different pipeline stages are never compared; with
 * --slow-node replace the node is replaced after the next newer
 * checkpoint (or --slow-wait without one), and only reported when no
 * spare is left.
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
#include "ranks.h"
#include "hub_int.h"
#include "loop.h"

#define N 8

static const char *names[N] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};

typedef struct rec {
    char said[8192];
    char events[8192];
    int replaced[N];
    int nreplace;
    int spares;
} rec;

static void r_send(void *ctx, int a, const p3d_amsg *m)
{
    (void)ctx;
    (void)a;
    (void)m;
}

static void r_kill(void *ctx, int a)
{
    (void)ctx;
    (void)a;
}

static void r_say(void *ctx, const char *text)
{
    rec *r = ctx;
    size_t l = strlen(r->said);
    snprintf(r->said + l, sizeof r->said - l, "%s", text);
}

static void r_event(void *ctx, const char *f)
{
    rec *r = ctx;
    size_t l = strlen(r->events);
    snprintf(r->events + l, sizeof r->events - l, "%s\n", f);
}

static int r_replace(void *ctx, const int *lost, int nlost, int gen, const char *reason, char **msg)
{
    rec *r = ctx;
    (void)gen;
    (void)reason;
    for (int k = 0; k < nlost; k++)
        r->replaced[lost[k]]++;
    r->nreplace++;
    r->spares--;
    *msg = strdup("moved to spare");
    return 0;
}

static int r_respawn(void *ctx, int gen, const unsigned char *dead)
{
    (void)ctx;
    (void)gen;
    (void)dead;
    return 0;
}

static int r_spares(void *ctx)
{
    return ((rec *)ctx)->spares;
}

typedef struct job {
    rec r;
    p3d_ctl *c;
    double now;
    int n;
    uint64_t rng;
} job;

static double urand(job *j)
{
    j->rng ^= j->rng << 13;
    j->rng ^= j->rng >> 7;
    j->rng ^= j->rng << 17;
    return (double)(j->rng % 1000000) / 1000000.0;
}

static void start(job *j, int n, int replace, int spares, const int *group)
{
    memset(j, 0, sizeof *j);
    j->n = n;
    j->rng = 88172645463325252ull;
    j->r.spares = spares;
    p3d_ctl_cfg cfg = {.nagents = n,
                       .names = names,
                       .nranks = 8 * n,
                       .max_restarts = 3,
                       .grace = 1,
                       .leader = -1,
                       .health_timeout = 3,
                       .progress_interval = 1.0,
                       .slow_factor = 1.3,
                       .slow_windows = 3,
                       .slow_replace = replace,
                       .slow_wait = 30};
    p3d_ctl_ops ops = {.ctx = &j->r,
                       .send = r_send,
                       .kill = r_kill,
                       .say = r_say,
                       .event = r_event,
                       .replace = r_replace,
                       .respawn = r_respawn,
                       .spares_left = r_spares};
    j->c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(j->c);
    int g0[N] = {0};
    const char *what[N] = {"pp stage 3", "pp stage 3", "pp stage 3", "pp stage 3",
                           "pp stage 3", "pp stage 3", "pp stage 3", "pp stage 3"};
    p3d_ctl_set_peers(j->c, group ? group : g0, what);
    for (int a = 0; a < n; a++) {
        p3d_amsg up = {.type = P3D_AM_UP, .gen = 0, .nranks = 8};
        p3d_ctl_message(j->c, a, &up, 0);
    }
    assert_int_equal(p3d_ctl_get_state(j->c), P3D_CTL_RUNNING);
    p3d_ctl_tick(j->c, 0); /* the first judgement is due an interval on */
}

/* One interval: every agent reports busy[a] seconds (step s, ckpt k), then
 * the controller's deadline comes. */
static void interval(job *j, const double *busy, int step, int ckpt)
{
    j->now += 0.5;
    for (int a = 0; a < j->n; a++) {
        p3d_amsg m = {.type = P3D_AM_PROGRESS,
                      .gen = p3d_ctl_restarts(j->c),
                      .step = step,
                      .busy_us = (int)(busy[a] * 1e6),
                      .ckpt = ckpt,
                      .nranks = 8};
        p3d_ctl_message(j->c, a, &m, j->now);
    }
    if (p3d_ctl_get_state(j->c) != P3D_CTL_RUNNING)
        return; /* replacing: the transport's business now */
    double d = p3d_ctl_deadline(j->c);
    assert_true(d > 0 && d <= j->now + 1.0);
    j->now = d;
    p3d_ctl_tick(j->c, j->now);
}

static void test_slow_named(void **st)
{
    (void)st;
    static const double factors[] = {2, 3, 4};
    for (size_t f = 0; f < 3; f++) {
        job j;
        start(&j, N, 0, 1, NULL);
        double busy[N];
        for (int k = 1; k <= 2; k++) {
            for (int a = 0; a < N; a++)
                busy[a] = a == 7 ? 0.5 * factors[f] : 0.5;
            interval(&j, busy, k, -1);
            assert_int_equal(p3d_ctl_slow_count(j.c), 0); /* not before --slow-windows */
        }
        interval(&j, busy, 3, -1);
        assert_int_equal(p3d_ctl_slow_count(j.c), 1);
        char want[160];
        snprintf(want, sizeof want,
                 "par3drun: node n7 is %.2fx slower than its 7 peers (busy %.2f s vs 0.50 s per "
                 "step, pp stage 3) for 3 s\n",
                 factors[f], 0.5 * factors[f]);
        assert_non_null(strstr(j.r.said, want));
        assert_non_null(strstr(j.r.events, "\"event\": \"slow\", \"node\": \"n7\""));
        assert_non_null(strstr(j.r.events, "\"action\": \"report\""));
        /* said once; report only: nothing moves */
        for (int k = 4; k < 20; k++)
            interval(&j, busy, k, k);
        assert_int_equal(p3d_ctl_slow_count(j.c), 1);
        assert_int_equal(j.r.nreplace, 0);
        assert_int_equal(p3d_ctl_get_state(j.c), P3D_CTL_RUNNING);
        p3d_ctl_free(j.c);
    }
}

/* +-20% noise between nodes: never a slow node. */
static void test_no_false_positive(void **st)
{
    (void)st;
    job j;
    start(&j, N, 1, 1, NULL);
    double busy[N];
    for (int k = 1; k <= 2000; k++) {
        for (int a = 0; a < N; a++)
            busy[a] = 0.5 * (0.8 + 0.4 * urand(&j));
        interval(&j, busy, k, k / 10);
    }
    assert_int_equal(p3d_ctl_slow_count(j.c), 0);
    p3d_ctl_free(j.c);
    /* fixed offsets, the slowest 20% over the middle */
    static const double fixed[N] = {0.8, 0.85, 0.9, 1.0, 1.0, 1.1, 1.15, 1.2};
    start(&j, N, 1, 1, NULL);
    for (int a = 0; a < N; a++)
        busy[a] = 0.5 * fixed[a];
    for (int k = 1; k <= 50; k++)
        interval(&j, busy, k, k / 10);
    assert_int_equal(p3d_ctl_slow_count(j.c), 0);
    assert_string_equal(j.r.said, "");
    p3d_ctl_free(j.c);
}

/* Steps of microseconds: noise, never judged (P3D_SLOW_MIN_BUSY). */
static void test_tiny_steps(void **st)
{
    (void)st;
    job j;
    start(&j, N, 0, 1, NULL);
    double busy[N];
    for (int a = 0; a < N; a++)
        busy[a] = a == 7 ? 0.0006 : 0.0002;
    for (int k = 1; k <= 10; k++)
        interval(&j, busy, k, -1);
    assert_int_equal(p3d_ctl_slow_count(j.c), 0);
    p3d_ctl_free(j.c);
}

/* Issue 44: one node writing busy=0.001 (a liar, or a broken clock) must
 * not make its two honest peers look slow: the reference is the median of
 * the group with the judged node in it, never the mean of two. */
static void test_liar_low(void **st)
{
    (void)st;
    job j;
    start(&j, 3, 1, 2, NULL);
    static const double busy[3] = {1.0, 1.0, 0.001};
    for (int k = 1; k <= 10; k++)
        interval(&j, busy, k, k);
    assert_int_equal(p3d_ctl_slow_count(j.c), 0);
    assert_int_equal(j.r.nreplace, 0);
    assert_int_equal(j.r.spares, 2);
    assert_null(strstr(j.r.said, "slower than"));
    p3d_ctl_free(j.c);
    /* busy 0 is outside physical bounds: refused with the reason, the node
     * neither judged nor a reference for the others */
    start(&j, 4, 1, 2, NULL);
    static const double zero[4] = {1.0, 1.0, 1.0, 0};
    for (int k = 1; k <= 10; k++)
        interval(&j, zero, k, k);
    assert_int_equal(p3d_ctl_slow_count(j.c), 0);
    assert_non_null(strstr(j.r.said, "node n3: busy 0 s per step is outside physical bounds"));
    p3d_ctl_free(j.c);
}

/* With fewer than three nodes doing the same work there is no majority to
 * tell the slow one: "cannot judge" is said (once), nothing is replaced. */
static void test_two_cannot_judge(void **st)
{
    (void)st;
    job j;
    start(&j, 2, 1, 2, NULL);
    static const double busy[2] = {0.5, 2.0};
    for (int k = 1; k <= 10; k++)
        interval(&j, busy, k, k);
    assert_int_equal(p3d_ctl_slow_count(j.c), 0);
    assert_int_equal(j.r.nreplace, 0);
    char *first = strstr(j.r.said, "cannot judge");
    assert_non_null(first);
    assert_non_null(strstr(j.r.said, "2 nodes do the same work (at least 3 needed"));
    assert_null(strstr(first + 1, "cannot judge")); /* said once */
    p3d_ctl_free(j.c);
}

/* Two pipeline stages of different cost: compared within each only. */
static void test_groups_apart(void **st)
{
    (void)st;
    job j;
    int group[N] = {0, 0, 0, 0, 1, 1, 1, 1};
    start(&j, N, 0, 1, group);
    double busy[N] = {0.5, 0.5, 0.5, 0.5, 1.5, 1.5, 1.5, 1.5};
    for (int k = 1; k <= 10; k++)
        interval(&j, busy, k, -1);
    assert_int_equal(p3d_ctl_slow_count(j.c), 0);
    busy[5] = 3.0; /* 2x its own stage */
    for (int k = 11; k <= 13; k++)
        interval(&j, busy, k, -1);
    assert_int_equal(p3d_ctl_slow_count(j.c), 1);
    assert_non_null(strstr(j.r.said, "node n5 is 2.00x slower than its 3 peers"));
    p3d_ctl_free(j.c);
}

/* --slow-node replace: at the next newer checkpoint; not without a spare;
 * after --slow-wait without checkpoints. */
static void test_replace(void **st)
{
    (void)st;
    job j;
    double busy[N];
    for (int a = 0; a < N; a++)
        busy[a] = a == 2 ? 1.5 : 0.5;
    start(&j, N, 1, 1, NULL);
    for (int k = 1; k <= 3; k++)
        interval(&j, busy, k, 0);
    assert_int_equal(p3d_ctl_slow_count(j.c), 1);
    assert_non_null(strstr(j.r.said, "its ranks move to a spare after their next checkpoint (newer than step 0)"));
    for (int k = 4; k <= 6; k++)
        interval(&j, busy, k, 0); /* the same checkpoint: it waits */
    assert_int_equal(j.r.nreplace, 0);
    interval(&j, busy, 7, 5);
    assert_int_equal(j.r.nreplace, 1);
    assert_int_equal(j.r.replaced[2], 1);
    assert_int_equal(p3d_ctl_get_state(j.c), P3D_CTL_REPLACING);
    assert_true(p3d_ctl_is_dead(j.c, 2));
    p3d_ctl_free(j.c);

    /* no spare: report only, the job runs on */
    start(&j, N, 1, 0, NULL);
    for (int k = 1; k <= 10; k++)
        interval(&j, busy, k, k);
    assert_int_equal(p3d_ctl_slow_count(j.c), 1);
    assert_int_equal(j.r.nreplace, 0);
    assert_non_null(strstr(j.r.said, "node n2 is not replaced: no spare left"));
    assert_null(strstr(j.r.said, "; not replaced")); /* said once, not again at the checkpoint */
    assert_non_null(strstr(j.r.events, "\"action\": \"report (not replaced: no spare left)\""));
    assert_int_equal(p3d_ctl_get_state(j.c), P3D_CTL_RUNNING);
    p3d_ctl_free(j.c);

    /* no checkpoint reported: --slow-wait (30 s) after the detection */
    start(&j, N, 1, 1, NULL);
    for (int k = 1; k <= 3; k++)
        interval(&j, busy, k, -1);
    double seen = j.now;
    assert_int_equal(p3d_ctl_slow_count(j.c), 1);
    while (j.r.nreplace == 0 && j.now < seen + 60)
        interval(&j, busy, 4, -1);
    assert_int_equal(j.r.nreplace, 1);
    assert_true(j.now >= seen + 30 && j.now < seen + 31.5);
    p3d_ctl_free(j.c);
}

static void test_progress_parse(void **st)
{
    (void)st;
    p3d_progress p;
    static const char *good[] = {"step=12 busy=0.81\n", "step=0 busy=3", "step=7 busy=0.5 ckpt=5\n",
                                 "step=2147483647 busy=1234567.123456789 ckpt=2147483647"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_int_equal(p3d_progress_parse(good[i], strlen(good[i]), &p), 1);
    assert_int_equal(p3d_progress_parse("step=7 busy=0.5 ckpt=5\n", 23, &p), 1);
    assert_int_equal(p.step, 7);
    assert_true(p.busy > 0.4999 && p.busy < 0.5001);
    assert_int_equal(p.ckpt, 5);
    assert_int_equal(p3d_progress_parse("step=7 busy=0.5", 15, &p), 1);
    assert_int_equal(p.ckpt, -1);
    assert_int_equal(p3d_progress_parse("", 0, &p), 0);
    assert_int_equal(p3d_progress_parse("\n", 1, &p), 0);
    static const char *bad[] = {"step=-1 busy=1",
                                "step=1 busy=-1",
                                "step=1 busy=1e3",
                                "step=1  busy=1",
                                "step=1 busy=1 ckpt=",
                                "step=1 busy=.5",
                                "step=1 busy=1.",
                                "step=2147483648 busy=1",
                                "busy=1 step=1",
                                "step=1 busy=1\n\n",
                                "step=1 busy=1 extra=2",
                                "step=1 busy=12345678",
                                "step=1 busy=1 ckpt=1 ",
                                "STEP=1 busy=1",
                                "step=0x10 busy=1",
                                "step=1\tbusy=1",
                                "step=1 busy=1.0000000001",
                                "garbage",
                                "step=1 busy=1\0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t l = strlen(bad[i]) + (i == sizeof bad / sizeof bad[0] - 1);
        assert_int_equal(p3d_progress_parse(bad[i], l, &p), -1);
    }
}

static void test_wire(void **st)
{
    (void)st;
    p3d_amsg m = {.type = P3D_AM_PROGRESS, .gen = 2, .step = 1234, .busy_us = 810000, .ckpt = -1, .nranks = 8}, d;
    char buf[128];
    int n = p3d_amsg_encode(&m, buf, sizeof buf);
    assert_string_equal(buf, "p 2 1234 810000 -1 8\n");
    assert_int_equal(p3d_amsg_decode(buf, (size_t)n, &d), 0);
    assert_int_equal(d.type, P3D_AM_PROGRESS);
    assert_int_equal(d.step, 1234);
    assert_int_equal(d.busy_us, 810000);
    assert_int_equal(d.ckpt, -1);
    assert_int_equal(d.nranks, 8);
    char b2[] = "p 2 1234 -5 -1 8\n", b3[] = "p 2 1234 5 -2 8\n", b4[] = "p 2 1234 5 1\n";
    assert_int_equal(p3d_amsg_decode(b2, strlen(b2), &d), -1);
    assert_int_equal(p3d_amsg_decode(b3, strlen(b3), &d), -1);
    assert_int_equal(p3d_amsg_decode(b4, strlen(b4), &d), -1);
}

/* Nodes of the same (pp, tp, cp, ep) sets share a group; a spare has none. */
static void test_peer_groups(void **st)
{
    (void)st;
    /* 4 nodes x 2 ranks + a spare: nodes 0 and 2 hold pp0 tp0-1, nodes 1
     * and 3 pp1 tp0-1 (dp 0/1), node 4 nothing */
    p3d_rank ranks[8];
    memset(ranks, 0, sizeof ranks);
    for (int r = 0; r < 8; r++) {
        int node = r / 2;
        ranks[r].node = node;
        ranks[r].coord[P3D_DIM_TP] = r % 2;
        ranks[r].coord[P3D_DIM_PP] = node % 2;
        ranks[r].coord[P3D_DIM_DP] = node / 2;
    }
    p3d_placement pl = {.world = 8, .ranks = ranks};
    int nodes[5] = {0, 1, 2, 3, 4}, group[5];
    char what[5][P3D_PEER_WHAT];
    assert_int_equal(p3d_peer_groups(&pl, nodes, 5, 5, group, what), 0);
    assert_int_equal(group[0], group[2]);
    assert_int_equal(group[1], group[3]);
    assert_true(group[0] != group[1] && group[0] >= 0 && group[1] >= 0);
    assert_int_equal(group[4], -1);
    assert_string_equal(what[1], "pp stage 1");
    ranks[7].coord[P3D_DIM_PP] = 0; /* node 3 now holds two stages */
    assert_int_equal(p3d_peer_groups(&pl, nodes, 5, 5, group, what), 0);
    assert_true(group[3] != group[1] && group[3] != group[0]);
    assert_string_equal(what[3], "pp stages 0-1");
}

/* The leader's cost at 16,384 nodes (4 pipeline stages of 4,096 peers):
 * every node's summary, then the judgement, per interval. A figure, not a
 * bound (printed); the one slow node must still be found. */
static void test_scale(void **st)
{
    (void)st;
    enum { BIG = 16384, IV = 20 };
    static char *bnames[BIG];
    static int group[BIG];
    static char nbuf[BIG][12];
    for (int a = 0; a < BIG; a++) {
        snprintf(nbuf[a], sizeof nbuf[a], "n%d", a);
        bnames[a] = nbuf[a];
        group[a] = a % 4;
    }
    rec *r = calloc(1, sizeof *r);
    assert_non_null(r);
    p3d_ctl_cfg cfg = {.nagents = BIG,
                       .names = (const char *const *)bnames,
                       .nranks = 8 * BIG,
                       .max_restarts = 1,
                       .grace = 1,
                       .leader = -1,
                       .health_timeout = 3,
                       .progress_interval = 5,
                       .slow_factor = 1.3,
                       .slow_windows = 3,
                       .slow_wait = 600};
    p3d_ctl_ops ops = {.ctx = r, .send = r_send, .kill = r_kill, .say = r_say, .event = r_event};
    p3d_ctl *c = p3d_ctl_new(&cfg, &ops, 0);
    assert_non_null(c);
    p3d_ctl_set_peers(c, group, NULL);
    for (int a = 0; a < BIG; a++) {
        p3d_amsg up = {.type = P3D_AM_UP, .gen = 0, .nranks = 8};
        p3d_ctl_message(c, a, &up, 0);
    }
    p3d_ctl_tick(c, 0);
    uint64_t rng = 1;
    double now = 0, msg_s = 0, judge_s = 0;
    for (int k = 1; k <= IV; k++) {
        double t0 = p3d_now();
        for (int a = 0; a < BIG; a++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            int busy = (int)(500000 * (0.8 + 0.4 * (double)(rng % 1000) / 1000)) * (a == 12345 ? 2 : 1);
            p3d_amsg m = {.type = P3D_AM_PROGRESS, .gen = 0, .step = k, .busy_us = busy, .ckpt = -1, .nranks = 8};
            p3d_ctl_message(c, a, &m, now + 4);
        }
        double t1 = p3d_now();
        now = p3d_ctl_deadline(c);
        p3d_ctl_tick(c, now);
        double t2 = p3d_now();
        msg_s += t1 - t0;
        judge_s += t2 - t1;
    }
    printf("slow-node detection at %d nodes: %.2f ms per interval to take the summaries, %.2f ms to judge "
           "(%d intervals)\n",
           BIG, msg_s / IV * 1e3, judge_s / IV * 1e3, IV);
    assert_int_equal(p3d_ctl_slow_count(c), 1);
    assert_non_null(strstr(r->said, "node n12345 is "));
    p3d_ctl_free(c);
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_named),
        cmocka_unit_test(test_no_false_positive),
        cmocka_unit_test(test_groups_apart),
        cmocka_unit_test(test_replace),
        cmocka_unit_test(test_tiny_steps),
        cmocka_unit_test(test_liar_low),
        cmocka_unit_test(test_two_cannot_judge),
        cmocka_unit_test(test_progress_parse),
        cmocka_unit_test(test_wire),
        cmocka_unit_test(test_peer_groups),
        cmocka_unit_test(test_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
