/*
 * policy_pin.c — the two steps that make a remote policy trustworthy:
 * fetching it through the fetch plugin (libcurl stays out of the core) and
 * checking the --policy-sha256 pin before it runs.
 */
#include "policy_source.h"
#include "p3d/base.h"
#include "p3d/policy_fetch.h"
#include "sha256.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Loads the fetch plugin and fetches url. The plugin is searched in
 * $P3D_PLUGIN_DIR (':'-separated), the build tree, then the install dir. */
int p3d_policy_fetch_url(const char *url, size_t max, char **text, size_t *len, char **err)
{
    int rc = -1;
    void *h = NULL;
    char path[4096], tried[8192] = "";
    const char *env = getenv("P3D_PLUGIN_DIR");
    char *dirs = NULL;
    if (asprintf(&dirs, "%s%s%s:%s", env ? env : "", env && *env ? ":" : "", P3D_PLUGIN_BUILD_DIR,
                 P3D_INSTALL_PLUGIN_DIR) < 0)
        return p3d_err(err, "out of memory");
    for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof path, "%s/%s", dir, P3D_POLICY_FETCH_FILE);
        if (access(path, R_OK) == 0) {
            h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                p3d_err(err, "--policy %s: cannot load plugin %s: %s", url, path, dlerror());
                goto out;
            }
            break;
        }
        size_t tl = strlen(tried);
        snprintf(tried + tl, sizeof tried - tl, "%s%s", tl ? ", " : "", dir);
    }
    if (!h) {
        p3d_err(err, "policy URLs need plugin %s: not found in %s (build par3drun with libcurl, or download the "
                     "policy and pass its path)",
                P3D_POLICY_FETCH_FILE, tried);
        goto out;
    }
    const p3d_policy_fetch_plugin *pl = dlsym(h, P3D_POLICY_FETCH_SYMBOL);
    if (!pl) {
        p3d_err(err, "plugin %s does not export %s", path, P3D_POLICY_FETCH_SYMBOL);
        goto out;
    }
    if (pl->abi != P3D_POLICY_FETCH_ABI) {
        p3d_err(err, "plugin %s has ABI %d, this par3drun needs %d (rebuild the plugin)", path, pl->abi,
                P3D_POLICY_FETCH_ABI);
        goto out;
    }
    char *perr = NULL;
    if (pl->fetch(url, max, text, len, &perr) < 0) {
        p3d_err(err, "--policy: %s", perr ? perr : "fetch failed");
        free(perr);
        goto out;
    }
    rc = 0;
out:
    if (h)
        dlclose(h);
    free(dirs);
    return rc;
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
    p3d_sha256_hex(text, len, have);
    if (strcmp(have, want) != 0)
        return p3d_err(err, "--policy-sha256: policy %s has SHA-256 %s, expected %s; refusing to run it", source,
                       have, want);
    return 0;
}
