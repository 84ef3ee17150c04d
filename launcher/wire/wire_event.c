/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_event.c — the lines of RUN_DIR/events.jsonl (docs/events.md): one
 * JSON object per line for every start, failure, health check, replacement, restart and
 * the end, each with its time. Written by the job controller's side only
 * (one writer), appended line by line with one write() each, so that a
 * reader following the file never sees half a line.
 */
#include "wire.h"
#include "loop.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void p3d_json_str(char *buf, size_t cap, const char *s)
{
    size_t n = 0;
    if (cap < 3) {
        if (cap)
            buf[0] = 0;
        return;
    }
    buf[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && n + 8 < cap; p++) {
        if (*p == '"' || *p == '\\') {
            buf[n++] = '\\';
            buf[n++] = (char)*p;
        } else if (*p < 0x20) {
            n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", *p);
        } else {
            buf[n++] = (char)*p;
        }
    }
    buf[n++] = '"';
    buf[n] = 0;
}

void p3d_event(int fd, double t0, const char *fmt, ...)
{
    if (fd < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    char *body = p3d_vfmt(fmt, ap);
    va_end(ap);
    if (!body)
        return;
    int n = asprintf(&line, "{\"ts\": %lld.%03ld, \"t\": %.3f, %s}\n", (long long)ts.tv_sec, ts.tv_nsec / 1000000,
                     t0 > 0 ? p3d_now() - t0 : 0.0, body);
    free(body);
    if (n < 0)
        return;
    while (write(fd, line, (size_t)n) < 0 && errno == EINTR)
        ;
    free(line);
}
