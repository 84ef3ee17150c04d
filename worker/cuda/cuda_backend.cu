/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_backend.cu - the CUDA/NCCL backend of p3d-worker: the same struct
 * p3d_ops as cpu_ops.c, with cuBLAS GEMMs, small kernels for GeLU/MSE/SGD
 * and NCCL for the collectives.
 *
 * Communicators: rank 0 makes an ncclUniqueId and hands it to everyone
 * through the TCP world the worker already has (so no NCCL_COMM_ID is
 * needed); the TP/PP/DP and the expert grid's EP/EDP communicators are
 * ncclCommSplit()s of the world with the same colours and keys as groups.c
 * (ETP shares TP's: the MoE layer needs etp == tp), so NCCL rank i of a
 * group is the member with coordinate i.  The MoE all-to-all is one NCCL
 * group of ncclSend/ncclRecv per peer.
 *
 * Every communicator is non-blocking (ncclConfig_t.blocking = 0): init,
 * split, an enqueue and ncclGroupEnd may return ncclInProgress instead of
 * blocking the host (connection set-up with NCCL_RUNTIME_CONNECT=1 happens
 * in the first operation on a communicator), and every call is then polled
 * with ncclCommGetAsyncError under the same deadline as the stream, so a
 * dead or frozen peer ends in a message naming the call and the group and
 * exit code 1 rather than a hang in init, a split or a collective.
 *
 * Failure path: a communicator that failed or timed out is aborted
 * (ncclCommAbort frees it) and its handle cleared at once; later operations
 * on it fail with a message and teardown skips it.  After any failure,
 * teardown aborts the remaining communicators instead of finalizing them
 * (a finalize waits for peers that may be gone).  Every CUDA, NCCL and
 * cuBLAS return code is checked: compute and memory errors end the rank
 * with one message and exit code 1 (they mean a broken device), collective
 * errors return -1 to the caller. */
#include "worker.h"
#include "cuda_rules.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace
{

struct cuda_group {
    ncclComm_t comm;
};

cudaStream_t g_stream;
cublasHandle_t g_blas;
ncclComm_t g_world;
double g_timeout = 120;
double *g_dscratch; /* device doubles: loss sums, host f64 all-reduce */
int g_rank;

void die_cuda(cudaError_t e, const char *what, int line)
{
    fprintf(stderr, "p3d-worker: rank %d: CUDA error in %s (cuda_backend.cu:%d): %s\n", g_rank, what, line,
            cudaGetErrorString(e));
    exit(1);
}
#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess)                                                                                         \
            die_cuda(e_, #x, __LINE__);                                                                                \
    } while (0)
#define CKB(x)                                                                                                         \
    do {                                                                                                               \
        cublasStatus_t s_ = (x);                                                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            fprintf(stderr, "p3d-worker: rank %d: cuBLAS %s (%d) in %s\n", g_rank, blas_name(s_), (int)s_, #x);        \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *blas_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
    }
}

int nccl_fail(ncclResult_t r, const char *what)
{
    fprintf(stderr, "p3d-worker: rank %d: NCCL %s failed: %s (%s)\n", g_rank, what, ncclGetErrorString(r),
            ncclGetLastError(NULL));
    return -1;
}

/* Aborts a communicator and clears its handle: ncclCommAbort frees it, so
 * nothing may touch the old handle again. */
void abort_comm(ncclComm_t *comm)
{
    if (!*comm)
        return;
    ncclResult_t r = ncclCommAbort(*comm);
    *comm = NULL;
    if (r != ncclSuccess && r != ncclInProgress)
        fprintf(stderr, "p3d-worker: rank %d: ncclCommAbort: %s\n", g_rank, ncclGetErrorString(r));
}

/* Polls a non-blocking communicator until the call made on it has left
 * ncclInProgress, then (stream != 0) until the stream is idle, all under
 * one deadline.  On an error or the deadline the communicator is aborted
 * and *pcomm cleared; the message names the call and the group. */
int wait_comm_call(ncclComm_t *pcomm, const char *what, const char *group, int stream)
{
    double deadline = now_s() + g_timeout;
    int issued = 0; /* NCCL has handed the operation to the stream */
    for (;;) {
        ncclResult_t ar = ncclSuccess, qr = ncclCommGetAsyncError(*pcomm, &ar);
        if (qr != ncclSuccess)
            ar = qr;
        if (ar != ncclSuccess && ar != ncclInProgress) {
            fprintf(stderr, "p3d-worker: rank %d: NCCL %s on the %s group failed: %s (%s)\n", g_rank, what, group,
                    ncclGetErrorString(ar), ncclGetLastError(*pcomm));
            abort_comm(pcomm);
            return -1;
        }
        if (ar == ncclSuccess)
            issued = 1;
        if (issued) {
            if (!stream)
                return 0;
            cudaError_t e = cudaStreamQuery(g_stream);
            if (e == cudaSuccess)
                return 0;
            if (e != cudaErrorNotReady)
                die_cuda(e, what, __LINE__);
        }
        if (now_s() > deadline) {
            fprintf(stderr,
                    "p3d-worker: rank %d: NCCL %s on the %s group did not finish within "
                    "%.0f s: a peer is stuck or gone; aborting the communicator\n",
                    g_rank, what, group, g_timeout);
            abort_comm(pcomm);
            return -1;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* An operation enqueued on a group's communicator: r is what the enqueue
 * (or ncclGroupEnd) returned; ncclInProgress is normal for a non-blocking
 * communicator. */
int finish_op(ncclResult_t r, ncclComm_t *pcomm, const char *what, const char *group)
{
    if (r != ncclSuccess && r != ncclInProgress) {
        fprintf(stderr, "p3d-worker: rank %d: NCCL %s on the %s group failed: %s (%s)\n", g_rank, what, group,
                ncclGetErrorString(r), ncclGetLastError(*pcomm));
        abort_comm(pcomm);
        return -1;
    }
    return wait_comm_call(pcomm, what, group, 1);
}

constexpr double GELU_C = 0.7978845608028654; /* sqrt(2/pi), as cpu_ops.c */

__global__ void k_gelu_fwd(const float *Z, float *G, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double x = Z[i];
        G[i] = (float)(0.5 * x * (1.0 + tanh(GELU_C * (x + 0.044715 * x * x * x))));
    }
}

__global__ void k_gelu_bwd(const float *Z, const float *dG, float *dZ, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double x = Z[i], t = tanh(GELU_C * (x + 0.044715 * x * x * x));
        double d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x);
        dZ[i] = (float)(dG[i] * d);
    }
}

__global__ void k_mse(const float *Y, const float *T, float *dY, size_t n, float scale, double *sum)
{
    double s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double d = (double)Y[i] - T[i];
        s += d * d;
        dY[i] = (float)(scale * d);
    }
    atomicAdd(sum, s);
}

__global__ void k_sgd(float *W, const float *G, size_t n, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        W[i] -= lr * G[i];
}

__global__ void k_axpy(float *Y, const float *X, size_t n, float a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        Y[i] += a * X[i];
}

unsigned blocks(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

void *c_alloc(size_t n)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (n ? n : 1) * sizeof(float));
    if (e != cudaSuccess) {
        fprintf(stderr, "p3d-worker: rank %d: cudaMalloc of %zu floats: %s\n", g_rank, n, cudaGetErrorString(e));
        return NULL;
    }
    CK(cudaMemsetAsync(p, 0, (n ? n : 1) * sizeof(float), g_stream));
    return p;
}

void c_release(void *p)
{
    if (p)
        CK(cudaFree(p));
}

void c_upload(void *dst, const float *src, size_t n)
{
    CK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, g_stream));
    CK(cudaStreamSynchronize(g_stream)); /* src is reused by the caller */
}

void c_download(float *dst, const void *src, size_t n)
{
    CK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
}

void c_zero(void *dst, size_t n)
{
    CK(cudaMemsetAsync(dst, 0, n * sizeof(float), g_stream));
}

void c_copy(void *dst, const void *src, size_t n)
{
    CK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, g_stream));
}

/* Row-major C = op(A)·op(B) is column-major C^T = op(B)^T·op(A)^T; a
 * row-major matrix read column-major is its transpose, so the op flags
 * carry over unchanged and A and B swap places. */
void c_gemm(int ta, int tb, int M, int N, int K, const void *A, const void *B, void *C, float beta)
{
    const float alpha = 1.0f;
    CKB(cublasSgemm(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
                    (const float *)B, tb ? K : N, (const float *)A, ta ? M : K, &beta, (float *)C, N));
}

void c_gelu_fwd(const void *Z, void *G, size_t n)
{
    k_gelu_fwd<<<blocks(n), 256, 0, g_stream>>>((const float *)Z, (float *)G, n);
    CK(cudaGetLastError());
}

void c_gelu_bwd(const void *Z, const void *dG, void *dZ, size_t n)
{
    k_gelu_bwd<<<blocks(n), 256, 0, g_stream>>>((const float *)Z, (const float *)dG, (float *)dZ, n);
    CK(cudaGetLastError());
}

double c_mse(const void *Y, const void *T, void *dY, size_t n, float scale)
{
    double s = 0;
    CK(cudaMemsetAsync(g_dscratch, 0, sizeof(double), g_stream));
    k_mse<<<blocks(n), 256, 0, g_stream>>>((const float *)Y, (const float *)T, (float *)dY, n, scale, g_dscratch);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(&s, g_dscratch, sizeof s, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    return s;
}

void c_sgd(void *W, const void *G, size_t n, float lr)
{
    k_sgd<<<blocks(n), 256, 0, g_stream>>>((float *)W, (const float *)G, n, lr);
    CK(cudaGetLastError());
}

/* The group's communicator, or NULL (message printed) when an earlier
 * failure aborted it. */
ncclComm_t *group_comm(p3dw_group *g, const char *what)
{
    cuda_group *cg = (cuda_group *)g->impl;
    if (!cg || !cg->comm) {
        fprintf(stderr,
                "p3d-worker: rank %d: NCCL %s on the %s group: its communicator was "
                "aborted after an earlier failure\n",
                g_rank, what, g->name);
        return NULL;
    }
    return &cg->comm;
}

void c_axpy(void *Y, const void *X, size_t n, float a)
{
    k_axpy<<<blocks(n), 256, 0, g_stream>>>((float *)Y, (const float *)X, n, a);
    CK(cudaGetLastError());
}

int c_allreduce(p3dw_group *g, void *buf, size_t n)
{
    ncclComm_t *comm = group_comm(g, "all-reduce");
    if (!comm)
        return -1;
    ncclResult_t r = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, *comm, g_stream);
    return finish_op(r, comm, "all-reduce", g->name);
}

int c_allreduce_f64(p3dw_group *g, double *buf, size_t n)
{
    ncclComm_t *comm = group_comm(g, "loss all-reduce");
    if (!comm)
        return -1;
    if (n > 1) {
        fprintf(stderr, "p3d-worker: internal error: host all-reduce of %zu doubles\n", n);
        return -1;
    }
    CK(cudaMemcpyAsync(g_dscratch + 1, buf, sizeof *buf, cudaMemcpyHostToDevice, g_stream));
    ncclResult_t r = ncclAllReduce(g_dscratch + 1, g_dscratch + 1, 1, ncclDouble, ncclSum, *comm, g_stream);
    if (finish_op(r, comm, "loss all-reduce", g->name))
        return -1;
    CK(cudaMemcpyAsync(buf, g_dscratch + 1, sizeof *buf, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    return 0;
}

/* Send and receive as ONE NCCL group: NCCL progresses the fused operation
 * together, so two stages that send to each other at the same time (1F1B's
 * steady state) cannot each block in a send waiting for the other's
 * receive.  ncclGroupEnd is called even when an enqueue failed, so the
 * group nesting stays balanced.  sto == rfrom == my rank (P3DW_SOLO_COMM on
 * a group of one) is NCCL's send/receive to self. */
int c_sendrecv(p3dw_group *g, int sto, const void *sbuf, size_t sn, int rfrom, void *rbuf, size_t rn)
{
    const char *what = sto >= 0 && rfrom >= 0 ? "pipeline send+receive"
                       : sto >= 0             ? "pipeline send"
                                              : "pipeline receive";
    ncclComm_t *comm = group_comm(g, what);
    if (!comm)
        return -1;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return nccl_fail(r, "ncclGroupStart");
    if (sto >= 0)
        r = ncclSend(sbuf, sn, ncclFloat, sto, *comm, g_stream);
    if ((r == ncclSuccess || r == ncclInProgress) && rfrom >= 0)
        r = ncclRecv(rbuf, rn, ncclFloat, rfrom, *comm, g_stream);
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress)
        r = r2;
    return finish_op(r, comm, what, g->name);
}

/* All-to-all over the group (MoE dispatch/combine): one ncclSend and one
 * ncclRecv per other member, all inside one ncclGroupStart/End so NCCL
 * schedules them together (no ordering between pairs can deadlock); my own
 * segment is a device copy, except on a group of one (P3DW_SOLO_COMM),
 * where it is NCCL's send/receive to self so that NCCL runs.  The self
 * segment's sizes are checked before anything is queued: a mismatch must
 * not leave peers' sends half enqueued.  Byte counts, ncclChar. */
int c_alltoallv(p3dw_group *g, const void *sbuf, const size_t *sbytes, void *rbuf, const size_t *rbytes)
{
    ncclComm_t *comm = group_comm(g, "all-to-all");
    if (!comm)
        return -1;
    const char *sb = (const char *)sbuf;
    char *rb = (char *)rbuf;
    size_t so = 0, ro = 0;
    if (sbytes[g->rank] != rbytes[g->rank]) {
        fprintf(stderr,
                "p3d-worker: rank %d: internal error: all-to-all sends %zu bytes to "
                "itself but expects %zu\n",
                g_rank, sbytes[g->rank], rbytes[g->rank]);
        return -1;
    }
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return nccl_fail(r, "ncclGroupStart");
    for (int j = 0; j < g->size; j++) {
        int ok = r == ncclSuccess || r == ncclInProgress;
        if (j == g->rank && g->size > 1) {
            if (sbytes[j])
                CK(cudaMemcpyAsync(rb + ro, sb + so, sbytes[j], cudaMemcpyDeviceToDevice, g_stream));
        } else {
            if (ok && sbytes[j])
                r = ncclSend(sb + so, sbytes[j], ncclChar, j, *comm, g_stream);
            ok = r == ncclSuccess || r == ncclInProgress;
            if (ok && rbytes[j])
                r = ncclRecv(rb + ro, rbytes[j], ncclChar, j, *comm, g_stream);
        }
        so += sbytes[j];
        ro += rbytes[j];
    }
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress)
        r = r2;
    return finish_op(r, comm, "all-to-all", g->name);
}

void c_sync()
{
    CK(cudaStreamSynchronize(g_stream));
}

} // namespace

const p3d_ops cuda_ops = {
    "cuda",     c_alloc, c_release, c_upload, c_download,  c_zero,          c_copy,     c_gemm,      c_gelu_fwd,
    c_gelu_bwd, c_mse,   c_sgd,     c_axpy,   c_allreduce, c_allreduce_f64, c_sendrecv, c_alltoallv, c_sync,
};

/* "No driver" and "driver too old" need different fixes, so they get
 * different messages: cudaDriverGetVersion reports 0 without a driver.
 * Minor-version compatibility: only an older major driver is refused here
 * (cuda_rules.h); within a major, cudaGetDeviceCount's
 * cudaErrorInsufficientDriver decides. */
static int p3dw_cuda_probe(const char **why)
{
    static char msg[256];
    int n = 0, drv = 0, rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0) {
        *why = "no GPU: no NVIDIA driver on this machine (libcuda.so.1 not found)";
        return 0;
    }
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess && !p3dw_cuda_driver_may_run(drv, rt)) {
        snprintf(msg, sizeof msg,
                 "no GPU: the NVIDIA driver supports CUDA %d.%d, an older major "
                 "version than the CUDA %d.%d runtime p3d-worker was built "
                 "with: update the driver",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        *why = msg;
        return 0;
    }
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice) {
        *why = "no GPU: no CUDA device is visible (check CUDA_VISIBLE_DEVICES)";
        return 0;
    }
    if (e == cudaErrorInsufficientDriver) {
        *why = "no GPU: the NVIDIA driver is too old for this CUDA runtime "
               "(cudaErrorInsufficientDriver): update the driver";
        return 0;
    }
    if (e != cudaSuccess) {
        snprintf(msg, sizeof msg, "no GPU: cudaGetDeviceCount: %s", cudaGetErrorString(e));
        *why = msg;
        return 0;
    }
    if (n == 0)
        *why = "no GPU: the CUDA runtime reports 0 devices";
    return n;
}

static void p3dw_cuda_teardown(p3dw_group g[P3DW_NALL], int failed);

/* A non-blocking communicator config: init, split and operations return
 * ncclInProgress instead of blocking, and are polled under the deadline. */
ncclConfig_t nonblocking_config()
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 0;
    return c;
}

/* setup's work; on failure everything made so far is left in g_* and g[]
 * for p3dw_cuda_setup to abort. */
static int setup_comms(tcp_world *w, const p3dw_env *e, const tcp_comm comm[P3DW_NALL], p3dw_group g[P3DW_NALL],
                       int *pdev, int *pndev)
{
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    /* The launcher makes CUDA_VISIBLE_DEVICES such that device LOCAL_RANK is
     * the chosen GPU; with one visible device that device is it. */
    int dev = ndev == 1 ? 0 : e->local_rank % ndev;
    *pdev = dev;
    *pndev = ndev;
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    CKB(cublasCreate(&g_blas));
    CKB(cublasSetStream(g_blas, g_stream));
    /* Plain FP32 GEMMs (no TF32): --verify compares with the CPU backend. */
    CKB(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH));
    CK(cudaMalloc(&g_dscratch, 2 * sizeof(double)));

    ncclUniqueId id, *ids = (ncclUniqueId *)calloc((size_t)e->world, sizeof id);
    memset(&id, 0, sizeof id);
    if (!ids) {
        fprintf(stderr, "p3d-worker: rank %d: out of host memory\n", e->rank);
        return -1;
    }
    if (e->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) {
            free(ids);
            return nccl_fail(r, "ncclGetUniqueId");
        }
    }
    tcp_set_activity(w, "handing over the NCCL id");
    if (tcp_world_allgather(w, &id, ids, sizeof id)) {
        free(ids);
        return -1;
    }
    id = ids[0];
    free(ids);
    ncclConfig_t cfg = nonblocking_config();
    ncclResult_t r = ncclCommInitRankConfig(&g_world, e->world, id, e->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_fail(r, "ncclCommInitRankConfig (world)");
        return -1;
    }
    if (!g_world || wait_comm_call(&g_world, "ncclCommInitRankConfig", "world", 0))
        return -1;
    for (int d = 0; d < P3DW_NALL; d++) {
        if (d == P3DW_ETP)
            continue; /* the TP communicator, below */
        cuda_group *cg = (cuda_group *)calloc(1, sizeof *cg);
        if (!cg) {
            fprintf(stderr, "p3d-worker: rank %d: out of host memory\n", e->rank);
            return -1;
        }
        g[d].impl = cg; /* freed (its communicator aborted) by teardown */
        /* groups.c's split: the colour of the TCP communicator, key = the
         * coordinate, so members come in the same order.  Every rank of
         * the world calls every split, in the same order. */
        cfg = nonblocking_config();
        r = ncclCommSplit(g_world, comm[d].colour, e->coord[d], &cg->comm, &cfg);
        if (r != ncclSuccess && r != ncclInProgress) {
            fprintf(stderr,
                    "p3d-worker: rank %d: NCCL ncclCommSplit of the %s group failed: "
                    "%s (%s)\n",
                    e->rank, p3dw_dim_name[d], ncclGetErrorString(r), ncclGetLastError(g_world));
            return -1;
        }
        if (!cg->comm) {
            fprintf(stderr,
                    "p3d-worker: rank %d: NCCL ncclCommSplit of the %s group returned "
                    "no communicator\n",
                    e->rank, p3dw_dim_name[d]);
            return -1;
        }
        if (wait_comm_call(&cg->comm, "ncclCommSplit", p3dw_dim_name[d], 0) ||
            wait_comm_call(&g_world, "ncclCommSplit (parent)", "world", 0))
            return -1;
        int cnt = 0, me = 0;
        if ((r = ncclCommCount(cg->comm, &cnt)) != ncclSuccess || (r = ncclCommUserRank(cg->comm, &me)) != ncclSuccess)
            return nccl_fail(r, "ncclCommCount/ncclCommUserRank");
        if (cnt != comm[d].size || me != comm[d].rank) {
            fprintf(stderr,
                    "p3d-worker: rank %d: NCCL %s communicator has %d ranks and I am %d, "
                    "the TCP split says %d and %d\n",
                    e->rank, p3dw_dim_name[d], cnt, me, comm[d].size, comm[d].rank);
            return -1;
        }
    }
    g[P3DW_ETP].impl = g[P3DW_TP].impl;
    return 0;
}

/* On any failure after the first CUDA call, setup aborts (never finalizes)
 * the world communicator and every split already made and frees the rest,
 * so this rank leaves nothing behind and its peers' next NCCL call (a split
 * or the first collective) fails or times out with a message instead of
 * waiting for it. */
static int p3dw_cuda_setup(tcp_world *w, const p3dw_env *e, const tcp_comm comm[P3DW_NALL], p3dw_group g[P3DW_NALL],
                           double op_timeout)
{
    int dev = 0, ndev = 0;
    g_rank = e->rank;
    g_timeout = op_timeout;
    for (int d = 0; d < P3DW_NALL; d++)
        g[d].impl = NULL; /* main.c's TCP handles: not the CUDA backend's */
    if (setup_comms(w, e, comm, g, &dev, &ndev)) {
        fprintf(stderr,
                "p3d-worker: rank %d: CUDA/NCCL setup failed: aborting the NCCL "
                "communicators made so far\n",
                e->rank);
        p3dw_cuda_teardown(g, 1);
        return -1;
    }
    if (e->rank == 0) {
        int v = 0;
        if (ncclGetVersion(&v) == ncclSuccess)
            fprintf(stderr,
                    "p3d-worker: NCCL %d, %d GPU(s) visible to rank 0, using device %d, "
                    "non-blocking communicators\n",
                    v, ndev, dev);
    }
    return 0;
}

/* A clean end finalizes each communicator (flushes its operations, waits
 * until it is quiescent) and destroys it; a communicator that does not get
 * there within the timeout, and every one after a failure, is aborted.
 * Cleared handles (aborted earlier) are skipped. */
static void close_comm(ncclComm_t *comm, int failed, const char *name)
{
    if (!*comm)
        return;
    if (!failed) {
        ncclResult_t r = ncclCommFinalize(*comm), ar = ncclInProgress;
        if (r == ncclInProgress) /* non-blocking: polled below */
            r = ncclSuccess;
        double deadline = now_s() + g_timeout;
        while (r == ncclSuccess && now_s() < deadline) {
            r = ncclCommGetAsyncError(*comm, &ar);
            if (r != ncclSuccess || ar != ncclInProgress)
                break;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        if (r == ncclSuccess && ar == ncclSuccess) {
            r = ncclCommDestroy(*comm);
            *comm = NULL;
            if (r != ncclSuccess)
                fprintf(stderr, "p3d-worker: rank %d: ncclCommDestroy (%s): %s\n", g_rank, name, ncclGetErrorString(r));
            return;
        }
        fprintf(stderr,
                "p3d-worker: rank %d: finalizing the NCCL %s communicator failed (%s); "
                "aborting it\n",
                g_rank, name, ncclGetErrorString(r != ncclSuccess ? r : ar));
    }
    abort_comm(comm);
}

static void p3dw_cuda_teardown(p3dw_group g[P3DW_NALL], int failed)
{
    g[P3DW_ETP].impl = NULL; /* TP's, closed as TP */
    for (int d = 0; d < P3DW_NALL; d++) {
        cuda_group *cg = (cuda_group *)g[d].impl;
        if (cg) {
            close_comm(&cg->comm, failed, p3dw_dim_name[d]);
            free(cg);
            g[d].impl = NULL;
        }
    }
    close_comm(&g_world, failed, "world");
    if (g_blas) {
        cublasStatus_t s = cublasDestroy(g_blas);
        if (s != CUBLAS_STATUS_SUCCESS)
            fprintf(stderr, "p3d-worker: rank %d: cublasDestroy: %s\n", g_rank, blas_name(s));
    }
    g_blas = NULL;
    if (g_dscratch) {
        cudaError_t e = cudaFree(g_dscratch);
        if (e != cudaSuccess)
            fprintf(stderr, "p3d-worker: rank %d: cudaFree: %s\n", g_rank, cudaGetErrorString(e));
    }
    g_dscratch = NULL;
    if (g_stream) {
        cudaError_t e = cudaStreamDestroy(g_stream);
        if (e != cudaSuccess)
            fprintf(stderr, "p3d-worker: rank %d: cudaStreamDestroy: %s\n", g_rank, cudaGetErrorString(e));
    }
    g_stream = NULL;
}

extern "C" __attribute__((visibility("default"))) const p3dw_cuda_api p3dw_cuda_api_v1 = {
    P3DW_CUDA_ABI, p3dw_cuda_probe, p3dw_cuda_setup, p3dw_cuda_teardown, &cuda_ops, p3dw_cuda_bench_node,
};
