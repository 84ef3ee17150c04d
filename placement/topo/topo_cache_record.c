/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_cache_record.c — the text form of a cache entry: the escaping every
 * field is written with, and the raw node record encoded and decoded
 * (topo_cache.h). Decoding trusts nothing: an entry is a file anyone with
 * the directory could have edited.
 */
#include "topo_cache.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#include "strbuf.h"

/* ---- escaping ---------------------------------------------------------- */

/* Fields are separated by spaces, so every value is written with %XX for
 * space, control bytes, '%' and non-ASCII; "-" stands for the empty string
 * (a real "-" is written %2d). */
void p3d_cache_record_put_esc(p3d_sb *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (!s || !*s) {
        p3d_sb_putc(b, '-');
        return;
    }
    if (!strcmp(s, "-")) {
        p3d_sb_puts(b, "%2d");
        return;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p >= 0x7f || *p == '%') {
            p3d_sb_putc(b, '%');
            p3d_sb_putc(b, hex[*p >> 4]);
            p3d_sb_putc(b, hex[*p & 15]);
        } else {
            p3d_sb_putc(b, (char)*p);
        }
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decodes token t into dst (cap bytes with the NUL); -1 when malformed or
 * too long. */
static int get_esc(const char *t, char *dst, size_t cap)
{
    size_t n = 0;
    if (!strcmp(t, "-")) {
        dst[0] = 0;
        return 0;
    }
    for (const char *p = t; *p; p++) {
        int c = (unsigned char)*p;
        if (c == '%') {
            int h = hexval(p[1]), l = h < 0 ? -1 : hexval(p[2]);
            if (l < 0 || (h == 0 && l == 0))
                return -1;
            c = h * 16 + l;
            p += 2;
        }
        if (n + 1 >= cap)
            return -1;
        dst[n++] = (char)c;
    }
    dst[n] = 0;
    return 0;
}

/* ---- the record -------------------------------------------------------- */

char *p3d_topo_raw_encode(const p3d_node *n, const p3d_topo_extra *x)
{
    p3d_sb b = {0};
    int g = n->ngpus, k = n->nnics;
    p3d_sb_printf(&b, "counts %d %d %d %d %d %d %d %d\n", g, k, n->nnuma, n->npackages, n->ncores, n->npus,
                  x->had_matrix, x->namd);
    for (int i = 0; i < g; i++) {
        const p3d_gpu *gp = &n->gpus[i];
        p3d_sb_puts(&b, "gpu ");
        p3d_cache_record_put_esc(&b, gp->pci);
        p3d_sb_putc(&b, ' ');
        p3d_cache_record_put_esc(&b, gp->model);
        p3d_sb_putc(&b, ' ');
        p3d_cache_record_put_esc(&b, gp->osdev);
        p3d_sb_printf(&b, " %d %d %llu ", gp->numa, gp->package, (unsigned long long)gp->mem_bytes);
        p3d_cache_record_put_esc(&b, gp->uuid);
        p3d_sb_putc(&b, ' ');
        p3d_cache_record_put_esc(&b, gp->cpus);
        p3d_sb_putc(&b, '\n');
    }
    for (int j = 0; j < k; j++) {
        const p3d_nic *ni = &n->nics[j];
        p3d_sb_puts(&b, "nic ");
        p3d_cache_record_put_esc(&b, ni->name);
        p3d_sb_putc(&b, ' ');
        p3d_cache_record_put_esc(&b, ni->pci);
        p3d_sb_putc(&b, ' ');
        p3d_cache_record_put_esc(&b, ni->kind);
        p3d_sb_printf(&b, " %d\n", ni->numa);
    }
    /* %a: the matrix comes back bit for bit */
    for (int i = 0; i < g; i++) {
        p3d_sb_puts(&b, "nvlink");
        for (int j = 0; j < g; j++)
            p3d_sb_printf(&b, " %a", n->nvlink[(size_t)i * g + j]);
        p3d_sb_putc(&b, '\n');
    }
    for (int i = 0; i < g; i++) {
        p3d_sb_puts(&b, "gg");
        for (int j = 0; j < g; j++)
            p3d_sb_printf(&b, " %u", n->gg_class[(size_t)i * g + j]);
        p3d_sb_putc(&b, '\n');
    }
    for (int i = 0; i < g && k; i++) {
        p3d_sb_puts(&b, "gn");
        for (int j = 0; j < k; j++)
            p3d_sb_printf(&b, " %u", n->gn_class[(size_t)i * k + j]);
        p3d_sb_putc(&b, '\n');
    }
    return p3d_sb_finish(&b);
}

#define MAXTOK 8200 /* "nvlink" + 4096 values fit twice over */

/* Splits the next line of *p into space-separated tokens (the line is
 * modified). Returns the count, or -1 at the end of the text or when the
 * line has more than max tokens. */
static int next_line(char **p, char **tok, int max)
{
    if (!**p)
        return -1;
    char *line = *p, *nl = strchr(line, '\n');
    if (!nl)
        return -1; /* every line ends with a newline: this one was cut */
    *nl = 0;
    *p = nl + 1;
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(line, " ", &save); s; s = strtok_r(NULL, " ", &save)) {
        if (n == max)
            return -1;
        tok[n++] = s;
    }
    return n;
}

static int get_int(const char *t, long lo, long hi, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(t, &end, 10);
    if (errno || end == t || *end || x < lo || x > hi)
        return -1;
    *v = (int)x;
    return 0;
}

/* A GPU's CPU list ("0-55,112-167") naming only CPUs below limit: its
 * ranges become bitmaps when ranks are bound (bind.c), and "0-2147483647"
 * (30 bytes) cost 20 s and 514 MB there. "" (none known) passes. */
#define P3D_TOPO_CPU_IDS 8192

static int cpulist_ok(const char *s, long limit)
{
    while (*s) {
        long lo, hi;
        char *end;
        if (*s < '0' || *s > '9')
            return 0;
        errno = 0;
        lo = hi = strtol(s, &end, 10);
        if (*end == '-') {
            s = end + 1;
            if (*s < '0' || *s > '9')
                return 0;
            hi = strtol(s, &end, 10);
        }
        if (errno || lo > hi || hi >= limit)
            return 0;
        s = end;
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            return 0;
    }
    return 1;
}

int p3d_topo_raw_decode(const char *text, p3d_node **out, p3d_topo_extra *x, char **why)
{
    int rc = -1, line = 0, nt, c[8];
    char *copy = strdup(text), *p = copy;
    char **tok = malloc(MAXTOK * sizeof *tok), *err = NULL;
    p3d_node *n = p3d_node_new(NULL, NULL, NULL);
    *out = NULL;
    if (!copy || !tok || !n) {
        p3d_err(why, "out of memory");
        goto out;
    }
#define BAD(...)                                                                                                       \
    do {                                                                                                               \
        p3d_err(why, __VA_ARGS__);                                                                                     \
        goto out;                                                                                                      \
    } while (0)
    line++;
    if ((nt = next_line(&p, tok, MAXTOK)) != 9 || strcmp(tok[0], "counts"))
        BAD("record line %d: expected 'counts' and 8 numbers", line);
    for (int i = 0; i < 8; i++)
        if (get_int(tok[i + 1], i < 2 ? 0 : -1, i < 2 ? 4096 : 1 << 24, &c[i]) < 0)
            BAD("record line %d: field %d is '%s': expected a count", line, i + 2, tok[i + 1]);
    if (p3d_node_alloc(n, c[0], c[1], &err) < 0)
        BAD("record line %d: %s", line, err ? err : "bad counts");
    int g = c[0], k = c[1];
    n->nnuma = c[2];
    n->npackages = c[3];
    n->ncores = c[4];
    n->npus = c[5];
    x->had_matrix = c[6] != 0;
    x->namd = c[7];
    for (int i = 0; i < g; i++) {
        p3d_gpu *gp = &n->gpus[i];
        char cpus[65536];
        line++;
        if ((nt = next_line(&p, tok, MAXTOK)) != 9 || strcmp(tok[0], "gpu"))
            BAD("record line %d: expected 'gpu' and 8 fields", line);
        char *end;
        errno = 0;
        unsigned long long mem = strtoull(tok[6], &end, 10);
        if (get_esc(tok[1], gp->pci, sizeof gp->pci) < 0 || get_esc(tok[2], gp->model, sizeof gp->model) < 0 ||
            get_esc(tok[3], gp->osdev, sizeof gp->osdev) < 0 || get_int(tok[4], -1, 1 << 20, &gp->numa) < 0 ||
            get_int(tok[5], -1, 1 << 20, &gp->package) < 0 || errno || end == tok[6] || *end || tok[6][0] == '-' ||
            get_esc(tok[7], gp->uuid, sizeof gp->uuid) < 0 || get_esc(tok[8], cpus, sizeof cpus) < 0)
            BAD("record line %d: a malformed GPU field", line);
        gp->mem_bytes = mem;
        /* bounded by the CPUs that can exist: CPU numbers are sparse (a
         * POWER9 with 160 PUs numbers them up to 175), so the bound is the
         * most a Linux kernel numbers (NR_CPUS, 8192), or more when this
         * machine or the record has more PUs */
        long ncpu = P3D_TOPO_CPU_IDS;
        if (get_nprocs_conf() > ncpu)
            ncpu = get_nprocs_conf();
        if (n->npus > ncpu)
            ncpu = n->npus;
        if (!cpulist_ok(cpus, ncpu))
            BAD("record line %d: the CPU list '%.40s%s' is not a list of CPUs below %ld (the CPUs that can exist)",
                line, cpus, strlen(cpus) > 40 ? "..." : "", ncpu);
        if (!(gp->cpus = strdup(cpus)))
            BAD("out of memory");
    }
    for (int j = 0; j < k; j++) {
        p3d_nic *ni = &n->nics[j];
        line++;
        if ((nt = next_line(&p, tok, MAXTOK)) != 5 || strcmp(tok[0], "nic") ||
            get_esc(tok[1], ni->name, sizeof ni->name) < 0 || get_esc(tok[2], ni->pci, sizeof ni->pci) < 0 ||
            get_esc(tok[3], ni->kind, sizeof ni->kind) < 0 || get_int(tok[4], -1, 1 << 20, &ni->numa) < 0)
            BAD("record line %d: expected 'nic NAME PCI KIND NUMA'", line);
    }
    for (int i = 0; i < g; i++) {
        line++;
        if ((nt = next_line(&p, tok, MAXTOK)) != g + 1 || strcmp(tok[0], "nvlink"))
            BAD("record line %d: expected 'nvlink' and %d values", line, g);
        for (int j = 0; j < g; j++) {
            char *end;
            double v = strtod(tok[j + 1], &end);
            if (end == tok[j + 1] || *end || !isfinite(v) || v < 0)
                BAD("record line %d: '%s' is not a bandwidth", line, tok[j + 1]);
            n->nvlink[(size_t)i * g + j] = v;
        }
    }
    /* what p3d_node_finish would refuse: a forged entry must read as
     * corrupt (and be rediscovered), not fail the load */
    if (g && p3d_nvlink_validate(n->nvlink, g, "record nvlink", &err) < 0)
        BAD("%s", err);
    for (int pass = 0; pass < 2; pass++) {
        int cols = pass ? k : g;
        unsigned char *m = pass ? n->gn_class : n->gg_class;
        for (int i = 0; i < g && cols; i++) {
            line++;
            if ((nt = next_line(&p, tok, MAXTOK)) != cols + 1 || strcmp(tok[0], pass ? "gn" : "gg"))
                BAD("record line %d: expected '%s' and %d link classes", line, pass ? "gn" : "gg", cols);
            for (int j = 0; j < cols; j++) {
                int v;
                if (get_int(tok[j + 1], 0, P3D_LINK_COUNT - 1, &v) < 0)
                    BAD("record line %d: '%s' is not a link class", line, tok[j + 1]);
                m[(size_t)i * cols + j] = (unsigned char)v;
            }
        }
    }
    if (*p)
        BAD("record line %d: unexpected text after the record", line + 1);
#undef BAD
    *out = n;
    n = NULL;
    rc = 0;
out:
    free(err);
    free(copy);
    free(tok);
    p3d_node_free(n);
    return rc;
}
