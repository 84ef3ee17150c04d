/* bench.c - --bench-memcpy (the machine's copy bandwidth: the ceiling a
 * loopback all-reduce cannot beat) and --bench-allreduce (ring all-reduce
 * of the CPU backend over the whole world, sizes doubling from
 * --bench-min to --bench-max bytes).  Figures only, never pass/fail. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    printf("{\"bench\":\"memcpy\",\"bytes\":%zu,\"time_s\":%.6g,\"gbps\":%.4g}\n", n, best,
           n / best / 1e9);
    rc = 0;
out:
    free(a);
    free(b);
    return rc;
}

int p3dw_bench_allreduce(const p3dw_opts *o, tcp_world *w)
{
    int rc = -1, n = tcp_world_size(w), me = tcp_world_rank(w);
    tcp_comm c = {0};
    float *buf = NULL;
    if (tcp_comm_split(w, 0, me, &c) || tcp_world_connect(w))
        goto out;
    tcp_set_activity(w, "benchmark all-reduce");
    buf = malloc(o->bench_max);
    if (!buf) {
        fprintf(stderr, "p3d-worker: out of memory for a %zu-byte buffer\n", o->bench_max);
        goto out;
    }
    for (size_t i = 0; i < o->bench_max / sizeof *buf; i++)
        buf[i] = 1.0f;
    for (size_t bytes = o->bench_min; bytes <= o->bench_max; bytes *= 2) {
        size_t count = bytes / sizeof *buf;
        /* Fewer repetitions for big buffers keeps the whole sweep short. */
        int iters = bytes >= (8u << 20) ? 2 : o->bench_iters;
        if (tcp_allreduce(&c, buf, count, TCP_F32) || tcp_world_barrier(w))
            goto out;
        double t0 = now_s();
        for (int i = 0; i < iters; i++)
            if (tcp_allreduce(&c, buf, count, TCP_F32))
                goto out;
        double t = (now_s() - t0) / iters, tmax;
        /* The slowest rank defines the collective's time. */
        double *all = malloc(sizeof(double) * (size_t)n);
        if (!all || tcp_world_allgather(w, &t, all, sizeof t)) {
            free(all);
            goto out;
        }
        tmax = 0;
        for (int r = 0; r < n; r++)
            if (all[r] > tmax)
                tmax = all[r];
        free(all);
        if (me == 0)
            printf("{\"bench\":\"allreduce\",\"ranks\":%d,\"bytes\":%zu,\"time_s\":%.6g,"
                   "\"algbw_gbps\":%.4g,\"busbw_gbps\":%.4g}\n", n, count * sizeof *buf, tmax,
                   count * sizeof *buf / tmax / 1e9,
                   2.0 * (n - 1) / n * count * sizeof *buf / tmax / 1e9);
        fflush(stdout);
    }
    rc = 0;
out:
    free(buf);
    tcp_comm_free(&c);
    return rc;
}
