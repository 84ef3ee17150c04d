/* SPDX-License-Identifier: BSD-3-Clause */
/* ckpt.c - --checkpoint-dir: every rank saves its shard of the model and the
 * step, and at start every rank resumes from the newest checkpoint that every
 * rank completed.
 *
 * Layout (docs/worker.md "Checkpoints"):
 *   DIR/step-NNNNNNNN/rank-RRRRR.gen-G.bin   one shard per rank and generation
 *   DIR/step-NNNNNNNN/complete               written by rank 0 once every rank
 *                                            reported its shard durable; names
 *                                            the generation, job and mesh
 * A shard is written to a temporary name (O_EXCL | O_NOFOLLOW), fsync'ed,
 * renamed and the directory fsync'ed, so a shard either is all there or is
 * absent.  The marker follows the same path after a world allgather of every
 * rank's write status, so a step directory with a marker has every shard of
 * the marker's generation.
 *
 * Fencing (docs/launch.md "Fencing"): P3D_GENERATION is in every shard's name
 * and header and in the marker; a rank never writes into a step whose marker
 * names its own job and a newer generation (it is a stale copy that outlived
 * its replacement), and loading takes only the shards of the marker's
 * generation, so a stale shard renamed into a committed step is ignored.
 *
 * The directory is hostile input (issue 28): it is opened once and checked
 * (a directory of ours nobody else may write); everything below it goes
 * through that descriptor with O_NOFOLLOW; a file is read only after fstat
 * says it is a regular file (opened O_NONBLOCK, so a FIFO cannot block a
 * rank); pruning unlinks names in a step directory it opened with
 * O_NOFOLLOW, so nothing is followed or deleted through a link.
 *
 * The model keeps no optimizer or RNG state beyond the weights: SGD has no
 * moments, and data and initialisation are hashes of (seed, step, index).
 * So weights + step (+ the losses so far, for --verify and the report) are
 * all an exact resume needs.
 */
#include "worker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CK_MAGIC 0x31504b4357443350ull /* "P3DWCKP1" */
#define CK_VERSION 2u                  /* 2: the generation word */
#define MARKER "complete"
#define MARKER_MAX 1024                /* a larger marker is not ours */

/* Header words, host byte order. */
enum {
    H_MAGIC, H_VERSION, H_STEP, H_WORLD, H_RANK, H_TP, H_PP, H_DP, H_EP, H_ETP, H_EDP,
    H_CTP, H_CPP, H_CDP, H_CEP, H_LAYERS, H_HIDDEN, H_EXPERTS, H_TOPK, H_BATCH, H_SEED,
    H_NPARAM, H_GEN, H_NLOSS, H_SUM, H_NWORDS
};
static const char *const h_name[H_NWORDS] = {
    "magic", "version", "step", "world size", "rank", "tp", "pp", "dp", "ep", "etp", "edp",
    "tp coordinate", "pp coordinate", "dp coordinate", "ep coordinate", "--layers",
    "--hidden", "--experts", "--top-k", "--global-batch", "--seed", "parameter count",
    "generation", "loss count", "checksum"};

/* What the marker records besides step and generation: the fields a resume
 * must match (world and mesh sizes), in the order they are written. */
enum { M_WORLD, M_TP, M_PP, M_DP, M_EP, M_ETP, M_EDP, M_NMESH };
static const char *const m_name[M_NMESH] = {"world_size", "tp", "pp", "dp", "ep", "etp", "edp"};

typedef struct marker {
    long step, gen, mesh[M_NMESH];
    char job[128];
} marker;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fill_header(const p3dw_ckpt *c, uint64_t h[H_NWORDS], int step, size_t nparam,
                        long gen)
{
    const p3dw_env *e = c->e;
    memset(h, 0, sizeof(uint64_t) * H_NWORDS);
    h[H_MAGIC] = CK_MAGIC;
    h[H_VERSION] = CK_VERSION;
    h[H_STEP] = (uint64_t)step;
    h[H_WORLD] = (uint64_t)e->world;
    h[H_RANK] = (uint64_t)e->rank;
    h[H_TP] = (uint64_t)e->size[P3DW_TP];
    h[H_PP] = (uint64_t)e->size[P3DW_PP];
    h[H_DP] = (uint64_t)e->size[P3DW_DP];
    h[H_EP] = (uint64_t)e->size[P3DW_EP];
    h[H_ETP] = (uint64_t)e->size[P3DW_ETP];
    h[H_EDP] = (uint64_t)e->size[P3DW_EDP];
    h[H_CTP] = (uint64_t)e->coord[P3DW_TP];
    h[H_CPP] = (uint64_t)e->coord[P3DW_PP];
    h[H_CDP] = (uint64_t)e->coord[P3DW_DP];
    h[H_CEP] = (uint64_t)e->coord[P3DW_EP];
    h[H_LAYERS] = (uint64_t)c->o->layers;
    h[H_HIDDEN] = (uint64_t)c->o->hidden;
    h[H_EXPERTS] = (uint64_t)c->o->experts;
    h[H_TOPK] = (uint64_t)c->o->top_k;
    h[H_BATCH] = (uint64_t)c->o->global_batch;
    h[H_SEED] = c->o->seed;
    h[H_NPARAM] = nparam;
    h[H_GEN] = (uint64_t)gen;
    h[H_NLOSS] = (uint64_t)c->o->steps;
}

/* This run's marker fields.  The job id is kept printable (it is written
 * one line of a text file). */
static void my_marker(const p3dw_ckpt *c, int step, marker *m)
{
    const p3dw_env *e = c->e;
    memset(m, 0, sizeof *m);
    m->step = step;
    m->gen = e->generation;
    m->mesh[M_WORLD] = e->world;
    m->mesh[M_TP] = e->size[P3DW_TP];
    m->mesh[M_PP] = e->size[P3DW_PP];
    m->mesh[M_DP] = e->size[P3DW_DP];
    m->mesh[M_EP] = e->size[P3DW_EP];
    m->mesh[M_ETP] = e->size[P3DW_ETP];
    m->mesh[M_EDP] = e->size[P3DW_EDP];
    size_t k = 0;
    for (const char *s = e->job_id; *s && k + 1 < sizeof m->job; s++)
        m->job[k++] = *s > ' ' && *s < 0x7f ? *s : '?';
    m->job[k] = 0;
}

static int format_marker(const marker *m, char *out, size_t n)
{
    int k = snprintf(out, n, "p3d-worker checkpoint %u\nstep %ld\ngeneration %ld\njob %s\n",
                     CK_VERSION, m->step, m->gen, m->job);
    for (int i = 0; i < M_NMESH && k > 0 && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, "%s %ld\n", m_name[i], m->mesh[i]);
    return k > 0 && (size_t)k < n ? k : -1;
}

/* Plain decimal digits only (no sign, no space), at most 9 of them. */
static int parse_digits(const char *s, size_t len, long *out)
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
static int parse_marker(const char *text, size_t n, marker *m, const char **why)
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
        keys[3 + i] = m_name[i];
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
        } else if (parse_digits(v, vl, val[i])) {
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
static int open_regular(int dfd, const char *name, const char **why)
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
static int check_private_dir(const struct stat *st, char *msg, size_t n)
{
    if (!S_ISDIR(st->st_mode)) {
        snprintf(msg, n, "is not a directory");
        return -1;
    }
    if (st->st_uid != geteuid()) {
        snprintf(msg, n, "belongs to uid %u, not to you (uid %u): its owner could replace "
                         "the checkpoint files", (unsigned)st->st_uid, (unsigned)geteuid());
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
static int open_step(const p3dw_ckpt *c, int step, int create, char *msg, size_t n)
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
        if ((e == ELOOP || e == ENOTDIR) && !fstatat(c->dfd, name, &st, AT_SYMLINK_NOFOLLOW) &&
            S_ISLNK(st.st_mode))
            snprintf(msg, n, "is a symbolic link: refused (nothing is read, written or "
                             "deleted through it)");
        else
            snprintf(msg, n, "%s", e == ENOTDIR ? "is not a directory" : strerror(e));
        return -1;
    }
    if (fstat(fd, &st) || check_private_dir(&st, msg, n)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads the marker of a step directory.  Returns 0 (in *m), 1 when absent,
 * -1 when unusable (*why). */
static int read_marker(int sdfd, marker *m, const char **why)
{
    char buf[MARKER_MAX + 1];
    int fd = open_regular(sdfd, MARKER, why);
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
    return parse_marker(buf, got, m, why);
}

/* Writes parts to dfd/name through a temporary name created with O_EXCL |
 * O_NOFOLLOW (a planted file or link under that name is removed, never
 * written through), fsync, then rename (commit == 0) or link (commit != 0:
 * fails with EEXIST instead of replacing an existing name), then fsync of the
 * directory.  Returns 0, or -1 with errno set. */
static int write_atomic(int dfd, const char *name, const void *const *part, const size_t *len,
                        int nparts, int commit)
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
static int *list_steps(const p3dw_ckpt *c, int *n)
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
        if (strncmp(de->d_name, "step-", 5) != 0 ||
            parse_digits(de->d_name + 5, strlen(de->d_name + 5), &s))
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
static int mkdirs(const char *path)
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

int p3dw_ckpt_open(p3dw_ckpt *c)
{
    char msg[256];
    struct stat st;
    c->dfd = -1;
    if (mkdirs(c->dir)) {
        fprintf(stderr, "p3d-worker: rank %d: --checkpoint-dir %s: cannot create it: %s\n",
                c->e->rank, c->dir, strerror(errno));
        return -1;
    }
    /* A link the user gave (~/ck -> /scratch/...) is followed, as for
     * par3drun's --log-dir: the rules apply to the directory it reaches,
     * which is then used through this descriptor only. */
    int fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) || check_private_dir(&st, msg, sizeof msg)) {
        if (fd < 0)
            snprintf(msg, sizeof msg, "cannot be opened (%s)", strerror(errno));
        fprintf(stderr, "p3d-worker: rank %d: --checkpoint-dir %s %s; refusing it: choose a "
                        "directory of yours that only you can write\n", c->e->rank, c->dir, msg);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    c->dfd = fd;
    return 0;
}

void p3dw_ckpt_close(p3dw_ckpt *c)
{
    if (c->dfd >= 0)
        close(c->dfd);
    c->dfd = -1;
}

/* Checks step's marker against this run.  Returns 0 when it is usable (in
 * *m), 1 when the step is absent, incomplete or unusable (warning printed
 * for the unusable), 2 when it belongs to another mesh (error printed). */
static int step_marker(const p3dw_ckpt *c, int step, int sdfd, marker *m)
{
    const char *why = NULL;
    marker want;
    int rank = c->e->rank, v = read_marker(sdfd, m, &why);
    if (v == 1)
        return 1;
    if (v < 0 || m->step != step) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s/step-%08d/%s: %s; ignoring "
                        "checkpoint step %d\n", rank, c->dir, step, MARKER,
                v < 0 ? why : "it names another step", step);
        return 1;
    }
    my_marker(c, step, &want);
    for (int i = 0; i < M_NMESH; i++)
        if (m->mesh[i] != want.mesh[i]) {
            fprintf(stderr, "p3d-worker: rank %d: checkpoint %s/step-%08d was written with %s "
                            "%ld, this run has %ld: resume with the mesh it was written with, "
                            "or use another --checkpoint-dir\n", rank, c->dir, step, m_name[i],
                    m->mesh[i], want.mesh[i]);
            return 2;
        }
    return 0;
}

/* Reads and checks my shard of `step` (of the marker's generation gen) into
 * params/losses.  Returns 0 when good, 1 when missing or corrupt (warning
 * printed), 2 when it belongs to another mesh or model (error printed). */
static int read_shard(const p3dw_ckpt *c, int step, int sdfd, long gen, float *params,
                      size_t nparam, double *losses)
{
    char name[64];
    uint64_t want[H_NWORDS], got[H_NWORDS];
    int rank = c->e->rank, rc = 1;
    const char *why = NULL;
    snprintf(name, sizeof name, "rank-%05d.gen-%ld.bin", rank, gen);
    fill_header(c, want, step, nparam, gen);
    int fd = open_regular(sdfd, name, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        fprintf(stderr, "p3d-worker: warning: rank %d: %s/step-%08d/%s %s; ignoring checkpoint "
                        "step %d\n", rank, c->dir, step, name, why ? why : strerror(errno), step);
        return 1;
    }
    if (fread(got, sizeof got, 1, f) != 1 || got[H_MAGIC] != CK_MAGIC ||
        got[H_VERSION] != CK_VERSION) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s/step-%08d/%s is not a p3d-worker "
                        "checkpoint shard (version %u) or is truncated; ignoring checkpoint step "
                        "%d\n", rank, c->dir, step, name, CK_VERSION, step);
        goto out;
    }
    if (got[H_GEN] != want[H_GEN] || got[H_STEP] != want[H_STEP] ||
        got[H_RANK] != want[H_RANK]) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s/step-%08d/%s holds step %llu, rank "
                        "%llu, generation %llu, not what its name says; ignoring checkpoint step "
                        "%d\n", rank, c->dir, step, name, (unsigned long long)got[H_STEP],
                (unsigned long long)got[H_RANK], (unsigned long long)got[H_GEN], step);
        goto out;
    }
    for (int i = H_WORLD; i < H_SUM; i++) {
        if (i == H_NLOSS || i == H_GEN || i == H_RANK)
            continue; /* --steps may change between runs; the others checked above */
        if (got[i] != want[i]) {
            fprintf(stderr, "p3d-worker: rank %d: checkpoint shard %s/step-%08d/%s was written "
                            "with %s %llu, this run has %llu: resume with the mesh and model "
                            "options it was written with, or use another --checkpoint-dir\n",
                    rank, c->dir, step, name, h_name[i], (unsigned long long)got[i],
                    (unsigned long long)want[i]);
            rc = 2;
            goto out;
        }
    }
    size_t nloss = (size_t)got[H_NLOSS];
    if (nloss > (1u << 20)) { /* --steps' bound: a larger count is corrupt */
        fprintf(stderr, "p3d-worker: warning: rank %d: %s/step-%08d/%s: loss count %zu is out "
                        "of range (corrupt); ignoring checkpoint step %d\n", rank, c->dir, step,
                name, nloss, step);
        goto out;
    }
    float *p = malloc(sizeof *p * (nparam ? nparam : 1));
    double *l = malloc(sizeof *l * (nloss ? nloss : 1));
    int ok = p && l && fread(p, sizeof *p, nparam, f) == nparam &&
             fread(l, sizeof *l, nloss, f) == nloss && fgetc(f) == EOF;
    uint64_t sum = ok ? fnv1a(fnv1a(0xcbf29ce484222325ull, p, sizeof *p * nparam), l,
                               sizeof *l * nloss)
                      : 0;
    if (!ok || sum != got[H_SUM]) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s/step-%08d/%s: %s; ignoring checkpoint "
                        "step %d\n", rank, c->dir, step, name,
                !ok ? "wrong size (truncated?)" : "checksum mismatch (corrupt)", step);
    } else {
        memcpy(params, p, sizeof *p * nparam);
        for (int s = 0; s < c->o->steps; s++)
            losses[s] = (size_t)s < nloss && s < step ? l[s] : 0.0;
        rc = 0;
    }
    free(p);
    free(l);
out:
    fclose(f);
    return rc;
}

/* My proposal for step: 0 good, 1 unusable, 2 another mesh/model. */
static int try_step(const p3dw_ckpt *c, int step, float *params, size_t nparam, double *losses)
{
    char msg[256];
    marker m;
    int sdfd = open_step(c, step, 0, msg, sizeof msg);
    if (sdfd < 0) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s/step-%08d %s; ignoring checkpoint "
                        "step %d\n", c->e->rank, c->dir, step, msg, step);
        return 1;
    }
    int v = step_marker(c, step, sdfd, &m);
    if (v == 0)
        v = read_shard(c, step, sdfd, m.gen, params, nparam, losses);
    close(sdfd);
    return v;
}

int p3dw_ckpt_load(const p3dw_ckpt *c, float *params, size_t nparam, double *losses)
{
    int n = 0, rc = -1, world = c->e->world, rank = c->e->rank;
    int *steps = list_steps(c, &n), *all = malloc(sizeof *all * (size_t)world);
    if (!steps || !all) {
        fprintf(stderr, "p3d-worker: out of memory reading checkpoints\n");
        goto out;
    }
    tcp_set_activity(c->w, "agreeing on the checkpoint to resume from");
    /* Every rank proposes the newest complete step <= bound whose own shard
     * is good; all take the smallest proposal as the new bound until every
     * rank proposes the same step (a rank whose shard of a step is corrupt
     * pulls everyone to an older one). */
    int bound = INT_MAX, i = 0;
    for (;;) {
        int mine = -1;
        while (i < n && steps[i] > bound)
            i++;
        for (; i < n; i++) {
            int v = try_step(c, steps[i], params, nparam, losses);
            if (v == 2) {
                mine = -2;
                break;
            }
            if (v == 0) {
                mine = steps[i];
                break;
            }
        }
        if (tcp_world_allgather(c->w, &mine, all, sizeof mine))
            goto out;
        int lo = INT_MAX, same = 1;
        for (int r = 0; r < world; r++) {
            if (all[r] == -2) {
                if (mine != -2 && rank == 0)
                    fprintf(stderr, "p3d-worker: rank %d's checkpoint does not match this "
                                    "run (see its message)\n", r);
                rc = -2;
                goto out;
            }
            if (all[r] < lo)
                lo = all[r];
            same &= all[r] == all[0];
        }
        if (lo < 0) {
            if (rank == 0 && n > 0)
                fprintf(stderr, "p3d-worker: warning: no checkpoint in %s is complete and good "
                                "on every rank; starting from step 0\n", c->dir);
            memset(losses, 0, sizeof *losses * (size_t)c->o->steps);
            rc = 0;
            goto out;
        }
        if (same) {
            rc = lo;
            break;
        }
        bound = lo;
    }
    if (rank == 0) {
        for (int k = 0; k < n && steps[k] > rc; k++) {
            char msg[256];
            const char *why;
            marker m;
            int sdfd = open_step(c, steps[k], 0, msg, sizeof msg);
            if (sdfd >= 0 && read_marker(sdfd, &m, &why) == 1)
                fprintf(stderr, "p3d-worker: warning: %s/step-%08d has no completion marker "
                                "(not every rank wrote its shard): ignored\n", c->dir, steps[k]);
            if (sdfd >= 0)
                close(sdfd);
        }
        fprintf(stderr, "p3d-worker: resuming from checkpoint step %d in %s\n", rc, c->dir);
    }
    if (rc >= c->o->steps) {
        /* Nothing would run: a --verify or report of it would describe a
         * training that did not happen. */
        if (rank == 0)
            fprintf(stderr, "p3d-worker: checkpoint step %d in %s is at or past --steps %d: "
                            "nothing left to train (exit 3); raise --steps to train on, or use "
                            "another --checkpoint-dir\n", rc, c->dir, c->o->steps);
        rc = -3;
    }
out:
    free(steps);
    free(all);
    return rc;
}

/* Removes one step directory's files through its own descriptor (opened
 * without following a link: a step-N that is a link is left alone), the
 * marker last, so a half-removed step reads as incomplete. */
static void remove_step(const p3dw_ckpt *c, int step)
{
    char msg[256], name[32];
    int sdfd = open_step(c, step, 0, msg, sizeof msg);
    if (sdfd < 0) {
        fprintf(stderr, "p3d-worker: warning: --checkpoint-keep: %s/step-%08d %s; not "
                        "removing it\n", c->dir, step, msg);
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

/* Rank 0: removes complete checkpoints beyond the newest --checkpoint-keep
 * ones, and incomplete ones older than the newest complete one. */
static void prune(const p3dw_ckpt *c, int newest)
{
    if (c->keep <= 0)
        return;
    int n = 0, kept = 0, *v = list_steps(c, &n);
    for (int k = 0; v && k < n; k++) {
        char msg[256];
        const char *why;
        marker m;
        if (v[k] > newest)
            continue;
        int sdfd = open_step(c, v[k], 0, msg, sizeof msg), complete = 0;
        if (sdfd >= 0) {
            complete = read_marker(sdfd, &m, &why) == 0;
            close(sdfd);
        }
        if (complete && ++kept <= c->keep)
            continue;
        remove_step(c, v[k]);
    }
    free(v);
}

/* Is step committed by a newer generation of this job?  Then this rank is a
 * stale copy that outlived its replacement (message printed): 1.  Else 0. */
static int fenced(const p3dw_ckpt *c, int step, int sdfd, const marker *me)
{
    marker m;
    const char *why;
    if (read_marker(sdfd, &m, &why) != 0 || strcmp(m.job, me->job) != 0 || m.gen <= me->gen)
        return 0;
    fprintf(stderr, "p3d-worker: rank %d: %s/step-%08d was committed by generation %ld of this "
                    "job, newer than this rank's P3D_GENERATION %ld: this rank is a stale copy "
                    "(it was replaced); not writing into it, stopping\n", c->e->rank, c->dir,
            step, m.gen, me->gen);
    return 1;
}

int p3dw_ckpt_save(const p3dw_ckpt *c, int step, const float *params, size_t nparam,
                   const double *losses)
{
    char msg[256], name[64];
    uint64_t h[H_NWORDS];
    marker me;
    int rank = c->e->rank, world = c->e->world, ok = 1, rc = -1, *all = NULL;
    double t0 = now_s();
    my_marker(c, step, &me);
    fill_header(c, h, step, nparam, me.gen);
    h[H_SUM] = fnv1a(fnv1a(0xcbf29ce484222325ull, params, sizeof *params * nparam), losses,
                     sizeof *losses * (size_t)c->o->steps);
    snprintf(name, sizeof name, "rank-%05d.gen-%ld.bin", rank, me.gen);
    const void *part[3] = {h, params, losses};
    size_t len[3] = {sizeof h, sizeof *params * nparam, sizeof *losses * (size_t)c->o->steps};
    int sdfd = open_step(c, step, 1, msg, sizeof msg);
    if (sdfd < 0) {
        fprintf(stderr, "p3d-worker: rank %d: checkpoint %s/step-%08d %s\n", rank, c->dir, step,
                msg);
        ok = 0;
    }
    /* A marker of this job's newer generation fences me out.  Any other
     * marker (an earlier job's, or this job's older generation: a job that
     * resumed from an older checkpoint) must not vouch for a mix of old and
     * new shards: every rank drops it before writing; rank 0 writes it again
     * only after the allgather below, i.e. after every drop. */
    if (ok && fenced(c, step, sdfd, &me))
        ok = 0;
    if (ok && unlinkat(sdfd, MARKER, 0) && errno != ENOENT) {
        fprintf(stderr, "p3d-worker: rank %d: removing %s/step-%08d/%s: %s\n", rank, c->dir,
                step, MARKER, strerror(errno));
        ok = 0;
    }
    if (ok && write_atomic(sdfd, name, part, len, 3, 0)) {
        fprintf(stderr, "p3d-worker: rank %d: writing checkpoint file %s/step-%08d/%s: %s\n",
                rank, c->dir, step, name, strerror(errno));
        ok = 0;
    }
    all = malloc(sizeof *all * (size_t)world);
    tcp_set_activity(c->w, "agreeing that every checkpoint shard is written");
    if (!all || tcp_world_allgather(c->w, &ok, all, sizeof ok))
        goto out;
    for (int r = 0; r < world; r++)
        if (!all[r]) {
            if (rank == 0)
                fprintf(stderr, "p3d-worker: rank %d could not write its checkpoint shard of "
                                "step %d; stopping\n", r, step);
            goto out;
        }
    if (rank == 0) {
        char body[MARKER_MAX];
        int m = format_marker(&me, body, sizeof body);
        const void *bp[1] = {body};
        size_t bl[1] = {(size_t)(m > 0 ? m : 0)};
        /* link(), not rename(): a marker that appeared since the drop above
         * is not replaced blindly; a newer generation's fences me out, any
         * other is superseded by mine. */
        int w = m > 0 ? write_atomic(sdfd, MARKER, bp, bl, 1, 1) : (errno = EOVERFLOW, -1);
        if (w && errno == EEXIST) {
            if (fenced(c, step, sdfd, &me))
                goto out;
            w = write_atomic(sdfd, MARKER, bp, bl, 1, 0);
        }
        if (w) {
            fprintf(stderr, "p3d-worker: rank 0: writing checkpoint file %s/step-%08d/%s: %s\n",
                    c->dir, step, MARKER, strerror(errno));
            goto out;
        }
        prune(c, step);
        fprintf(stderr, "p3d-worker: checkpoint step %d written to %s/step-%08d (%d shards, "
                        "generation %ld, %.3f s)\n", step, c->dir, step, world, me.gen,
                now_s() - t0);
    }
    rc = 0;
out:
    if (sdfd >= 0)
        close(sdfd);
    free(all);
    return rc;
}
