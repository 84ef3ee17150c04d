/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_result.c — RUN_DIR/result.json (result.c): the cause taken from the
 * controller's summary, hostile text (a job id or an error with quotes,
 * backslashes, control characters) kept inside its JSON string, null for
 * what was never seen, and the file replaced whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "result.h"

static void test_cause(void **state)
{
    (void)state;
    char b[256];
    p3d_result_cause("par3drun: root cause: rank 3 failed (exit code 2)\n  (nothing on its stderr)\n", 2, b, sizeof b);
    assert_string_equal(b, "rank 3 failed (exit code 2)");
    p3d_result_cause("", 0, b, sizeof b);
    assert_string_equal(b, "every rank ended with exit code 0");
    p3d_result_cause(NULL, 130, b, sizeof b);
    assert_string_equal(b, "the job ended with exit code 130");
    p3d_result_cause("no prefix here", 1, b, sizeof b);
    assert_string_equal(b, "no prefix here");
    p3d_result_cause("par3drun: root cause: x", 1, b, 4); /* cut, terminated */
    assert_string_equal(b, "x");
}

static void test_json(void **state)
{
    (void)state;
    p3d_result r = {.job_id = "a\"b\\c\n",
                    .exit_code = 3,
                    .summary = "par3drun: root cause: rank 1 said \"boom\"\x01 here\n",
                    .fault = NULL,
                    .restarts = 2,
                    .replaced = 1,
                    .step = -1,
                    .ckpt = 40,
                    .started = 100.0,
                    .ended = 101.5};
    char *j = p3d_result_json(&r);
    assert_non_null(j);
    assert_non_null(strstr(j, "\"job_id\": \"a\\\"b\\\\c\\u000a\""));
    assert_non_null(strstr(j, "\"cause\": \"rank 1 said \\\"boom\\\"\\u0001 here\""));
    assert_non_null(strstr(j, "\"fault\": \"unknown\""));
    assert_non_null(strstr(j, "\"exit_code\": 3, \"ok\": false"));
    assert_non_null(strstr(j, "\"step\": null, \"ckpt\": 40"));
    assert_non_null(strstr(j, "\"seconds\": 1.500, \"preempted\": false}\n"));
    /* one line: a newline only at the end */
    assert_ptr_equal(strchr(j, '\n'), j + strlen(j) - 1);
    free(j);
    r.job_id = NULL;
    r.exit_code = 0;
    j = p3d_result_json(&r);
    assert_non_null(strstr(j, "\"job_id\": null, \"exit_code\": 0, \"ok\": true"));
    free(j);
    /* a preempted job: not ok (a script requeues it), and says so */
    r.exit_code = 75;
    r.preempted = 1;
    j = p3d_result_json(&r);
    assert_non_null(strstr(j, "\"exit_code\": 75, \"ok\": false"));
    assert_non_null(strstr(j, "\"preempted\": true}\n"));
    free(j);
}

static void test_write(void **state)
{
    (void)state;
    char dir[] = "/tmp/p3d-result-XXXXXX";
    assert_non_null(mkdtemp(dir));
    p3d_result r = {.job_id = "j1", .exit_code = 0, .summary = "", .fault = "unknown", .step = 5, .ckpt = 4};
    char *err = NULL;
    assert_int_equal(p3d_result_write(dir, &r, &err), 0);
    r.exit_code = 7;
    assert_int_equal(p3d_result_write(dir, &r, &err), 0); /* replaced, not appended */
    char p[512], buf[1024];
    snprintf(p, sizeof p, "%s/result.json", dir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    assert_non_null(strstr(buf, "\"exit_code\": 7"));
    assert_null(strstr(buf, "\"exit_code\": 0"));
    unlink(p);
    /* a directory that is not there: an error naming it, never a crash */
    assert_int_equal(p3d_result_write("/nonexistent/p3d-result", &r, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "/nonexistent/p3d-result"));
    free(err);
    assert_int_equal(rmdir(dir), 0); /* nothing else was left there */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cause),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
