/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topo_hwloc.c — every hwloc XML in tests/fixtures/realdata/hwloc/
 * through p3d_topo_load(), checked against the facts in its INDEX.md: GPU
 * and NIC counts, NUMA node per GPU, nearest NIC per GPU, NVLink domains.
 * Also: synthetic and live ("local") sources, and the JSON report's shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_internal.h"

static p3d_node *load(const char *name)
{
    const char *dir = getenv("P3D_FIXTURES");
    char path[1024], *err = NULL;
    p3d_node *n = NULL;
    snprintf(path, sizeof path, "%s/realdata/hwloc/%s", dir && *dir ? dir : "fixtures", name);
    if (p3d_topo_load(path, &n, &err) != 0)
        fail_msg("%s: %s", name, err ? err : "(no message)");
    assert_null(err);
    assert_non_null(n);
    assert_string_equal(n->source_kind, "hwloc-xml");
    assert_int_equal(strlen(n->hash), 16);
    return n;
}

static void expect_numa(const p3d_node *n, const int *numa)
{
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpus[i].numa != numa[i])
            fail_msg("GPU%d: NUMA %d, expected %d", i, n->gpus[i].numa, numa[i]);
}

/* nic[i] = expected nearest NIC name of GPU i (NULL: none). */
static void expect_nearest(const p3d_node *n, const char *const *nic)
{
    for (int i = 0; i < n->ngpus; i++) {
        int k = n->gpus[i].nearest_nic;
        if (!nic[i]) {
            assert_int_equal(k, -1);
            continue;
        }
        assert_true(k >= 0 && k < n->nnics);
        if (strcmp(n->nics[k].name, nic[i]))
            fail_msg("GPU%d: nearest NIC %s, expected %s", i, n->nics[k].name, nic[i]);
    }
}

/* dom[i] = expected domain of GPU i (domains numbered by lowest GPU). */
static void expect_domains(const p3d_node *n, int ndom, const int *dom)
{
    assert_int_equal(n->ndomains, ndom);
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpus[i].domain != dom[i])
            fail_msg("GPU%d: domain %d, expected %d", i, n->gpus[i].domain, dom[i]);
}

static int gn(const p3d_node *n, int g, int k)
{
    return n->gn_class[(size_t)g * n->nnics + k];
}

/* DGX-2H: GPU<->NVSwitch entries only; merged switch ports and transitive
 * closure make one 16-GPU domain at 6 x 25 = 150 GB/s per pair. */
static void test_dgx2(void **s)
{
    (void)s;
    p3d_node *n = load("hwloc-tests-nvidiaDGX2.xml");
    assert_int_equal(n->ngpus, 16);
    assert_int_equal(n->nnics, 0);
    int numa[16], dom[16] = {0};
    const char *nic[16] = {0};
    for (int i = 0; i < 16; i++)
        numa[i] = i < 8 ? 0 : 1;
    expect_numa(n, numa);
    expect_nearest(n, nic);
    expect_domains(n, 1, dom);
    assert_int_equal(n->nvlink_connected_not_clique, 0);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            assert_true(n->nvlink[i * 16 + j] == (i == j ? 0.0 : 150.0));
    assert_string_equal(n->gpus[0].osdev, "nvml0");
    assert_string_equal(n->gpus[0].model, "Tesla V100-SXM3-32GB-H");
    /* PCI bus order */
    for (int i = 1; i < 16; i++)
        assert_true(strcmp(n->gpus[i - 1].pci, n->gpus[i].pci) < 0);
    int members[16];
    assert_int_equal(p3d_node_domain_members(n, 0, members, 16), 16);
    p3d_node_free(n);
}

/* Minsky: islands {0,1} {2,3} at 40 GB/s; GPU<->CPU entries ignored. */
static void test_power8(void **s)
{
    (void)s;
    p3d_node *n = load("hwloc-tests-power8gpudistances.xml");
    assert_int_equal(n->ngpus, 4);
    assert_int_equal(n->nnics, 0);
    expect_numa(n, (int[]){0, 0, 1, 1});
    expect_nearest(n, (const char *[]){NULL, NULL, NULL, NULL});
    expect_domains(n, 2, (int[]){0, 0, 1, 1});
    assert_true(n->nvlink[0 * 4 + 1] == 40.0);
    assert_true(n->nvlink[2 * 4 + 3] == 40.0);
    assert_true(n->nvlink[0 * 4 + 2] == 0.0);
    assert_true(n->nvlink[1 * 4 + 3] == 0.0);
    assert_int_equal(n->gg_class[0 * 4 + 1], P3D_LINK_NVLINK);
    assert_int_equal(n->gg_class[0 * 4 + 2], P3D_LINK_SYS);
    assert_string_equal(n->gpus[0].osdev, "cuda0");
    p3d_node_free(n);
}

/* Lassen: NUMA 0 and 8; dual-port CX-5 pairs; NVLink not recorded. */
static void test_lassen(void **s)
{
    (void)s;
    p3d_node *n = load("mpibind-coral-lassen.xml");
    assert_int_equal(n->ngpus, 4);
    assert_int_equal(n->nnics, 4);
    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof name, "mlx5_%d", k);
        assert_string_equal(n->nics[k].name, name);
        assert_string_equal(n->nics[k].kind, "ib");
        assert_int_equal(n->nics[k].numa, k < 2 ? 0 : 8);
    }
    expect_numa(n, (int[]){0, 0, 8, 8});
    /* two GPUs share two equally near ports: one each */
    expect_nearest(n, (const char *[]){"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
    for (int i = 0; i < 4; i++) {
        assert_int_equal(n->gpus[i].nic_same_numa, 1);
        /* GPU and NIC sit on different PCI domains: no PCIe switch shared */
        assert_int_equal(gn(n, i, n->gpus[i].nearest_nic), P3D_LINK_NODE);
    }
    assert_int_equal(gn(n, 0, 2), P3D_LINK_SYS);
    expect_domains(n, 4, (int[]){0, 1, 2, 3});
    assert_non_null(n->notes);
    assert_non_null(strstr(n->notes, "no NVLinkBandwidth matrix"));
    p3d_node_free(n);
}

/* g4dn.metal: 8 T4, one EFA on NUMA 1: GPUs 0-3 have no same-NUMA NIC. */
static void test_g4dn(void **s)
{
    (void)s;
    p3d_node *n = load("mpibind-g4dnmetal.xml");
    assert_int_equal(n->ngpus, 8);
    assert_int_equal(n->nnics, 1);
    assert_string_equal(n->nics[0].kind, "efa");
    assert_int_equal(n->nics[0].numa, 1);
    expect_numa(n, (int[]){0, 0, 0, 0, 1, 1, 1, 1});
    const char *efa = n->nics[0].name;
    expect_nearest(n, (const char *[]){efa, efa, efa, efa, efa, efa, efa, efa});
    for (int i = 0; i < 8; i++) {
        assert_int_equal(n->gpus[i].nic_same_numa, i >= 4);
        assert_int_equal(gn(n, i, 0), i < 4 ? P3D_LINK_SYS : P3D_LINK_NODE);
    }
    expect_domains(n, 8, (int[]){0, 1, 2, 3, 4, 5, 6, 7});
    assert_non_null(strstr(n->notes, "GPU0 (NUMA 0) has no NIC on its NUMA"));
    assert_null(strstr(n->notes, "GPU4 (NUMA 1) has no NIC"));
    p3d_node_free(n);
}

/* JUWELS Booster: PCI-only GPUs (no OS devices), NUMA 3,1,7,5, GPU i and
 * mlx5_i behind one PCIe switch. */
static void test_juwels(void **s)
{
    (void)s;
    p3d_node *n = load("psmgmt-topo.jwb0004.xml");
    assert_int_equal(n->ngpus, 4);
    assert_int_equal(n->nnics, 4);
    expect_numa(n, (int[]){3, 1, 7, 5});
    expect_nearest(n, (const char *[]){"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"});
    for (int i = 0; i < 4; i++) {
        assert_string_equal(n->gpus[i].osdev, "");
        assert_int_equal(gn(n, i, i), P3D_LINK_PIX);
        assert_int_equal(n->gpus[i].nic_same_numa, 1);
        for (int k = 0; k < 4; k++)
            if (k != i)
                assert_int_equal(gn(n, i, k), P3D_LINK_SYS);
    }
    expect_domains(n, 4, (int[]){0, 1, 2, 3});
    assert_int_equal(n->nnuma, 8);
    assert_int_equal(n->npackages, 2);
    p3d_node_free(n);
}

/* Tioga: AMD MI250X only — not placed (docs/topology.md), but no crash and
 * the CPU facts and Slingshot NICs are there. */
static void test_tioga(void **s)
{
    (void)s;
    p3d_node *n = load("mpibind-eas-tioga.xml");
    assert_int_equal(n->ngpus, 0);
    assert_int_equal(n->ndomains, 0);
    assert_int_equal(n->nnics, 5);
    assert_int_equal(n->nnuma, 4);
    assert_non_null(strstr(n->notes, "8 AMD GPUs"));
    char *t = p3d_topo_text(n, 0), *j = p3d_topo_json(n);
    assert_non_null(t);
    assert_non_null(j);
    assert_non_null(strstr(t, "0 GPUs"));
    cJSON *doc = cJSON_Parse(j);
    assert_non_null(doc);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "gpus")), 0);
    cJSON_Delete(doc);
    free(t);
    free(j);
    p3d_node_free(n);
}

static void test_synthetic(void **s)
{
    (void)s;
    p3d_node *n = NULL;
    char *err = NULL;
    assert_int_equal(p3d_topo_load("synthetic:pack:2 numa:1 core:4 pu:2", &n, &err), 0);
    assert_int_equal(n->ngpus, 0);
    assert_int_equal(n->npackages, 2);
    assert_int_equal(n->nnuma, 2);
    assert_int_equal(n->ncores, 8);
    assert_int_equal(n->npus, 16);
    assert_string_equal(n->source_kind, "synthetic");
    p3d_node_free(n);
    n = NULL;
    assert_int_equal(p3d_topo_load("synthetic:pack:two", &n, &err), -1);
    assert_null(n);
    assert_non_null(strstr(err, "synthetic:pack:two"));
    free(err);
}

/* Live discovery: whatever this machine has, it loads and reports. */
static void test_local(void **s)
{
    (void)s;
    p3d_node *n = NULL;
    char *err = NULL;
    if (p3d_topo_load("local", &n, &err) != 0)
        fail_msg("local: %s", err);
    assert_string_equal(n->source_kind, "local");
    assert_true(n->npus >= 1);
    char *t = p3d_topo_text(n, 0);
    assert_non_null(t);
    free(t);
    p3d_node_free(n);
}

/* JSON fields of DESIGN.md's schema on a fixture with NICs and NUMA. */
static void test_json_schema(void **s)
{
    (void)s;
    p3d_node *n = load("psmgmt-topo.jwb0004.xml");
    char *j = p3d_topo_json(n);
    cJSON *doc = cJSON_Parse(j);
    assert_non_null(doc);
    cJSON *gpus = cJSON_GetObjectItem(doc, "gpus");
    assert_int_equal(cJSON_GetArraySize(gpus), 4);
    cJSON *g1 = cJSON_GetArrayItem(gpus, 1);
    assert_int_equal(cJSON_GetObjectItem(g1, "index")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(g1, "numa")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(g1, "nearest_nic")->valuestring, "mlx5_1");
    assert_string_equal(cJSON_GetObjectItem(g1, "nearest_nic_class")->valuestring, "PIX");
    assert_int_equal(cJSON_GetObjectItem(g1, "domain")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(g1, "pci")->valuestring, n->gpus[1].pci);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "nics")), 4);
    cJSON *nv = cJSON_GetObjectItem(doc, "nvlink");
    assert_int_equal(cJSON_GetArraySize(nv), 4);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(nv, 0)), 4);
    cJSON *dom = cJSON_GetObjectItem(doc, "domains");
    assert_int_equal(cJSON_GetArraySize(dom), 4);
    assert_string_equal(cJSON_GetObjectItem(doc, "node")->valuestring, "jwb0004.juwels");
    cJSON_Delete(doc);
    free(j);
    p3d_node_free(n);
}

/* Text report: matrix columns line up and lines fit 100 columns (8 GPUs). */
static void test_text_width(void **s)
{
    (void)s;
    p3d_node *n = load("mpibind-g4dnmetal.xml");
    char *t = p3d_topo_text(n, 0);
    assert_non_null(t);
    for (char *l = t; *l;) {
        char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len > 100 && strncmp(l, "Source: ", 8))
            fail_msg("line longer than 100: %.*s", (int)len, l);
        l += len + (e ? 1 : 0);
    }
    assert_non_null(strstr(t, "       GPU0  GPU1  GPU2"));
    assert_non_null(strstr(t, "\nGPU0   X     PHB   NODE"));
    assert_non_null(strstr(t, "no NIC on its NUMA node 0"));
    free(t);
    p3d_node_free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx2),       cmocka_unit_test(test_power8), cmocka_unit_test(test_lassen),
        cmocka_unit_test(test_g4dn),       cmocka_unit_test(test_juwels), cmocka_unit_test(test_tioga),
        cmocka_unit_test(test_synthetic),  cmocka_unit_test(test_local),  cmocka_unit_test(test_json_schema),
        cmocka_unit_test(test_text_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
