/* SPDX-License-Identifier: BSD-3-Clause */
/* train.c - the model and its 1F1B schedule, written once against
 * struct p3d_ops (so the CPU and CUDA backends run the same algorithm).
 *
 * Model: L residual layers, Y = X + GeLU(X·A)·B, A: h x 4h split by columns over TP,
 * B: 4h x h split by rows; the partial products of B are summed by one TP
 * all-reduce forward and the input gradient by one TP all-reduce backward
 * (Megatron's f/g operators).  Stage s of pp owns a contiguous block of
 * layers.  Loss: mean squared error over the whole global batch against a
 * synthetic target.  Gradients: summed over micro-batches and DP replicas
 * of d(global mean)/dW, which equals Megatron's average over DP of each
 * replica's mean.  Weights and data come from a per-element hash of the
 * seed, so every shard agrees with the unsplit model and the global batch
 * is the same for every mesh.  With --experts, every second layer (global
 * index 1, 3, ...) is a mixture-of-experts layer instead (moe.c).
 */
#include "worker.h"

#include <math.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K_INPUT = 1, K_WEIGHT_A = 16, K_WEIGHT_B = 17 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds spent so far in collectives and pipeline exchanges. */
static double comm_time(const p3dw_stats *st)
{
    return st->tp_time + st->pp_send_time + st->pp_recv_time + st->dp_time + st->ep_time + st->edp_time;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

float p3dw_hash_uniform(uint64_t seed, uint64_t kind, uint64_t a, uint64_t b)
{
    uint64_t h = mix(mix(mix(seed ^ mix(kind)) ^ a) ^ (b * 0x2545f4914f6cdd1dull));
    return (float)((double)(h >> 40) * (2.0 / 16777216.0) - 1.0);
}

int p3dw_check_shape(const p3dw_opts *o, int tp, int pp, int dp, int m)
{
    if ((4L * o->hidden) % tp) {
        fprintf(stderr, "p3d-worker: --hidden %d: 4*hidden must be divisible by tp=%d\n", o->hidden, tp);
        return -1;
    }
    if (o->layers < pp) {
        fprintf(stderr,
                "p3d-worker: --layers %d: need at least one layer per pipeline stage "
                "(pp=%d)\n",
                o->layers, pp);
        return -1;
    }
    if (p3dw_rows(o) > (1L << 24)) {
        fprintf(stderr,
                "p3d-worker: --global-batch %d x --seq-len %d = %ld rows per step: at most "
                "%ld (lower one of them)\n",
                o->global_batch, o->seq_len, p3dw_rows(o), 1L << 24);
        return -1;
    }
    if (o->global_batch % ((long)dp * m)) {
        fprintf(stderr,
                "p3d-worker: --global-batch %d: must be divisible by dp*micro-batches "
                "= %d*%d\n",
                o->global_batch, dp, m);
        return -1;
    }
    return 0;
}

typedef struct state {
    const p3dw_opts *o;
    p3dw_run *r;
    p3dw_stats *st;
    const p3d_ops *ops;
    int h, f, b, m, nl, first, stage, nstage, tp, dp_rank, dp;
    float *w, *g;        /* dense weights, gradients: per layer A then B, or the router */
    float *we, *ge;      /* MoE layers: this rank's expert shards, their gradients */
    size_t *woff, *eoff; /* per local layer: offset in w/g and we/ge */
    int *slot;           /* per local layer: index among this stage's MoE layers, -1 */
    size_t wn, wen;
    p3dw_moe *moe;
    float **act;  /* per micro-batch: X_i, Z_i, G_i per layer, Y */
    float **dout; /* last stage: dLoss/dY per micro-batch */
    float *dy, *dx, *dx2, *dg, *dz, *tgt;
    float *host; /* staging, b*h */
    double loss;
    int step;
} state;

#define LAYER_W(S, i) ((S)->w + (S)->woff[i])
#define LAYER_G(S, i) ((S)->g + (S)->woff[i])
#define LAYER_EW(S, i) ((S)->we + (S)->eoff[i])
#define LAYER_EG(S, i) ((S)->ge + (S)->eoff[i])
#define ACT_X(S, k, i) ((S)->act[k] + (size_t)(i) * ((size_t)(S)->b * ((S)->h + 2 * (S)->f)))
#define ACT_Z(S, k, i) (ACT_X(S, k, i) + (size_t)(S)->b * (S)->h)
#define ACT_G(S, k, i) (ACT_Z(S, k, i) + (size_t)(S)->b * (S)->f)
#define ACT_Y(S, k) ACT_X(S, k, (S)->nl)

int p3dw_tp_allreduce(p3dw_run *r, p3dw_stats *st, float *buf, size_t n)
{
    p3dw_group *g = &r->g[P3DW_TP];
    if (g->size == 1 && !r->solo_comm)
        return 0;
    r->ops->sync();
    double t0 = now_s();
    int rc = r->ops->allreduce(g, buf, n);
    st->tp_time += now_s() - t0;
    st->tp_ops++;
    st->tp_bytes += n * sizeof(float);
    st->tp_bus_bytes += 2.0 * (g->size - 1) / g->size * n * sizeof(float);
    return rc;
}

static int tp_allreduce(state *S, float *buf, size_t n)
{
    return p3dw_tp_allreduce(S->r, S->st, buf, n);
}

/* One pipeline exchange: send sn floats to stage sto and/or receive rn
 * floats from stage rfrom (-1: none), as one grouped operation.  Time in an
 * exchange with a receive is waiting for the neighbour: the bubble. */
static int pp_xchg(state *S, int sto, const float *sbuf, size_t sn, int rfrom, float *rbuf, size_t rn)
{
    if (sto < 0 && rfrom < 0)
        return 0;
    S->ops->sync();
    double t0 = now_s();
    int rc = S->ops->sendrecv(&S->r->g[P3DW_PP], sto, sbuf, sn, rfrom, rbuf, rn);
    double dt = now_s() - t0;
    if (sto >= 0) {
        S->st->pp_send_ops++;
        S->st->pp_send_bytes += sn * sizeof(float);
    }
    if (rfrom >= 0) {
        S->st->pp_recv_ops++;
        S->st->pp_recv_bytes += rn * sizeof(float);
        S->st->pp_recv_time += dt;
    } else {
        S->st->pp_send_time += dt;
    }
    return rc;
}

/* Global sample index of row i of micro-batch k of this replica. */
static uint64_t sample_id(const state *S, int k, int i)
{
    return (uint64_t)S->step * (uint64_t)p3dw_rows(S->o) + (uint64_t)S->dp_rank * S->b * S->m + (uint64_t)k * S->b +
           (uint64_t)i;
}

static void make_data(state *S, int k, uint64_t kind, float scale, float *dst)
{
    for (int i = 0; i < S->b; i++)
        for (int j = 0; j < S->h; j++)
            S->host[(size_t)i * S->h + j] =
                scale * p3dw_hash_uniform(S->o->seed, kind, sample_id(S, k, i), (uint64_t)j);
    S->ops->upload(dst, S->host, (size_t)S->b * S->h);
}

static int forward(state *S, int k)
{
    const p3d_ops *ops = S->ops;
    size_t bh = (size_t)S->b * S->h, bf = (size_t)S->b * S->f;
    if (S->stage == 0)
        make_data(S, k, K_INPUT, 1.0f, ACT_X(S, k, 0));
    for (int i = 0; i < S->nl; i++) {
        if (S->slot[i] >= 0) {
            if (p3dw_moe_forward(S->moe, k, S->slot[i], LAYER_W(S, i), LAYER_EW(S, i), ACT_X(S, k, i),
                                 ACT_X(S, k, i + 1)))
                return -1;
            continue;
        }
        float *A = LAYER_W(S, i), *B = A + (size_t)S->h * S->f;
        ops->gemm(0, 0, S->b, S->f, S->h, ACT_X(S, k, i), A, ACT_Z(S, k, i), 0.0f);
        ops->gelu_fwd(ACT_Z(S, k, i), ACT_G(S, k, i), bf);
        ops->gemm(0, 0, S->b, S->h, S->f, ACT_G(S, k, i), B, ACT_X(S, k, i + 1), 0.0f);
        if (tp_allreduce(S, ACT_X(S, k, i + 1), bh))
            return -1;
        ops->axpy(ACT_X(S, k, i + 1), ACT_X(S, k, i), bh, 1.0f); /* residual */
    }
    if (S->stage == S->nstage - 1) {
        /* Target: a fixed linear map of the input (half of it), so the loss
         * can actually fall. */
        make_data(S, k, K_INPUT, 0.5f, S->tgt);
        float scale = 2.0f / ((float)p3dw_rows(S->o) * (float)S->h);
        const float *y = ACT_Y(S, k);
        if (S->nstage == 1 && S->r->solo_comm) {
            /* P3DW_SOLO_COMM: Y goes through a grouped send+receive to
             * myself and the loss reads what arrived (S->dy is free here:
             * the last stage's backward starts from dout), so a broken
             * send/receive shows in --verify. */
            if (pp_xchg(S, 0, y, bh, 0, S->dy, bh))
                return -1;
            y = S->dy;
        }
        S->loss += ops->mse(y, S->tgt, S->dout[k], bh, scale);
    }
    return 0;
}

/* Backward of micro-batch k from dLoss/dY (received into S->dy, or the
 * loss gradient on the last stage); leaves dLoss/dX in S->dx. */
static int backward(state *S, int k)
{
    const p3d_ops *ops = S->ops;
    size_t bh = (size_t)S->b * S->h, bf = (size_t)S->b * S->f;
    float *dy = S->stage == S->nstage - 1 ? S->dout[k] : S->dy;
    for (int i = S->nl - 1; i >= 0; i--) {
        if (S->slot[i] >= 0) {
            float *dx = i % 2 ? S->dx2 : S->dx;
            if (p3dw_moe_backward(S->moe, k, S->slot[i], LAYER_W(S, i), LAYER_EW(S, i), LAYER_G(S, i), LAYER_EG(S, i),
                                  ACT_X(S, k, i), dy, dx))
                return -1;
            dy = dx;
            continue;
        }
        float *A = LAYER_W(S, i), *B = A + (size_t)S->h * S->f;
        float *dA = LAYER_G(S, i), *dB = dA + (size_t)S->h * S->f;
        ops->gemm(1, 0, S->f, S->h, S->b, ACT_G(S, k, i), dy, dB, 1.0f);
        ops->gemm(0, 1, S->b, S->f, S->h, dy, B, S->dg, 0.0f);
        ops->gelu_bwd(ACT_Z(S, k, i), S->dg, S->dz, bf);
        ops->gemm(1, 0, S->h, S->f, S->b, ACT_X(S, k, i), S->dz, dA, 1.0f);
        /* dX = dZ·A^T summed over TP, plus dY through the residual.  The
         * two buffers alternate so that layer 0 ends in S->dx. */
        float *dx = i % 2 ? S->dx2 : S->dx;
        ops->gemm(0, 1, S->b, S->h, S->f, S->dz, A, dx, 0.0f);
        if (tp_allreduce(S, dx, bh))
            return -1;
        ops->axpy(dx, dy, bh, 1.0f);
        dy = dx;
    }
    return 0;
}

/* 1F1B as Megatron schedules it (forward_backward_pipelining_without_
 * interleaving): stage s runs w = min(p-s-1, m) warm-up forwards, then
 * alternates one forward and one backward, then drains w backwards.  In the
 * steady phase every exchange pairs a send with the receive the neighbour
 * is waiting for - send-forward + recv-backward, send-backward +
 * recv-forward - issued as one grouped operation, so no stage ever blocks
 * in a send while its neighbour blocks in the opposite send (the deadlock
 * of separate blocking sends, which NCCL may have).  --p2p strict proves it
 * on the CPU backend.  Stage 0 has no previous and the last stage no next
 * stage: those halves of an exchange are left out. */
static int one_step(state *S)
{
    int m = S->m, warm = S->nstage - S->stage - 1;
    if (warm > m)
        warm = m;
    int rest = m - warm;
    int prev = S->stage > 0 ? S->stage - 1 : -1;
    int next = S->stage < S->nstage - 1 ? S->stage + 1 : -1;
    size_t bh = (size_t)S->b * S->h;
#define RECV_FWD(k) pp_xchg(S, -1, NULL, 0, prev, ACT_X(S, k, 0), bh)
    for (int k = 0; k < warm; k++)
        if (RECV_FWD(k) || forward(S, k) || pp_xchg(S, next, ACT_Y(S, k), bh, -1, NULL, 0))
            return -1;
    if (rest > 0 && RECV_FWD(warm))
        return -1;
    for (int i = 0; i < rest; i++) {
        int fk = warm + i;
        /* send-forward + recv-backward */
        if (forward(S, fk) || pp_xchg(S, next, ACT_Y(S, fk), bh, next, S->dy, bh) || backward(S, i))
            return -1;
        /* send-backward + recv-forward (the last one sends only) */
        int more = i + 1 < rest;
        if (pp_xchg(S, prev, S->dx, bh, more ? prev : -1, more ? ACT_X(S, fk + 1, 0) : NULL, bh))
            return -1;
    }
    for (int k = rest; k < m; k++)
        if (pp_xchg(S, -1, NULL, 0, next, S->dy, bh) || backward(S, k) || pp_xchg(S, prev, S->dx, bh, -1, NULL, 0))
            return -1;
#undef RECV_FWD
    return 0;
}

static void init_weights(state *S, float *host)
{
    int h = S->h, f = S->f, c0 = S->r->g[P3DW_TP].rank * f;
    /* Residual branches scaled by 1/sqrt(2L) at init (Megatron's scaled
     * init), so deep stacks start near the identity and train stably. */
    float sa = sqrtf(3.0f / h), sb = sqrtf(3.0f / (4.0f * h)) / sqrtf(2.0f * (float)S->o->layers);
    for (int i = 0; i < S->nl; i++) {
        uint64_t layer = (uint64_t)(S->first + i);
        if (S->slot[i] >= 0) {
            p3dw_moe_init(S->moe, (int)layer, LAYER_W(S, i), LAYER_EW(S, i), host);
            continue;
        }
        float *A = host, *B = host + (size_t)h * f;
        for (int r = 0; r < h; r++)
            for (int c = 0; c < f; c++)
                A[(size_t)r * f + c] =
                    sa * p3dw_hash_uniform(S->o->seed, K_WEIGHT_A + 2 * layer, (uint64_t)r, (uint64_t)(c0 + c));
        for (int r = 0; r < f; r++)
            for (int c = 0; c < h; c++)
                B[(size_t)r * h + c] =
                    sb * p3dw_hash_uniform(S->o->seed, K_WEIGHT_B + 2 * layer, (uint64_t)(c0 + r), (uint64_t)c);
        S->ops->upload(LAYER_W(S, i), host, 2 * (size_t)h * f);
    }
}

/* The parameters a checkpoint holds, gathered into / scattered from one
 * host array. */
static size_t param_count(const state *S)
{
    return S->wn + S->wen;
}

static void params_get(state *S, float *host)
{
    S->ops->download(host, S->w, S->wn);
    if (S->wen)
        S->ops->download(host + S->wn, S->we, S->wen);
}

static void params_put(state *S, const float *host)
{
    S->ops->upload(S->w, host, S->wn);
    if (S->wen)
        S->ops->upload(S->we, host + S->wn, S->wen);
}

/* Where each local layer's weights live: dense layers and MoE routers in
 * w, expert shards in we.  Makes the MoE buffers when there are MoE layers
 * on this stage.  0 or -1. */
static int layout(state *S)
{
    int nmoe = 0;
    S->woff = calloc((size_t)S->nl + 1, sizeof *S->woff);
    S->eoff = calloc((size_t)S->nl + 1, sizeof *S->eoff);
    S->slot = calloc((size_t)S->nl + 1, sizeof *S->slot);
    if (!S->woff || !S->eoff || !S->slot)
        return -1;
    for (int i = 0; i < S->nl; i++)
        S->slot[i] = S->o->experts > 0 && (S->first + i) % 2 == 1 ? nmoe++ : -1;
    if (nmoe && !(S->moe = p3dw_moe_new(S->o, S->r, S->st, S->b, nmoe)))
        return -1;
    for (int i = 0; i < S->nl; i++) {
        S->woff[i] = S->wn;
        S->eoff[i] = S->wen;
        S->wn += S->slot[i] >= 0 ? p3dw_moe_router_size(S->moe) : (size_t)2 * S->h * S->f;
        S->wen += S->slot[i] >= 0 ? p3dw_moe_expert_size(S->moe) : 0;
    }
    return 0;
}

/* Sums the gradients over a data-parallel group (DP for dense weights,
 * EDP for expert shards), timed into the given counters. */
static int grad_allreduce(state *S, p3dw_group *g, float *buf, size_t n, double *ops_, double *bytes, double *bus,
                          double *t)
{
    if ((g->size == 1 && !S->r->solo_comm) || n == 0)
        return 0;
    S->ops->sync();
    double t1 = now_s();
    if (S->ops->allreduce(g, buf, n))
        return -1;
    *t += now_s() - t1;
    (*ops_)++;
    *bytes += n * sizeof(float);
    *bus += 2.0 * (g->size - 1) / g->size * n * sizeof(float);
    return 0;
}

/* --checkpoint-dir at start: resume from the newest complete checkpoint.
 * Returns the step to start at, -1 or -2 (p3dw_ckpt_load). */
static int resume(state *S, double *losses)
{
    size_t n = param_count(S);
    float *host = malloc(sizeof *host * (n ? n : 1));
    if (!host) {
        fprintf(stderr, "p3d-worker: out of host memory\n");
        return -1;
    }
    int step = p3dw_ckpt_load(S->r->ckpt, host, n, losses);
    if (step > 0)
        params_put(S, host);
    free(host);
    return step;
}

static int checkpoint(state *S, const double *losses)
{
    size_t n = param_count(S);
    float *host = malloc(sizeof *host * (n ? n : 1));
    if (!host) {
        fprintf(stderr, "p3d-worker: out of host memory\n");
        return -1;
    }
    params_get(S, host);
    int rc = p3dw_ckpt_save(S->r->ckpt, S->step + 1, host, n, losses);
    free(host);
    return rc;
}

/* This rank's share of the model: its stage's layers, its rows. */
static void shape(state *S, const p3dw_opts *o, p3dw_run *r, p3dw_stats *st)
{
    S->o = o;
    S->r = r;
    S->st = st;
    S->ops = r->ops;
    S->tp = r->g[P3DW_TP].size;
    S->nstage = r->g[P3DW_PP].size;
    S->stage = r->g[P3DW_PP].rank;
    S->dp = r->g[P3DW_DP].size;
    S->dp_rank = r->g[P3DW_DP].rank;
    S->m = r->micro_batches;
    S->h = o->hidden;
    S->f = 4 * o->hidden / S->tp;
    S->b = (int)(p3dw_rows(o) / (S->dp * S->m)); /* rows */
    int per = o->layers / S->nstage, extra = o->layers % S->nstage;
    S->nl = per + (S->stage < extra);
    S->first = S->stage * per + (S->stage < extra ? S->stage : extra);
}

/* Weights, gradients, activations and scratch on the backend, and the
 * host buffer for the initial weights (*hostw). */
static int alloc_buffers(state *S, float **hostw)
{
    const p3dw_opts *o = S->o;
    size_t wn = S->wn, wen = S->wen;
    size_t an = (size_t)S->nl * S->b * (S->h + 2 * S->f) + (size_t)S->b * S->h;
    size_t bh = (size_t)S->b * S->h, bf = (size_t)S->b * S->f;
    int last = S->stage == S->nstage - 1;
    S->act = calloc((size_t)S->m, sizeof *S->act);
    S->dout = calloc((size_t)S->m, sizeof *S->dout);
    S->host = malloc(bh * sizeof *S->host);
    size_t hn = 2 * (size_t)S->h * S->f;
    if ((size_t)S->h * o->experts > hn)
        hn = (size_t)S->h * o->experts;
    *hostw = malloc(hn * sizeof **hostw);
    if (!S->act || !S->dout || !S->host || !*hostw)
        return -1;
    if (!(S->w = S->ops->alloc(wn)) || !(S->g = S->ops->alloc(wn)) ||
        (wen && (!(S->we = S->ops->alloc(wen)) || !(S->ge = S->ops->alloc(wen)))) || !(S->dy = S->ops->alloc(bh)) ||
        !(S->dx = S->ops->alloc(bh)) || !(S->dx2 = S->ops->alloc(bh)) || !(S->dg = S->ops->alloc(bf)) ||
        !(S->dz = S->ops->alloc(bf)) || !(S->tgt = S->ops->alloc(bh)))
        return -1;
    for (int k = 0; k < S->m; k++)
        if (!(S->act[k] = S->ops->alloc(an)) || (last && !(S->dout[k] = S->ops->alloc(bh))))
            return -1;
    return 0;
}

/* The last stage's loss for this step: summed over DP, kept, printed. */
static int record_loss(state *S, double *losses, double norm)
{
    const p3dw_opts *o = S->o;
    p3dw_run *r = S->r;
    p3dw_group *dpg = &r->g[P3DW_DP];
    double l = S->loss;
    if ((dpg->size > 1 || r->solo_comm) && S->ops->allreduce_host_f64(dpg, &l, 1))
        return -1;
    losses[S->step] = l / norm;
    if (r->print_loss && !r->quiet) {
        if (r->json)
            printf("{\"step\":%d,\"loss\":%.9g}\n", S->step + 1, losses[S->step]);
        else
            printf("p3d-worker: step %d/%d loss %.9g\n", S->step + 1, o->steps, losses[S->step]);
        fflush(stdout);
    }
    return 0;
}

/* P3DW_DIE (tests only): this rank dies before the step named. */
static void die_if_asked(const state *S)
{
    const p3dw_run *r = S->r;
    if (S->step + 1 == r->die_at_step) {
        /* P3DW_DIE (tests only): a crash mid-training, no clean-up. */
        fprintf(stderr, "p3d-worker: P3DW_DIE: rank killing itself before step %d\n", S->step + 1);
        fflush(NULL);
        raise(SIGKILL);
    }
}

static void stall(const state *S)
{
    const p3dw_run *r = S->r;
    if (r->stall_s > 0) {
        /* P3DW_STALL (tests only): own work that is slow on one node */
        struct timespec ts = {(time_t)r->stall_s, (long)((r->stall_s - (time_t)r->stall_s) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

/* One training step: forward and backward, gradient all-reduces, the
 * update, the loss, a checkpoint when due, the heartbeat. *durable: the
 * newest step on disk. */
static int train_step(state *S, double *losses, double norm, int *durable)
{
    const p3dw_opts *o = S->o;
    p3dw_run *r = S->r;
    p3dw_stats *st = S->st;
    size_t wn = S->wn, wen = S->wen;
    die_if_asked(S);
    S->ops->zero(S->g, wn);
    if (wen)
        S->ops->zero(S->ge, wen);
    S->loss = 0;
    S->ops->sync();
    double t0 = now_s(), comm0 = comm_time(st);
    stall(S);
    if (one_step(S))
        return -1;
    if (grad_allreduce(S, &r->g[P3DW_DP], S->g, wn, &st->dp_ops, &st->dp_bytes, &st->dp_bus_bytes, &st->dp_time) ||
        grad_allreduce(S, &r->g[P3DW_EDP], S->ge, wen, &st->edp_ops, &st->edp_bytes, &st->edp_bus_bytes, &st->edp_time))
        return -1;
    S->ops->sgd(S->w, S->g, wn, (float)o->lr);
    if (wen)
        S->ops->sgd(S->we, S->ge, wen, (float)o->lr);
    S->ops->sync();
    double took = now_s() - t0;
    st->step_time += took;
    st->steps++;
    /* its own work: the step without the time blocked in collectives
     * and pipeline exchanges (waiting on peers) */
    double busy = took - (comm_time(st) - comm0);
    if (S->stage == S->nstage - 1 && record_loss(S, losses, norm))
        return -1;
    int due = r->ckpt && ((r->ckpt->every > 0 && (S->step + 1) % r->ckpt->every == 0) || S->step + 1 == o->steps);
    if (due && checkpoint(S, losses))
        return -1;
    if (due)
        *durable = S->step + 1;
    if (!r->quiet)
        p3dw_heartbeat(S->step + 1, busy, *durable);
    return 0;
}

/* After a step, when armed: if any rank was told to stop, every rank
 * writes this step's checkpoint (unless it was just written), reports it
 * and ends the training (r->preempted). 0, or -1. */
static int preempt_point(state *S, const double *losses, int *durable)
{
    p3dw_run *r = S->r;
    int agreed = p3dw_preempt_agreed(r);
    if (agreed <= 0)
        return agreed;
    if (*durable != S->step + 1) {
        if (checkpoint(S, losses))
            return -1;
        *durable = S->step + 1;
    }
    p3dw_heartbeat(S->step + 1, 0, *durable);
    r->preempted = S->step + 1;
    return 0;
}

/* Everything alloc_buffers and layout made; any of it may be NULL. */
static void free_state(state *S, float *hostw)
{
    /* act and dout are separate callocs: either may be NULL here. */
    for (int k = 0; S->act && k < S->m; k++)
        S->ops->release(S->act[k]);
    for (int k = 0; S->dout && k < S->m; k++)
        S->ops->release(S->dout[k]);
    S->ops->release(S->w);
    S->ops->release(S->g);
    S->ops->release(S->we);
    S->ops->release(S->ge);
    p3dw_moe_free(S->moe);
    free(S->woff);
    free(S->eoff);
    free(S->slot);
    S->ops->release(S->dy);
    S->ops->release(S->dx);
    S->ops->release(S->dx2);
    S->ops->release(S->dg);
    S->ops->release(S->dz);
    S->ops->release(S->tgt);
    free(S->act);
    free(S->dout);
    free(S->host);
    free(hostw);
}

int p3dw_train(const p3dw_opts *o, p3dw_run *r, double *losses, p3dw_stats *st)
{
    state S0 = {0}, *S = &S0;
    int rc = -1;
    float *hostw = NULL;
    shape(S, o, r, st);
    memset(st, 0, sizeof *st);
    memset(losses, 0, sizeof *losses * (size_t)o->steps);
    if (layout(S) || alloc_buffers(S, &hostw))
        goto out;
    init_weights(S, hostw);
    int start = 0;
    if (r->ckpt && (start = resume(S, losses)) < 0) {
        rc = start;
        goto out;
    }
    double norm = (double)p3dw_rows(o) * S->h;
    int durable = start > 0 ? start : -1; /* the newest checkpoint on disk */
    for (S->step = start; S->step < o->steps && !r->preempted; S->step++)
        if (train_step(S, losses, norm, &durable) || (r->preempt_sig && preempt_point(S, losses, &durable)))
            goto out;
    rc = 0;
out:
    if (rc && (!S->act || !S->dout))
        fprintf(stderr, "p3d-worker: out of host memory\n");
    free_state(S, hostw);
    return rc;
}
