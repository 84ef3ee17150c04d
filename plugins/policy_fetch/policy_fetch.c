/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_fetch.c — the p3d_policy_fetch plugin (p3d/plugin.h, kind
 * P3D_PLUGIN_POLICY): downloads a policy from an http(s) URL with libcurl. Redirects are followed only to http(s), the
 * size is capped, and HTTP errors (>= 400) fail with the status code.
 */
#include "p3d/plugin.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
    char *p;
    size_t len, max;
    int too_big;
} buf;

static size_t on_data(char *data, size_t size, size_t n, void *ud)
{
    buf *b = ud;
    size_t add = size * n;
    if (b->len + add > b->max) {
        b->too_big = 1;
        return 0; /* makes curl fail with CURLE_WRITE_ERROR */
    }
    char *p = realloc(b->p, b->len + add + 1);
    if (!p)
        return 0;
    memcpy(p + b->len, data, add);
    b->p = p;
    b->len += add;
    p[b->len] = 0;
    return add;
}

static int fail(char **err, const char *fmt, ...)
{
    char m[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    if (err)
        *err = strdup(m); /* NULL when out of memory: the caller says so */
    return -1;
}

/* P3D_PLUGIN_OK, DECLINE (not an http(s) URL) or FAIL (-1), see plugin.h. */
static int fetch(const char *url, size_t max, char **data, size_t *len, char **err)
{
    int rc = -1;
    char ebuf[CURL_ERROR_SIZE] = "";
    buf b = {NULL, 0, max, 0};
    long status = 0;
    *data = NULL;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        fail(err, "%s: only http:// and https:// URLs are fetched", url);
        return P3D_PLUGIN_DECLINE;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return fail(err, "%s: cannot initialise libcurl", url);
    CURL *h = curl_easy_init();
    if (!h) {
        fail(err, "%s: cannot initialise libcurl", url);
        goto out;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "par3drun-policy-fetch/1");
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    CURLcode cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (b.too_big) {
        fail(err, "%s: the policy is larger than %zu bytes", url, max);
        goto out;
    }
    if (cc != CURLE_OK) {
        fail(err, "%s: %s", url, ebuf[0] ? ebuf : curl_easy_strerror(cc));
        goto out;
    }
    if (status >= 400) {
        fail(err, "%s: HTTP status %ld", url, status);
        goto out;
    }
    if (!b.p) {
        b.p = calloc(1, 1);
        if (!b.p) {
            fail(err, "%s: out of memory", url);
            goto out;
        }
    }
    *data = b.p;
    *len = b.len;
    b.p = NULL;
    rc = P3D_PLUGIN_OK;
out:
    free(b.p);
    if (h)
        curl_easy_cleanup(h);
    curl_global_cleanup();
    return rc;
}

static const p3d_policy_ops ops = {.fetch = fetch};

P3D_PLUGIN_EXPORT(policy, fetch, P3D_PLUGIN_POLICY, &ops);
