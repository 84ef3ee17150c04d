/* SPDX-License-Identifier: BSD-3-Clause */
/* gradcheck.c - --check-grad: a finite-difference check of one layer's
 * gradients, run with the backend's own operations.
 *
 * --verify compares the distributed run with a one-process run on the CPU
 * backend, so a bug in an operation both paths share (a GeLU whose forward
 * and backward disagree, a transposed GEMM flag) passes it.  This check
 * does not trust the operations' backward at all: for one residual layer
 * Y = X + GeLU(X·A)·B and L = mean((Y - T)^2) it computes dA, dB and dX
 * with the backend (as train.c does) and compares sampled entries with the
 * central difference (L(w+e) - L(w-e)) / 2e of the forward pass alone.
 */
#include "worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_GC = 900 };

typedef struct gc {
    const p3d_ops *ops;
    int b, h, f;
    float *X, *A, *B, *T, *Z, *G, *Y, *dY, *dZ, *dG, *dA, *dB, *dX;
} gc;

/* Forward pass and loss sum((Y-T)^2)/(b h); dY = dL/dY. */
static double loss(gc *c)
{
    const p3d_ops *o = c->ops;
    size_t bh = (size_t)c->b * c->h, bf = (size_t)c->b * c->f;
    o->gemm(0, 0, c->b, c->f, c->h, c->X, c->A, c->Z, 0.0f);
    o->gelu_fwd(c->Z, c->G, bf);
    o->gemm(0, 0, c->b, c->h, c->f, c->G, c->B, c->Y, 0.0f);
    o->axpy(c->Y, c->X, bh, 1.0f);
    double n = (double)bh;
    double s = o->mse(c->Y, c->T, c->dY, bh, (float)(2.0 / n));
    o->sync();
    return s / n;
}

static void backward(gc *c)
{
    const p3d_ops *o = c->ops;
    size_t bh = (size_t)c->b * c->h, bf = (size_t)c->b * c->f;
    o->gemm(1, 0, c->f, c->h, c->b, c->G, c->dY, c->dB, 0.0f);
    o->gemm(0, 1, c->b, c->f, c->h, c->dY, c->B, c->dG, 0.0f);
    o->gelu_bwd(c->Z, c->dG, c->dZ, bf);
    o->gemm(1, 0, c->h, c->f, c->b, c->X, c->dZ, c->dA, 0.0f);
    o->gemm(0, 1, c->b, c->h, c->f, c->dZ, c->A, c->dX, 0.0f);
    o->axpy(c->dX, c->dY, bh, 1.0f);
    o->sync();
}

/* Checks `samples` entries of parameter P (n floats) against its analytic
 * gradient dP.  Returns the worst relative error. */
static double check_param(gc *c, const char *name, float *P, const float *dP, size_t n, int samples, uint64_t seed,
                          int verbose)
{
    float *hp = malloc(n * sizeof *hp), *hg = malloc(n * sizeof *hg);
    double worst = 0, gmax = 0;
    if (!hp || !hg) {
        free(hp);
        free(hg);
        fprintf(stderr, "p3d-worker: --check-grad: out of memory\n");
        return INFINITY;
    }
    c->ops->download(hp, P, n);
    c->ops->download(hg, dP, n);
    for (size_t i = 0; i < n; i++)
        gmax = fmax(gmax, fabs(hg[i]));
    for (int s = 0; s < samples; s++) {
        size_t i = (size_t)((p3dw_hash_uniform(seed, K_GC + 1, (uint64_t)s, 0) + 1.0f) * 0.5f * (float)n) % n;
        float keep = hp[i], e = 3e-2f * fmaxf(fabsf(keep), 0.1f);
        hp[i] = keep + e;
        c->ops->upload(P, hp, n);
        double lp = loss(c);
        hp[i] = keep - e;
        c->ops->upload(P, hp, n);
        double lm = loss(c);
        hp[i] = keep;
        c->ops->upload(P, hp, n);
        /* The step actually taken, after rounding to float. */
        double step = (double)(keep + e) - (double)(keep - e);
        double fd = (lp - lm) / step, an = hg[i];
        double rel = fabs(fd - an) / fmax(fmax(fabs(an), fabs(fd)), 1e-2 * gmax + 1e-30);
        if (rel > worst)
            worst = rel;
        if (verbose)
            printf("p3d-worker: check-grad %s[%zu]: analytic %.6g finite difference %.6g rel "
                   "diff %.2g\n",
                   name, i, an, fd, rel);
    }
    free(hp);
    free(hg);
    return worst;
}

int p3dw_check_grad(const p3dw_opts *o, const p3d_ops *ops, double tol, int verbose)
{
    gc c = {.ops = ops, .b = 8, .h = o->hidden < 32 ? o->hidden : 32};
    c.f = 4 * c.h;
    size_t bh = (size_t)c.b * c.h, hf = (size_t)c.h * c.f, bf = (size_t)c.b * c.f;
    float *host = malloc(hf * sizeof *host);
    float **bufs[] = {&c.X, &c.T, &c.Y, &c.dY, &c.dX, &c.A, &c.B, &c.dA, &c.dB, &c.Z, &c.G, &c.dZ, &c.dG};
    size_t sizes[] = {bh, bh, bh, bh, bh, hf, hf, hf, hf, bf, bf, bf, bf};
    int rc = -1;
    if (!host)
        goto out;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (!(*bufs[i] = ops->alloc(sizes[i])))
            goto out;
    /* Weights as train.c scales them, inputs in [-1, 1), target 0.5·X. */
    float sa = sqrtf(3.0f / c.h), sb = sqrtf(3.0f / (4.0f * c.h));
    for (size_t i = 0; i < hf; i++)
        host[i] = sa * p3dw_hash_uniform(o->seed, K_GC + 2, i, 0);
    ops->upload(c.A, host, hf);
    for (size_t i = 0; i < hf; i++)
        host[i] = sb * p3dw_hash_uniform(o->seed, K_GC + 3, i, 0);
    ops->upload(c.B, host, hf);
    for (size_t i = 0; i < bh; i++)
        host[i] = p3dw_hash_uniform(o->seed, K_GC + 4, i, 0);
    ops->upload(c.X, host, bh);
    for (size_t i = 0; i < bh; i++)
        host[i] *= 0.5f;
    ops->upload(c.T, host, bh);
    loss(&c);
    backward(&c);
    double w = 0;
    w = fmax(w, check_param(&c, "A", c.A, c.dA, hf, 12, o->seed, verbose));
    w = fmax(w, check_param(&c, "B", c.B, c.dB, hf, 12, o->seed + 1, verbose));
    w = fmax(w, check_param(&c, "X", c.X, c.dX, bh, 8, o->seed + 2, verbose));
    if (w <= tol) {
        printf("p3d-worker: check-grad: pass (one layer, hidden %d, batch %d, %s backend: 32 "
               "gradient entries agree with finite differences, worst rel diff %.2g, "
               "tolerance %g)\n",
               c.h, c.b, ops->name, w, tol);
        rc = 0;
    } else {
        fprintf(stderr,
                "p3d-worker: --check-grad FAILED: a gradient of the %s backend differs "
                "from its finite difference by %.3g relative (tolerance %g): an "
                "operation's forward and backward disagree\n",
                ops->name, w, tol);
        rc = 1;
    }
out:
    if (rc < 0)
        fprintf(stderr, "p3d-worker: --check-grad: out of memory\n");
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ops->release(*bufs[i]);
    free(host);
    return rc ? -1 : 0;
}
