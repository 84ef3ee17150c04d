/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * strmap.h — a small open-addressing hash map from strings to size_t, private
 * to the placement library. Cluster files and topology.conf files name tens
 * of thousands of nodes; every "which node is this name" question goes
 * through one of these so nothing is quadratic.
 *
 * Ownership: keys are borrowed (the map stores the pointers, not copies);
 * they must outlive the map. strmap_free() frees only the map's arrays.
 */
#ifndef P3D_STRMAP_H
#define P3D_STRMAP_H

#include <stddef.h>

typedef struct p3d_strmap {
    const char **keys; /* cap slots, NULL = empty */
    size_t *vals;
    size_t cap, len;
} p3d_strmap;

/* Sizes the map for about `expected` keys. Returns 0, or -1 when out of memory. */
int p3d_strmap_init(p3d_strmap *m, size_t expected);
/* Inserts key -> val. Returns 1 when inserted, 0 when the key was already
 * there (its value goes to *old when old is not NULL, nothing changes),
 * -1 when out of memory. */
int p3d_strmap_put(p3d_strmap *m, const char *key, size_t val, size_t *old);
/* Returns 1 and sets *val when found, else 0. */
int p3d_strmap_get(const p3d_strmap *m, const char *key, size_t *val);
void p3d_strmap_free(p3d_strmap *m);

#endif
