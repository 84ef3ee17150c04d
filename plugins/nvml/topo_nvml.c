/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * topo_nvml.c — the "nvml" topology augment plugin (p3d_topo_nvml.so).
 *
 * Debian's hwloc has no NVML backend, so a live discovery finds the GPUs on
 * the PCI bus but no NVLink between them. When libnvidia-ml.so.1 can be
 * loaded, this plugin asks NVML, per GPU and link, whether the link is up
 * and what PCI device sits at its far end: another GPU of this node (a
 * direct link) or an NVSwitch (links through switches are merged into one
 * switch and closed transitively, as hwloc does). Only a far end that
 * nvmlDeviceGetNvLinkRemoteDeviceType calls a switch counts as one: an
 * NVIDIA vendor id alone also matches bridges and devices NVML does not
 * know. It also reads the GPU
 * fabric info (cluster UUID + clique id) that names a multi-node NVLink
 * domain (GB200 NVL72).
 *
 * Rules of the plugin ABI (p3d/plugin.h): no calls back into par3drun,
 * only the node's fields are written. It declines (returns 0) when the
 * library, a symbol or a GPU is missing, and never fails the load.
 * P3D_NVML_LIBRARY overrides the library name (tests load a stand-in).
 */
#include "p3d/plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The NVML types, shared with the tests' stand-in library (nvml.h does not
 * ship here). */
#include "nvml_layout.h"

typedef struct nvml_api {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*by_pci)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int *);
    nvmlReturn_t (*link_version)(nvmlDevice_t, unsigned, unsigned *);
    nvmlReturn_t (*link_remote)(nvmlDevice_t, unsigned, nvmlPciInfo_t *);
    nvmlReturn_t (*fabric)(nvmlDevice_t, nvmlGpuFabricInfo_t *); /* optional */
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned);        /* optional */
    /* optional: without it no far end counts as an NVSwitch */
    nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t *);
} nvml_api;

static int bind_api(void *h, nvml_api *a)
{
    *(void **)&a->init = dlsym(h, "nvmlInit_v2");
    *(void **)&a->shutdown = dlsym(h, "nvmlShutdown");
    *(void **)&a->by_pci = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&a->link_state = dlsym(h, "nvmlDeviceGetNvLinkState");
    *(void **)&a->link_version = dlsym(h, "nvmlDeviceGetNvLinkVersion");
    *(void **)&a->link_remote = dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    *(void **)&a->fabric = dlsym(h, "nvmlDeviceGetGpuFabricInfo");
    *(void **)&a->name = dlsym(h, "nvmlDeviceGetName");
    *(void **)&a->remote_type = dlsym(h, "nvmlDeviceGetNvLinkRemoteDeviceType");
    return a->init && a->shutdown && a->by_pci && a->link_state && a->link_remote;
}

/* Per-direction GB/s of one link: NVLink 1 moved 20, NVLink 2-4 move 25
 * (hwloc's NVML backend uses the same figures). Later generations are
 * counted as 25 too: the domain rules need only "linked or not". */
static double link_gbps(const nvml_api *a, nvmlDevice_t d, unsigned l)
{
    unsigned v = 0;
    if (a->link_version && a->link_version(d, l, &v) == NVML_SUCCESS && v == 1)
        return 20.0;
    return 25.0;
}

/* "0000:18:00.0" and NVML's "00000000:18:00.0" compare as numbers. */
static int pci_key(const char *s, unsigned long long *key)
{
    unsigned dom, bus, dev, fn;
    if (sscanf(s, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
        return -1;
    *key = ((unsigned long long)dom << 24) | (bus << 16) | (dev << 8) | fn;
    return 0;
}

static int augment(p3d_node *n)
{
    int filled = 0, g = n->ngpus, have_links = 0;
    const char *lib = getenv("P3D_NVML_LIBRARY");
    void *h = dlopen(lib && *lib ? lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    nvml_api a;
    nvmlDevice_t *dev = NULL;
    unsigned long long *key = NULL;
    double *to_sw = NULL;
    int inited = 0;
    if (!h || g == 0 || !bind_api(h, &a))
        goto out;
    dev = calloc((size_t)g, sizeof *dev);
    key = calloc((size_t)g, sizeof *key);
    to_sw = calloc((size_t)g, sizeof *to_sw);
    if (!dev || !key || !to_sw || a.init() != NVML_SUCCESS)
        goto out;
    inited = 1;
    for (int i = 0; i < g; i++)
        if (pci_key(n->gpus[i].pci, &key[i]) < 0 || a.by_pci(n->gpus[i].pci, &dev[i]) != NVML_SUCCESS)
            dev[i] = NULL;
    for (int i = 0; i < g * g; i++)
        have_links |= n->nvlink[i] > 0;
    /* Fill the NVLink matrix only when the source had none: hwloc's own
     * (from an NVML-enabled hwloc) is as good and came first. */
    for (int i = 0; i < g && !have_links; i++) {
        if (!dev[i])
            continue;
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            int up = 0;
            nvmlPciInfo_t r;
            unsigned long long rk;
            if (a.link_state(dev[i], l, &up) != NVML_SUCCESS || !up)
                continue;
            memset(&r, 0, sizeof r);
            if (a.link_remote(dev[i], l, &r) != NVML_SUCCESS || pci_key(r.busId, &rk) < 0)
                continue;
            double bw = link_gbps(&a, dev[i], l);
            int peer = -1;
            for (int j = 0; j < g; j++)
                if (j != i && key[j] == rk)
                    peer = j;
            nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
            if (peer >= 0)
                n->nvlink[(size_t)i * g + peer] += bw;
            else if (a.remote_type && a.remote_type(dev[i], l, &type) == NVML_SUCCESS &&
                     type == NVML_NVLINK_DEVICE_TYPE_SWITCH)
                to_sw[i] += bw; /* NVML says NVSwitch; bridges, IBM NPUs, unknown ignored */
            filled = 1;
        }
    }
    for (int i = 0; i < g; i++)
        for (int j = 0; j < g; j++) {
            double *v = &n->nvlink[(size_t)i * g + j];
            if (i != j && *v == 0 && to_sw[i] > 0 && to_sw[j] > 0)
                *v = to_sw[i] < to_sw[j] ? to_sw[i] : to_sw[j];
        }
    /* Direct links were counted from both ends; keep them symmetric even if
     * one end reported a link down. */
    for (int i = 0; i < g; i++)
        for (int j = i + 1; j < g; j++) {
            double x = n->nvlink[(size_t)i * g + j], y = n->nvlink[(size_t)j * g + i], m = x > y ? x : y;
            n->nvlink[(size_t)i * g + j] = n->nvlink[(size_t)j * g + i] = m;
        }
    for (int i = 0; i < g; i++) {
        if (!dev[i])
            continue;
        if (a.name && !n->gpus[i].model[0] && a.name(dev[i], n->gpus[i].model, sizeof n->gpus[i].model) == NVML_SUCCESS)
            filled = 1;
        nvmlGpuFabricInfo_t fi;
        memset(&fi, 0, sizeof fi);
        if (!n->fabric_uuid && a.fabric && a.fabric(dev[i], &fi) == NVML_SUCCESS && fi.status == NVML_SUCCESS &&
            fi.state == NVML_GPU_FABRIC_STATE_COMPLETED) {
            static const char hex[] = "0123456789abcdef";
            char u[37];
            int p = 0, zero = 1;
            for (int b = 0; b < 16; b++) {
                if (b == 4 || b == 6 || b == 8 || b == 10)
                    u[p++] = '-';
                u[p++] = hex[fi.clusterUuid[b] >> 4];
                u[p++] = hex[fi.clusterUuid[b] & 15];
                zero &= fi.clusterUuid[b] == 0;
            }
            u[p] = 0;
            if (!zero && (n->fabric_uuid = strdup(u))) {
                n->fabric_clique = (int)fi.cliqueId;
                filled = 1;
            }
        }
    }
out:
    if (inited)
        a.shutdown();
    if (h)
        dlclose(h);
    free(dev);
    free(key);
    free(to_sw);
    return filled;
}

/* The registry's entry point (p3d/plugin.h): augment() above fills or
 * declines; it has no failure of its own to report. */
static int nvml_augment(p3d_node *n, char *msg, size_t msgcap)
{
    if (augment(n) > 0)
        return P3D_PLUGIN_OK;
    snprintf(msg, msgcap, "no NVML library, NVML symbol or GPU with NVLink facts");
    return P3D_PLUGIN_DECLINE;
}

static const p3d_topo_ops ops = {.augment = nvml_augment};

P3D_PLUGIN_EXPORT(topo, nvml, P3D_PLUGIN_TOPO, &ops);
