/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cluster_file.h — the cluster file reader's state, shared by the reader
 * (cluster_file.c) and its position finder (cluster_file_pos.c); private
 * to placement/cluster.
 */
#ifndef P3D_CLUSTER_FILE_H
#define P3D_CLUSTER_FILE_H

#include <stddef.h>

#include "cluster_internal.h"
#include "strmap.h"

typedef struct cf_ctx {
    const char *path; /* as given, for messages */
    const char *buf;
    size_t len;
    char *dir; /* directory of the file ("." when none) */
    /* where nodes[] entries sit in the text, found on first need */
    int scanned;
    size_t nspans, *span_lo, *span_hi;
    p3d_cluster *c;
    p3d_strmap topo_by_str, topo_by_real, racks, domains, names;
    char **reals; /* realpath strings (keys of topo_by_real) */
    size_t nreals, cap_reals;
    size_t cap_nodes, cap_topos, cap_racks, cap_domains;
    size_t *entry_of_node; /* nodes[] entry each node came from */
    size_t nkey_warnings;
} cf_ctx;

/* Line (1-based) of byte offset off in the text. */
size_t cf_line_of(const cf_ctx *x, size_t off);

/* Line of `"key"` inside nodes[entry] (or of the entry itself when key is
 * NULL or not found); entry SIZE_MAX means top level. 0 when unknown. The
 * first call scans the text for the entries (x->span_*, freed by the
 * reader). */
size_t cf_find_line(cf_ctx *x, size_t entry, const char *key);

/* Writes "PATH:LINE: nodes[3].topology" (without LINE when unknown) to
 * out (cap bytes). */
void cf_where(cf_ctx *x, size_t entry, const char *key, char *out, size_t cap);

/* The parse error cJSON reports at end, as PATH:LINE:COL and the likely
 * cause, into *err. Returns -1. */
int cf_syntax_error(cf_ctx *x, const char *end, char **err);

#endif
