/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nvml_layout.h — the NVML types the topology plugin (topo_nvml.c) passes
 * to libnvidia-ml, in one place: the plugin and the stand-in library of
 * the tests (fake_nvml.c) both include this header, so a layout that drifts
 * from NVML's breaks both or neither. nvml.h does not ship with Debian, so
 * these follow NVIDIA's public nvml.h (NVML 12): nvmlPciInfo_t (with
 * busIdLegacy first, as the _v2/_v3 entry points fill it) and
 * nvmlGpuFabricInfo_t. The sizes are pinned below: a changed field fails
 * the build.
 */
#ifndef P3D_NVML_LAYOUT_H
#define P3D_NVML_LAYOUT_H

#include <stddef.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct nvmlPciInfo_st {
    char busIdLegacy[16];
    unsigned int domain, bus, device;
    unsigned int pciDeviceId; /* (device id << 16) | vendor id */
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state; /* 3 = NVML_GPU_FABRIC_STATE_COMPLETED */
} nvmlGpuFabricInfo_t;

#define NVML_GPU_FABRIC_STATE_COMPLETED 3
#define NVML_NVLINK_MAX_LINKS 18

/* nvmlDeviceGetNvLinkRemoteDeviceType's answer (nvml.h's
 * nvmlIntNvLinkDeviceType_t, an enum: int-sized). */
typedef int nvmlIntNvLinkDeviceType_t;
#define NVML_NVLINK_DEVICE_TYPE_GPU 0x00
#define NVML_NVLINK_DEVICE_TYPE_IBMNPU 0x01
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 0x02
#define NVML_NVLINK_DEVICE_TYPE_UNKNOWN 0xFF

/* NVML's nvml.h: 16 + 5*4 + 32 bytes; 16 + 4 + 4 + 1, padded to 4. */
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout differs from nvml.h");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId offset");
_Static_assert(sizeof(nvmlGpuFabricInfo_t) == 28, "nvmlGpuFabricInfo_t layout differs from nvml.h");
_Static_assert(offsetof(nvmlGpuFabricInfo_t, cliqueId) == 20, "nvmlGpuFabricInfo_t.cliqueId offset");

#endif
