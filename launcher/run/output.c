/*
 * output.c — a rank's stdout/stderr, line by line.
 *
 * Workers write into pipes; the agent reads what is there, cuts complete
 * lines, prefixes each with the rank's tag and writes the batch with one
 * locked write loop, so a line is never torn: partial writes from the
 * worker are held until their newline arrives, and other agents sharing the
 * terminal wait on the lock. A line longer than P3D_LINE_MAX is cut into
 * tagged pieces (the only case where a line is split, documented).
 */
#include "launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define P3D_LINE_MAX (1u << 20)
#define P3D_TAIL_CHARS 400

int p3d_rank_list_parse(const char *s, int world, unsigned char *sel, char **err)
{
    const char *p = s;
    memset(sel, 0, (size_t)world);
    if (!*s)
        return p3d_err(err, "--output-ranks '': expected ranks like 0,8-15");
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9') /* strtol would take " +3" */
            return p3d_err(err, "--output-ranks '%s': expected ranks like 0,8-15 at '%s'", s, p);
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0)
            return p3d_err(err, "--output-ranks '%s': expected ranks like 0,8-15 at '%s'", s, p);
        b = a;
        p = end;
        if (*p == '-') {
            b = p[1] >= '0' && p[1] <= '9' ? strtol(p + 1, &end, 10) : -1;
            if (b < 0 || end == p + 1 || b < a)
                return p3d_err(err, "--output-ranks '%s': bad range at '%s'", s, p);
            p = end;
        }
        if (b >= world)
            return p3d_err(err, "--output-ranks '%s': rank %ld is outside the job (world size %d: ranks 0-%d)", s,
                           a >= world ? a : b, world, world - 1);
        for (long r = a; r <= b; r++)
            sel[r] = 1;
        if (*p == ',')
            p++;
        else if (*p)
            return p3d_err(err, "--output-ranks '%s': unexpected '%c'", s, *p);
    }
    return 0;
}

void p3d_rank_tag(const p3d_placement *pl, int r, char *buf, size_t cap)
{
    const int *c = pl->ranks[r].coord;
    int n = snprintf(buf, cap, "[r%d tp%d pp%d dp%d", r, c[P3D_DIM_TP], c[P3D_DIM_PP], c[P3D_DIM_DP]);
    if (pl->mesh.size[P3D_DIM_CP] > 1 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " cp%d", c[P3D_DIM_CP]);
    if (pl->mesh.size[P3D_DIM_EP] > 1 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, " ep%d", c[P3D_DIM_EP]);
    if (n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "] ");
}

void p3d_rank_out_init(p3d_rank_out *r, int rank)
{
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->shown = 1;
    r->log_fd = -1;
    r->s[0].fd = r->s[1].fd = -1;
}

static void write_all(int fd, const char *b, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, b, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* EPIPE etc.: nobody reads our output; keep supervising */
        }
        b += w;
        len -= (size_t)w;
    }
}

void p3d_sink_write(const p3d_outsink *sink, int fd, const char *buf, size_t len)
{
    if (!len)
        return;
    if (sink->lock_fd >= 0)
        while (flock(sink->lock_fd, LOCK_EX) < 0 && errno == EINTR)
            ;
    write_all(fd, buf, len);
    if (sink->lock_fd >= 0)
        flock(sink->lock_fd, LOCK_UN);
}

static void tail_push(p3d_rank_out *r, const char *line, size_t len)
{
    if (len > P3D_TAIL_CHARS)
        len = P3D_TAIL_CHARS;
    char *c = strndup(line, len);
    if (!c)
        return;
    free(r->tail[r->tail_next]);
    r->tail[r->tail_next] = c;
    r->tail_next = (r->tail_next + 1) % P3D_TAIL_LINES;
    if (r->tail_count < P3D_TAIL_LINES)
        r->tail_count++;
}

/* Emits lines [b, b+len) (each ends with '\n', except a forced last one)
 * as one tagged batch. */
static void emit(p3d_rank_out *r, int which, const p3d_outsink *sink, const char *b, size_t len)
{
    if (!len)
        return;
    if (r->log_fd >= 0)
        write_all(r->log_fd, b, len);
    size_t tl = strlen(r->tag), lines = 0;
    for (size_t i = 0; i < len; i++)
        if (b[i] == '\n')
            lines++;
    if (which == 1) {
        const char *p = b, *end = b + len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
            tail_push(r, p, l);
            p += l + (nl ? 1 : 0);
        }
    }
    if (!r->shown)
        return;
    int fd = which ? sink->err_fd : sink->out_fd;
    if (!tl) {
        p3d_sink_write(sink, fd, b, len);
        return;
    }
    char *o = malloc(len + (lines + 1) * tl);
    if (!o) { /* no memory for tags: untagged beats lost */
        p3d_sink_write(sink, fd, b, len);
        return;
    }
    size_t ol = 0;
    const char *p = b, *end = b + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        memcpy(o + ol, r->tag, tl);
        ol += tl;
        memcpy(o + ol, p, l);
        ol += l;
        p += l;
    }
    p3d_sink_write(sink, fd, o, ol);
    free(o);
}

/* Emits complete lines held in the buffer; keeps the unfinished rest. When
 * force, the rest is emitted too, with a newline added. */
static void flush_lines(p3d_rank_out *r, int which, const p3d_outsink *sink, int force)
{
    p3d_ostream *s = &r->s[which];
    size_t cut = 0;
    for (size_t i = s->len; i > 0; i--)
        if (s->buf[i - 1] == '\n') {
            cut = i;
            break;
        }
    emit(r, which, sink, s->buf, cut);
    memmove(s->buf, s->buf + cut, s->len - cut);
    s->len -= cut;
    /* an unfinished rest goes out at EOF, or in pieces when it is huge */
    if (s->len && (force || s->len >= P3D_LINE_MAX)) {
        if (s->len == s->cap) {
            char *nb = realloc(s->buf, s->cap + 1);
            if (!nb)
                return;
            s->buf = nb;
            s->cap++;
        }
        s->buf[s->len++] = '\n';
        emit(r, which, sink, s->buf, s->len);
        s->len = 0;
    }
}

int p3d_rank_out_read(p3d_rank_out *r, int which, const p3d_outsink *sink)
{
    p3d_ostream *s = &r->s[which];
    if (s->fd < 0)
        return 1;
    for (int rounds = 0; rounds < 16; rounds++) {
        if (s->cap - s->len < 65536) {
            size_t ncap = s->cap ? s->cap * 2 : 65536 * 2;
            if (ncap > P3D_LINE_MAX * 2 + 65536)
                ncap = s->cap; /* flush_lines below keeps len under the cap */
            if (ncap != s->cap) {
                char *nb = realloc(s->buf, ncap);
                if (!nb)
                    return -1;
                s->buf = nb;
                s->cap = ncap;
            }
        }
        ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            flush_lines(r, which, sink, 1);
            close(s->fd);
            s->fd = -1;
            return n < 0 ? -1 : 1;
        }
        s->len += (size_t)n;
        flush_lines(r, which, sink, 0);
    }
    return 0;
}

void p3d_rank_out_drain(p3d_rank_out *r, const p3d_outsink *sink)
{
    for (int w = 0; w < 2; w++)
        while (r->s[w].fd >= 0) {
            size_t before = r->s[w].len;
            int rc = p3d_rank_out_read(r, w, sink);
            if (rc != 0)
                break;
            /* EAGAIN with nothing new: a descendant still holds the pipe */
            if (r->s[w].len == before)
                break;
        }
}

char *p3d_rank_out_tail(const p3d_rank_out *r, const char *indent)
{
    size_t cap = 1, il = strlen(indent);
    for (int i = 0; i < r->tail_count; i++) {
        int k = (r->tail_next - r->tail_count + i + P3D_TAIL_LINES) % P3D_TAIL_LINES;
        cap += il + strlen(r->tail[k]) + 1;
    }
    char *o = malloc(cap), *p = o;
    if (!o)
        return NULL;
    for (int i = 0; i < r->tail_count; i++) {
        int k = (r->tail_next - r->tail_count + i + P3D_TAIL_LINES) % P3D_TAIL_LINES;
        p += sprintf(p, "%s%s\n", indent, r->tail[k]);
    }
    *p = 0;
    return o;
}

void p3d_rank_out_free(p3d_rank_out *r)
{
    for (int w = 0; w < 2; w++) {
        if (r->s[w].fd >= 0)
            close(r->s[w].fd);
        r->s[w].fd = -1;
        P3D_FREE(&r->s[w].buf);
        r->s[w].len = r->s[w].cap = 0;
    }
    if (r->log_fd >= 0)
        close(r->log_fd);
    r->log_fd = -1;
    for (int i = 0; i < P3D_TAIL_LINES; i++)
        P3D_FREE(&r->tail[i]);
    r->tail_count = r->tail_next = 0;
}
