/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_loader.c - finds and loads the CUDA backend module
 * (p3d-worker-cuda.so) at run time, so that p3d-worker itself never links
 * the CUDA libraries: it starts fast and starts everywhere. */
#include "worker.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const p3dw_cuda_api *p3dw_cuda_load(const char **why)
{
    static char msg[PATH_MAX + 256];
    char path[PATH_MAX];
    const char *env = getenv("P3D_WORKER_CUDA_LIB");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        /* Next to the executable (the build directory), else the install's
         * <bin>/../<libdir>/par3drun, where the plugins are. */
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) {
            *why = "cannot locate p3d-worker-cuda.so (/proc/self/exe unreadable; set "
                   "P3D_WORKER_CUDA_LIB)";
            return NULL;
        }
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        int dl = slash ? (int)(slash - exe) : 1;
        const char *d = slash ? exe : ".";
        snprintf(path, sizeof path, "%.*s/../%s/par3drun/p3d-worker-cuda.so", dl, d, P3D_INSTALL_LIBDIR);
        if (access(path, F_OK) != 0)
            snprintf(path, sizeof path, "%.*s/p3d-worker-cuda.so", dl, d);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(msg, sizeof msg,
                 "the CUDA backend cannot be loaded: %s (built without "
                 "CUDA/NCCL, or their libraries are missing)",
                 dlerror());
        *why = msg;
        return NULL;
    }
    const p3dw_cuda_api *api = dlsym(h, "p3dw_cuda_api_v1");
    if (!api || api->abi != P3DW_CUDA_ABI) {
        snprintf(msg, sizeof msg, "%s: %s (expected ABI %d)", path,
                 api ? "wrong ABI number" : "no p3dw_cuda_api_v1 symbol", P3DW_CUDA_ABI);
        *why = msg;
        dlclose(h);
        return NULL;
    }
    /* Kept loaded for the life of the process (its code runs until exit). */
    return api;
}

const p3dw_cuda_api *p3dw_cuda_pick(const char *backend, const char **why)
{
    *why = "the CPU backend was asked for";
    if (strcmp(backend, "cuda") && strcmp(backend, "auto"))
        return NULL;
    /* Without the driver's files there is no GPU: skip loading the CUDA
     * libraries altogether (a second of start-up per rank). */
    if (!strcmp(backend, "auto") && access("/proc/driver/nvidia/version", F_OK) != 0 &&
        access("/dev/nvidiactl", F_OK) != 0) {
        *why = "no GPU: no NVIDIA driver on this machine (/proc/driver/nvidia is absent)";
        return NULL;
    }
    const p3dw_cuda_api *api = p3dw_cuda_load(why);
    return api && api->probe(why) > 0 ? api : NULL;
}
