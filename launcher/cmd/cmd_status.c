/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_status.c — `par3drun status RUN_DIR`: a job's nodes, generation,
 * spares, width (an elastic job's current, full and minimum dp), steps and
 * slowest nodes, as its controller last wrote them to
 * RUN_DIR/status.txt (supervise.c, once a --progress-interval).
 */
#include "commands.h"
#include "termsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The view is small (20 nodes and a few lines); anything larger is not ours. */
#define STATUS_MAX (1u << 20)

int p3d_cmd_status(const p3d_opts *o)
{
    char path[4096], *buf = NULL, *shown = NULL, *err = NULL;
    struct stat st;
    int fd = -1, rc;
    int sr = stat(o->status_dir, &st);
    if (sr < 0 || !S_ISDIR(st.st_mode)) {
        p3d_err(&err, "status: %s: %s; expected a job's run directory (--run-dir)", o->status_dir,
                sr < 0 ? strerror(errno) : "not a directory");
        goto bad;
    }
    snprintf(path, sizeof path, "%s/status.txt", o->status_dir);
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        p3d_err(&err,
                "status: %s: %s; the job writes it once its ranks report progress (P3D_HEARTBEAT lines, "
                "docs/launch.md \"When a node is slow\"), every --progress-interval",
                path, strerror(errno));
        goto bad;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > STATUS_MAX) {
        p3d_err(&err, "status: %s: expected a regular file of at most %u bytes written by par3drun", path, STATUS_MAX);
        goto bad;
    }
    buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
    if (n < 0) {
        p3d_err(&err, "status: %s: %s", path, buf ? strerror(errno) : "out of memory");
        goto bad;
    }
    /* any rank can write into the run directory: its text is shown as
     * every other outside text is (termsafe.h), lines and tabs kept */
    shown = p3d_term_dup(buf, (size_t)n, STATUS_MAX, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB);
    if (!shown) {
        p3d_err(&err, "status: %s: out of memory", path);
        goto bad;
    }
    double age = difftime(time(NULL), st.st_mtime);
    printf("par3drun status: %s (written %.0f s ago)\n", p3d_tesc(o->status_dir), age < 0 ? 0 : age);
    fputs(shown, stdout);
    rc = P3D_EXIT_OK;
    goto out;
bad:
    rc = p3d_fail_input(err);
    err = NULL;
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    free(shown);
    free(err);
    return rc;
}
