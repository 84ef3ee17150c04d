/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * termsafe.c — the one escape function (see termsafe.h): on utf8.c's
 * decoder, it lets through what a terminal draws as text and writes
 * everything else as visible escapes.
 */
#include "termsafe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

/* How many bytes at s pass unchanged (0: the next byte needs an escape). */
static size_t run_clean(const unsigned char *s, size_t n, unsigned flags)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7f) {
            i++;
            continue;
        }
        if ((c == '\n' && (flags & P3D_TERM_KEEP_NL)) || (c == '\t' && (flags & P3D_TERM_KEEP_TAB))) {
            i++;
            continue;
        }
        if (c < 0x80)
            break;
        unsigned cp;
        size_t k = p3d_utf8_seq(s + i, n - i, &cp);
        if (!k || p3d_term_cp_unsafe(cp))
            break;
        i += k;
    }
    return i;
}

int p3d_term_clean(const char *s, size_t len, unsigned flags)
{
    return run_clean((const unsigned char *)s, len, flags) == len;
}

void p3d_term_put(p3d_sb *b, const char *str, size_t len, unsigned flags)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        size_t r = run_clean(s + i, len - i, flags);
        p3d_sb_putn(b, (const char *)s + i, r);
        i += r;
        if (i >= len)
            break;
        unsigned char c = s[i];
        unsigned cp;
        size_t k;
        if (c == '\n' || c == '\r' || c == '\t') {
            p3d_sb_putc(b, '\\');
            p3d_sb_putc(b, c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
            i++;
        } else if (c >= 0x80 && (k = p3d_utf8_seq(s + i, len - i, &cp)) != 0) {
            p3d_sb_printf(b, "\\u%04X", cp); /* a C1 control or a bidi mark */
            i += k;
        } else {
            p3d_sb_printf(b, "\\x%02x", c);
            i++;
        }
    }
}

char *p3d_term_dup(const char *s, size_t len, size_t cap, unsigned flags)
{
    p3d_sb b = {0};
    size_t n = len < cap ? len : cap;
    /* do not cut inside a UTF-8 sequence: back up to its first byte */
    if (n < len)
        while (n > 0 && n + 4 > cap && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    p3d_sb_reserve(&b, n + 64);
    p3d_term_put(&b, s, n, flags);
    if (n < len)
        p3d_sb_printf(&b, " ... (%zu more bytes)", len - n);
    if (!b.p)
        p3d_sb_puts(&b, "");
    return p3d_sb_finish(&b);
}

#define TESC_SLOTS 8
#define TESC_SHOWN 1024

const char *p3d_tesc(const char *s)
{
    static _Thread_local char *slot[TESC_SLOTS];
    static _Thread_local unsigned next;
    if (!s)
        return "(null)";
    size_t len = strlen(s);
    if (p3d_term_clean(s, len < TESC_SHOWN ? len : TESC_SHOWN, 0) && len <= TESC_SHOWN)
        return s;
    char *e = p3d_term_dup(s, len, TESC_SHOWN, 0);
    if (!e)
        return "?";
    unsigned k = next++ % TESC_SLOTS;
    free(slot[k]);
    slot[k] = e;
    return e;
}

void p3d_term_fputs(const char *s, FILE *f)
{
    size_t len = strlen(s);
    if (p3d_term_clean(s, len, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB)) {
        fputs(s, f);
        return;
    }
    p3d_sb b = {0};
    p3d_term_put(&b, s, len, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB);
    char *e = p3d_sb_finish(&b);
    fputs(e ? e : "(message lost: out of memory)\n", f);
    free(e);
}

/* The guard's cookie: the fd it writes to. Each write is escaped on its
 * own: a UTF-8 sequence split across two writes comes out as \xHH
 * escapes (stdio hands over whole formatted messages, so this is only
 * a byte-by-byte writer's cost), never raw. */
static ssize_t guard_write(void *cookie, const char *buf, size_t len)
{
    int fd = (int)(intptr_t)cookie;
    p3d_sb b = {0};
    const char *out = buf;
    size_t n = len;
    if (!p3d_term_clean(buf, len, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB)) {
        p3d_term_put(&b, buf, len, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB);
        if (!b.p)
            return -1;
        out = b.p;
        n = b.len;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, out + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(b.p);
    return off == n ? (ssize_t)len : -1;
}

int p3d_term_guard(FILE **stream)
{
    int fd = fileno(*stream);
    if (fd < 0)
        return -1;
    cookie_io_functions_t io = {.write = guard_write};
    FILE *f = fopencookie((void *)(intptr_t)fd, "w", io);
    if (!f)
        return -1;
    setvbuf(f, NULL, _IONBF, 0);
    fflush(*stream);
    *stream = f;
    return 0;
}
