/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_cache_key.c — the topology cache's key (topo_cache.h): every fact of
 * the running system that can change what live discovery finds, read from
 * /proc, /sys, hwloc and the environment, and written as the "key" lines an
 * entry starts with.
 */
#include "topo_cache.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strbuf.h"

/* ---- the key ----------------------------------------------------------- */

static char *read_small(const char *root, const char *path)
{
    char p[4096], buf[65536];
    snprintf(p, sizeof p, "%s%s", root, path);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n, k = 0;
    while (k < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + k, sizeof buf - 1 - (size_t)k)) > 0)
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
static void pci_attr(int dfd, const char *dev, const char *attr, char *out, size_t cap)
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
    if (!dladdr((void *)hwloc_get_api_version, &di) || !di.dli_fname || stat(di.dli_fname, &st) < 0)
        return strdup("");
    if (asprintf(&s, "%s:%lld:%lld", di.dli_fname, (long long)st.st_size, (long long)st.st_mtime) < 0)
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
    if (!(k->boot_id = trimmed(read_small(root, "/proc/sys/kernel/random/boot_id"))) || !k->boot_id[0]) {
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
    if (!(k->version = strdup(P3D_VERSION)) || !(k->host = strdup(host)) || !(k->hwloc_lib = hwloc_lib()) ||
        !(k->cpus = cpu_list()) || !(k->pci = pci_list(root)) || !(k->env = hwloc_env())) {
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
    p3d_cache_record_put_esc(&b, k->version);
    p3d_sb_printf(&b, "\nkey hwloc %u.%u.%u\nkey hwloc_lib ", k->hwloc_api >> 16, (k->hwloc_api >> 8) & 0xff,
                  k->hwloc_api & 0xff);
    p3d_cache_record_put_esc(&b, k->hwloc_lib);
    p3d_sb_puts(&b, "\nkey boot_id ");
    p3d_cache_record_put_esc(&b, k->boot_id);
    p3d_sb_puts(&b, "\nkey host ");
    p3d_cache_record_put_esc(&b, k->host);
    p3d_sb_puts(&b, "\nkey cpus ");
    p3d_cache_record_put_esc(&b, k->cpus);
    p3d_sb_puts(&b, "\nkey mems ");
    p3d_cache_record_put_esc(&b, k->mems);
    p3d_sb_puts(&b, "\nkey hwloc_env ");
    p3d_cache_record_put_esc(&b, k->env);
    p3d_sb_puts(&b, "\nkey pci ");
    p3d_cache_record_put_esc(&b, k->pci);
    p3d_sb_putc(&b, '\n');
    return p3d_sb_finish(&b);
}
