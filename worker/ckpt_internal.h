/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_internal.h - what ckpt.c (save, load, fencing) and ckpt_fs.c (the
 * directory on disk) share; private to the worker.
 */
#ifndef P3DW_CKPT_INTERNAL_H
#define P3DW_CKPT_INTERNAL_H

#include <stddef.h>
#include <sys/stat.h>

#include "worker.h"

#define CK_VERSION 2u /* 2: the generation word */
#define MARKER "complete"
#define MARKER_MAX 1024 /* a larger marker is not ours */

/* What the marker records besides step and generation: the fields a resume
 * must match (world and mesh sizes), in the order they are written. */
enum { M_WORLD, M_TP, M_PP, M_DP, M_EP, M_ETP, M_EDP, M_NMESH };
extern const char *const ck_marker_field[M_NMESH];

typedef struct marker {
    long step, gen, mesh[M_NMESH];
    char job[128];
} marker;

/* The marker's text for m into out (n bytes): its length, -1 if it does
 * not fit. */
int ck_format_marker(const marker *m, char *out, size_t n);

/* Plain decimal digits only (no sign, no space), at most 9 of them: 0 with
 * *out, else -1. */
int ck_parse_digits(const char *s, size_t len, long *out);

/* Parses a marker's text (NUL-terminated, n bytes).  0, or -1 with *why
 * (static text). */
int ck_parse_marker(const char *text, size_t n, marker *m, const char **why);

/* Opens dfd/name for reading, only when it is a regular file and not a
 * link.  The fd (caller closes), or -1 with *why (static text or
 * strerror) and errno. */
int ck_open_regular(int dfd, const char *name, const char **why);

/* The rule for the checkpoint directory and each step directory: a
 * directory of ours nobody else may write.  0, or -1 with the reason in msg
 * (n bytes). */
int ck_check_private_dir(const struct stat *st, char *msg, size_t n);

/* Opens DIR/step-NNNNNNNN (created, mode 0700, when create is set) without
 * following a link, checked like the checkpoint directory.  The fd (caller
 * closes), or -1 with the reason in msg. */
int ck_open_step(const p3dw_ckpt *c, int step, int create, char *msg, size_t n);

/* Reads the marker of a step directory.  0 (in *m), 1 when absent, -1 when
 * unusable (*why). */
int ck_read_marker(int sdfd, marker *m, const char **why);

/* Writes nparts parts to dfd/name through an O_EXCL | O_NOFOLLOW temporary,
 * fsync, rename (commit == 0) or link (commit != 0: EEXIST instead of
 * replacing), fsync of the directory.  0, or -1 with errno. */
int ck_write_atomic(int dfd, const char *name, const void *const *part, const size_t *len, int nparts, int commit);

/* Step numbers in DIR (names step-<digits> only), newest first; malloc'd
 * (caller frees; NULL when out of memory), *n entries. */
int *ck_list_steps(const p3dw_ckpt *c, int *n);

/* mkdir -p, mode 0700 for what it creates.  0, or -1 with errno. */
int ck_mkdirs(const char *path);

/* Removes one step directory (its shards, then the marker, then itself)
 * through its own descriptor; a step that is a link is left alone, with a
 * warning. */
void ck_remove_step(const p3dw_ckpt *c, int step);

#endif
