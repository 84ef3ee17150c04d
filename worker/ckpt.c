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
 * Another data-parallel width (a job that shrank or grew) resumes too: the
 * marker may name another dp (so world and edp); each rank then reads the
 * shard of an old rank with its own tp, pp and ep coordinates, since no
 * state is sharded over the replicas (find_source).
 *
 * The model keeps no optimizer or RNG state beyond the weights: SGD has no
 * moments, and data and initialisation are hashes of (seed, step, index).
 * So weights + step (+ the losses so far, for --verify and the report) are
 * all an exact resume needs.
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
#include <time.h>
#include <unistd.h>

#define CK_MAGIC 0x31504b4357443350ull /* "P3DWCKP1" */

/* Header words, host byte order. */
enum {
    H_MAGIC,
    H_VERSION,
    H_STEP,
    H_WORLD,
    H_RANK,
    H_TP,
    H_PP,
    H_DP,
    H_EP,
    H_ETP,
    H_EDP,
    H_CTP,
    H_CPP,
    H_CDP,
    H_CEP,
    H_LAYERS,
    H_HIDDEN,
    H_EXPERTS,
    H_TOPK,
    H_BATCH,
    H_SEED,
    H_NPARAM,
    H_GEN,
    H_NLOSS,
    H_SUM,
    H_NWORDS
};
static const char *const h_name[H_NWORDS] = {"magic",
                                             "version",
                                             "step",
                                             "world size",
                                             "rank",
                                             "tp",
                                             "pp",
                                             "dp",
                                             "ep",
                                             "etp",
                                             "edp",
                                             "tp coordinate",
                                             "pp coordinate",
                                             "dp coordinate",
                                             "ep coordinate",
                                             "--layers",
                                             "--hidden",
                                             "--experts",
                                             "--top-k",
                                             "--global-batch x --seq-len",
                                             "--seed",
                                             "parameter count",
                                             "generation",
                                             "loss count",
                                             "checksum"};


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

static void fill_header(const p3dw_ckpt *c, uint64_t h[H_NWORDS], int step, size_t nparam, long gen)
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
    h[H_BATCH] = (uint64_t)p3dw_rows(c->o); /* rows: --seq-len 1 keeps older checkpoints valid */
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

int p3dw_ckpt_open(p3dw_ckpt *c)
{
    char msg[256];
    struct stat st;
    c->dfd = -1;
    if (ck_mkdirs(c->dir)) {
        fprintf(stderr, "p3d-worker: rank %d: --checkpoint-dir %s: cannot create it: %s\n", c->e->rank, c->dir,
                strerror(errno));
        return -1;
    }
    /* A link the user gave (~/ck -> /scratch/...) is followed, as for
     * par3drun's --log-dir: the rules apply to the directory it reaches,
     * which is then used through this descriptor only. */
    int fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) || ck_check_private_dir(&st, msg, sizeof msg)) {
        if (fd < 0)
            snprintf(msg, sizeof msg, "cannot be opened (%s)", strerror(errno));
        fprintf(stderr,
                "p3d-worker: rank %d: --checkpoint-dir %s %s; refusing it: choose a "
                "directory of yours that only you can write\n",
                c->e->rank, c->dir, msg);
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

/* The marker's words a checkpoint of another data-parallel width differs
 * in (docs/worker.md "Resuming at another width"): the replicas hold the
 * same weights, so only the width and what follows from it change. */
static int width_word(int i)
{
    return i == M_WORLD || i == M_DP || i == M_EDP;
}

/* Checks step's marker against this run.  Returns 0 when it is usable (in
 * *m), 1 when the step is absent, incomplete or unusable (warning printed
 * for the unusable), 2 when it belongs to another mesh (error printed). */
static int step_marker(const p3dw_ckpt *c, int step, int sdfd, marker *m)
{
    const char *why = NULL;
    marker want;
    int rank = c->e->rank, v = ck_read_marker(sdfd, m, &why);
    if (v == 1)
        return 1;
    if (v < 0 || m->step != step) {
        fprintf(stderr,
                "p3d-worker: warning: rank %d: %s/step-%08d/%s: %s; ignoring "
                "checkpoint step %d\n",
                rank, c->dir, step, MARKER, v < 0 ? why : "it names another step", step);
        return 1;
    }
    my_marker(c, step, &want);
    for (int i = 0; i < M_NMESH; i++)
        if (m->mesh[i] != want.mesh[i] && !width_word(i)) {
            fprintf(stderr,
                    "p3d-worker: rank %d: checkpoint %s/step-%08d was written with %s "
                    "%ld, this run has %ld: resume with the mesh it was written with "
                    "(only dp may differ), or use another --checkpoint-dir\n",
                    rank, c->dir, step, ck_marker_field[i], m->mesh[i], want.mesh[i]);
            return 2;
        }
    return 0;
}

/* Reads and checks my shard of `step` (of the marker's generation gen) into
 * params/losses.  Returns 0 when good, 1 when missing or corrupt (warning
 * printed), 2 when it belongs to another mesh or model (error printed). */
static int read_shard(const p3dw_ckpt *c, int step, int sdfd, long gen, int src, int cross, float *params,
                      size_t nparam, double *losses)
{
    char name[64];
    uint64_t want[H_NWORDS], got[H_NWORDS];
    int rank = c->e->rank, rc = 1;
    const char *why = NULL;
    snprintf(name, sizeof name, "rank-%05d.gen-%ld.bin", src, gen);
    fill_header(c, want, step, nparam, gen);
    want[H_RANK] = (uint64_t)src;
    int fd = ck_open_regular(sdfd, name, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        fprintf(stderr,
                "p3d-worker: warning: rank %d: %s/step-%08d/%s %s; ignoring checkpoint "
                "step %d\n",
                rank, c->dir, step, name, why ? why : strerror(errno), step);
        return 1;
    }
    if (fread(got, sizeof got, 1, f) != 1 || got[H_MAGIC] != CK_MAGIC || got[H_VERSION] != CK_VERSION) {
        fprintf(stderr,
                "p3d-worker: warning: rank %d: %s/step-%08d/%s is not a p3d-worker "
                "checkpoint shard (version %u) or is truncated; ignoring checkpoint step "
                "%d\n",
                rank, c->dir, step, name, CK_VERSION, step);
        goto out;
    }
    if (got[H_GEN] != want[H_GEN] || got[H_STEP] != want[H_STEP] || got[H_RANK] != want[H_RANK]) {
        fprintf(stderr,
                "p3d-worker: warning: rank %d: %s/step-%08d/%s holds step %llu, rank "
                "%llu, generation %llu, not what its name says; ignoring checkpoint step "
                "%d\n",
                rank, c->dir, step, name, (unsigned long long)got[H_STEP], (unsigned long long)got[H_RANK],
                (unsigned long long)got[H_GEN], step);
        goto out;
    }
    for (int i = H_WORLD; i < H_SUM; i++) {
        if (i == H_NLOSS || i == H_GEN || i == H_RANK)
            continue; /* --steps may change between runs; the others checked above */
        if (cross && (i == H_WORLD || i == H_DP || i == H_EDP || i == H_CDP))
            continue; /* another width: another replica's copy of the same weights */
        if (got[i] != want[i]) {
            fprintf(stderr,
                    "p3d-worker: rank %d: checkpoint shard %s/step-%08d/%s was written "
                    "with %s %llu, this run has %llu: resume with the mesh and model "
                    "options it was written with, or use another --checkpoint-dir\n",
                    rank, c->dir, step, name, h_name[i], (unsigned long long)got[i], (unsigned long long)want[i]);
            rc = 2;
            goto out;
        }
    }
    size_t nloss = (size_t)got[H_NLOSS];
    if (nloss > (1u << 20)) { /* --steps' bound: a larger count is corrupt */
        fprintf(stderr,
                "p3d-worker: warning: rank %d: %s/step-%08d/%s: loss count %zu is out "
                "of range (corrupt); ignoring checkpoint step %d\n",
                rank, c->dir, step, name, nloss, step);
        goto out;
    }
    float *p = malloc(sizeof *p * (nparam ? nparam : 1));
    double *l = malloc(sizeof *l * (nloss ? nloss : 1));
    int ok =
        p && l && fread(p, sizeof *p, nparam, f) == nparam && fread(l, sizeof *l, nloss, f) == nloss && fgetc(f) == EOF;
    uint64_t sum = ok ? fnv1a(fnv1a(0xcbf29ce484222325ull, p, sizeof *p * nparam), l, sizeof *l * nloss) : 0;
    if (!ok || sum != got[H_SUM]) {
        fprintf(stderr,
                "p3d-worker: warning: rank %d: %s/step-%08d/%s: %s; ignoring checkpoint "
                "step %d\n",
                rank, c->dir, step, name, !ok ? "wrong size (truncated?)" : "checksum mismatch (corrupt)", step);
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

/* A checkpoint written at another data-parallel width (old_world ranks):
 * the shard of an old rank with my tp, pp and ep coordinates, which holds
 * the weights this rank needs (every replica holds the same; the experts
 * are sharded over ep and etp = tp, never over the replicas). Its rank, or
 * -1 (warning printed) when no shard of generation gen has them. */
static int find_source(const p3dw_ckpt *c, int step, int sdfd, long gen, long old_world)
{
    const p3dw_env *e = c->e;
    for (long r = 0; r < old_world && r < (1L << 24); r++) {
        char name[64];
        uint64_t h[H_NWORDS];
        const char *why = NULL;
        snprintf(name, sizeof name, "rank-%05ld.gen-%ld.bin", r, gen);
        int fd = ck_open_regular(sdfd, name, &why), ok = 0;
        if (fd < 0)
            continue;
        ok = read(fd, h, sizeof h) == (ssize_t)sizeof h && h[H_MAGIC] == CK_MAGIC && h[H_VERSION] == CK_VERSION &&
             h[H_GEN] == (uint64_t)gen && h[H_RANK] == (uint64_t)r && h[H_CTP] == (uint64_t)e->coord[P3DW_TP] &&
             h[H_CPP] == (uint64_t)e->coord[P3DW_PP] && h[H_CEP] == (uint64_t)e->coord[P3DW_EP];
        close(fd);
        if (ok)
            return (int)r;
    }
    fprintf(stderr,
            "p3d-worker: warning: rank %d: %s/step-%08d: no shard of generation %ld holds tp %d, pp %d, "
            "ep %d (written at another width); ignoring checkpoint step %d\n",
            e->rank, c->dir, step, gen, e->coord[P3DW_TP], e->coord[P3DW_PP], e->coord[P3DW_EP], step);
    return -1;
}

/* My proposal for step: 0 good, 1 unusable, 2 another mesh/model. A step
 * written at another dp is read from the old rank with my tp, pp and ep. */
static int try_step(const p3dw_ckpt *c, int step, float *params, size_t nparam, double *losses)
{
    char msg[256];
    marker m;
    int sdfd = ck_open_step(c, step, 0, msg, sizeof msg);
    if (sdfd < 0) {
        fprintf(stderr,
                "p3d-worker: warning: rank %d: %s/step-%08d %s; ignoring checkpoint "
                "step %d\n",
                c->e->rank, c->dir, step, msg, step);
        return 1;
    }
    int v = step_marker(c, step, sdfd, &m);
    int cross = v == 0 && m.mesh[M_DP] != c->e->size[P3DW_DP];
    int src = cross ? find_source(c, step, sdfd, m.gen, m.mesh[M_WORLD]) : c->e->rank;
    if (v == 0 && src < 0)
        v = 1;
    if (v == 0)
        v = read_shard(c, step, sdfd, m.gen, src, cross, params, nparam, losses);
    if (v == 0 && cross && c->e->rank == 0)
        fprintf(stderr,
                "p3d-worker: checkpoint step %d was written at dp %ld; resuming at dp %d (each rank "
                "reads the shard of its tp, pp and ep)\n",
                step, m.mesh[M_DP], c->e->size[P3DW_DP]);
    close(sdfd);
    return v;
}

int p3dw_ckpt_load(const p3dw_ckpt *c, float *params, size_t nparam, double *losses)
{
    int n = 0, rc = -1, world = c->e->world, rank = c->e->rank;
    int *steps = ck_list_steps(c, &n), *all = malloc(sizeof *all * (size_t)world);
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
                    fprintf(stderr,
                            "p3d-worker: rank %d's checkpoint does not match this "
                            "run (see its message)\n",
                            r);
                rc = -2;
                goto out;
            }
            if (all[r] < lo)
                lo = all[r];
            same &= all[r] == all[0];
        }
        if (lo < 0) {
            if (rank == 0 && n > 0)
                fprintf(stderr,
                        "p3d-worker: warning: no checkpoint in %s is complete and good "
                        "on every rank; starting from step 0\n",
                        c->dir);
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
            int sdfd = ck_open_step(c, steps[k], 0, msg, sizeof msg);
            if (sdfd >= 0 && ck_read_marker(sdfd, &m, &why) == 1)
                fprintf(stderr,
                        "p3d-worker: warning: %s/step-%08d has no completion marker "
                        "(not every rank wrote its shard): ignored\n",
                        c->dir, steps[k]);
            if (sdfd >= 0)
                close(sdfd);
        }
        fprintf(stderr, "p3d-worker: resuming from checkpoint step %d in %s\n", rc, c->dir);
    }
    if (rc >= c->o->steps) {
        /* Nothing would run: a --verify or report of it would describe a
         * training that did not happen. */
        if (rank == 0)
            fprintf(stderr,
                    "p3d-worker: checkpoint step %d in %s is at or past --steps %d: "
                    "nothing left to train (exit 3); raise --steps to train on, or use "
                    "another --checkpoint-dir\n",
                    rc, c->dir, c->o->steps);
        rc = -3;
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
    int n = 0, kept = 0, *v = ck_list_steps(c, &n);
    for (int k = 0; v && k < n; k++) {
        char msg[256];
        const char *why;
        marker m;
        if (v[k] > newest)
            continue;
        int sdfd = ck_open_step(c, v[k], 0, msg, sizeof msg), complete = 0;
        if (sdfd >= 0) {
            complete = ck_read_marker(sdfd, &m, &why) == 0;
            close(sdfd);
        }
        if (complete && ++kept <= c->keep)
            continue;
        ck_remove_step(c, v[k]);
    }
    free(v);
}

/* Is step committed by a newer generation of this job?  Then this rank is a
 * stale copy that outlived its replacement (message printed): 1.  Else 0. */
static int fenced(const p3dw_ckpt *c, int step, int sdfd, const marker *me)
{
    marker m;
    const char *why;
    if (ck_read_marker(sdfd, &m, &why) != 0 || strcmp(m.job, me->job) != 0 || m.gen <= me->gen)
        return 0;
    fprintf(stderr,
            "p3d-worker: rank %d: %s/step-%08d was committed by generation %ld of this "
            "job, newer than this rank's P3D_GENERATION %ld: this rank is a stale copy "
            "(it was replaced); not writing into it, stopping\n",
            c->e->rank, c->dir, step, m.gen, me->gen);
    return 1;
}

int p3dw_ckpt_save(const p3dw_ckpt *c, int step, const float *params, size_t nparam, const double *losses)
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
    int sdfd = ck_open_step(c, step, 1, msg, sizeof msg);
    if (sdfd < 0) {
        fprintf(stderr, "p3d-worker: rank %d: checkpoint %s/step-%08d %s\n", rank, c->dir, step, msg);
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
        fprintf(stderr, "p3d-worker: rank %d: removing %s/step-%08d/%s: %s\n", rank, c->dir, step, MARKER,
                strerror(errno));
        ok = 0;
    }
    if (ok && ck_write_atomic(sdfd, name, part, len, 3, 0)) {
        fprintf(stderr, "p3d-worker: rank %d: writing checkpoint file %s/step-%08d/%s: %s\n", rank, c->dir, step, name,
                strerror(errno));
        ok = 0;
    }
    all = malloc(sizeof *all * (size_t)world);
    tcp_set_activity(c->w, "agreeing that every checkpoint shard is written");
    if (!all || tcp_world_allgather(c->w, &ok, all, sizeof ok))
        goto out;
    for (int r = 0; r < world; r++)
        if (!all[r]) {
            if (rank == 0)
                fprintf(stderr,
                        "p3d-worker: rank %d could not write its checkpoint shard of "
                        "step %d; stopping\n",
                        r, step);
            goto out;
        }
    if (rank == 0) {
        char body[MARKER_MAX];
        int m = ck_format_marker(&me, body, sizeof body);
        const void *bp[1] = {body};
        size_t bl[1] = {(size_t)(m > 0 ? m : 0)};
        /* link(), not rename(): a marker that appeared since the drop above
         * is not replaced blindly; a newer generation's fences me out, any
         * other is superseded by mine. */
        int w = m > 0 ? ck_write_atomic(sdfd, MARKER, bp, bl, 1, 1) : (errno = EOVERFLOW, -1);
        if (w && errno == EEXIST) {
            if (fenced(c, step, sdfd, &me))
                goto out;
            w = ck_write_atomic(sdfd, MARKER, bp, bl, 1, 0);
        }
        if (w) {
            fprintf(stderr, "p3d-worker: rank 0: writing checkpoint file %s/step-%08d/%s: %s\n", c->dir, step, MARKER,
                    strerror(errno));
            goto out;
        }
        prune(c, step);
        fprintf(stderr,
                "p3d-worker: checkpoint step %d written to %s/step-%08d (%d shards, "
                "generation %ld, %.3f s)\n",
                step, c->dir, step, world, me.gen, now_s() - t0);
    }
    rc = 0;
out:
    if (sdfd >= 0)
        close(sdfd);
    free(all);
    return rc;
}
