/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * strbuf.h — a growing output buffer for the report writers (private to
 * placement/). Appends never fail visibly: on out-of-memory the buffer
 * remembers it and p3d_sb_finish() returns NULL, so writers stay linear.
 */
#ifndef P3D_STRBUF_H
#define P3D_STRBUF_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct p3d_sb {
    char *p;
    size_t len, cap;
    int oom;
    /* A streamed buffer (p3d_sb_stream): full buffers go to sink instead
     * of growing, so a whole-world report never sits in memory. */
    FILE *sink;
    int werr; /* a write to sink failed (errno kept) */
} p3d_sb;

/* Streams b into f through a buffer of cap bytes: whatever does not fit is
 * written out first; p3d_sb_stream_end writes the rest and frees the
 * buffer. Writers that look back (b->len--) see only the bytes since the
 * last append, which stay in the buffer. 0, or -1 when an append ran out of
 * memory or a write failed (errno from the write). */
int p3d_sb_stream(p3d_sb *b, FILE *f, size_t cap);
int p3d_sb_stream_end(p3d_sb *b);

/* Makes room for n more bytes; returns 0, or -1 (and sets oom). */
int p3d_sb_reserve(p3d_sb *b, size_t n);
/* Appends; the buffer stays NUL-terminated. Inline when there is room
 * (the report writers' hot path, ~30 appends per rank line), else through
 * p3d_sb_reserve (growing, or flushing a stream). */
void p3d_sb_putn_slow(p3d_sb *b, const char *s, size_t n);
void p3d_sb_putc_slow(p3d_sb *b, char c);
static inline void p3d_sb_putn(p3d_sb *b, const char *s, size_t n)
{
    if (b->len + n + 1 <= b->cap) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = 0;
    } else {
        p3d_sb_putn_slow(b, s, n);
    }
}
static inline void p3d_sb_puts(p3d_sb *b, const char *s)
{
    p3d_sb_putn(b, s, strlen(s));
}
static inline void p3d_sb_putc(p3d_sb *b, char c)
{
    if (b->len + 2 <= b->cap) {
        b->p[b->len++] = c;
        b->p[b->len] = 0;
    } else {
        p3d_sb_putc_slow(b, c);
    }
}
/* n copies of c (padding). */
void p3d_sb_pad(p3d_sb *b, char c, int n);
void p3d_sb_printf(p3d_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Decimal integer without printf (the JSON writer's hot path). */
void p3d_sb_int(p3d_sb *b, long long v);
/* A JSON string literal with quotes; NULL writes null. */
void p3d_sb_json_str(p3d_sb *b, const char *s);
/* A JSON number; NaN and infinities write null (JSON has neither). */
void p3d_sb_json_num(p3d_sb *b, double v);
/* Hands the NUL-terminated text to the caller (who frees it); NULL when
 * an append ran out of memory. The buffer is empty afterwards. */
char *p3d_sb_finish(p3d_sb *b);
void p3d_sb_free(p3d_sb *b);

#endif
