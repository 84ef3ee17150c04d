/* SPDX-License-Identifier: BSD-3-Clause */
/* read_file.c — the one way placement reads an input file whole: regular
 * files only (a FIFO or a device fails at once instead of blocking), a size
 * cap checked before reading, NUL-terminated. */
#include "read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int p3d_read_small_file(const char *path, const char *what, size_t cap, char **buf, size_t *len, char **err)
{
    int rc = -1, fd = -1;
    char *b = NULL;
    struct stat st;
    *buf = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO (or a device) must fail the S_ISREG check below,
     * not block in open() waiting for a writer */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        p3d_err(err, "%s: cannot open %s: %s", path, what, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        p3d_err(err, "%s: not a regular file (expected a %s)", path, what);
        goto out;
    }
    if ((size_t)st.st_size > cap) {
        p3d_err(err,
                "%s: %s is %.0f MiB; the limit is %zu MiB (is this the "
                "right file?)",
                path, what, (double)st.st_size / 1048576.0, cap >> 20);
        goto out;
    }
    size_t want = (size_t)st.st_size, got = 0;
    if (!(b = malloc(want + 1))) {
        p3d_err(err, "%s: out of memory reading %zu bytes", path, want);
        goto out;
    }
    while (got < want) {
        ssize_t r = read(fd, b + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            p3d_err(err, "%s: read error: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break; /* shrank while reading: take what is there */
        got += (size_t)r;
    }
    b[got] = 0;
    *buf = b;
    *len = got;
    b = NULL;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    free(b);
    return rc;
}
