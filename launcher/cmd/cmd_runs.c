/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_runs.c — `par3drun runs [DIR]`: the run directories a job kept
 * (after a failure, or with --keep-run-dir / --run-dir) with their job,
 * when they were last written, their verdict (the `end` event of
 * events.jsonl) and their size; `--prune` removes the old ones.
 *
 * A directory counts as a run directory only when it passes the rule the
 * launcher made it by (rundir.c): a real directory, not a symbolic link,
 * owned by this user with no group/other permission bits, holding a
 * regular events.jsonl or placement.json; in the default place ($TMPDIR,
 * else /tmp) its name must also be par3drun-JOB[.NODE]. Removal walks
 * through directory descriptors (openat with O_NOFOLLOW, unlinkat): a
 * symbolic link inside is removed, never followed, and the walk never
 * leaves the run directory's file system. A job still running (one of
 * this user's processes holds a file in it open) is never removed.
 */
#include "commands.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "termsafe.h"

/* How deep a removal or a size count goes: the launcher writes two levels
 * (heartbeat/rank-N); a worker's own files may add a few. */
#define RUNS_MAX_DEPTH 16
/* How much of events.jsonl's end is read for the last `end` event. */
#define RUNS_TAIL (64u * 1024u)
/* An unfinished run written this recently may be a job still starting. */
#define RUNS_FRESH_S 60.0

typedef struct run_entry {
    char *name;  /* entry name in the scanned directory */
    time_t when; /* newest of the dir and events.jsonl mtimes */
    int has_events, ended, exit_code, running;
    unsigned long long bytes;
} run_entry;

/* Sums the apparent sizes below dfd; with rm, removes every entry as it
 * goes. Never follows a link, never crosses to another device, stops at
 * RUNS_MAX_DEPTH. 0, or -1 with errno (something was left). */
static int walk(int dfd, dev_t dev, int depth, int rm, unsigned long long *bytes)
{
    int d2 = dup(dfd), rc = 0;
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    if (!d) {
        if (d2 >= 0)
            close(d2);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        *bytes += (unsigned long long)st.st_size;
        if (S_ISDIR(st.st_mode)) {
            if (st.st_dev != dev || depth >= RUNS_MAX_DEPTH) {
                errno = st.st_dev != dev ? EXDEV : ELOOP;
                rc = -1;
                continue;
            }
            int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0 || walk(sub, dev, depth + 1, rm, bytes) < 0)
                rc = -1;
            if (sub >= 0)
                close(sub);
            if (rm && rc == 0 && unlinkat(dfd, e->d_name, AT_REMOVEDIR) < 0)
                rc = -1;
        } else if (rm && unlinkat(dfd, e->d_name, 0) < 0) {
            rc = -1;
        }
    }
    int e2 = errno;
    closedir(d);
    errno = e2;
    return rc;
}

/* The run directory `name` in pdir, opened and checked by the launcher's
 * rule (owner, mode, not a link, our files in it): its fd, or -1. */
static int open_run(int pdir, const char *name, struct stat *st)
{
    int fd = openat(pdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat f;
    int ok = fstat(fd, st) == 0 && st->st_uid == geteuid() && !(st->st_mode & 077) &&
             ((fstatat(fd, "events.jsonl", &f, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(f.st_mode)) ||
              (fstatat(fd, "placement.json", &f, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(f.st_mode)));
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The last `end` event of events.jsonl (read from its last RUNS_TAIL
 * bytes): fills ended/exit_code. */
static void read_verdict(int rfd, run_entry *r)
{
    struct stat st;
    int fd = openat(rfd, "events.jsonl", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    char *buf = NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        goto out;
    r->has_events = 1;
    if (st.st_mtime > r->when)
        r->when = st.st_mtime;
    size_t n = (size_t)st.st_size < RUNS_TAIL ? (size_t)st.st_size : RUNS_TAIL;
    buf = malloc(n + 1);
    ssize_t got = buf ? pread(fd, buf, n, st.st_size - (off_t)n) : -1;
    if (got <= 0)
        goto out;
    buf[got] = 0;
    /* backwards, line by line: the end event is the last one written */
    for (char *p = buf + got; p > buf && !r->ended;) {
        char *eol = p;
        while (p > buf && p[-1] != '\n')
            p--;
        *eol = 0;
        cJSON *j = strstr(p, "\"end\"") ? cJSON_Parse(p) : NULL;
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "event");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(j, "exit_code");
        if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "end") && cJSON_IsNumber(code)) {
            r->ended = 1;
            r->exit_code = code->valueint;
        }
        cJSON_Delete(j);
        if (p > buf)
            p--;
    }
out:
    free(buf);
    close(fd);
}

/* Does one of this user's processes hold a file in `real` open? The
 * launcher holds events.jsonl (and every agent its own files there) for
 * the job's whole life; a job that ended or was killed holds nothing. */
static int held_open(const char *real)
{
    DIR *proc = opendir("/proc");
    if (!proc)
        return 0;
    char p[64], link[PATH_MAX];
    size_t rl = strlen(real);
    int held = 0;
    struct dirent *e;
    while (!held && (e = readdir(proc))) {
        struct stat st;
        if (!isdigit((unsigned char)e->d_name[0]) || fstatat(dirfd(proc), e->d_name, &st, 0) < 0 ||
            st.st_uid != geteuid())
            continue;
        snprintf(p, sizeof p, "/proc/%.20s/fd", e->d_name);
        DIR *fds = opendir(p);
        struct dirent *f;
        while (fds && !held && (f = readdir(fds))) {
            ssize_t n = readlinkat(dirfd(fds), f->d_name, link, sizeof link - 1);
            if (n > (ssize_t)rl) {
                link[n] = 0;
                held = !strncmp(link, real, rl) && link[rl] == '/';
            }
        }
        if (fds)
            closedir(fds);
    }
    closedir(proc);
    return held;
}

static int by_newest(const void *a, const void *b)
{
    const run_entry *x = a, *y = b;
    return (x->when < y->when) - (x->when > y->when);
}

/* Every run directory in dir (named par3drun-* when prefix), newest
 * first, into *out (caller frees each name and the array). -1 with *err. */
static int scan(const char *dir, int prefix, run_entry **out, size_t *nout, char **err)
{
    int pdir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int d2 = pdir >= 0 ? dup(pdir) : -1;
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    if (!d) {
        int rc = p3d_err(err, "runs: %s: %s; expected a directory that holds run directories", dir, strerror(errno));
        if (d2 >= 0)
            close(d2);
        if (pdir >= 0)
            close(pdir);
        return rc;
    }
    run_entry *v = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.' || (prefix && strncmp(e->d_name, "par3drun-", 9)))
            continue;
        int rfd = open_run(pdir, e->d_name, &st);
        if (rfd < 0)
            continue;
        run_entry *nv = realloc(v, (n + 1) * sizeof *v);
        if (!nv || !(nv[n].name = strdup(e->d_name))) {
            v = nv ? nv : v;
            close(rfd);
            break;
        }
        v = nv;
        run_entry *r = &v[n++];
        *r = (run_entry){.name = r->name, .when = st.st_mtime};
        read_verdict(rfd, r);
        walk(rfd, st.st_dev, 0, 0, &r->bytes);
        char link[64], real[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", rfd);
        ssize_t k = readlink(link, real, sizeof real - 1);
        if (k > 0) {
            real[k] = 0;
            r->running = !r->ended && held_open(real);
        }
        close(rfd);
    }
    closedir(d);
    close(pdir);
    qsort(v, n, sizeof *v, by_newest);
    *out = v;
    *nout = n;
    return 0;
}

/* "2h", "30m", "7d", "90" (seconds): seconds, or -1. */
static double parse_duration(const char *s)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || !(x >= 0) || x > 1e10)
        return -1;
    static const struct {
        char unit;
        double mult;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
    if (!*end)
        return x;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (end[0] == units[i].unit && !end[1])
            return x * units[i].mult;
    return -1;
}

static void human_size(unsigned long long b, char *out, size_t n)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)b;
    size_t u = 0;
    while (x >= 1024 && u + 1 < sizeof unit / sizeof unit[0]) {
        x /= 1024;
        u++;
    }
    snprintf(out, n, u ? "%.1f %s" : "%.0f %s", x, unit[u]);
}

static void human_age(double s, char *out, size_t n)
{
    if (s < 120)
        snprintf(out, n, "%.0fs ago", s < 0 ? 0 : s);
    else if (s < 7200)
        snprintf(out, n, "%.0fm ago", s / 60);
    else if (s < 172800)
        snprintf(out, n, "%.0fh ago", s / 3600);
    else
        snprintf(out, n, "%.0fd ago", s / 86400);
}

static const char *verdict(const run_entry *r, char *buf, size_t n)
{
    if (r->running)
        return "running";
    if (r->ended && r->exit_code == 0)
        return "ok";
    if (r->ended) {
        snprintf(buf, n, "failed (exit %d)", r->exit_code);
        return buf;
    }
    return r->has_events ? "no end (killed?)" : "no events.jsonl";
}

/* One line per run directory; for a prune, what happens to it. */
static void print_header(void)
{
    printf("%-24s %-28s %-18s %10s  %s\n", "JOB", "LAST WRITTEN", "VERDICT", "SIZE", "RUN DIRECTORY");
}

static void print_row(const char *dir, const run_entry *r, const char *action)
{
    char when[32], age[32], size[32], vb[48];
    struct tm tm;
    localtime_r(&r->when, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    human_age(difftime(time(NULL), r->when), age, sizeof age);
    human_size(r->bytes, size, sizeof size);
    const char *job = strncmp(r->name, "par3drun-", 9) ? r->name : r->name + 9;
    char stamp[96];
    snprintf(stamp, sizeof stamp, "%s (%s)", when, age);
    printf("%-24s %-28s %-18s %10s  %s/%s%s%s\n", p3d_tesc(job), stamp, verdict(r, vb, sizeof vb), size, p3d_tesc(dir),
           p3d_tesc(r->name), action ? "  " : "", action ? action : "");
}

/* Why r is not pruned, or NULL: running, among the --keep newest, or
 * younger than --older-than. */
static const char *keep_reason(const p3d_opts *o, const run_entry *r, size_t *kept, double older)
{
    double age = difftime(time(NULL), r->when);
    if (r->running)
        return "kept: running";
    if (!r->ended && age < RUNS_FRESH_S)
        return "kept: no end yet and written under a minute ago (starting?)";
    if (*kept < (size_t)o->runs_keep) {
        (*kept)++;
        return "kept: --keep";
    }
    if (age < older)
        return "kept: newer than --older-than";
    return NULL;
}

/* Removes the run directory name in dir: checked again right before (a
 * directory swapped since the scan is left alone). 0, or -1 with errno. */
static int remove_run(const char *dir, const char *name)
{
    int pdir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;
    struct stat st;
    int rfd = pdir >= 0 ? open_run(pdir, name, &st) : -1;
    unsigned long long bytes = 0;
    if (rfd < 0) {
        if (pdir >= 0)
            errno = EPERM; /* no longer a run directory of ours */
        goto out;
    }
    if (walk(rfd, st.st_dev, 0, 1, &bytes) < 0)
        goto out;
    rc = unlinkat(pdir, name, AT_REMOVEDIR);
out:
    if (rfd >= 0)
        close(rfd);
    if (pdir >= 0)
        close(pdir);
    return rc;
}

static int prune(const p3d_opts *o, const char *dir, run_entry *v, size_t n, double older)
{
    size_t kept = 0, removed = 0, failed = 0;
    unsigned long long freed = 0;
    if (n)
        print_header();
    for (size_t i = 0; i < n; i++) {
        const char *why = keep_reason(o, &v[i], &kept, older);
        char msg[64] = "";
        if (!why && !o->runs_dry) {
            if (remove_run(dir, v[i].name) < 0) {
                snprintf(msg, sizeof msg, "NOT removed: %s", strerror(errno));
                failed++;
                why = msg;
            }
        }
        if (!why) {
            removed++;
            freed += v[i].bytes;
        }
        print_row(dir, &v[i], why ? why : o->runs_dry ? "would be removed (--dry-run)" : "removed");
    }
    char size[32];
    human_size(freed, size, sizeof size);
    printf("par3drun runs: %s %zu of %zu run directories (%s)%s\n", o->runs_dry ? "would remove" : "removed", removed,
           n, size, failed ? "; some could not be removed" : "");
    return failed ? P3D_EXIT_FAIL : P3D_EXIT_OK;
}

int p3d_cmd_runs(const p3d_opts *o)
{
    const char *tmp = getenv("TMPDIR");
    const char *dir = o->runs_dir ? o->runs_dir : tmp && *tmp ? tmp : "/tmp";
    char *err = NULL;
    run_entry *v = NULL;
    size_t n = 0;
    int rc = P3D_EXIT_OK;
    double older = o->runs_older_than ? parse_duration(o->runs_older_than) : 0;
    if (older < 0) {
        p3d_err(&err, "--older-than: expected a duration such as 90s, 30m, 12h, 7d or 2w, got '%s'",
                o->runs_older_than);
        goto bad;
    }
    if (!o->runs_prune && (o->runs_older_than || o->runs_keep || o->runs_dry)) {
        p3d_err(&err, "runs: --older-than, --keep and --dry-run say what --prune removes: add --prune "
                      "(par3drun runs --prune --dry-run lists what it would remove)");
        goto bad;
    }
    if (scan(dir, !o->runs_dir, &v, &n, &err) < 0)
        goto bad;
    if (o->runs_prune) {
        rc = prune(o, dir, v, n, older);
    } else {
        unsigned long long total = 0;
        if (n)
            print_header();
        for (size_t i = 0; i < n; i++) {
            print_row(dir, &v[i], NULL);
            total += v[i].bytes;
        }
        char size[32];
        human_size(total, size, sizeof size);
        printf("par3drun runs: %zu run director%s in %s (%s)%s\n", n, n == 1 ? "y" : "ies", p3d_tesc(dir), size,
               n ? "; par3drun runs --prune [--older-than 7d] [--keep N] removes ended ones" : "");
    }
    goto out;
bad:
    rc = p3d_fail_input(err); /* frees err */
out:
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    return rc;
}
