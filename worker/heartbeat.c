/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heartbeat.c — the worker's progress line for par3drun (docs/launch.md,
 * "Progress and slow nodes"): after each step, "step=N busy=SECONDS[
 * ckpt=STEP]" replaces the content of $P3D_HEARTBEAT, written to a
 * temporary file and renamed over it so that the launcher never reads
 * half a line.
 */
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void p3dw_heartbeat(int step, double busy, int ckpt)
{
    static int failed;
    const char *path = getenv("P3D_HEARTBEAT");
    if (!path || !*path || failed)
        return;
    char tmp[PATH_MAX], line[96];
    int n = ckpt >= 0 ? snprintf(line, sizeof line, "step=%d busy=%.6f ckpt=%d\n", step, busy < 0 ? 0 : busy, ckpt)
                      : snprintf(line, sizeof line, "step=%d busy=%.6f\n", step, busy < 0 ? 0 : busy);
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    int ok = fd >= 0 && write(fd, line, (size_t)n) == n;
    if (fd >= 0)
        close(fd);
    if (!ok || rename(tmp, path) < 0) {
        /* once: the job runs on without progress lines */
        fprintf(stderr, "p3d-worker: cannot write the progress line to %s: %s (no more tried)\n", path,
                strerror(errno));
        failed = 1;
    }
}
