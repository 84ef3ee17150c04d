/* SPDX-License-Identifier: BSD-3-Clause */
/* report.c - what the worker reports at the end: by default rank 0 prints
 * one human table (a row per rank, then the job's figures); with --json
 * every rank prints its JSON line and rank 0 a JSON summary; under
 * par3drun --log-dir (P3D_LOG_DIR) the same JSON goes to
 * DIR/worker-rank-N.json and DIR/worker-summary.json (fields in
 * docs/worker.md).  Bandwidths are in
 * GB/s (1e9 bytes/s); bus bandwidth of an all-reduce over n ranks counts
 * 2(n-1)/n of the buffer, as nccl-tests do; the EP all-to-all's bandwidth
 * is the bytes a rank sends to the other members over the time it spends
 * in all-to-alls. */
#include "worker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double p3dw_analytic_bubble(int pp, int m)
{
    return (double)(pp - 1) / (double)(m + pp - 1);
}

static double rate(double bytes, double t)
{
    return t > 0 ? bytes / t / 1e9 : 0.0;
}

static double bubble(const p3dw_stats *s)
{
    return s->step_time > 0 ? s->pp_recv_time / s->step_time : 0.0;
}

static void rank_json(FILE *f, const p3dw_env *e, const char *backend, int m, const p3dw_rank_record *rec)
{
    const p3dw_stats *s = &rec->st;
    fprintf(f,
            "{\"rank\":%d,\"node_rank\":%d,\"tp\":%d,\"pp\":%d,\"dp\":%d,\"ep\":%d,\"etp\":%d,"
            "\"edp\":%d,\"node\":\"%s\",\"backend\":\"%s\",\"steps\":%.0f,\"step_time_s\":%.6g,"
            "\"tp_allreduce\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"busbw_gbps\":%.6g},"
            "\"pp_send\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"bw_gbps\":%.6g},"
            "\"pp_recv\":{\"ops\":%.0f,\"bytes\":%.0f,\"wait_s\":%.6g},"
            "\"dp_allreduce\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"busbw_gbps\":%.6g},"
            "\"ep_alltoall\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"bw_gbps\":%.6g},"
            "\"edp_allreduce\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"busbw_gbps\":%.6g},"
            "\"bubble_measured\":%.6g,\"bubble_analytic\":%.6g}\n",
            e->rank, e->node_rank, e->coord[0], e->coord[1], e->coord[2], e->coord[P3DW_EP], e->coord[P3DW_ETP],
            e->coord[P3DW_EDP], e->node, backend, s->steps, s->steps > 0 ? s->step_time / s->steps : 0.0, s->tp_ops,
            s->tp_bytes, s->tp_time, rate(s->tp_bus_bytes, s->tp_time), s->pp_send_ops, s->pp_send_bytes,
            s->pp_send_time, rate(s->pp_send_bytes, s->pp_send_time + s->pp_recv_time), s->pp_recv_ops,
            s->pp_recv_bytes, s->pp_recv_time, s->dp_ops, s->dp_bytes, s->dp_time, rate(s->dp_bus_bytes, s->dp_time),
            s->ep_ops, s->ep_bytes, s->ep_time, rate(s->ep_bytes, s->ep_time), s->edp_ops, s->edp_bytes, s->edp_time,
            rate(s->edp_bus_bytes, s->edp_time), bubble(s), p3dw_analytic_bubble(e->size[1], m));
}

/* DIR/NAME under P3D_LOG_DIR, opened for writing; NULL when unset or on an
 * error (printed: the run itself is fine). */
static FILE *log_file(const char *name, int rank)
{
    const char *dir = getenv("P3D_LOG_DIR");
    char path[4096];
    if (!dir || !*dir)
        return NULL;
    if (rank >= 0)
        snprintf(path, sizeof path, "%s/worker-rank-%d.json", dir, rank);
    else
        snprintf(path, sizeof path, "%s/%s", dir, name);
    /* par3drun checked the directory (owner, sticky when others may write
     * it); the file itself: never through a symlink, a FIFO or a second
     * hard link of another file, and emptied only once that is known */
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0) {
        perror(path);
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1 ||
        ftruncate(fd, 0) < 0 || fcntl(fd, F_SETFL, 0) < 0) {
        fprintf(stderr, "%s: not a regular file of ours with one link; not written\n", path);
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        perror(path);
        close(fd);
    }
    return f;
}

void p3dw_report_rank(const p3dw_env *e, const char *backend, int m, const p3dw_rank_record *rec, int json)
{
    if (json) {
        rank_json(stdout, e, backend, m, rec);
        fflush(stdout);
    }
    FILE *f = log_file(NULL, e->rank);
    if (f) {
        rank_json(f, e, backend, m, rec);
        fclose(f);
    }
}

/* A bandwidth cell: "-" for a group of one (nothing crosses a link), else
 * in the largest unit that keeps it at 1 or more (a CPU run's small
 * buffers move kB/s, a GPU's tens of GB/s; the JSON has GB/s always). */
static const char *bw_cell(char *buf, size_t cap, int group, double bytes, double t)
{
    double r = rate(bytes, t);
    if (group <= 1)
        return "-";
    if (t <= 0 || bytes <= 0)
        snprintf(buf, cap, "no traffic");
    else if (r >= 1)
        snprintf(buf, cap, "%.2f GB/s", r);
    else if (r >= 1e-3)
        snprintf(buf, cap, "%.1f MB/s", 1e3 * r);
    else
        snprintf(buf, cap, "%.1f kB/s", 1e6 * r);
    return buf;
}

/* The job's pace: the slowest rank's mean step (every rank waits for it). */
static double slowest_step(const p3dw_rank_record *all, int n)
{
    double step_max = 0;
    for (int r = 0; r < n; r++) {
        const p3dw_stats *s = &all[r].st;
        double st = s->steps > 0 ? s->step_time / s->steps : 0;
        if (st > step_max)
            step_max = st;
    }
    return step_max;
}

/* The default end of a run: one row per rank and the job's figures. */
static void table(const p3dw_env *e, const char *backend, const p3dw_opts *o, const p3dw_rank_record *all, int n,
                  const char *verify, double max_rel, double drop)
{
    printf("\np3d-worker: %s backend, tp %d x pp %d x dp %d, %d micro-batch%s, %d step%s\n", backend, e->size[0],
           e->size[1], e->size[2], o->micro_batches, o->micro_batches == 1 ? "" : "es", o->steps,
           o->steps == 1 ? "" : "s");
    int moe = o->experts > 0;
    if (moe)
        printf("MoE: %d experts, top-%d; ep %d x etp %d x edp %d\n", o->experts, o->top_k, e->size[P3DW_EP],
               e->size[P3DW_ETP], e->size[P3DW_EDP]);
    int nw = 4;
    for (int r = 0; r < n; r++) {
        int l = (int)strnlen(all[r].node, sizeof all[r].node);
        if (l > nw)
            nw = l;
    }
    printf("%5s  %-*s %3s %3s %3s %10s %13s %13s %13s %7s", "rank", nw, "node", "tp", "pp", "dp", "step_ms", "tp_busbw",
           "pp_bw", "dp_busbw", "bubble");
    if (moe)
        printf(" %3s %13s %13s", "ep", "ep_a2a_bw", "edp_busbw");
    printf("\n");
    for (int r = 0; r < n; r++) {
        const p3dw_stats *s = &all[r].st;
        char b[5][32];
        printf("%5.0f  %-*.*s %3.0f %3.0f %3.0f %10.3f %13s %13s %13s %7.3f", all[r].rank, nw, (int)sizeof all[r].node,
               all[r].node, all[r].coord[0], all[r].coord[1], all[r].coord[2],
               s->steps > 0 ? 1e3 * s->step_time / s->steps : 0.0,
               bw_cell(b[0], sizeof b[0], e->size[P3DW_TP], s->tp_bus_bytes, s->tp_time),
               bw_cell(b[1], sizeof b[1], e->size[P3DW_PP], s->pp_send_bytes, s->pp_send_time + s->pp_recv_time),
               bw_cell(b[2], sizeof b[2], e->size[P3DW_DP], s->dp_bus_bytes, s->dp_time), bubble(s));
        if (moe)
            printf(" %3.0f %13s %13s", all[r].coord[P3DW_EP],
                   bw_cell(b[3], sizeof b[3], e->size[P3DW_EP], s->ep_bytes, s->ep_time),
                   bw_cell(b[4], sizeof b[4], e->size[P3DW_EDP], s->edp_bus_bytes, s->edp_time));
        printf("\n");
    }
    double step = slowest_step(all, n);
    if (step > 0)
        printf("throughput: %.1f samples/s, %.1f tokens/s (global batch %d of %d token%s each, "
               "slowest rank's step %.3f ms)\n",
               o->global_batch / step, (double)p3dw_rows(o) / step, o->global_batch, o->seq_len,
               o->seq_len == 1 ? "" : "s", 1e3 * step);
    printf("bubble analytic (p-1)/(m+p-1) = %.3f; verify: %s", p3dw_analytic_bubble(e->size[1], o->micro_batches),
           verify);
    if (strcmp(verify, "off"))
        printf(" (max rel diff %.3g, reference loss fell %.1f%%)", max_rel, 100 * drop);
    printf("\n");
}

void p3dw_report_summary(const p3dw_env *e, const char *backend, const p3dw_opts *o, const p3dw_rank_record *all, int n,
                         const char *verify, double max_rel, double drop)
{
    double step_max = slowest_step(all, n), bub = 0, bub_max = 0;
    p3dw_stats sum = {0};
    for (int r = 0; r < n; r++) {
        const p3dw_stats *s = &all[r].st;
        double b = bubble(s);
        bub += b / n;
        if (b > bub_max)
            bub_max = b;
        sum.tp_bus_bytes += s->tp_bus_bytes;
        sum.tp_time += s->tp_time;
        sum.pp_send_bytes += s->pp_send_bytes;
        sum.pp_send_time += s->pp_send_time + s->pp_recv_time;
        sum.dp_bus_bytes += s->dp_bus_bytes;
        sum.dp_time += s->dp_time;
        sum.ep_bytes += s->ep_bytes;
        sum.ep_time += s->ep_time;
        sum.edp_bus_bytes += s->edp_bus_bytes;
        sum.edp_time += s->edp_time;
    }
    FILE *outs[2] = {o->json ? stdout : NULL, log_file("worker-summary.json", -1)};
    for (int i = 0; i < 2; i++) {
        FILE *f = outs[i];
        if (!f)
            continue;
        fprintf(
            f,
            "{\"summary\":true,\"backend\":\"%s\",\"world_size\":%d,"
            "\"mesh\":{\"tp\":%d,\"pp\":%d,\"dp\":%d,\"ep\":%d,\"etp\":%d,\"edp\":%d},"
            "\"layers\":%d,\"hidden\":%d,\"experts\":%d,\"top_k\":%d,"
            "\"global_batch\":%d,\"seq_len\":%d,\"micro_batches\":%d,\"steps\":%d,"
            "\"step_time_s\":%.6g,\"samples_per_s\":%.6g,\"tokens_per_s\":%.6g,\"tp_busbw_gbps\":%.6g,\"pp_bw_gbps\":%.6g,"
            "\"dp_busbw_gbps\":%.6g,\"ep_a2a_bw_gbps\":%.6g,\"edp_busbw_gbps\":%.6g,"
            "\"bubble_measured\":%.6g,\"bubble_measured_max\":%.6g,"
            "\"bubble_analytic\":%.6g,\"verify\":\"%s\",\"max_rel_diff\":%.3g,\"loss_drop\":%.4g}\n",
            backend, e->world, e->size[0], e->size[1], e->size[2], e->size[P3DW_EP], e->size[P3DW_ETP],
            e->size[P3DW_EDP], o->layers, o->hidden, o->experts, o->experts ? o->top_k : 0, o->global_batch, o->seq_len,
            o->micro_batches, o->steps, step_max, step_max > 0 ? o->global_batch / step_max : 0.0,
            step_max > 0 ? (double)p3dw_rows(o) / step_max : 0.0, rate(sum.tp_bus_bytes, sum.tp_time),
            rate(sum.pp_send_bytes, sum.pp_send_time), rate(sum.dp_bus_bytes, sum.dp_time),
            rate(sum.ep_bytes, sum.ep_time), rate(sum.edp_bus_bytes, sum.edp_time), bub, bub_max,
            p3dw_analytic_bubble(e->size[1], o->micro_batches), verify, max_rel, drop);
        if (f != stdout)
            fclose(f);
    }
    if (!o->json)
        table(e, backend, o, all, n, verify, max_rel, drop);
    fflush(stdout);
}
