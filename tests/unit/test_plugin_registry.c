/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_plugin_registry.c — the plugin registry (p3d/plugin.h): built-ins
 * work with no .so anywhere; a plugin with a wrong ABI number and one
 * without its descriptor symbol are skipped and the reason is said; a good
 * plugin is found once and its "decline" is not a failure.
 * P3D_FIXTURE_PLUGIN_DIR holds the fixtures built from plugins/fixture_plugin.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "p3d/plugin.h"
#include "rdzv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void use_dir(const char *dir)
{
    setenv("P3D_PLUGIN_DIR", dir, 1);
}

static void test_builtins_without_any_so(void **s)
{
    (void)s;
    char dir[] = "/tmp/p3d-plugin-empty-XXXXXX";
    assert_non_null(mkdtemp(dir));
    use_dir(dir);
    char *err = NULL;
    const p3d_plugin *pl = NULL;
    assert_int_equal(p3d_rdzv_register_builtins(&err), 0);
    assert_int_equal(p3d_rdzv_register_builtins(&err), 0); /* idempotent */
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "static", &pl, &err), 1);
    assert_ptr_equal(pl->ops, &p3d_rdzv_static);
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "slurm", &pl, &err), 1);
    assert_ptr_equal(pl->ops, &p3d_rdzv_slurm);
    char *names = p3d_plugin_builtin_names(P3D_PLUGIN_RDZV);
    assert_string_equal(names, "static, slurm, k8s");
    free(names);
    /* absent: not found, naming the file and the search path */
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "pmix", &pl, &err), 0);
    assert_non_null(strstr(err, "plugin p3d_rdzv_pmix.so: not found in "));
    assert_non_null(strstr(err, dir));
    assert_null(strstr(err, "skipped"));
    P3D_FREE(&err);
    rmdir(dir);
}

static void test_wrong_abi_is_skipped_and_said(void **s)
{
    (void)s;
    use_dir(P3D_FIXTURE_PLUGIN_DIR);
    char *err = NULL;
    const p3d_plugin *pl = NULL;
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "badabi", &pl, &err), 0);
    assert_null(pl);
    assert_non_null(strstr(err, "not found in " P3D_FIXTURE_PLUGIN_DIR));
    assert_non_null(strstr(err, "skipped " P3D_FIXTURE_PLUGIN_DIR "/p3d_rdzv_badabi.so: plugin ABI 1, this "
                                "par3drun needs 3"));
    P3D_FREE(&err);
}

static void test_missing_symbol_is_skipped_and_said(void **s)
{
    (void)s;
    use_dir(P3D_FIXTURE_PLUGIN_DIR);
    char *err = NULL;
    const p3d_plugin *pl = NULL;
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "nosym", &pl, &err), 0);
    assert_non_null(strstr(err, "skipped " P3D_FIXTURE_PLUGIN_DIR "/p3d_rdzv_nosym.so: does not export the "
                                "descriptor p3d_rdzv_nosym"));
    P3D_FREE(&err);
}

static void test_good_plugin_declines(void **s)
{
    (void)s;
    use_dir(P3D_FIXTURE_PLUGIN_DIR);
    char *err = NULL, msg[128] = "";
    const p3d_plugin *pl = NULL, *again = NULL;
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "good", &pl, &err), 1);
    assert_string_equal(pl->name, "good");
    /* loaded once: a second lookup needs no file */
    use_dir("/nonexistent");
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "good", &again, &err), 1);
    assert_ptr_equal(pl, again);
    const p3d_rdzv_ops *ops = pl->ops;
    p3d_rdzv_boot boot;
    void *state = &boot;
    memset(&boot, 0, sizeof boot);
    assert_int_equal(ops->detect("", 0, -1, 1.0, &boot, &state, msg, sizeof msg), P3D_PLUGIN_DECLINE);
    assert_string_equal(msg, "fixture: not my environment");
    /* another kind of the same name is a different plugin */
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_TOPO, "good", &pl, &err), 0);
    assert_non_null(strstr(err, "p3d_topo_good.so"));
    P3D_FREE(&err);
}

static void test_bad_names(void **s)
{
    (void)s;
    char *err = NULL;
    const p3d_plugin *pl;
    assert_int_equal(p3d_plugin_find(P3D_PLUGIN_RDZV, "../etc", &pl, &err), -1);
    assert_non_null(strstr(err, "is not a plugin name"));
    P3D_FREE(&err);
    assert_int_equal(p3d_plugin_find(99, "x", &pl, &err), -1);
    P3D_FREE(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_without_any_so),
        cmocka_unit_test(test_wrong_abi_is_skipped_and_said),
        cmocka_unit_test(test_missing_symbol_is_skipped_and_said),
        cmocka_unit_test(test_good_plugin_declines),
        cmocka_unit_test(test_bad_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
