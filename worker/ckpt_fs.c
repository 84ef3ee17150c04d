/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_fs.c - the checkpoint directory on disk for ckpt.c: the completion
 * marker's text, opening files and step directories without following a
 * link or blocking on a FIFO, the private-directory rule, atomic writes,
 * listing and removing steps.  Why each is so: the comment at the top of
 * ckpt.c ("The directory is hostile input").
 */
#include "worker.h"
#include "ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const ck_marker_field[M_NMESH] = {"world_size", "tp", "pp", "dp", "ep", "etp", "edp"};

int ck_format_marker(const marker *m, char *out, size_t n)
{
    int k = snprintf(out, n, "p3d-worker checkpoint %u\nstep %ld\ngeneration %ld\njob %s\n", CK_VERSION, m->step,
                     m->gen, m->job);
    for (int i = 0; i < M_NMESH && k > 0 && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, "%s %ld\n", ck_marker_field[i], m->mesh[i]);
    return k > 0 && (size_t)k < n ? k : -1;
}

/* Plain decimal digits only (no sign, no space), at most 9 of them. */
int ck_parse_digits(const char *s, size_t len, long *out)
{
    long v = 0;
    if (len == 0 || len > 9)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Parses a marker's text (NUL-terminated, n bytes).  0, or -1 with *why. */
int ck_parse_marker(const char *text, size_t n, marker *m, const char **why)
{
    static const char head[] = "p3d-worker checkpoint 2\n";
    memset(m, 0, sizeof *m);
    if (strlen(text) != n || strncmp(text, head, sizeof head - 1) != 0) {
        *why = "it does not start with 'p3d-worker checkpoint 2' (another version or not ours)";
        return -1;
    }
    const char *keys[3 + M_NMESH] = {"step", "generation", "job"};
    long *val[3 + M_NMESH] = {&m->step, &m->gen, NULL};
    for (int i = 0; i < M_NMESH; i++) {
        keys[3 + i] = ck_marker_field[i];
        val[3 + i] = &m->mesh[i];
    }
    const char *p = text + sizeof head - 1;
    for (int i = 0; i < 3 + M_NMESH; i++) {
        size_t kl = strlen(keys[i]);
        const char *nl = strchr(p, '\n');
        if (!nl || strncmp(p, keys[i], kl) != 0 || p[kl] != ' ') {
            *why = "a line is missing or out of order";
            return -1;
        }
        const char *v = p + kl + 1;
        size_t vl = (size_t)(nl - v);
        if (!val[i]) {
            if (vl >= sizeof m->job) {
                *why = "its job id is too long";
                return -1;
            }
            memcpy(m->job, v, vl);
            m->job[vl] = 0;
        } else if (ck_parse_digits(v, vl, val[i])) {
            *why = "a number is not plain decimal digits";
            return -1;
        }
        p = nl + 1;
    }
    if (*p) {
        *why = "it has text after the last field";
        return -1;
    }
    return 0;
}

/* Opens a file in dfd for reading, never following a link and never
 * blocking on a FIFO or device: only a regular file is accepted.  Returns the
 * fd, or -1 with *why (static text or strerror). */
int ck_open_regular(int dfd, const char *name, const char **why)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        *why = errno == ELOOP ? "is a symbolic link (refused)" : strerror(errno);
        return -1;
    }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        *why = "is not a regular file (a FIFO, device or directory: refused)";
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    return fd;
}

/* The rule for the checkpoint directory and every step directory in it:
 * ours, and nobody else may write into it.  0, or -1 with the reason in
 * msg. */
int ck_check_private_dir(const struct stat *st, char *msg, size_t n)
{
    if (!S_ISDIR(st->st_mode)) {
        snprintf(msg, n, "is not a directory");
        return -1;
    }
    if (st->st_uid != geteuid()) {
        snprintf(msg, n,
                 "belongs to uid %u, not to you (uid %u): its owner could replace "
                 "the checkpoint files",
                 (unsigned)st->st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(msg, n, "has mode %04o: another user could write into it (chmod go-w it)",
                 (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

/* Opens DIR/step-NNNNNNNN (created, mode 0700, when create is set) without
 * following a link, and checks it like the checkpoint directory.  Returns
 * the fd, or -1 with the reason in msg. */
int ck_open_step(const p3dw_ckpt *c, int step, int create, char *msg, size_t n)
{
    char name[32];
    struct stat st;
    snprintf(name, sizeof name, "step-%08d", step);
    if (create && mkdirat(c->dfd, name, 0700) && errno != EEXIST) {
        snprintf(msg, n, "cannot create it: %s", strerror(errno));
        return -1;
    }
    int fd = openat(c->dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if ((e == ELOOP || e == ENOTDIR) && !fstatat(c->dfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
            snprintf(msg, n,
                     "is a symbolic link: refused (nothing is read, written or "
                     "deleted through it)");
        else
            snprintf(msg, n, "%s", e == ENOTDIR ? "is not a directory" : strerror(e));
        return -1;
    }
    if (fstat(fd, &st) || ck_check_private_dir(&st, msg, n)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads the marker of a step directory.  Returns 0 (in *m), 1 when absent,
 * -1 when unusable (*why). */
int ck_read_marker(int sdfd, marker *m, const char **why)
{
    char buf[MARKER_MAX + 1];
    int fd = ck_open_regular(sdfd, MARKER, why);
    if (fd < 0)
        return errno == ENOENT ? 1 : -1;
    size_t got = 0;
    for (;;) {
        ssize_t k = read(fd, buf + got, sizeof buf - 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            *why = strerror(errno);
            close(fd);
            return -1;
        }
        if (k == 0 || (got += (size_t)k) == sizeof buf - 1)
            break;
    }
    close(fd);
    buf[got] = 0;
    if (got == sizeof buf - 1) {
        *why = "it is larger than any marker p3d-worker writes";
        return -1;
    }
    return ck_parse_marker(buf, got, m, why);
}

/* Writes parts to dfd/name through a temporary name created with O_EXCL |
 * O_NOFOLLOW (a planted file or link under that name is removed, never
 * written through), fsync, then rename (commit == 0) or link (commit != 0:
 * fails with EEXIST instead of replacing an existing name), then fsync of the
 * directory.  Returns 0, or -1 with errno set. */
int ck_write_atomic(int dfd, const char *name, const void *const *part, const size_t *len, int nparts, int commit)
{
    char tmp[64];
    int fd = -1, rc = -1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", name) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (int tries = 0; fd < 0 && tries < 2; tries++) {
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && (errno != EEXIST || unlinkat(dfd, tmp, 0)))
            return -1;
    }
    if (fd < 0) {
        errno = EEXIST;
        return -1;
    }
    for (int i = 0; i < nparts; i++) {
        const char *p = part[i];
        size_t left = len[i];
        while (left > 0) {
            ssize_t k = write(fd, p, left);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                if (k == 0)
                    errno = EIO;
                goto out;
            }
            p += k;
            left -= (size_t)k;
        }
    }
    if (fsync(fd))
        goto out;
    int cfd = fd;
    fd = -1;
    if (close(cfd))
        goto out;
    if (commit ? linkat(dfd, tmp, dfd, name, 0) : renameat(dfd, tmp, dfd, name))
        goto out;
    if (fsync(dfd))
        goto out;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    int e = errno;
    unlinkat(dfd, tmp, 0); /* after link(): the temporary name; after a failure: the file */
    errno = e;
    return rc;
}

/* Step directories in DIR (names step-<digits> only), newest first
 * (malloc'd; *n entries). */
int *ck_list_steps(const p3dw_ckpt *c, int *n)
{
    int cap = 16, *v = malloc(sizeof *v * (size_t)cap), fd = dup(c->dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    *n = 0;
    if (!d && fd >= 0)
        close(fd);
    if (!v || !d) {
        if (d)
            closedir(d);
        return v;
    }
    rewinddir(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        long s;
        if (strncmp(de->d_name, "step-", 5) != 0 || ck_parse_digits(de->d_name + 5, strlen(de->d_name + 5), &s))
            continue;
        if (*n == cap) {
            int *nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = (int)s;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && v[j - 1] < v[j]; j--) {
            int t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v;
}

/* mkdir -p with mode 0700 for what it creates. */
int ck_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0700) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0700) && errno != EEXIST)
        return -1;
    return 0;
}

/* Removes one step directory's files through its own descriptor (opened
 * without following a link: a step-N that is a link is left alone), the
 * marker last, so a half-removed step reads as incomplete. */
void ck_remove_step(const p3dw_ckpt *c, int step)
{
    char msg[256], name[32];
    int sdfd = ck_open_step(c, step, 0, msg, sizeof msg);
    if (sdfd < 0) {
        fprintf(stderr,
                "p3d-worker: warning: --checkpoint-keep: %s/step-%08d %s; not "
                "removing it\n",
                c->dir, step, msg);
        return;
    }
    int fd = dup(sdfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d && fd >= 0)
        close(fd);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strncmp(de->d_name, "rank-", 5) == 0)
            unlinkat(sdfd, de->d_name, 0); /* a link itself, never its target */
    if (d)
        closedir(d);
    unlinkat(sdfd, MARKER, 0);
    close(sdfd);
    snprintf(name, sizeof name, "step-%08d", step);
    unlinkat(c->dfd, name, AT_REMOVEDIR);
}
