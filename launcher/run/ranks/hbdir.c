/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hbdir.c — RUN_DIR/heartbeat as a directory descriptor (ranks.h). Every
 * rank may write into the directory, so a rank may also replace it with a
 * symbolic link to anywhere; paths built from its name would then lead
 * the agent to read and delete rank-N files in the link's target. The
 * directory is opened once, before any rank starts (O_DIRECTORY |
 * O_NOFOLLOW, our own), and every file in it is reached through that
 * descriptor with O_NOFOLLOW from then on.
 */
#include "ranks.h"
#include "rundir.h"
#include "p3d/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

int p3d_hbdir_open(const char *dir, char **err)
{
    struct stat st;
    if (p3d_mkdir_p(dir, 0700) < 0 && errno != EEXIST)
        return p3d_err(err, "cannot make the heartbeat directory %s: %s", dir, strerror(errno));
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return p3d_err(err, "the heartbeat directory %s: %s; expected a directory of this job (not a link)", dir,
                       strerror(errno));
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
        close(fd);
        return p3d_err(err, "the heartbeat directory %s is not yours (owner uid %u); expected this job's own", dir,
                       (unsigned)st.st_uid);
    }
    return fd;
}

int p3d_hbdir_watch(int ifd, int dfd, uint32_t mask)
{
    char self[64];
    /* the directory opened, whatever its path names by now */
    snprintf(self, sizeof self, "/proc/self/fd/%d", dfd);
    return inotify_add_watch(ifd, self, mask | IN_ONLYDIR);
}

void p3d_hbdir_unlink_rank(int dfd, int rank)
{
    char name[32];
    snprintf(name, sizeof name, "rank-%d", rank);
    if (dfd >= 0)
        unlinkat(dfd, name, 0);
}

void p3d_hbdir_remove(int dfd, const char *dir)
{
    struct stat a, b;
    /* only the directory opened: a link or another directory a rank put
     * in its place is not ours to remove */
    if (dfd >= 0 && fstat(dfd, &a) == 0 && lstat(dir, &b) == 0 && S_ISDIR(b.st_mode) && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        rmdir(dir);
}
