/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_report_stream.c — the streamed JSON report (p3d_report_json_to,
 * p3d_sb_stream): the same bytes as the in-memory report when the report
 * is several times the stream's buffer, the writers' look-back (b->len--)
 * across a flush, and a failed write reported, not swallowed; the text,
 * SVG and HTML reports streamed the same way (p3d_report_*_to).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy_fixture.h"
#include "strbuf.h"

/* The whole content of f (rewound), malloc'd, length in *n. */
static char *slurp(FILE *f, size_t *n)
{
    fflush(f);
    long len = ftell(f);
    assert_true(len >= 0);
    char *s = malloc((size_t)len + 1);
    rewind(f);
    *n = fread(s, 1, (size_t)len, f);
    s[*n] = 0;
    return s;
}

static void test_stream_equals_buffer(void **state)
{
    (void)state;
    p3d_cluster *c = fx_simple(2048, 8, 8, 32);
    p3d_job j;
    fx_job(&j, 8, 1, 1, 128, 16, NULL);
    p3d_placement *pl = NULL;
    p3d_analysis *an = NULL;
    char *err = NULL;
    assert_int_equal(p3d_policy_run("megatron", NULL, c, &j, &pl, &err), 0);
    assert_int_equal(p3d_analyze(c, &j, pl, &an, &err), 0);
    p3d_report_in in = {.cluster = c, .job = &j, .pl = pl, .an = an};
    char *mem = p3d_report_json(&in);
    assert_non_null(mem);
    /* 16,384 ranks: ~4 MB, several 1 MiB buffers streamed */
    assert_true(strlen(mem) > ((size_t)3 << 20));
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(p3d_report_json_to(&in, f), 0);
    size_t n;
    char *got = slurp(f, &n);
    assert_int_equal(n, strlen(mem));
    assert_memory_equal(got, mem, n);
    fclose(f);
    free(got);
    free(mem);
    /* a write that fails is an error, not a short report */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(p3d_report_json_to(&in, full), -1);
        fclose(full);
    }
    p3d_analysis_free(an);
    p3d_placement_free(pl);
    fx_free(c);
}

/* A buffer of 8 bytes: every few appends flush; the look-back the rank
 * writer does ("node001" reopened to "node001/3") still works. */
static void test_small_buffer_look_back(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    p3d_sb b;
    assert_int_equal(p3d_sb_stream(&b, f, 8), 0);
    for (int i = 0; i < 3; i++) {
        p3d_sb_puts(&b, "{\"d\": ");
        p3d_sb_json_str(&b, "node001");
        b.len--;
        p3d_sb_putc(&b, '/');
        p3d_sb_int(&b, 3 + i);
        p3d_sb_putc(&b, '"');
        p3d_sb_printf(&b, ", \"x\": %d}", 100 * i);
        p3d_sb_puts(&b, "a string longer than the whole buffer;");
    }
    assert_int_equal(p3d_sb_stream_end(&b), 0);
    size_t n;
    char *got = slurp(f, &n);
    assert_string_equal(got, "{\"d\": \"node001/3\", \"x\": 0}a string longer than the whole buffer;"
                             "{\"d\": \"node001/4\", \"x\": 100}a string longer than the whole buffer;"
                             "{\"d\": \"node001/5\", \"x\": 200}a string longer than the whole buffer;");
    free(got);
    fclose(f);
}

/* Streamed equals in memory for one report function pair; a write that
 * fails is -1. */
static void same_streamed(const p3d_report_in *in, char *(*mem)(const p3d_report_in *),
                          int (*to)(const p3d_report_in *, FILE *), char **text)
{
    char *m = mem(in);
    assert_non_null(m);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(to(in, f), 0);
    size_t n;
    char *got = slurp(f, &n);
    assert_int_equal(n, strlen(m));
    assert_memory_equal(got, m, n);
    fclose(f);
    free(got);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        assert_int_equal(to(in, full), -1);
        fclose(full);
    }
    *text = m;
}

/* 100 nodes: the text grid shows the first 48 and the last 8; names with
 * terminal controls among them, in colour, so the line-by-line drain
 * meets both our colour sequences and input it must escape. */
static void test_text_svg_html_streamed(void **state)
{
    (void)state;
    p3d_cluster *c = fx_simple(100, 8, 8, 16);
    free(c->nodes[0].name);
    c->nodes[0].name = strdup("n\033[2Jfirst");
    free(c->nodes[99].name);
    c->nodes[99].name = strdup("last\xe2\x80\xae"
                               "evil");
    free(c->racks[6]);
    c->racks[6] = strdup("r\rack7");
    p3d_job j;
    fx_job(&j, 8, 1, 1, 50, 2, NULL);
    p3d_placement *pl = NULL;
    p3d_analysis *an = NULL;
    char *err = NULL;
    assert_int_equal(p3d_policy_run("megatron", NULL, c, &j, &pl, &err), 0);
    assert_int_equal(p3d_analyze(c, &j, pl, &an, &err), 0);
    p3d_report_in in = {.cluster = c, .job = &j, .pl = pl, .an = an, .color = 1};
    char *t;
    same_streamed(&in, p3d_report_text, p3d_report_text_to, &t);
    assert_non_null(strstr(t, "\033[1mpar3drun dry run")); /* our colour, kept */
    assert_null(strstr(t, "\033[2J"));                     /* theirs, escaped */
    assert_non_null(strstr(t, "n\\x1b[2Jfirst"));
    assert_non_null(strstr(t, "last\\u202Eevil")); /* a tail node, shown */
    assert_non_null(strstr(t, "r\\rack7"));
    assert_non_null(strstr(t, "... 44 nodes not shown"));
    assert_null(strstr(t, "n00050 ")); /* a middle node, not shown */
    free(t);
    in.color = 0;
    same_streamed(&in, p3d_report_text, p3d_report_text_to, &t);
    assert_null(strchr(t, '\033'));
    free(t);
    same_streamed(&in, p3d_report_svg, p3d_report_svg_to, &t);
    assert_true(strncmp(t, "<?xml", 5) == 0);
    free(t);
    same_streamed(&in, p3d_report_html, p3d_report_html_to, &t);
    assert_true(strncmp(t, "<!DOCTYPE html>", 15) == 0);
    free(t);
    p3d_analysis_free(an);
    p3d_placement_free(pl);
    fx_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_equals_buffer),
        cmocka_unit_test(test_small_buffer_look_back),
        cmocka_unit_test(test_text_svg_html_streamed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
