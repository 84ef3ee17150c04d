/* SPDX-License-Identifier: BSD-3-Clause */
/* test_launch_resolve.c — p3d_resolve_program (spawn.c): what is checked
 * before any rank starts, and the one-line reason for each kind of
 * program that cannot run (docs/launch.md, exit codes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ranks.h"

static char dir[64];

static int setup(void **st)
{
    (void)st;
    strcpy(dir, "/tmp/p3d_res_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void make_file(const char *name, mode_t mode)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nexit 0\n", f);
    fclose(f);
    assert_int_equal(chmod(p, mode), 0);
}

/* resolves prog; returns the error text (caller frees) or NULL on success */
static char *why(const char *prog)
{
    char *err = NULL, *p = p3d_resolve_program(prog, &err);
    if (p) {
        free(p);
        assert_null(err);
        return NULL;
    }
    assert_non_null(err);
    return err;
}

static void test_with_slash(void **st)
{
    (void)st;
    char p[128];
    make_file("ok", 0755);
    make_file("noexec", 0644);
    snprintf(p, sizeof p, "%s/ok", dir);
    assert_null(why(p));
    char *e = why(dir);
    assert_non_null(strstr(e, "is a directory, not a program"));
    free(e);
    snprintf(p, sizeof p, "%s/noexec", dir);
    e = why(p);
    assert_non_null(strstr(e, "is not executable (chmod +x?)"));
    free(e);
    snprintf(p, sizeof p, "%s/missing", dir);
    e = why(p);
    assert_non_null(strstr(e, "not found"));
    free(e);
    e = why("/dev/null");
    assert_non_null(strstr(e, "not a regular file"));
    free(e);
}

static void test_path_search(void **st)
{
    (void)st;
    char sub[128], path[512];
    const char *old = getenv("PATH");
    char *saved = old ? strdup(old) : NULL;
    /* PATH = dir/a:dir: dir/a/prog is a directory, dir/prog executable */
    snprintf(sub, sizeof sub, "%s/a", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(sub, sizeof sub, "%s/a/prog", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    make_file("prog", 0755);
    make_file("plain", 0644);
    snprintf(path, sizeof path, "%s/a:%s", dir, dir);
    setenv("PATH", path, 1);
    char *err = NULL, *r = p3d_resolve_program("prog", &err);
    char want[128];
    snprintf(want, sizeof want, "%s/prog", dir);
    assert_non_null(r);
    assert_string_equal(r, want); /* the directory is skipped, as execvp does */
    free(r);
    /* only a non-executable match: that one is explained */
    char *e = why("plain");
    assert_non_null(strstr(e, "(found in PATH)"));
    assert_non_null(strstr(e, "is not executable (chmod +x?)"));
    free(e);
    e = why("no-such-program-p3d");
    assert_non_null(strstr(e, "not found in PATH"));
    free(e);
    e = why("");
    assert_non_null(strstr(e, "empty"));
    free(e);
    /* not in PATH, but next to the running executable (an installed
     * par3drun finds its p3d-worker this way): this test's own binary */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = 0;
    setenv("PATH", dir, 1);
    r = p3d_resolve_program(strrchr(self, '/') + 1, &err);
    assert_non_null(r);
    assert_string_equal(r, self);
    free(r);
    if (saved)
        setenv("PATH", saved, 1);
    free(saved);
}

int main(void)
{
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_with_slash),
        cmocka_unit_test(test_path_search),
    };
    return cmocka_run_group_tests(t, setup, teardown);
}
