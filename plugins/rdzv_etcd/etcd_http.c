/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_http.c — p3d_rdzv_etcd.so's wire: etcd's v3 JSON gateway carries
 * keys and values as base64 and answers every POST with one JSON object
 * (proto3 JSON: 64-bit numbers as strings, false and empty fields left
 * out). One request through a caller's CURL handle; which handle is the
 * caller's business (each thread has its own).
 */
#include "p3d/plugin.h"
#include "etcd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLY_MAX (16u << 20)

/* ---- base64 (etcd's JSON gateway carries keys and values as bytes) -------- */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* malloc'd, NUL-terminated */
char *etcd_b64_enc(const char *s, size_t n)
{
    char *o = malloc(4 * ((n + 2) / 3) + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        *p++ = B64[v >> 18 & 63];
        *p++ = B64[v >> 12 & 63];
        *p++ = i + 1 < n ? B64[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? B64[v & 63] : '=';
    }
    *p = 0;
    return o;
}

/* malloc'd, NUL-terminated; NULL when s is not base64 or decodes to a NUL */
char *etcd_b64_dec(const char *s)
{
    size_t n = strlen(s), k = 0;
    char *o = malloc(n / 4 * 3 + 4);
    unsigned v = 0;
    int bits = 0;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char *c = strchr(B64, s[i]);
        if (!c || !*c) {
            free(o);
            return NULL;
        }
        v = (v << 6 | (unsigned)(c - B64)) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k] = (char)(v >> bits & 255);
            if (!o[k++]) {
                free(o);
                return NULL;
            }
        }
    }
    o[k] = 0;
    return o;
}

/* ---- one JSON request -------------------------------------------------------- */

typedef struct reply {
    char *p;
    size_t len;
    int over;
} reply;

static size_t on_data(char *d, size_t sz, size_t nm, void *u)
{
    reply *r = u;
    size_t n = sz * nm;
    if (r->len + n + 1 > REPLY_MAX) {
        r->over = 1;
        return 0;
    }
    char *q = realloc(r->p, r->len + n + 1);
    if (!q)
        return 0;
    memcpy(q + r->len, d, n);
    r->len += n;
    q[r->len] = 0;
    r->p = q;
    return n;
}

/* tmo is clamped to 0.2..5 s; connecting gets at most 2 s of it */
int etcd_post(CURL *h, const char *url, const char *path, const char *body, double tmo, cJSON **out, char *msg,
              size_t cap)
{
    char full[700];
    reply r = {0};
    int rc = -1;
    long code = 0;
    *out = NULL;
    snprintf(full, sizeof full, "%s%s", url, path);
    if (tmo < 0.2)
        tmo = 0.2;
    if (tmo > 5)
        tmo = 5;
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(tmo * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(tmo * 1000 < 2000 ? tmo * 1000 : 2000));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode c = curl_easy_perform(h);
    curl_slist_free_all(hd);
    if (c != CURLE_OK) {
        p3d_plugin_say(msg, cap, "etcd at %s: %s: %s", url, path, r.over ? "reply over 16 MiB" : curl_easy_strerror(c));
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    cJSON *j = r.p ? cJSON_Parse(r.p) : NULL;
    if (code != 200) {
        const cJSON *m = j ? cJSON_GetObjectItemCaseSensitive(j, "message") : NULL;
        if (!cJSON_IsString(m))
            m = j ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
        p3d_plugin_say(msg, cap, "etcd at %s: %s: HTTP %ld%s%s%s", url, path, code, cJSON_IsString(m) ? ": " : "",
                       cJSON_IsString(m) ? m->valuestring : "",
                       code == 404 ? " (is this etcd >= 3.4's client URL?)" : "");
        cJSON_Delete(j);
        goto out;
    }
    if (!j || !cJSON_IsObject(j)) {
        p3d_plugin_say(msg, cap, "etcd at %s: %s: the reply is not a JSON object", url, path);
        cJSON_Delete(j);
        goto out;
    }
    *out = j;
    rc = 0;
out:
    free(r.p);
    return rc;
}

/* 64-bit numbers arrive as strings (proto3 JSON) */
long long etcd_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v))
        return strtoll(v->valuestring, NULL, 10);
    if (cJSON_IsNumber(v))
        return (long long)v->valuedouble;
    return 0;
}
