/* SPDX-License-Identifier: BSD-3-Clause */
/* test_errfile.c — p3d_rootcause_read (errfile.c): torch's error file as
 * @record writes it, the parent-copy shape, and hostile files: too large,
 * not JSON, trailing bytes, a symlink, a FIFO, terminal escapes. */
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

static char dir[64], path[128];

static int setup(void **st)
{
    (void)st;
    strcpy(dir, "/tmp/p3d_errf_XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof path, "%s/error.json", dir);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *text)
{
    unlink(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* exactly what torch 1.13's ErrorHandler.record_exception writes */
static const char *const RECORD =
    "{\"message\": {\"message\": \"ValueError: bad batch at step 3\", \"extraInfo\": {\"py_callstack\": "
    "\"Traceback (most recent call last):\\n  File \\\"/t/errors/__init__.py\\\", line 346, in wrapper\\n    "
    "return f(*args, **kwargs)\\n  File \\\"/t/a.py\\\", line 20, in <module>\\n    main()\\n  File "
    "\\\"/t/rec.py\\\", line 10, in main\\n    load(3)\\n  File \\\"/t/rec.py\\\", line 6, in load\\n    raise "
    "ValueError(x)\\nValueError: bad batch at step 3\\n\", \"timestamp\": \"1796576017\"}}}";

static void test_record_shape(void **st)
{
    (void)st;
    p3d_rootcause rc;
    char *err = NULL;
    put(RECORD);
    assert_int_equal(p3d_rootcause_read(path, &rc, &err), 1);
    assert_string_equal(rc.type, "ValueError");
    assert_string_equal(rc.message, "ValueError: bad batch at step 3");
    assert_string_equal(rc.file, "/t/rec.py");
    assert_int_equal(rc.line, 6);
    assert_true(rc.timestamp == 1796576017LL);
    /* the last three frames, innermost last; the first one dropped */
    assert_string_equal(rc.frames, "/t/a.py:20 in <module>\n/t/rec.py:10 in main\n/t/rec.py:6 in load\n");
    char *t = p3d_rootcause_text(&rc, "  ");
    assert_non_null(t);
    assert_non_null(strstr(t, "2026-12-06T"));
    assert_non_null(strstr(t, "    /t/rec.py:6 in load\n"));
    free(t);
    p3d_rootcause_free(&rc);
}

static void test_parent_copy_shape(void **st)
{
    (void)st;
    p3d_rootcause rc;
    char *err = NULL;
    put("{\"message\": \"RuntimeError: x\", \"timestamp\": 12}");
    assert_int_equal(p3d_rootcause_read(path, &rc, &err), 1);
    assert_string_equal(rc.type, "RuntimeError");
    assert_true(rc.timestamp == 12);
    assert_string_equal(rc.file, "");
    assert_int_equal(rc.line, 0);
    p3d_rootcause_free(&rc);
}

static void test_absent_is_zero(void **st)
{
    (void)st;
    p3d_rootcause rc;
    char *err = NULL;
    unlink(path);
    assert_int_equal(p3d_rootcause_read(path, &rc, &err), 0);
    assert_null(err);
}

static void expect_bad(const char *text, const char *why)
{
    p3d_rootcause rc;
    char *err = NULL;
    put(text);
    assert_int_equal(p3d_rootcause_read(path, &rc, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, why));
    free(err);
}

static void test_hostile(void **st)
{
    (void)st;
    expect_bad("not json", "not torch's error file");
    expect_bad("{\"message\": {\"message\": \"a\"}} trailing", "not torch's error file");
    expect_bad("[1, 2]", "not torch's error file");
    expect_bad("{\"message\": {\"message\": 7}}", "has no text");
    /* larger than the bound: refused, not read whole */
    char *big = malloc(P3D_ERRFILE_MAX + 64);
    assert_non_null(big);
    memset(big, ' ', P3D_ERRFILE_MAX + 63);
    big[P3D_ERRFILE_MAX + 63] = 0;
    memcpy(big, "{\"message\": \"x\"}", 16);
    expect_bad(big, "larger than");
    free(big);
    /* a symlink is not followed, a FIFO not waited on */
    char target[160];
    snprintf(target, sizeof target, "%s/elsewhere.json", dir);
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("{\"message\": \"x\"}", f);
    fclose(f);
    unlink(path);
    assert_int_equal(symlink(target, path), 0);
    p3d_rootcause rc;
    char *err = NULL;
    assert_int_equal(p3d_rootcause_read(path, &rc, &err), -1);
    free(err);
    err = NULL;
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(p3d_rootcause_read(path, &rc, &err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    free(err);
}

static void test_escapes(void **st)
{
    (void)st;
    p3d_rootcause rc;
    char *err = NULL;
    put("{\"message\": {\"message\": \"E: \\u001b[2Jgone\\nnext\", \"extraInfo\": {\"py_callstack\": "
        "\"  File \\\"/x\\u001b]0;t\\u0007.py\\\", line 3, in f\\u001b\\n\", \"timestamp\": \"nan\"}}}");
    assert_int_equal(p3d_rootcause_read(path, &rc, &err), 1);
    assert_null(strchr(rc.message, '\033'));
    assert_null(strchr(rc.message, '\n'));
    assert_null(strchr(rc.frames, '\033'));
    assert_null(strchr(rc.frames, '\007'));
    assert_int_equal(rc.line, 3);
    assert_true(rc.timestamp == -1);
    p3d_rootcause_free(&rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_shape),   cmocka_unit_test(test_parent_copy_shape),
        cmocka_unit_test(test_absent_is_zero), cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_escapes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
