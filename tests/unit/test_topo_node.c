/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topo_node.c — p3d_node_finish() on hand-built records: the NVLink
 * domain rules (clique, pairs, singletons, DGX-1 cube-mesh, two switch
 * islands), matrix validation, nearest-NIC ranking and tie-breaks, hash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_internal.h"

static p3d_node *mk(int g, int k)
{
    char *err = NULL;
    p3d_node *n = p3d_node_new("h", "test", "test");
    assert_non_null(n);
    assert_int_equal(p3d_node_alloc(n, g, k, &err), 0);
    return n;
}

static void link(p3d_node *n, int a, int b, double gbps)
{
    n->nvlink[a * n->ngpus + b] = n->nvlink[b * n->ngpus + a] = gbps;
}

static void finish_ok(p3d_node *n)
{
    char *err = NULL;
    if (p3d_node_finish(n, &err) != 0)
        fail_msg("finish: %s", err);
}

static void expect_domains(const p3d_node *n, int ndom, const int *dom)
{
    assert_int_equal(n->ndomains, ndom);
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpus[i].domain != dom[i])
            fail_msg("GPU%d: domain %d, expected %d", i, n->gpus[i].domain, dom[i]);
}

static void test_clique(void **s)
{
    (void)s;
    p3d_node *n = mk(8, 0);
    for (int a = 0; a < 8; a++)
        for (int b = a + 1; b < 8; b++)
            link(n, a, b, 450);
    finish_ok(n);
    expect_domains(n, 1, (int[]){0, 0, 0, 0, 0, 0, 0, 0});
    assert_int_equal(n->nvlink_connected_not_clique, 0);
    assert_int_equal(n->gg_class[1], P3D_LINK_NVLINK);
    assert_int_equal(n->gg_class[0], P3D_LINK_SELF);
    p3d_node_free(n);
}

static void test_pairs_and_singletons(void **s)
{
    (void)s;
    p3d_node *n = mk(6, 0);
    link(n, 2, 3, 100); /* bridge pairs, not starting at GPU 0 */
    link(n, 4, 5, 100);
    finish_ok(n);
    expect_domains(n, 4, (int[]){0, 1, 2, 2, 3, 3});
    int m[6];
    assert_int_equal(p3d_node_domain_members(n, 2, m, 6), 2);
    assert_int_equal(m[0], 2);
    assert_int_equal(m[1], 3);
    assert_int_equal(p3d_node_domain_members(n, 9, m, 6), 0);
    p3d_node_free(n);
}

/* DGX-1 V100 hybrid cube-mesh as nvidia-smi shows it: two quads, each
 * all-to-all, with cross links 0-4 1-5 2-6 3-7. Connected, not a clique:
 * cliques {0-3} {4-7} and the flag. */
static void test_dgx1_cube_mesh(void **s)
{
    (void)s;
    p3d_node *n = mk(8, 0);
    for (int q = 0; q < 8; q += 4)
        for (int a = q; a < q + 4; a++)
            for (int b = a + 1; b < q + 4; b++)
                link(n, a, b, (a + b) % 2 ? 50 : 25);
    for (int a = 0; a < 4; a++)
        link(n, a, a + 4, a < 2 ? 50 : 25);
    finish_ok(n);
    expect_domains(n, 2, (int[]){0, 0, 0, 0, 1, 1, 1, 1});
    assert_int_equal(n->nvlink_connected_not_clique, 1);
    assert_non_null(n->notes);
    assert_non_null(strstr(n->notes, "cube-mesh"));
    p3d_node_free(n);
}

/* A ring of 5: no triangle, so maximal cliques are edges; the split takes
 * the fattest edge first, then lowest GPUs: {3,4} (fat), {0,1}, {2}. */
static void test_ring_split_deterministic(void **s)
{
    (void)s;
    p3d_node *n = mk(5, 0);
    link(n, 0, 1, 25);
    link(n, 1, 2, 25);
    link(n, 2, 3, 25);
    link(n, 3, 4, 50);
    link(n, 4, 0, 25);
    finish_ok(n);
    /* domains renumbered by lowest GPU: {0,1}=0, {2}=1, {3,4}=2 */
    expect_domains(n, 3, (int[]){0, 0, 1, 2, 2});
    assert_int_equal(n->nvlink_connected_not_clique, 1);
    p3d_node_free(n);
}

static void test_matrix_validation(void **s)
{
    (void)s;
    char *err = NULL;
    p3d_node *n = mk(3, 0);
    n->nvlink[0 * 3 + 1] = 50; /* [1][0] stays 0 */
    assert_int_equal(p3d_node_finish(n, &err), -1);
    assert_non_null(strstr(err, "test: NVLink matrix: not symmetric"));
    assert_non_null(strstr(err, "[0][1]"));
    assert_null(strchr(err, '\n'));
    P3D_FREE(&err);
    link(n, 0, 1, -5);
    assert_int_equal(p3d_node_finish(n, &err), -1);
    assert_non_null(strstr(err, ">= 0"));
    P3D_FREE(&err);
    link(n, 0, 1, NAN);
    assert_int_equal(p3d_node_finish(n, &err), -1);
    assert_non_null(strstr(err, "finite"));
    P3D_FREE(&err);
    /* wrong size: a source that sets ngpus without the matrix */
    free(n->nvlink);
    n->nvlink = NULL;
    assert_int_equal(p3d_node_finish(n, &err), -1);
    assert_non_null(strstr(err, "incomplete"));
    P3D_FREE(&err);
    p3d_node_free(n);
    n = p3d_node_new(NULL, "x", NULL);
    assert_int_equal(p3d_node_alloc(n, -1, 0, &err), -1);
    assert_non_null(strstr(err, "x: -1 GPUs"));
    P3D_FREE(&err);
    p3d_node_free(n);
}

static void set_nic(p3d_node *n, int k, const char *name, const char *kind, int numa)
{
    snprintf(n->nics[k].name, sizeof n->nics[k].name, "%s", name);
    snprintf(n->nics[k].kind, sizeof n->nics[k].kind, "%s", kind);
    n->nics[k].numa = numa;
}

/* DGX A100 style: GPU pairs share two PXB NICs -> one each; an Ethernet
 * NIC that is closer loses to RDMA; NUMA breaks class ties. */
static void test_nearest_nic(void **s)
{
    (void)s;
    p3d_node *n = mk(4, 5);
    set_nic(n, 0, "mlx5_0", "ib", 0);
    set_nic(n, 1, "mlx5_1", "ib", 0);
    set_nic(n, 2, "mlx5_2", "ib", 1);
    set_nic(n, 3, "mlx5_3", "ib", 0);
    set_nic(n, 4, "eth0", "eth", 1);
    for (int g = 0; g < 4; g++)
        n->gpus[g].numa = g < 2 ? 0 : 1;
    /* GPUs 0,1: PXB to mlx5_0 and mlx5_1 */
    for (int g = 0; g < 2; g++) {
        n->gn_class[g * 5 + 0] = P3D_LINK_PXB;
        n->gn_class[g * 5 + 1] = P3D_LINK_PXB;
    }
    /* GPU 2: eth0 PIX (ignored: RDMA exists), mlx5_2 and mlx5_3 both SYS
     * but only mlx5_2 on its NUMA node */
    n->gn_class[2 * 5 + 4] = P3D_LINK_PIX;
    /* GPU 3: all SYS; same-NUMA candidates: mlx5_2 only */
    finish_ok(n);
    assert_int_equal(n->gpus[0].nearest_nic, 0);
    assert_int_equal(n->gpus[1].nearest_nic, 1);
    assert_int_equal(n->gpus[2].nearest_nic, 2);
    assert_int_equal(n->gpus[3].nearest_nic, 2);
    assert_int_equal(n->gpus[0].nic_same_numa, 1);
    assert_int_equal(n->gpus[3].nic_same_numa, 1);
    p3d_node_free(n);

    /* no NIC on the GPU's NUMA node: flagged and noted */
    n = mk(1, 1);
    set_nic(n, 0, "efa0", "efa", 1);
    n->gpus[0].numa = 0;
    finish_ok(n);
    assert_int_equal(n->gpus[0].nearest_nic, 0);
    assert_int_equal(n->gpus[0].nic_same_numa, 0);
    assert_non_null(strstr(n->notes, "GPU0 (NUMA 0) has no NIC on its NUMA"));
    p3d_node_free(n);
}

static void test_hash_and_parse(void **s)
{
    (void)s;
    p3d_node *a = mk(2, 0), *b = mk(2, 0);
    link(a, 0, 1, 100);
    link(b, 0, 1, 100);
    free(b->source);
    b->source = strdup("elsewhere");
    finish_ok(a);
    finish_ok(b);
    assert_string_equal(a->hash, b->hash);
    link(b, 0, 1, 50);
    finish_ok(b);
    assert_string_not_equal(a->hash, b->hash);
    p3d_node_free(a);
    p3d_node_free(b);
    assert_int_equal(p3d_link_parse("NV12"), P3D_LINK_NVLINK);
    assert_int_equal(p3d_link_parse("X"), P3D_LINK_SELF);
    assert_int_equal(p3d_link_parse("PXB"), P3D_LINK_PXB);
    assert_int_equal(p3d_link_parse("NV1x"), -1);
    assert_int_equal(p3d_link_parse("bogus"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clique),
        cmocka_unit_test(test_pairs_and_singletons),
        cmocka_unit_test(test_dgx1_cube_mesh),
        cmocka_unit_test(test_ring_split_deterministic),
        cmocka_unit_test(test_matrix_validation),
        cmocka_unit_test(test_nearest_nic),
        cmocka_unit_test(test_hash_and_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
