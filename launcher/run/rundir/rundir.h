/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rundir.h — the public header of launcher/run/rundir/, the lowest run
 * stage: the directories par3drun writes into: the run directory
 * (placement.json, heartbeats, the output lock), made so that no other local
 * user can touch it, and --log-dir, which may be shared but cannot redirect
 * a write (rundir.c, docs/limits.md), and the events file opened there.
 */
#ifndef P3D_RUNDIR_H
#define P3D_RUNDIR_H

#include <stddef.h>
#include <sys/types.h>

/* Creates `path` (and missing parents) with mode 0700, or accepts an
 * existing one only when it is a real directory (not a symlink) owned by
 * this user with no group/other permission bits. The default name,
 * $TMPDIR/par3drun-$JOB, is predictable: another user may have created it
 * first to swap files in it; then this refuses, with one line saying why.
 * Returns 0, or -1 with *err. */
int p3d_rundir_make(const char *path, char **err);
/* A descriptor of the run directory `path` (O_NOFOLLOW), checked with fstat
 * by the rule above, or -1 with *err. */
int p3d_rundir_open(const char *path, char **err);
/* Writes n bytes as dir/name: created O_EXCL | O_NOFOLLOW under an
 * unpredictable temporary name through the checked directory descriptor,
 * then renamed within it. 0, or -1 with *err. */
int p3d_rundir_write(const char *dir, const char *name, const void *p, size_t n, char **err);
/* openat(checked dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode): an fd,
 * or -1 with errno (EPERM: the directory failed its check). */
int p3d_rundir_openat(const char *dir, const char *name, int flags, mode_t mode);

/* --log-dir: created (0755) when missing; its owner must be this user or
 * root, and a directory anyone may write needs the sticky bit. Returns a
 * directory descriptor, or -1 with *err. */
int p3d_logdir_open(const char *dir, char **err);
/* Opens dfd/name for appending, truncated, only when it is (or is created
 * as) a regular file of ours with one link; a symlink, FIFO, device, hard
 * link or another user's file is refused. An fd, or -1 with *err. */
int p3d_logfile_open(int dfd, const char *dir, const char *name, char **err);

/* The run directory rule (docs/launch.md, "The placement JSON and the run
 * directory"): one that par3drun made itself is removed when the job ended
 * 0 — only the files par3drun puts there (placement JSONs up to
 * placement.<nkept-1>.json, events.jsonl, output.lock, the heartbeat
 * files of ranks 0..world-1); a worker's own files keep it — and kept
 * otherwise, for the post-mortem. A --run-dir the user gave is always
 * kept. Returns 1 when it was removed. */
int p3d_rundir_finish(const char *dir, int own, int code, int world, int nkept);
/* The rule alone: is a run dir kept after a job that ended with code? */
int p3d_rundir_kept(int own, int code);

/* --log-dir, checked before any rank starts (exit 2 on failure): created,
 * and it must accept files. */
int p3d_check_log_dir(const char *dir, char **err);
/* mkdir -p; the last component gets mode. 0 or -1 with errno. */
int p3d_mkdir_p(const char *path, mode_t mode);
/* RUN_DIR/events.jsonl (the lines: p3d_event, wire.h) */
/* Opens (truncates) RUN_DIR/events.jsonl; -1 when it cannot. */
int p3d_events_open(const char *run_dir);

#endif
