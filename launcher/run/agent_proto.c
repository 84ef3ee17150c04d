/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent_proto.c — encoding and decoding of the agent <-> controller
 * messages (agent_proto.h has the table).
 */
#include "agent_proto.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Which fields a type carries, in wire order, with their valid ranges. */
enum { F_GEN, F_CODE, F_RANK, F_SIG, F_NRANKS, F_SEQ, F_OK, F_MS, F_STEP, F_BUSY, F_CKPT, F_N };

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
};

typedef struct type_def {
    int type;
    int nf;
    int f[5];
    int text;
} type_def;

static const type_def TYPES[] = {
    {P3D_AM_FAIL, 4, {F_GEN, F_CODE, F_RANK, F_SIG}, 1},
    {P3D_AM_DONE, 1, {F_GEN}, 0},
    {P3D_AM_UP, 2, {F_GEN, F_NRANKS}, 0},
    {P3D_AM_SIGNAL, 1, {F_SIG}, 0},
    {P3D_AM_RESTART, 1, {F_GEN}, 0},
    {P3D_AM_STOP, 2, {F_SIG, F_CODE}, 0},
    {P3D_AM_FORWARD, 1, {F_SIG}, 0},
    {P3D_AM_RETIRE, 0, {0}, 0},
    {P3D_AM_RETIRED, 0, {0}, 0},
    {P3D_AM_CHECK, 1, {F_SEQ}, 0},
    {P3D_AM_HEALTH, 2, {F_SEQ, F_OK}, 1},
    {P3D_AM_BEAT, 1, {F_MS}, 0},
    {P3D_AM_PROGRESS, 5, {F_GEN, F_STEP, F_BUSY, F_CKPT, F_NRANKS}, 0},
};

static const type_def *type_of(int t)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].type == t)
            return &TYPES[i];
    return NULL;
}

double p3d_beat_interval(double timeout)
{
    if (timeout <= 0)
        return 0;
    double i = timeout / 4 < 5.0 ? timeout / 4 : 5.0;
    return i < 0.05 ? 0.05 : i;
}

int p3d_amsg_encode(const p3d_amsg *m, char *buf, size_t cap)
{
    const type_def *t = type_of(m->type);
    if (!t || cap < 64)
        return -1;
    size_t n = (size_t)snprintf(buf, cap, "%c", m->type);
    for (int i = 0; i < t->nf; i++) {
        int v;
        memcpy(&v, (const char *)m + FIELDS[t->f[i]].off, sizeof v);
        n += (size_t)snprintf(buf + n, cap - n, " %d", v);
    }
    buf[n++] = '\n';
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

int p3d_amsg_decode(char *pkt, size_t len, p3d_amsg *m)
{
    memset(m, 0, sizeof *m);
    pkt[len] = 0;
    if (len < 1 || strlen(pkt) != len)
        return -1;
    const type_def *t = type_of((unsigned char)pkt[0]);
    if (!t)
        return -1;
    m->type = t->type;
    char *p = pkt + 1;
    for (int i = 0; i < t->nf; i++) {
        if (*p != ' ')
            return -1;
        p++;
        if (!(*p == '-' || (*p >= '0' && *p <= '9')))
            return -1;
        errno = 0;
        char *end;
        long v = strtol(p, &end, 10);
        const field_def *f = &FIELDS[t->f[i]];
        if (end == p || errno || v < f->lo || v > f->hi)
            return -1;
        int iv = (int)v;
        memcpy((char *)m + f->off, &iv, sizeof iv);
        p = end;
    }
    /* the header ends with a newline (or the packet does) */
    if (*p == '\n')
        p++;
    else if (*p)
        return -1;
    if (*p && !t->text)
        return -1;
    m->text = p;
    return 0;
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
