/* SPDX-License-Identifier: BSD-3-Clause */
/* test_place_reshape.c — a running job at another width (launcher/plan/
 * place_reshape.c): 8 DGX H100 nodes of 2 rank slots (TP pairs on NVLink), tp2 pp2 dp4 (a replica on two
 * nodes), --min-dp 2, --global-batch 24 --micro-batch 2. A lost node with
 * no spare shrinks the job to dp 3 (the survivors keep node, slot, tp and
 * pp; the dropped replica's other node becomes a spare; the shrink record
 * keeps the batch with 4 micro-batches); one spare node cannot hold a
 * replica (no room); a second spare (a node joining) can: the grow goes
 * back to dp 4 with 3 micro-batches, every rank of dp 3 where it was.
 * Losses down to D, then one more: refused, naming --min-dp. A job that
 * is not elastic refuses to shrink. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"
#include "plan.h"

static char cluster_path[4096];

static void write_cluster(void)
{
    const char *src = getenv("P3D_SRC");
    snprintf(cluster_path, sizeof cluster_path, "/tmp/p3d-reshape-%d.json", (int)getpid());
    FILE *f = fopen(cluster_path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"nodes\": [{\"name\": \"m[1-8]\", \"topology\": \"%s/examples/topologies/dgx-h100.xml\", "
            "\"rack\": \"r1\"}]}\n",
            src ? src : "..");
    fclose(f);
}

static void place(p3d_opts *o, p3d_plan_result *res, const char *min_dp)
{
    char *argv[] = {"par3drun",
                    "--cluster",
                    cluster_path,
                    "--nproc-per-node",
                    "2",
                    "--tp",
                    "2",
                    "--pp",
                    "2",
                    "--dp",
                    "4",
                    "--global-batch",
                    "24",
                    "--micro-batch",
                    "2",
                    "--min-dp",
                    (char *)min_dp,
                    "--dry-run",
                    NULL};
    int argc = 18;
    char *err = NULL;
    memset(o, 0, sizeof *o);
    if (!min_dp)
        argc = 16, argv[15] = "--dry-run", argv[16] = NULL;
    if (p3d_cli_parse(argc, argv, o, &err) != 0)
        fail_msg("options: %s", err ? err : "?");
    if (p3d_place(o, res, &err) < 0)
        fail_msg("place: %s", err);
}

static int node_of(const p3d_plan_result *r, const char *name)
{
    for (size_t i = 0; i < r->cluster->nnodes; i++)
        if (!strcmp(r->cluster->nodes[i].name, name))
            return (int)i;
    fail_msg("no node %s", name);
    return -1;
}

static int dp_of(const p3d_plan_result *r)
{
    return p3d_mesh_size(&r->pl->mesh, P3D_DIM_DP);
}

/* The events written so far (the file behind fd). */
static char *events(FILE *f)
{
    static char buf[8192];
    fflush(f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fseek(f, 0, SEEK_END);
    return buf;
}

/* Every (node, slot) of a that is in b holds the same tp and pp there. */
static void kept(const p3d_placement *a, const p3d_placement *b)
{
    for (int q = 0; q < a->world; q++)
        for (int k = 0; k < b->world; k++)
            if (a->ranks[q].node == b->ranks[k].node && a->ranks[q].gpu == b->ranks[k].gpu) {
                assert_int_equal(a->ranks[q].coord[P3D_DIM_TP], b->ranks[k].coord[P3D_DIM_TP]);
                assert_int_equal(a->ranks[q].coord[P3D_DIM_PP], b->ranks[k].coord[P3D_DIM_PP]);
            }
}

static p3d_placement *copy_of(const p3d_placement *pl)
{
    p3d_placement *c = calloc(1, sizeof *c);
    *c = *pl;
    c->ranks = calloc((size_t)pl->world, sizeof *c->ranks);
    memcpy(c->ranks, pl->ranks, (size_t)pl->world * sizeof *c->ranks);
    return c;
}

static void free_copy(p3d_placement *c)
{
    free(c->ranks);
    free(c);
}

static void test_shrink_grow(void **st)
{
    (void)st;
    p3d_opts o;
    p3d_plan_result r;
    FILE *ev = tmpfile();
    assert_non_null(ev);
    place(&o, &r, "2");
    assert_int_equal(dp_of(&r), 4);
    int m3 = node_of(&r, "m3"), m4 = node_of(&r, "m4"), *was = NULL;
    char *msg = NULL;
    p3d_placement *before = copy_of(r.pl);
    int lost[1] = {m3};
    assert_int_equal(p3d_place_heal(&o, &r, lost, 1, 1, "lost m3", fileno(ev), 0, &was, &msg), 2);
    assert_null(was);
    assert_non_null(strstr(msg, "dp 4 -> 3 (world 16 -> 12), batch 24 kept: 4 micro-batches of 2"));
    free(msg);
    assert_int_equal(dp_of(&r), 3);
    assert_int_equal(r.pl->world, 12);
    assert_int_equal(r.cluster->nodes[m3].role, P3D_NODE_LOST);
    assert_int_equal(r.cluster->nodes[m4].role, P3D_NODE_SPARE);
    kept(before, r.pl);
    free_copy(before);
    const char *e = events(ev);
    assert_non_null(strstr(e, "\"event\": \"shrink\", \"old_dp\": 4, \"new_dp\": 3, \"old_world\": 16, "
                              "\"new_world\": 12, \"replicas_dropped\": 1"));
    assert_non_null(strstr(e, "\"global_batch\": 24, \"micro_batch\": 2, \"micro_batches\": 4, \"batch\": 24"));
    /* one spare node holds half a replica: no room */
    assert_int_equal(p3d_place_grow_room(&r), 0);
    assert_int_equal(p3d_place_grow(&o, &r, 2, NULL, fileno(ev), 0, &msg), 1);
    free(msg);
    /* a node joins (m3's name again, a fresh node): a whole replica fits */
    r.cluster->nodes[m3].role = P3D_NODE_SPARE;
    assert_int_equal(p3d_place_grow_room(&r), 1);
    before = copy_of(r.pl);
    assert_int_equal(p3d_place_grow(&o, &r, 2, "at the ranks' checkpoint step 40", fileno(ev), 0, &msg), 0);
    assert_non_null(strstr(msg, "grown from dp 3 to dp 4 (world 12 -> 16)"));
    free(msg);
    assert_int_equal(dp_of(&r), 4);
    assert_int_equal(r.cluster->nodes[m3].role, P3D_NODE_USE);
    assert_int_equal(r.cluster->nodes[m4].role, P3D_NODE_USE);
    kept(before, r.pl);
    free_copy(before);
    assert_non_null(strstr(events(ev), "\"event\": \"grow\", \"old_dp\": 3, \"new_dp\": 4"));
    /* the record says what made the grow due */
    assert_non_null(
        strstr(events(ev), "\"reason\": \"the spares hold 1 more replica, at the ranks' checkpoint step 40\""));
    assert_int_equal(p3d_place_grow_room(&r), 0); /* full width */
    /* down to D = 2, then one more loss: refused, naming D */
    int m1 = node_of(&r, "m1"), m5 = node_of(&r, "m5"), m7 = node_of(&r, "m7");
    lost[0] = m1;
    assert_int_equal(p3d_place_heal(&o, &r, lost, 1, 3, "lost m1", -1, 0, &was, &msg), 2);
    free(msg);
    lost[0] = m5;
    assert_int_equal(p3d_place_heal(&o, &r, lost, 1, 4, "lost m5", -1, 0, &was, &msg), 2);
    free(msg);
    assert_int_equal(dp_of(&r), 2);
    lost[0] = m7;
    assert_int_equal(p3d_place_heal(&o, &r, lost, 1, 5, "lost m7", -1, 0, &was, &msg), -1);
    assert_non_null(strstr(msg, "--min-dp is 2"));
    free(msg);
    assert_int_equal(dp_of(&r), 2); /* the job as it was: it stops */
    fclose(ev);
    p3d_plan_result_free(&r);
}

static void test_not_elastic(void **st)
{
    (void)st;
    p3d_opts o;
    p3d_plan_result r;
    char *msg = NULL;
    int *was = NULL;
    place(&o, &r, NULL);
    int lost[1] = {node_of(&r, "m3")};
    assert_int_equal(p3d_place_heal(&o, &r, lost, 1, 1, "lost m3", -1, 0, &was, &msg), -1);
    assert_non_null(strstr(msg, "no spare node left"));
    assert_non_null(strstr(msg, "not elastic"));
    free(msg);
    assert_int_equal(p3d_place_grow_room(&r), 0);
    p3d_plan_result_free(&r);
}

int main(void)
{
    write_cluster();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shrink_grow),
        cmocka_unit_test(test_not_elastic),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(cluster_path);
    return rc;
}
