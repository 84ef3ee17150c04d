/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * output.c — a rank's stdout/stderr, line by line.
 *
 * Workers write into pipes; the agent reads what is there, cuts complete
 * lines, prefixes each with the rank's tag and queues the batch for the
 * terminal (the sink), so a line is never torn: partial writes from the
 * worker are held until their newline arrives. A line longer than
 * P3D_LINE_MAX is cut into tagged pieces (the only case where a line is
 * split, documented).
 *
 * The sink never waits for its reader: it writes what the terminal (pipe)
 * takes now, keeps the rest (at most P3D_OUT_PENDING bytes per stream) for
 * the next POLLOUT, and drops whole batches beyond that, counting them; a
 * note with the count follows once the queue drains. Agents that share the
 * terminal (--emulate) take a lock file without waiting for it, and hold it
 * while one of their lines is half written, so other agents queue instead.
 */
#include "ranks.h"
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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
    r->file_fd[0] = r->file_fd[1] = -1;
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

/* A pipe or a terminal can make write() wait for its reader: such an fd is
 * opened again as a new, non-blocking open file description (the shared
 * one, the shell's too, keeps its flags). Regular files never wait; a
 * socket cannot be reopened and is written in PIPE_BUF pieces after poll
 * says it has room. */
static int nonblocking_fd(int fd, int *own, int *regular)
{
    struct stat st;
    *own = 0;
    *regular = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (fd < 0 || fstat(fd, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
        return fd;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int n = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (n < 0)
        return fd;
    *own = 1;
    return n;
}

int p3d_output_lock_open(const p3d_launch *L)
{
    if (!L->emulate || !L->run_dir)
        return -1;
    /* rundir.c: through the checked directory, never via a symlink */
    return p3d_rundir_openat(L->run_dir, "output.lock", O_RDWR | O_CREAT, 0600);
}

void p3d_sink_init(p3d_outsink *sink, int out_fd, int err_fd, int lock_fd)
{
    memset(sink, 0, sizeof *sink);
    sink->lock_fd = lock_fd;
    struct stat a, b;
    /* 2>&1: one queue, so that the two streams cannot tear each other's
     * lines */
    sink->same = out_fd == err_fd || (fstat(out_fd, &a) == 0 && fstat(err_fd, &b) == 0 && a.st_dev == b.st_dev &&
                                      a.st_ino == b.st_ino && !S_ISREG(a.st_mode));
    sink->q[0].fd = nonblocking_fd(out_fd, &sink->q[0].own, &sink->q[0].regular);
    sink->q[1].fd = sink->same ? -1 : nonblocking_fd(err_fd, &sink->q[1].own, &sink->q[1].regular);
}

/* A regular file never makes a writer wait, so its lock is never held
 * long: wait for it. Otherwise the holder may be a writer whose reader is
 * slow: do not wait. */
static int lock_try(p3d_outsink *sink, int wait)
{
    if (sink->lock_fd < 0 || sink->held)
        return 1;
    while (flock(sink->lock_fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0)
        if (errno != EINTR)
            return 0;
    sink->held = 1;
    return 1;
}

static void lock_release(p3d_outsink *sink)
{
    if (sink->lock_fd >= 0 && sink->held && !sink->q[0].mid && !sink->q[1].mid) {
        flock(sink->lock_fd, LOCK_UN);
        sink->held = 0;
    }
}

static int enqueue(p3d_outq *q, const char *b, size_t len)
{
    /* one batch (up to two P3D_LINE_MAX lines) always fits an empty queue */
    if (q->len && len > P3D_OUT_PENDING - q->len)
        return -1;
    if (q->len + len > q->cap) {
        size_t nc = q->cap ? q->cap : 65536;
        while (nc < q->len + len)
            nc *= 2;
        char *nb = realloc(q->buf, nc);
        if (!nb)
            return -1;
        q->buf = nb;
        q->cap = nc;
    }
    memcpy(q->buf + q->len, b, len);
    q->len += len;
    return 0;
}

/* Writes what stream w can take now without waiting. */
static void flush_one(p3d_outsink *sink, int w)
{
    p3d_outq *q = &sink->q[w];
    while (q->len > 0) {
        if (!lock_try(sink, q->regular)) {
            sink->lock_busy = 1;
            return;
        }
        /* a terminal or pipe we share: write only what it takes now */
        if (!q->own && !q->regular && p3d_wait_fd(q->fd, P3D_LOOP_OUT, p3d_now()) <= 0)
            break;
        size_t n = q->len;
        if (!q->own && !q->regular && n > PIPE_BUF)
            n = PIPE_BUF;
        ssize_t k = write(q->fd, q->buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k <= 0) { /* EPIPE etc.: nobody reads this stream any more */
            q->len = 0;
            q->mid = 0;
            break;
        }
        q->mid = q->buf[k - 1] != '\n';
        memmove(q->buf, q->buf + k, q->len - (size_t)k);
        q->len -= (size_t)k;
        if (q->len == 0 && q->dropped) {
            char note[160];
            int l = snprintf(note, sizeof note,
                             "par3drun: [%zu bytes of output dropped here: the reader of this stream is too slow; "
                             "--log-dir keeps everything]\n",
                             q->dropped);
            q->dropped = 0;
            enqueue(q, note, (size_t)l);
        }
    }
    lock_release(sink);
}

void p3d_sink_flush(p3d_outsink *sink)
{
    sink->lock_busy = 0;
    for (int w = 0; w < 2; w++)
        flush_one(sink, w);
}

void p3d_sink_write(p3d_outsink *sink, int which, const char *buf, size_t len)
{
    if (!len)
        return;
    p3d_outq *q = &sink->q[which && !sink->same ? 1 : 0];
    if (q->fd < 0)
        return;
    /* whole batches (whole lines) go in or are dropped and counted */
    if (enqueue(q, buf, len) < 0)
        q->dropped += len;
    p3d_sink_flush(sink);
}

static void sink_writable(p3d_loop *l, int fd, int ev, void *ctx)
{
    (void)l;
    (void)fd;
    (void)ev;
    p3d_sink_flush(ctx);
}

double p3d_sink_watch(p3d_outsink *sink, p3d_loop *l)
{
    double dl = 0;
    for (int w = 0; w < 2; w++) {
        p3d_outq *q = &sink->q[w];
        if (q->fd < 0)
            continue;
        if (w == 1 && sink->q[0].fd == q->fd && sink->q[0].len)
            continue; /* one fd for both: the first stream's watcher stays */
        if (q->len && !sink->lock_busy && !q->regular)
            p3d_loop_watch(l, q->fd, P3D_LOOP_OUT, sink_writable, sink);
        else if (!q->regular)
            p3d_loop_unwatch(l, q->fd);
        if (q->len && sink->lock_busy)
            dl = p3d_now() + 0.020; /* another agent holds the terminal: look again soon */
    }
    return dl;
}

void p3d_sink_close(p3d_outsink *sink)
{
    p3d_sink_flush(sink);
    size_t lost = 0;
    for (int w = 0; w < 2; w++) {
        lost += sink->q[w].len + sink->q[w].dropped;
        sink->q[w].len = 0;
        sink->q[w].mid = 0;
    }
    if (lost) {
        /* best effort, without waiting: the terminal may be the problem */
        char note[160];
        int l = snprintf(note, sizeof note,
                         "par3drun: [%zu bytes of output not shown: the reader was too slow; --log-dir keeps "
                         "everything]\n",
                         lost);
        p3d_outq *e = &sink->q[sink->same ? 0 : 1];
        if (e->fd >= 0 && enqueue(e, note, (size_t)l) == 0)
            flush_one(sink, 1);
    }
    if (sink->lock_fd >= 0 && sink->held)
        flock(sink->lock_fd, LOCK_UN);
    sink->held = 0;
    for (int w = 0; w < 2; w++) {
        if (sink->q[w].own && sink->q[w].fd >= 0)
            close(sink->q[w].fd);
        free(sink->q[w].buf);
        memset(&sink->q[w], 0, sizeof sink->q[w]);
        sink->q[w].fd = -1;
    }
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
static void emit(p3d_rank_out *r, int which, p3d_outsink *sink, const char *b, size_t len)
{
    if (!len)
        return;
    if (r->log_fd >= 0)
        write_all(r->log_fd, b, len);
    if (r->file_fd[which] >= 0) /* torchrun's layout: this stream's own file, untagged */
        write_all(r->file_fd[which], b, len);
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
    if (!r->shown || r->quiet[which])
        return;
    int fd = which;
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
static void flush_lines(p3d_rank_out *r, int which, p3d_outsink *sink, int force)
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

int p3d_rank_out_read(p3d_rank_out *r, int which, p3d_outsink *sink)
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
        s->got += (size_t)n;
        flush_lines(r, which, sink, 0);
    }
    return 0;
}

void p3d_rank_out_drain(p3d_rank_out *r, p3d_outsink *sink)
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
    for (int w = 0; w < 2; w++) {
        if (r->file_fd[w] >= 0)
            close(r->file_fd[w]);
        r->file_fd[w] = -1;
    }
    for (int i = 0; i < P3D_TAIL_LINES; i++)
        P3D_FREE(&r->tail[i]);
    r->tail_count = r->tail_next = 0;
}

int p3d_check_output_ranks(const p3d_opts *o, int world, char **err)
{
    if (!o->output_ranks)
        return 0;
    /* the agents parse it again; any error must come before a start */
    unsigned char *sel = malloc((size_t)world + 1);
    int rc = sel ? p3d_rank_list_parse(o->output_ranks, world, sel, err) : p3d_err(err, "out of memory");
    free(sel);
    return rc < 0 ? -1 : 0;
}
