/* SPDX-License-Identifier: BSD-3-Clause */
/* strmap.c — string -> size_t hash map (see strmap.h). Linear probing with a
 * power-of-two table kept at most half full, FNV-1a hashing. */
#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static int alloc_table(p3d_strmap *m, size_t cap)
{
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = calloc(cap, sizeof *m->vals);
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        return -1;
    }
    m->cap = cap;
    return 0;
}

int p3d_strmap_init(p3d_strmap *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 && cap < ((size_t)1 << 40))
        cap <<= 1;
    m->len = 0;
    return alloc_table(m, cap);
}

/* Slot holding key, or the empty slot where it would go. */
static size_t find_slot(const p3d_strmap *m, const char *key)
{
    size_t mask = m->cap - 1, i = (size_t)hash_str(key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

static int grow(p3d_strmap *m)
{
    p3d_strmap n = {0};
    if (alloc_table(&n, m->cap * 2) < 0)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t s = find_slot(&n, m->keys[i]);
        n.keys[s] = m->keys[i];
        n.vals[s] = m->vals[i];
    }
    n.len = m->len;
    free(m->keys);
    free(m->vals);
    *m = n;
    return 0;
}

int p3d_strmap_put(p3d_strmap *m, const char *key, size_t val, size_t *old)
{
    if (!m->keys && p3d_strmap_init(m, 8) < 0)
        return -1;
    size_t s = find_slot(m, key);
    if (m->keys[s]) {
        if (old)
            *old = m->vals[s];
        return 0;
    }
    if ((m->len + 1) * 2 > m->cap) {
        if (grow(m) < 0)
            return -1;
        s = find_slot(m, key);
    }
    m->keys[s] = key;
    m->vals[s] = val;
    m->len++;
    return 1;
}

int p3d_strmap_get(const p3d_strmap *m, const char *key, size_t *val)
{
    if (!m->keys)
        return 0;
    size_t s = find_slot(m, key);
    if (!m->keys[s])
        return 0;
    if (val)
        *val = m->vals[s];
    return 1;
}

void p3d_strmap_free(p3d_strmap *m)
{
    if (!m)
        return;
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->len = 0;
}
