/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * progress.c — the ranks' progress lines (docs/launch.md, "Progress and
 * slow nodes") and the node summary an agent sends upstream.
 *
 * Every rank gets P3D_HEARTBEAT=RUN_DIR/heartbeat/rank-R. A touch is a
 * heartbeat (hang.c); a rank may also put one line in it after each step:
 *
 *   step=N busy=SECONDS[ ckpt=STEP]
 *
 * The file is written by the rank, so it is input: read with a bound
 * (P3D_PROGRESS_MAX bytes, never through a symlink, never a FIFO),
 * parsed strictly (digits only, no sign, no exponent, one space between
 * fields), and a rank that writes anything else gets one warning for the
 * job and is ignored until it writes a good line again. An empty file is
 * a plain heartbeat, not garbage.
 *
 * The agent reads the files on its own timer (--progress-interval, never
 * more often) and sends one P message per interval, and only when some
 * rank's step advanced: a few bytes per node per interval, whatever the
 * number of ranks.
 *
 * It also tells when the node's ranks of a generation first showed life
 * (a heartbeat file touched, or an output line, whichever comes first):
 * one V packet per generation, from which the controller gives the time
 * from a failure to training resumed, beside the respawn time. The
 * directory is watched with inotify only until that first sign, so that
 * an idle job still wakes only for its deadlines.
 */
#include "ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

struct p3d_progwatch {
    char dir[PATH_MAX];
    int n;
    const int *ranks; /* global ranks, local order (borrowed) */
    int gen;
    p3d_progress *last;    /* the last good line of each rank this generation */
    unsigned char *have;   /* last[i] is valid */
    unsigned char *warned; /* rank i was told about garbage (once a job) */
    long long sent_sum;    /* sum of the steps when the last summary went */
    int sent_ckpt;         /* and its checkpoint (-1 none) */
    double *scratch;
    int dfd;        /* dir, opened once (hbdir.c) */
    int ifd, wd;    /* inotify on dir until this generation's first
                             sign (wd -1: not watched now) */
    int signed_gen; /* generation whose first sign was seen, -1 */
};

/* Digits [lo, hi] of s at *p: the value, or -1 when there are none or too
 * many. Advances *p. */
static long long digits(const char *s, size_t len, size_t *p, int maxd)
{
    long long v = 0;
    int nd = 0;
    while (*p < len && s[*p] >= '0' && s[*p] <= '9') {
        if (++nd > maxd)
            return -1;
        v = v * 10 + (s[*p] - '0');
        (*p)++;
    }
    return nd ? v : -1;
}

static int word(const char *s, size_t len, size_t *p, const char *w)
{
    size_t l = strlen(w);
    if (*p + l > len || memcmp(s + *p, w, l))
        return 0;
    *p += l;
    return 1;
}

int p3d_progress_parse(const char *s, size_t len, p3d_progress *out)
{
    size_t p = 0;
    p3d_progress v = {.ckpt = -1};
    if (len == 0 || (len == 1 && s[0] == '\n'))
        return 0;
    if (!word(s, len, &p, "step="))
        return -1;
    long long step = digits(s, len, &p, 10);
    if (step < 0 || step > INT_MAX || !word(s, len, &p, " busy="))
        return -1;
    long long whole = digits(s, len, &p, 7);
    if (whole < 0)
        return -1;
    double busy = (double)whole;
    if (p < len && s[p] == '.') {
        p++;
        double scale = 0.1;
        int nd = 0;
        while (p < len && s[p] >= '0' && s[p] <= '9') {
            if (++nd > 9)
                return -1;
            busy += (s[p] - '0') * scale;
            scale /= 10;
            p++;
        }
        if (!nd)
            return -1;
    }
    if (word(s, len, &p, " ckpt=")) {
        long long c = digits(s, len, &p, 10);
        if (c < 0 || c > INT_MAX)
            return -1;
        v.ckpt = (int)c;
    }
    if (p < len && s[p] == '\n')
        p++;
    if (p != len)
        return -1;
    v.step = (int)step;
    v.busy = busy;
    *out = v;
    return 1;
}

int p3d_progress_new(const p3d_launch *L, const int *ranks, int nlocal, p3d_progwatch **out, char **err)
{
    p3d_progwatch *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w)
        return p3d_err(err, "out of memory");
    w->n = nlocal;
    w->ranks = ranks;
    w->ifd = w->wd = w->signed_gen = w->dfd = w->sent_ckpt = -1;
    w->last = calloc((size_t)nlocal + 1, sizeof *w->last);
    w->have = calloc((size_t)nlocal + 1, 1);
    w->warned = calloc((size_t)nlocal + 1, 1);
    w->scratch = calloc((size_t)nlocal + 1, sizeof *w->scratch);
    snprintf(w->dir, sizeof w->dir, "%s/heartbeat", L->run_dir);
    if (!w->last || !w->have || !w->warned || !w->scratch) {
        p3d_progress_free(w);
        return p3d_err(err, "out of memory");
    }
    if ((w->dfd = p3d_hbdir_open(w->dir, err)) < 0) {
        p3d_progress_free(w);
        return -1;
    }
    if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
        p3d_err(err, "cannot watch the heartbeat directory %s: %s", w->dir, strerror(errno));
        p3d_progress_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

void p3d_progress_free(p3d_progwatch *w)
{
    if (!w)
        return;
    /* the ranks' heartbeat files are the job's scratch: a kept run dir
     * holds only the placement and the event log (docs/launch.md); the
     * last agent to leave removes the directory */
    for (int i = 0; i < w->n && w->ranks; i++)
        p3d_hbdir_unlink_rank(w->dfd, w->ranks[i]);
    p3d_hbdir_remove(w->dfd, w->dir);
    if (w->dfd >= 0)
        close(w->dfd);
    if (w->ifd >= 0)
        close(w->ifd);
    free(w->last);
    free(w->have);
    free(w->warned);
    free(w->scratch);
    free(w);
}

void p3d_progress_generation(p3d_progwatch *w, int gen)
{
    if (!w)
        return;
    w->gen = gen;
    w->sent_sum = 0;
    w->sent_ckpt = -1;
    for (int i = 0; i < w->n; i++) {
        p3d_hbdir_unlink_rank(w->dfd, w->ranks[i]); /* the new generation's lines only */
        w->have[i] = 0;
    }
    /* what the old generation left queued is not the new one's sign; the
     * watch is armed after the unlinks: only new touches count */
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (w->ifd >= 0 && read(w->ifd, buf, sizeof buf) > 0)
        ;
    if (w->ifd >= 0 && w->wd < 0)
        w->wd = p3d_hbdir_watch(w->ifd, w->dfd, IN_CREATE | IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO);
}

int p3d_progress_fd(const p3d_progwatch *w)
{
    return w ? w->ifd : -1;
}

int p3d_progress_sign(p3d_progwatch *w, p3d_amsg *m)
{
    if (!w || w->signed_gen == w->gen)
        return 0;
    w->signed_gen = w->gen;
    if (w->wd >= 0) {
        /* the rest of the generation's touches are hang.c's business */
        inotify_rm_watch(w->ifd, w->wd);
        w->wd = -1;
    }
    *m = (p3d_amsg){.type = P3D_AM_RESUMED, .gen = w->gen};
    return 1;
}

int p3d_progress_events(p3d_progwatch *w, p3d_amsg *m)
{
    if (!w || w->ifd < 0)
        return 0;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int seen = 0;
    for (;;) {
        ssize_t n = read(w->ifd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            int r;
            char tail;
            /* a rank's own file, not whatever else lands in the directory */
            if (ev->len && sscanf(ev->name, "rank-%d%c", &r, &tail) == 1)
                for (int i = 0; i < w->n; i++)
                    seen |= w->ranks[i] == r;
            p += sizeof *ev + ev->len;
        }
    }
    return seen ? p3d_progress_sign(w, m) : 0;
}

/* What a rank wrote, for a message: printable ASCII, at most 40 bytes. */
static void shown(const char *s, size_t len, char *buf, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 4 < cap && i < 40; i++)
        buf[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (len > 40 && k + 4 < cap) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = 0;
}

/* One rank's file: 1 a good line in *p, 0 none (no file, empty), -1
 * garbage (why in buf). */
static int read_one(int dfd, const char *name, p3d_progress *p, char *why, size_t cap)
{
    int fd = dfd < 0 ? -1 : openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP) {
            snprintf(why, cap, "is a symbolic link");
            return -1;
        }
        return 0;
    }
    struct stat st;
    char buf[P3D_PROGRESS_MAX + 1];
    ssize_t n = 0;
    int rc = -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, cap, "is not a regular file");
        goto out;
    }
    while ((n = read(fd, buf, sizeof buf)) < 0 && errno == EINTR)
        ;
    if (n < 0) {
        rc = 0;
        goto out;
    }
    if ((size_t)n > P3D_PROGRESS_MAX) {
        snprintf(why, cap, "holds more than %d bytes", P3D_PROGRESS_MAX);
        goto out;
    }
    rc = p3d_progress_parse(buf, (size_t)n, p);
    if (rc < 0) {
        char s[64];
        shown(buf, (size_t)n, s, sizeof s);
        snprintf(why, cap, "holds '%s'", s);
    }
out:
    close(fd);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int p3d_progress_sample(p3d_progwatch *w, p3d_amsg *m, char **warn)
{
    if (!w)
        return 0;
    long long sum = 0;
    int nrep = 0, minstep = INT_MAX, ckpt = INT_MAX;
    for (int i = 0; i < w->n; i++) {
        char name[32], path[PATH_MAX + 32], why[160];
        p3d_progress p;
        snprintf(name, sizeof name, "rank-%d", w->ranks[i]);
        snprintf(path, sizeof path, "%s/%s", w->dir, name); /* for the message only */
        int r = read_one(w->dfd, name, &p, why, sizeof why);
        if (r < 0 && !w->warned[i]) {
            w->warned[i] = 1;
            p3d_str_appendf(warn, "",
                            "par3drun: warning: rank %d: its progress file %s %s; expected one line "
                            "'step=N busy=SECONDS[ ckpt=STEP]' (docs/launch.md); ignored (said once)\n",
                            w->ranks[i], path, why);
        }
        if (r > 0) {
            w->last[i] = p;
            w->have[i] = 1;
        }
        if (!w->have[i])
            continue;
        sum += w->last[i].step;
        w->scratch[nrep++] = w->last[i].busy;
        if (w->last[i].step < minstep)
            minstep = w->last[i].step;
        /* the newest checkpoint every reporting rank holds */
        int c = w->last[i].ckpt;
        if (c < ckpt)
            ckpt = c;
    }
    int newckpt = ckpt == INT_MAX ? -1 : ckpt;
    /* no rank made a step since the last summary, and no checkpoint came
     * (a preempted rank checkpoints the step it already reported) */
    if (!nrep || (sum <= w->sent_sum && newckpt <= w->sent_ckpt))
        return 0;
    w->sent_sum = sum;
    w->sent_ckpt = newckpt;
    qsort(w->scratch, (size_t)nrep, sizeof *w->scratch, cmp_double);
    double med = nrep % 2 ? w->scratch[nrep / 2] : (w->scratch[nrep / 2 - 1] + w->scratch[nrep / 2]) / 2;
    double us = med * 1e6 + 0.5;
    *m = (p3d_amsg){.type = P3D_AM_PROGRESS,
                    .gen = w->gen,
                    .step = minstep,
                    .busy_us = us > INT_MAX ? INT_MAX : (int)us,
                    .ckpt = newckpt,
                    .nranks = nrep};
    return 1;
}

int p3d_progress_step(p3d_progwatch *w, int i)
{
    if (!w || i < 0 || i >= w->n)
        return -1;
    char name[32], why[160];
    p3d_progress p;
    snprintf(name, sizeof name, "rank-%d", w->ranks[i]);
    /* the file as the rank left it; a garbled one falls back on the last
     * good line of this generation */
    if (read_one(w->dfd, name, &p, why, sizeof why) > 0)
        return p.step;
    return w->have[i] ? w->last[i].step : -1;
}
