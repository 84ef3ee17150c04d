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
    p3d_hello h = {.proto = P3D_WIRE_PROTO, .version = P3D_VERSION, .token = "secret-token", .job_id = "j1",
                   .nnodes = 4, .node_rank = 2, .hostname = "n2", .addr = "10.0.0.2", .master_port = 1234,
                   .nccl_port = 0, .topo = node()};
    p3d_wbuf b = {0};
    assert_int_equal(p3d_hello_encode(&h, &b), 0);
    p3d_hello d;
    char *err = NULL;
    assert_int_equal(p3d_hello_decode(b.p + 5, b.len - 5, &d, &err), 0);
    assert_string_equal(d.hostname, "n2");
    assert_int_equal(d.node_rank, 2);
    assert_string_equal(d.topo->hash, h.topo->hash);
    assert_int_equal(d.topo->ngpus, 8);
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
    p3d_place_msg m = {.job_id = "j", .master_addr = "10.0.0.1", .master_port = 5, .nnodes = 2, .names = names,
                       .hashes = hashes, .pl = &pl, .json = "{\"x\": 1}\n", .json_len = 9};
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
    p3d_place_msg_free(&d);
    for (size_t cut = 0; cut < b.len - 5; cut++) {
        err = NULL;
        assert_true(p3d_place_decode(b.p + 5, cut, &d, &err) < 0);
        free(err);
    }
    /* a rank on a node that does not exist is refused */
    ranks[1].node = 2;
    p3d_wbuf_free(&b);
    assert_int_equal(p3d_place_encode(&m, &b), 0);
    err = NULL;
    assert_true(p3d_place_decode(b.p + 5, b.len - 5, &d, &err) < 0);
    free(err);
    p3d_wbuf_free(&b);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hello_roundtrip),
        cmocka_unit_test(place_roundtrip),
        cmocka_unit_test(frame_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
