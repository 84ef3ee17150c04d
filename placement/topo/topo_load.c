/*
 * topo_load.c — p3d_topo_load(): picks the topology source from SRC.
 *   "local" (or empty)   live hwloc discovery (+ the NVML plugin when present)
 *   "synthetic:STRING"   hwloc synthetic description (CPU-only)
 *   anything else        a file; its content decides: hwloc XML ('<') or an
 *                        `nvidia-smi topo -m` text (a GPU0 header)
 * A bare name that is not a file in the working directory is also looked up
 * among the bundled topologies (<data dir>/examples/topologies/), so
 * `--topology dgx-h100.xml` works from anywhere.
 */
#include "topo_internal.h"
#include "p3d/plugin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 64 MiB: hwloc exports of the largest machines are a few MB. */
#define P3D_TOPO_MAX_FILE (64L << 20)

/* Reads a whole file into a NUL-terminated buffer. */
static int read_file(const char *path, char **text, size_t *len, char **err)
{
    int rc = -1;
    FILE *f = NULL;
    char *buf = NULL;
    struct stat st;
    if (stat(path, &st) < 0) {
        p3d_err(err, "%s: %s", path,
                errno == ENOENT ? "no such file" : strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        p3d_err(err, "%s: is a directory: expected an hwloc XML or an "
                "`nvidia-smi topo -m` text", path);
        goto out;
    }
    if (!(f = fopen(path, "rb"))) {
        p3d_err(err, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    size_t cap = 1 << 16, n = 0;
    if (!(buf = malloc(cap + 1))) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (;;) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
        if (n == cap) {
            if ((long)cap >= P3D_TOPO_MAX_FILE) {
                p3d_err(err, "%s: larger than %ld MiB: not a topology file",
                        path, P3D_TOPO_MAX_FILE >> 20);
                goto out;
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                p3d_err(err, "out of memory");
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        p3d_err(err, "%s: read error: %s", path, strerror(errno));
        goto out;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    buf = NULL;
    rc = 0;
out:
    if (f)
        fclose(f);
    free(buf);
    return rc;
}

/* "dgx-h100.xml" or "dgx-h100" among the bundled topologies; NULL if none. */
static char *bundled_path(const char *name)
{
    if (strchr(name, '/'))
        return NULL;
    static const char *const ext[] = {"", ".xml", ".txt"};
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++) {
        char *p = NULL;
        if (asprintf(&p, "%s/examples/topologies/%s%s", p3d_data_dir(), name,
                     ext[i]) < 0)
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
        p3d_err(err, "%s: empty file: expected an hwloc XML or an "
                "`nvidia-smi topo -m` text", path);
        goto out;
    }
    if (*p == '<') {
        if (p3d_topo_xml_check(path, text, len, err) < 0 ||
            p3d_topo_xml_probe(path, text, len, err) < 0 ||
            p3d_topo_hwloc_xml_buffer(path, text, len, out, err) < 0)
            goto out;
    } else if (memchr(text, 0, len)) {
        p3d_err(err, "%s: binary data: expected an hwloc XML or an "
                "`nvidia-smi topo -m` text", path);
        goto out;
    } else if (strstr(text, "GPU0")) {
        if (p3d_topo_parse_nvsmi(path, text, out, err) < 0)
            goto out;
    } else {
        p3d_err(err, "%s: neither an hwloc XML (starts with '<') nor an "
                "`nvidia-smi topo -m` text (no 'GPU0' header)", path);
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

/* ---- topology source plugins ------------------------------------------ */

int p3d_topo_nvml_augment(p3d_node *n)
{
    const p3d_plugin *pl;
    char msg[512] = "";
    /* Absent is normal (an install without the plugin);
     * a present but unusable file was already said by the registry. */
    if (p3d_plugin_find(P3D_PLUGIN_TOPO, "nvml", &pl, NULL) <= 0)
        return 0;
    const p3d_topo_ops *ops = pl->ops;
    if (!ops->augment)
        return 0;
    int k = ops->augment(n, msg, sizeof msg);
    if (k == P3D_PLUGIN_FAIL)
        fprintf(stderr, "par3drun: warning: topology source 'nvml' failed (%s); using hwloc's facts only\n",
                msg[0] ? msg : "no reason given");
    return k == P3D_PLUGIN_OK;
}
