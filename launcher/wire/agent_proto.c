/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent_proto.c — encoding and decoding of the agent <-> controller
 * messages (wire.h, "the agent protocol", has the table).
 */
#include "wire.h"
#include "termsafe.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Which fields a type carries, in wire order, with their valid ranges. */
enum {
    F_GEN,
    F_CODE,
    F_RANK,
    F_SIG,
    F_NRANKS,
    F_SEQ,
    F_OK,
    F_MS,
    F_STEP,
    F_BUSY,
    F_CKPT,
    F_FSTEP,
    F_ELINE,
    F_ETS,
    F_N
};

typedef struct field_def {
    size_t off;
    long lo, hi;
} field_def;

static const field_def FIELDS[F_N] = {
    [F_GEN] = {offsetof(p3d_amsg, gen), 0, INT_MAX},
    [F_CODE] = {offsetof(p3d_amsg, code), 0, 255},
    [F_RANK] = {offsetof(p3d_amsg, rank), -1, INT_MAX},
    [F_SIG] = {offsetof(p3d_amsg, sig), 0, 64},
    [F_NRANKS] = {offsetof(p3d_amsg, nranks), 0, INT_MAX},
    [F_SEQ] = {offsetof(p3d_amsg, seq), 0, INT_MAX},
    [F_OK] = {offsetof(p3d_amsg, ok), 0, 1},
    [F_MS] = {offsetof(p3d_amsg, ms), 0, INT_MAX},
    [F_STEP] = {offsetof(p3d_amsg, step), 0, INT_MAX},
    [F_BUSY] = {offsetof(p3d_amsg, busy_us), 0, INT_MAX},
    [F_CKPT] = {offsetof(p3d_amsg, ckpt), -1, INT_MAX},
    [F_FSTEP] = {offsetof(p3d_amsg, step), -1, INT_MAX},
    [F_ELINE] = {offsetof(p3d_amsg, errline), 0, INT_MAX},
    [F_ETS] = {offsetof(p3d_amsg, errts), -1, INT_MAX},
};

/* What follows a type's header line: nothing, free text, or (F) the
 * error line and the frame line, then free text. */
enum { TEXT_NONE, TEXT_FREE, TEXT_CAUSE };

typedef struct type_def {
    int type;
    int nf;
    int f[7];
    int text;
} type_def;

static const type_def TYPES[] = {
    {P3D_AM_FAIL, 7, {F_GEN, F_CODE, F_RANK, F_SIG, F_FSTEP, F_ELINE, F_ETS}, TEXT_CAUSE},
    {P3D_AM_DONE, 1, {F_GEN}, 0},
    {P3D_AM_UP, 2, {F_GEN, F_NRANKS}, 0},
    {P3D_AM_SIGNAL, 1, {F_SIG}, 0},
    {P3D_AM_RESTART, 1, {F_GEN}, 0},
    {P3D_AM_STOP, 2, {F_SIG, F_CODE}, 0},
    {P3D_AM_FORWARD, 1, {F_SIG}, 0},
    {P3D_AM_RETIRE, 0, {0}, 0},
    {P3D_AM_RETIRED, 0, {0}, 0},
    {P3D_AM_CHECK, 1, {F_SEQ}, 0},
    {P3D_AM_HEALTH, 2, {F_SEQ, F_OK}, TEXT_FREE},
    {P3D_AM_BEAT, 1, {F_MS}, 0},
    {P3D_AM_PROGRESS, 5, {F_GEN, F_STEP, F_BUSY, F_CKPT, F_NRANKS}, 0},
    {P3D_AM_RESUMED, 1, {F_GEN}, 0},
};

static const type_def *type_of(int t)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].type == t)
            return &TYPES[i];
    return NULL;
}

size_t p3d_amsg_line(const char *s)
{
    return s ? strcspn(s, "\n") : 0;
}

double p3d_beat_interval(double timeout)
{
    if (timeout <= 0)
        return 0;
    double i = timeout / 4 < 5.0 ? timeout / 4 : 5.0;
    return i < 0.05 ? 0.05 : i;
}

/* s up to its first newline, at most max bytes, then a newline, at
 * buf + *n; cut to what cap leaves (the encoder's minimum cap left
 * room for the newline). */
static void put_line(char *buf, size_t cap, size_t *n, const char *s, size_t max)
{
    size_t l = p3d_amsg_line(s);
    if (l > max)
        l = max;
    if (l > cap - *n - 2)
        l = cap - *n - 2;
    memcpy(buf + *n, s ? s : "", l);
    *n += l;
    buf[(*n)++] = '\n';
}

/* F's error or frame line at *p (TEXT_CAUSE): *out points at it, ended
 * by its newline (the packet is left as it came: a relay forwards those
 * very bytes); 0, or -1. */
static int take_line(char **p, const char **out, size_t max)
{
    char *nl = strchr(*p, '\n');
    if (!nl || (size_t)(nl - *p) > max)
        return -1;
    *out = *p;
    *p = nl + 1;
    return 0;
}

int p3d_amsg_encode(const p3d_amsg *m, char *buf, size_t cap)
{
    const type_def *t = type_of(m->type);
    /* the longest header: the letter, 12 bytes a field, its newline, F's
     * two line ends, the NUL */
    size_t need = 1 + 12 * (size_t)(t ? t->nf : 0) + 1 + 2 + 1;
    if (!t || cap < (need > 64 ? need : 64))
        return -1;
    size_t n = (size_t)snprintf(buf, cap, "%c", m->type);
    for (int i = 0; i < t->nf; i++) {
        int v;
        memcpy(&v, (const char *)m + FIELDS[t->f[i]].off, sizeof v);
        n += (size_t)snprintf(buf + n, cap - n, " %d", v);
    }
    buf[n++] = '\n';
    if (t->text == TEXT_CAUSE) {
        put_line(buf, cap, &n, m->err, P3D_AMSG_ERR_MAX);
        put_line(buf, cap, &n, m->where, P3D_AMSG_WHERE_MAX);
    }
    if (t->text && m->text) {
        size_t l = strlen(m->text);
        if (l > cap - n - 1)
            l = cap - n - 1;
        memcpy(buf + n, m->text, l);
        n += l;
    }
    buf[n] = 0;
    return (int)n;
}

int p3d_amsg_decode_why(char *pkt, size_t len, p3d_amsg *m, const char **why)
{
    static const char *const fname[F_N] = {"gen", "code", "rank", "sig",  "nranks", "seq",     "ok",
                                           "ms",  "step", "busy", "ckpt", "step",   "errline", "errtime"};
    static _Thread_local char buf[96];
    const char *w = buf;
    memset(m, 0, sizeof *m);
    pkt[len] = 0;
    int rc = -1;
    if (len < 1) {
        w = "an empty packet";
        goto out;
    }
    if (strlen(pkt) != len) {
        w = "a NUL byte inside the packet";
        goto out;
    }
    const type_def *t = type_of((unsigned char)pkt[0]);
    if (!t) {
        snprintf(buf, sizeof buf, "unknown packet type 0x%02x", (unsigned char)pkt[0]);
        goto out;
    }
    m->type = t->type;
    char *p = pkt + 1;
    for (int i = 0; i < t->nf; i++) {
        const field_def *f = &FIELDS[t->f[i]];
        char *end = p + 1;
        long v = 0;
        errno = 0;
        if (*p == ' ' && (p[1] == '-' || (p[1] >= '0' && p[1] <= '9')))
            v = strtol(p + 1, &end, 10);
        if (*p != ' ' || end == p + 1 || errno || v < f->lo || v > f->hi) {
            snprintf(buf, sizeof buf, "packet '%c': field %s missing or not an integer in %ld..%ld", t->type,
                     fname[t->f[i]], f->lo, f->hi);
            goto out;
        }
        int iv = (int)v;
        memcpy((char *)m + f->off, &iv, sizeof iv);
        p = end;
    }
    /* the header ends with a newline (or the packet does) */
    if (*p == '\n') {
        p++;
    } else if (*p) {
        snprintf(buf, sizeof buf, "packet '%c': bytes after its %d field%s", t->type, t->nf, t->nf == 1 ? "" : "s");
        goto out;
    }
    if (*p && !t->text) {
        snprintf(buf, sizeof buf, "packet '%c' carries no text, but text follows", t->type);
        goto out;
    }
    if (t->text == TEXT_CAUSE &&
        (take_line(&p, &m->err, P3D_AMSG_ERR_MAX) < 0 || take_line(&p, &m->where, P3D_AMSG_WHERE_MAX) < 0)) {
        snprintf(buf, sizeof buf, "packet '%c': its error line or frame line is missing or too long", t->type);
        goto out;
    }
    m->text = p;
    rc = 0;
out:
    if (why)
        *why = rc ? w : NULL;
    return rc;
}

int p3d_amsg_decode(char *pkt, size_t len, p3d_amsg *m)
{
    return p3d_amsg_decode_why(pkt, len, m, NULL);
}

int p3d_amsg_dir_ok(int type, int down)
{
    switch (type) {
    case P3D_AM_RESTART:
    case P3D_AM_STOP:
    case P3D_AM_FORWARD:
    case P3D_AM_RETIRE:
    case P3D_AM_CHECK: return down;
    case P3D_AM_FAIL:
    case P3D_AM_DONE:
    case P3D_AM_UP:
    case P3D_AM_SIGNAL:
    case P3D_AM_RETIRED:
    case P3D_AM_PROGRESS:
    case P3D_AM_RESUMED:
    case P3D_AM_HEALTH: return !down;
    case P3D_AM_BEAT: return 1;
    default: return 0;
    }
}

/* The rate limit of p3d_fate_complain: a burst per window, per process. */
#define COMPLAIN_BURST 5
#define COMPLAIN_WINDOW 10.0

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void p3d_fate_complain(const char *peer, const char *outcome, const char *fmt, ...)
{
    static double window;
    static int said;
    static unsigned long held;
    double now = mono_now();
    if (now - window >= COMPLAIN_WINDOW) {
        window = now;
        said = 0;
    }
    if (said >= COMPLAIN_BURST) {
        held++;
        return;
    }
    said++;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char more[96] = "";
    if (held)
        snprintf(more, sizeof more, " (%lu more such line%s held back)", held, held == 1 ? "" : "s");
    held = 0;
    /* peer and what quote the wire: escaped; the rest is ours */
    fprintf(stderr, "par3drun: %s: %s: %s%s\n", p3d_tesc(peer), p3d_tesc(what), outcome, more);
}

void p3d_amsg_send(int fd, const p3d_amsg *m)
{
    if (fd < 0)
        return;
    char *buf = malloc(P3D_AMSG_MAX);
    if (!buf)
        return;
    int n = p3d_amsg_encode(m, buf, P3D_AMSG_MAX);
    if (n > 0)
        while (send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR)
            ;
    free(buf);
}

long p3d_amsg_recv(int fd, char *buf, size_t cap)
{
    for (;;) {
        ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return n <= 0 ? -1 : (long)n;
    }
}
