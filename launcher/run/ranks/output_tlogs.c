/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * output_tlogs.c — torchrun's --log-dir layout, used when -r/--redirects or
 * -t/--tee come with --log-dir (docs/torchrun.md, "Rank output files"):
 *
 *     DIR/RUNID_XXXXXXXX/attempt_GEN/LOCAL_RANK/stdout.log
 *                                              /stderr.log
 *
 * RUNID is TORCHELASTIC_RUN_ID (the job id), XXXXXXXX a fresh random name
 * per agent (torchrun's agent makes it with mkdtemp, so two runs with one
 * id never share files), GEN the restart count (TORCHELASTIC_RESTART_COUNT).
 * A stream has its file when it is redirected or teed for that local rank;
 * the directories exist for every local rank, as torchrun's do. Without
 * --log-dir, DIR is a new $TMPDIR/torchelastic_XXXXXX, as torchrun's.
 *
 * Every step goes through directory descriptors from the checked --log-dir
 * (rundir.c): a name planted as a symlink is refused, never followed.
 */
#include "ranks.h"
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

void p3d_tlogs_free(p3d_tlogs *t)
{
    if (t->dfd >= 0)
        close(t->dfd);
    P3D_FREE(&t->path);
    t->dfd = -1;
}

/* mkdir parent/name (an existing directory is taken as it is) and opens it
 * without following a symlink. A descriptor, or -1 with *err. */
static int subdir(int parent, const char *shown, const char *name, int must_be_new, char **err)
{
    if (mkdirat(parent, name, 0755) < 0 && (must_be_new || errno != EEXIST))
        return errno == EEXIST ? -2 : p3d_err(err, "--log-dir: cannot create %s/%s: %s", shown, name, strerror(errno));
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return p3d_err(err, "--log-dir: %s/%s is not a directory of ours (%s); refusing it (remove it)", shown, name,
                       strerror(errno));
    return fd;
}

/* No --log-dir: torchrun's default, a new $TMPDIR/torchelastic_XXXXXX
 * (mode 0700), said once on stderr (not under --quiet) since nothing
 * else tells where the files went. The path (malloc'd), or NULL with *err. */
static char *temp_base(int quiet, char **err)
{
    const char *tmp = getenv("TMPDIR");
    char *path = NULL;
    if (!tmp || !*tmp)
        tmp = "/tmp";
    if (asprintf(&path, "%s/torchelastic_XXXXXX", tmp) < 0) {
        p3d_err(err, "out of memory");
        return NULL;
    }
    if (!mkdtemp(path)) {
        p3d_err(err, "-r/-t without --log-dir: cannot create a directory in %s: %s (give --log-dir DIR)", tmp,
                strerror(errno));
        P3D_FREE(&path);
        return NULL;
    }
    if (!quiet)
        fprintf(stderr, "par3drun: -r/-t without --log-dir: the ranks' files go under %s\n", path);
    return path;
}

/* BASE/RUNID_XXXXXXXX, a name nobody had: torchrun's mkdtemp. */
static int run_dir(p3d_tlogs *t, const p3d_launch *L, char **err)
{
    static const char set[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
    char *own = L->o->log_dir ? NULL : temp_base(L->o->quiet, err);
    const char *base = own ? own : L->o->log_dir;
    int top = base ? p3d_logdir_open(base, err) : -1;
    if (top < 0) {
        free(own);
        return -1;
    }
    const char *id = L->job->job_id && *L->job->job_id ? L->job->job_id : "none";
    char name[256];
    int fd = -2;
    for (int tries = 0; tries < 100 && fd == -2; tries++) {
        unsigned char r[8];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            for (size_t i = 0; i < sizeof r; i++) /* no entropy yet: unique enough with the retries */
                r[i] = (unsigned char)(getpid() + tries * 31 + (int)i * 7);
        int n = snprintf(name, sizeof name, "%.200s_", id);
        for (size_t i = 0; i < sizeof r; i++)
            name[n++] = set[r[i] % (sizeof set - 1)];
        name[n] = 0;
        fd = subdir(top, base, name, 1, err); /* -2: taken, draw again */
    }
    close(top);
    int rc = 0;
    if (fd == -2)
        rc = p3d_err(err, "--log-dir %s: no free name for this run's directory", base);
    else if (fd < 0)
        rc = -1;
    else
        t->dfd = fd;
    if (fd >= 0 && asprintf(&t->path, "%s/%s", base, name) < 0) {
        t->path = NULL;
        rc = p3d_err(err, "out of memory");
    }
    free(own);
    return rc;
}

/* local rank lr's directory in attempt adfd and its files. */
static int rank_files(int adfd, const char *shown, int lr, unsigned std, p3d_rank_out *out, char **err)
{
    static const char *const file[2] = {"stdout.log", "stderr.log"};
    char name[16], *where = NULL;
    snprintf(name, sizeof name, "%d", lr);
    int fd = subdir(adfd, shown, name, 0, err), rc = fd < 0 ? -1 : 0;
    if (fd >= 0 && asprintf(&where, "%s/%s", shown, name) < 0)
        rc = p3d_err(err, "out of memory");
    for (int w = 0; w < 2 && rc == 0; w++) {
        out->quiet[w] = (std >> (2 + w)) & 1;
        if ((std >> w) & 1 && (out->file_fd[w] = p3d_logfile_open(fd, where, file[w], err)) < 0)
            rc = -1;
    }
    free(where);
    if (fd >= 0)
        close(fd);
    return rc;
}

int p3d_tlogs_attempt(p3d_tlogs *t, const p3d_launch *L, int gen, p3d_rank_out *out, const int *local, int n,
                      char **err)
{
    if (t->dfd < 0 && run_dir(t, L, err) < 0)
        return -1;
    char name[32], *shown = NULL;
    snprintf(name, sizeof name, "attempt_%d", gen);
    /* a generation that runs again on this agent (a takeover) writes
     * its files afresh: they are truncated when opened */
    int adfd = subdir(t->dfd, t->path, name, 0, err), rc = adfd < 0 ? -1 : 0;
    if (adfd >= 0 && asprintf(&shown, "%s/%s", t->path, name) < 0) {
        shown = NULL;
        rc = p3d_err(err, "out of memory");
    }
    for (int i = 0; i < n && rc == 0; i++) {
        int lr = local[i];
        unsigned std = lr >= 0 && lr < P3D_MAX_LOCAL ? L->o->local_std[lr] : 0;
        rc = rank_files(adfd, shown, lr, std, &out[i], err);
    }
    free(shown);
    if (adfd >= 0)
        close(adfd);
    return rc;
}
