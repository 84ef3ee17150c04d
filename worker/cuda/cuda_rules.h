/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_rules.h - the CUDA backend's decisions that need no GPU, as static
 * inline C: cuda_backend.cu and main.c use them, and a CPU unit test
 * (tests/unit/test_worker_cuda_rules.c) checks them on a machine without
 * one. */
#ifndef P3DW_CUDA_RULES_H
#define P3DW_CUDA_RULES_H

/* --verify's default tolerance (relative, per step's loss).  A correct CUDA
 * run differs from the CPU reference by the FP32 accumulation order only:
 * <= 6e-8 emulated on the CPU for the dense and MoE models gpu-check runs.
 * Dropping the MoE router's gradient moves the loss by 5e-4 at global
 * batch 64, so the CUDA tolerance must sit well below that: 2e-5 leaves a
 * factor 25 to the bug and 300 to the noise.  The CPU backend only
 * reorders sums across ranks. */
#define P3DW_VERIFY_TOL_CPU 1e-5
#define P3DW_VERIFY_TOL_CUDA 2e-5

static inline double p3dw_verify_default_tol(int cuda)
{
    return cuda ? P3DW_VERIFY_TOL_CUDA : P3DW_VERIFY_TOL_CPU;
}

/* CUDA's minor-version compatibility: a driver of CUDA major M runs every
 * M.x runtime (newer minors included, as long as no newer-driver feature is
 * used), so only an older MAJOR is refused up front; within a major,
 * cudaGetDeviceCount's cudaErrorInsufficientDriver decides.  drv and rt
 * are cudaDriverGetVersion / cudaRuntimeGetVersion numbers (1000*major +
 * 10*minor).  Returns 1 when the driver may run the runtime. */
static inline int p3dw_cuda_driver_may_run(int drv, int rt)
{
    return drv > 0 && drv / 1000 >= rt / 1000;
}

#endif
