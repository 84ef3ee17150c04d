/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plugin.c — the plugin registry (p3d/plugin.h): one search path, one
 * descriptor check, built-ins and loaded plugins in one table, and every
 * skipped candidate said on stderr and in the "not found" message.
 *
 * dlopen runs a library's constructors before its descriptor can be read,
 * so a candidate is trusted before it is opened, as ssh trusts an
 * authorized_keys file: its directory and the file owned by root or this
 * user and writable by no one else, the file a regular file reached
 * without a symbolic link, and every P3D_PLUGIN_DIR entry absolute (a
 * relative one would load from whatever the current directory is). The
 * file is checked on an open descriptor and loaded through that same
 * descriptor (/proc/self/fd/N), so it cannot be swapped in between.
 */
#include "p3d/plugin.h"
#include "p3d/base.h"

#include "say.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES 32
#define MAX_SKIPPED 32

typedef struct entry {
    const p3d_plugin *desc;
    char *path; /* NULL for a built-in */
} entry;

/* The registry: process-wide, guarded by one mutex (policies may be placed
 * from several threads in bench/). Loaded plugins are never unloaded:
 * libcurl and libpmix keep threads and atexit state that must not outlive
 * their code. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry entries[MAX_ENTRIES];
static size_t nentries;
static char *skipped[MAX_SKIPPED]; /* paths already said, to say each once */
static size_t nskipped;

static const char *const prefixes[] = {
    [P3D_PLUGIN_TOPO] = "topo",
    [P3D_PLUGIN_RDZV] = "rdzv",
    [P3D_PLUGIN_POLICY] = "policy",
};

const char *p3d_plugin_kind_prefix(int kind)
{
    if (kind <= 0 || (size_t)kind >= sizeof prefixes / sizeof *prefixes)
        return NULL;
    return prefixes[kind];
}

static entry *lookup(int kind, const char *name)
{
    for (size_t i = 0; i < nentries; i++)
        if (entries[i].desc->kind == kind && !strcmp(entries[i].desc->name, name))
            return &entries[i];
    return NULL;
}

int p3d_plugin_register(const p3d_plugin *b, char **err)
{
    int rc = -1;
    if (!b || b->abi != P3D_PLUGIN_ABI || !p3d_plugin_kind_prefix(b->kind) || !b->name || !b->ops)
        return p3d_err(err, "built-in plugin '%s': malformed descriptor", b && b->name ? b->name : "?");
    pthread_mutex_lock(&lock);
    entry *e = lookup(b->kind, b->name);
    if (e && e->desc != b)
        p3d_err(err, "built-in plugin '%s': a %s plugin of that name is already registered", b->name,
                prefixes[b->kind]);
    else if (!e && nentries == MAX_ENTRIES)
        p3d_err(err, "built-in plugin '%s': the registry is full (%d entries)", b->name, MAX_ENTRIES);
    else {
        if (!e)
            entries[nentries++] = (entry){b, NULL};
        rc = 0;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The directories, in search order; n of them in dirs (malloc'd). */
static size_t search_dirs(char ***out)
{
    char **d = calloc(64, sizeof *d);
    size_t n = 0;
    *out = d;
    if (!d)
        return 0;
    const char *env = getenv("P3D_PLUGIN_DIR");
    if (env && *env) {
        char *copy = strdup(env);
        for (char *save = NULL, *s = copy ? strtok_r(copy, ":", &save) : NULL; s && n < 60;
             s = strtok_r(NULL, ":", &save))
            d[n++] = strdup(s);
        free(copy);
    }
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            if (asprintf(&d[n], "%s/plugins", exe) >= 0)
                n++;
            if (asprintf(&d[n], "%s/../%s/par3drun", exe, P3D_INSTALL_LIBDIR) >= 0)
                n++;
        }
    }
    d[n++] = strdup(P3D_INSTALL_PLUGIN_DIR);
    /* drop failed strdups and repeats, keeping the order */
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        int dup = !d[i];
        for (size_t j = 0; j < w && !dup; j++)
            dup = !strcmp(d[j], d[i]);
        if (dup)
            free(d[i]);
        else
            d[w++] = d[i];
    }
    return w;
}

static void free_dirs(char **d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(d[i]);
    free(d);
}

char *p3d_plugin_search_path(void)
{
    char **d, *out = NULL;
    size_t n = search_dirs(&d), total = 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(d[i]) + 2;
    if ((out = calloc(1, total)))
        for (size_t i = 0; i < n; i++) {
            if (i)
                strcat(out, ", ");
            strcat(out, d[i]);
        }
    free_dirs(d, n);
    return out;
}

char *p3d_plugin_builtin_names(int kind)
{
    size_t total = 1;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nentries; i++)
        if (!entries[i].path && entries[i].desc->kind == kind)
            total += strlen(entries[i].desc->name) + 2;
    char *out = calloc(1, total);
    for (size_t i = 0; out && i < nentries; i++)
        if (!entries[i].path && entries[i].desc->kind == kind) {
            if (*out)
                strcat(out, ", ");
            strcat(out, entries[i].desc->name);
        }
    pthread_mutex_unlock(&lock);
    return out;
}

/* 1 the first time key is seen in this process (what is said once). */
static int say_once(const char *key)
{
    for (size_t i = 0; i < nskipped; i++)
        if (!strcmp(skipped[i], key))
            return 0;
    if (nskipped < MAX_SKIPPED && (skipped[nskipped] = strdup(key)))
        nskipped++;
    return 1;
}

/* Says a skipped candidate on stderr, once per path per process. */
static void say_skipped(const char *path, const char *why)
{
    if (say_once(path))
        p3d_warn("plugin %s skipped: %s", path, why);
}

/* What is wrong with st for code we run (NULL: nothing): owned by root or
 * us, writable by no one else. */
static const char *untrusted(const struct stat *st, char *buf, size_t cap)
{
    if (st->st_uid != 0 && st->st_uid != geteuid()) {
        snprintf(buf, cap, "is owned by uid %u, neither root nor you (uid %u)", (unsigned)st->st_uid,
                 (unsigned)geteuid());
        return buf;
    }
    if (st->st_mode & 022) {
        snprintf(buf, cap, "has mode %04o, writable by others (group or world): chmod go-w it",
                 (unsigned)(st->st_mode & 07777));
        return buf;
    }
    return NULL;
}

/* Checks dir and dir/file before anything is loaded: the file's descriptor
 * (O_NOFOLLOW, a regular file), or -1 with the reason in buf. */
static int open_trusted(const char *dir, const char *path, char *buf, size_t cap)
{
    struct stat st;
    char why[160];
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        snprintf(buf, cap, "its directory %s is not a directory", dir);
        return -1;
    }
    if (untrusted(&st, why, sizeof why)) {
        snprintf(buf, cap, "not loaded: its directory %s %s", dir, why);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, cap, "not loaded: %s", errno == ELOOP ? "a symbolic link" : strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        snprintf(buf, cap, "not loaded: not a regular file");
    else if (untrusted(&st, why, sizeof why))
        snprintf(buf, cap, "not loaded: the file %s", why);
    else
        return fd;
    close(fd);
    return -1;
}

/* Opens one candidate. 1 with *out (registered), 0 skipped (*why). */
static int try_file(int kind, const char *name, const char *dir, const char *path, const char *sym,
                    const p3d_plugin **out, char **why)
{
    char buf[512], self[64];
    int fd = open_trusted(dir, path, buf, sizeof buf);
    if (fd < 0)
        goto skip;
    /* the very file just checked, not whatever the path names by now */
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    void *dl = dlopen(access(self, F_OK) == 0 ? self : path, RTLD_NOW | RTLD_LOCAL);
    close(fd);
    if (!dl) {
        snprintf(buf, sizeof buf, "cannot load: %s", dlerror());
        goto skip;
    }
    const p3d_plugin *d = dlsym(dl, sym);
    /* the ABI number is the first field: read it before anything else */
    if (!d)
        snprintf(buf, sizeof buf, "does not export the descriptor %s", sym);
    else if (d->abi != P3D_PLUGIN_ABI)
        snprintf(buf, sizeof buf, "plugin ABI %d, this par3drun needs %d (rebuild the plugin)", d->abi, P3D_PLUGIN_ABI);
    else if (d->kind != kind)
        snprintf(buf, sizeof buf, "its descriptor says kind %d, expected %d (%s)", d->kind, kind, prefixes[kind]);
    else if (!d->name || strcmp(d->name, name) != 0)
        snprintf(buf, sizeof buf, "its descriptor names '%s', expected '%s'", d->name ? d->name : "(null)", name);
    else if (!d->ops)
        snprintf(buf, sizeof buf, "incomplete descriptor (no ops)");
    else if (nentries == MAX_ENTRIES)
        snprintf(buf, sizeof buf, "the registry is full (%d entries)", MAX_ENTRIES);
    else {
        entries[nentries++] = (entry){d, strdup(path)};
        *out = d;
        return 1;
    }
    dlclose(dl);
skip:
    say_skipped(path, buf);
    *why = strdup(buf);
    return 0;
}

int p3d_plugin_find(int kind, const char *name, const p3d_plugin **out, char **err)
{
    const char *prefix = p3d_plugin_kind_prefix(kind);
    *out = NULL;
    if (!prefix)
        return p3d_err(err, "plugin kind %d does not exist", kind);
    if (!name || !*name || strlen(name) > 64)
        return p3d_err(err, "'%s' is not a plugin name (1..64 letters, digits or '_')", name ? name : "");
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return p3d_err(err, "'%s' is not a plugin name (letters, digits or '_')", name);

    char sym[96], file[128];
    snprintf(sym, sizeof sym, "p3d_%s_%s", prefix, name);
    snprintf(file, sizeof file, "%s.so", sym);
    pthread_mutex_lock(&lock);
    entry *e = lookup(kind, name);
    if (e) {
        *out = e->desc;
        pthread_mutex_unlock(&lock);
        return 1;
    }
    char **dirs, *skips = NULL, *tried = NULL;
    size_t nd = search_dirs(&dirs);
    int rc = 0;
    for (size_t i = 0; i < nd && rc == 0; i++) {
        char *path = NULL;
        p3d_str_appendf(&tried, ", ", "%s", dirs[i]);
        if (dirs[i][0] != '/') {
            static const char rel[] = "is relative: plugins load from absolute directories only (it would load "
                                      "from the current directory)";
            char what[PATH_MAX + 64];
            snprintf(what, sizeof what, "P3D_PLUGIN_DIR entry '%s'", dirs[i]);
            if (say_once(what))
                fprintf(stderr, "par3drun: warning: %s %s; ignored\n", what, rel);
            p3d_str_appendf(&skips, "; ", "%s %s", what, rel);
            continue;
        }
        if (asprintf(&path, "%s/%s", dirs[i], file) < 0)
            continue;
        if (access(path, F_OK) == 0) {
            char *why = NULL;
            rc = try_file(kind, name, dirs[i], path, sym, out, &why);
            if (rc == 0)
                p3d_str_appendf(&skips, "; ", "skipped %s: %s", path, why ? why : "unusable");
            free(why);
        }
        free(path);
    }
    pthread_mutex_unlock(&lock);
    if (rc == 0) {
        p3d_err(err, "plugin %s: not found in %s%s%s%s", file, tried ? tried : "(no plugin directory)",
                skips ? " (" : "", skips ? skips : "", skips ? ")" : "");
    }
    free(skips);
    free(tried);
    free_dirs(dirs, nd);
    return rc;
}
