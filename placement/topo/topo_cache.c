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
 *   mac <64 hex digits>         HMAC-SHA256 over every byte before this line
 * The MAC is keyed by this user's cache key, key.UID in the directory: 32
 * random bytes, mode 0600, made on first use. A checksum anyone can
 * recompute let a forged entry (8 phantom GPUs, a CPU list of 2^31 CPUs)
 * through; now an entry is believed only when it was written with the key,
 * and one without a valid MAC (or with no key at all) is ignored with one
 * line and rediscovered. The parser still checks every field, with bounds
 * (topo_cache_record.c), so even a keyed entry cannot crash or flood us.
 *
 * The directory follows the run-directory rules (launcher/run/rundir/rundir.c),
 * relaxed for reading: a real directory (not a symlink), owned by this user
 * or root, that neither group nor others may write. Entries are regular
 * files with one link, owned by this user or root, not writable by group or
 * others, opened O_NOFOLLOW. Anything else is ignored with one line and
 * replaced: the new entry is written under a random name with O_EXCL |
 * O_NOFOLLOW and renamed over the old name, so a reader never sees half of
 * one and a planted symlink is replaced, not followed. No fsync: a cache
 * entry lost in a crash costs one discovery, and the sum catches a torn one.
 *
 * The key (topo_cache_key.c) and the record's text form
 * (topo_cache_record.c) are their own files; this one keeps the settings,
 * the directory and its entries.
 */
#include "topo_cache.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"
#include "strbuf.h"
#include "termsafe.h"

#define TOPO_CACHE_MAX ((size_t)4 << 20)
#define CACHE_KEY_BYTES 32
/* "mac " + 64 hex + "\n" */
#define MAC_LINE 69

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

/* ---- the entry's sum (FNV-1a) ------------------------------------------ */

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

/* ---- the directory and its entries ------------------------------------- */

char *p3d_topo_cache_name(const char *key)
{
    char host[65] = "", *name = NULL;
    const char *h = strstr(key, "\nkey host ");
    if (h) {
        h += strlen("\nkey host ");
        size_t i = 0;
        for (; h[i] && h[i] != '\n' && i < sizeof host - 1; i++)
            host[i] = isalnum((unsigned char)h[i]) || h[i] == '.' || h[i] == '-' || h[i] == '_' ? h[i] : '_';
        host[i] = 0;
    }
    if (asprintf(&name, "topo-%s-%016llx", host[0] ? host : "_", (unsigned long long)fnv_str(key, strlen(key))) < 0)
        name = NULL;
    return name;
}

static void say(const char *dir, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(const char *dir, const char *name, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* dir comes from the environment: escaped like every outside name */
    fprintf(stderr, "par3drun: topology cache: %s%s%s: %s\n", p3d_tesc(dir), name ? "/" : "",
            name ? p3d_tesc(name) : "", msg);
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
            say(dir, NULL,
                "%s: not used (expected a directory that is not "
                "a symlink; set P3D_TOPO_CACHE_DIR or --no-topo-cache)",
                errno == ELOOP || errno == ENOTDIR ? "a symlink or not a directory" : strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022)) {
        if (loud)
            say(dir, NULL,
                "owner uid %u, mode %04o: not used (expected a "
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
    if ((st.st_uid != geteuid() && st.st_uid != 0) || st.st_nlink != 1 || (st.st_mode & 022)) {
        p3d_err(why,
                "owner uid %u, %u links, mode %04o (expected one link, "
                "this user's or root's, not writable by group or others)",
                (unsigned)st.st_uid, (unsigned)st.st_nlink, (unsigned)(st.st_mode & 07777));
        goto out;
    }
    if ((size_t)st.st_size > TOPO_CACHE_MAX) {
        p3d_err(why, "%lld bytes: larger than any entry", (long long)st.st_size);
        goto out;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t k = 0;
    ssize_t r = 0;
    while (b && k < (size_t)st.st_size && (r = read(fd, b + k, (size_t)st.st_size - k)) > 0)
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

/* This user's cache key: dfd/key.UID, 32 bytes, a regular file of one link
 * that only this user may read. create: made (atomically: written under a
 * random name and linked in, so two first runs agree on one key) when
 * absent. 1 with k, 0 absent, -1 unusable (*why). */
static int cache_key(int dfd, int create, unsigned char k[CACHE_KEY_BYTES], char **why)
{
    char name[32], tmp[48];
    unsigned char r[8];
    snprintf(name, sizeof name, "key.%u", (unsigned)geteuid());
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            struct stat st;
            int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1 &&
                     !(st.st_mode & 077) && st.st_size == CACHE_KEY_BYTES &&
                     read(fd, k, CACHE_KEY_BYTES) == CACHE_KEY_BYTES;
            close(fd);
            if (ok)
                return 1;
            return p3d_err(why,
                           "its key %s is not a %d-byte file of one link that only you can read (mode 0600); "
                           "remove it to make a new one",
                           name, CACHE_KEY_BYTES);
        }
        if (errno != ENOENT)
            return p3d_err(why, "its key %s: %s", name, errno == ELOOP ? "a symlink" : strerror(errno));
        if (!create || attempt)
            return 0;
        unsigned char nk[CACHE_KEY_BYTES];
        if (getrandom(nk, sizeof nk, 0) != (ssize_t)sizeof nk || getrandom(r, sizeof r, GRND_NONBLOCK) != sizeof r)
            return p3d_err(why, "no random bytes for its key");
        snprintf(tmp, sizeof tmp, ".tmp-key-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                 r[7]);
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int w = fd >= 0 && write(fd, nk, sizeof nk) == (ssize_t)sizeof nk;
        if (fd >= 0 && close(fd) < 0)
            w = 0;
        /* EEXIST: another run made it first; read theirs. Any other
         * failure: the next read finds no key and this run's entries go
         * unkeyed (ignored), as with no cache */
        if (w && linkat(dfd, tmp, dfd, name, 0) < 0 && errno != EEXIST)
            w = 0;
        if (fd >= 0)
            (void)unlinkat(dfd, tmp, 0);
        explicit_bzero(nk, sizeof nk);
    }
    return 0;
}

/* The MAC of text[0..len) under k, as hex. 0, or -1. */
static int entry_mac(const unsigned char *k, const char *text, size_t len, char hex[65])
{
    return p3d_hmac_sha256_hex(k, CACHE_KEY_BYTES, text, len, hex);
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

/* Checks an entry's frame (magic, MAC under k, key) and returns its record
 * part, or NULL with *why. */
static const char *check_frame(char *text, const char *key, const unsigned char *k, char **why)
{
    char magic[32];
    size_t len = strlen(text);
    snprintf(magic, sizeof magic, "P3DTOPO %d\n", TOPO_CACHE_FORMAT);
    if (strncmp(text, "P3DTOPO ", 8)) {
        p3d_err(why, "corrupt (no P3DTOPO header)");
        return NULL;
    }
    if (strncmp(text, magic, strlen(magic))) {
        p3d_err(why, "written by another entry format");
        return NULL;
    }
    if (len < MAC_LINE + 1 || text[len - 1] != '\n' || strncmp(text + len - MAC_LINE, "mac ", 4) ||
        text[len - MAC_LINE - 1] != '\n') {
        p3d_err(why, "truncated (no closing mac line)");
        return NULL;
    }
    char want[65];
    if (entry_mac(k, text, len - MAC_LINE, want) < 0 || memcmp(text + len - MAC_LINE + 4, want, 64)) {
        p3d_err(why, "corrupt or forged (its HMAC-SHA256 does not match this user's cache key)");
        return NULL;
    }
    text[len - MAC_LINE] = 0;
    const char *kl = text + strlen(magic);
    if (strncmp(kl, key, strlen(key))) {
        char what[64];
        key_diff(kl, key, what, sizeof what);
        p3d_err(why, "another key (%s differs)", what);
        return NULL;
    }
    return kl + strlen(key);
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
    unsigned char ck[CACHE_KEY_BYTES];
    int kk = k > 0 ? cache_key(dfd, 0, ck, &why) : -1;
    if (kk == 0)
        p3d_err(&why, "not authenticated: the cache has no key of yours (key.%u) to check it with",
                (unsigned)geteuid());
    const char *rec = kk > 0 ? check_frame(text, key, ck, &why) : NULL;
    explicit_bzero(ck, sizeof ck);
    if (rec && p3d_topo_raw_decode(rec, raw, x, &why) == 0) {
        if (cfg_verbose)
            say(dir, name,
                "reused (the whole key matched: boot id, hwloc, "
                "PCI devices, allowed CPUs and memory nodes, par3drun version)");
        rc = 1;
        goto out;
    }
    say(dir, name, "%s: ignored; discovering live and rewriting it", why ? why : "corrupt");
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
            say(dir, NULL, "cannot use it to store the record (%s)", strerror(errno));
        goto out;
    }
    unsigned char ck[CACHE_KEY_BYTES];
    char mac[65], *kwhy = NULL;
    if (cache_key(dfd, 1, ck, &kwhy) <= 0) {
        if (cfg_verbose || kwhy)
            say(dir, NULL, "cannot store the record: %s", kwhy ? kwhy : "no key");
        free(kwhy);
        goto out;
    }
    p3d_sb_printf(&b, "P3DTOPO %d\n", TOPO_CACHE_FORMAT);
    p3d_sb_puts(&b, key);
    p3d_sb_puts(&b, raw_text);
    int mk = b.oom ? -1 : entry_mac(ck, b.p, b.len, mac);
    explicit_bzero(ck, sizeof ck);
    if (mk < 0)
        goto out;
    p3d_sb_printf(&b, "mac %s\n", mac);
    unsigned char r[8];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        goto out;
    snprintf(tmp, sizeof tmp, ".tmp-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
