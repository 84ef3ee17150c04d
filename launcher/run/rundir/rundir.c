/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rundir.c — the directories par3drun writes into, made so that no other
 * local user can redirect a write (docs/limits.md, "Run directory" and
 * "Log directory").
 *
 * Run directory: created 0700, or an existing one accepted only when it is
 * a real directory (not a symlink) of ours with no group/other bits. Every
 * file in it is then created through a descriptor of that directory, opened
 * with O_NOFOLLOW and checked again with fstat (owner, mode): a directory
 * swapped under the same name after the check (its parent may be writable
 * by others) is refused rather than written into; the files themselves are
 * created with O_EXCL | O_NOFOLLOW under a temporary name and renamed
 * within the same directory descriptor.
 *
 * Log directory (--log-dir): may be shared (a project directory, /tmp), so
 * its owner must be us or root, and a directory that others may write is
 * accepted only with the sticky bit (then nobody else can rename or delete
 * our files). A rank-N.log is opened with O_NOFOLLOW | O_NONBLOCK (a planted
 * FIFO cannot block us) and not truncated before fstat says it is a regular
 * file of ours with one link (a planted hard link to another file is not
 * written through).
 */
#include "rundir.h"
#include "p3d/base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>


/* The run directory's rule on an fstat/lstat result; what names the path
 * in messages is `opt` ("--run-dir"). */
static int check_private(const char *path, const struct stat *st, char **err)
{
    if (S_ISLNK(st->st_mode))
        return p3d_err(err,
                       "--run-dir %s: is a symbolic link; refusing it (another user may have planted it: "
                       "remove it, or choose another --run-dir)",
                       path);
    if (!S_ISDIR(st->st_mode))
        return p3d_err(err, "--run-dir %s: exists and is not a directory", path);
    if (st->st_uid != geteuid())
        return p3d_err(err,
                       "--run-dir %s: belongs to uid %u, not to you (uid %u); refusing it (another user may "
                       "have created it to swap files in it: remove it, or choose another --run-dir)",
                       path, (unsigned)st->st_uid, (unsigned)geteuid());
    if (st->st_mode & 077)
        return p3d_err(err,
                       "--run-dir %s: has mode %04o, expected 0700 (others could add or replace files in "
                       "it); chmod 700 it or choose another --run-dir",
                       path, (unsigned)(st->st_mode & 07777));
    return 0;
}

int p3d_rundir_make(const char *path, char **err)
{
    struct stat st;
    char *slash = strrchr(path, '/');
    if (slash && slash != path) { /* parents as before; the last part is checked */
        char *parent = strndup(path, (size_t)(slash - path));
        if (!parent)
            return p3d_err(err, "out of memory");
        int r = p3d_mkdir_p(parent, 0700);
        int e = errno;
        free(parent);
        if (r < 0)
            return p3d_err(err, "--run-dir %s: cannot create its parent: %s", path, strerror(e));
    }
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return p3d_err(err, "--run-dir %s: cannot create it: %s", path, strerror(errno));
    if (lstat(path, &st) < 0)
        return p3d_err(err, "--run-dir %s: %s", path, strerror(errno));
    if (check_private(path, &st, err) < 0)
        return -1;
    /* the same rule on what a descriptor reaches: what later writes use */
    int dfd = p3d_rundir_open(path, err);
    if (dfd < 0)
        return -1;
    close(dfd);
    return 0;
}

int p3d_rundir_open(const char *path, char **err)
{
    struct stat st;
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        int e = errno;
        if ((e == ELOOP || e == ENOTDIR) && lstat(path, &st) == 0)
            return check_private(path, &st, err); /* names the symlink or the file */
        return p3d_err(err, "--run-dir %s: %s", path, strerror(e));
    }
    if (fstat(dfd, &st) < 0) {
        p3d_err(err, "--run-dir %s: %s", path, strerror(errno));
        close(dfd);
        return -1;
    }
    if (check_private(path, &st, err) < 0) {
        close(dfd);
        return -1;
    }
    return dfd;
}

/* A name for a file directly inside a directory: no '/', not "." or "..". */
static int plain_name(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int p3d_rundir_write(const char *dir, const char *name, const void *p, size_t n, char **err)
{
    if (!plain_name(name))
        return p3d_err(err, "--run-dir %s: '%s' is not a plain file name", dir, name ? name : "");
    int dfd = p3d_rundir_open(dir, err);
    if (dfd < 0)
        return -1;
    /* unpredictable, created exclusively: a name nobody could plant */
    unsigned char r[8];
    char tmp[NAME_MAX + 1];
    int fd = -1, rc = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            memset(r, tries, sizeof r);
        if (snprintf(tmp, sizeof tmp, ".%.200s.%d.%02x%02x%02x%02x%02x%02x%02x%02x.tmp", name, (int)getpid(), r[0],
                     r[1], r[2], r[3], r[4], r[5], r[6], r[7]) >= (int)sizeof tmp) {
            p3d_err(err, "--run-dir %s: file name '%s' is too long", dir, name);
            goto out;
        }
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            p3d_err(err, "cannot write %s/%s: %s", dir, tmp, strerror(errno));
            goto out;
        }
    }
    if (fd < 0) {
        p3d_err(err, "cannot write %s/%s: %s", dir, tmp, strerror(EEXIST));
        goto out;
    }
    if (write_all(fd, p, n) < 0) {
        p3d_err(err, "cannot write %s/%s: %s", dir, tmp, strerror(errno));
        close(fd);
        unlinkat(dfd, tmp, 0);
        goto out;
    }
    close(fd);
    /* rename within the directory we checked: a worker never reads a
     * half-written file, and the name cannot lead anywhere else */
    if (renameat(dfd, tmp, dfd, name) < 0) {
        p3d_err(err, "cannot rename %s/%s to %s: %s", dir, tmp, name, strerror(errno));
        unlinkat(dfd, tmp, 0);
        goto out;
    }
    rc = 0;
out:
    close(dfd);
    return rc;
}

int p3d_rundir_openat(const char *dir, const char *name, int flags, mode_t mode)
{
    if (!plain_name(name)) {
        errno = EINVAL;
        return -1;
    }
    char *err = NULL;
    int dfd = p3d_rundir_open(dir, &err);
    free(err);
    if (dfd < 0) {
        errno = EPERM;
        return -1;
    }
    int fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    int e = errno;
    close(dfd);
    errno = e;
    return fd;
}

/* --log-dir's rule on the directory a descriptor reaches. */
static int check_log_dir(const char *dir, const struct stat *st, char **err)
{
    if (!S_ISDIR(st->st_mode))
        return p3d_err(err, "--log-dir %s: exists and is not a directory", dir);
    if (st->st_uid != geteuid() && st->st_uid != 0)
        return p3d_err(err,
                       "--log-dir %s: belongs to uid %u, not to you (uid %u) or root; refusing it (its owner "
                       "could replace the log files): choose a directory of yours",
                       dir, (unsigned)st->st_uid, (unsigned)geteuid());
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX))
        return p3d_err(err,
                       "--log-dir %s: has mode %04o: anyone may write it and it has no sticky bit, so "
                       "others could rename or replace the log files; chmod o-w or +t it, or choose "
                       "another --log-dir",
                       dir, (unsigned)(st->st_mode & 07777));
    return 0;
}

int p3d_logdir_open(const char *dir, char **err)
{
    struct stat st;
    if (p3d_mkdir_p(dir, 0755) < 0)
        return p3d_err(err, "--log-dir %s: cannot create it: %s", dir, strerror(errno));
    /* a symlink the user gave (~/logs -> /scratch/...) is followed: the
     * rules apply to the directory it reaches */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOTDIR)
            return p3d_err(err, "--log-dir %s: exists and is not a directory", dir);
        return p3d_err(err, "--log-dir %s: %s", dir, strerror(errno));
    }
    if (fstat(dfd, &st) < 0) {
        p3d_err(err, "--log-dir %s: %s", dir, strerror(errno));
        close(dfd);
        return -1;
    }
    if (check_log_dir(dir, &st, err) < 0) {
        close(dfd);
        return -1;
    }
    return dfd;
}

/* Why an existing log file may not be written, or NULL. */
static const char *log_file_problem(const struct stat *st)
{
    if (S_ISLNK(st->st_mode))
        return "is a symbolic link";
    if (!S_ISREG(st->st_mode))
        return "is not a regular file";
    if (st->st_uid != geteuid())
        return "belongs to another user";
    if (st->st_nlink != 1)
        return "has other hard links (it may be another file's second name)";
    return NULL;
}

/* The names par3drun and the bundled worker write in --log-dir. */
static int ours(const char *name)
{
    size_t n = strlen(name);
    return (!strncmp(name, "rank-", 5) && n > 9 && !strcmp(name + n - 4, ".log")) ||
           (!strncmp(name, "worker-", 7) && n > 12 && !strcmp(name + n - 5, ".json"));
}

/* Before anything starts: a file planted under one of our names is an
 * error naming it (exit 2), not a failure of the ranks later. */
static int scan_log_dir(int dfd, const char *dir, char **err)
{
    int d2 = dup(dfd);
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    if (!d) {
        if (d2 >= 0)
            close(d2);
        return p3d_err(err, "--log-dir %s: cannot list it: %s", dir, strerror(errno));
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        struct stat st;
        if (!ours(e->d_name) || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        const char *why = log_file_problem(&st);
        if (why)
            rc = p3d_err(err, "--log-dir %s: %s %s; refusing to write it (remove it)", dir, e->d_name, why);
    }
    closedir(d);
    return rc;
}

int p3d_logfile_open(int dfd, const char *dir, const char *name, char **err)
{
    struct stat st;
    if (!plain_name(name))
        return p3d_err(err, "--log-dir %s: '%s' is not a plain file name", dir, name ? name : "");
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == ELOOP)
            return p3d_err(err, "--log-dir %s: %s is a symbolic link; refusing to write through it (remove it)", dir,
                           name);
        if (errno == ENXIO) /* a FIFO nobody reads */
            return p3d_err(err, "--log-dir %s: %s is not a regular file; refusing it (remove it)", dir, name);
        return p3d_err(err, "--log-dir: cannot create %s/%s: %s", dir, name, strerror(errno));
    }
    const char *why = fstat(fd, &st) < 0 ? strerror(errno) : log_file_problem(&st);
    if (why) {
        p3d_err(err, "--log-dir %s: %s %s; refusing to write it (remove it)", dir, name, why);
        close(fd);
        return -1;
    }
    /* checked: now it may be emptied, and writes may wait */
    if (ftruncate(fd, 0) < 0 || fcntl(fd, F_SETFL, O_APPEND) < 0) {
        p3d_err(err, "--log-dir: cannot write %s/%s: %s", dir, name, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int p3d_check_log_dir(const char *dir, char **err)
{
    int dfd = p3d_logdir_open(dir, err);
    if (dfd < 0)
        return -1;
    /* files can be created there: access() says yes to root on a
     * read-only file system, so make (and remove) one */
    unsigned char r[8];
    char probe[64];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        memset(r, 0x5a, sizeof r);
    snprintf(probe, sizeof probe, ".par3drun-probe-%d-%02x%02x%02x%02x%02x%02x", (int)getpid(), r[0], r[1], r[2], r[3],
             r[4], r[5]);
    int fd = openat(dfd, probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        p3d_err(err, "--log-dir %s: cannot create files in it: %s", dir, strerror(errno));
        close(dfd);
        return -1;
    }
    close(fd);
    unlinkat(dfd, probe, 0);
    int rc = scan_log_dir(dfd, dir, err);
    close(dfd);
    return rc;
}

int p3d_rundir_kept(int own, int code)
{
    return !own || code != 0;
}

int p3d_rundir_finish(const char *dir, int own, int code, int world, int nkept)
{
    if (!dir || p3d_rundir_kept(own, code))
        return 0;
    static const char *const names[] = {"placement.json", "output.lock", "events.jsonl", "result.json"};
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    for (int k = 0; k < nkept; k++) {
        snprintf(p, sizeof p, "%s/placement.%d.json", dir, k);
        unlink(p);
    }
    for (int r = 0; r < world; r++) {
        snprintf(p, sizeof p, "%s/heartbeat/rank-%d", dir, r);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/heartbeat", dir);
    rmdir(p);
    return rmdir(dir) == 0;
}
int p3d_mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int p3d_events_open(const char *run_dir)
{
    /* through the checked run directory: a planted symlink is not followed */
    return run_dir ? p3d_rundir_openat(run_dir, "events.jsonl", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600) : -1;
}
