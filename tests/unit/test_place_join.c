/* SPDX-License-Identifier: BSD-3-Clause */
/* test_place_join.c — a node joining a running job, the placement's part
 * (launcher/plan/place_join.c): a job on two DGX A100 nodes with no
 * spare (tp 8, pp 2); a third node of the same kind is appended as a
 * spare, then node 1 is lost: its ranks, and only its, move to the joined
 * node, GPU for GPU. Nodes of another kind are refused with what differs:
 * fewer GPUs (rank slots), another GPU model, other NVLink domains. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"
#include "plan.h"

static p3d_node *load(const char *file)
{
    p3d_node *n = NULL;
    char *err = NULL, path[4096];
    const char *src = getenv("P3D_SRC");
    snprintf(path, sizeof path, "%s/tests/fixtures/realdata/topo/%s", src ? src : "..", file);
    if (p3d_topo_load(path, &n, &err) < 0)
        fail_msg("topology %s: %s", file, err);
    return n;
}

/* Two nodes of one topology, "gpu001", "gpu002". */
static p3d_cluster *two(void)
{
    char *err = NULL;
    p3d_cluster *c = NULL;
    assert_int_equal(p3d_cluster_from_node(load("dgx-a100_12nic.txt"), &c, &err), 0);
    c->nodes = realloc(c->nodes, 2 * sizeof *c->nodes);
    assert_non_null(c->nodes);
    c->nodes[1] = (p3d_cnode){.topo = c->topos[0], .rack = 0, .nvl_domain = -1};
    free(c->nodes[0].name);
    c->nodes[0].name = strdup("gpu001");
    c->nodes[1].name = strdup("gpu002");
    c->nnodes = 2;
    return c;
}

static void place_two(p3d_opts *o, p3d_plan_result *res)
{
    char *argv[] = {"par3drun", "--tp", "8", "--pp", "2", "--spares", "0", "--dry-run", NULL};
    char *err = NULL;
    memset(o, 0, sizeof *o);
    if (p3d_cli_parse(8, argv, o, &err) != 0)
        fail_msg("options: %s", err ? err : "?");
    if (p3d_place_cluster(o, two(), res, &err) < 0)
        fail_msg("place: %s", err);
}

static void test_joined_spare_takes_ranks(void **st)
{
    (void)st;
    p3d_opts o;
    p3d_plan_result res;
    char *err = NULL;
    place_two(&o, &res);
    int world = res.pl->world;
    assert_int_equal(world, 16);
    p3d_node *n = load("dgx-a100_12nic.txt");
    assert_int_equal(p3d_join_fits(res.cluster, n, &err), 0);
    int a = p3d_plan_add_spare(&res, n, "gpu003", NULL, &err);
    assert_int_equal(a, 2);
    assert_int_equal((int)res.cluster->nnodes, 3);
    assert_int_equal((int)res.cluster->ntopos, 1); /* the same kind shares the record */
    assert_int_equal(res.cluster->nodes[2].role, P3D_NODE_SPARE);
    int *was = malloc((size_t)world * sizeof *was), *gpu = malloc((size_t)world * sizeof *gpu), moved = 0;
    assert_non_null(was);
    assert_non_null(gpu);
    for (int q = 0; q < world; q++) {
        was[q] = res.pl->ranks[q].node;
        gpu[q] = res.pl->ranks[q].gpu;
    }
    int lost = 1;
    if (p3d_place_replace(&o, &res, &lost, 1, 1, &err) < 0)
        fail_msg("replace: %s", err);
    for (int q = 0; q < world; q++) {
        if (was[q] == lost) {
            assert_int_equal(res.pl->ranks[q].node, 2);
            assert_int_equal(res.pl->ranks[q].gpu, gpu[q]);
            moved++;
        } else {
            assert_int_equal(res.pl->ranks[q].node, was[q]);
            assert_int_equal(res.pl->ranks[q].gpu, gpu[q]);
        }
    }
    assert_int_equal(moved, 8);
    assert_int_equal(res.cluster->nodes[1].role, P3D_NODE_LOST);
    free(was);
    free(gpu);
    p3d_plan_result_free(&res);
    p3d_cli_free(&o);
}

/* A node of another kind: refused, the message says what differs. */
static void refused(const p3d_cluster *c, p3d_node *n, const char *says)
{
    char *why = NULL;
    assert_int_equal(p3d_join_fits(c, n, &why), -1);
    assert_non_null(why);
    if (!strstr(why, says))
        fail_msg("refusal '%s' does not say '%s'", why, says);
    free(why);
    p3d_node_free(n);
}

static void test_other_kinds_refused(void **st)
{
    (void)st;
    p3d_opts o;
    p3d_plan_result res;
    char *err = NULL;
    place_two(&o, &res);
    /* fewer rank slots: 4 of the A100's 8 GPUs */
    p3d_cluster *jc = NULL;
    assert_int_equal(p3d_cluster_from_node(load("dgx-a100_12nic.txt"), &jc, &err), 0);
    assert_int_equal(p3d_cluster_set_slots(jc, 4, &err), 0);
    p3d_node *n = jc->topos[0];
    jc->ntopos = 0; /* taken */
    p3d_cluster_free(jc);
    refused(res.cluster, n, "it has 4 GPUs (rank slots), the job's nodes have 8");
    /* the same count, other NVLink domains: pairs over bridges */
    refused(res.cluster, load("a6000x8_nvlink-bridge-pairs_pytorch79299.txt"), "NVLink domains hold 2+2+2+2");
    /* the same count, no NVLink at all */
    refused(res.cluster, load("rtx4090x8_pcie-only_2nic_go-gpuallocator17.txt"), "NVLink domains hold");
    /* another model, the same shape */
    n = load("dgx-a100_12nic.txt");
    snprintf(n->gpus[0].model, sizeof n->gpus[0].model, "NVIDIA H100 80GB HBM3");
    snprintf(res.cluster->topos[0]->gpus[0].model, sizeof n->gpus[0].model, "NVIDIA A100-SXM4-80GB");
    refused(res.cluster, n, "its GPUs are NVIDIA H100 80GB HBM3, the job's are NVIDIA A100-SXM4-80GB");
    p3d_plan_result_free(&res);
    p3d_cli_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_joined_spare_takes_ranks),
        cmocka_unit_test(test_other_kinds_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
