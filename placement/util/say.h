/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * say.h — the one verbosity check for par3drun's own stderr lines that are
 * not errors: notes ("job X: 16 ranks ...", "OMP_NUM_THREADS is not set")
 * and warnings. --quiet turns both off (main.c sets it once, before any
 * command runs); errors are printed whatever it says. Process-wide, like
 * stderr itself.
 */
#ifndef P3D_SAY_H
#define P3D_SAY_H

void p3d_say_set_quiet(int quiet);
/* 1 under --quiet: a caller that writes a note its own way (the hub's
 * sink) asks here first. */
int p3d_say_quiet(void);
/* "par3drun: " + the formatted text + "\n" on stderr, unless quiet. */
void p3d_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "par3drun: warning: " + the formatted text + "\n" on stderr, unless quiet. */
void p3d_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "par3drun: MSG" on stderr whatever --quiet says, what MSG quotes
 * escaped for the terminal (termsafe.h). */
void p3d_say_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same for msg (NULL: out of memory), which it frees; returns
 * P3D_EXIT_BADINPUT, for `return p3d_fail_input(err);`. */
int p3d_fail_input(char *msg);

#endif
