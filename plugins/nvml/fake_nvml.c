/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fake_nvml.c — a stand-in for libnvidia-ml.so.1 used only by
 * tests/unit/test_topo_nvml.c: GPUs at PCI 0000:1{0..3}:00.0, each with
 * 2 active NVLinks to an NVSwitch (0000:80:00.0, vendor 0x10de), GPU 0 and 1
 * also linked directly, GPU 2 and 3 each with one more link to an NVIDIA
 * device NVML reports as of unknown type (0000:90:00.0: not a switch), and
 * fabric clique 7 of a cluster UUID 01..10.
 * P3D_FAKE_NVML_FAIL_INIT=1 makes nvmlInit_v2 fail (the decline path).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The same layouts the plugin reads (one header: no drift). */
#include "nvml_layout.h"

/* A device handle is its GPU number + 1, cast to a pointer. */
int nvmlInit_v2(void)
{
    const char *f = getenv("P3D_FAKE_NVML_FAIL_INIT");
    return f && *f == '1' ? 1 : 0;
}
int nvmlShutdown(void)
{
    return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **dev)
{
    unsigned dom, bus, d, f;
    if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &d, &f) != 4 || dom || d || f || bus < 0x10 || bus > 0x13)
        return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (void *)(size_t)(bus - 0x10 + 1);
    return 0;
}
static int gpu(void *dev)
{
    return (int)(size_t)dev - 1;
}
int nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *active)
{
    int g = gpu(dev);
    *active = link < 2 || (link == 2 && g <= 1) || (link == 3 && g >= 2);
    return 0;
}
int nvmlDeviceGetNvLinkVersion(void *dev, unsigned link, unsigned *v)
{
    (void)dev;
    (void)link;
    *v = 4;
    return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, nvmlPciInfo_t *p)
{
    int g = gpu(dev);
    memset(p, 0, sizeof *p);
    if (link < 2) {
        snprintf(p->busId, sizeof p->busId, "00000000:80:00.0");
        p->pciDeviceId = (0x22a3u << 16) | 0x10de;
    } else if (link == 3) {
        snprintf(p->busId, sizeof p->busId, "00000000:90:00.0");
        p->pciDeviceId = (0x1234u << 16) | 0x10de;
    } else {
        snprintf(p->busId, sizeof p->busId, "00000000:%02x:00.0", 0x10 + (g == 0 ? 1 : 0));
        p->pciDeviceId = (0x2330u << 16) | 0x10de;
    }
    return 0;
}
int nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned link, nvmlIntNvLinkDeviceType_t *t)
{
    (void)dev;
    *t = link < 2    ? NVML_NVLINK_DEVICE_TYPE_SWITCH
         : link == 2 ? NVML_NVLINK_DEVICE_TYPE_GPU
                     : NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    return 0;
}
int nvmlDeviceGetGpuFabricInfo(void *dev, nvmlGpuFabricInfo_t *fi)
{
    (void)dev;
    for (int i = 0; i < 16; i++)
        fi->clusterUuid[i] = (unsigned char)(i + 1);
    fi->status = 0;
    fi->cliqueId = 7;
    fi->state = 3;
    return 0;
}
int nvmlDeviceGetName(void *dev, char *name, unsigned len)
{
    snprintf(name, len, "Fake H100 %d", gpu(dev));
    return 0;
}
