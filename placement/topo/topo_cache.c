/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_cache.c — the local topology cache, the way slurmd keeps its hwloc
 * XML: live discovery's node record, kept under a key that changes whenever
 * the answer could, and reused only when the whole key matches
 * (topo_cache.h says what is and is not in it).
 *
 * An entry is one text file:
 *   P3DTOPO <format>
 *   key <name> <value>          one line per key component
 *   counts ... / gpu ... / nic ... / nvlink ... / gg ... / gn ...
 *   sum <16 hex digits>         FNV-1a over every byte before this line
 * The sum catches truncation and stray edits before a field is parsed; the
 * parser still checks every field, so an entry that passes the sum but was
 * forged fails as "corrupt", never as a crash.
 *
 * The directory follows the run-directory rules (launcher/run/rundir.c),
 * relaxed for reading: a real directory (not a symlink), owned by this user
 * or root, that neither group nor others may write. Entries are regular
 * files with one link, owned by this user or root, not writable by group or
 * others, opened O_NOFOLLOW. Anything else is ignored with one line and
 * replaced: the new entry is written under a random name with O_EXCL |
 * O_NOFOLLOW and renamed over the old name, so a reader never sees half of
 * one and a planted symlink is replaced, not followed. No fsync: a cache
 * entry lost in a crash costs one discovery, and the sum catches a torn one.
 */
#include "topo_cache.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "strbuf.h"
#include "termsafe.h"

/* Bump whenever what discovery puts in the record, or how it is written,
 * changes: par3drun's version alone does not move between commits. */
#define TOPO_CACHE_FORMAT 1
#define TOPO_CACHE_MAX ((size_t)4 << 20)

/* ---- settings ---------------------------------------------------------- */

static int cfg_set, cfg_enabled = 1, cfg_verbose;

void p3d_topo_cache_configure(int enabled, int verbose)
{
    cfg_set = 1;
    cfg_enabled = enabled;
    cfg_verbose = verbose;
}

int p3d_topo_cache_wanted(void)
{
    if (cfg_set)
        return cfg_enabled;
    const char *e = getenv("P3D_TOPO_CACHE");
    return !(e && !strcmp(e, "0"));
}

int p3d_topo_cache_verbose(void)
{
    return cfg_verbose;
}

char *p3d_topo_cache_dir(void)
{
    char *d = NULL;
    const char *e = getenv("P3D_TOPO_CACHE_DIR");
    if (e && *e)
        return strdup(e);
    if (geteuid() == 0)
        return strdup("/var/cache/par3drun");
    if ((e = getenv("XDG_CACHE_HOME")) && e[0] == '/') {
        if (asprintf(&d, "%s/par3drun", e) < 0)
            d = NULL;
        return d;
    }
    if ((e = getenv("HOME")) && e[0] == '/') {
        if (asprintf(&d, "%s/.cache/par3drun", e) < 0)
            d = NULL;
        return d;
    }
    return NULL;
}

/* ---- escaping ---------------------------------------------------------- */

/* Fields are separated by spaces, so every value is written with %XX for
 * space, control bytes, '%' and non-ASCII; "-" stands for the empty string
 * (a real "-" is written %2d). */
static void put_esc(p3d_sb *b, const char *s)
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

static void fnv(uint64_t *h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++) {
        *h ^= b[i];
        *h *= 0x100000001b3ULL;
    }
}

static uint64_t fnv_str(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    fnv(&h, s, len);
    return h;
}

/* ---- the key ----------------------------------------------------------- */

static char *read_small(const char *root, const char *path)
{
    char p[4096], buf[65536];
    snprintf(p, sizeof p, "%s%s", root, path);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n, k = 0;
    while (k < (ssize_t)sizeof buf - 1 &&
           (n = read(fd, buf + k, sizeof buf - 1 - (size_t)k)) > 0)
        k += n;
    close(fd);
    if (k < 0)
        return NULL;
    buf[k] = 0;
    return strdup(buf);
}

static char *trimmed(char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

/* One sysfs attribute of a PCI device, trimmed, into out (or "?"). */
static void pci_attr(int dfd, const char *dev, const char *attr, char *out,
                     size_t cap)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dev, attr);
    snprintf(out, cap, "?");
    int fd = openat(dfd, p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0) {
        snprintf(out, cap, "?");
        return;
    }
    out[n] = 0;
    trimmed(out);
    if (!strncmp(out, "0x", 2))
        memmove(out, out + 2, strlen(out + 2) + 1);
}

/* The value of one KEY= line of a uevent text ("" when absent), with ':'
 * and ',' (the list's separators) written as '_'. */
static void uevent_field(p3d_sb *b, const char *ue, const char *key)
{
    size_t kl = strlen(key);
    for (const char *l = ue; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, key, kl)) {
            for (const char *v = l + kl; *v && *v != '\n'; v++)
                p3d_sb_putc(b, *v == ':' || *v == ',' ? '_' : *v);
            return;
        }
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The PCI device list: one directory read of /sys/bus/pci/devices and two
 * small reads per device — uevent (PCI_ID is vendor:device; DRIVER, because
 * binding or unbinding a driver adds or removes the OS devices hwloc
 * reports: the NIC names, cuda*) and numa_node — sorted by address. */
static char *pci_list(const char *root)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/sys/bus/pci/devices", root);
    int dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return strdup(""); /* no PCI bus (a container without sysfs) */
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return NULL;
    }
    char **names = NULL, *out = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn)
                goto out;
            names = nn;
        }
        if (!(names[n] = strdup(e->d_name)))
            goto out;
        n++;
    }
    qsort(names, n, sizeof *names, name_cmp);
    p3d_sb b = {0};
    for (size_t i = 0; i < n; i++) {
        char ue[1024], numa[32];
        pci_attr(dirfd(d), names[i], "uevent", ue, sizeof ue);
        pci_attr(dirfd(d), names[i], "numa_node", numa, sizeof numa);
        if (i)
            p3d_sb_putc(&b, ',');
        p3d_sb_printf(&b, "%s:", names[i]);
        uevent_field(&b, ue, "PCI_ID=");
        p3d_sb_printf(&b, ":%s:", numa);
        uevent_field(&b, ue, "DRIVER=");
    }
    out = p3d_sb_finish(&b);
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return out;
}

/* This process's allowed CPUs as a list ("0-7,16"), from sched_getaffinity
 * (sized up until the kernel's mask fits). */
static char *cpu_list(void)
{
    for (int ncpu = 1024; ncpu <= (1 << 20); ncpu *= 4) {
        cpu_set_t *set = CPU_ALLOC((size_t)ncpu);
        size_t sz = CPU_ALLOC_SIZE((size_t)ncpu);
        if (!set)
            return NULL;
        if (sched_getaffinity(0, sz, set) < 0) {
            CPU_FREE(set);
            if (errno == EINVAL)
                continue;
            return NULL;
        }
        p3d_sb b = {0};
        int first = 1;
        for (int c = 0; c < ncpu; c++) {
            if (!CPU_ISSET_S((size_t)c, sz, set))
                continue;
            int e = c;
            while (e + 1 < ncpu && CPU_ISSET_S((size_t)(e + 1), sz, set))
                e++;
            p3d_sb_printf(&b, first ? "%d" : ",%d", c);
            if (e > c)
                p3d_sb_printf(&b, "-%d", e);
            first = 0;
            c = e;
        }
        CPU_FREE(set);
        return p3d_sb_finish(&b);
    }
    return NULL;
}

/* Mems_allowed_list from a /proc/self/status text. */
static char *mems_list(const char *status)
{
    const char *p = status ? strstr(status, "\nMems_allowed_list:") : NULL;
    if (!p)
        return NULL;
    p += strlen("\nMems_allowed_list:");
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, "\n");
    char *s = strndup(p, n);
    return trimmed(s);
}

static int env_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* HWLOC_* variables change what hwloc discovers (HWLOC_XMLFILE,
 * HWLOC_COMPONENTS, HWLOC_ALLOW...), so they are part of the key. */
static char *hwloc_env(void)
{
    extern char **environ;
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n += !strncmp(*e, "HWLOC_", 6);
    if (!n)
        return strdup("");
    char **v = malloc(n * sizeof *v);
    if (!v)
        return NULL;
    n = 0;
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "HWLOC_", 6))
            v[n++] = *e;
    qsort(v, n, sizeof *v, env_cmp);
    p3d_sb b = {0};
    for (size_t i = 0; i < n; i++) {
        if (i)
            p3d_sb_putc(&b, ',');
        p3d_sb_puts(&b, v[i]);
    }
    free(v);
    return p3d_sb_finish(&b);
}

/* hwloc_get_api_version() stays put across hwloc's bug-fix releases, whose
 * discovery may still differ: the loaded library file (path, size, mtime)
 * changes with every package upgrade. */
static char *hwloc_lib(void)
{
    Dl_info di;
    struct stat st;
    char *s = NULL;
    if (!dladdr((void *)hwloc_get_api_version, &di) || !di.dli_fname ||
        stat(di.dli_fname, &st) < 0)
        return strdup("");
    if (asprintf(&s, "%s:%lld:%lld", di.dli_fname, (long long)st.st_size,
                 (long long)st.st_mtime) < 0)
        s = NULL;
    return s;
}

void p3d_topo_key_clear(p3d_topo_key *k)
{
    P3D_FREE(&k->boot_id);
    P3D_FREE(&k->version);
    P3D_FREE(&k->hwloc_lib);
    P3D_FREE(&k->host);
    P3D_FREE(&k->cpus);
    P3D_FREE(&k->mems);
    P3D_FREE(&k->pci);
    P3D_FREE(&k->env);
}

int p3d_topo_key_gather(p3d_topo_key *k, const char *root, char **err)
{
    int rc = -1;
    char host[256] = "", *status = NULL;
    memset(k, 0, sizeof *k);
    if (!(k->boot_id = trimmed(read_small(root, "/proc/sys/kernel/random/boot_id"))) ||
        !k->boot_id[0]) {
        p3d_err(err, "%s/proc/sys/kernel/random/boot_id: cannot read it", root);
        goto out;
    }
    status = read_small(root, "/proc/self/status");
    if (!(k->mems = mems_list(status))) {
        p3d_err(err, "%s/proc/self/status: no Mems_allowed_list line", root);
        goto out;
    }
    if (gethostname(host, sizeof host - 1) < 0)
        host[0] = 0;
    k->hwloc_api = hwloc_get_api_version();
    if (!(k->version = strdup(P3D_VERSION)) || !(k->host = strdup(host)) ||
        !(k->hwloc_lib = hwloc_lib()) ||
        !(k->cpus = cpu_list()) || !(k->pci = pci_list(root)) ||
        !(k->env = hwloc_env())) {
        p3d_err(err, "cannot read this process's CPUs or the PCI device list");
        goto out;
    }
    rc = 0;
out:
    free(status);
    if (rc < 0)
        p3d_topo_key_clear(k);
    return rc;
}

char *p3d_topo_key_text(const p3d_topo_key *k)
{
    p3d_sb b = {0};
    p3d_sb_printf(&b, "key format %d\nkey par3drun ", TOPO_CACHE_FORMAT);
    put_esc(&b, k->version);
    p3d_sb_printf(&b, "\nkey hwloc %u.%u.%u\nkey hwloc_lib ", k->hwloc_api >> 16,
                  (k->hwloc_api >> 8) & 0xff, k->hwloc_api & 0xff);
    put_esc(&b, k->hwloc_lib);
    p3d_sb_puts(&b, "\nkey boot_id ");
    put_esc(&b, k->boot_id);
    p3d_sb_puts(&b, "\nkey host ");
    put_esc(&b, k->host);
    p3d_sb_puts(&b, "\nkey cpus ");
    put_esc(&b, k->cpus);
    p3d_sb_puts(&b, "\nkey mems ");
    put_esc(&b, k->mems);
    p3d_sb_puts(&b, "\nkey hwloc_env ");
    put_esc(&b, k->env);
    p3d_sb_puts(&b, "\nkey pci ");
    put_esc(&b, k->pci);
    p3d_sb_putc(&b, '\n');
    return p3d_sb_finish(&b);
}

/* ---- the record -------------------------------------------------------- */

char *p3d_topo_raw_encode(const p3d_node *n, const p3d_topo_extra *x)
{
    p3d_sb b = {0};
    int g = n->ngpus, k = n->nnics;
    p3d_sb_printf(&b, "counts %d %d %d %d %d %d %d %d\n", g, k, n->nnuma,
                  n->npackages, n->ncores, n->npus, x->had_matrix, x->namd);
    for (int i = 0; i < g; i++) {
        const p3d_gpu *gp = &n->gpus[i];
        p3d_sb_puts(&b, "gpu ");
        put_esc(&b, gp->pci);
        p3d_sb_putc(&b, ' ');
        put_esc(&b, gp->model);
        p3d_sb_putc(&b, ' ');
        put_esc(&b, gp->osdev);
        p3d_sb_printf(&b, " %d %d %llu ", gp->numa, gp->package,
                      (unsigned long long)gp->mem_bytes);
        put_esc(&b, gp->uuid);
        p3d_sb_putc(&b, ' ');
        put_esc(&b, gp->cpus);
        p3d_sb_putc(&b, '\n');
    }
    for (int j = 0; j < k; j++) {
        const p3d_nic *ni = &n->nics[j];
        p3d_sb_puts(&b, "nic ");
        put_esc(&b, ni->name);
        p3d_sb_putc(&b, ' ');
        put_esc(&b, ni->pci);
        p3d_sb_putc(&b, ' ');
        put_esc(&b, ni->kind);
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

int p3d_topo_raw_decode(const char *text, p3d_node **out, p3d_topo_extra *x,
                        char **why)
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
#define BAD(...) do { p3d_err(why, __VA_ARGS__); goto out; } while (0)
    line++;
    if ((nt = next_line(&p, tok, MAXTOK)) != 9 || strcmp(tok[0], "counts"))
        BAD("record line %d: expected 'counts' and 8 numbers", line);
    for (int i = 0; i < 8; i++)
        if (get_int(tok[i + 1], i < 2 ? 0 : -1, i < 2 ? 4096 : 1 << 24, &c[i]) < 0)
            BAD("record line %d: field %d is '%s': expected a count", line,
                i + 2, tok[i + 1]);
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
        if (get_esc(tok[1], gp->pci, sizeof gp->pci) < 0 ||
            get_esc(tok[2], gp->model, sizeof gp->model) < 0 ||
            get_esc(tok[3], gp->osdev, sizeof gp->osdev) < 0 ||
            get_int(tok[4], -1, 1 << 20, &gp->numa) < 0 ||
            get_int(tok[5], -1, 1 << 20, &gp->package) < 0 ||
            errno || end == tok[6] || *end || tok[6][0] == '-' ||
            get_esc(tok[7], gp->uuid, sizeof gp->uuid) < 0 ||
            get_esc(tok[8], cpus, sizeof cpus) < 0)
            BAD("record line %d: a malformed GPU field", line);
        gp->mem_bytes = mem;
        if (!(gp->cpus = strdup(cpus)))
            BAD("out of memory");
    }
    for (int j = 0; j < k; j++) {
        p3d_nic *ni = &n->nics[j];
        line++;
        if ((nt = next_line(&p, tok, MAXTOK)) != 5 || strcmp(tok[0], "nic") ||
            get_esc(tok[1], ni->name, sizeof ni->name) < 0 ||
            get_esc(tok[2], ni->pci, sizeof ni->pci) < 0 ||
            get_esc(tok[3], ni->kind, sizeof ni->kind) < 0 ||
            get_int(tok[4], -1, 1 << 20, &ni->numa) < 0)
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
            if ((nt = next_line(&p, tok, MAXTOK)) != cols + 1 ||
                strcmp(tok[0], pass ? "gn" : "gg"))
                BAD("record line %d: expected '%s' and %d link classes", line,
                    pass ? "gn" : "gg", cols);
            for (int j = 0; j < cols; j++) {
                int v;
                if (get_int(tok[j + 1], 0, P3D_LINK_COUNT - 1, &v) < 0)
                    BAD("record line %d: '%s' is not a link class", line,
                        tok[j + 1]);
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

/* ---- the directory and its entries ------------------------------------- */

char *p3d_topo_cache_name(const char *key)
{
    char host[65] = "", *name = NULL;
    const char *h = strstr(key, "\nkey host ");
    if (h) {
        h += strlen("\nkey host ");
        size_t i = 0;
        for (; h[i] && h[i] != '\n' && i < sizeof host - 1; i++)
            host[i] = isalnum((unsigned char)h[i]) || h[i] == '.' ||
                              h[i] == '-' || h[i] == '_'
                          ? h[i]
                          : '_';
        host[i] = 0;
    }
    if (asprintf(&name, "topo-%s-%016llx", host[0] ? host : "_",
                 (unsigned long long)fnv_str(key, strlen(key))) < 0)
        name = NULL;
    return name;
}

static void say(const char *dir, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(const char *dir, const char *name, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* dir comes from the environment: escaped like every outside name */
    fprintf(stderr, "par3drun: topology cache: %s%s%s: %s\n", p3d_tesc(dir),
            name ? "/" : "", name ? p3d_tesc(name) : "", msg);
}

/* The directory's rule: a real directory (O_NOFOLLOW), ours or root's, that
 * group and others cannot write. create: make it (and missing parents,
 * 0700) when absent. Returns a descriptor, or -1 (said when loud). */
static int open_dir(const char *dir, int create, int loud)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        char *p = strdup(dir);
        for (char *s = p ? p + 1 : NULL; s && *s; s++)
            if (*s == '/') {
                *s = 0;
                (void)mkdir(p, 0700);
                *s = '/';
            }
        if (p && mkdir(p, 0700) < 0 && errno != EEXIST)
            fd = -1;
        free(p);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
        if (loud && errno != ENOENT)
            say(dir, NULL, "%s: not used (expected a directory that is not "
                "a symlink; set P3D_TOPO_CACHE_DIR or --no-topo-cache)",
                errno == ELOOP || errno == ENOTDIR ? "a symlink or not a directory"
                                                   : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || (st.st_uid != geteuid() && st.st_uid != 0) ||
        (st.st_mode & 022)) {
        if (loud)
            say(dir, NULL, "owner uid %u, mode %04o: not used (expected a "
                "directory of this user or root that group and others cannot "
                "write: chmod go-w it, or set P3D_TOPO_CACHE_DIR)",
                (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* Reads dfd/name by the entry rule into *text. 1: read, 0: absent, -1:
 * present but not usable (*why says why). */
static int read_entry(int dfd, const char *name, char **text, char **why)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    *text = NULL;
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return p3d_err(why, "%s", errno == ELOOP ? "a symlink" : strerror(errno));
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        p3d_err(why, "not a regular file");
        goto out;
    }
    if ((st.st_uid != geteuid() && st.st_uid != 0) || st.st_nlink != 1 ||
        (st.st_mode & 022)) {
        p3d_err(why, "owner uid %u, %u links, mode %04o (expected one link, "
                "this user's or root's, not writable by group or others)",
                (unsigned)st.st_uid, (unsigned)st.st_nlink,
                (unsigned)(st.st_mode & 07777));
        goto out;
    }
    if ((size_t)st.st_size > TOPO_CACHE_MAX) {
        p3d_err(why, "%lld bytes: larger than any entry", (long long)st.st_size);
        goto out;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t k = 0;
    ssize_t r = 0;
    while (b && k < (size_t)st.st_size &&
           (r = read(fd, b + k, (size_t)st.st_size - k)) > 0)
        k += (size_t)r;
    if (!b || r < 0) {
        free(b);
        p3d_err(why, "cannot read it");
        goto out;
    }
    b[k] = 0;
    if (memchr(b, 0, k)) {
        free(b);
        p3d_err(why, "corrupt (binary data)");
        goto out;
    }
    *text = b;
    rc = 1;
out:
    close(fd);
    return rc;
}

/* The first key line that differs, for the message ("boot_id"). */
static void key_diff(const char *have, const char *want, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    while (*have && *want) {
        size_t lh = strcspn(have, "\n"), lw = strcspn(want, "\n");
        if (lh != lw || memcmp(have, want, lh)) {
            const char *nm = want + 4; /* after "key " */
            snprintf(out, cap, "%.*s", (int)strcspn(nm, " \n"), nm);
            return;
        }
        have += lh + (have[lh] == '\n');
        want += lw + (want[lw] == '\n');
    }
}

/* Checks an entry's frame (magic, key, sum) and returns its record part,
 * or NULL with *why. */
static const char *check_frame(char *text, const char *key, char **why)
{
    char magic[32];
    size_t len = strlen(text);
    snprintf(magic, sizeof magic, "P3DTOPO %d\n", TOPO_CACHE_FORMAT);
    if (strncmp(text, "P3DTOPO ", 8)) {
        p3d_err(why, "corrupt (no P3DTOPO header)");
        return NULL;
    }
    /* the last line: "sum " + 16 hex + "\n", 21 bytes */
    if (len < 22 || text[len - 1] != '\n' || strncmp(text + len - 21, "sum ", 4) ||
        text[len - 22] != '\n') {
        p3d_err(why, "truncated (no closing sum line)");
        return NULL;
    }
    char want[17];
    snprintf(want, sizeof want, "%016llx",
             (unsigned long long)fnv_str(text, len - 21));
    if (memcmp(text + len - 17, want, 16)) {
        p3d_err(why, "corrupt (its sum does not match its content)");
        return NULL;
    }
    text[len - 21] = 0;
    if (strncmp(text, magic, strlen(magic))) {
        p3d_err(why, "written by another entry format");
        return NULL;
    }
    const char *k = text + strlen(magic);
    if (strncmp(k, key, strlen(key))) {
        char what[64];
        key_diff(k, key, what, sizeof what);
        p3d_err(why, "another key (%s differs)", what);
        return NULL;
    }
    return k + strlen(key);
}

int p3d_topo_cache_lookup(const char *key, p3d_node **raw, p3d_topo_extra *x)
{
    int rc = 0, dfd = -1;
    char *dir = p3d_topo_cache_dir(), *name = p3d_topo_cache_name(key);
    char *text = NULL, *why = NULL;
    *raw = NULL;
    if (!dir || !name) {
        if (cfg_verbose)
            fprintf(stderr, "par3drun: topology cache: no directory (no HOME; "
                    "set P3D_TOPO_CACHE_DIR): discovering live\n");
        goto out;
    }
    if ((dfd = open_dir(dir, 0, 1)) < 0) {
        if (cfg_verbose && errno == ENOENT)
            say(dir, NULL, "absent: discovering live");
        goto out;
    }
    int k = read_entry(dfd, name, &text, &why);
    if (k == 0) {
        if (cfg_verbose)
            say(dir, name, "no entry for this key: discovering live");
        goto out;
    }
    const char *rec = k > 0 ? check_frame(text, key, &why) : NULL;
    if (rec && p3d_topo_raw_decode(rec, raw, x, &why) == 0) {
        if (cfg_verbose)
            say(dir, name, "reused (the whole key matched: boot id, hwloc, "
                "PCI devices, allowed CPUs and memory nodes, par3drun version)");
        rc = 1;
        goto out;
    }
    say(dir, name, "%s: ignored; discovering live and rewriting it",
        why ? why : "corrupt");
out:
    if (dfd >= 0)
        close(dfd);
    free(dir);
    free(name);
    free(text);
    free(why);
    return rc;
}

/* Entries of this host written before this boot can never match again
 * (their boot id is gone): removed when a new one is stored, so the
 * directory does not grow by one entry per boot. */
static void prune(int dfd, const char *name)
{
    struct sysinfo si;
    const char *dash = strrchr(name, '-');
    if (!dash || sysinfo(&si) < 0)
        return;
    size_t plen = (size_t)(dash - name) + 1;
    time_t boot = time(NULL) - si.uptime - 60;
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (strncmp(e->d_name, name, plen) || !strcmp(e->d_name, name) ||
            fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (st.st_mtime < boot)
            (void)unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

void p3d_topo_cache_store(const char *key, const char *raw_text)
{
    int dfd = -1, fd = -1;
    char *dir = p3d_topo_cache_dir(), *name = p3d_topo_cache_name(key);
    char tmp[64] = "";
    p3d_sb b = {0};
    if (!dir || !name || (dfd = open_dir(dir, 1, 0)) < 0) {
        if (cfg_verbose && dir)
            say(dir, NULL, "cannot use it to store the record (%s)",
                strerror(errno));
        goto out;
    }
    p3d_sb_printf(&b, "P3DTOPO %d\n", TOPO_CACHE_FORMAT);
    p3d_sb_puts(&b, key);
    p3d_sb_puts(&b, raw_text);
    if (b.oom)
        goto out;
    uint64_t sum = fnv_str(b.p, b.len);
    p3d_sb_printf(&b, "sum %016llx\n", (unsigned long long)sum);
    unsigned char r[8];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        goto out;
    snprintf(tmp, sizeof tmp, ".tmp-%02x%02x%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd < 0 || b.oom)
        goto fail;
    size_t off = 0;
    while (off < b.len) {
        ssize_t w = write(fd, b.p + off, b.len - off);
        if (w <= 0)
            goto fail;
        off += (size_t)w;
    }
    if (close(fd) < 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (renameat(dfd, tmp, dfd, name) < 0)
        goto fail;
    tmp[0] = 0;
    if (cfg_verbose)
        say(dir, name, "stored");
    prune(dfd, name);
    goto out;
fail:
    if (cfg_verbose)
        say(dir, name, "cannot store the record: %s", strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    if (tmp[0] && dfd >= 0)
        (void)unlinkat(dfd, tmp, 0);
    if (dfd >= 0)
        close(dfd);
    p3d_sb_free(&b);
    free(dir);
    free(name);
}
