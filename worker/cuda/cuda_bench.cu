/* SPDX-License-Identifier: BSD-3-Clause */
/* cuda_bench.cu - --bench-node on the GPUs (the module's bench_node,
 * worker.h): the preflight's figures of every GPU this process sees
 * (CUDA_VISIBLE_DEVICES: the node's allocation), one GPU after the other.
 *
 *   compute  cuBLAS SGEMM (plain FP32, as training runs it), n = 4096,
 *            GFLOP/s of the best repetition timed with CUDA events; the
 *            result is checked against a double-precision CPU reference
 *            at 64 sampled entries: a GPU that computes wrong fails the
 *            benchmark (and so the node's preflight), whatever its speed;
 *   memory   device-to-device cudaMemcpy of 256 MiB, GB/s copied;
 *   links    peer copies of 64 MiB between every ordered pair of GPUs of
 *            the node's fastest peer link class (cudaDevP2PAttrPerformanceRank:
 *            NVLink where there is NVLink), GB/s one way.
 * The node's figure is its slowest GPU's (its slowest link's): training
 * runs at the pace of the slowest. f > 1 (the test knob) does every timed
 * piece of work f times. Every CUDA and cuBLAS error is a failure with a
 * message in why, never an exit: the caller prints it and the benchmark
 * fails cleanly. */
#include "worker.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace
{

const int GEMM_N = 4096;
const size_t COPY_BYTES = (size_t)256 << 20;
const size_t PEER_BYTES = (size_t)64 << 20;
const int SAMPLES = 64;
/* FP32 sums of 4096 products against a double reference, relative to
 * the sum of the products' magnitudes: ~1e-6 when right; an operand or a
 * lane gone wrong is off by far more. TF32 would be ~5e-4. */
const double GEMM_TOL = 1e-3;

struct bench_ctx {
    char *why;
    size_t cap;
};

int fail_cuda(bench_ctx *b, int dev, const char *what, cudaError_t e)
{
    snprintf(b->why, b->cap, "GPU %d: %s: %s", dev, what, cudaGetErrorString(e));
    return -1;
}

int fail_blas(bench_ctx *b, int dev, const char *what, cublasStatus_t s)
{
    snprintf(b->why, b->cap, "GPU %d: %s: cuBLAS status %d", dev, what, (int)s);
    return -1;
}

/* One failure path for CUDA and cuBLAS calls: the message, then out. */
#define TRY(what, x, ok, fail)                                                                                         \
    do {                                                                                                               \
        auto s_ = (x);                                                                                                 \
        if (s_ != (ok)) {                                                                                              \
            rc = fail(b, dev, what, s_);                                                                               \
            goto out;                                                                                                  \
        }                                                                                                              \
    } while (0)
#define TRYC(what, x) TRY(what, x, cudaSuccess, fail_cuda)
#define TRYB(what, x) TRY(what, x, CUBLAS_STATUS_SUCCESS, fail_blas)

/* Operand entries: small exact values, different in A and B. */
float val_a(size_t i)
{
    return (float)((int)(i * 7 % 13) - 6) * 0.125f;
}
float val_b(size_t i)
{
    return (float)((int)(i * 5 % 11) - 5) * 0.25f;
}

/* A stream of the current GPU and two events to time work on it. */
struct timing {
    cudaStream_t s;
    cudaEvent_t e0, e1;
};

cudaError_t timing_open(timing *tm)
{
    cudaError_t e = cudaStreamCreateWithFlags(&tm->s, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreate(&tm->e0);
    if (e == cudaSuccess)
        e = cudaEventCreate(&tm->e1);
    return e;
}

void timing_close(timing *tm)
{
    if (tm->e0)
        cudaEventDestroy(tm->e0);
    if (tm->e1)
        cudaEventDestroy(tm->e1);
    if (tm->s)
        cudaStreamDestroy(tm->s);
}

/* The best time of `work` (seconds, CUDA events on tm's stream) over at
 * least 3 repetitions and about budget seconds; -1 on a CUDA error. */
template <typename W> double best_time(const timing *tm, double budget, W work)
{
    cudaStream_t s = tm->s;
    cudaEvent_t e0 = tm->e0, e1 = tm->e1;
    double best = 1e30, spent = 0;
    for (int rep = 0; rep < 3 || (spent < budget && rep < 1000); rep++) {
        float ms = 0;
        if (cudaEventRecord(e0, s) != cudaSuccess || !work() || cudaEventRecord(e1, s) != cudaSuccess ||
            cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
            return -1;
        double t = ms * 1e-3;
        spent += t;
        if (t < best)
            best = t;
    }
    return best;
}

/* One GPU's compute and memory figures. */
int bench_gpu(bench_ctx *b, int dev, double seconds, int f, double *gflops, double *gbps, double *maxrel)
{
    int rc = -1;
    const size_t nn = (size_t)GEMM_N * GEMM_N;
    float *ha = NULL, *hb = NULL, *hc = NULL, *da = NULL, *db = NULL, *dc = NULL;
    void *s0 = NULL, *s1 = NULL;
    timing tm = {};
    cublasHandle_t h = NULL;
    const float one = 1.0f, zero = 0.0f;
    double t = 0, worst = 0;
    TRYC("cudaSetDevice", cudaSetDevice(dev));
    TRYC("a stream and its events", timing_open(&tm));
    TRYB("cublasCreate", cublasCreate(&h));
    TRYB("cublasSetStream", cublasSetStream(h, tm.s));
    TRYB("cublasSetMathMode", cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    ha = (float *)malloc(nn * sizeof *ha);
    hb = (float *)malloc(nn * sizeof *hb);
    hc = (float *)malloc(nn * sizeof *hc);
    if (!ha || !hb || !hc) {
        snprintf(b->why, b->cap, "GPU %d: out of host memory", dev);
        goto out;
    }
    for (size_t i = 0; i < nn; i++) {
        ha[i] = val_a(i);
        hb[i] = val_b(i);
    }
    TRYC("cudaMalloc", cudaMalloc((void **)&da, nn * sizeof *da));
    TRYC("cudaMalloc", cudaMalloc((void **)&db, nn * sizeof *db));
    TRYC("cudaMalloc", cudaMalloc((void **)&dc, nn * sizeof *dc));
    TRYC("cudaMemcpy", cudaMemcpy(da, ha, nn * sizeof *ha, cudaMemcpyHostToDevice));
    TRYC("cudaMemcpy", cudaMemcpy(db, hb, nn * sizeof *hb, cudaMemcpyHostToDevice));
    /* warm-up (cuBLAS picks its kernel), then timed */
    TRYB("cublasSgemm", cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, da, GEMM_N, db, GEMM_N,
                                    &zero, dc, GEMM_N));
    t = best_time(&tm, seconds, [&]() {
        for (int k = 0; k < f; k++)
            if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, da, GEMM_N, db, GEMM_N, &zero,
                            dc, GEMM_N) != CUBLAS_STATUS_SUCCESS)
                return false;
        return true;
    });
    if (t <= 0) {
        snprintf(b->why, b->cap, "GPU %d: the timed SGEMM failed: %s", dev, cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    *gflops = 2.0 * GEMM_N * GEMM_N * (double)GEMM_N / t / 1e9; /* f > 1: f times the work, as slow */
    /* the result, against the CPU at sampled entries (column-major:
     * C(i,j) = sum_k A(i,k) B(k,j), A(i,k) at i + k*n) */
    TRYC("cudaMemcpy", cudaMemcpy(hc, dc, nn * sizeof *hc, cudaMemcpyDeviceToHost));
    for (int q = 0; q < SAMPLES; q++) {
        size_t i = (size_t)(q * 2654435761u % GEMM_N), j = (size_t)((q * 40503u + 17) % GEMM_N);
        double ref = 0, mag = 0;
        for (size_t k = 0; k < (size_t)GEMM_N; k++) {
            double p = (double)ha[i + k * GEMM_N] * hb[k + j * GEMM_N];
            ref += p;
            mag += fabs(p);
        }
        double d = fabs(hc[i + j * GEMM_N] - ref) / (mag > 0 ? mag : 1);
        if (!(d <= worst)) /* NaN too */
            worst = d != d ? INFINITY : d;
    }
    *maxrel = worst;
    if (!(worst <= GEMM_TOL)) {
        snprintf(b->why, b->cap,
                 "GPU %d: its SGEMM disagrees with the CPU reference (max relative error %.3g at %d sampled entries, "
                 "tolerance %g): a GPU that computes wrong",
                 dev, worst, SAMPLES, GEMM_TOL);
        goto out;
    }
    TRYC("cudaMalloc", cudaMalloc(&s0, COPY_BYTES));
    TRYC("cudaMalloc", cudaMalloc(&s1, COPY_BYTES));
    TRYC("cudaMemset", cudaMemset(s0, 1, COPY_BYTES));
    t = best_time(&tm, seconds, [&]() {
        for (int k = 0; k < f; k++)
            if (cudaMemcpyAsync(s1, s0, COPY_BYTES, cudaMemcpyDeviceToDevice, tm.s) != cudaSuccess)
                return false;
        return true;
    });
    if (t <= 0) {
        snprintf(b->why, b->cap, "GPU %d: the timed copy failed: %s", dev, cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    *gbps = COPY_BYTES / t / 1e9;
    rc = 0;
out:
    if (h)
        cublasDestroy(h);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(s0);
    cudaFree(s1);
    timing_close(&tm);
    free(ha);
    free(hb);
    free(hc);
    return rc;
}

/* Peer access from dev to peer, whether it was on already or not. */
cudaError_t peer_on(int dev, int peer)
{
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError(); /* not an error here: clear it */
        e = cudaSuccess;
    }
    return e;
}

/* One way, dev -> peer: GB/s of the best repetition. */
int bench_link(bench_ctx *b, int dev, int peer, double seconds, int f, double *gbps)
{
    int rc = -1;
    void *src = NULL, *dst = NULL;
    timing tm = {};
    double t = 0;
    TRYC("cudaDeviceEnablePeerAccess", peer_on(peer, dev));
    TRYC("cudaMalloc (peer)", cudaMalloc(&dst, PEER_BYTES));
    TRYC("cudaDeviceEnablePeerAccess", peer_on(dev, peer));
    TRYC("cudaMalloc", cudaMalloc(&src, PEER_BYTES));
    TRYC("cudaMemset", cudaMemset(src, 3, PEER_BYTES));
    TRYC("a stream and its events", timing_open(&tm));
    TRYC("cudaMemcpyPeerAsync", cudaMemcpyPeerAsync(dst, peer, src, dev, PEER_BYTES, tm.s)); /* warm-up */
    t = best_time(&tm, seconds, [&]() {
        for (int k = 0; k < f; k++)
            if (cudaMemcpyPeerAsync(dst, peer, src, dev, PEER_BYTES, tm.s) != cudaSuccess)
                return false;
        return true;
    });
    if (t <= 0) {
        snprintf(b->why, b->cap, "GPU %d -> GPU %d: the timed peer copy failed: %s", dev, peer,
                 cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    *gbps = PEER_BYTES / t / 1e9;
    rc = 0;
out:
    cudaFree(src);
    cudaFree(dst);
    timing_close(&tm);
    return rc;
}

} // namespace

/* The pairs of the fastest class: both ways peer-capable, with the lowest
 * (best) performance rank among all such pairs. */
extern "C" int p3dw_cuda_bench_node(double seconds, int f, p3dw_gpu_figs *out, char *why, size_t cap)
{
    bench_ctx bc = {why, cap}, *b = &bc;
    int n = 0;
    memset(out, 0, sizeof *out);
    out->p2p_gbps = -1;
    out->p2p_a = out->p2p_b = -1;
    if (f < 1)
        f = 1;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0)
        return fail_cuda(b, 0, "cudaGetDeviceCount", e != cudaSuccess ? e : cudaErrorNoDevice);
    out->ngpus = n;
    for (int dev = 0; dev < n; dev++) {
        double g = 0, m = 0, r = 0;
        if (bench_gpu(b, dev, seconds, f, &g, &m, &r) < 0)
            return -1;
        if (dev == 0 || g < out->gflops) {
            out->gflops = g;
            out->gflops_gpu = dev;
        }
        if (dev == 0 || m < out->mem_gbps) {
            out->mem_gbps = m;
            out->mem_gpu = dev;
        }
        if (r > out->gemm_maxrel)
            out->gemm_maxrel = r;
    }
    int best_rank = -1;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                int ok_ij = 0, ok_ji = 0, pr = 0;
                if (i == j || cudaDeviceCanAccessPeer(&ok_ij, i, j) != cudaSuccess ||
                    cudaDeviceCanAccessPeer(&ok_ji, j, i) != cudaSuccess || !ok_ij || !ok_ji ||
                    cudaDeviceGetP2PAttribute(&pr, cudaDevP2PAttrPerformanceRank, i, j) != cudaSuccess)
                    continue;
                if (pass == 0) { /* the best class there is */
                    if (best_rank < 0 || pr < best_rank)
                        best_rank = pr;
                    continue;
                }
                if (pr != best_rank)
                    continue;
                double g = 0;
                if (bench_link(b, i, j, seconds / 8, f, &g) < 0)
                    return -1;
                out->npairs++;
                if (out->p2p_gbps < 0 || g < out->p2p_gbps) {
                    out->p2p_gbps = g;
                    out->p2p_a = i;
                    out->p2p_b = j;
                }
            }
        cudaGetLastError(); /* a refused query is not an error of ours */
    }
    return 0;
}
