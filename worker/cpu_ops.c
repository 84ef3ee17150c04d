/* SPDX-License-Identifier: BSD-3-Clause */
/* cpu_ops.c - the fp32 C backend: buffers in host memory, GEMMs with
 * double accumulators (so the result hardly depends on how the work is
 * split, which keeps --verify's 1e-5 meaningful), collectives over
 * tcp_comm. */
#include "worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *cpu_alloc(size_t n)
{
    void *p = calloc(n ? n : 1, sizeof(float));
    if (!p)
        fprintf(stderr, "p3d-worker: out of memory allocating %zu floats\n", n);
    return p;
}

static void cpu_release(void *p)
{
    free(p);
}
static void cpu_upload(void *dst, const float *src, size_t n)
{
    memcpy(dst, src, n * sizeof *src);
}
static void cpu_download(float *dst, const void *src, size_t n)
{
    memcpy(dst, src, n * sizeof *dst);
}
static void cpu_zero(void *dst, size_t n)
{
    memset(dst, 0, n * sizeof(float));
}
static void cpu_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n * sizeof(float));
}

/* C = op(A)·op(B) + beta·C, row-major.  Loop orders keep the inner loop on
 * contiguous memory for the three shapes train.c uses. */
static void cpu_gemm(int ta, int tb, int M, int N, int K, const void *Av, const void *Bv, void *Cv, float beta)
{
    const float *A = Av, *B = Bv;
    float *C = Cv;
    double *acc = malloc((size_t)N * sizeof *acc);
    if (!acc) {
        fprintf(stderr, "p3d-worker: out of memory in gemm\n");
        exit(1);
    }
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * N;
        if (!tb) {
            for (int j = 0; j < N; j++)
                acc[j] = beta != 0.0f ? (double)beta * c[j] : 0.0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k];
                const float *b = B + (size_t)k * N;
                for (int j = 0; j < N; j++)
                    acc[j] += a * b[j];
            }
        } else {
            for (int j = 0; j < N; j++) {
                double s = beta != 0.0f ? (double)beta * c[j] : 0.0;
                const float *b = B + (size_t)j * K;
                if (!ta) {
                    const float *a = A + (size_t)i * K;
                    for (int k = 0; k < K; k++)
                        s += (double)a[k] * b[k];
                } else {
                    for (int k = 0; k < K; k++)
                        s += (double)A[(size_t)k * M + i] * b[k];
                }
                acc[j] = s;
            }
        }
        for (int j = 0; j < N; j++)
            c[j] = (float)acc[j];
    }
    free(acc);
}

/* GeLU, tanh approximation (as Megatron's fused kernel); the CUDA backend
 * uses the same formula. */
#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
static void cpu_gelu_fwd(const void *Zv, void *Gv, size_t n)
{
    const float *Z = Zv;
    float *G = Gv;
    for (size_t i = 0; i < n; i++) {
        double x = Z[i];
        G[i] = (float)(0.5 * x * (1.0 + tanh(GELU_C * (x + 0.044715 * x * x * x))));
    }
}

static void cpu_gelu_bwd(const void *Zv, const void *dGv, void *dZv, size_t n)
{
    const float *Z = Zv, *dG = dGv;
    float *dZ = dZv;
    for (size_t i = 0; i < n; i++) {
        double x = Z[i], t = tanh(GELU_C * (x + 0.044715 * x * x * x));
        double d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x);
        dZ[i] = (float)(dG[i] * d);
    }
}

static double cpu_mse(const void *Yv, const void *Tv, void *dYv, size_t n, float scale)
{
    const float *Y = Yv, *T = Tv;
    float *dY = dYv;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)Y[i] - T[i];
        s += d * d;
        dY[i] = (float)(scale * d);
    }
    return s;
}

static void cpu_sgd(void *Wv, const void *Gv, size_t n, float lr)
{
    float *W = Wv;
    const float *G = Gv;
    for (size_t i = 0; i < n; i++)
        W[i] -= lr * G[i];
}

static void cpu_axpy(void *Yv, const void *Xv, size_t n, float a)
{
    float *Y = Yv;
    const float *X = Xv;
    for (size_t i = 0; i < n; i++)
        Y[i] += a * X[i];
}

static void activity(p3dw_group *g, const char *what)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s %s", g->name ? g->name : "", what);
    tcp_set_activity(((tcp_comm *)g->impl)->w, buf);
}

static int cpu_allreduce(p3dw_group *g, void *buf, size_t n)
{
    tcp_comm *c = g->impl;
    activity(g, "all-reduce");
    return tcp_allreduce(c, buf, n, TCP_F32);
}

static int cpu_allreduce_f64(p3dw_group *g, double *buf, size_t n)
{
    tcp_comm *c = g->impl;
    activity(g, "loss all-reduce");
    return tcp_allreduce(c, buf, n, TCP_F64);
}

static int cpu_sendrecv(p3dw_group *g, int sto, const void *sbuf, size_t sn, int rfrom, void *rbuf, size_t rn)
{
    tcp_comm *c = g->impl;
    activity(g, sto >= 0 && rfrom >= 0 ? "send+receive" : sto >= 0 ? "send" : "receive");
    return tcp_sendrecv(c, sto, sbuf, sn * sizeof(float), rfrom, rbuf, rn * sizeof(float));
}

static int cpu_alltoallv(p3dw_group *g, const void *sbuf, const size_t *sbytes, void *rbuf, const size_t *rbytes)
{
    activity(g, "all-to-all");
    return tcp_alltoallv(g->impl, sbuf, sbytes, rbuf, rbytes);
}

static void cpu_sync(void)
{
}

const p3d_ops p3dw_cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_download,
    .zero = cpu_zero,
    .copy = cpu_copy,
    .gemm = cpu_gemm,
    .gelu_fwd = cpu_gelu_fwd,
    .gelu_bwd = cpu_gelu_bwd,
    .mse = cpu_mse,
    .sgd = cpu_sgd,
    .axpy = cpu_axpy,
    .allreduce = cpu_allreduce,
    .allreduce_host_f64 = cpu_allreduce_f64,
    .sendrecv = cpu_sendrecv,
    .alltoallv = cpu_alltoallv,
    .sync = cpu_sync,
};
