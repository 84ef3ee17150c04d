/* SPDX-License-Identifier: BSD-3-Clause */
/* strbuf.c — the growing output buffer behind the reports (strbuf.h). */
#include "strbuf.h"
#include "utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int p3d_sb_reserve(p3d_sb *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    if (b->sink && b->len) {
        /* streamed: empty the buffer into the sink instead of growing */
        if (!b->werr && fwrite(b->p, 1, b->len, b->sink) != b->len)
            b->werr = 1;
        b->len = 0;
        if (n + 1 <= b->cap)
            return 0;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void p3d_sb_putn_slow(p3d_sb *b, const char *s, size_t n)
{
    if (p3d_sb_reserve(b, n) < 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void p3d_sb_putc_slow(p3d_sb *b, char c)
{
    if (p3d_sb_reserve(b, 1) < 0)
        return;
    b->p[b->len++] = c;
    b->p[b->len] = 0;
}

void p3d_sb_pad(p3d_sb *b, char c, int n)
{
    if (n <= 0 || p3d_sb_reserve(b, (size_t)n) < 0)
        return;
    memset(b->p + b->len, c, (size_t)n);
    b->len += (size_t)n;
    b->p[b->len] = 0;
}

void p3d_sb_printf(p3d_sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || p3d_sb_reserve(b, (size_t)n) < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void p3d_sb_int(p3d_sb *b, long long v)
{
    char tmp[24];
    int i = sizeof tmp;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    p3d_sb_putn(b, tmp + i, sizeof tmp - (size_t)i);
}

/* JSON output is always valid UTF-8 and never carries a raw terminal
 * control: C0 controls, DEL, C1 controls and bidirectional marks are
 * written as \uXXXX escapes (the decoded string keeps them), and a byte
 * that does not start a valid UTF-8 sequence is replaced by U+FFFD,
 * written \ufffd (JSON cannot carry it; docs/report-json.md "Strings and UTF-8").
 * The decoder is utf8.c's, termsafe.c's too, so both escapers agree on
 * what is valid. */
void p3d_sb_json_str(p3d_sb *b, const char *str)
{
    if (!str) {
        p3d_sb_puts(b, "null");
        return;
    }
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), i = 0, run = 0;
    p3d_sb_putc(b, '"');
    while (i < n) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            i++;
            continue;
        }
        unsigned cp = c;
        size_t k = c < 0x80 ? 1 : p3d_utf8_seq(s + i, n - i, &cp);
        if (k > 1 && !p3d_term_cp_unsafe(cp)) {
            i += k;
            continue;
        }
        p3d_sb_putn(b, str + run, i - run);
        switch (c) {
        case '"': p3d_sb_puts(b, "\\\""); break;
        case '\\': p3d_sb_puts(b, "\\\\"); break;
        case '\n': p3d_sb_puts(b, "\\n"); break;
        case '\t': p3d_sb_puts(b, "\\t"); break;
        case '\r': p3d_sb_puts(b, "\\r"); break;
        default: p3d_sb_printf(b, "\\u%04x", k ? cp : 0xfffd); break;
        }
        i += k ? k : 1;
        run = i;
    }
    p3d_sb_putn(b, str + run, i - run);
    p3d_sb_putc(b, '"');
}

void p3d_sb_json_num(p3d_sb *b, double v)
{
    if (!isfinite(v)) {
        p3d_sb_puts(b, "null");
        return;
    }
    if (v == (double)(long long)v && fabs(v) < 1e15) {
        p3d_sb_int(b, (long long)v);
        return;
    }
    /* 10 significant digits: plenty for estimates, and the same bytes on
     * every run of the same binary. */
    p3d_sb_printf(b, "%.10g", v);
}

char *p3d_sb_finish(p3d_sb *b)
{
    if (b->oom || p3d_sb_reserve(b, 0) < 0) {
        p3d_sb_free(b);
        return NULL;
    }
    char *p = b->p;
    p[b->len] = 0; /* a buffer nothing was written to is "" too */
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void p3d_sb_free(p3d_sb *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

int p3d_sb_stream(p3d_sb *b, FILE *f, size_t cap)
{
    memset(b, 0, sizeof *b);
    if (p3d_sb_reserve(b, cap) < 0)
        return -1;
    b->sink = f;
    return 0;
}

int p3d_sb_stream_end(p3d_sb *b)
{
    int rc = 0;
    if (!b->oom && b->len && !b->werr && fwrite(b->p, 1, b->len, b->sink) != b->len)
        b->werr = 1;
    if (b->oom || b->werr)
        rc = -1;
    free(b->p);
    memset(b, 0, sizeof *b);
    return rc;
}
