/*
 * rundir.h — the launcher's run directory (placement.json, heartbeats, the
 * output lock), made so that no other local user can touch it.
 */
#ifndef P3D_RUNDIR_H
#define P3D_RUNDIR_H

/* Creates `path` (and missing parents) with mode 0700, or accepts an
 * existing one only when it is a real directory (not a symlink) owned by
 * this user with no group/other permission bits. The default name,
 * $TMPDIR/par3drun-$JOB, is predictable: another user may have created it
 * first to swap files in it; then this refuses, with one line saying why.
 * Returns 0, or -1 with *err. */
int p3d_rundir_make(const char *path, char **err);

#endif
