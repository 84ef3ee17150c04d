/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_pin.c — the two steps that make a remote policy trustworthy:
 * fetching it through the fetch plugin (libcurl stays out of the core) and
 * checking the --policy-sha256 pin before it runs.
 */
#include "policy_source.h"
#include "p3d/base.h"
#include "p3d/plugin.h"
#include "sha256.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fetches url with the policy fetch plugin (p3d_policy_fetch.so, found by
 * the plugin registry). */
int p3d_policy_fetch_url(const char *url, size_t max, char **text, size_t *len, char **err)
{
    const p3d_plugin *pl;
    char *e = NULL, *perr = NULL;
    int k = p3d_plugin_find(P3D_PLUGIN_POLICY, "fetch", &pl, &e);
    if (k <= 0) {
        p3d_err(err,
                "policy URLs need %s (Debian: install the par3drun-curl package; a source build: build it "
                "with libcurl; or download the policy and pass its path)",
                e ? e : "the policy fetch plugin");
        free(e);
        return -1;
    }
    const p3d_policy_ops *ops = pl->ops;
    if (!ops->fetch)
        return p3d_err(err, "--policy %s: the policy fetch plugin has no fetch function", url);
    k = ops->fetch(url, max, text, len, &perr);
    if (k != P3D_PLUGIN_OK) {
        p3d_err(err, "--policy: %s%s", k == P3D_PLUGIN_DECLINE ? "the fetch plugin declined: " : "",
                perr ? perr : "fetch failed");
        free(perr);
        return -1;
    }
    return 0;
}

int p3d_policy_check_pin(const char *source, const char *text, size_t len, const char *pin, char **err)
{
    char have[65], want[65];
    size_t n = strlen(pin);
    if (n != 64)
        return p3d_err(err, "--policy-sha256: expected 64 hex digits, got %zu characters ('%s')", n, pin);
    for (size_t i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)pin[i]))
            return p3d_err(err, "--policy-sha256: '%c' at position %zu is not a hex digit", pin[i], i + 1);
        want[i] = (char)tolower((unsigned char)pin[i]);
    }
    want[64] = 0;
    if (p3d_sha256_hex(text, len, have) < 0)
        return p3d_err(err, "--policy-sha256: libcrypto could not compute the SHA-256 of %s", source);
    if (strcmp(have, want) != 0)
        return p3d_err(err, "--policy-sha256: policy %s has SHA-256 %s, expected %s; refusing to run it", source, have,
                       want);
    return 0;
}
