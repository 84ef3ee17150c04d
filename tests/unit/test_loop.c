/* SPDX-License-Identifier: BSD-3-Clause */
/* test_loop.c — the launcher's event loop (launcher/loop/loop.h): timers
 * in time order and cancelled ones never, fd readiness, watchers changed
 * from inside callbacks (a closed fd whose number is reused gets no stale
 * readiness), children through the signalfd, prepare-hook deadlines,
 * pacing, and p3d_wait_fd. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "loop.h"

static int order[16], norder;

static void tmark(p3d_loop *l, void *ctx)
{
    (void)l;
    order[norder++] = (int)(intptr_t)ctx;
}

static void t_timers(void **st)
{
    (void)st;
    p3d_loop *l = p3d_loop_new();
    double t = p3d_now();
    norder = 0;
    p3d_loop_at(l, t + 0.03, tmark, (void *)3);
    p3d_loop_at(l, t + 0.01, tmark, (void *)1);
    unsigned c = p3d_loop_at(l, t + 0.02, tmark, (void *)2);
    p3d_loop_at(l, t + 0.015, tmark, (void *)4);
    p3d_loop_cancel(l, c);
    p3d_loop_cancel(l, c); /* twice: nothing */
    while (norder < 3)
        assert_int_equal(p3d_loop_once(l, t + 1), 0);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 4);
    assert_int_equal(order[2], 3);
    assert_true(p3d_now() - t >= 0.03);
    p3d_loop_free(l);
}

typedef struct rd {
    int got, fd2, closed;
    p3d_loop *l;
} rd;

static void on_read(p3d_loop *l, int fd, int ev, void *ctx)
{
    rd *r = ctx;
    char b[16];
    assert_true(ev & P3D_LOOP_IN);
    ssize_t n = read(fd, b, sizeof b);
    if (n <= 0) {
        p3d_loop_unwatch(l, fd);
        r->closed++;
        return;
    }
    r->got += (int)n;
}

/* closes the other pipe's read end and opens a new fd that gets its number:
 * the readiness seen for the old one this pass must not reach the new */
static void on_first(p3d_loop *l, int fd, int ev, void *ctx)
{
    rd *r = ctx;
    (void)ev;
    char b[16];
    if (read(fd, b, sizeof b) < 0)
        fail();
    p3d_loop_unwatch(l, r->fd2);
    close(r->fd2);
    int p[2];
    assert_int_equal(pipe(p), 0);
    /* lowest free number: the one just closed */
    if (p[0] != r->fd2) {
        int d = dup2(p[0], r->fd2);
        assert_int_equal(d, r->fd2);
        close(p[0]);
    }
    assert_int_equal(p3d_loop_watch(l, r->fd2, P3D_LOOP_IN, on_read, r), 0);
    r->closed = p[1]; /* keep the new write end; nothing written */
    r->got = 100;
}

static void t_fds(void **st)
{
    (void)st;
    p3d_loop *l = p3d_loop_new();
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    rd r = {.fd2 = b[0], .l = l};
    assert_int_equal(p3d_loop_watch(l, a[0], P3D_LOOP_IN, on_first, &r), 0);
    assert_int_equal(p3d_loop_watch(l, b[0], P3D_LOOP_IN, on_read, &r), 0);
    /* both ready in the same pass; whichever runs first, the b watcher must
     * not see a stale readiness on the new fd (it would block or read 0) */
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "yy", 2), 2);
    assert_int_equal(p3d_loop_once(l, p3d_now() + 1), 0);
    /* on_first ran; if b's read ran first it added 2 before 100 was set */
    assert_true(r.got == 100);
    /* the new fd is quiet: a pass with a short bound reads nothing */
    assert_int_equal(p3d_loop_once(l, p3d_now() + 0.02), 0);
    assert_int_equal(r.got, 100);
    close(r.closed);
    /* its write end closed: EOF arrives as IN, the watcher removes itself */
    r.closed = 0;
    assert_int_equal(p3d_loop_once(l, p3d_now() + 1), 0);
    assert_int_equal(r.closed, 1);
    p3d_loop_unwatch(l, a[0]);
    close(a[0]);
    close(a[1]);
    close(b[1]);
    close(r.fd2);
    p3d_loop_free(l);
}

static int child_status = -1;
static pid_t child_pid;
static int sig_seen;

static void on_child(p3d_loop *l, pid_t pid, int status, void *ctx)
{
    (void)ctx;
    child_pid = pid;
    child_status = status;
    p3d_loop_stop(l);
}

static void on_sig(p3d_loop *l, int signo, void *ctx)
{
    (void)l;
    (void)ctx;
    sig_seen = signo;
}

static void t_children_signals(void **st)
{
    (void)st;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGCHLD);
    sigaddset(&s, SIGUSR1);
    sigprocmask(SIG_BLOCK, &s, NULL);
    int sfd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
    assert_true(sfd >= 0);
    p3d_loop *l = p3d_loop_new();
    assert_int_equal(p3d_loop_signals(l, sfd, on_sig, NULL), 0);
    pid_t p = fork();
    if (p == 0)
        _exit(7);
    assert_int_equal(p3d_loop_child(l, p, on_child, NULL), 0);
    kill(getpid(), SIGUSR1);
    double t = p3d_now();
    while (!p3d_loop_stopped(l) && p3d_now() - t < 5)
        assert_int_equal(p3d_loop_once(l, p3d_now() + 1), 0);
    assert_int_equal(child_pid, p);
    assert_true(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 7);
    assert_int_equal(sig_seen, SIGUSR1);
    p3d_loop_free(l); /* closes sfd */
    sigprocmask(SIG_UNBLOCK, &s, NULL);
}

static int hook_calls;

static double hook(p3d_loop *l, double now, void *ctx)
{
    (void)l;
    hook_calls++;
    return now + *(double *)ctx;
}

static void t_prepare_pace_wait(void **st)
{
    (void)st;
    p3d_loop *l = p3d_loop_new();
    double in = 0.02;
    assert_int_equal(p3d_loop_prepare(l, hook, &in), 0);
    double t = p3d_now();
    assert_int_equal(p3d_loop_once(l, 0), 0); /* no fd, no timer: the hook's deadline bounds the wait */
    double took = p3d_now() - t;
    assert_true(took >= 0.019 && took < 2);
    assert_int_equal(hook_calls, 1);
    /* paced at 50 ms: two passes take at least the gap */
    p3d_loop_pace(l, 0.05);
    in = 0.001;
    t = p3d_now();
    assert_int_equal(p3d_loop_once(l, 0), 0);
    assert_int_equal(p3d_loop_once(l, 0), 0);
    assert_true(p3d_now() - t >= 0.045);
    p3d_loop_free(l);
    /* p3d_wait_fd: a timeout, then readiness */
    int p[2];
    assert_int_equal(pipe(p), 0);
    t = p3d_now();
    assert_int_equal(p3d_wait_fd(p[0], P3D_LOOP_IN, t + 0.02), 0);
    assert_true(p3d_now() - t >= 0.019);
    assert_int_equal(write(p[1], "z", 1), 1);
    assert_int_equal(p3d_wait_fd(p[0], P3D_LOOP_IN, p3d_now() + 5), 1);
    assert_int_equal(p3d_wait_fd(p[1], P3D_LOOP_OUT, 0), 1);
    t = p3d_now();
    assert_int_equal(p3d_wait_fd(-1, 0, t + 0.01), 0);
    assert_true(p3d_now() - t >= 0.009);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_timers),
        cmocka_unit_test(t_fds),
        cmocka_unit_test(t_children_signals),
        cmocka_unit_test(t_prepare_pace_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
