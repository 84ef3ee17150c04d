/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nccl_attr.c — attribute values of NCCL's topology XML: decimal and
 * hex numbers, PCI bus ids and CPU masks, and the one message every bad
 * value gets (topo_nccl.h).
 */
#include "topo_internal.h"
#include "topo_nccl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "termsafe.h"

/* The one line every bad value gets: file:line, element, attribute, value,
 * what was expected. */
int p3d_nccl_attr_bad_val(nx_doc *d, const nx_el *e, const nx_attr *a, const char *want, char **err)
{
    return p3d_err(err, "%s:%d: <%.*s %.*s=\"%s\">: expected %s", d->path, a->line, (int)e->nlen, e->name, (int)a->nlen,
                   a->name, p3d_tesc(a->val), want);
}

int p3d_nccl_attr_need(nx_doc *d, const nx_el *e, const char *attr, const char *want, const nx_attr **out, char **err)
{
    *out = p3d_nccl_xml_get(d, e, attr);
    if (!*out)
        return p3d_err(err, "%s:%d: <%.*s> has no %s attribute: expected %s", d->path, e->line, (int)e->nlen, e->name,
                       attr, want);
    return 0;
}

/* A decimal integer in [lo, hi]. */
int p3d_nccl_attr_dec(nx_doc *d, const nx_el *e, const nx_attr *a, long lo, long hi, const char *want, long *out,
                      char **err)
{
    const char *s = a->val;
    long v = 0;
    int nd = 0;
    for (; *s >= '0' && *s <= '9'; s++, nd++) {
        if (v > (hi - (*s - '0')) / 10)
            return p3d_nccl_attr_bad_val(d, e, a, want, err);
        v = v * 10 + (*s - '0');
    }
    if (!nd || *s || v < lo)
        return p3d_nccl_attr_bad_val(d, e, a, want, err);
    *out = v;
    return 0;
}

/* "0x030200" (up to 8 hex digits). */
int p3d_nccl_attr_hex(nx_doc *d, const nx_el *e, const nx_attr *a, const char *want, unsigned long *out, char **err)
{
    const char *s = a->val;
    unsigned long v = 0;
    int nd = 0;
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return p3d_nccl_attr_bad_val(d, e, a, want, err);
    for (s += 2; isxdigit((unsigned char)*s) && nd < 9; s++, nd++)
        v = v * 16 + (unsigned long)(isdigit((unsigned char)*s) ? *s - '0' : tolower((unsigned char)*s) - 'a' + 10);
    if (!nd || nd > 8 || *s)
        return p3d_nccl_attr_bad_val(d, e, a, want, err);
    *out = v;
    return 0;
}

/* "0000:0c:00.0" -> a sortable key and the lower-case canonical text. */
int p3d_nccl_attr_busid(const char *s, uint64_t *key, char canon[32])
{
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    int nd[4] = {0}, part = 0;
    unsigned *f[4] = {&dom, &bus, &dev, &fn};
    static const int maxd[4] = {8, 2, 2, 1};
    for (const char *p = s;; p++) {
        if (isxdigit((unsigned char)*p)) {
            if (++nd[part] > maxd[part])
                return -1;
            *f[part] = *f[part] * 16 +
                       (unsigned)(isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10);
        } else if ((*p == ':' && part < 2) || (*p == '.' && part == 2)) {
            if (!nd[part])
                return -1;
            part++;
        } else if (!*p && part == 3 && nd[3]) {
            break;
        } else {
            return -1;
        }
    }
    if (dev > 0x1f || fn > 7)
        return -1;
    *key = ((uint64_t)dom << 16) | (bus << 8) | (dev << 3) | fn;
    snprintf(canon, 32, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

/* Linux cpumask text: comma-separated 32-bit hex words, most significant
 * first. Fills bits[NX_MAX_CPUS/8]; 0, or -1 when malformed or too wide. */
int p3d_nccl_attr_mask(const char *s, unsigned char *bits)
{
    size_t nwords = 1, len = strlen(s);
    for (const char *p = s; *p; p++)
        nwords += *p == ',';
    if (!len || nwords * 32 > NX_MAX_CPUS)
        return -1;
    memset(bits, 0, NX_MAX_CPUS / 8);
    size_t w = nwords;
    const char *p = s;
    while (w--) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (!n || n > 8)
            return -1;
        unsigned long v = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isxdigit((unsigned char)p[i]))
                return -1;
            v = v * 16 +
                (unsigned long)(isdigit((unsigned char)p[i]) ? p[i] - '0' : tolower((unsigned char)p[i]) - 'a' + 10);
        }
        for (int b = 0; b < 32; b++)
            if (v >> b & 1) {
                size_t cpu = w * 32 + (size_t)b;
                bits[cpu / 8] |= (unsigned char)(1u << (cpu % 8));
            }
        p = c ? c + 1 : p + n;
    }
    return 0;
}

/* "0-23,48-71"; NULL when empty or out of memory. */
char *p3d_nccl_attr_mask_list(const unsigned char *bits, int *count)
{
    char *out = malloc(NX_MAX_CPUS * 6 + 1);
    size_t k = 0;
    int n = 0;
    if (!out)
        return NULL;
    out[0] = 0;
    for (int i = 0; i < NX_MAX_CPUS;) {
        if (!(bits[i / 8] >> (i % 8) & 1)) {
            i++;
            continue;
        }
        int j = i;
        while (j + 1 < NX_MAX_CPUS && (bits[(j + 1) / 8] >> ((j + 1) % 8) & 1))
            j++;
        k += (size_t)snprintf(out + k, NX_MAX_CPUS * 6 + 1 - k, i == j ? "%s%d" : "%s%d-%d", k ? "," : "", i, j);
        n += j - i + 1;
        i = j + 1;
    }
    *count = n;
    if (!n) {
        free(out);
        return NULL;
    }
    return out;
}
