/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * errfile.c — a rank's TORCHELASTIC_ERROR_FILE read back: the JSON torch's
 * ErrorHandler (@record) writes when a rank dies of an exception. The
 * file is the rank's to write, so it is read as hostile input: bounded in
 * size, not followed through a link or a FIFO, strict JSON, every string
 * escaped before a terminal sees it. Two shapes exist:
 *   {"message": {"message": "Type: text",
 *                "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000000"}}}
 *   {"message": "text", "timestamp": 1700000000}   (a parent's copy)
 */
#include "ranks.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "strbuf.h"
#include "termsafe.h"

/* The file's bytes (NUL-terminated, *len of them): 1, 0 when there is no
 * file, -1 with *err. */
static int slurp(const char *path, char **buf, size_t *len, char **err)
{
    int rc = -1, fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    char *b = NULL;
    size_t n = 0;
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return p3d_err(err, "%s: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        p3d_err(err, "%s: not a regular file", path);
        goto out;
    }
    if (!(b = malloc(P3D_ERRFILE_MAX + 1))) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (;;) {
        ssize_t k = read(fd, b + n, P3D_ERRFILE_MAX + 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            p3d_err(err, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (k == 0 || (n += (size_t)k) > P3D_ERRFILE_MAX)
            break;
    }
    if (n > P3D_ERRFILE_MAX) {
        p3d_err(err, "%s: larger than %d bytes", path, P3D_ERRFILE_MAX);
        goto out;
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    b = NULL;
    rc = 1;
out:
    free(b);
    close(fd);
    return rc;
}

/* "123", 123 or 123.0 as seconds; -1 for anything else. */
static long long timestamp_of(const cJSON *t)
{
    if (cJSON_IsNumber(t) && t->valuedouble >= 0 && t->valuedouble < 1e13)
        return (long long)t->valuedouble;
    if (!cJSON_IsString(t) || !t->valuestring[0] || strlen(t->valuestring) > 15)
        return -1;
    long long v = 0;
    for (const char *p = t->valuestring; *p; p++) {
        if (!isdigit((unsigned char)*p))
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/* An escaped, bounded copy for one line of text. */
static char *clean(const char *s, size_t cap)
{
    return p3d_term_dup(s ? s : "", s ? strlen(s) : 0, cap, 0);
}

/* The "File "X", line N, in F" lines of a Python traceback: the last
 * P3D_ERRFILE_FRAMES of them into rc (frames, file, line). */
static int frames_of(const char *tb, p3d_rootcause *rc)
{
    const char *at[P3D_ERRFILE_FRAMES];
    size_t nat = 0;
    for (const char *p = tb; p && *p;) {
        const char *q = p;
        while (*q == ' ')
            q++;
        if (!strncmp(q, "File \"", 6)) {
            if (nat == P3D_ERRFILE_FRAMES)
                memmove(at, at + 1, sizeof at - sizeof at[0]), nat--;
            at[nat++] = q + 6;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    p3d_sb b = {0};
    for (size_t i = 0; i < nat; i++) {
        const char *name = at[i], *nq = strchr(name, '"');
        if (!nq)
            continue;
        char *file = NULL, *func = NULL;
        int line = 0;
        const char *l = strstr(nq, ", line ");
        const char *eol = strchr(name, '\n');
        if (l && (!eol || l < eol))
            line = atoi(l + 7) > 0 ? atoi(l + 7) : 0;
        const char *in = l ? strstr(l, ", in ") : NULL;
        if (in && (!eol || in < eol)) {
            size_t fl = eol ? (size_t)(eol - in - 5) : strlen(in + 5);
            func = p3d_term_dup(in + 5, fl, 128, 0);
        }
        file = p3d_term_dup(name, (size_t)(nq - name), 256, 0);
        if (!file) {
            free(func);
            p3d_sb_free(&b);
            return -1;
        }
        p3d_sb_printf(&b, "%s:%d%s%s\n", file, line, func ? " in " : "", func ? func : "");
        if (i + 1 == nat) {
            free(rc->file);
            rc->file = file;
            rc->line = line;
            file = NULL;
        }
        free(file);
        free(func);
    }
    rc->frames = b.len ? p3d_sb_finish(&b) : strdup("");
    p3d_sb_free(&b);
    return rc->frames ? 0 : -1;
}

/* "pkg.Error: text" → "pkg.Error"; "" when the message has no such type. */
static char *type_of(const char *msg)
{
    size_t n = 0;
    while (msg[n] && (isalnum((unsigned char)msg[n]) || msg[n] == '_' || msg[n] == '.'))
        n++;
    if (!n || n > 128 || msg[n] != ':')
        n = 0;
    return p3d_term_dup(msg, n, 128, 0);
}

int p3d_rootcause_read(const char *path, p3d_rootcause *rc, char **err)
{
    char *buf = NULL;
    size_t len = 0;
    cJSON *j = NULL;
    memset(rc, 0, sizeof *rc);
    rc->timestamp = -1;
    int r = slurp(path, &buf, &len, err);
    if (r <= 0)
        return r;
    r = -1;
    const char *end = NULL;
    if (!memchr(buf, 0, len))                                 /* a NUL inside would end the text early */
        j = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1); /* strict: nothing after it */
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
    if (!j || !cJSON_IsObject(j) || !m) {
        p3d_err(err, "%s: not torch's error file (expected a JSON object with \"message\")", path);
        goto out;
    }
    const cJSON *text = cJSON_IsString(m) ? m : cJSON_GetObjectItemCaseSensitive(m, "message");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(m, "extraInfo");
    const cJSON *tb = cJSON_GetObjectItemCaseSensitive(extra, "py_callstack");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(extra, "timestamp");
    if (!ts)
        ts = cJSON_GetObjectItemCaseSensitive(j, "timestamp");
    if (!cJSON_IsString(text)) {
        p3d_err(err, "%s: \"message\" has no text", path);
        goto out;
    }
    rc->message = clean(text->valuestring, 512);
    rc->type = type_of(text->valuestring);
    rc->file = strdup("");
    rc->timestamp = timestamp_of(ts);
    if (!rc->message || !rc->type || !rc->file || frames_of(cJSON_IsString(tb) ? tb->valuestring : "", rc) < 0) {
        p3d_err(err, "out of memory");
        goto out;
    }
    r = 1;
out:
    if (r < 0)
        p3d_rootcause_free(rc);
    cJSON_Delete(j);
    free(buf);
    return r;
}

void p3d_rootcause_free(p3d_rootcause *rc)
{
    free(rc->message);
    free(rc->type);
    free(rc->file);
    free(rc->frames);
    memset(rc, 0, sizeof *rc);
    rc->timestamp = -1;
}

char *p3d_rootcause_text(const p3d_rootcause *rc, const char *indent)
{
    p3d_sb b = {0};
    char when[40] = "time unknown";
    if (rc->timestamp >= 0) {
        time_t t = (time_t)rc->timestamp;
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    p3d_sb_printf(&b, "%sexception (its TORCHELASTIC_ERROR_FILE, %s): %s\n", indent, when, rc->message);
    if (rc->frames && rc->frames[0]) {
        p3d_sb_printf(&b, "%slast frames, innermost last:\n", indent);
        for (const char *p = rc->frames; *p;) {
            const char *nl = strchr(p, '\n');
            size_t l = nl ? (size_t)(nl - p) : strlen(p);
            p3d_sb_printf(&b, "%s  %.*s\n", indent, (int)l, p);
            p += l + (nl ? 1 : 0);
        }
    }
    return p3d_sb_finish(&b);
}

char *p3d_rootcause_path(const char *run_dir, int r)
{
    char *p = NULL;
    return asprintf(&p, "%s/error-rank-%d.json", run_dir, r) < 0 ? NULL : p;
}
