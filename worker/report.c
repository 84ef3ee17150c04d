/* report.c - what the worker prints at the end: one JSON line per rank and
 * a summary from rank 0 (fields in docs/worker.md).  Bandwidths are in
 * GB/s (1e9 bytes/s); bus bandwidth of an all-reduce over n ranks counts
 * 2(n-1)/n of the buffer, as nccl-tests do. */
#include "worker.h"

#include <stdio.h>

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

void p3dw_report_rank(const p3dw_env *e, const char *backend, int m, const p3dw_rank_record *rec)
{
    const p3dw_stats *s = &rec->st;
    printf("{\"rank\":%d,\"node_rank\":%d,\"tp\":%d,\"pp\":%d,\"dp\":%d,\"backend\":\"%s\","
           "\"steps\":%.0f,\"step_time_s\":%.6g,"
           "\"tp_allreduce\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"busbw_gbps\":%.6g},"
           "\"pp_send\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"bw_gbps\":%.6g},"
           "\"pp_recv\":{\"ops\":%.0f,\"bytes\":%.0f,\"wait_s\":%.6g},"
           "\"dp_allreduce\":{\"ops\":%.0f,\"bytes\":%.0f,\"time_s\":%.6g,\"busbw_gbps\":%.6g},"
           "\"bubble_measured\":%.6g,\"bubble_analytic\":%.6g}\n",
           e->rank, e->node_rank, e->coord[0], e->coord[1], e->coord[2], backend, s->steps,
           s->steps > 0 ? s->step_time / s->steps : 0.0, s->tp_ops, s->tp_bytes, s->tp_time,
           rate(s->tp_bus_bytes, s->tp_time), s->pp_send_ops, s->pp_send_bytes, s->pp_send_time,
           rate(s->pp_send_bytes, s->pp_send_time), s->pp_recv_ops, s->pp_recv_bytes,
           s->pp_recv_time, s->dp_ops, s->dp_bytes, s->dp_time, rate(s->dp_bus_bytes, s->dp_time),
           bubble(s), p3dw_analytic_bubble(e->size[1], m));
    fflush(stdout);
}

void p3dw_report_summary(const p3dw_env *e, const char *backend, const p3dw_opts *o,
                         const p3dw_rank_record *all, int n, const char *verify, double max_rel)
{
    double step_max = 0, bub = 0, bub_max = 0;
    p3dw_stats sum = {0};
    for (int r = 0; r < n; r++) {
        const p3dw_stats *s = &all[r].st;
        double st = s->steps > 0 ? s->step_time / s->steps : 0;
        if (st > step_max)
            step_max = st;
        double b = bubble(s);
        bub += b / n;
        if (b > bub_max)
            bub_max = b;
        sum.tp_bus_bytes += s->tp_bus_bytes;
        sum.tp_time += s->tp_time;
        sum.pp_send_bytes += s->pp_send_bytes;
        sum.pp_send_time += s->pp_send_time;
        sum.dp_bus_bytes += s->dp_bus_bytes;
        sum.dp_time += s->dp_time;
    }
    printf("{\"summary\":true,\"backend\":\"%s\",\"world_size\":%d,"
           "\"mesh\":{\"tp\":%d,\"pp\":%d,\"dp\":%d},\"layers\":%d,\"hidden\":%d,"
           "\"global_batch\":%d,\"micro_batches\":%d,\"steps\":%d,"
           "\"step_time_s\":%.6g,\"tp_busbw_gbps\":%.6g,\"pp_bw_gbps\":%.6g,"
           "\"dp_busbw_gbps\":%.6g,\"bubble_measured\":%.6g,\"bubble_measured_max\":%.6g,"
           "\"bubble_analytic\":%.6g,\"verify\":\"%s\",\"max_rel_diff\":%.3g}\n",
           backend, e->world, e->size[0], e->size[1], e->size[2], o->layers, o->hidden,
           o->global_batch, o->micro_batches, o->steps, step_max,
           rate(sum.tp_bus_bytes, sum.tp_time), rate(sum.pp_send_bytes, sum.pp_send_time),
           rate(sum.dp_bus_bytes, sum.dp_time), bub, bub_max,
           p3dw_analytic_bubble(e->size[1], o->micro_batches), verify, max_rel);
    fflush(stdout);
}
