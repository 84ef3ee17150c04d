/* SPDX-License-Identifier: BSD-3-Clause */
/* test_hostlist.c — Slurm hostlist expansion and compression. Expected
 * expansions were taken from Slurm 22.05's `scontrol show hostnames`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "p3d/p3d.h"

/* Expands expr and compares with the space-separated expected list. */
static void expect(const char *expr, const char *want)
{
    char **v = NULL, *err = NULL;
    size_t n = 0;
    int rc = p3d_hostlist_expand(expr, &v, &n, 0, &err);
    if (rc != 0)
        fail_msg("'%s': %s", expr, err);
    char got[4096] = "";
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(got, " ");
        strcat(got, v[i]);
    }
    if (strcmp(got, want) != 0)
        fail_msg("'%s' gave '%s', want '%s'", expr, got, want);
    p3d_strv_free(v, n);
    free(err);
}

/* Expects a failure whose message contains every fragment given. */
static void expect_err(const char *expr, size_t max, const char *frag1, const char *frag2)
{
    char **v = NULL, *err = NULL;
    size_t n = 0;
    int rc = p3d_hostlist_expand(expr, &v, &n, max, &err);
    if (rc == 0)
        fail_msg("'%s' should fail, gave %zu names", expr, n);
    assert_non_null(err);
    if (frag1 && !strstr(err, frag1))
        fail_msg("'%s': message '%s' lacks '%s'", expr, err, frag1);
    if (frag2 && !strstr(err, frag2))
        fail_msg("'%s': message '%s' lacks '%s'", expr, err, frag2);
    assert_null(v);
    free(err);
}

static void test_basic(void **state)
{
    (void)state;
    expect("node[001-003,005]", "node001 node002 node003 node005");
    expect("n[1-10]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10");
    expect("n[001-10]", "n001 n002 n003 n004 n005 n006 n007 n008 n009 n010");
    expect("n[9-010]", "n9 n10");
    expect("n[099-101]", "n099 n100 n101");
    expect("n[3,1-2]", "n3 n1 n2");
    expect("n[1,1]", "n1 n1");
    expect("n[5]", "n5");
    expect("x[1-2],y", "x1 x2 y");
    expect(",,a,,b", "a b");
    expect("a b,c", "a b c");
    expect("  host \t other\n", "host other");
    expect("", "");
    expect("circe-n[001-002],n[019-020]", "circe-n001 circe-n002 n019 n020");
    expect("gpu[1-2]-ib", "gpu1-ib gpu2-ib");
}

static void test_cartesian_slurm_order(void **state)
{
    (void)state;
    expect("a[1-2]b[3-4]", "a1b3 a1b4 a2b3 a2b4");
    expect("n[1-2][3-4]", "n13 n14 n23 n24");
    expect("a[1-2]b[3-4]c[5-6]", "a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 a2b4c6");
    expect("a[1-2]b[3-4]c[5-6]d[7-8]", "a1b3c5d7 a1b3c5d8 a2b3c5d7 a2b3c5d8 a1b4c5d7 a1b4c5d8 a2b4c5d7 "
                                       "a2b4c5d8 a1b3c6d7 a1b3c6d8 a2b3c6d7 a2b3c6d8 a1b4c6d7 a1b4c6d8 "
                                       "a2b4c6d7 a2b4c6d8");
    expect("p[1-2]q[3-4],r[1-2]s[5-6]", "p1q3 p1q4 p2q3 p2q4 r1s5 r1s6 r2s5 r2s6");
    expect("n[1-2]b[01-2]", "n1b01 n1b02 n2b01 n2b02");
    expect("a[1,3]b[7]", "a1b7 a3b7");
}

static void test_errors(void **state)
{
    (void)state;
    expect_err("n[10-1]", 0, "column 3", "goes backwards");
    expect_err("n[1-3", 0, "column 2", "never closed");
    expect_err("n[1-", 0, "column 2", "never closed");
    expect_err("n[", 0, "column 2", "never closed");
    expect_err("n[1,", 0, "column 2", "never closed");
    expect_err("n1-3]", 0, "column 5", "without a matching '['");
    expect_err("n[]", 0, "column 3", "empty range");
    expect_err("n[a-b]", 0, "column 3", "found 'a'");
    expect_err("n[1-2,]", 0, "column 7", "empty range");
    expect_err("n[-1]", 0, "column 3", NULL);
    expect_err("n[1-3-5]", 0, "column 6", "one '-'");
    expect_err("n[1[2]]", 0, "column 4", "inside brackets");
    expect_err("ok,n[1 2]", 0, "column 7", "expected ','");
    expect_err("n[1234567890123456789]", 0, "18 digits", NULL);
    expect_err("a\001b", 0, "control character", NULL);
    /* the limit counts the items before, too */
    expect_err("a,b,c[1-3]", 4, "expands to 5 names", "limit is 4");
    char *longname = malloc(300);
    memset(longname, 'x', 299);
    longname[299] = 0;
    expect_err(longname, 0, "longer than 255", NULL);
    free(longname);
}

/* The limit applies before expanding: a ten-billion-name range fails at
 * once instead of allocating. */
static void test_huge_fails_fast(void **state)
{
    (void)state;
    clock_t t0 = clock();
    expect_err("n[0-9999999999]", 0, "10000000000 names", "limit is 4194304");
    expect_err("a[0-99999]b[0-99999]c[0-99999]", 0, "limit", NULL);
    expect_err("a[0-999999999999999999]b[0-999999999999999999]"
               "c[0-999999999999999999]",
               0, "more names than can be counted", NULL);
    /* the size check comes before any expansion; the time is a figure,
     * not a bound (a loaded 2-CPU machine would make a bound flake) */
    print_message("3 oversized expressions refused in %.3f s CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
}

static void test_long_expr_message_is_trimmed(void **state)
{
    (void)state;
    char expr[5000];
    size_t k = 0;
    for (int i = 0; i < 400; i++)
        k += (size_t)snprintf(expr + k, sizeof expr - k, "n%d,", i);
    snprintf(expr + k, sizeof expr - k, "bad]");
    char **v = NULL, *err = NULL;
    size_t n = 0;
    assert_int_equal(p3d_hostlist_expand(expr, &v, &n, 0, &err), -1);
    assert_non_null(strstr(err, "bad]"));
    assert_non_null(strstr(err, "..."));
    assert_true(strlen(err) < 200);
    free(err);
}

static void roundtrip(char **names, size_t n, const char *want)
{
    char *s = p3d_hostlist_compress(names, n);
    assert_non_null(s);
    if (want && strcmp(s, want) != 0)
        fail_msg("compress gave '%s', want '%s'", s, want);
    char **v = NULL, *err = NULL;
    size_t m = 0;
    if (p3d_hostlist_expand(s, &v, &m, 0, &err) != 0)
        fail_msg("'%s' does not expand: %s", s, err);
    assert_int_equal(m, n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], names[i]) != 0)
            fail_msg("'%s'[%zu] = %s, want %s", s, i, v[i], names[i]);
    p3d_strv_free(v, m);
    free(s);
}

static void test_compress(void **state)
{
    (void)state;
    char *a[] = {"node001", "node002", "node003", "node005"};
    roundtrip(a, 4, "node[001-003,005]");
    char *b[] = {"n9", "n10", "n11"};
    roundtrip(b, 3, "n[9-11]");
    char *c[] = {"n9", "n010"};
    roundtrip(c, 2, "n[9,010]");
    char *d[] = {"a01", "b01", "a02", "b02"};
    roundtrip(d, 4, "a01,b01,a02,b02");
    char *e[] = {"login", "gpu1", "gpu2", "gpu3", "x"};
    roundtrip(e, 5, "login,gpu[1-3],x");
    char *f[] = {"n3", "n1", "n2"};
    roundtrip(f, 3, "n[3,1-2]");
    char *g[] = {"only7"};
    roundtrip(g, 1, "only7");
    roundtrip(NULL, 0, "");
    char *h[] = {"n099", "n100", "n1", "n01"};
    roundtrip(h, 4, "n[099-100,1,01]");
}

/* Property: compress(random list) expands back to the same list. */
static void test_compress_random(void **state)
{
    (void)state;
    unsigned seed = 12345;
    static const char *pfx[] = {"n", "gpu-", "a1b", "", "rack2-node"};
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rand_r(&seed) % 40) + 1;
        char **names = calloc(n, sizeof *names);
        for (size_t i = 0; i < n; i++) {
            char buf[64];
            int w = rand_r(&seed) % 4, num = rand_r(&seed) % 25;
            if (rand_r(&seed) % 3 && i > 0) {
                /* often continue a run to produce ranges */
                snprintf(buf, sizeof buf, "%s%0*d", pfx[round % 5], w, (int)i + 100);
            } else {
                snprintf(buf, sizeof buf, "%s%0*d", pfx[rand_r(&seed) % 5], w, num);
            }
            if (rand_r(&seed) % 17 == 0)
                snprintf(buf, sizeof buf, "plain");
            names[i] = strdup(buf);
        }
        roundtrip(names, n, NULL);
        p3d_strv_free(names, n);
    }
}

static void test_many(void **state)
{
    (void)state;
    char **v = NULL, *err = NULL;
    size_t n = 0;
    clock_t t0 = clock();
    assert_int_equal(p3d_hostlist_expand("node[00001-16384]", &v, &n, 0, &err), 0);
    assert_int_equal(n, 16384);
    assert_string_equal(v[16383], "node16384");
    char *s = p3d_hostlist_compress(v, n);
    assert_string_equal(s, "node[00001-16384]");
    print_message("16384 names expanded and compressed in %.3f s CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    free(s);
    p3d_strv_free(v, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_cartesian_slurm_order),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_huge_fails_fast),
        cmocka_unit_test(test_long_expr_message_is_trimmed),
        cmocka_unit_test(test_compress),
        cmocka_unit_test(test_compress_random),
        cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
