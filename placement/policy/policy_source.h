/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_source.h — where a policy's text comes from, before it runs:
 * resolving --policy (policy_resolve.c) and fetching an http(s) URL through
 * the fetch plugin and checking the --policy-sha256 pin (policy_pin.c).
 * Private to placement/.
 */
#ifndef P3D_POLICY_SOURCE_H
#define P3D_POLICY_SOURCE_H

#include <stddef.h>

/* The largest policy (or helper module) read or fetched. */
#define P3D_POLICY_MAX_BYTES ((size_t)16 << 20)

typedef struct p3d_policy_src {
    char *chunk;  /* name in messages: "megatron.lua", "./mine.lua" */
    char *name;   /* reported policy name: "megatron" */
    char *source; /* path or URL */
    char *text;
    size_t len;
} p3d_policy_src;

/* Names without '/' are bundled policies; "x.lua" prefers ./x.lua when it
 * exists, a bare "x" prefers the bundled one; http(s) URLs are fetched.
 * Fills *r (free with p3d_policy_src_free, also after a failure). */
int p3d_policy_resolve(const char *policy, p3d_policy_src *r, char **err);
void p3d_policy_src_free(p3d_policy_src *r);

/* "megatron" for "lua/megatron.lua": the last component without ".lua". */
char *p3d_policy_display_name(const char *chunk);

/* Fetches url with the policy fetch plugin, at most max bytes. */
int p3d_policy_fetch_url(const char *url, size_t max, char **text, size_t *len, char **err);

/* Checks that text has the SHA-256 given by pin (64 hex digits, any case);
 * source names the policy in the message. */
int p3d_policy_check_pin(const char *source, const char *text, size_t len, const char *pin, char **err);

#endif
