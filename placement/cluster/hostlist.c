/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hostlist.c — Slurm hostlist expressions: expansion and compression.
 *
 * Every reader of node names (cluster files, SLURM_JOB_NODELIST,
 * topology.conf) goes through p3d_hostlist_expand so they all agree on the
 * syntax. What Slurm 22.05's `scontrol show hostnames` does is the reference:
 *
 *  - items are separated by ',' or white space outside brackets; empty items
 *    are skipped;
 *  - "[...]" holds a comma list of numbers and lo-hi ranges; each number is
 *    printed zero-padded to the width of the range's lo ("n[001-10]" gives
 *    n001..n010, "n[9-010]" gives n9, n10, "n[099-101]" n099..n101);
 *  - several brackets form a cartesian product in Slurm's order: the last
 *    bracket varies fastest, then the first, second, ... ("a[1-2]b[3-4]c[5-6]"
 *    gives a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...);
 *  - duplicates are kept (callers decide whether they are an error).
 * One deliberate extension: text after the last bracket ("gpu[1-2]-ib") is
 * accepted; Slurm 22.05 rejects it.
 *
 * The number of names is computed and checked against the caller's limit
 * before anything is allocated, so "n[0-9999999999]" fails at once.
 */
#include "p3d/p3d.h"
#include "termsafe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HL_DEFAULT_MAX ((size_t)1 << 22) /* names, when the caller passes 0 */
#define HL_MAX_NAME 255                  /* characters per expanded name */
#define HL_MAX_DIGITS 18                 /* fits uint64 with room to spare */

typedef struct hl_range {
    uint64_t lo, hi;
    int width;
} hl_range;

/* One item ("a[1-2]b[3-4]-ib") split into parts: nlits+1 literal pieces
 * around nbr brackets; lit i comes before bracket i, the last one after. */
typedef struct hl_item {
    const char *expr;  /* whole expression, for messages */
    size_t start, end; /* item's span in expr */
    size_t nbr;
    size_t *lit_off, *lit_len;     /* nbr+1 each */
    size_t *rng_first, *rng_count; /* per bracket, into ranges */
    uint64_t *br_count;            /* names per bracket */
    hl_range *ranges;
    size_t nranges, cap_ranges, cap_br;
} hl_item;

/* "hostlist 'EXPR': column N: MSG", quoting at most ~60 characters of EXPR
 * around the column so a 16,000-character node list stays readable. */
static int hl_error(char **err, const char *expr, size_t pos, const char *msg)
{
    size_t len = strlen(expr), from = 0, show = len;
    if (len > 60) {
        from = pos > 30 ? pos - 30 : 0;
        show = len - from > 60 ? 60 : len - from;
    }
    char *shown = p3d_term_dup(expr + from, show, show, 0);
    int rc = p3d_err(err, "hostlist '%s%s%s': column %zu: %s", from ? "..." : "", shown ? shown : "?",
                     from + show < len ? "..." : "", pos + 1, msg);
    free(shown);
    return rc;
}

static int is_sep(char c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void item_clear(hl_item *it)
{
    free(it->lit_off);
    free(it->lit_len);
    free(it->rng_first);
    free(it->rng_count);
    free(it->br_count);
    free(it->ranges);
    memset(it, 0, sizeof *it);
}

static int item_add_bracket(hl_item *it)
{
    if (it->nbr + 2 > it->cap_br) {
        size_t cap = it->cap_br ? it->cap_br * 2 : 4;
        size_t *a = realloc(it->lit_off, cap * sizeof *a);
        if (!a)
            return -1;
        it->lit_off = a;
        if (!(a = realloc(it->lit_len, cap * sizeof *a)))
            return -1;
        it->lit_len = a;
        if (!(a = realloc(it->rng_first, cap * sizeof *a)))
            return -1;
        it->rng_first = a;
        if (!(a = realloc(it->rng_count, cap * sizeof *a)))
            return -1;
        it->rng_count = a;
        uint64_t *b = realloc(it->br_count, cap * sizeof *b);
        if (!b)
            return -1;
        it->br_count = b;
        it->cap_br = cap;
    }
    return 0;
}

static int item_add_range(hl_item *it, hl_range r)
{
    if (it->nranges == it->cap_ranges) {
        size_t cap = it->cap_ranges ? it->cap_ranges * 2 : 8;
        hl_range *a = realloc(it->ranges, cap * sizeof *a);
        if (!a)
            return -1;
        it->ranges = a;
        it->cap_ranges = cap;
    }
    it->ranges[it->nranges++] = r;
    return 0;
}

/* Reads a number at expr[*pos]; digits only. */
static int parse_number(const char *expr, size_t *pos, uint64_t *v, int *width, char **err)
{
    size_t p = *pos, n = 0;
    uint64_t x = 0;
    if (!is_digit(expr[p])) {
        char msg[96];
        if (expr[p] == ']' || expr[p] == ',')
            snprintf(msg, sizeof msg, "empty range (expected a number)");
        else
            snprintf(msg, sizeof msg, "expected a number or lo-hi range, found '%c'", expr[p]);
        return hl_error(err, expr, p, msg);
    }
    while (is_digit(expr[p])) {
        if (++n > HL_MAX_DIGITS)
            return hl_error(err, expr, *pos, "number has more than 18 digits");
        x = x * 10 + (uint64_t)(expr[p] - '0');
        p++;
    }
    *v = x;
    *width = (int)n;
    *pos = p;
    return 0;
}

/* Parses the bracket body at expr[*pos] (just after '['), up to and past
 * the matching ']'. */
static int parse_bracket(hl_item *it, size_t open, size_t *pos, char **err)
{
    const char *e = it->expr;
    size_t p = *pos;
    uint64_t total = 0;
    char unclosed[64];
    snprintf(unclosed, sizeof unclosed, "'[' at column %zu is never closed", open + 1);
    it->rng_first[it->nbr] = it->nranges;
    for (;;) {
        hl_range r;
        size_t at = p;
        if (e[p] == 0)
            return hl_error(err, e, open, unclosed);
        if (parse_number(e, &p, &r.lo, &r.width, err) < 0)
            return -1;
        r.hi = r.lo;
        if (e[p] == '-') {
            int w2;
            p++;
            if (e[p] == 0)
                return hl_error(err, e, open, unclosed);
            if (parse_number(e, &p, &r.hi, &w2, err) < 0)
                return -1;
            if (r.hi < r.lo) {
                char msg[128];
                snprintf(msg, sizeof msg, "range %llu-%llu goes backwards (lo must be <= hi)", (unsigned long long)r.lo,
                         (unsigned long long)r.hi);
                return hl_error(err, e, at, msg);
            }
        }
        if (item_add_range(it, r) < 0)
            return p3d_err(err, "hostlist: out of memory");
        /* Saturating: the caller compares against a limit far below 2^63. */
        uint64_t span = r.hi - r.lo + 1;
        total = (span == 0 || total + span < total) ? UINT64_MAX : total + span;
        if (e[p] == ',') {
            p++;
            continue;
        }
        if (e[p] == ']') {
            p++;
            break;
        }
        if (e[p] == 0)
            return hl_error(err, e, open, unclosed);
        if (e[p] == '-')
            return hl_error(err, e, p, "a range has one '-' (lo-hi)");
        if (e[p] == '[')
            return hl_error(err, e, p, "'[' inside brackets");
        char msg[96];
        snprintf(msg, sizeof msg, "expected ',', '-' or ']', found '%c'", e[p]);
        return hl_error(err, e, p, msg);
    }
    it->rng_count[it->nbr] = it->nranges - it->rng_first[it->nbr];
    it->br_count[it->nbr] = total;
    *pos = p;
    return 0;
}

/* Parses one item starting at expr[start]; it->end is set past it. */
static int parse_item(hl_item *it, const char *expr, size_t start, char **err)
{
    size_t p = start, lit = start;
    it->expr = expr;
    it->start = start;
    if (item_add_bracket(it) < 0)
        return p3d_err(err, "hostlist: out of memory");
    for (;;) {
        char c = expr[p];
        if (c == 0 || is_sep(c)) {
            it->lit_off[it->nbr] = lit;
            it->lit_len[it->nbr] = p - lit;
            break;
        }
        if (c == ']')
            return hl_error(err, expr, p, "']' without a matching '['");
        if ((unsigned char)c < 0x20 || c == 0x7f)
            return hl_error(err, expr, p, "control character in a host name");
        if (c != '[') {
            p++;
            continue;
        }
        if (item_add_bracket(it) < 0)
            return p3d_err(err, "hostlist: out of memory");
        it->lit_off[it->nbr] = lit;
        it->lit_len[it->nbr] = p - lit;
        size_t open = p++;
        if (parse_bracket(it, open, &p, err) < 0)
            return -1;
        it->nbr++;
        lit = p;
    }
    it->end = p;
    return 0;
}

/* Names one item expands to, saturating at UINT64_MAX. */
static uint64_t item_count(const hl_item *it)
{
    uint64_t n = 1;
    for (size_t b = 0; b < it->nbr; b++) {
        uint64_t c = it->br_count[b];
        if (c && n > UINT64_MAX / c)
            return UINT64_MAX;
        n *= c;
    }
    return n;
}

/* Writes the item's names to out[0..]. Odometer over the brackets in
 * Slurm's order of speed: last bracket fastest, then first, second, ... */
static int item_expand(const hl_item *it, char **out, char **err)
{
    size_t nb = it->nbr, k = 0;
    int rc = -1;
    size_t *speed = NULL, *ri = NULL;
    uint64_t *val = NULL;
    char buf[HL_MAX_NAME + 1];
    if (nb) {
        speed = malloc(nb * sizeof *speed);
        ri = calloc(nb, sizeof *ri);
        val = malloc(nb * sizeof *val);
        if (!speed || !ri || !val) {
            p3d_err(err, "hostlist: out of memory");
            goto out;
        }
        speed[0] = nb - 1;
        for (size_t b = 0; b + 1 < nb; b++)
            speed[b + 1] = b;
        for (size_t b = 0; b < nb; b++)
            val[b] = it->ranges[it->rng_first[b]].lo;
    }
    for (;;) {
        size_t len = 0;
        for (size_t b = 0; b <= nb; b++) {
            size_t ll = it->lit_len[b];
            if (len + ll > HL_MAX_NAME)
                goto toolong;
            memcpy(buf + len, it->expr + it->lit_off[b], ll);
            len += ll;
            if (b == nb)
                break;
            const hl_range *r = &it->ranges[it->rng_first[b] + ri[b]];
            int w = snprintf(buf + len, sizeof buf - len, "%0*llu", r->width, (unsigned long long)val[b]);
            if (w < 0 || len + (size_t)w > HL_MAX_NAME)
                goto toolong;
            len += (size_t)w;
        }
        buf[len] = 0;
        if (!(out[k++] = strdup(buf))) {
            p3d_err(err, "hostlist: out of memory");
            goto out;
        }
        /* advance the odometer */
        size_t s;
        for (s = 0; s < nb; s++) {
            size_t b = speed[s];
            const hl_range *r = &it->ranges[it->rng_first[b] + ri[b]];
            if (val[b] < r->hi) {
                val[b]++;
                break;
            }
            if (ri[b] + 1 < it->rng_count[b]) {
                ri[b]++;
                val[b] = it->ranges[it->rng_first[b] + ri[b]].lo;
                break;
            }
            ri[b] = 0;
            val[b] = it->ranges[it->rng_first[b]].lo;
        }
        if (s == nb)
            break;
    }
    rc = 0;
    goto out;
toolong:
    hl_error(err, it->expr, it->start, "a name would be longer than 255 characters");
out:
    free(speed);
    free(ri);
    free(val);
    return rc;
}

int p3d_hostlist_expand(const char *expr, char ***names, size_t *n, size_t max, char **err)
{
    int rc = -1;
    char **v = NULL;
    size_t nv = 0, cap = 0;
    hl_item it = {0};
    if (!expr)
        expr = "";
    if (max == 0)
        max = HL_DEFAULT_MAX;
    *names = NULL;
    *n = 0;
    size_t p = 0;
    for (;;) {
        while (is_sep(expr[p]))
            p++;
        if (!expr[p])
            break;
        item_clear(&it);
        if (parse_item(&it, expr, p, err) < 0)
            goto out;
        uint64_t c = item_count(&it);
        if (c > max - nv) {
            char msg[160];
            if (c == UINT64_MAX)
                snprintf(msg, sizeof msg,
                         "expands to more names than can be counted; the "
                         "limit is %zu",
                         max);
            else
                snprintf(msg, sizeof msg, "expands to %llu names%s; the limit is %zu", (unsigned long long)(c + nv),
                         nv ? " (with the items before it)" : "", max);
            hl_error(err, expr, p, msg);
            goto out;
        }
        if (nv + c > cap) {
            size_t ncap = cap ? cap : 16;
            while (ncap < nv + c)
                ncap *= 2;
            char **a = realloc(v, ncap * sizeof *a);
            if (!a) {
                p3d_err(err, "hostlist: out of memory");
                goto out;
            }
            v = a;
            cap = ncap;
        }
        /* item_expand fills exactly c slots unless it fails; clear them
         * first so a partial failure frees cleanly */
        memset(v + nv, 0, (size_t)c * sizeof *v);
        if (item_expand(&it, v + nv, err) < 0) {
            nv += (size_t)c;
            goto out;
        }
        nv += (size_t)c;
        p = it.end;
    }
    *names = v;
    *n = nv;
    v = NULL;
    rc = 0;
out:
    item_clear(&it);
    if (v)
        p3d_strv_free(v, nv);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Compression: the inverse, for reports.                                   */
/* ------------------------------------------------------------------------ */

typedef struct sbuf {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *a = realloc(b->s, cap);
        if (!a) {
            b->oom = 1;
            return;
        }
        b->s = a;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

/* Splits a name into prefix and trailing number (at most 18 digits).
 * Returns the prefix length; *has is 0 when there is no trailing number. */
static size_t split_name(const char *s, uint64_t *num, int *width, int *has)
{
    size_t len = strlen(s), d = len;
    while (d > 0 && is_digit(s[d - 1]) && len - d < HL_MAX_DIGITS)
        d--;
    *has = d < len;
    *width = (int)(len - d);
    uint64_t x = 0;
    for (size_t i = d; i < len; i++)
        x = x * 10 + (uint64_t)(s[i] - '0');
    *num = x;
    return d;
}

/* Does v printed at width w give exactly the digits in s? Then v can join a
 * range whose lo has width w and the expansion gives back the same name. */
static int same_digits(uint64_t v, int w, const char *s)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%0*llu", w, (unsigned long long)v);
    return strcmp(buf, s) == 0;
}

static void put_num(sbuf *b, uint64_t v, int w)
{
    char buf[32];
    int k = snprintf(buf, sizeof buf, "%0*llu", w, (unsigned long long)v);
    sb_put(b, buf, (size_t)k);
}

/* Groups runs of consecutive names sharing a prefix; inside a run,
 * consecutive numbers (that print the same at the range's width) become
 * lo-hi. Order is kept, so p3d_hostlist_expand(result) gives back exactly
 * names[0..n). */
char *p3d_hostlist_compress(char *const *names, size_t n)
{
    sbuf b = {0};
    sb_put(&b, "", 0);
    size_t i = 0;
    while (i < n) {
        uint64_t v;
        int w, has;
        size_t pl = split_name(names[i], &v, &w, &has);
        if (i)
            sb_put(&b, ",", 1);
        if (!has) {
            sb_put(&b, names[i], strlen(names[i]));
            i++;
            continue;
        }
        /* the run: names j in [i, e) with the same prefix and a number */
        size_t e = i + 1;
        while (e < n) {
            uint64_t v2;
            int w2, h2;
            size_t pl2 = split_name(names[e], &v2, &w2, &h2);
            if (!h2 || pl2 != pl || strncmp(names[e], names[i], pl) != 0)
                break;
            e++;
        }
        if (e == i + 1) {
            sb_put(&b, names[i], strlen(names[i]));
            i++;
            continue;
        }
        sb_put(&b, names[i], pl);
        sb_put(&b, "[", 1);
        size_t j = i;
        while (j < e) {
            uint64_t lo, hi;
            int lw, h;
            split_name(names[j], &lo, &lw, &h);
            hi = lo;
            size_t k = j + 1;
            while (k < e && hi < UINT64_MAX && same_digits(hi + 1, lw, names[k] + pl)) {
                hi++;
                k++;
            }
            if (j > i)
                sb_put(&b, ",", 1);
            put_num(&b, lo, lw);
            if (hi > lo) {
                sb_put(&b, "-", 1);
                put_num(&b, hi, lw);
            }
            j = k;
        }
        sb_put(&b, "]", 1);
        i = e;
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
