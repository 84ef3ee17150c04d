/* SPDX-License-Identifier: BSD-3-Clause */
/* test_mnode_delta.c — a replacement's placement sent as the difference
 * from the old one (launcher/wire/wire_cdelta.c): applied, it gives the new
 * bytes exactly; small edits give a small difference; it names its base,
 * so another base is refused; and a hostile difference (every truncation,
 * every byte flipped) gives an error or the exact new bytes, never a
 * crash, an overrun (ASan in the sanitizer build) or a wrong result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnode.h"

static unsigned rnd_state = 12345;
static unsigned rnd(void)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return rnd_state >> 8;
}

/* text-like bytes: runs repeat, as a compact placement's do */
static unsigned char *make_old(size_t n)
{
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((i % 97) < 60 ? 'a' + (i / 97) % 26 : rnd());
    return p;
}

/* nw = old with k edits (replace, insert or delete a few bytes each) */
static unsigned char *edit(const unsigned char *old, size_t on, int k, size_t *nn)
{
    unsigned char *p = malloc(on + 64 * (size_t)k + 1);
    memcpy(p, old, on);
    size_t n = on;
    for (int e = 0; e < k; e++) {
        size_t at = n ? rnd() % n : 0, len = 1 + rnd() % 40;
        int kind = (int)(rnd() % 3);
        if (kind == 0) {
            for (size_t i = at; i < at + len && i < n; i++)
                p[i] = (unsigned char)rnd();
        } else if (kind == 1) {
            memmove(p + at + len, p + at, n - at);
            for (size_t i = 0; i < len; i++)
                p[at + i] = (unsigned char)rnd();
            n += len;
        } else {
            if (at + len > n)
                len = n - at;
            memmove(p + at, p + at + len, n - at - len);
            n -= len;
        }
    }
    *nn = n;
    return p;
}

static void roundtrip(const unsigned char *old, size_t on, const unsigned char *nw, size_t nn, size_t *dlen)
{
    p3d_wbuf d = {0};
    assert_int_equal(p3d_delta_make(old, on, nw, nn, &d), 0);
    unsigned char *out = NULL;
    size_t outn = 0;
    char *err = NULL;
    if (p3d_delta_apply(old, on, d.p, d.len, &out, &outn, &err) < 0)
        fail_msg("apply: %s", err);
    assert_int_equal(outn, nn);
    assert_memory_equal(out, nw, nn);
    if (dlen)
        *dlen = d.len;
    free(out);
    p3d_wbuf_free(&d);
}

static void small_edits_small_delta(void **st)
{
    (void)st;
    for (int round = 0; round < 50; round++) {
        size_t on = 2000 + rnd() % 200000, nn, dl;
        unsigned char *old = make_old(on);
        int k = 1 + round % 6;
        unsigned char *nw = edit(old, on, k, &nn);
        roundtrip(old, on, nw, nn, &dl);
        /* each edit costs at most ~2 blocks of inserted bytes + 2 ops */
        if (dl > 32 + (size_t)k * (2 * 32 + 40 + 2 * 9))
            fail_msg("round %d: %d edits of a %zu-byte body gave a %zu-byte difference", round, k, on, dl);
        free(old);
        free(nw);
    }
}

static void corner_cases(void **st)
{
    (void)st;
    unsigned char a[] = "abc", b[] = "abd";
    size_t dl;
    roundtrip(a, 3, b, 3, NULL); /* shorter than a block */
    roundtrip(a, 0, b, 3, NULL); /* empty base */
    roundtrip(a, 3, b, 0, NULL); /* empty result */
    unsigned char *old = make_old(50000), *other = make_old(50000);
    roundtrip(old, 50000, old, 50000, &dl); /* the same: one copy */
    assert_true(dl < 64);
    roundtrip(old, 50000, other, 50000, NULL); /* nothing shared */
    free(old);
    free(other);
}

static void names_its_base(void **st)
{
    (void)st;
    size_t on = 30000, nn;
    unsigned char *old = make_old(on), *nw = edit(old, on, 2, &nn), *out = NULL;
    p3d_wbuf d = {0};
    assert_int_equal(p3d_delta_make(old, on, nw, nn, &d), 0);
    old[100] ^= 1; /* a node that holds another placement */
    char *err = NULL;
    size_t outn;
    assert_int_equal(p3d_delta_apply(old, on, d.p, d.len, &out, &outn, &err), -1);
    assert_non_null(strstr(err, "another placement"));
    assert_null(out);
    free(err);
    p3d_wbuf_free(&d);
    free(old);
    free(nw);
}

static void hostile(void **st)
{
    (void)st;
    size_t on = 8000, nn;
    unsigned char *old = make_old(on), *nw = edit(old, on, 4, &nn);
    p3d_wbuf d = {0};
    assert_int_equal(p3d_delta_make(old, on, nw, nn, &d), 0);
    for (size_t cut = 0; cut < d.len; cut++) {
        unsigned char *out = NULL;
        size_t outn;
        char *err = NULL;
        assert_int_equal(p3d_delta_apply(old, on, d.p, cut, &out, &outn, &err), -1);
        free(err);
    }
    for (size_t i = 0; i < d.len; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            d.p[i] ^= (unsigned char)(1 << bit);
            unsigned char *out = NULL;
            size_t outn = 0;
            char *err = NULL;
            if (p3d_delta_apply(old, on, d.p, d.len, &out, &outn, &err) == 0) {
                assert_int_equal(outn, nn);
                assert_memory_equal(out, nw, nn);
            }
            free(out);
            free(err);
            d.p[i] ^= (unsigned char)(1 << bit);
        }
    p3d_wbuf_free(&d);
    free(old);
    free(nw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_edits_small_delta),
        cmocka_unit_test(corner_cases),
        cmocka_unit_test(names_its_base),
        cmocka_unit_test(hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
