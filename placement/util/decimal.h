/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * decimal.h — the one reader of integers that come from the environment
 * (JOB_COMPLETION_INDEX, SLURM_NODEID, P3D_RDZV_FANOUT, ...) and other
 * outside text where only a count makes sense. strtol and atoi take
 * " 1", "+1", "-0", "1x" (atoi) and wrap on overflow; a node index read
 * that way can name another node. Header-only (static inline) so that
 * the worker, which links no par3drun library, shares it.
 */
#ifndef P3D_DECIMAL_H
#define P3D_DECIMAL_H

#include <stddef.h>
#include <stdlib.h>

/* s is one or more ASCII digits and nothing else (no sign, no space, no
 * "0x"), and its value is at most hi: 0 with *out set; otherwise -1 and
 * *out untouched. At most 19 digits are read (hi is at most 2^63-1). */
static inline int p3d_decimal(const char *s, unsigned long long hi, unsigned long long *out)
{
    unsigned long long v = 0;
    size_t n = 0;
    if (!s || !*s)
        return -1;
    for (; s[n]; n++) {
        if (s[n] < '0' || s[n] > '9' || n >= 19)
            return -1;
        v = v * 10 + (unsigned long long)(s[n] - '0');
    }
    if (v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The environment variable name as a p3d_decimal: 0 unset or empty (*out
 * untouched), 1 set and valid, -1 set and not a plain decimal in 0..hi. */
static inline int p3d_env_decimal(const char *name, unsigned long long hi, unsigned long long *out)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    return p3d_decimal(s, hi, out) < 0 ? -1 : 1;
}

#endif
