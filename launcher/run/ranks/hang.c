/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hang.c — --hang-timeout: which of an agent's ranks are hung.
 *
 * Every rank gets P3D_HEARTBEAT=RUN_DIR/heartbeat/rank-R (rank_env.c). A
 * rank that has touched its file once is watched: if it then neither
 * touches it nor prints anything for --hang-timeout seconds, it is hung.
 * The files are watched with inotify (a touch is an event, not something
 * found by polling), so an idle job still wakes only for its deadlines.
 */
#include "ranks.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

struct p3d_hangwatch {
    double timeout, grace;
    int sig;
    int fd;  /* inotify */
    int dfd; /* dir, opened once (hbdir.c) */
    char dir[PATH_MAX];
    int n;
    const int *ranks; /* global ranks, local order (borrowed) */
    double *last;     /* last sign of life; 0: not armed yet */
    double *hung_at;  /* 0: not hung */
};

int p3d_signal_parse(const char *s, int *sig, char **err)
{
    const char *name = !strncmp(s, "SIG", 3) ? s + 3 : s;
    char *end;
    long v = strtol(s, &end, 10);
    if (end != s && !*end && v > 0 && v < NSIG) {
        *sig = (int)v;
        return 0;
    }
    for (int k = 1; k < NSIG; k++) {
        const char *a = sigabbrev_np(k);
        if (a && !strcmp(a, name)) {
            *sig = k;
            return 0;
        }
    }
    return p3d_err(err, "--hang-signal '%s': expected a signal name (ABRT, SIGUSR1, ...) or number 1-%d", s, NSIG - 1);
}

int p3d_hang_new(const p3d_launch *L, const int *ranks, int nlocal, p3d_hangwatch **out, char **err)
{
    *out = NULL;
    if (L->o->hang_timeout <= 0)
        return 0;
    p3d_hangwatch *w = calloc(1, sizeof *w);
    if (!w)
        return p3d_err(err, "out of memory");
    w->fd = w->dfd = -1;
    w->timeout = L->o->hang_timeout;
    w->grace = L->o->grace;
    w->sig = SIGABRT;
    w->n = nlocal;
    w->ranks = ranks;
    w->last = calloc((size_t)nlocal + 1, sizeof *w->last);
    w->hung_at = calloc((size_t)nlocal + 1, sizeof *w->hung_at);
    snprintf(w->dir, sizeof w->dir, "%s/heartbeat", L->run_dir);
    if (!w->last || !w->hung_at) {
        p3d_hang_free(w);
        return p3d_err(err, "out of memory");
    }
    if ((L->o->hang_signal && p3d_signal_parse(L->o->hang_signal, &w->sig, err) < 0)) {
        p3d_hang_free(w);
        return -1;
    }
    if ((w->dfd = p3d_hbdir_open(w->dir, err)) < 0) {
        p3d_hang_free(w);
        return -1;
    }
    if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0 ||
        p3d_hbdir_watch(w->fd, w->dfd, IN_CREATE | IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
        p3d_err(err, "--hang-timeout: cannot watch %s: %s", w->dir, strerror(errno));
        p3d_hang_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

void p3d_hang_free(p3d_hangwatch *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->dfd >= 0)
        close(w->dfd);
    free(w->last);
    free(w->hung_at);
    free(w);
}

int p3d_hang_fd(const p3d_hangwatch *w)
{
    return w ? w->fd : -1;
}

void p3d_hang_generation(p3d_hangwatch *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        p3d_hbdir_unlink_rank(w->dfd, w->ranks[i]); /* a new generation arms itself by touching it again */
        w->last[i] = w->hung_at[i] = 0;
    }
}

void p3d_hang_events(p3d_hangwatch *w, double now)
{
    if (!w)
        return;
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n <= 0)
            return;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            int r;
            char tail;
            if (ev->len && sscanf(ev->name, "rank-%d%c", &r, &tail) == 1)
                for (int i = 0; i < w->n; i++)
                    if (w->ranks[i] == r && !w->hung_at[i])
                        w->last[i] = now;
            p += sizeof *ev + ev->len;
        }
    }
}

void p3d_hang_activity(p3d_hangwatch *w, int i, double now)
{
    if (w && w->last[i] > 0 && !w->hung_at[i])
        w->last[i] = now;
}

double p3d_hang_deadline(const p3d_hangwatch *w, const pid_t *pid)
{
    double d = 0;
    for (int i = 0; w && i < w->n; i++) {
        if (pid[i] <= 0 || !w->last[i] || w->hung_at[i] < 0)
            continue;
        double t = w->hung_at[i] ? w->hung_at[i] + w->grace : w->last[i] + w->timeout;
        if (!d || t < d)
            d = t;
    }
    return d;
}

int p3d_hang_check(p3d_hangwatch *w, const pid_t *pid, double now)
{
    for (int i = 0; w && i < w->n; i++) {
        if (pid[i] <= 0 || !w->last[i] || w->hung_at[i] < 0)
            continue;
        if (w->hung_at[i] > 0 && now >= w->hung_at[i] + w->grace) {
            killpg(pid[i], SIGKILL); /* the hang signal did not end it */
            w->hung_at[i] = -1;
        } else if (!w->hung_at[i] && now >= w->last[i] + w->timeout) {
            w->hung_at[i] = now;
            killpg(pid[i], w->sig);
            killpg(pid[i], SIGCONT); /* a stopped rank gets it now */
            return i;
        }
    }
    return -1;
}

int p3d_hang_is_hung(const p3d_hangwatch *w, int i)
{
    return w && w->hung_at[i] != 0;
}

int p3d_hang_signal(const p3d_hangwatch *w)
{
    return w ? w->sig : 0;
}

double p3d_hang_timeout(const p3d_hangwatch *w)
{
    return w ? w->timeout : 0;
}
