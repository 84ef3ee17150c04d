/* ckpt.c - --checkpoint-dir: every rank saves its shard of the model and the
 * step, and at start every rank resumes from the newest checkpoint that every
 * rank completed.
 *
 * Layout (docs/worker.md "Checkpoints"):
 *   DIR/step-NNNNNNNN/rank-RRRRR.bin   one shard per rank
 *   DIR/step-NNNNNNNN/complete         written by rank 0 once every rank
 *                                      reported its shard durable
 * A shard is written to rank-R.bin.tmp, fsync'ed, renamed and the directory
 * fsync'ed, so a shard either is all there or is absent.  The marker follows
 * the same path after a world allgather of every rank's write status (a
 * barrier that also agrees on success), so a step directory with a marker
 * has every shard.
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
#define CK_VERSION 1u

/* Header words, host byte order. */
enum {
    H_MAGIC, H_VERSION, H_STEP, H_WORLD, H_RANK, H_TP, H_PP, H_DP, H_EP, H_ETP, H_EDP,
    H_CTP, H_CPP, H_CDP, H_CEP, H_LAYERS, H_HIDDEN, H_EXPERTS, H_TOPK, H_BATCH, H_SEED,
    H_NPARAM, H_NLOSS, H_SUM, H_NWORDS
};
static const char *const h_name[H_NWORDS] = {
    "magic", "version", "step", "world size", "rank", "tp", "pp", "dp", "ep", "etp", "edp",
    "tp coordinate", "pp coordinate", "dp coordinate", "ep coordinate", "--layers",
    "--hidden", "--experts", "--top-k", "--global-batch", "--seed", "parameter count",
    "loss count", "checksum"};

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

static void fill_header(const p3dw_ckpt *c, uint64_t h[H_NWORDS], int step, size_t nparam)
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
    h[H_NLOSS] = (uint64_t)c->o->steps;
}

static void step_dir(const p3dw_ckpt *c, int step, char *out, size_t n)
{
    snprintf(out, n, "%s/step-%08d", c->dir, step);
}

static int fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
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
    struct stat st;
    if (stat(buf, &st) || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* Writes len bytes of parts to path atomically: PATH.tmp, fsync, rename,
 * fsync of the directory.  Returns 0 or -1 (message printed). */
static int write_atomic(const char *dir, const char *name, const void *const *part,
                        const size_t *len, int nparts, int rank)
{
    char tmp[PATH_MAX + 16], fin[PATH_MAX + 16];
    snprintf(fin, sizeof fin, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        goto fail;
    for (int i = 0; i < nparts; i++) {
        const char *p = part[i];
        size_t left = len[i];
        while (left > 0) {
            ssize_t k = write(fd, p, left);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                close(fd);
                goto fail;
            }
            p += k;
            left -= (size_t)k;
        }
    }
    if (fsync(fd)) {
        close(fd);
        goto fail;
    }
    if (close(fd) || rename(tmp, fin) || fsync_dir(dir))
        goto fail;
    return 0;
fail:
    fprintf(stderr, "p3d-worker: rank %d: writing checkpoint file %s: %s\n", rank, fin,
            strerror(errno));
    unlink(tmp);
    return -1;
}

/* Complete step directories, newest first (malloc'd; *n entries). */
static int *list_steps(const p3dw_ckpt *c, int *n, int complete_only)
{
    int cap = 16, *v = malloc(sizeof *v * (size_t)cap);
    *n = 0;
    DIR *d = opendir(c->dir);
    if (!v || !d) {
        if (d)
            closedir(d);
        return v;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        if (strncmp(de->d_name, "step-", 5) != 0)
            continue;
        errno = 0;
        long s = strtol(de->d_name + 5, &end, 10);
        if (*end || end == de->d_name + 5 || errno || s < 0 || s > INT_MAX)
            continue;
        char marker[PATH_MAX + 32];
        snprintf(marker, sizeof marker, "%s/%s/complete", c->dir, de->d_name);
        if (complete_only && access(marker, F_OK) != 0)
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

int p3dw_ckpt_open(const p3dw_ckpt *c)
{
    if (mkdirs(c->dir)) {
        fprintf(stderr, "p3d-worker: rank %d: --checkpoint-dir %s: cannot create it: %s\n",
                c->e->rank, c->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Reads and checks my shard of `step` into params/losses.  Returns 0 when
 * good, 1 when missing or corrupt (warning printed), 2 when it belongs to
 * another mesh or model (error printed). */
static int read_shard(const p3dw_ckpt *c, int step, float *params, size_t nparam, double *losses)
{
    char sd[PATH_MAX], path[PATH_MAX + 32];
    uint64_t want[H_NWORDS], got[H_NWORDS];
    int rank = c->e->rank, rc = 1;
    step_dir(c, step, sd, sizeof sd);
    snprintf(path, sizeof path, "%s/rank-%05d.bin", sd, rank);
    fill_header(c, want, step, nparam);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s: %s; ignoring checkpoint step %d\n",
                rank, path, strerror(errno), step);
        return 1;
    }
    if (fread(got, sizeof got, 1, f) != 1 || got[H_MAGIC] != CK_MAGIC ||
        got[H_VERSION] != CK_VERSION) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s is not a p3d-worker checkpoint shard "
                        "(version %u) or is truncated; ignoring checkpoint step %d\n", rank, path,
                CK_VERSION, step);
        goto out;
    }
    for (int i = H_STEP; i < H_SUM; i++) {
        if (i == H_NLOSS)
            continue; /* --steps may change between runs */
        if (got[i] != want[i]) {
            fprintf(stderr, "p3d-worker: rank %d: checkpoint shard %s was written with %s %llu, "
                            "this run has %llu: resume with the mesh and model options it was "
                            "written with, or use another --checkpoint-dir\n", rank, path,
                    h_name[i], (unsigned long long)got[i], (unsigned long long)want[i]);
            rc = 2;
            goto out;
        }
    }
    size_t nloss = (size_t)got[H_NLOSS];
    float *p = malloc(sizeof *p * (nparam ? nparam : 1));
    double *l = malloc(sizeof *l * (nloss ? nloss : 1));
    int ok = p && l && fread(p, sizeof *p, nparam, f) == nparam &&
             fread(l, sizeof *l, nloss, f) == nloss && fgetc(f) == EOF;
    uint64_t sum = ok ? fnv1a(fnv1a(0xcbf29ce484222325ull, p, sizeof *p * nparam), l,
                               sizeof *l * nloss)
                      : 0;
    if (!ok || sum != got[H_SUM]) {
        fprintf(stderr, "p3d-worker: warning: rank %d: %s: %s; ignoring checkpoint step %d\n",
                rank, path, !ok ? "wrong size (truncated?)" : "checksum mismatch (corrupt)", step);
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

int p3dw_ckpt_load(const p3dw_ckpt *c, float *params, size_t nparam, double *losses)
{
    int n = 0, rc = -1, world = c->e->world, rank = c->e->rank;
    int *steps = list_steps(c, &n, 1), *all = malloc(sizeof *all * (size_t)world);
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
            int v = read_shard(c, steps[i], params, nparam, losses);
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
                    fprintf(stderr, "p3d-worker: rank %d's checkpoint shard does not match this "
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
        int na = 0, *any = list_steps(c, &na, 0);
        for (int k = 0; any && k < na; k++) {
            char sd[PATH_MAX], marker[PATH_MAX + 16];
            step_dir(c, any[k], sd, sizeof sd);
            snprintf(marker, sizeof marker, "%s/complete", sd);
            if (any[k] > rc && access(marker, F_OK) != 0)
                fprintf(stderr, "p3d-worker: warning: %s has no completion marker (not every "
                                "rank wrote its shard): ignored\n", sd);
        }
        free(any);
        fprintf(stderr, "p3d-worker: resuming from checkpoint step %d in %s\n", rc, c->dir);
    }
out:
    free(steps);
    free(all);
    return rc;
}

/* Rank 0: removes complete checkpoints beyond the newest --checkpoint-keep
 * ones, and incomplete ones older than the newest complete one. */
static void prune(const p3dw_ckpt *c, int newest)
{
    if (c->keep <= 0)
        return;
    int n = 0, kept = 0, *v = list_steps(c, &n, 0);
    for (int k = 0; v && k < n; k++) {
        char sd[PATH_MAX], p[PATH_MAX + 32];
        step_dir(c, v[k], sd, sizeof sd);
        snprintf(p, sizeof p, "%s/complete", sd);
        int complete = access(p, F_OK) == 0;
        if (v[k] > newest || (complete && ++kept <= c->keep))
            continue;
        DIR *d = opendir(sd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (!strcmp(de->d_name, "complete"))
                continue; /* last, so a half-removed step reads as incomplete */
            int k = snprintf(p, sizeof p, "%s/%s", sd, de->d_name);
            if (strncmp(de->d_name, "rank-", 5) == 0 && k > 0 && (size_t)k < sizeof p)
                unlink(p);
        }
        if (d)
            closedir(d);
        snprintf(p, sizeof p, "%s/complete", sd);
        unlink(p);
        rmdir(sd);
    }
    free(v);
}

int p3dw_ckpt_save(const p3dw_ckpt *c, int step, const float *params, size_t nparam,
                   const double *losses)
{
    char sd[PATH_MAX];
    uint64_t h[H_NWORDS];
    int rank = c->e->rank, world = c->e->world, ok = 1, rc = -1;
    double t0 = now_s();
    step_dir(c, step, sd, sizeof sd);
    fill_header(c, h, step, nparam);
    h[H_SUM] = fnv1a(fnv1a(0xcbf29ce484222325ull, params, sizeof *params * nparam), losses,
                     sizeof *losses * (size_t)c->o->steps);
    char name[32];
    snprintf(name, sizeof name, "rank-%05d.bin", rank);
    const void *part[3] = {h, params, losses};
    size_t len[3] = {sizeof h, sizeof *params * nparam, sizeof *losses * (size_t)c->o->steps};
    if (mkdir(sd, 0700) && errno != EEXIST) {
        fprintf(stderr, "p3d-worker: rank %d: creating %s: %s\n", rank, sd, strerror(errno));
        ok = 0;
    }
    /* A marker left by an earlier attempt that got this far (a job that
     * resumed from an older checkpoint) must not vouch for a mix of old
     * and new shards: every rank drops it before writing; rank 0 writes it
     * again only after the allgather below, i.e. after every drop. */
    char marker[PATH_MAX + 16];
    snprintf(marker, sizeof marker, "%s/complete", sd);
    if (ok && unlink(marker) && errno != ENOENT) {
        fprintf(stderr, "p3d-worker: rank %d: removing %s: %s\n", rank, marker, strerror(errno));
        ok = 0;
    }
    if (ok && write_atomic(sd, name, part, len, 3, rank))
        ok = 0;
    int *all = malloc(sizeof *all * (size_t)world);
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
        char body[256];
        int m = snprintf(body, sizeof body, "{\"step\":%d,\"world_size\":%d}\n", step, world);
        const void *bp[1] = {body};
        size_t bl[1] = {(size_t)m};
        if (write_atomic(sd, "complete", bp, bl, 1, rank))
            goto out;
        prune(c, step);
        fprintf(stderr, "p3d-worker: checkpoint step %d written to %s (%d shards, %.3f s)\n",
                step, sd, world, now_s() - t0);
    }
    rc = 0;
out:
    free(all);
    return rc;
}
