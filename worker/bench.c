/* SPDX-License-Identifier: BSD-3-Clause */
/* bench.c - --bench-memcpy (the machine's copy bandwidth: the ceiling a
 * loopback all-reduce cannot beat) and --bench-allreduce (ring all-reduce
 * of the CPU backend over the whole world, sizes doubling from
 * --bench-min to --bench-max bytes).  Figures only, except that every
 * size's first all-reduce is checked against the exact sum (exit 1 with a
 * message if wrong).  Output: one JSON line per size from rank 0
 * (docs/worker.md). */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int p3dw_bench_memcpy(const p3dw_opts *o)
{
    size_t n = o->bench_max;
    char *a = malloc(n), *b = malloc(n);
    int rc = -1;
    if (!a || !b) {
        fprintf(stderr, "p3d-worker: out of memory for two %zu-byte buffers\n", n);
        goto out;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 1e30;
    for (int i = 0; i < o->bench_iters + 1; i++) {
        double t0 = now_s();
        memcpy(i & 1 ? a : b, i & 1 ? b : a, n);
        double t = now_s() - t0;
        if (i > 0 && t < best)
            best = t; /* the first copy faults the pages in */
    }
    /* A copy reads and writes every byte; report bytes copied per second. */
    printf("{\"bench\":\"memcpy\",\"bytes\":%zu,\"time_s\":%.6g,\"gbps\":%.4g}\n", n, best, n / best / 1e9);
    rc = 0;
out:
    free(a);
    free(b);
    return rc;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Each repetition starts after a barrier and lasts as long as its slowest
 * rank; the best repetition is reported (the machine may be shared: the
 * best is what the code can do, the others measure the neighbours).  CPU
 * time (user + system, all ranks) per operation is reported too: unlike
 * wall time it hardly depends on how busy the machine is. */
int p3dw_bench_allreduce(const p3dw_opts *o, tcp_world *w)
{
    int rc = -1, n = tcp_world_size(w), me = tcp_world_rank(w);
    tcp_comm c = {0};
    float *buf = NULL;
    double *all = malloc(sizeof(double) * (size_t)n);
    if (!all || tcp_comm_split(w, 0, me, &c) || tcp_world_connect(w))
        goto out;
    tcp_set_activity(w, "benchmark all-reduce");
    buf = malloc(o->bench_max);
    if (!buf) {
        fprintf(stderr, "p3d-worker: out of memory for a %zu-byte buffer\n", o->bench_max);
        goto out;
    }
    /* Checked values: small integers, so every sum is exact in fp32 and
     * the expected result of element i is want[i % 16]. */
    float want[16];
    for (int k = 0; k < 16; k++) {
        want[k] = 0;
        for (int r = 0; r < n; r++)
            want[k] += (float)((k + r) % 16);
    }
    for (size_t bytes = o->bench_min; bytes <= o->bench_max; bytes *= 2) {
        size_t count = bytes / sizeof *buf;
        /* Fewer repetitions for big buffers keeps the whole sweep short. */
        int iters = bytes >= (16u << 20) ? 2 : bytes >= (1u << 20) ? 3 : o->bench_iters;
        /* Warm-up (page faults, socket buffers), checked: a benchmark of a
         * wrong all-reduce would be worthless. */
        for (size_t i = 0; i < count; i++)
            buf[i] = (float)((i + (size_t)me) % 16);
        if (tcp_allreduce(&c, buf, count, TCP_F32))
            goto out;
        for (size_t i = 0; i < count; i++)
            if (buf[i] != want[i % 16]) {
                fprintf(stderr,
                        "p3d-worker: rank %d: all-reduce of %zu bytes over %d ranks "
                        "gave %g at element %zu, expected %g\n",
                        me, bytes, n, buf[i], i, want[i % 16]);
                goto out;
            }
        double best = 1e30, cpu = 0;
        for (int i = 0; i < iters; i++) {
            if (tcp_world_barrier(w))
                goto out;
            double t0 = now_s(), c0 = cpu_s();
            if (tcp_allreduce(&c, buf, count, TCP_F32))
                goto out;
            double t = now_s() - t0, tmax = 0;
            cpu += cpu_s() - c0;
            if (tcp_world_allgather(w, &t, all, sizeof t))
                goto out;
            for (int r = 0; r < n; r++)
                tmax = all[r] > tmax ? all[r] : tmax;
            best = tmax < best ? tmax : best;
        }
        double cpu_all = 0;
        if (tcp_world_allgather(w, &cpu, all, sizeof cpu))
            goto out;
        for (int r = 0; r < n; r++)
            cpu_all += all[r];
        size_t b = count * sizeof *buf;
        if (me == 0)
            printf("{\"bench\":\"allreduce\",\"ranks\":%d,\"bytes\":%zu,\"iters\":%d,"
                   "\"time_s\":%.6g,\"algbw_gbps\":%.4g,\"busbw_gbps\":%.4g,"
                   "\"cpu_s\":%.6g}\n",
                   n, b, iters, best, b / best / 1e9, 2.0 * (n - 1) / n * b / best / 1e9, cpu_all / iters);
        fflush(stdout);
    }
    rc = 0;
out:
    free(all);
    free(buf);
    tcp_comm_free(&c);
    return rc;
}
