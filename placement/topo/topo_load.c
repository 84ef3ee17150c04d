/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_load.c — p3d_topo_load(): picks the topology source from SRC.
 *   "local" (or empty)   live hwloc discovery (+ the NVML plugin when present)
 *   "synthetic:STRING"   hwloc synthetic description (CPU-only)
 *   anything else        a file; its content decides: NCCL's topology XML
 *                        (root <system>), hwloc XML (other '<'), or an
 *                        `nvidia-smi topo -m` text (a GPU0 header)
 * A bare name that is not a file in the working directory is also looked up
 * among the bundled topologies (<data dir>/examples/topologies/), so
 * `--topology dgx-h100.xml` works from anywhere.
 */
#include "topo_internal.h"
#include "read_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 64 MiB: hwloc exports of the largest machines are a few MB. */
#define P3D_TOPO_MAX_FILE ((size_t)64 << 20)

/* Reads a whole topology file with the one file reader (regular files
 * only, size capped); the two commonest mistakes get their own words. */
static int read_file(const char *path, char **text, size_t *len, char **err)
{
    struct stat st;
    int k = stat(path, &st);
    if (k < 0 && errno == ENOENT)
        return p3d_err(err, "%s: no such file", path);
    if (k == 0 && S_ISDIR(st.st_mode))
        return p3d_err(
            err, "%s: is a directory: expected an hwloc XML, an NCCL topology XML or an `nvidia-smi topo -m` text",
            path);
    return p3d_read_small_file(path, "topology file", P3D_TOPO_MAX_FILE, text, len, err);
}

/* "dgx-h100.xml" or "dgx-h100" among the bundled topologies; NULL if none. */
static char *bundled_path(const char *name)
{
    if (strchr(name, '/'))
        return NULL;
    static const char *const ext[] = {"", ".xml", ".txt"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        char *p = NULL;
        if (asprintf(&p, "%s/examples/topologies/%s%s", p3d_data_dir(), name, ext[i]) < 0)
            return NULL;
        struct stat st;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            return p;
        free(p);
    }
    return NULL;
}

static int load_file(const char *path, p3d_node **out, char **err)
{
    int rc = -1;
    char *text = NULL;
    size_t len = 0;
    if (read_file(path, &text, &len, err) < 0)
        goto out;
    const char *p = text;
    if (len >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
        p += 3; /* UTF-8 byte order mark */
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    if (!*p) {
        p3d_err(err,
                "%s: empty file: expected an hwloc XML or an "
                "`nvidia-smi topo -m` text",
                path);
        goto out;
    }
    if (*p == '<' && p3d_topo_looks_nccl(text, len)) {
        if (p3d_topo_parse_nccl(path, text, len, 1, out, err) < 0)
            goto out;
    } else if (*p == '<') {
        if (p3d_topo_xml_check(path, text, len, err) < 0 || p3d_topo_xml_probe(path, text, len, err) < 0 ||
            p3d_topo_hwloc_xml_buffer(path, text, len, out, err) < 0)
            goto out;
    } else if (memchr(text, 0, len)) {
        p3d_err(err,
                "%s: binary data: expected an hwloc XML or an "
                "`nvidia-smi topo -m` text",
                path);
        goto out;
    } else if (strstr(text, "GPU0")) {
        if (p3d_topo_parse_nvsmi(path, text, out, err) < 0)
            goto out;
    } else {
        p3d_err(err,
                "%s: neither an hwloc XML (starts with '<') nor an "
                "`nvidia-smi topo -m` text (no 'GPU0' header)",
                path);
        goto out;
    }
    rc = 0;
out:
    free(text);
    return rc;
}

int p3d_topo_load(const char *src, p3d_node **out, char **err)
{
    int rc = -1;
    char *bundled = NULL;
    *out = NULL;
    if (!src || !*src || !strcmp(src, "local")) {
        rc = p3d_topo_hwloc_local(out, err);
        goto out;
    }
    if (!strncmp(src, "synthetic:", 10)) {
        rc = p3d_topo_hwloc_synthetic(src + 10, out, err);
        goto out;
    }
    if (access(src, F_OK) < 0 && (bundled = bundled_path(src))) {
        rc = load_file(bundled, out, err);
        goto out;
    }
    rc = load_file(src, out, err);
out:
    free(bundled);
    return rc;
}
