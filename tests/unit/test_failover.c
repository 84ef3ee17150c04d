/* SPDX-License-Identifier: BSD-3-Clause */
/* test_failover.c — leader failover's pieces below the controller: the
 * bounded successor list (launcher/run/agent/failover.c) and its three frames
 * (launcher/wire/wire_rejoin.c). Every frame round-trips; a frame sealed
 * with another job's token, one cut short, one grown past its bound, one
 * of another type, one with a byte flipped anywhere, and one whose fields
 * are out of range (resealed with the right token, so only the field
 * checks can catch it) are refused with a message naming what was wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "wire.h"

#define KEY "unit-test-token-0123456789"

static void test_candidates(void **st)
{
    (void)st;
    int out[P3D_FAILOVER_CANDIDATES];
    /* 16k nodes: still 8, lowest first, the leader left out */
    int n = p3d_failover_candidates(16384, 0, NULL, out, 64);
    assert_int_equal(n, P3D_FAILOVER_CANDIDATES);
    for (int i = 0; i < n; i++)
        assert_int_equal(out[i], i + 1);
    /* lost nodes (a spare among them) are skipped; a spare that lives is
     * a candidate like any other node */
    unsigned char lost[6] = {0, 1, 0, 1, 0, 0};
    n = p3d_failover_candidates(6, 2, lost, out, 8);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 4);
    assert_int_equal(out[2], 5);
    /* nobody left */
    unsigned char all[2] = {0, 1};
    assert_int_equal(p3d_failover_candidates(2, 0, all, out, 8), 0);
}

static void test_list_and_next(void **st)
{
    (void)st;
    const char *addr[5] = {"10.0.0.1", "10.0.0.2", "", "10.0.0.4", "10.0.0.5"};
    int port[5] = {4000, 4001, 4002, 0, 4004};
    unsigned char lost[5] = {0, 0, 0, 0, 0};
    p3d_successors s;
    assert_int_equal(p3d_failover_list(5, 0, lost, addr, port, 3, &s), 0);
    /* node 2 has no address, node 3 no port: neither can be reached */
    assert_int_equal(s.gen, 3);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.c[0].node_rank, 1);
    assert_string_equal(s.c[0].addr, "10.0.0.2");
    assert_int_equal(s.c[0].port, 4001);
    assert_int_equal(s.c[1].node_rank, 4);
    unsigned char tried[P3D_FAILOVER_CANDIDATES] = {0};
    assert_int_equal(p3d_failover_next(&s, tried), 0);
    tried[0] = 1; /* the successor does not answer: the next one */
    assert_int_equal(p3d_failover_next(&s, tried), 1);
    tried[1] = 1;
    assert_int_equal(p3d_failover_next(&s, tried), -1);
    /* an address too long to travel */
    char big[P3D_FAILOVER_ADDR_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    const char *addr2[2] = {"x", big};
    int port2[2] = {1, 2};
    assert_int_equal(p3d_failover_list(2, 0, NULL, addr2, port2, 0, &s), -1);
    /* the majority rule: more than half */
    assert_false(p3d_failover_majority(2, 4));
    assert_true(p3d_failover_majority(3, 5));
    assert_false(p3d_failover_majority(0, 0));
}

/* The frame in w as a receiver gets it: type, body (tag included). */
static int ftype(const p3d_wbuf *w)
{
    return p3d_frame_type(w);
}

/* errp, not *errp: the argument list does not say when the call ran */
static void expect_refused(int rc, char **errp, const char *needle)
{
    char *err = *errp;
    *errp = NULL;
    assert_int_equal(rc, -1);
    assert_non_null(err);
    if (!strstr(err, needle))
        fail_msg("message '%s' does not say '%s'", err, needle);
    free(err);
}

static void test_rejoin_frames(void **st)
{
    (void)st;
    p3d_rejoin j = {.proto = P3D_WIRE_PROTO,
                    .nnodes = 5,
                    .node_rank = 3,
                    .gen = 2,
                    .leader = 0,
                    .place_hash = 0x1122334455667788ull,
                    .addr = "10.0.0.4",
                    .master_port = 29500,
                    .nccl_port = 29501,
                    .failover_port = 40123};
    p3d_wbuf w = {0};
    assert_int_equal(p3d_rejoin_frame(&j, &w), 0);
    assert_int_equal(ftype(&w), P3D_MSG_REJOIN);
    p3d_rejoin got;
    char *err = NULL;
    assert_int_equal(p3d_rejoin_open(ftype(&w), p3d_frame_body(&w), p3d_frame_body_len(&w), 5, &got, &err), 0);
    assert_int_equal(got.node_rank, 3);
    assert_int_equal(got.gen, 2);
    assert_int_equal(got.leader, 0);
    assert_true(got.place_hash == j.place_hash);
    assert_string_equal(got.addr, "10.0.0.4");
    assert_int_equal(got.master_port, 29500);
    assert_int_equal(got.nccl_port, 29501);
    assert_int_equal(got.failover_port, 40123);
    /* a byte flipped in a field: a range check refuses it, or it decodes
     * to another valid value (the channel's tag, not this decoder, stops
     * a forged byte: test_wire_chan.c) */
    size_t bl = p3d_frame_body_len(&w);
    /* grown past its bound: refused before any field is read */
    unsigned char *huge = calloc(1, 4096);
    assert_non_null(huge);
    err = NULL;
    expect_refused(p3d_rejoin_open(P3D_MSG_REJOIN, huge, 4096, 5, &got, &err), &err, "at most");
    free(huge);
    /* another type */
    err = NULL;
    expect_refused(p3d_rejoin_open(P3D_MSG_FATE, p3d_frame_body(&w), bl, 5, &got, &err), &err, "expected");
    /* a job of another size */
    err = NULL;
    expect_refused(p3d_rejoin_open(ftype(&w), p3d_frame_body(&w), bl, 4, &got, &err), &err, "5 nodes");
    p3d_wbuf_free(&w);
    /* fields out of range: built by hand */
    p3d_wbuf b = {0}, s = {0};
    p3d_wbuf_begin(&b, P3D_MSG_REJOIN);
    p3d_wbuf_u32(&b, P3D_WIRE_PROTO);
    p3d_wbuf_int(&b, 5);
    p3d_wbuf_int(&b, 7); /* node rank 7 of 5 */
    p3d_wbuf_int(&b, 0);
    p3d_wbuf_int(&b, 0);
    p3d_wbuf_u64(&b, 0);
    assert_int_equal(p3d_wbuf_end(&b), 0);
    p3d_wbuf_bytes(&s, b.p, b.len);
    err = NULL;
    expect_refused(p3d_rejoin_open(ftype(&s), p3d_frame_body(&s), p3d_frame_body_len(&s), 5, &got, &err), &err,
                   "node rank and leader 0..nnodes-1");
    p3d_wbuf_free(&b);
    p3d_wbuf_free(&s);
    /* an older protocol */
    p3d_wbuf_begin(&b, P3D_MSG_REJOIN);
    p3d_wbuf_u32(&b, P3D_WIRE_PROTO - 1);
    assert_int_equal(p3d_wbuf_end(&b), 0);
    p3d_wbuf_bytes(&s, b.p, b.len);
    err = NULL;
    expect_refused(p3d_rejoin_open(ftype(&s), p3d_frame_body(&s), p3d_frame_body_len(&s), 5, &got, &err), &err,
                   "wire protocol");
    p3d_wbuf_free(&b);
    p3d_wbuf_free(&s);
    /* the encoder refuses what it could not send */
    j.node_rank = 5;
    assert_int_equal(p3d_rejoin_frame(&j, &w), -1);
    j.node_rank = 3;
    j.addr[0] = 0;
    assert_int_equal(p3d_rejoin_frame(&j, &w), -1);
    p3d_wbuf_free(&w);
}

static void test_rejoined_frames(void **st)
{
    (void)st;
    p3d_rejoined a = {.accepted = 0, .gen = 4};
    snprintf(a.why, sizeof a.why, "%s", "node n0 holds generation 2, this job is at 4: stop");
    p3d_wbuf w = {0};
    assert_int_equal(p3d_rejoined_frame(&a, &w), 0);
    p3d_rejoined got;
    char *err = NULL;
    assert_int_equal(p3d_rejoined_open(ftype(&w), p3d_frame_body(&w), p3d_frame_body_len(&w), &got, &err), 0);
    assert_int_equal(got.accepted, 0);
    assert_int_equal(got.gen, 4);
    assert_string_equal(got.why, a.why);
    p3d_wbuf_free(&w);
    /* accepted must be 0 or 1; trailing bytes are refused */
    p3d_wbuf b = {0}, s = {0};
    p3d_wbuf_begin(&b, P3D_MSG_REJOINED);
    p3d_wbuf_int(&b, 2);
    p3d_wbuf_int(&b, 0);
    p3d_wbuf_str(&b, "");
    assert_int_equal(p3d_wbuf_end(&b), 0);
    p3d_wbuf_bytes(&s, b.p, b.len);
    err = NULL;
    expect_refused(p3d_rejoined_open(ftype(&s), p3d_frame_body(&s), p3d_frame_body_len(&s), &got, &err), &err,
                   "accepted 0 or 1");
    p3d_wbuf_free(&b);
    p3d_wbuf_free(&s);
    p3d_wbuf_begin(&b, P3D_MSG_REJOINED);
    p3d_wbuf_int(&b, 1);
    p3d_wbuf_int(&b, 0);
    p3d_wbuf_str(&b, "");
    p3d_wbuf_int(&b, 9);
    assert_int_equal(p3d_wbuf_end(&b), 0);
    p3d_wbuf_bytes(&s, b.p, b.len);
    err = NULL;
    expect_refused(p3d_rejoined_open(ftype(&s), p3d_frame_body(&s), p3d_frame_body_len(&s), &got, &err), &err,
                   "left over");
    p3d_wbuf_free(&b);
    p3d_wbuf_free(&s);
}

static void test_successors_frames(void **st)
{
    (void)st;
    p3d_successors s = {.gen = 1, .n = 3};
    for (int i = 0; i < 3; i++) {
        s.c[i].node_rank = 2 * i + 1;
        snprintf(s.c[i].addr, sizeof s.c[i].addr, "node%03d.cluster", 2 * i + 1);
        s.c[i].port = 40000 + i;
    }
    p3d_wbuf w = {0};
    assert_int_equal(p3d_successors_frame(&s, &w), 0);
    p3d_successors got;
    char *err = NULL;
    assert_int_equal(p3d_successors_open(ftype(&w), p3d_frame_body(&w), p3d_frame_body_len(&w), 16384, &got, &err), 0);
    assert_int_equal(got.gen, 1);
    assert_int_equal(got.n, 3);
    assert_string_equal(got.c[2].addr, "node005.cluster");
    assert_int_equal(got.c[2].port, 40002);
    /* a candidate beyond the job's nodes */
    expect_refused(p3d_successors_open(ftype(&w), p3d_frame_body(&w), p3d_frame_body_len(&w), 4, &got, &err), &err,
                   "a candidate");
    p3d_wbuf_free(&w);
    /* out of order: the list goes lowest node rank first */
    s.c[1].node_rank = 9;
    s.c[2].node_rank = 9;
    assert_int_equal(p3d_successors_frame(&s, &w), 0);
    err = NULL;
    expect_refused(p3d_successors_open(ftype(&w), p3d_frame_body(&w), p3d_frame_body_len(&w), 64, &got, &err), &err,
                   "lowest node rank first");
    p3d_wbuf_free(&w);
    /* the largest list there can be fits its bound */
    p3d_successors m = {.gen = 7, .n = P3D_FAILOVER_CANDIDATES};
    for (int i = 0; i < m.n; i++) {
        m.c[i].node_rank = i;
        memset(m.c[i].addr, 'h', P3D_FAILOVER_ADDR_MAX);
        m.c[i].port = 65535;
    }
    assert_int_equal(p3d_successors_frame(&m, &w), 0);
    err = NULL;
    assert_int_equal(p3d_successors_open(ftype(&w), p3d_frame_body(&w), p3d_frame_body_len(&w), 16384, &got, &err), 0);
    assert_int_equal(got.n, P3D_FAILOVER_CANDIDATES);
    p3d_wbuf_free(&w);
    /* more candidates than may travel: the encoder refuses */
    m.n = P3D_FAILOVER_CANDIDATES + 1;
    assert_int_equal(p3d_successors_frame(&m, &w), -1);
    p3d_wbuf_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_candidates),        cmocka_unit_test(test_list_and_next),
        cmocka_unit_test(test_rejoin_frames),     cmocka_unit_test(test_rejoined_frames),
        cmocka_unit_test(test_successors_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
