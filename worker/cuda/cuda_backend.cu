/* cuda_backend.cu - the CUDA/NCCL backend of p3d-worker: the same struct
 * p3d_ops as cpu_ops.c, with cuBLAS GEMMs, small kernels for GeLU/MSE/SGD
 * and NCCL for the collectives.
 *
 * Communicators: rank 0 makes an ncclUniqueId and hands it to everyone
 * through the TCP world the worker already has (so no NCCL_COMM_ID is
 * needed); the TP/PP/DP communicators are ncclCommSplit()s of the world
 * with the same colours and keys as groups.c, so NCCL rank i of a group is
 * the member with coordinate i.  Every collective waits for its stream with
 * a deadline and checks ncclCommGetAsyncError, so a dead peer ends in a
 * message and exit code 1 rather than a hang. */
#include "worker.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

namespace {

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
    fprintf(stderr, "p3d-worker: rank %d: CUDA error in %s (cuda_backend.cu:%d): %s\n", g_rank,
            what, line, cudaGetErrorString(e));
    exit(1);
}
#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess)                                                                     \
            die_cuda(e_, #x, __LINE__);                                                            \
    } while (0)
#define CKB(x)                                                                                     \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "p3d-worker: rank %d: cuBLAS error %d in %s\n", g_rank, (int)s_, #x); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int nccl_fail(ncclResult_t r, const char *what)
{
    fprintf(stderr, "p3d-worker: rank %d: NCCL %s failed: %s (%s)\n", g_rank, what,
            ncclGetErrorString(r), ncclGetLastError(NULL));
    return -1;
}

/* Waits for the stream while watching the communicator. */
int wait_comm(ncclComm_t comm, const char *what)
{
    double deadline = now_s() + g_timeout;
    for (;;) {
        cudaError_t e = cudaStreamQuery(g_stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            die_cuda(e, what, __LINE__);
        ncclResult_t ar;
        if (ncclCommGetAsyncError(comm, &ar) == ncclSuccess && ar != ncclSuccess &&
            ar != ncclInProgress) {
            ncclCommAbort(comm);
            return nccl_fail(ar, what);
        }
        if (now_s() > deadline) {
            fprintf(stderr, "p3d-worker: rank %d: NCCL %s did not finish within %.0f s: a peer "
                            "is stuck or gone\n", g_rank, what, g_timeout);
            ncclCommAbort(comm);
            return -1;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

constexpr double GELU_C = 0.7978845608028654; /* sqrt(2/pi), as cpu_ops.c */

__global__ void k_gelu_fwd(const float *Z, float *G, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double x = Z[i];
        G[i] = (float)(0.5 * x * (1.0 + tanh(GELU_C * (x + 0.044715 * x * x * x))));
    }
}

__global__ void k_gelu_bwd(const float *Z, const float *dG, float *dZ, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double x = Z[i], t = tanh(GELU_C * (x + 0.044715 * x * x * x));
        double d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x);
        dZ[i] = (float)(dG[i] * d);
    }
}

__global__ void k_mse(const float *Y, const float *T, float *dY, size_t n, float scale, double *sum)
{
    double s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double d = (double)Y[i] - T[i];
        s += d * d;
        dY[i] = (float)(scale * d);
    }
    atomicAdd(sum, s);
}

__global__ void k_sgd(float *W, const float *G, size_t n, float lr)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        W[i] -= lr * G[i];
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
        fprintf(stderr, "p3d-worker: rank %d: cudaMalloc of %zu floats: %s\n", g_rank, n,
                cudaGetErrorString(e));
        return NULL;
    }
    CK(cudaMemsetAsync(p, 0, (n ? n : 1) * sizeof(float), g_stream));
    return p;
}

void c_release(void *p)
{
    if (p)
        cudaFree(p);
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

void c_zero(void *dst, size_t n) { CK(cudaMemsetAsync(dst, 0, n * sizeof(float), g_stream)); }

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
    CKB(cublasSgemm(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M,
                    K, &alpha, (const float *)B, tb ? K : N, (const float *)A, ta ? M : K, &beta,
                    (float *)C, N));
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
    k_mse<<<blocks(n), 256, 0, g_stream>>>((const float *)Y, (const float *)T, (float *)dY, n,
                                           scale, g_dscratch);
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

int c_allreduce(p3dw_group *g, void *buf, size_t n)
{
    ncclComm_t comm = ((cuda_group *)g->impl)->comm;
    ncclResult_t r = ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, g_stream);
    if (r != ncclSuccess)
        return nccl_fail(r, "all-reduce");
    return wait_comm(comm, "all-reduce");
}

int c_allreduce_f64(p3dw_group *g, double *buf, size_t n)
{
    ncclComm_t comm = ((cuda_group *)g->impl)->comm;
    if (n > 1) {
        fprintf(stderr, "p3d-worker: internal error: host all-reduce of %zu doubles\n", n);
        return -1;
    }
    CK(cudaMemcpyAsync(g_dscratch + 1, buf, sizeof *buf, cudaMemcpyHostToDevice, g_stream));
    ncclResult_t r = ncclAllReduce(g_dscratch + 1, g_dscratch + 1, 1, ncclDouble, ncclSum, comm,
                                   g_stream);
    if (r != ncclSuccess)
        return nccl_fail(r, "loss all-reduce");
    if (wait_comm(comm, "loss all-reduce"))
        return -1;
    CK(cudaMemcpy(buf, g_dscratch + 1, sizeof *buf, cudaMemcpyDeviceToHost));
    return 0;
}

int c_p2p(p3dw_group *g, int peer, void *buf, size_t n, int sending)
{
    ncclComm_t comm = ((cuda_group *)g->impl)->comm;
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess)
        r = sending ? ncclSend(buf, n, ncclFloat, peer, comm, g_stream)
                    : ncclRecv(buf, n, ncclFloat, peer, comm, g_stream);
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess)
        r = r2;
    if (r != ncclSuccess)
        return nccl_fail(r, sending ? "send" : "recv");
    return wait_comm(comm, sending ? "pipeline send" : "pipeline receive");
}

int c_send(p3dw_group *g, int peer, const void *buf, size_t n)
{
    return c_p2p(g, peer, const_cast<void *>(buf), n, 1);
}

int c_recv(p3dw_group *g, int peer, void *buf, size_t n) { return c_p2p(g, peer, buf, n, 0); }

void c_sync() { CK(cudaStreamSynchronize(g_stream)); }

} // namespace

const p3d_ops cuda_ops = {
    "cuda",     c_alloc,    c_release, c_upload,        c_download, c_zero,
    c_copy,     c_gemm,     c_gelu_fwd, c_gelu_bwd,     c_mse,      c_sgd,
    c_allreduce, c_allreduce_f64, c_send, c_recv,       c_sync,
};

static int p3dw_cuda_probe(const char **why)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) {
        *why = e == cudaErrorNoDevice ? "no GPU: no CUDA device is visible (check CUDA_VISIBLE_DEVICES)"
                                      : "no GPU: no NVIDIA driver on this machine "
                                        "(cudaErrorInsufficientDriver)";
        return 0;
    }
    if (e != cudaSuccess) {
        *why = cudaGetErrorString(e);
        return 0;
    }
    if (n == 0)
        *why = "no GPU: the CUDA runtime reports 0 devices";
    return n;
}

static int p3dw_cuda_setup(tcp_world *w, const p3dw_env *e, const tcp_comm comm[P3DW_NDIM],
                               p3dw_group g[P3DW_NDIM], double op_timeout)
{
    int ndev = 0;
    g_rank = e->rank;
    g_timeout = op_timeout;
    CK(cudaGetDeviceCount(&ndev));
    /* The launcher makes CUDA_VISIBLE_DEVICES such that device LOCAL_RANK is
     * the chosen GPU; with one visible device that device is it. */
    int dev = ndev == 1 ? 0 : e->local_rank % ndev;
    CK(cudaSetDevice(dev));
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    CKB(cublasCreate(&g_blas));
    CKB(cublasSetStream(g_blas, g_stream));
    CK(cudaMalloc(&g_dscratch, 2 * sizeof(double)));

    ncclUniqueId id, *ids = (ncclUniqueId *)calloc((size_t)e->world, sizeof id);
    memset(&id, 0, sizeof id);
    if (!ids)
        return -1;
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
    ncclResult_t r = ncclCommInitRank(&g_world, e->world, id, e->rank);
    if (r != ncclSuccess)
        return nccl_fail(r, "ncclCommInitRank (world)");
    for (int d = 0; d < P3DW_NDIM; d++) {
        int colour = 0;
        for (int o = P3DW_NDIM - 1; o >= 0; o--)
            if (o != d)
                colour = colour * e->size[o] + e->coord[o];
        cuda_group *cg = (cuda_group *)calloc(1, sizeof *cg);
        if (!cg)
            return -1;
        r = ncclCommSplit(g_world, colour, e->coord[d], &cg->comm, NULL);
        if (r != ncclSuccess) {
            free(cg);
            return nccl_fail(r, "ncclCommSplit");
        }
        int cnt = 0, me = 0;
        ncclCommCount(cg->comm, &cnt);
        ncclCommUserRank(cg->comm, &me);
        g[d].impl = cg;
        if (cnt != comm[d].size || me != comm[d].rank) {
            fprintf(stderr, "p3d-worker: rank %d: NCCL %s communicator has %d ranks and I am %d, "
                            "the TCP split says %d and %d\n", e->rank, p3dw_dim_name[d], cnt, me,
                    comm[d].size, comm[d].rank);
            return -1;
        }
    }
    if (e->rank == 0) {
        int v = 0;
        ncclGetVersion(&v);
        fprintf(stderr, "p3d-worker: NCCL %d, %d GPU(s) visible to rank 0, using device %d\n", v,
                ndev, dev);
    }
    return 0;
}

static void p3dw_cuda_teardown(p3dw_group g[P3DW_NDIM])
{
    for (int d = 0; d < P3DW_NDIM; d++) {
        cuda_group *cg = (cuda_group *)g[d].impl;
        if (cg) {
            ncclCommDestroy(cg->comm);
            free(cg);
            g[d].impl = NULL;
        }
    }
    if (g_world)
        ncclCommDestroy(g_world);
    g_world = NULL;
    if (g_blas)
        cublasDestroy(g_blas);
    g_blas = NULL;
    cudaFree(g_dscratch);
    g_dscratch = NULL;
}

extern "C" __attribute__((visibility("default"))) const p3dw_cuda_api p3dw_cuda_api_v1 = {
    P3DW_CUDA_ABI, p3dw_cuda_probe, p3dw_cuda_setup, p3dw_cuda_teardown, &cuda_ops,
};
