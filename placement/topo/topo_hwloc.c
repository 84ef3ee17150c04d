/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_hwloc.c — one node's topology from hwloc 2.x: live discovery, an
 * XML export, or a synthetic description. Reads GPUs, NICs, NUMA/package
 * locality, PCIe-tree link classes and the NVLinkBandwidth distances matrix
 * into a p3d_node, then hands it to p3d_node_finish().
 *
 * Why some choices (docs/topology.md has the user-facing version):
 *  - I/O types filter KEEP_ALL: hwloc's default drops PCI and OS devices,
 *    even from XML, and with them the GPUs and the NVLink matrix.
 *  - What is read from the loaded topology, and why so (which objects are
 *    GPUs and NICs, the NVLink matrix): topo_hwloc_collect.c.
 */
#include "topo_hwloc.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What is true now rather than what the hardware is: the NVML plugin's
 * NVLink state and fabric clique (augment: live discovery only), the notes,
 * and p3d_node_finish's derivations. Runs on a cached record too. Consumes
 * nd: on success *out owns it, on failure it is freed. */
static int complete_node(p3d_node *nd, const p3d_topo_extra *x, int augment, p3d_node **out, char **err)
{
    int rc = -1, filled = 0, ng = nd->ngpus;
    if (augment)
        filled = p3d_topo_nvml_augment(nd);
    if (ng > 1 && !x->had_matrix && !filled)
        p3d_node_note(nd, "no NVLinkBandwidth matrix in this source (hwloc "
                          "without its NVML backend records none): GPUs are "
                          "shown as PCIe-only");
    if (x->namd)
        p3d_node_note(nd,
                      "%d AMD GPU%s (rsmi) found and not used: par3drun "
                      "places NVIDIA GPUs only (CUDA/NCCL)",
                      x->namd, x->namd == 1 ? "" : "s");
    if (ng == 0)
        p3d_node_note(nd, "no NVIDIA GPU found: only CPU and NUMA facts "
                          "are shown");
    if (p3d_node_finish(nd, err) < 0)
        goto out;
    *out = nd;
    nd = NULL;
    rc = 0;
out:
    p3d_node_free(nd);
    return rc;
}

static int build_node(hwloc_topology_t t, const char *source, const char *kind, const char *hostname, int augment,
                      p3d_node **out, char **err)
{
    p3d_node *nd = NULL;
    p3d_topo_extra x = {0, 0};
    if (p3d_hwloc_collect_node(t, source, kind, hostname, &nd, &x, err) < 0)
        return -1;
    return complete_node(nd, &x, augment, out, err);
}

/* hwloc's gl and opencl components pull in X11/ICU and find nothing we use
 * (GPUs come from PCI, CUDA/NVML OS devices or our NVML plugin); loading
 * them costs about half of a local discovery, which every launch pays.
 * Its xml_libxml component maps libxml2 and the ICU at every init, for an
 * XML import that hwloc's built-in reader does as well (the one hwloc
 * builds without libxml2 use): par3drun checks an XML file with libxml2
 * itself (topo_xmlcheck.c, loaded then) before hwloc reads it.
 * hwloc reads the blacklist once, when its components are first set up, so
 * it is set only around the first init and the user's value (or its
 * absence) is restored: the workers inherit the environment untouched. */
static int init_with_blacklist(hwloc_topology_t *t)
{
    static int done;
    if (done)
        return hwloc_topology_init(t);
    done = 1;
    const char *old = getenv("HWLOC_PLUGINS_BLACKLIST");
    char *saved = old ? strdup(old) : NULL;
    if (!old)
        setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_xml_libxml", 1);
    int rc = hwloc_topology_init(t);
    if (!old)
        unsetenv("HWLOC_PLUGINS_BLACKLIST");
    free(saved);
    return rc;
}

/* Live discovery keeps only what the record reads. Caches (and their sysfs
 * walk per CPU) and Misc objects are never read; OS devices are read only
 * for GPUs (cuda/nvml/rsmi), RDMA and network interfaces, which hwloc's
 * "important" filter keeps, while it drops block devices, DMA engines and
 * anything not on PCI. PCI devices and bridges stay KEEP_ALL: the link
 * classes walk the bridges, and an NVSwitch (class 0x0680, not
 * "important") is an object of the NVLinkBandwidth matrix. Caches being
 * gone cannot move an I/O object's locality: I/O attaches to the deepest
 * normal object covering its CPUs, and the one left in a cache's place has
 * the same cpuset and nodeset. test_topo_cache shows the record is the
 * same with and without these on every hwloc fixture and on this machine. */
static void trim_filters(hwloc_topology_t t)
{
    hwloc_topology_set_cache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(t, HWLOC_OBJ_MISC, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_type_filter(t, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
}

/* A topology that keeps every I/O object; trim: live discovery's filters
 * on top (trim_filters). */
static int topo_init(hwloc_topology_t *t, int trim, char **err)
{
    if (init_with_blacklist(t) < 0)
        return p3d_err(err, "hwloc: cannot initialise a topology");
    hwloc_topology_set_io_types_filter(*t, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (trim)
        trim_filters(*t);
    return 0;
}

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
/* Live discovery leaks ~1 KB inside libpciaccess (used by hwloc's PCI
 * component, allocated under hwloc_topology_load, never freed). Not ours to
 * fix, but it would fail every sanitizer run of `par3drun topo`. hwloc
 * unloads the component and libpciaccess with it, which leaves LeakSanitizer
 * unable to name the frames; pinning the library keeps them named so the
 * suppression below matches it and nothing else. ASan builds only. If
 * another part of par3drun needs suppressions, move this to one place. */
static void keep_pciaccess_loaded(void)
{
    (void)dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_NODELETE);
}
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libpciaccess.so\n";
}
#endif

/* Live discovery, trimmed (trim_filters); the raw record and its extras. */
static int discover_local(const char *host, int trim, p3d_node **raw, p3d_topo_extra *x, char **err)
{
    int rc = -1;
    hwloc_topology_t t = NULL;
    if (topo_init(&t, trim, err) < 0)
        goto out;
#if defined(__SANITIZE_ADDRESS__)
    keep_pciaccess_loaded();
#endif
    if (hwloc_topology_load(t) < 0) {
        p3d_err(err, "local: hwloc could not discover this machine");
        goto out;
    }
    rc = p3d_hwloc_collect_node(t, "local", "local", host[0] ? host : NULL, raw, x, err);
out:
    if (t)
        hwloc_topology_destroy(t);
    return rc;
}

/* The cache sits between discovery and completion (topo_cache.h): a hit
 * skips hwloc entirely, a miss stores what discovery found before the NVML
 * plugin and p3d_node_finish touch it. A record whose NVLink matrix came
 * from hwloc (an hwloc built with its NVML backend) is not stored: that
 * matrix is link state, which is read live. */
int p3d_topo_hwloc_local(p3d_node **out, char **err)
{
    int rc = -1;
    char host[256] = "", *key = NULL, *enc = NULL, *kerr = NULL;
    p3d_node *raw = NULL;
    p3d_topo_extra x = {0, 0};
    if (gethostname(host, sizeof host - 1) < 0)
        host[0] = 0;
    if (p3d_topo_cache_wanted()) {
        p3d_topo_key k;
        if (p3d_topo_key_gather(&k, "", &kerr) == 0) {
            key = p3d_topo_key_text(&k);
            p3d_topo_key_clear(&k);
        } else if (p3d_topo_cache_verbose()) {
            fprintf(stderr, "par3drun: topology cache: not used: %s\n", kerr);
        }
    } else if (p3d_topo_cache_verbose()) {
        fprintf(stderr, "par3drun: topology cache: off (--no-topo-cache or "
                        "P3D_TOPO_CACHE=0): discovering live\n");
    }
    if (key && p3d_topo_cache_lookup(key, &raw, &x) == 1) {
        free(raw->hostname);
        free(raw->source);
        free(raw->source_kind);
        raw->hostname = strdup(host[0] ? host : "unknown");
        raw->source = strdup("local");
        raw->source_kind = strdup("local");
        if (!raw->hostname || !raw->source || !raw->source_kind) {
            p3d_err(err, "out of memory");
            goto out;
        }
    } else {
        p3d_node_free(raw);
        raw = NULL;
        if (discover_local(host, 1, &raw, &x, err) < 0)
            goto out;
        if (key && !x.had_matrix)
            enc = p3d_topo_raw_encode(raw, &x);
        else if (key && p3d_topo_cache_verbose())
            fprintf(stderr, "par3drun: topology cache: not stored: hwloc "
                            "supplied the NVLink matrix, which is link state\n");
    }
    rc = complete_node(raw, &x, 1, out, err);
    raw = NULL;
    if (rc == 0 && enc)
        p3d_topo_cache_store(key, enc);
out:
    p3d_node_free(raw);
    free(key);
    free(enc);
    free(kerr);
    return rc;
}

int p3d_topo_hwloc_local_raw(int trim, p3d_node **out, p3d_topo_extra *x, char **err)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) < 0)
        host[0] = 0;
    return discover_local(host, trim, out, x, err);
}

int p3d_topo_hwloc_xml_raw(const char *path, const char *text, size_t len, int trim, p3d_node **out, p3d_topo_extra *x,
                           char **err)
{
    int rc = -1;
    hwloc_topology_t t = NULL;
    if (topo_init(&t, trim, err) < 0)
        goto out;
    if (hwloc_topology_set_xmlbuffer(t, text, (int)len + 1) < 0 || hwloc_topology_load(t) < 0) {
        p3d_err(err, "%s: hwloc rejected this XML", path);
        goto out;
    }
    rc = p3d_hwloc_collect_node(t, path, "hwloc-xml", NULL, out, x, err);
out:
    if (t)
        hwloc_topology_destroy(t);
    return rc;
}

int p3d_topo_hwloc_xml_buffer(const char *path, const char *text, size_t len, p3d_node **out, char **err)
{
    int rc = -1;
    hwloc_topology_t t = NULL;
    if (topo_init(&t, 0, err) < 0)
        goto out;
    if (len > (size_t)0x7ffffffe) {
        p3d_err(err, "%s: too large for an hwloc XML", path);
        goto out;
    }
    /* hwloc wants the terminating NUL counted in the length */
    if (hwloc_topology_set_xmlbuffer(t, text, (int)len + 1) < 0 || hwloc_topology_load(t) < 0) {
        unsigned api = hwloc_get_api_version();
        const char *v3 = strstr(text, "<topology version=\"3.");
        int vl = 0;
        while (v3 && vl < 16 && v3[19 + vl] && v3[19 + vl] != '"' && (unsigned char)v3[19 + vl] >= 32 &&
               (unsigned char)v3[19 + vl] < 127)
            vl++;
        if (v3 && v3 - text < 4096)
            p3d_err(err,
                    "%s: an hwloc 3.x export (<topology version=\"%.*s\">), which the installed libhwloc "
                    "%u.%u.%u cannot read; par3drun reads what its libhwloc reads (hwloc 2.x exports here): "
                    "export the node again with an hwloc 2.x lstopo (`lstopo --of xml FILE` on that node), or "
                    "give par3drun a libhwloc that reads 3.x",
                    path, vl, v3 ? v3 + 19 : "", api >> 16, (api >> 8) & 0xff, api & 0xff);
        else
            p3d_err(err,
                    "%s: hwloc rejected this XML (malformed or not an "
                    "hwloc 2.x export: re-create it with `lstopo --of xml`)",
                    path);
        goto out;
    }
    rc = build_node(t, path, "hwloc-xml", NULL, 0, out, err);
out:
    if (t)
        hwloc_topology_destroy(t);
    return rc;
}

/* hwloc builds every object a synthetic description asks for: "pack:1000
 * core:1000 pu:1000" is a billion PUs and hours of work (a cluster file can
 * name one). hwloc's parser is lenient ("pack: 0010core:1000" is pack:10
 * core:1000), so rather than parse levels this multiplies every run of
 * digits outside parentheses (attributes): never less than the real count,
 * at most a small factor more (the 3 of "l3"). */
#define SYNTHETIC_MAX_PUS (1u << 20)

static int synthetic_too_big(const char *desc, double *total)
{
    double prod = 1;
    int depth = 0;
    for (const char *p = desc; *p; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')' && depth > 0)
            depth--;
        else if (depth == 0 && *p >= '0' && *p <= '9') {
            double v = 0;
            for (; *p >= '0' && *p <= '9'; p++)
                v = v * 10 + (*p - '0');
            prod *= v;
            p--;
        }
    }
    *total = prod;
    return prod > SYNTHETIC_MAX_PUS;
}

int p3d_topo_hwloc_synthetic(const char *desc, p3d_node **out, char **err)
{
    int rc = -1;
    hwloc_topology_t t = NULL;
    char *src = NULL;
    double total = 0;
    if (asprintf(&src, "synthetic:%s", desc) < 0) {
        src = NULL;
        p3d_err(err, "out of memory");
        goto out;
    }
    if (synthetic_too_big(desc, &total)) {
        p3d_err(err, "%s: describes %.0f PUs; at most %u (docs/limits.md)", src, total, SYNTHETIC_MAX_PUS);
        goto out;
    }
    if (topo_init(&t, 0, err) < 0)
        goto out;
    if (hwloc_topology_set_synthetic(t, desc) < 0 || hwloc_topology_load(t) < 0) {
        p3d_err(err,
                "%s: not a valid hwloc synthetic description (expected "
                "e.g. 'pack:2 numa:1 core:4 pu:1')",
                src);
        goto out;
    }
    rc = build_node(t, src, "synthetic", "synthetic", 0, out, err);
out:
    if (t)
        hwloc_topology_destroy(t);
    free(src);
    return rc;
}
