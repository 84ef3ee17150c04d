/* SPDX-License-Identifier: BSD-3-Clause */
/* test_takeover_plan.c — a successor places like the leader would have
 * (launcher/run/takeover.c): five nodes, one a spare, the leader places
 * and sends the compact placement; the successor rebuilds the plan from
 * those bytes alone (every node's topology, the roles from the JSON, the
 * current placement). Then the leader's node (node rank 0) is lost: the
 * one replacement path, run on the successor's rebuilt plan, moves only
 * node 0's ranks, all to the spare, GPU for GPU as the leader's own plan
 * would — and the same again for a second loss (node rank 1, the first
 * successor, when a second spare is there). A placement sent as JSON
 * (no topologies) is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"
#include "mnode.h"
#include "plan.h"
#include "p3d/report.h"

static p3d_cluster *five(int nn)
{
    p3d_node *n = NULL;
    char *err = NULL, path[4096];
    const char *src = getenv("P3D_SRC");
    snprintf(path, sizeof path, "%s/tests/fixtures/realdata/topo/dgx-a100_12nic.txt", src ? src : "..");
    if (p3d_topo_load(path, &n, &err) < 0)
        fail_msg("topology: %s", err);
    p3d_cluster *c = NULL;
    assert_int_equal(p3d_cluster_from_node(n, &c, &err), 0);
    c->nodes = realloc(c->nodes, (size_t)nn * sizeof *c->nodes);
    for (int i = 0; i < nn; i++) {
        if (i)
            c->nodes[i] = (p3d_cnode){.topo = c->topos[0], .rack = 0, .nvl_domain = -1};
        free(i ? NULL : c->nodes[0].name);
        if (asprintf(&c->nodes[i].name, "gpu%03d", i + 1) < 0)
            fail();
    }
    c->nnodes = (size_t)nn;
    return c;
}

static void opts(p3d_opts *o, const char *spares)
{
    char *argv[] = {"par3drun", "--tp", "8", "--pp", "2", "--spares", (char *)spares, "--dry-run", NULL};
    char *err = NULL;
    memset(o, 0, sizeof *o);
    if (p3d_cli_parse(8, argv, o, &err) != 0)
        fail_msg("options: %s", err ? err : "?");
}

/* The leader's plan and the CPLACE frame it sends. */
static void leader(const p3d_opts *o, int nn, p3d_plan_result *res, p3d_wbuf *frame)
{
    char *err = NULL;
    if (p3d_place_cluster(o, five(nn), res, &err) < 0)
        fail_msg("place: %s", err);
    p3d_report_in in = p3d_plan_report_in(res);
    char *json = p3d_report_json(&in);
    assert_non_null(json);
    p3d_cplace_in ci = {.job_id = "j1",
                        .master_addr = "127.0.0.1",
                        .master_port = 29500,
                        .nccl_port = 29501,
                        .cluster = res->cluster,
                        .pl = res->pl,
                        .json = json};
    int compact = 0;
    assert_int_equal(p3d_cplace_encode(&ci, frame, &compact, &err), 0);
    assert_int_equal(compact, 1);
    free(json);
}

static int spare_of(const p3d_cluster *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].role == P3D_NODE_SPARE)
            return (int)i;
    return -1;
}

/* Both plans lose node `lost`: the same new placement, and only the lost
 * node's ranks move, to the spare the successor saw, GPU for GPU. */
static void lose(const p3d_opts *o, p3d_plan_result *lr, p3d_plan_result *sr, int lost, int restart)
{
    char *err = NULL;
    int world = sr->pl->world, spare = spare_of(sr->cluster);
    assert_true(spare >= 0);
    assert_int_equal(spare, spare_of(lr->cluster));
    int *was = malloc((size_t)world * sizeof *was), *gpu = malloc((size_t)world * sizeof *gpu), moved = 0;
    for (int q = 0; q < world; q++) {
        was[q] = sr->pl->ranks[q].node;
        gpu[q] = sr->pl->ranks[q].gpu;
    }
    if (p3d_place_replace(o, lr, &lost, 1, restart, &err) < 0)
        fail_msg("leader's replace: %s", err);
    if (p3d_place_replace(o, sr, &lost, 1, restart, &err) < 0)
        fail_msg("successor's replace: %s", err);
    for (int q = 0; q < world; q++) {
        assert_int_equal(sr->pl->ranks[q].node, lr->pl->ranks[q].node);
        assert_int_equal(sr->pl->ranks[q].gpu, lr->pl->ranks[q].gpu);
        if (was[q] == lost) {
            assert_int_equal(sr->pl->ranks[q].node, spare);
            moved++;
        } else {
            assert_int_equal(sr->pl->ranks[q].node, was[q]);
            assert_int_equal(sr->pl->ranks[q].gpu, gpu[q]);
        }
    }
    assert_int_equal(moved, 8);
    assert_int_equal(sr->cluster->nodes[lost].role, P3D_NODE_LOST);
    free(was);
    free(gpu);
}

static void test_successor_places_as_leader(void **st)
{
    (void)st;
    p3d_opts o;
    opts(&o, "2");
    p3d_plan_result lr, sr;
    p3d_wbuf frame = {0};
    leader(&o, 6, &lr, &frame);
    p3d_place_msg pm;
    char *err = NULL;
    if (p3d_takeover_plan(&o, p3d_frame_body(&frame), p3d_frame_body_len(&frame), &sr, &pm, &err) < 0)
        fail_msg("takeover plan: %s", err);
    /* the same cluster and roles, the same placement */
    assert_int_equal(sr.cluster->nnodes, lr.cluster->nnodes);
    for (size_t i = 0; i < sr.cluster->nnodes; i++) {
        assert_string_equal(sr.cluster->nodes[i].name, lr.cluster->nodes[i].name);
        assert_int_equal(sr.cluster->nodes[i].role, lr.cluster->nodes[i].role);
        assert_string_equal(sr.cluster->nodes[i].topo->hash, lr.cluster->nodes[i].topo->hash);
    }
    assert_int_equal(sr.pl->world, 32);
    for (int q = 0; q < sr.pl->world; q++) {
        assert_int_equal(sr.pl->ranks[q].node, lr.pl->ranks[q].node);
        assert_int_equal(sr.pl->ranks[q].gpu, lr.pl->ranks[q].gpu);
    }
    assert_int_equal(sr.an->nerrors, 0);
    /* the leader's node is lost, then the first successor's */
    lose(&o, &lr, &sr, 0, 1);
    lose(&o, &lr, &sr, 1, 2);
    p3d_plan_result_free(&lr);
    p3d_plan_result_free(&sr);
    p3d_place_msg_free(&pm);
    p3d_wbuf_free(&frame);
}

static void test_refused(void **st)
{
    (void)st;
    p3d_opts o;
    opts(&o, "1");
    p3d_plan_result lr, sr;
    p3d_wbuf frame = {0};
    leader(&o, 5, &lr, &frame);
    p3d_place_msg pm;
    char *err = NULL;
    /* a placement sent as JSON: no topologies to place with */
    p3d_cplace_in ci = {.job_id = "j1",
                        .master_addr = "127.0.0.1",
                        .master_port = 1,
                        .nccl_port = 2,
                        .cluster = lr.cluster,
                        .pl = lr.pl,
                        .json = "{\"not\": \"a report\"}\n"};
    p3d_wbuf vb = {0};
    int compact = 1;
    assert_int_equal(p3d_cplace_encode(&ci, &vb, &compact, &err), 0);
    assert_int_equal(compact, 0);
    assert_int_equal(p3d_takeover_plan(&o, p3d_frame_body(&vb), p3d_frame_body_len(&vb), &sr, &pm, &err), -1);
    assert_non_null(strstr(err, "without the nodes' topologies"));
    free(err);
    err = NULL;
    p3d_place_msg_free(&pm);
    p3d_wbuf_free(&vb);
    p3d_plan_result_free(&lr);
    p3d_wbuf_free(&frame);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_successor_places_as_leader),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
