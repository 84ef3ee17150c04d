/*
 * policy_fetch.h — the plugin interface for fetching policies from http(s)
 * URLs (plugins/policy_fetch/, built only when libcurl is found, so the core
 * runs without libcurl). The plugin p3d_policy_fetch.so exports one const
 * descriptor named p3d_policy_fetch; the ABI number comes first and is
 * checked before anything else is read. Grow only by appending fields.
 */
#ifndef P3D_POLICY_FETCH_H
#define P3D_POLICY_FETCH_H

#include <stddef.h>

#define P3D_POLICY_FETCH_ABI 1
#define P3D_POLICY_FETCH_SYMBOL "p3d_policy_fetch"
#define P3D_POLICY_FETCH_FILE "p3d_policy_fetch.so"

typedef struct p3d_policy_fetch_plugin {
    int abi; /* P3D_POLICY_FETCH_ABI */
    const char *name;
    /* Fetches url (http or https only) into a malloc'd buffer of at most
     * max bytes (NUL-terminated, *len excludes the NUL). Returns 0, or -1
     * with a malloc'd one-line *err naming the URL. The caller frees both
     * with free(). */
    int (*fetch)(const char *url, size_t max, char **data, size_t *len, char **err);
} p3d_policy_fetch_plugin;

#endif
