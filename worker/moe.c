/* SPDX-License-Identifier: BSD-3-Clause */
/* moe.c - the optional mixture-of-experts layer (--experts E --top-k K),
 * written against struct p3d_ops like train.c.
 *
 * Layer: Y = X + sum_j p_j · E_{e_j}(X), per token: the router's logits
 * X·Wr (Wr: h x E, replicated), the K largest (ties: lower expert index),
 * p = softmax over those K logits, expert e: GeLU(X·A_e)·B_e (h x 4h x h).
 * Experts are sharded over the EP group (E/ep experts per member, member j
 * owns experts j·E/ep ...) and each expert's 4h dimension over ETP, which
 * is the TP group here (the worker requires etp == tp), as Megatron's
 * expert grid does.
 *
 * Forward for one micro-batch (b tokens, identical on every TP rank):
 *   routing on the host; each (token, choice) slot becomes one row of h
 *   floats, ordered by (destination member, its local expert, token);
 *   all-to-all of the row counts, all-to-all of the rows (dispatch);
 *   every owner runs its experts on its ETP shard, per (source, expert)
 *   block; all-to-all back (combine); one TP all-reduce sums the ETP
 *   partials of every slot, so every TP rank holds the full expert outputs
 *   (kept for backward); Y = X + sum p·out on the host, in a fixed order.
 * Backward: d out_slot = p·dY goes out the same way, the owners accumulate
 *   dA_e, dB_e and return d X_slot (an ETP partial); the sum over a token's
 *   slots is TP all-reduced, then the router's part and the residual are
 *   added.  Router gradient: dlogit_j = p_j (g_j − sum_i p_i g_i) with
 *   g_j = dY·out_j over the chosen experts.
 * Gradients: the routers are dense weights (reduced over DP by train.c),
 * the experts' over the EDP group (ranks holding the same expert shard).
 * The one-process --verify reference runs the same code with ep = tp = 1:
 * every row's arithmetic is the same, only the blocking of sums differs.
 */
#include "worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Hash kinds of the MoE weights, apart from train.c's (small numbers). */
#define K_ROUTER (2ull << 32)
#define K_EXPERT (1ull << 32)

typedef struct moe_act {
    int *idx, *pos;      /* b*K: expert and send row of slot t*K+j */
    float *p;            /* b*K: gate */
    int *scnt, *rcnt;    /* ep*el: rows to / from member j for its / my local expert e */
    size_t *sb, *rb;     /* ep: bytes of rows to / from member j */
    float *out;          /* device b*K x h: full expert output per slot, send order */
    float *xin, *z, *ga; /* device rmax x h / fe / fe: owner's inputs and activations */
} moe_act;

struct p3dw_moe {
    const p3dw_opts *o;
    p3dw_run *r;
    p3dw_stats *st;
    const p3d_ops *ops;
    int h, E, K, b, ep, me, el, fe, rmax, nslot;
    moe_act *act;                                     /* [m * nslot] */
    float *sbuf, *rbuf, *dg, *dz, *logit, *tmp, *cnt; /* device temporaries */
    float *hx, *hy, *hbuf, *hbuf2, *hlog, *hcnt;      /* host */
    double *hg;
    int *start; /* ep*el: routing scratch */
    size_t *cb; /* ep: bytes of counts per member */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int p3dw_check_moe(const p3dw_opts *o, int tp, int ep, int etp)
{
    if (!o->experts)
        return 0;
    if (o->layers < 2) {
        fprintf(stderr,
                "p3d-worker: --experts: every second layer is an MoE layer, so "
                "--layers must be at least 2 (got %d)\n",
                o->layers);
        return -1;
    }
    if (o->top_k > o->experts) {
        fprintf(stderr, "p3d-worker: --top-k %d: larger than --experts %d\n", o->top_k, o->experts);
        return -1;
    }
    if (o->experts % ep) {
        fprintf(stderr,
                "p3d-worker: --experts %d: must be divisible by the expert-parallel "
                "size ep=%d (P3D_EP_SIZE)\n",
                o->experts, ep);
        return -1;
    }
    if (etp != tp) {
        fprintf(stderr,
                "p3d-worker: --experts: the bundled worker's MoE layer shards each "
                "expert over the TP group, so it needs etp = tp (P3D_ETP_SIZE=%d, "
                "P3D_TP_SIZE=%d): run par3drun without --etp or with --etp %d\n",
                etp, tp, tp);
        return -1;
    }
    return 0;
}

size_t p3dw_moe_router_size(const p3dw_moe *M)
{
    return (size_t)M->h * M->E;
}
size_t p3dw_moe_expert_size(const p3dw_moe *M)
{
    return (size_t)M->el * 2 * M->h * M->fe;
}

void p3dw_moe_free(p3dw_moe *M)
{
    if (!M)
        return;
    const p3d_ops *ops = M->ops;
    for (int i = 0; M->act && i < M->r->micro_batches * M->nslot; i++) {
        moe_act *a = &M->act[i];
        free(a->idx);
        free(a->pos);
        free(a->p);
        free(a->scnt);
        free(a->rcnt);
        free(a->sb);
        free(a->rb);
        ops->release(a->out);
        ops->release(a->xin);
        ops->release(a->z);
        ops->release(a->ga);
    }
    free(M->act);
    ops->release(M->sbuf);
    ops->release(M->rbuf);
    ops->release(M->dg);
    ops->release(M->dz);
    ops->release(M->logit);
    ops->release(M->tmp);
    ops->release(M->cnt);
    free(M->hx);
    free(M->hy);
    free(M->hbuf);
    free(M->hbuf2);
    free(M->hlog);
    free(M->hcnt);
    free(M->hg);
    free(M->start);
    free(M->cb);
    free(M);
}

p3dw_moe *p3dw_moe_new(const p3dw_opts *o, p3dw_run *r, p3dw_stats *st, int b, int nslot)
{
    p3dw_moe *M = calloc(1, sizeof *M);
    if (!M)
        return NULL;
    const p3d_ops *ops = r->ops;
    M->o = o;
    M->r = r;
    M->st = st;
    M->ops = ops;
    M->h = o->hidden;
    M->E = o->experts;
    M->K = o->top_k;
    M->b = b;
    M->ep = r->g[P3DW_EP].size;
    M->me = r->g[P3DW_EP].rank;
    M->el = M->E / M->ep;
    M->fe = 4 * o->hidden / r->g[P3DW_ETP].size;
    M->rmax = M->ep * b * (M->K < M->el ? M->K : M->el);
    M->nslot = nslot;
    size_t h = (size_t)M->h, bk = (size_t)b * M->K, q = (size_t)M->ep * M->el;
    int m = r->micro_batches, ok = 1;
    M->act = calloc((size_t)m * nslot, sizeof *M->act);
    M->hx = malloc(sizeof(float) * b * h);
    M->hy = malloc(sizeof(float) * b * h);
    M->hbuf = malloc(sizeof(float) * bk * h);
    M->hbuf2 = malloc(sizeof(float) * bk * h);
    M->hlog = malloc(sizeof(float) * b * M->E);
    M->hcnt = malloc(sizeof(float) * 2 * q);
    M->hg = malloc(sizeof(double) * bk);
    M->cb = malloc(sizeof(size_t) * M->ep);
    M->start = malloc(sizeof(int) * q);
    if (!M->start || !M->act || !M->hx || !M->hy || !M->hbuf || !M->hbuf2 || !M->hlog || !M->hcnt || !M->hg || !M->cb)
        goto fail;
    for (int j = 0; j < M->ep; j++)
        M->cb[j] = sizeof(int) * M->el;
    ok = (M->sbuf = ops->alloc(bk * h)) && (M->rbuf = ops->alloc((size_t)M->rmax * h)) &&
         (M->dg = ops->alloc((size_t)M->rmax * M->fe)) && (M->dz = ops->alloc((size_t)M->rmax * M->fe)) &&
         (M->logit = ops->alloc((size_t)b * M->E)) && (M->tmp = ops->alloc((size_t)b * h)) &&
         (M->cnt = ops->alloc(2 * q));
    for (int i = 0; ok && i < m * nslot; i++) {
        moe_act *a = &M->act[i];
        ok = (a->idx = malloc(sizeof(int) * bk)) && (a->pos = malloc(sizeof(int) * bk)) &&
             (a->p = malloc(sizeof(float) * bk)) && (a->scnt = malloc(sizeof(int) * q)) &&
             (a->rcnt = malloc(sizeof(int) * q)) && (a->sb = malloc(sizeof(size_t) * M->ep)) &&
             (a->rb = malloc(sizeof(size_t) * M->ep)) && (a->out = ops->alloc(bk * h)) &&
             (a->xin = ops->alloc((size_t)M->rmax * h)) && (a->z = ops->alloc((size_t)M->rmax * M->fe)) &&
             (a->ga = ops->alloc((size_t)M->rmax * M->fe));
    }
    if (ok)
        return M;
fail:
    fprintf(stderr, "p3d-worker: out of memory for the MoE layers\n");
    p3dw_moe_free(M);
    return NULL;
}

/* Router and expert shards of global layer `layer`, from the seed: the
 * router is whole on every rank; expert e of this member is global expert
 * me·el + e, columns c0.. of its 4h dimension (ETP shard). */
void p3dw_moe_init(p3dw_moe *M, int layer, float *router, float *experts, float *host)
{
    int h = M->h, fe = M->fe, c0 = M->r->g[P3DW_ETP].rank * fe;
    float sa = sqrtf(3.0f / h), sb = sqrtf(3.0f / (4.0f * h)) / sqrtf(2.0f * (float)M->o->layers);
    for (int r = 0; r < h; r++)
        for (int c = 0; c < M->E; c++)
            host[(size_t)r * M->E + c] =
                sa * p3dw_hash_uniform(M->o->seed, K_ROUTER + (uint64_t)layer, (uint64_t)r, (uint64_t)c);
    M->ops->upload(router, host, (size_t)h * M->E);
    for (int e = 0; e < M->el; e++) {
        uint64_t ge = (uint64_t)(M->me * M->el + e), kind = K_EXPERT + ((uint64_t)layer << 13) + (ge << 1);
        float *A = host, *B = host + (size_t)h * fe;
        for (int r = 0; r < h; r++)
            for (int c = 0; c < fe; c++)
                A[(size_t)r * fe + c] = sa * p3dw_hash_uniform(M->o->seed, kind, (uint64_t)r, (uint64_t)(c0 + c));
        for (int r = 0; r < fe; r++)
            for (int c = 0; c < h; c++)
                B[(size_t)r * h + c] = sb * p3dw_hash_uniform(M->o->seed, kind + 1, (uint64_t)(c0 + r), (uint64_t)c);
        M->ops->upload(experts + (size_t)e * 2 * h * fe, host, 2 * (size_t)h * fe);
    }
}

/* An all-to-all over the EP group, timed; bytes sent to other members
 * count (the own segment is a local copy). */
static int a2a(p3dw_moe *M, const void *sbuf, const size_t *sb, void *rbuf, const size_t *rb)
{
    p3dw_group *g = &M->r->g[P3DW_EP];
    if (g->size == 1 && !M->r->solo_comm) {
        M->ops->copy(rbuf, sbuf, sb[0] / sizeof(float));
        return 0;
    }
    M->ops->sync();
    double t0 = now_s();
    int rc = M->ops->alltoallv(g, sbuf, sb, rbuf, rb);
    M->st->ep_time += now_s() - t0;
    M->st->ep_ops++;
    for (int j = 0; j < g->size; j++)
        if (j != g->rank)
            M->st->ep_bytes += (double)sb[j];
    return rc;
}

/* Top-K of each token's logits and the softmax over them; the send order
 * of the slots; the row counts (exchanged). */
static int route(p3dw_moe *M, moe_act *a)
{
    int E = M->E, K = M->K, el = M->el, ep = M->ep, q = ep * el;
    for (int t = 0; t < M->b; t++) {
        const float *l = M->hlog + (size_t)t * E;
        int *ix = a->idx + (size_t)t * K;
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j && !taken; i++)
                    taken = ix[i] == e;
                if (!taken && (best < 0 || l[e] > l[best]))
                    best = e;
            }
            ix[j] = best;
        }
        double mx = l[ix[0]], sum = 0;
        for (int j = 0; j < K; j++)
            sum += exp((double)l[ix[j]] - mx);
        for (int j = 0; j < K; j++)
            a->p[(size_t)t * K + j] = (float)(exp((double)l[ix[j]] - mx) / sum);
    }
    memset(a->scnt, 0, sizeof(int) * q);
    for (int s = 0; s < M->b * K; s++)
        a->scnt[a->idx[s]]++; /* expert e is bucket e: member e/el, local e%el */
    int *start = M->start;
    for (int i = 0, acc = 0; i < q; i++) {
        start[i] = acc;
        acc += a->scnt[i];
    }
    for (int s = 0; s < M->b * K; s++)
        a->pos[s] = start[a->idx[s]]++;
    /* Counts travel as int bit patterns in float buffers (4 bytes each). */
    memcpy(M->hcnt, a->scnt, sizeof(int) * q);
    M->ops->upload(M->cnt, M->hcnt, (size_t)q);
    if (a2a(M, M->cnt, M->cb, M->cnt + q, M->cb))
        return -1;
    M->ops->download(M->hcnt + q, M->cnt + q, (size_t)q);
    memcpy(a->rcnt, M->hcnt + q, sizeof(int) * q);
    size_t row = sizeof(float) * M->h, total = 0;
    for (int j = 0; j < ep; j++) {
        a->sb[j] = a->rb[j] = 0;
        for (int e = 0; e < el; e++) {
            a->sb[j] += row * (size_t)a->scnt[j * el + e];
            a->rb[j] += row * (size_t)a->rcnt[j * el + e];
            total += (size_t)a->rcnt[j * el + e];
        }
    }
    if (total > (size_t)M->rmax) {
        fprintf(stderr,
                "p3d-worker: internal error: %zu MoE rows received, at most %d expected "
                "(ranks disagree on the model?)\n",
                total, M->rmax);
        return -1;
    }
    return 0;
}

#define EXPERT_A(M, W, e) ((W) + (size_t)(e)*2 * (M)->h * (M)->fe)
#define EXPERT_B(M, W, e) (EXPERT_A(M, W, e) + (size_t)(M)->h * (M)->fe)


/* Token dispatch: the b*K routed rows in host (slot order) go to their
 * experts' owners; dst receives this member's blocks. */
static int dispatch(p3dw_moe *M, moe_act *a, const float *host, float *dst)
{
    M->ops->upload(M->sbuf, host, (size_t)M->b * M->K * M->h);
    return a2a(M, M->sbuf, a->sb, dst, a->rb);
}
int p3dw_moe_forward(p3dw_moe *M, int k, int slot, const float *router, const float *experts, const float *X, float *Y)
{
    const p3d_ops *ops = M->ops;
    moe_act *a = &M->act[k * M->nslot + slot];
    int h = M->h, K = M->K, b = M->b, fe = M->fe;
    size_t bh = (size_t)b * h;
    ops->gemm(0, 0, b, M->E, h, X, router, M->logit, 0.0f);
    ops->download(M->hlog, M->logit, (size_t)b * M->E);
    ops->download(M->hx, X, bh);
    if (route(M, a))
        return -1;
    for (int s = 0; s < b * K; s++)
        memcpy(M->hbuf + (size_t)a->pos[s] * h, M->hx + (size_t)(s / K) * h, sizeof(float) * h);
    if (dispatch(M, a, M->hbuf, a->xin))
        return -1;
    /* The owner's experts, one (source member, expert) block at a time. */
    size_t off = 0;
    for (int q = 0; q < M->ep * M->el; q++) { /* block q: member q / el, local expert q % el */
        int e = q % M->el, c = a->rcnt[q];
        if (!c)
            continue;
        float *xin = a->xin + off * h, *z = a->z + off * fe, *ga = a->ga + off * fe;
        ops->gemm(0, 0, c, fe, h, xin, EXPERT_A(M, experts, e), z, 0.0f);
        ops->gelu_fwd(z, ga, (size_t)c * fe);
        ops->gemm(0, 0, c, h, fe, ga, EXPERT_B(M, experts, e), M->rbuf + off * h, 0.0f);
        off += (size_t)c;
    }
    if (a2a(M, M->rbuf, a->rb, a->out, a->sb) || p3dw_tp_allreduce(M->r, M->st, a->out, (size_t)b * K * h))
        return -1;
    ops->download(M->hbuf, a->out, (size_t)b * K * h);
    for (int t = 0; t < b; t++)
        for (int c = 0; c < h; c++) {
            double y = M->hx[(size_t)t * h + c];
            for (int j = 0; j < K; j++)
                y += (double)a->p[(size_t)t * K + j] * M->hbuf[(size_t)a->pos[t * K + j] * h + c];
            M->hy[(size_t)t * h + c] = (float)y;
        }
    ops->upload(Y, M->hy, bh);
    return 0;
}

int p3dw_moe_backward(p3dw_moe *M, int k, int slot, const float *router, const float *experts, float *drouter,
                      float *dexperts, const float *X, const float *dy, float *dx)
{
    const p3d_ops *ops = M->ops;
    moe_act *a = &M->act[k * M->nslot + slot];
    int h = M->h, K = M->K, b = M->b, fe = M->fe, E = M->E;
    size_t bh = (size_t)b * h;
    ops->download(M->hy, dy, bh);
    ops->download(M->hbuf, a->out, (size_t)b * K * h);
    for (int s = 0; s < b * K; s++) {
        const float *d = M->hy + (size_t)(s / K) * h, *o = M->hbuf + (size_t)a->pos[s] * h;
        float *dout = M->hbuf2 + (size_t)a->pos[s] * h, p = a->p[s];
        double g = 0;
        for (int c = 0; c < h; c++) {
            g += (double)d[c] * o[c];
            dout[c] = p * d[c];
        }
        M->hg[s] = g;
    }
    if (dispatch(M, a, M->hbuf2, M->rbuf))
        return -1;
    size_t off = 0;
    for (int q = 0; q < M->el * M->ep; q++) { /* the blocks in the forward's order */
        int e = q % M->el, c = a->rcnt[q];
        if (!c)
            continue;
        const float *A = EXPERT_A(M, experts, e), *B = EXPERT_B(M, experts, e);
        float *dA = EXPERT_A(M, dexperts, e), *dB = EXPERT_B(M, dexperts, e);
        float *dout = M->rbuf + off * h, *xin = a->xin + off * h, *z = a->z + off * fe, *ga = a->ga + off * fe;
        ops->gemm(1, 0, fe, h, c, ga, dout, dB, 1.0f);
        ops->gemm(0, 1, c, fe, h, dout, B, M->dg, 0.0f);
        ops->gelu_bwd(z, M->dg, M->dz, (size_t)c * fe);
        ops->gemm(1, 0, h, fe, c, xin, M->dz, dA, 1.0f);
        ops->gemm(0, 1, c, h, fe, M->dz, A, dout, 0.0f); /* dX rows, in place */
        off += (size_t)c;
    }
    if (a2a(M, M->rbuf, a->rb, M->sbuf, a->sb))
        return -1;
    ops->download(M->hbuf2, M->sbuf, (size_t)b * K * h);
    for (int t = 0; t < b; t++)
        for (int c = 0; c < h; c++) {
            double v = 0;
            for (int j = 0; j < K; j++)
                v += M->hbuf2[(size_t)a->pos[t * K + j] * h + c];
            M->hx[(size_t)t * h + c] = (float)v;
        }
    ops->upload(dx, M->hx, bh);
    if (p3dw_tp_allreduce(M->r, M->st, dx, bh))
        return -1;
    /* Router: the softmax over the chosen logits, backward. */
    memset(M->hlog, 0, sizeof(float) * b * E);
    for (int t = 0; t < b; t++) {
        double pg = 0;
        for (int j = 0; j < K; j++)
            pg += (double)a->p[t * K + j] * M->hg[t * K + j];
        for (int j = 0; j < K; j++)
            M->hlog[(size_t)t * E + a->idx[t * K + j]] = (float)(a->p[t * K + j] * (M->hg[t * K + j] - pg));
    }
    ops->upload(M->logit, M->hlog, (size_t)b * E);
    if (!M->r->break_router) /* P3DW_BREAK=router (tests only) skips it */
        ops->gemm(1, 0, h, E, b, X, M->logit, drouter, 1.0f);
    ops->gemm(0, 1, b, h, E, M->logit, router, M->tmp, 0.0f);
    ops->axpy(dx, M->tmp, bh, 1.0f);
    ops->axpy(dx, dy, bh, 1.0f); /* residual */
    return 0;
}
