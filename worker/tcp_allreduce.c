/* SPDX-License-Identifier: BSD-3-Clause */
/* tcp_allreduce.c - the CPU backend's ring all-reduce over TCP, and its
 * all-to-all (MoE token dispatch/combine over the EP group).
 *
 * All-reduce: a ring of n members, the buffer cut into n segments;
 * n-1 reduce-scatter steps (send one segment to the right while receiving
 * and summing another from the left) then n-1 all-gather steps.  Each
 * member sends and receives 2(n-1)/n of the buffer, the least a ring can.
 */
#include "tcp_internal.h"

#include <stdio.h>
#include <string.h>


static void add_f32(void *dst, const void *src, size_t n)
{
    float *d = dst;
    const float *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] += s[i];
}

static void add_f64(void *dst, const void *src, size_t n)
{
    double *d = dst;
    const double *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] += s[i];
}

/* Ring all-reduce (sum): n-1 reduce-scatter steps then n-1 all-gather
 * steps, segment i = [count*i/n, count*(i+1)/n).  Each step sends one
 * segment to the right while the segment from the left is received and
 * summed in place (tcp_exchange()): no temporary, no copy out of an inbox.
 * Each segment is summed once, in ring order (dst += incoming, the same
 * order whatever the chunking), then copied around: every member ends with
 * bitwise equal results, and the same ones on every run. */
int tcp_allreduce(tcp_comm *c, void *buf, size_t count, tcp_dtype t)
{
    int n = c->size;
    if (n == 1)
        return 0;
    size_t es = t == TCP_F32 ? sizeof(float) : sizeof(double);
    void (*add)(void *, const void *, size_t) = t == TCP_F32 ? add_f32 : add_f64;
    int right = c->members[(c->rank + 1) % n], left = c->members[(c->rank + n - 1) % n];
    char *b = buf;
#define SEG_OFF(i) (count * (size_t)(i) / (size_t)n)
#define SEG_LEN(i) (SEG_OFF((i) + 1) - SEG_OFF(i))
    for (int s = 0; s < n - 1; s++) {
        int sc = (c->rank - s + 2 * n) % n, rcv = (c->rank - s - 1 + 2 * n) % n;
        if (tcp_exchange(c->w, c->tag, right, b + SEG_OFF(sc) * es, SEG_LEN(sc) * es, left, b + SEG_OFF(rcv) * es,
                         SEG_LEN(rcv) * es, add, es))
            return -1;
    }
    for (int s = 0; s < n - 1; s++) {
        int sc = (c->rank + 1 - s + 2 * n) % n, rcv = (c->rank - s + 2 * n) % n;
        if (tcp_exchange(c->w, c->tag, right, b + SEG_OFF(sc) * es, SEG_LEN(sc) * es, left, b + SEG_OFF(rcv) * es,
                         SEG_LEN(rcv) * es, NULL, es))
            return -1;
    }
#undef SEG_OFF
#undef SEG_LEN
    return 0;
}


/* All-to-all: my own segment is copied; then n-1 steps, step s sending to
 * member rank+s while receiving from member rank-s (that member sends to
 * me in the same step), both directions progressing together. */
int tcp_alltoallv(tcp_comm *c, const void *sbuf, const size_t *sbytes, void *rbuf, const size_t *rbytes)
{
    int n = c->size, me = c->rank;
    size_t soff = 0, roff = 0;
    const char *sb = sbuf;
    char *rb = rbuf;
    for (int j = 0; j < me; j++) {
        soff += sbytes[j];
        roff += rbytes[j];
    }
    if (sbytes[me] != rbytes[me]) {
        fprintf(stderr,
                "p3d-worker: rank %d: internal error: all-to-all sends %zu bytes to "
                "itself but expects %zu\n",
                c->w->rank, sbytes[me], rbytes[me]);
        return -1;
    }
    if (sbytes[me])
        memcpy(rb + roff, sb + soff, sbytes[me]);
    for (int s = 1; s < n; s++) {
        int to = (me + s) % n, from = (me - s + n) % n;
        size_t so = 0, ro = 0;
        for (int j = 0; j < to; j++)
            so += sbytes[j];
        for (int j = 0; j < from; j++)
            ro += rbytes[j];
        if (tcp_exchange(c->w, c->tag, c->members[to], sb + so, sbytes[to], c->members[from], rb + ro, rbytes[from],
                         NULL, 1))
            return -1;
    }
    return 0;
}
