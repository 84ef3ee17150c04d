/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * loop.h — the event loop every long-lived par3drun process runs on (the
 * job controller's hub, a node's relay, a node's agent) and that the
 * rendezvous phases wait through. One monotonic clock (p3d_now), signals
 * through a signalfd, fd readiness, one-shot timers, child-process
 * watchers, and prepare hooks that run before each wait and may name a
 * deadline. Callbacks never block; nothing else in launcher/ calls poll()
 * or sleeps (the tree leader's epoll set is the one documented exception:
 * rdzv_tree_leader.c, O(1) per join at 16k nodes).
 *
 * A watcher may be added, changed or removed from any callback, the one
 * running included; an fd's readiness seen in a pass is delivered only to
 * the watcher that was registered when the pass began (a closed fd whose
 * number is reused meanwhile gets nothing spurious).
 */
#ifndef P3D_LOOP_H
#define P3D_LOOP_H

#include <signal.h>
#include <sys/types.h>

/* Seconds on CLOCK_MONOTONIC: every deadline in the launcher is one. */
double p3d_now(void);

/* A poll()-style timeout in ms until a monotonic deadline (0: none, -1). */
int p3d_poll_ms(double deadline);

typedef struct p3d_loop p3d_loop;

enum { P3D_LOOP_IN = 1, P3D_LOOP_OUT = 2 };

/* revents: P3D_LOOP_IN (also on hang-up and error: a read says which),
 * P3D_LOOP_OUT. */
typedef void (*p3d_io_fn)(p3d_loop *l, int fd, int revents, void *ctx);
typedef void (*p3d_timer_fn)(p3d_loop *l, void *ctx);
typedef void (*p3d_signal_fn)(p3d_loop *l, int signo, void *ctx);
typedef void (*p3d_child_fn)(p3d_loop *l, pid_t pid, int status, void *ctx);
/* Runs before each wait; returns a deadline to wake by (0: none). */
typedef double (*p3d_prepare_fn)(p3d_loop *l, double now, void *ctx);

p3d_loop *p3d_loop_new(void);
/* Frees the loop; the fds it watches are not closed, except the signalfd
 * given to p3d_loop_signals (the loop owns it). */
void p3d_loop_free(p3d_loop *l);

/* Watches fd for events (0 removes it); replaces an earlier watcher of the
 * same fd. 0, or -1 (out of memory). */
int p3d_loop_watch(p3d_loop *l, int fd, int events, p3d_io_fn fn, void *ctx);
void p3d_loop_unwatch(p3d_loop *l, int fd); /* l may be NULL */

/* A one-shot timer at monotonic time `at`. Its id (> 0), or 0 (out of
 * memory). Cancelling an id that fired or was cancelled does nothing. */
unsigned p3d_loop_at(p3d_loop *l, double at, p3d_timer_fn fn, void *ctx);
void p3d_loop_cancel(p3d_loop *l, unsigned id); /* l may be NULL */

/* Takes sfd (a signalfd, non-blocking): every signal read is handed to fn,
 * except SIGCHLD, which reaps (waitpid(-1, WNOHANG)) and hands each child
 * to its watcher, or to the default watcher. */
int p3d_loop_signals(p3d_loop *l, int sfd, p3d_signal_fn fn, void *ctx);
/* One exit of pid; the watcher is gone once it fired. */
int p3d_loop_child(p3d_loop *l, pid_t pid, p3d_child_fn fn, void *ctx);
void p3d_loop_child_forget(p3d_loop *l, pid_t pid);
/* Children nobody watches (the descendants reparented to a subreaper). */
void p3d_loop_child_default(p3d_loop *l, p3d_child_fn fn, void *ctx);
/* Reaps now what has exited (as on SIGCHLD). */
void p3d_loop_reap(p3d_loop *l);

/* Up to 8 hooks, run in the order added. */
int p3d_loop_prepare(p3d_loop *l, p3d_prepare_fn fn, void *ctx);

/* Many fds (a leader of thousands of nodes): at most one pass every gap
 * seconds, each taking everything that came meanwhile; signals still wake
 * it at once. */
void p3d_loop_pace(p3d_loop *l, double gap);

/* One pass: the prepare hooks, one wait (until the earliest of `until`,
 * the timers and the hooks' deadlines; until 0: no bound of its own), then
 * what is ready, then the timers that are due. 0, or -1 with errno when
 * the wait itself failed. */
int p3d_loop_once(p3d_loop *l, double until);
/* Passes until p3d_loop_stop; 0, or -1 as above. */
int p3d_loop_run(p3d_loop *l);
void p3d_loop_stop(p3d_loop *l);
int p3d_loop_stopped(const p3d_loop *l);

/* For a phase that waits on one fd (a connect, a frame of the
 * rendezvous): waits until fd is ready for events or `until` passes (fd
 * -1: only the time). 1 ready, 0 timed out, -1 with errno. */
int p3d_wait_fd(int fd, int events, double until);

#endif
