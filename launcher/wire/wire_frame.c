/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_frame.c — frames as they travel (wire.h): reading and writing whole
 * frames on a socket, blocking with a bound or through a framer fed from
 * the event loop. Their tags are the channel's (wire_chan.c).
 */
#include "wire.h"

#include "loop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- frames over fds ------------------------------------------------------- */

static int read_full(int fd, void *p, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        ssize_t k = read(fd, (char *)p + *got, n - *got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? -1 : 0;
        *got += (size_t)k;
    }
    return 1;
}

int p3d_frame_read(int fd, unsigned char **body, size_t *len, char **err)
{
    unsigned char h[5];
    size_t got;
    *body = NULL;
    *len = 0;
    int k = read_full(fd, h, 4, &got);
    if (k == 0 && got == 0)
        return 0;
    if (k <= 0)
        return p3d_err(err, "%s", k < 0 ? strerror(errno) : "connection closed mid-message");
    uint32_t n = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if (n < 1 || n > P3D_WIRE_MAX)
        return p3d_err(err, "bad frame length %u (expected 1..%u): not a par3drun peer?", n, P3D_WIRE_MAX);
    unsigned char *b = malloc(n);
    if (!b)
        return p3d_err(err, "out of memory");
    k = read_full(fd, b, n, &got);
    if (k <= 0) {
        free(b);
        return p3d_err(err, "%s", k < 0 ? strerror(errno) : "connection closed mid-message");
    }
    int type = b[0];
    memmove(b, b + 1, n - 1);
    *body = b;
    *len = n - 1;
    return type ? type : p3d_err(err, "frame of type 0");
}

int p3d_frame_write(int fd, const p3d_wbuf *b, char **err)
{
    size_t off = 0;
    while (off < b->len) {
        ssize_t w = send(fd, b->p + off, b->len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return p3d_err(err, "%s", strerror(errno));
        off += (size_t)w;
    }
    return 0;
}

int p3d_frame_write_bounded(int fd, const p3d_wbuf *b, double stall, char **err)
{
    size_t off = 0;
    double give_up = p3d_now() + stall;
    while (off < b->len) {
        ssize_t w = send(fd, b->p + off, b->len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w > 0) {
            off += (size_t)w;
            give_up = p3d_now() + stall; /* progress: the peer reads */
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return p3d_err(err, "%s", strerror(errno));
        double left = give_up - p3d_now();
        if (left <= 0)
            return p3d_err(err, "the peer took nothing for %g s (hung or overloaded): dropped", stall);
        if (p3d_wait_fd(fd, P3D_LOOP_OUT, give_up) < 0)
            return p3d_err(err, "%s", strerror(errno));
    }
    return 0;
}

int p3d_framer_fill(p3d_framer *f, int fd, char **err)
{
    for (;;) {
        if (f->cap - f->len < 65536) {
            size_t cap = f->cap ? f->cap * 2 : 131072;
            unsigned char *p = realloc(f->buf, cap);
            if (!p)
                return p3d_err(err, "out of memory");
            f->buf = p;
            f->cap = cap;
        }
        ssize_t k = read(fd, f->buf + f->len, f->cap - f->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k <= 0) {
            /* deliver what arrived before the EOF first; the next call
             * reports the EOF again */
            if (f->len >= 4) {
                uint32_t n =
                    (uint32_t)f->buf[0] << 24 | (uint32_t)f->buf[1] << 16 | (uint32_t)f->buf[2] << 8 | f->buf[3];
                if (n >= 1 && n <= P3D_WIRE_MAX && f->len >= 4 + (size_t)n)
                    return 1;
            }
            return p3d_err(err, "%s", k < 0 ? strerror(errno) : "closed");
        }
        f->len += (size_t)k;
        if (f->len >= 4) {
            uint32_t n = (uint32_t)f->buf[0] << 24 | (uint32_t)f->buf[1] << 16 | (uint32_t)f->buf[2] << 8 | f->buf[3];
            if (n < 1 || n > P3D_WIRE_MAX)
                return p3d_err(err, "bad frame length %u: not a par3drun peer?", n);
            if (f->len >= 4 + (size_t)n)
                break;
        }
    }
    if (f->len >= 4) {
        uint32_t n = (uint32_t)f->buf[0] << 24 | (uint32_t)f->buf[1] << 16 | (uint32_t)f->buf[2] << 8 | f->buf[3];
        if (n < 1 || n > P3D_WIRE_MAX)
            return p3d_err(err, "bad frame length %u: not a par3drun peer?", n);
        return f->len >= 4 + (size_t)n;
    }
    return 0;
}

int p3d_framer_take(p3d_framer *f, unsigned char **body, size_t *len)
{
    if (f->len < 4)
        return 0;
    uint32_t n = (uint32_t)f->buf[0] << 24 | (uint32_t)f->buf[1] << 16 | (uint32_t)f->buf[2] << 8 | f->buf[3];
    if (n < 1 || n > P3D_WIRE_MAX || f->len < 4 + (size_t)n)
        return 0;
    unsigned char *b = malloc(n);
    if (!b)
        return 0;
    int type = f->buf[4];
    memcpy(b, f->buf + P3D_FRAME_HDR, n - 1);
    memmove(f->buf, f->buf + 4 + n, f->len - 4 - n);
    f->len -= 4 + n;
    f->first_max = 0; /* the first frame is out: the peer's later frames are its joined ones */
    if (!type) {      /* a type-0 frame is dropped */
        free(b);
        return 0;
    }
    *body = b;
    *len = n - 1;
    return type;
}

void p3d_framer_free(p3d_framer *f)
{
    free(f->buf);
    memset(f, 0, sizeof *f);
}

void p3d_framer_first_max(p3d_framer *f, uint32_t max)
{
    f->first_max = max;
}

size_t p3d_framer_want(const p3d_framer *f, size_t room)
{
    if (room < 1)
        room = 1;
    if (f->first_max && f->len < 4)
        return 4 - f->len < room ? 4 - f->len : room;
    return room;
}

int p3d_framer_feed(p3d_framer *f, const unsigned char *p, size_t n, char **err)
{
    /* the length prefix is judged from the bytes buffered and the new ones
     * before any of them is kept */
    if (f->len < 4 && f->len + n >= 4) {
        unsigned char h[4];
        if (f->len)
            memcpy(h, f->buf, f->len);
        memcpy(h + f->len, p, 4 - f->len);
        uint32_t k = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
        if (k < 1 || k > P3D_WIRE_MAX)
            return p3d_err(err, "bad frame length %u: not a par3drun peer?", k);
        if (f->first_max && k > f->first_max) {
            p3d_err(err, "its first frame is over %u bytes (%u announced)", f->first_max, k);
            return -2;
        }
    }
    if (n > f->cap - f->len) {
        size_t cap = f->cap ? f->cap : 256;
        while (cap - f->len < n) {
            if (cap > SIZE_MAX / 2)
                return p3d_err(err, "out of memory");
            cap *= 2;
        }
        unsigned char *b = realloc(f->buf, cap);
        if (!b)
            return p3d_err(err, "out of memory");
        f->buf = b;
        f->cap = cap;
    }
    if (n)
        memcpy(f->buf + f->len, p, n);
    f->len += n;
    if (f->len < 4)
        return 0;
    /* the frame at the head: the one judged above, or the next one after
     * a take (its length came with an earlier piece) */
    uint32_t k = (uint32_t)f->buf[0] << 24 | (uint32_t)f->buf[1] << 16 | (uint32_t)f->buf[2] << 8 | f->buf[3];
    if (k < 1 || k > P3D_WIRE_MAX)
        return p3d_err(err, "bad frame length %u: not a par3drun peer?", k);
    return f->len >= 4 + (size_t)k;
}
