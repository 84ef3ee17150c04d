/* SPDX-License-Identifier: BSD-3-Clause */
/* test_rdzv_wire.c — the rendezvous wire format: a HELLO and a PLACE survive
 * the round trip; every truncation and byte flip of them decodes to an
 * error or a valid message, never a crash (run under ASan in the sanitizer
 * build); the frame length bound holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdzv.h"
#include "p3d/plugin.h"

static p3d_node *node(void)
{
    p3d_node *n = NULL;
    char *err = NULL, path[4096];
    const char *src = getenv("P3D_SRC");
    snprintf(path, sizeof path, "%s/tests/fixtures/realdata/topo/dgx-a100_12nic.txt", src ? src : "..");
    int rc = p3d_topo_load(path, &n, &err);
    if (rc < 0)
        fail_msg("topology: %s", err);
    return n;
}

static void hello_roundtrip(void **st)
{
    (void)st;
    p3d_hello h = {.proto = P3D_WIRE_PROTO,
                   .version = P3D_VERSION,
                   .job_id = "j1",
                   .nnodes = 4,
                   .node_rank = 2,
                   .hostname = "n2",
                   .addr = "10.0.0.2",
                   .master_port = 1234,
                   .nccl_port = 0,
                   .topo = node()};
    /* what an allocation made of the GPUs travels with them (alloc.c) */
    for (int g = 0; g < h.topo->ngpus; g++) {
        h.topo->gpus[g].phys = 7 - g;
        snprintf(h.topo->gpus[g].visible, sizeof h.topo->gpus[g].visible, "GPU-%d", 7 - g);
    }
    p3d_wbuf b = {0};
    assert_int_equal(p3d_hello_encode(&h, &b), 0);
    p3d_hello d;
    char *err = NULL;
    assert_int_equal(p3d_hello_decode(b.p + 5, b.len - 5, &d, &err), 0);
    assert_string_equal(d.hostname, "n2");
    assert_int_equal(d.node_rank, 2);
    assert_string_equal(d.topo->hash, h.topo->hash);
    assert_int_equal(d.topo->ngpus, 8);
    for (int g = 0; g < 8; g++) {
        char want[16];
        snprintf(want, sizeof want, "GPU-%d", 7 - g);
        assert_int_equal(d.topo->gpus[g].index, g);
        assert_int_equal(d.topo->gpus[g].phys, 7 - g);
        assert_string_equal(d.topo->gpus[g].visible, want);
    }
    p3d_hello_free(&d);
    /* every truncation fails cleanly */
    for (size_t cut = 0; cut < b.len - 5; cut += 7) {
        err = NULL;
        p3d_hello x;
        int rc = p3d_hello_decode(b.p + 5, cut, &x, &err);
        assert_true(rc < 0 || x.proto != P3D_WIRE_PROTO);
        p3d_hello_free(&x);
        free(err);
    }
    /* byte flips: an error, or a record that passed every check */
    srand(7);
    for (int k = 0; k < 300; k++) {
        unsigned char *c = malloc(b.len);
        memcpy(c, b.p, b.len);
        size_t at = 5 + (size_t)rand() % (b.len - 5);
        c[at] ^= (unsigned char)(1 + rand() % 255);
        err = NULL;
        p3d_hello x;
        p3d_hello_decode(c + 5, b.len - 5, &x, &err);
        p3d_hello_free(&x);
        free(err);
        free(c);
    }
    p3d_wbuf_free(&b);
    p3d_node_free(h.topo);
}

static void place_roundtrip(void **st)
{
    (void)st;
    p3d_rank ranks[2] = {{.node = 0, .gpu = 0, .local_rank = 0, .coord = {0, 0, 0, 0, 0}},
                         {.node = 1, .gpu = 3, .local_rank = 0, .coord = {0, 0, 0, 1, 0, 0, 1}}};
    p3d_placement pl = {.world = 2, .ranks = ranks, .policy = "megatron", .policy_source = "lua/megatron.lua"};
    for (int d = 0; d < P3D_NDIMS; d++) {
        pl.mesh.size[d] = d == P3D_DIM_DP || d == P3D_DIM_EDP ? 2 : 1; /* resolved: edp = dp */
        pl.mesh.order[d] = d;
    }
    strcpy(pl.mesh.order_str, "tp-cp-ep-dp-pp");
    char *names[2] = {"a", "b"}, *hashes[2] = {"0123456789abcdef", "fedcba9876543210"};
    /* the batch figures go along (a joined node is given none of its own) */
    p3d_place_msg m = {.job_id = "j",
                       .master_addr = "10.0.0.1",
                       .master_port = 5,
                       .nnodes = 2,
                       .names = names,
                       .hashes = hashes,
                       .pl = &pl,
                       .json = "{\"x\": 1}\n",
                       .json_len = 9,
                       .batch = {.global = 24, .micro = 2, .micros = 3, .tol_mpct = 2500},
                       .fault_ms = 7500};
    p3d_wbuf b = {0};
    assert_int_equal(p3d_place_encode(&m, &b), 0);
    p3d_place_msg d;
    char *err = NULL;
    assert_int_equal(p3d_place_decode(b.p + 5, b.len - 5, &d, &err), 0);
    assert_int_equal(d.pl->world, 2);
    assert_int_equal(d.pl->ranks[1].gpu, 3);
    assert_int_equal(d.pl->ranks[1].coord[P3D_DIM_DP], 1);
    assert_memory_equal(d.json, m.json, 9);
    assert_string_equal(d.names[1], "b");
    assert_int_equal(d.batch.global, 24);
    assert_int_equal(d.batch.micro, 2);
    assert_int_equal(d.batch.micros, 3);
    assert_int_equal(d.batch.tol_mpct, 2500);
    assert_int_equal(d.fault_ms, 7500); /* the leader's --fault-window */
    p3d_place_msg_free(&d);
    for (size_t cut = 0; cut < b.len - 5; cut++) {
        err = NULL;
        assert_true(p3d_place_decode(b.p + 5, cut, &d, &err) < 0);
        free(err);
    }
    /* a window past --fault-window's bound, or below 0, is refused */
    for (int k = 0; k < 2; k++) {
        p3d_wbuf_free(&b);
        m.fault_ms = k ? -1 : P3D_FAULT_MS_MAX + 1;
        assert_int_equal(p3d_place_encode(&m, &b), 0);
        err = NULL;
        assert_true(p3d_place_decode(b.p + 5, b.len - 5, &d, &err) < 0);
        free(err);
    }
    m.fault_ms = 7500;
    /* a mesh only DeviceMesh accepts (cp=2 under order "cp": no expert
     * grid) crosses the wire with its rules, and is checked under them */
    err = NULL;
    p3d_rank cr[2] = {{.node = 0, .gpu = 0, .coord = {0}}, {.node = 1, .gpu = 0, .coord = {0, 1}}};
    p3d_placement dm = {.world = 2, .ranks = cr, .policy = "devicemesh", .policy_source = "lua/devicemesh.lua"};
    for (int k = 0; k < P3D_NDIMS; k++)
        dm.mesh.size[k] = 1;
    dm.mesh.size[P3D_DIM_CP] = 2;
    dm.mesh.rules = P3D_RULES_DEVICEMESH;
    assert_int_equal(p3d_mesh_set_order(&dm.mesh, "cp", &err), 0);
    assert_int_equal(p3d_mesh_resolve(&dm.mesh, &err), 0);
    p3d_place_msg md = m;
    md.pl = &dm;
    p3d_wbuf_free(&b);
    assert_int_equal(p3d_place_encode(&md, &b), 0);
    assert_int_equal(p3d_place_decode(b.p + 5, b.len - 5, &d, &err), 0);
    assert_int_equal(d.pl->mesh.rules, P3D_RULES_DEVICEMESH);
    assert_int_equal(d.pl->ranks[1].coord[P3D_DIM_CP], 1);
    p3d_place_msg_free(&d);
    dm.mesh.rules = P3D_RULES_MEGATRON; /* Megatron refuses it: so does the decoder */
    p3d_wbuf_free(&b);
    assert_int_equal(p3d_place_encode(&md, &b), 0);
    assert_true(p3d_place_decode(b.p + 5, b.len - 5, &d, &err) < 0);
    free(err);
    err = NULL;
    /* a rank on a node that does not exist is refused */
    ranks[1].node = 2;
    p3d_wbuf_free(&b);
    assert_int_equal(p3d_place_encode(&m, &b), 0);
    err = NULL;
    assert_true(p3d_place_decode(b.p + 5, b.len - 5, &d, &err) < 0);
    free(err);
    p3d_wbuf_free(&b);
}

/* Every truncation and some byte flips of a frame: errors, never a crash
 * (ASan in the sanitizer build). dec returns <0 on error; free frees. */
typedef int (*dec_fn)(const unsigned char *body, size_t len, void *out, char **err);

static void mangle(const p3d_wbuf *b, dec_fn dec, void *out, void (*fr)(void *))
{
    for (size_t cut = 0; cut < b->len - 5; cut += 1 + cut / 64) {
        char *err = NULL;
        if (dec(b->p + 5, cut, out, &err) == 0)
            fr(out);
        free(err);
    }
    srand(11);
    for (int k = 0; k < 200; k++) {
        unsigned char *c = malloc(b->len);
        memcpy(c, b->p, b->len);
        c[5 + (size_t)rand() % (b->len - 5)] ^= (unsigned char)(1 + rand() % 255);
        char *err = NULL;
        if (dec(c + 5, b->len - 5, out, &err) == 0)
            fr(out);
        free(err);
        free(c);
    }
}

static int dec_gather(const unsigned char *p, size_t n, void *o, char **e)
{
    return p3d_gather_decode(p, n, 64, o, e);
}
static void fr_gather(void *o)
{
    p3d_gather_free(o);
}
static int dec_join(const unsigned char *p, size_t n, void *o, char **e)
{
    int rc = p3d_join_decode(p, n, o, e);
    if (rc < 0)
        p3d_join_free(o);
    return rc;
}
static void fr_join(void *o)
{
    p3d_join_free(o);
}
static int dec_cplace(const unsigned char *p, size_t n, void *o, char **e)
{
    return p3d_cplace_decode(p, n, o, e);
}
static void fr_cplace(void *o)
{
    p3d_place_msg_free(o);
}

/* JOIN, TREE and TJOIN survive the trip; a wrong protocol number stops
 * JOIN after the token (the leader says "version mismatch"). */
static void tree_messages(void **st)
{
    (void)st;
    p3d_join j = {.proto = P3D_WIRE_PROTO,
                  .version = P3D_VERSION,
                  .job_id = "j1",
                  .nnodes = 40,
                  .node_rank = 9,
                  .hostname = "n9",
                  .addr = "10.0.0.9",
                  .port = 4242,
                  .ring_port = 4343};
    p3d_wbuf b = {0};
    char *err = NULL;
    assert_int_equal(p3d_join_encode(&j, &b), 0);
    p3d_join dj;
    assert_int_equal(p3d_join_decode(b.p + 5, b.len - 5, &dj, &err), 0);
    assert_int_equal(dj.node_rank, 9);
    assert_int_equal(dj.port, 4242);
    assert_string_equal(dj.addr, "10.0.0.9");
    assert_int_equal(dj.ring_port, 4343);
    p3d_join_free(&dj);
    mangle(&b, dec_join, &dj, fr_join);
    /* a node joining the running job: node rank -1 and 0 nodes, both or
     * neither */
    j.nnodes = 0;
    j.node_rank = P3D_JOIN_RUNNING;
    assert_int_equal(p3d_join_encode(&j, &b), 0);
    assert_int_equal(p3d_join_decode(b.p + 5, b.len - 5, &dj, &err), 0);
    assert_int_equal(dj.node_rank, P3D_JOIN_RUNNING);
    assert_int_equal(dj.nnodes, 0);
    p3d_join_free(&dj);
    j.nnodes = 40; /* rank -1 of 40 nodes */
    assert_int_equal(p3d_join_encode(&j, &b), 0);
    assert_true(p3d_join_decode(b.p + 5, b.len - 5, &dj, &err) < 0);
    p3d_join_free(&dj);
    free(err);
    err = NULL;
    j.nnodes = 0; /* rank 9 of 0 nodes */
    j.node_rank = 9;
    assert_int_equal(p3d_join_encode(&j, &b), 0);
    assert_true(p3d_join_decode(b.p + 5, b.len - 5, &dj, &err) < 0);
    p3d_join_free(&dj);
    free(err);
    err = NULL;
    j.node_rank = -2; /* below P3D_JOIN_RUNNING */
    assert_int_equal(p3d_join_encode(&j, &b), 0);
    assert_true(p3d_join_decode(b.p + 5, b.len - 5, &dj, &err) < 0);
    p3d_join_free(&dj);
    free(err);
    err = NULL;
    p3d_treepos t = {.parent = 2, .addr = "10.0.0.2", .port = 999, .nchildren = 3, .fanout = 4}, dt;
    assert_int_equal(p3d_treepos_encode(&t, &b), 0);
    assert_int_equal(p3d_treepos_decode(b.p + 5, b.len - 5, &dt, &err), 0);
    assert_int_equal(dt.fanout, 4);
    assert_int_equal(dt.nchildren, 3);
    assert_int_equal(dt.ring_port, 0); /* no ring: "" and 0 */
    assert_string_equal(dt.ring_addr, "");
    p3d_treepos_free(&dt);
    /* --preflight's TCP ring: the next node's address and port */
    t.ring_addr = "fd00::7";
    t.ring_port = 5151;
    assert_int_equal(p3d_treepos_encode(&t, &b), 0);
    assert_int_equal(p3d_treepos_decode(b.p + 5, b.len - 5, &dt, &err), 0);
    assert_string_equal(dt.ring_addr, "fd00::7");
    assert_int_equal(dt.ring_port, 5151);
    p3d_treepos_free(&dt);
    /* a ring port without an address: refused */
    t.ring_addr = "";
    assert_int_equal(p3d_treepos_encode(&t, &b), 0);
    assert_true(p3d_treepos_decode(b.p + 5, b.len - 5, &dt, &err) < 0);
    free(err);
    err = NULL;
    t.ring_port = 0;
    /* more children than the fan-out: refused */
    t.nchildren = 5;
    assert_int_equal(p3d_treepos_encode(&t, &b), 0);
    assert_true(p3d_treepos_decode(b.p + 5, b.len - 5, &dt, &err) < 0);
    free(err);
    err = NULL;
    p3d_tjoin tj = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .job_id = "", .node_rank = 37}, dtj;
    assert_int_equal(p3d_tjoin_encode(&tj, &b), 0);
    assert_int_equal(p3d_tjoin_decode(b.p + 5, b.len - 5, &dtj, &err), 0);
    assert_int_equal(dtj.node_rank, 37);
    p3d_tjoin_free(&dtj);
    p3d_wbuf_free(&b);
}

/* Records merged up the tree keep one topology per hash. */
static void gather_merge(void **st)
{
    (void)st;
    p3d_gather a = {0}, c = {0}, d;
    char *err = NULL;
    p3d_grec r1 = {.rank = 1, .hostname = "n1", .addr = "10.0.0.1", .rack = "r0", .master_port = 1},
             r2 = {.rank = 5, .hostname = "n5", .addr = "10.0.0.5", .master_port = 2};
    assert_int_equal(p3d_gather_add(&a, &r1, node(), &err), 0);
    assert_int_equal(p3d_gather_add(&c, &r2, node(), &err), 0);
    p3d_wbuf b = {0};
    assert_int_equal(p3d_gather_encode(&c, &b), 0);
    p3d_gather_free(&c);
    assert_int_equal(p3d_gather_decode(b.p + 5, b.len - 5, 64, &d, &err), 0);
    assert_null(d.recs[0].rack);
    assert_int_equal(p3d_gather_merge(&a, &d, &err), 0);
    assert_int_equal(a.nrec, 2);
    assert_int_equal(a.ntopos, 1); /* the same hash: one topology */
    assert_int_equal(a.recs[1].topo, 0);
    assert_string_equal(a.recs[0].rack, "r0");
    /* a rank outside the job is refused */
    assert_true(p3d_gather_decode(b.p + 5, b.len - 5, 5, &d, &err) < 0);
    free(err);
    mangle(&b, dec_gather, &d, fr_gather);
    p3d_gather_free(&a);
    p3d_wbuf_free(&b);
}

/* Adds the three records to g, encodes it into *b and decodes that into *d. */
static void gather_three(p3d_gather *g, const p3d_grec *r0, const p3d_grec *r1, const p3d_grec *r2, p3d_wbuf *b,
                         p3d_gather *d)
{
    char *err = NULL;
    assert_int_equal(p3d_gather_add(g, r0, node(), &err), 0);
    assert_int_equal(p3d_gather_add(g, r1, node(), &err), 0);
    assert_int_equal(p3d_gather_add(g, r2, node(), &err), 0);
    assert_int_equal(p3d_gather_encode(g, b), 0);
    assert_int_equal(p3d_gather_decode(b->p + 5, b->len - 5, 8, d, &err), 0);
}

/* A record's pre-start --health-check: none, passed, or failed with a
 * printable reason; anything else is refused. */
static void gather_health(void **st)
{
    (void)st;
    p3d_gather g = {0}, d;
    char *err = NULL;
    p3d_grec r0 = {.rank = 0, .hostname = "n0", .addr = "a", .health = P3D_GREC_HEALTH_OK},
             r1 = {.rank = 1,
                   .hostname = "n1",
                   .addr = "b",
                   .health = P3D_GREC_HEALTH_FAILED,
                   .health_how = "its process ended with exit code 1: gpu 3 is missing"},
             r2 = {.rank = 2, .hostname = "n2", .addr = "c"};
    p3d_wbuf b = {0};
    gather_three(&g, &r0, &r1, &r2, &b, &d);
    assert_int_equal(d.recs[0].health, P3D_GREC_HEALTH_OK);
    assert_null(d.recs[0].health_how);
    assert_int_equal(d.recs[1].health, P3D_GREC_HEALTH_FAILED);
    assert_string_equal(d.recs[1].health_how, r1.health_how);
    assert_int_equal(d.recs[2].health, P3D_GREC_HEALTH_NONE);
    p3d_gather_free(&d);
    /* the last record's health fields sit at the end of the frame, before
     * its preflight line: state (u32), then the reason (u32 length + bytes,
     * "" here), then the line (u32 length, "" here) */
    size_t end = b.len;
    unsigned char *st3 = b.p + end - 12;
    assert_int_equal(st3[3], P3D_GREC_HEALTH_NONE);
    st3[3] = 3; /* no such state */
    assert_true(p3d_gather_decode(b.p + 5, b.len - 5, 8, &d, &err) < 0);
    P3D_FREE(&err);
    st3[3] = P3D_GREC_HEALTH_FAILED; /* a failure without a reason */
    assert_true(p3d_gather_decode(b.p + 5, b.len - 5, 8, &d, &err) < 0);
    P3D_FREE(&err);
    st3[3] = P3D_GREC_HEALTH_NONE;
    assert_int_equal(p3d_gather_decode(b.p + 5, b.len - 5, 8, &d, &err), 0);
    p3d_gather_free(&d);
    p3d_wbuf_free(&b);
    /* a reason with a control character, or with a passed check (the state
     * patched after encoding: the encoder never sends one), or longer than
     * P3D_GREC_HOW_MAX */
    const char *hows[] = {"exit 1\033[2J", "x", NULL};
    int states[] = {P3D_GREC_HEALTH_FAILED, P3D_GREC_HEALTH_OK, P3D_GREC_HEALTH_FAILED};
    char longhow[P3D_GREC_HOW_MAX + 2];
    memset(longhow, 'y', sizeof longhow - 1);
    longhow[sizeof longhow - 1] = 0;
    hows[2] = longhow;
    for (int k = 0; k < 3; k++) {
        p3d_gather h = {0};
        p3d_grec r = {.rank = 0, .hostname = "n0", .addr = "a", .health = P3D_GREC_HEALTH_FAILED, .health_how = "x"};
        assert_int_equal(p3d_gather_add(&h, &r, node(), &err), 0);
        /* forge the record past p3d_gather_add's own bounds */
        free(h.recs[0].health_how);
        h.recs[0].health = P3D_GREC_HEALTH_FAILED;
        h.recs[0].health_how = strdup(hows[k]);
        p3d_wbuf w = {0};
        assert_int_equal(p3d_gather_encode(&h, &w), 0);
        /* the state's low byte: before the reason's 4-byte length and
         * bytes, and the empty preflight line's 4-byte length */
        unsigned char *sb = w.p + w.len - 4 - strlen(hows[k]) - 4 - 1;
        assert_int_equal(*sb, P3D_GREC_HEALTH_FAILED);
        *sb = (unsigned char)states[k];
        if (p3d_gather_decode(w.p + 5, w.len - 5, 8, &d, &err) == 0)
            fail_msg("accepted a GATHER record with health %d and reason '%.20s...'", states[k], hows[k]);
        P3D_FREE(&err);
        p3d_gather_free(&h);
        p3d_wbuf_free(&w);
    }
    p3d_gather_free(&g);
}

/* A record's --preflight line travels as it is (the leader parses it):
 * none, the figures, or a failure; a control character or a line longer
 * than P3D_GREC_HOW_MAX is refused. */
static void gather_preflight(void **st)
{
    (void)st;
    p3d_gather g = {0}, d;
    char *err = NULL;
    p3d_grec r0 = {.rank = 0,
                   .hostname = "n0",
                   .addr = "a",
                   .preflight = "preflight gflops=6.2 mem_gbps=14 seconds=0.9"},
             r1 = {.rank = 1, .hostname = "n1", .addr = "b", .preflight = "failed: its benchmark failed: exit 1"},
             r2 = {.rank = 2, .hostname = "n2", .addr = "c"};
    p3d_wbuf b = {0};
    gather_three(&g, &r0, &r1, &r2, &b, &d);
    assert_string_equal(d.recs[0].preflight, r0.preflight);
    assert_string_equal(d.recs[1].preflight, r1.preflight);
    assert_null(d.recs[2].preflight);
    p3d_gather_free(&d);
    p3d_wbuf_free(&b);
    p3d_gather_free(&g);
    char longline[P3D_GREC_HOW_MAX + 2];
    memset(longline, 'g', sizeof longline - 1);
    longline[sizeof longline - 1] = 0;
    const char *bad[] = {"preflight gflops=1\033]0;x\007", longline};
    for (int k = 0; k < 2; k++) {
        p3d_gather h = {0};
        p3d_grec r = {.rank = 0, .hostname = "n0", .addr = "a", .preflight = "x"};
        assert_int_equal(p3d_gather_add(&h, &r, node(), &err), 0);
        free(h.recs[0].preflight); /* forged past p3d_gather_add's own bound */
        h.recs[0].preflight = strdup(bad[k]);
        p3d_wbuf w = {0};
        assert_int_equal(p3d_gather_encode(&h, &w), 0);
        if (p3d_gather_decode(w.p + 5, w.len - 5, 8, &d, &err) == 0)
            fail_msg("accepted a GATHER record with the preflight line '%.20s...'", bad[k]);
        P3D_FREE(&err);
        p3d_gather_free(&h);
        p3d_wbuf_free(&w);
    }
}

/* The compact placement expands to the leader's JSON byte for byte (a
 * 16-node cluster, tp 8 pp 2 dp 8, node names that run in numbers and one
 * that does not), and is much smaller than it. */
static void cplace_expands(void **st)
{
    (void)st;
    char *err = NULL;
    p3d_cluster *c = NULL;
    p3d_node *t = node();
    assert_int_equal(p3d_cluster_from_node(t, &c, &err), 0);
    int nn = 16;
    c->nodes = realloc(c->nodes, (size_t)nn * sizeof *c->nodes);
    for (int i = 0; i < nn; i++) {
        if (i)
            c->nodes[i] = (p3d_cnode){.topo = c->topos[0], .rack = 0, .nvl_domain = -1};
        free(i ? NULL : c->nodes[0].name);
        if (asprintf(&c->nodes[i].name, i == 7 ? "login" : "gpu%03d", i + 1) < 0)
            fail();
    }
    c->nnodes = (size_t)nn;
    char *racks[16];
    for (int i = 0; i < nn; i++)
        racks[i] = i < 8 ? "ra" : "rb";
    assert_int_equal(p3d_cluster_set_racks(c, racks, &err), 0);
    p3d_placement pl = {.policy = "megatron", .policy_source = "lua/megatron.lua"};
    for (int d = 0; d < P3D_NDIMS; d++)
        pl.mesh.size[d] = 1;
    pl.mesh.size[P3D_DIM_TP] = 8;
    pl.mesh.size[P3D_DIM_PP] = 2;
    pl.mesh.size[P3D_DIM_DP] = 8;
    assert_int_equal(p3d_mesh_set_order(&pl.mesh, "tp-cp-ep-dp-pp", &err), 0);
    assert_int_equal(p3d_mesh_resolve(&pl.mesh, &err), 0);
    pl.world = p3d_mesh_world(&pl.mesh);
    assert_int_equal(pl.world, 128);
    pl.ranks = calloc((size_t)pl.world, sizeof *pl.ranks);
    for (int q = 0; q < pl.world; q++) {
        /* pipelines within a rack, nodes out of order */
        pl.ranks[q].node = (q / 8 * 5) % nn;
        pl.ranks[q].gpu = 7 - q % 8;
        pl.ranks[q].local_rank = q % 8;
        p3d_mesh_coord(&pl.mesh, q, pl.ranks[q].coord);
    }
    p3d_analysis an;
    memset(&an, 0, sizeof an);
    p3d_report_in in = {.cluster = c, .pl = &pl, .an = &an};
    char *json = p3d_report_json(&in);
    p3d_cplace_in ci = {.job_id = "j",
                        .master_addr = "10.0.0.1",
                        .master_port = 7,
                        .nccl_port = 8,
                        .cluster = c,
                        .pl = &pl,
                        .json = json,
                        .batch = {.global = 48, .micro = 1, .micros = 0, .tol_mpct = 0},
                        .fault_ms = P3D_FAULT_MS_MAX};
    p3d_wbuf b = {0};
    int compact = 0;
    assert_int_equal(p3d_cplace_encode(&ci, &b, &compact, &err), 0);
    assert_int_equal(compact, 1);
    assert_true(b.len < strlen(json));
    p3d_place_msg m;
    assert_int_equal(p3d_cplace_decode(b.p + 5, b.len - 5, &m, &err), 0);
    assert_int_equal(m.json_len, strlen(json));
    assert_memory_equal(m.json, json, m.json_len);
    assert_string_equal(m.names[7], "login");
    assert_string_equal(m.names[8], "gpu009");
    assert_int_equal(m.pl->ranks[9].node, pl.ranks[9].node);
    assert_int_equal(m.pl->ranks[9].gpu, 6);
    assert_int_equal(m.pl->ranks[77].coord[P3D_DIM_PP], pl.ranks[77].coord[P3D_DIM_PP]);
    assert_int_equal(m.batch.global, 48);
    assert_int_equal(m.batch.micro, 1);
    assert_int_equal(m.fault_ms, P3D_FAULT_MS_MAX);
    p3d_place_msg_free(&m);
    mangle(&b, dec_cplace, &m, fr_cplace);
    p3d_wbuf_free(&b);
    /* a JSON the compact form cannot rebuild goes verbatim */
    ci.json = "{\"not\": \"a report\"}\n";
    assert_int_equal(p3d_cplace_encode(&ci, &b, &compact, &err), 0);
    assert_int_equal(compact, 0);
    assert_int_equal(p3d_cplace_decode(b.p + 5, b.len - 5, &m, &err), 0);
    assert_string_equal(m.json, ci.json);
    assert_int_equal(m.batch.global, 48);
    assert_int_equal(m.fault_ms, P3D_FAULT_MS_MAX);
    p3d_place_msg_free(&m);
    p3d_wbuf_free(&b);
    free(json);
    free(pl.ranks);
    p3d_cluster_free(c);
}

static void frame_bounds(void **st)
{
    (void)st;
    p3d_framer f = {0};
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    unsigned char huge[5] = {0xff, 0xff, 0xff, 0xff, 'H'};
    assert_int_equal(write(sv[1], huge, 5), 5);
    char *err = NULL;
    assert_int_equal(p3d_framer_fill(&f, sv[0], &err), -1);
    assert_non_null(strstr(err, "bad frame length"));
    free(err);
    p3d_framer_free(&f);
    close(sv[0]);
    close(sv[1]);
}

/* The first frame of an unauthenticated peer, fed as it arrives (wire.h,
 * p3d_framer_feed): judged by its length before any of it is kept. */
static void frame_preauth(void **st)
{
    (void)st;
    char *err = NULL;
    p3d_framer f = {0};
    p3d_framer_first_max(&f, 64);
    /* the length prefix first, a byte at a time */
    assert_int_equal(p3d_framer_want(&f, 4096), 4);
    unsigned char big[4] = {0, 0, 0, 65};
    assert_int_equal(p3d_framer_feed(&f, big, 1, &err), 0);
    assert_int_equal(p3d_framer_want(&f, 4096), 3);
    assert_int_equal(p3d_framer_feed(&f, big + 1, 2, &err), 0);
    assert_int_equal(p3d_framer_feed(&f, big + 3, 1, &err), -2);
    assert_non_null(strstr(err, "over 64 bytes"));
    assert_int_equal(f.len, 3); /* nothing of the refused frame's body, not even its last length byte */
    free(err);
    err = NULL;
    p3d_framer_free(&f);
    /* a malformed length */
    p3d_framer_first_max(&f, 64);
    unsigned char zero[5] = {0, 0, 0, 0, 'J'};
    assert_int_equal(p3d_framer_feed(&f, zero, sizeof zero, &err), -1);
    assert_non_null(strstr(err, "bad frame length 0"));
    free(err);
    err = NULL;
    p3d_framer_free(&f);
    /* a first frame at the bound, and a bigger second one in the same
     * bytes: the second stays queued for the joined peer */
    p3d_framer_first_max(&f, 64);
    unsigned char two[4 + 64 + 4 + 101];
    memset(two, 'x', sizeof two);
    memcpy(two, (unsigned char[]){0, 0, 0, 64, P3D_MSG_JOIN}, 5);
    memcpy(two + 68, (unsigned char[]){0, 0, 0, 101, P3D_MSG_GATHER}, 5);
    assert_int_equal(p3d_framer_feed(&f, two, 4, &err), 0);
    assert_int_equal(p3d_framer_want(&f, 4096), 4096);
    assert_int_equal(p3d_framer_feed(&f, two + 4, 63, &err), 0);
    assert_int_equal(p3d_framer_feed(&f, two + 67, sizeof two - 67, &err), 1);
    unsigned char *body = NULL;
    size_t len = 0;
    assert_int_equal(p3d_framer_take(&f, &body, &len), P3D_MSG_JOIN);
    assert_int_equal(len, 63);
    free(body);
    assert_int_equal(f.first_max, 0);
    assert_int_equal(p3d_framer_take(&f, &body, &len), P3D_MSG_GATHER);
    assert_int_equal(len, 100);
    free(body);
    assert_int_equal(f.len, 0);
    p3d_framer_free(&f);
    /* a good first frame, then a malformed length in the same bytes: found
     * once the first is taken */
    p3d_framer_first_max(&f, 64);
    unsigned char bad2[5 + 4] = {0, 0, 0, 1, P3D_MSG_JOIN, 0, 0, 0, 0};
    assert_int_equal(p3d_framer_feed(&f, bad2, sizeof bad2, &err), 1);
    assert_int_equal(p3d_framer_take(&f, &body, &len), P3D_MSG_JOIN);
    free(body);
    assert_int_equal(p3d_framer_feed(&f, NULL, 0, &err), -1);
    assert_non_null(strstr(err, "bad frame length 0"));
    free(err);
    p3d_framer_free(&f);
}

/* --rdzv k8s: the leader's DNS name from the pod's own */
static void k8s_leader_name(void **state)
{
    (void)state;
    char out[256], msg[256];
    assert_int_equal(p3d_k8s_leader_host("p3d-train-3", "p3d-train-3.p3d.ml.svc.cluster.local", 3, out, sizeof out, msg,
                                         sizeof msg),
                     0);
    assert_string_equal(out, "p3d-train-0.p3d.ml.svc.cluster.local");
    /* a JobSet pod: <jobset>-<replicated job>-<job index>-<pod index> */
    assert_int_equal(p3d_k8s_leader_host("js-workers-0-12", "js-workers-0-12.js", 12, out, sizeof out, msg, sizeof msg),
                     0);
    assert_string_equal(out, "js-workers-0-0.js");
    /* the index must be the hostname's suffix (not "-13" for 3) */
    assert_int_equal(p3d_k8s_leader_host("p3d-train-13", "p3d-train-13.p3d", 3, out, sizeof out, msg, sizeof msg),
                     P3D_PLUGIN_FAIL);
    assert_non_null(strstr(msg, "does not end in -3"));
    assert_int_equal(p3d_k8s_leader_host("p3d-train-3", "p3d-train-3", 3, out, sizeof out, msg, sizeof msg),
                     P3D_PLUGIN_FAIL);
    assert_non_null(strstr(msg, "spec.subdomain"));
    assert_int_equal(p3d_k8s_leader_host("p3d-train-3", NULL, 3, out, sizeof out, msg, sizeof msg), P3D_PLUGIN_FAIL);
    assert_int_equal(p3d_k8s_leader_host("-3", "-3.x", 3, out, sizeof out, msg, sizeof msg), P3D_PLUGIN_FAIL);
    assert_int_equal(p3d_k8s_leader_host("a-3", "a-3.x", 3, out, 4, msg, sizeof msg), P3D_PLUGIN_FAIL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hello_roundtrip), cmocka_unit_test(place_roundtrip),  cmocka_unit_test(frame_bounds),
        cmocka_unit_test(frame_preauth),   cmocka_unit_test(tree_messages),    cmocka_unit_test(gather_merge),
        cmocka_unit_test(gather_health),   cmocka_unit_test(gather_preflight), cmocka_unit_test(cplace_expands),
        cmocka_unit_test(k8s_leader_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
