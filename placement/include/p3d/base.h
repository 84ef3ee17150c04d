/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p3d/base.h — what every stage of libp3dplace shares: exit codes, errors,
 * link classes, where bundled files live.
 *
 * Conventions (read once, they hold for every function below):
 *  - Functions that can fail return 0 on success and -1 on failure; on failure
 *    they store a malloc'd, one-line, user-facing message in *err (when err is
 *    not NULL) that names the file, the field or line, and what was expected.
 *    The caller frees it with free(). Bad input is never a crash.
 *  - "Caller frees with X_free()" is stated per function; X_free(NULL) is a no-op.
 *  - Nothing here prints to stdout/stderr; reports are returned as strings.
 */
#ifndef P3D_BASE_H
#define P3D_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define P3D_VERSION "0.1.0"

/* Exit codes of the par3drun program (DESIGN.md "CLI"). */
#define P3D_EXIT_OK 0
#define P3D_EXIT_FAIL 1
#define P3D_EXIT_BADINPUT 2

/* Frees *pp and sets it to NULL. */
#define P3D_FREE(pp)                                                                                                   \
    do {                                                                                                               \
        free(*(pp));                                                                                                   \
        *(pp) = NULL;                                                                                                  \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Formats a message into a fresh malloc'd *err (no-op when err is NULL).
 * Always returns -1 so callers can write `return p3d_err(err, ...)`. */
int p3d_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* vasprintf that returns the malloc'd text, or NULL when out of memory. */
char *p3d_vfmt(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Appends sep (only when *s is non-empty) and the formatted piece to the
 * malloc'd string *s (NULL: empty). On OOM *s is left as it was. */
void p3d_str_appendf(char **s, const char *sep, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------------ */
/* Link classes, fastest first. Comparisons (<, >) are meaningful.          */
/* ------------------------------------------------------------------------ */

typedef enum p3d_link {
    P3D_LINK_SELF = 0, /* same GPU */
    P3D_LINK_NVLINK,   /* NV#: NVLink / NVSwitch inside a node */
    P3D_LINK_MNNVL,    /* multi-node NVLink domain (GB200 NVL72, ...) */
    P3D_LINK_PIX,      /* one PCIe switch */
    P3D_LINK_PXB,      /* several PCIe switches, no host bridge */
    P3D_LINK_PHB,      /* through a PCIe host bridge */
    P3D_LINK_NODE,     /* across host bridges within one NUMA node */
    P3D_LINK_SYS,      /* across the SMP interconnect (sockets / NUMA) */
    P3D_LINK_RACK,     /* network, same rack (leaf switch) */
    P3D_LINK_XRACK,    /* network, across racks */
    P3D_LINK_COUNT
} p3d_link;

/* "X", "NV", "MNNVL", "PIX", "PXB", "PHB", "NODE", "SYS", "RACK", "XRACK". */
const char *p3d_link_name(p3d_link l);
/* Human description: "NVLink", "PCIe (one switch)", "network, across racks"... */
const char *p3d_link_desc(p3d_link l);


/* Where bundled files live: P3D_DATA_DIR env, else the build/install dir. */
const char *p3d_data_dir(void);


#ifdef __cplusplus
}
#endif
#endif
