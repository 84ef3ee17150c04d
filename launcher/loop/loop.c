/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loop.c — the launcher's event loop (loop.h). One poll() per pass over
 * the watched fds (rebuilt from a dense table: O(fds), as many thousand
 * agent connections need; p3d_loop_pace bounds the passes), timers in a
 * small array (a process has a handful), children by pid.
 *
 * poll() is called in one place, loop_wait(); p3d_wait_fd uses it too.
 */
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct watcher {
    int fd, events;
    unsigned serial; /* which registration: readiness goes to that one only */
    p3d_io_fn fn;
    void *ctx;
} watcher;

typedef struct timer {
    unsigned id;
    double at;
    p3d_timer_fn fn;
    void *ctx;
} timer;

typedef struct childw {
    pid_t pid;
    p3d_child_fn fn;
    void *ctx;
} childw;

struct p3d_loop {
    watcher *w;
    int nw, capw;
    int *slot; /* fd -> index in w, -1 */
    int nslot;
    unsigned serial;
    timer *t;
    int nt, capt;
    unsigned next_id;
    childw *c;
    int nc, capc;
    p3d_child_fn cdef;
    void *cdef_ctx;
    int sfd;
    p3d_signal_fn sfn;
    void *sctx;
    struct {
        p3d_prepare_fn fn;
        void *ctx;
    } pre[8];
    int npre;
    double pace, last_pass;
    int stop;
    struct pollfd *pfd;
    unsigned *pser;
    int cappfd, capser;
};

double p3d_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int p3d_poll_ms(double deadline)
{
    if (deadline <= 0)
        return -1;
    double d = deadline - p3d_now();
    if (d <= 0)
        return 0;
    return d > 1e6 ? 1000000000 : (int)(d * 1000.0) + 1;
}

/* The one wait of the launcher. */
static int loop_wait(struct pollfd *pfd, int n, int ms)
{
    int r = poll(pfd, (nfds_t)n, ms);
    if (r < 0 && errno == EINTR)
        return 0;
    return r;
}

static int grow(void **p, int *cap, int need, size_t each)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap : 8;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, (size_t)nc * each);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

p3d_loop *p3d_loop_new(void)
{
    p3d_loop *l = calloc(1, sizeof *l);
    if (l)
        l->sfd = -1;
    return l;
}

void p3d_loop_free(p3d_loop *l)
{
    if (!l)
        return;
    if (l->sfd >= 0)
        close(l->sfd);
    free(l->w);
    free(l->slot);
    free(l->t);
    free(l->c);
    free(l->pfd);
    free(l->pser);
    free(l);
}

void p3d_loop_unwatch(p3d_loop *l, int fd)
{
    if (!l || fd < 0 || fd >= l->nslot || l->slot[fd] < 0)
        return;
    int i = l->slot[fd];
    l->slot[fd] = -1;
    if (i != l->nw - 1) {
        l->w[i] = l->w[l->nw - 1];
        l->slot[l->w[i].fd] = i;
    }
    l->nw--;
}

int p3d_loop_watch(p3d_loop *l, int fd, int events, p3d_io_fn fn, void *ctx)
{
    if (fd < 0)
        return 0;
    if (!events || !fn) {
        p3d_loop_unwatch(l, fd);
        return 0;
    }
    if (fd >= l->nslot) {
        int ns = l->nslot ? l->nslot : 64;
        while (ns <= fd)
            ns *= 2;
        int *s = realloc(l->slot, (size_t)ns * sizeof *s);
        if (!s)
            return -1;
        for (int k = l->nslot; k < ns; k++)
            s[k] = -1;
        l->slot = s;
        l->nslot = ns;
    }
    int i = l->slot[fd];
    if (i < 0) {
        if (grow((void **)&l->w, &l->capw, l->nw + 1, sizeof *l->w) < 0)
            return -1;
        i = l->nw++;
        l->slot[fd] = i;
    }
    l->w[i] = (watcher){.fd = fd, .events = events, .serial = ++l->serial, .fn = fn, .ctx = ctx};
    return 0;
}

unsigned p3d_loop_at(p3d_loop *l, double at, p3d_timer_fn fn, void *ctx)
{
    if (grow((void **)&l->t, &l->capt, l->nt + 1, sizeof *l->t) < 0)
        return 0;
    if (++l->next_id == 0)
        l->next_id = 1;
    l->t[l->nt++] = (timer){.id = l->next_id, .at = at, .fn = fn, .ctx = ctx};
    return l->next_id;
}

void p3d_loop_cancel(p3d_loop *l, unsigned id)
{
    for (int i = 0; l && id && i < l->nt; i++)
        if (l->t[i].id == id) {
            l->t[i] = l->t[--l->nt];
            return;
        }
}

int p3d_loop_child(p3d_loop *l, pid_t pid, p3d_child_fn fn, void *ctx)
{
    if (grow((void **)&l->c, &l->capc, l->nc + 1, sizeof *l->c) < 0)
        return -1;
    l->c[l->nc++] = (childw){.pid = pid, .fn = fn, .ctx = ctx};
    return 0;
}

void p3d_loop_child_forget(p3d_loop *l, pid_t pid)
{
    for (int i = 0; i < l->nc; i++)
        if (l->c[i].pid == pid) {
            l->c[i] = l->c[--l->nc];
            return;
        }
}

void p3d_loop_child_default(p3d_loop *l, p3d_child_fn fn, void *ctx)
{
    l->cdef = fn;
    l->cdef_ctx = ctx;
}

void p3d_loop_reap(p3d_loop *l)
{
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
        int i;
        for (i = 0; i < l->nc && l->c[i].pid != p; i++)
            ;
        if (i < l->nc) {
            childw c = l->c[i];
            l->c[i] = l->c[--l->nc];
            c.fn(l, p, st, c.ctx);
        } else if (l->cdef) {
            l->cdef(l, p, st, l->cdef_ctx);
        }
    }
}

static void on_signalfd(p3d_loop *l, int fd, int revents, void *ctx)
{
    (void)revents;
    (void)ctx;
    struct signalfd_siginfo si;
    int chld = 0;
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            chld = 1; /* coalesced: one reap takes them all */
        else if (l->sfn)
            l->sfn(l, (int)si.ssi_signo, l->sctx);
    }
    if (chld)
        p3d_loop_reap(l);
}

int p3d_loop_signals(p3d_loop *l, int sfd, p3d_signal_fn fn, void *ctx)
{
    if (l->sfd >= 0 && l->sfd != sfd) {
        p3d_loop_unwatch(l, l->sfd);
        close(l->sfd);
    }
    l->sfd = sfd;
    l->sfn = fn;
    l->sctx = ctx;
    return p3d_loop_watch(l, sfd, P3D_LOOP_IN, on_signalfd, NULL);
}

int p3d_loop_prepare(p3d_loop *l, p3d_prepare_fn fn, void *ctx)
{
    if (l->npre >= (int)(sizeof l->pre / sizeof l->pre[0]))
        return -1;
    l->pre[l->npre].fn = fn;
    l->pre[l->npre++].ctx = ctx;
    return 0;
}

void p3d_loop_pace(p3d_loop *l, double gap)
{
    l->pace = gap;
}

void p3d_loop_stop(p3d_loop *l)
{
    l->stop = 1;
}

int p3d_loop_stopped(const p3d_loop *l)
{
    return l->stop;
}

static double earliest(double a, double b)
{
    return a > 0 && (b <= 0 || a < b) ? a : b;
}

/* Every timer due by now, earliest first; one that a callback adds for
 * a time already past runs in the next pass. */
static void run_timers(p3d_loop *l)
{
    double now = p3d_now();
    unsigned last = l->next_id;
    for (;;) {
        int best = -1;
        for (int i = 0; i < l->nt; i++)
            if (l->t[i].at <= now && l->t[i].id <= last && (best < 0 || l->t[i].at < l->t[best].at))
                best = i;
        if (best < 0 || l->stop)
            return;
        timer t = l->t[best];
        l->t[best] = l->t[--l->nt];
        t.fn(l, t.ctx);
    }
}

int p3d_loop_once(p3d_loop *l, double until)
{
    double dl = until;
    for (int i = 0; i < l->npre && !l->stop; i++)
        dl = earliest(l->pre[i].fn(l, p3d_now(), l->pre[i].ctx), dl);
    if (l->stop)
        return 0;
    for (int i = 0; i < l->nt; i++)
        dl = earliest(l->t[i].at, dl);
    if (grow((void **)&l->pfd, &l->cappfd, l->nw + 1, sizeof *l->pfd) < 0) {
        errno = ENOMEM;
        return -1;
    }
    if (l->cappfd > l->capser) {
        unsigned *ps = realloc(l->pser, (size_t)l->cappfd * sizeof *ps);
        if (!ps) {
            errno = ENOMEM;
            return -1;
        }
        l->pser = ps;
        l->capser = l->cappfd;
    }
    int n = 0, ms = p3d_poll_ms(dl);
    double now = p3d_now();
    if (l->pace > 0 && l->last_pass > 0 && now - l->last_pass < l->pace && ms != 0) {
        /* paced: until the gap is over only a signal wakes us (a timer
         * may be late by the gap); then what came meanwhile is taken in
         * one pass */
        int pm = (int)((l->last_pass + l->pace - now) * 1000.0) + 1;
        struct pollfd s = {.fd = l->sfd, .events = POLLIN};
        if (loop_wait(&s, l->sfd >= 0, pm) < 0)
            return -1;
        ms = 0;
    }
    for (int i = 0; i < l->nw; i++) {
        l->pfd[n] = (struct pollfd){.fd = l->w[i].fd,
                                    .events = (short)(((l->w[i].events & P3D_LOOP_IN) ? POLLIN : 0) |
                                                      ((l->w[i].events & P3D_LOOP_OUT) ? POLLOUT : 0))};
        l->pser[n++] = l->w[i].serial;
    }
    int pr = loop_wait(l->pfd, n, ms);
    if (pr < 0)
        return -1;
    l->last_pass = p3d_now();
    /* the set may change under us: copy what was ready first */
    int nready = 0;
    for (int k = 0; k < n && nready < pr; k++)
        if (l->pfd[k].revents) {
            l->pfd[nready] = l->pfd[k];
            l->pser[nready++] = l->pser[k];
        }
    for (int k = 0; k < nready && !l->stop; k++) {
        int fd = l->pfd[k].fd;
        if (fd >= l->nslot || l->slot[fd] < 0)
            continue;
        watcher *w = &l->w[l->slot[fd]];
        if (w->serial != l->pser[k])
            continue;
        short re = l->pfd[k].revents;
        int ev = 0;
        if (re & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
            ev |= (w->events & P3D_LOOP_IN) ? P3D_LOOP_IN : P3D_LOOP_OUT;
        if (re & POLLOUT)
            ev |= P3D_LOOP_OUT;
        if (re & POLLNVAL) {
            /* closed without unwatching: drop it, or it spins */
            p3d_io_fn fn = w->fn;
            void *ctx = w->ctx;
            p3d_loop_unwatch(l, fd);
            fn(l, fd, ev, ctx);
            continue;
        }
        w->fn(l, fd, ev & w->events ? ev & w->events : ev, w->ctx);
    }
    if (!l->stop)
        run_timers(l);
    return 0;
}

int p3d_loop_run(p3d_loop *l)
{
    while (!l->stop)
        if (p3d_loop_once(l, 0) < 0)
            return -1;
    return 0;
}

int p3d_wait_fd(int fd, int events, double until)
{
    struct pollfd p = {.fd = fd,
                       .events =
                           (short)(((events & P3D_LOOP_IN) ? POLLIN : 0) | ((events & P3D_LOOP_OUT) ? POLLOUT : 0))};
    for (;;) {
        int ms = p3d_poll_ms(until);
        int r = loop_wait(&p, fd >= 0, ms);
        if (r != 0)
            return r < 0 ? -1 : 1;
        if (ms == 0 || (until > 0 && p3d_now() >= until))
            return 0;
    }
}
