/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_topo_nvml.c — the NVML augment plugin (plugins/nvml/). No NVIDIA
 * driver exists here, so: (1) the decline paths — no plugin, no library,
 * NVML init failing — leave the node untouched and return 0; (2) with the
 * stand-in library libp3d_fake_nvml.so (4 GPUs on one NVSwitch, GPUs 0-1
 * also linked directly, fabric clique 7) the plugin fills the matrix and
 * the fabric info, and p3d_node_finish() makes one 4-GPU domain.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo_internal.h"

static char fake[2048];

static p3d_node *four_gpus(void)
{
    char *err = NULL;
    p3d_node *n = p3d_node_new("h", "local", "local");
    assert_non_null(n);
    assert_int_equal(p3d_node_alloc(n, 4, 0, &err), 0);
    for (int i = 0; i < 4; i++)
        snprintf(n->gpus[i].pci, sizeof n->gpus[i].pci, "0000:%02x:00.0", 0x10 + i);
    return n;
}

static void expect_untouched(const p3d_node *n)
{
    for (int i = 0; i < 16; i++)
        assert_true(n->nvlink[i] == 0);
    assert_null(n->fabric_uuid);
    assert_int_equal(n->fabric_clique, -1);
    assert_string_equal(n->gpus[0].model, "");
}

static void test_decline_without_plugin(void **s)
{
    (void)s;
    char *old = getenv("P3D_PLUGIN_DIR") ? strdup(getenv("P3D_PLUGIN_DIR")) : NULL;
    setenv("P3D_PLUGIN_DIR", "/nonexistent/plugins", 1);
    p3d_node *n = four_gpus();
    assert_int_equal(p3d_topo_nvml_augment(n), 0);
    expect_untouched(n);
    p3d_node_free(n);
    if (old)
        setenv("P3D_PLUGIN_DIR", old, 1);
    else
        unsetenv("P3D_PLUGIN_DIR");
    free(old);
}

static void test_decline_without_library(void **s)
{
    (void)s;
    setenv("P3D_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    p3d_node *n = four_gpus();
    assert_int_equal(p3d_topo_nvml_augment(n), 0);
    expect_untouched(n);
    p3d_node_free(n);
    /* the real name: absent on this machine (skip that part if present) */
    unsetenv("P3D_NVML_LIBRARY");
    n = four_gpus();
    int r = p3d_topo_nvml_augment(n);
    if (access("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", F_OK) != 0)
        assert_int_equal(r, 0);
    p3d_node_free(n);
}

static void test_decline_when_init_fails(void **s)
{
    (void)s;
    setenv("P3D_NVML_LIBRARY", fake, 1);
    setenv("P3D_FAKE_NVML_FAIL_INIT", "1", 1);
    p3d_node *n = four_gpus();
    assert_int_equal(p3d_topo_nvml_augment(n), 0);
    expect_untouched(n);
    p3d_node_free(n);
    unsetenv("P3D_FAKE_NVML_FAIL_INIT");
    unsetenv("P3D_NVML_LIBRARY");
}

static void test_fills_from_nvml(void **s)
{
    (void)s;
    char *err = NULL;
    setenv("P3D_NVML_LIBRARY", fake, 1);
    p3d_node *n = four_gpus();
    assert_int_equal(p3d_topo_nvml_augment(n), 1);
    unsetenv("P3D_NVML_LIBRARY");
    /* switch: 2 links x 25 GB/s each side -> 50 per pair; 0-1 direct 25 */
    assert_true(n->nvlink[0 * 4 + 1] == 25.0);
    assert_true(n->nvlink[1 * 4 + 0] == 25.0);
    assert_true(n->nvlink[0 * 4 + 2] == 50.0);
    /* GPUs 2 and 3 also link to an NVIDIA device of unknown type: not a
     * switch, so their pair stays at the switch's 50 (75 if it counted) */
    assert_true(n->nvlink[3 * 4 + 2] == 50.0);
    assert_true(n->nvlink[2 * 4 + 3] == 50.0);
    assert_string_equal(n->fabric_uuid, "01020304-0506-0708-090a-0b0c0d0e0f10");
    assert_int_equal(n->fabric_clique, 7);
    assert_string_equal(n->gpus[2].model, "Fake H100 2");
    if (p3d_node_finish(n, &err) != 0)
        fail_msg("%s", err);
    assert_int_equal(n->ndomains, 1);
    char *j = p3d_topo_json(n);
    assert_non_null(strstr(j, "\"clique\": 7"));
    free(j);
    p3d_node_free(n);
}

static int setup(void **s)
{
    (void)s;
    const char *dir = getenv("P3D_PLUGIN_DIR");
    if (!dir || !*dir) {
        printf("skipped: P3D_PLUGIN_DIR is not set (run through ctest)\n");
        exit(77);
    }
    snprintf(fake, sizeof fake, "%s/libp3d_fake_nvml.so", dir);
    char plugin[2048];
    snprintf(plugin, sizeof plugin, "%s/p3d_topo_nvml.so", dir);
    if (access(fake, R_OK) != 0 || access(plugin, R_OK) != 0) {
        fprintf(stderr, "%s or %s not built\n", fake, plugin);
        return -1;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decline_without_plugin),
        cmocka_unit_test(test_decline_without_library),
        cmocka_unit_test(test_decline_when_init_fails),
        cmocka_unit_test(test_fills_from_nvml),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
