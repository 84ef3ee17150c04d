/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_common.h — helpers shared by the fuzz targets (tests/fuzz/fuzz_*.c).
 *
 * Every target defines LLVMFuzzerTestOneInput (and, when it needs setup,
 * LLVMFuzzerInitialize). The same file links either with libFuzzer (clang,
 * -DP3D_FUZZ=ON) or with replay_main.c, which feeds the checked-in corpus
 * to it under the normal compiler (ctest fuzz/<target>).
 *
 * Parsers that read files get the input through a private temporary
 * directory (on /dev/shm when there is one: a write + read costs a few
 * microseconds there), removed at exit.
 */
#ifndef P3D_FUZZ_COMMON_H
#define P3D_FUZZ_COMMON_H


#include <errno.h>
#include <stdarg.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fz_dir[256];

static inline int fz_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    remove(p);
    return 0;
}

static inline void fz_cleanup(void)
{
    if (fz_dir[0])
        nftw(fz_dir, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The private temp directory (created on first use; aborts when it cannot:
 * a fuzz run without it would test nothing). */
static inline const char *fz_tmpdir(void)
{
    if (fz_dir[0])
        return fz_dir;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fz_dir, sizeof fz_dir, "%s/p3dfuzz.XXXXXX", base);
    if (!mkdtemp(fz_dir)) {
        fprintf(stderr, "fuzz: mkdtemp %s: %s\n", fz_dir, strerror(errno));
        abort();
    }
    atexit(fz_cleanup);
    return fz_dir;
}

/* Writes data to <tmpdir>/<name>; returns the full path (static buffer of
 * the caller's choice). Aborts on I/O failure (a broken harness). */
static inline void fz_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
}

static inline char *fz_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", fz_tmpdir(), name);
    return buf;
}

/* Reads a source-tree file (P3D_FUZZ_SRC is the checkout) into a malloc'd
 * NUL-terminated buffer; aborts when missing. */
static inline char *fz_slurp_src(const char *rel, size_t *len)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", P3D_FUZZ_SRC, rel);
    FILE *f = fopen(p, "rb");
    if (!f) {
        fprintf(stderr, "fuzz: cannot read %s: %s\n", p, strerror(errno));
        abort();
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 2) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!b)
        abort();
    b[n] = 0;
    if (len)
        *len = n;
    return b;
}

/* A NUL-terminated copy of the input (parsers take C strings). */
static inline char *fz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* A tiny string builder for generated inputs (aborts when out of memory). */
typedef struct sb {
    char *p;
    size_t len, cap;
} sb;

static inline void add(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void add(sb *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
            abort();
        if (b->p && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t nc = (b->cap + (size_t)k + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np)
            abort();
        b->p = np;
        b->cap = nc;
    }
}


#endif
