/* SPDX-License-Identifier: BSD-3-Clause */
/* common.c — errors, names of link classes and dimensions, data paths. */
#include "p3d/p3d.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *p3d_vfmt(const char *fmt, va_list ap)
{
    char *m = NULL;
    return vasprintf(&m, fmt, ap) < 0 ? NULL : m;
}

int p3d_err(char **err, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    free(*err);
    *err = m;
    return -1;
}

void p3d_str_appendf(char **s, const char *sep, const char *fmt, ...)
{
    char *piece = NULL, *joined = NULL;
    va_list ap;
    va_start(ap, fmt);
    int k = vasprintf(&piece, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if (asprintf(&joined, "%s%s%s", *s ? *s : "", *s && **s ? sep : "", piece) >= 0) {
        free(*s);
        *s = joined;
    }
    free(piece);
}

static const char *const link_names[P3D_LINK_COUNT] = {"X",   "NV",   "MNNVL", "PIX",  "PXB",
                                                       "PHB", "NODE", "SYS",   "RACK", "XRACK"};
static const char *const link_descs[P3D_LINK_COUNT] = {"the same GPU",
                                                       "NVLink",
                                                       "multi-node NVLink",
                                                       "PCIe (one switch)",
                                                       "PCIe (several switches)",
                                                       "PCIe host bridge",
                                                       "PCIe across host bridges",
                                                       "the CPU interconnect (across sockets)",
                                                       "the network within a rack",
                                                       "the network across racks"};

const char *p3d_link_name(p3d_link l)
{
    return (unsigned)l < P3D_LINK_COUNT ? link_names[l] : "?";
}

const char *p3d_link_desc(p3d_link l)
{
    return (unsigned)l < P3D_LINK_COUNT ? link_descs[l] : "?";
}

static const char *const dim_names[P3D_NDIMS] = {"tp", "cp", "ep", "dp", "pp", "etp", "edp"};

const char *p3d_dim_name(int dim)
{
    return dim >= 0 && dim < P3D_NDIMS ? dim_names[dim] : "?";
}

void p3d_strv_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Bundled policies and topologies: $P3D_DATA_DIR, else <exe>/../share/par3drun
 * when installed, else the source tree the binary was built from. */
const char *p3d_data_dir(void)
{
    static char buf[4096];
    const char *env = getenv("P3D_DATA_DIR");
    if (env && *env)
        return env;
    if (buf[0])
        return buf;
    char exe[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, sizeof buf, "%s/../share/par3drun", exe);
            if (access(buf, R_OK) == 0)
                return buf;
        }
    }
    snprintf(buf, sizeof buf, "%s", P3D_SOURCE_DATA_DIR);
    return buf;
}
