/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_resolve.c — resolving --policy: a bundled name, a path, or an
 * http(s) URL (fetched by policy_pin.c), into the policy's text and the
 * names used in messages and in the placement.
 */
#include "policy_source.h"
#include "p3d/base.h"
#include "read_file.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_url(const char *s)
{
    return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "devicemesh, megatron, naive": the bundled policies, for messages. */
static char *bundled_list(void)
{
    char dir[4096], *names[64], *out = NULL;
    size_t n = 0, total = 1;
    snprintf(dir, sizeof dir, "%s/lua", p3d_data_dir());
    DIR *d = opendir(dir);
    if (!d)
        return strdup("none found");
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        if (!ends_with(e->d_name, ".lua") || strcmp(e->d_name, "par3d.lua") == 0)
            continue;
        names[n] = strndup(e->d_name, strlen(e->d_name) - 4);
        if (names[n])
            total += strlen(names[n++]) + 2;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    out = calloc(1, total + 16);
    for (size_t i = 0; out && i < n; i++) {
        if (i)
            strcat(out, ", ");
        strcat(out, names[i]);
    }
    if (out && n == 0)
        strcpy(out, "none found");
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    return out;
}

/* The last path component of a URL, without query or fragment. */
static char *url_basename(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t end = strcspn(p, "?#");
    const char *slash = NULL;
    for (const char *q = p; q < p + end; q++)
        if (*q == '/')
            slash = q;
    if (!slash || slash + 1 >= p + end)
        return strdup("policy.lua");
    return strndup(slash + 1, (size_t)(p + end - slash - 1));
}

void p3d_policy_src_free(p3d_policy_src *r)
{
    free(r->chunk);
    free(r->name);
    free(r->source);
    free(r->text);
    memset(r, 0, sizeof *r);
}

char *p3d_policy_display_name(const char *chunk)
{
    const char *b = strrchr(chunk, '/');
    b = b ? b + 1 : chunk;
    size_t n = strlen(b);
    if (n > 4 && ends_with(b, ".lua"))
        n -= 4;
    return strndup(b, n);
}

int p3d_policy_resolve(const char *policy, p3d_policy_src *r, char **err)
{
    char path[4096];
    memset(r, 0, sizeof *r);
    if (!policy || !*policy)
        return p3d_err(err, "--policy: expected a bundled name, a path or an http(s) URL, got ''");
    if (is_url(policy)) {
        if (p3d_policy_fetch_url(policy, P3D_POLICY_MAX_BYTES, &r->text, &r->len, err) < 0)
            return -1;
        r->chunk = url_basename(policy);
        r->source = strdup(policy);
    } else {
        int local = strchr(policy, '/') != NULL;
        if (!local && ends_with(policy, ".lua") && access(policy, F_OK) == 0)
            local = 1;
        if (local) {
            r->source = strdup(policy);
            r->chunk = strdup(policy);
        } else {
            snprintf(path, sizeof path, "%s/lua/%s%s", p3d_data_dir(), policy, ends_with(policy, ".lua") ? "" : ".lua");
            if (access(path, F_OK) != 0 && access(policy, F_OK) == 0) {
                r->source = strdup(policy);
                r->chunk = strdup(policy);
            } else if (access(path, F_OK) != 0) {
                char *list = bundled_list();
                p3d_err(err,
                        "--policy: unknown policy '%s': no bundled policy of that name in %s/lua and no such "
                        "file (bundled: %s)",
                        policy, p3d_data_dir(), list ? list : "?");
                free(list);
                return -1;
            } else {
                r->source = strdup(path);
                const char *b = strrchr(path, '/');
                r->chunk = strdup(b + 1);
            }
        }
        if (!r->source || !r->chunk)
            return p3d_err(err, "out of memory");
        char *e = NULL;
        if (p3d_read_small_file(r->source, "policy", P3D_POLICY_MAX_BYTES, &r->text, &r->len, &e) < 0) {
            p3d_err(err, "--policy: %s", e ? e : "cannot read the policy");
            free(e);
            return -1;
        }
    }
    if (!r->chunk || !r->source)
        return p3d_err(err, "out of memory");
    r->name = p3d_policy_display_name(r->chunk);
    return r->name ? 0 : p3d_err(err, "out of memory");
}
