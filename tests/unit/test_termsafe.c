/* SPDX-License-Identifier: BSD-3-Clause */
/* test_termsafe.c — the one escape function (termsafe.c) and the JSON
 * writer that shares its UTF-8 decoder (strbuf.c): what passes, what is
 * escaped, and that JSON output is valid UTF-8 whatever the input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "strbuf.h"
#include "termsafe.h"

static void term_is(const char *in, size_t len, unsigned flags, const char *want)
{
    p3d_sb b = {0};
    p3d_term_put(&b, in, len, flags);
    char *got = p3d_sb_finish(&b);
    if (!got)
        got = strdup("");
    if (strcmp(got, want))
        fail_msg("escaped %zu bytes: got '%s', want '%s'", len, got, want);
    free(got);
}

static void json_is(const char *in, const char *want)
{
    p3d_sb b = {0};
    p3d_sb_json_str(&b, in);
    char *got = p3d_sb_finish(&b);
    const char *g = got ? got : "(out of memory)";
    if (strcmp(g, want))
        fail_msg("JSON of '%s': got '%s', want '%s'", in ? in : "(NULL)", g, want);
    free(got);
}

static void test_term_escapes(void **state)
{
    (void)state;
    term_is("plain n1", 8, 0, "plain n1");
    term_is("a\x1b[2J\x07\r", 7, 0, "a\\x1b[2J\\x07\\r");
    term_is("l1\nl2\t", 6, 0, "l1\\nl2\\t");
    term_is("l1\nl2\t", 6, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB, "l1\nl2\t");
    term_is("\x7f", 1, 0, "\\x7f");
    /* U+202E (bidi override), U+009B (C1 CSI), U+2066 (isolate) */
    term_is("r\xe2\x80\xae"
            "x\xc2\x9b"
            "y\xe2\x81\xa6",
            11, 0, "r\\u202Ex\\u009By\\u2066");
    /* other scripts pass unchanged */
    term_is("\xc3\xa9t\xc3\xa9 \xe6\x97\xa5", 9, 0, "\xc3\xa9t\xc3\xa9 \xe6\x97\xa5");
    /* invalid: stray continuation, overlong, surrogate, truncated, > U+10FFFF */
    term_is("\x80", 1, 0, "\\x80");
    term_is("\xc0\xaf", 2, 0, "\\xc0\\xaf");
    term_is("\xed\xa0\x80", 3, 0, "\\xed\\xa0\\x80");
    term_is("\xe2\x80", 2, 0, "\\xe2\\x80");
    term_is("\xf4\x90\x80\x80", 4, 0, "\\xf4\\x90\\x80\\x80");
    assert_int_equal(p3d_term_clean("ok \xc3\xa9", 5, 0), 1);
    assert_int_equal(p3d_term_clean("\xff", 1, 0), 0);
    assert_string_equal(p3d_tesc("n\x1b"), "n\\x1b");
    assert_string_equal(p3d_tesc(NULL), "(null)");
}

static void test_term_dup_cut(void **state)
{
    (void)state;
    char *e = p3d_term_dup("abcdef\x1b", 7, 3, 0);
    assert_string_equal(e, "abc ... (4 more bytes)");
    free(e);
    /* never cut inside a sequence: U+00E9 is two bytes */
    e = p3d_term_dup("a\xc3\xa9z", 4, 2, 0);
    assert_string_equal(e, "a ... (3 more bytes)");
    free(e);
}

static void test_json_utf8(void **state)
{
    (void)state;
    json_is(NULL, "null");
    json_is("n1", "\"n1\"");
    json_is("q\"b\\\n\t\r", "\"q\\\"b\\\\\\n\\t\\r\"");
    json_is("e\x1b\x07\x7f", "\"e\\u001b\\u0007\\u007f\"");
    json_is("r\xe2\x80\xae"
            "d\xc2\x9b",
            "\"r\\u202ed\\u009b\"");
    json_is("\xc3\xa9\xe6\x97\xa5", "\"\xc3\xa9\xe6\x97\xa5\"");
    /* each byte that starts no valid sequence is one U+FFFD */
    json_is("n1\xff\xc3(", "\"n1\\ufffd\\ufffd(\"");
    json_is("\xe2\x80", "\"\\ufffd\\ufffd\"");
    json_is("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
}

/* Every byte string of length 1..3 over a set of interesting bytes: the
 * JSON is valid UTF-8 and has no byte below 0x20 or DEL; the terminal
 * escape likewise, with no C1 or bidi code point left. */
static int valid_safe(const char *s)
{
    size_t n = strlen(s), i = 0;
    while (i < n) {
        unsigned cp;
        size_t k = p3d_utf8_seq((const unsigned char *)s + i, n - i, &cp);
        if (!k || cp < 0x20 || cp == 0x7f || p3d_term_cp_unsafe(cp))
            return 0;
        i += k;
    }
    return 1;
}

static void test_exhaustive_short(void **state)
{
    (void)state;
    static const unsigned char pick[] = {0x00 + 1, 0x07, 0x1b, 0x22, 0x41, 0x5c, 0x7f, 0x80, 0x9b, 0xa0, 0xae,
                                         0xbf,     0xc0, 0xc2, 0xc3, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xff};
    size_t np = sizeof pick;
    for (size_t a = 0; a < np; a++)
        for (size_t c = 0; c <= np; c++)
            for (size_t d = 0; d <= np; d++) {
                char in[4] = {(char)pick[a], c < np ? (char)pick[c] : 0, 0, 0};
                if (c < np && d < np)
                    in[2] = (char)pick[d];
                p3d_sb b = {0};
                p3d_sb_json_str(&b, in);
                char *j = p3d_sb_finish(&b);
                if (!valid_safe(j))
                    fail_msg("JSON of %02x %02x %02x is not clean: %s", pick[a], c < np ? pick[c] : 0,
                             d < np ? pick[d] : 0, j);
                free(j);
                char *t = p3d_term_dup(in, strlen(in), 64, 0);
                if (!valid_safe(t))
                    fail_msg("escape of %02x %02x %02x is not clean", pick[a], c < np ? pick[c] : 0,
                             d < np ? pick[d] : 0);
                free(t);
            }
}

/* The stderr guard: what stdio writes through it is escaped, newlines and
 * tabs kept, and reaches the same fd. */
static void test_guard(void **state)
{
    (void)state;
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    FILE *f = fdopen(pfd[1], "w"), *orig = f;
    assert_non_null(f);
    assert_int_equal(p3d_term_guard(&f), 0);
    assert_ptr_not_equal(f, orig);
    fprintf(f, "par3drun: node %s: x\n\tok\n", "n1\x1b[2J\a\r\xe2\x80\xae\xff");
    fputs("plain \xc3\xa9\n", f);
    fclose(f);
    fclose(orig);
    char buf[512];
    ssize_t n = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    assert_true(n > 0);
    buf[n] = 0;
    assert_string_equal(buf, "par3drun: node n1\\x1b[2J\\x07\\r\\u202E\\xff: x\n\tok\nplain \xc3\xa9\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_term_escapes),     cmocka_unit_test(test_term_dup_cut), cmocka_unit_test(test_json_utf8),
        cmocka_unit_test(test_exhaustive_short), cmocka_unit_test(test_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
