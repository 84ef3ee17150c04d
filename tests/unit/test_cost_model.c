/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cost_model.c — each cost-model formula against hand-computed values
 * (the arithmetic is written out next to each expectation). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "p3d/p3d.h"
#include "cost_internal.h"

/* relative tolerance check */
#define NEAR(x, want, rel)                                                                                             \
    do {                                                                                                               \
        double x_ = (x), w_ = (want);                                                                                  \
        if (!(fabs(x_ - w_) <= (rel)*fabs(w_) + 1e-12))                                                                \
            fail_msg("%s = %.9g, want %.9g (rel %.g)", #x, x_, w_, (double)(rel));                                     \
    } while (0)

/* ZeRO paper, Figure 1: Psi = 7.5B, N_d = 64 -> 120 / 31.4 / 16.6 / 1.9 GB
 * (its 16 bytes: fp16 gradients, gb = 2). */
static void zero_paper_example(void **state)
{
    (void)state;
    double w, g, o;
    p3d_cost_model_states(7.5e9, 64, 0, 2, 2, &w, &g, &o);
    NEAR(w + g + o, 120e9, 1e-12); /* 16 * 7.5 */
    p3d_cost_model_states(7.5e9, 64, 1, 2, 2, &w, &g, &o);
    NEAR(w + g + o, 31.40625e9, 1e-12); /* 4*7.5 + 12*7.5/64 */
    assert_int_equal((int)round((w + g + o) / 1e8), 314);
    p3d_cost_model_states(7.5e9, 64, 2, 2, 2, &w, &g, &o);
    NEAR(w + g + o, 16.640625e9, 1e-12); /* 2*7.5 + 14*7.5/64 */
    assert_int_equal((int)round((w + g + o) / 1e8), 166);
    p3d_cost_model_states(7.5e9, 64, 3, 2, 2, &w, &g, &o);
    NEAR(w + g + o, 1.875e9, 1e-12); /* 16*7.5/64 */
    assert_int_equal((int)round((w + g + o) / 1e8), 19);
    /* Megatron-LM's count (fp32 main gradients): 18 bytes, 6 + 12/d with
     * the distributed optimizer */
    p3d_cost_model_states(1e9, 8, 0, 2, 4, &w, &g, &o);
    NEAR(w + g + o, 18e9, 1e-12);
    p3d_cost_model_states(1e9, 8, 1, 2, 4, &w, &g, &o);
    NEAR(w + g + o, 7.5e9, 1e-12); /* 6 + 12/8 */
    /* fp32 training: 4 + 4 + 8 (momentum, variance) = 16 bytes per parameter */
    p3d_cost_model_states(1e9, 1, 0, 4, 4, &w, &g, &o);
    NEAR(w, 4e9, 1e-12);
    NEAR(o, 8e9, 1e-12);
}

static void bubble(void **state)
{
    (void)state;
    NEAR(p3d_cost_bubble(4, 8, 1), 3.0 / 11.0, 1e-12); /* (p-1)/(m+p-1) */
    NEAR(p3d_cost_bubble(16, 512, 1), 15.0 / 527.0, 1e-12);
    NEAR(p3d_cost_bubble(4, 8, 2), 3.0 / 19.0, 1e-12); /* (p-1)/(v*m+p-1) */
    NEAR(p3d_cost_bubble(1, 8, 1), 0.0, 0);
    NEAR(p3d_cost_bubble(2, 1, 1), 0.5, 1e-12); /* no overlap at all */
}

/* Korthikanti et al. 2022 for GPT-3 175B: s=2048, b=1, h=12288, a=96, t=8.
 * sbh = 25,165,824; 5as/h = 80. */
static void activations(void **state)
{
    (void)state;
    const double sbh = 2048.0 * 12288;
    NEAR(p3d_cost_act_layer(2048, 1, 12288, 96, 1, 0, 0), sbh * 114, 1e-12);     /* 34 + 80 */
    NEAR(p3d_cost_act_layer(2048, 1, 12288, 96, 8, 0, 0), sbh * 23, 1e-12);      /* 10 + 3 + 10 */
    NEAR(p3d_cost_act_layer(2048, 1, 12288, 96, 8, 1, 0), sbh * 114 / 8, 1e-12); /* SP: /t */
    NEAR(p3d_cost_act_layer(2048, 1, 12288, 96, 8, 1, 1), sbh * 34 / 8, 1e-12);  /* selective */
    NEAR(p3d_cost_act_layer(2048, 1, 12288, 96, 8, 0, 1), sbh * 13, 1e-12);      /* 10 + 24/8 */
    NEAR(p3d_cost_act_layer(2048, 1, 12288, 96, 8, 1, 2), 2 * sbh / 8, 1e-12);   /* full */
    NEAR(p3d_cost_act_layer(2048, 1, 12288, 96, 1, 0, 2), 2 * sbh, 1e-12);
    /* b scales linearly */
    NEAR(p3d_cost_act_layer(2048, 4, 12288, 96, 1, 0, 0), 4 * sbh * 114, 1e-12);
}

/* Narayanan et al. SC21: GPT-3 175B, B = 1536: 96*B*s*L*h^2*(1 + s/6h + V/16Lh)
 * = 4.510971e18 FLOPs per iteration. */
static void flops(void **state)
{
    (void)state;
    NEAR(p3d_cost_flops(96, 1536, 2048, 96, 12288, 51200), 4.510971e18, 1e-6);
    /* 72 * 2048 = 96 * 1536: the no-recompute figure at B = 2048 is the same number */
    NEAR(p3d_cost_flops(72, 2048, 2048, 96, 12288, 51200), 4.510971e18, 1e-6);
}

static void presets(void **state)
{
    (void)state;
    p3d_model m;
    char *err = NULL;
    assert_int_equal(p3d_model_preset("gpt3-175b", &m, &err), 0);
    /* 96 layers of 12h^2 + 4h (LayerNorm), a final norm, a tied embedding */
    NEAR(m.params, 96 * (12.0 * 12288 * 12288 + 4 * 12288) + 2 * 12288 + 12288.0 * 51200, 1e-12);
    NEAR(m.published, 175e9, 0);
    assert_int_equal(m.layers, 96);
    assert_int_equal(m.hidden, 12288);
    assert_int_equal(m.heads, 96);
    assert_int_equal(m.seq_len, 2048);
    assert_int_equal(m.vocab, 51200);
    assert_int_equal(p3d_model_preset("llama2-70b", &m, &err), 0);
    assert_int_equal(m.layers, 80);
    assert_int_equal(p3d_model_preset("nope-1b", &m, &err), -1);
    assert_non_null(strstr(err, "nope-1b"));
    assert_non_null(strstr(err, "llama3-8b"));
    free(err);
    const char *const *names = p3d_model_preset_names();
    int n = 0;
    while (names[n])
        n++;
    assert_true(n >= 5);
}

static void job_175b(p3d_job *j)
{
    p3d_job_init(j);
    j->mesh.size[P3D_DIM_TP] = 8;
    j->mesh.size[P3D_DIM_PP] = 16;
    j->mesh.size[P3D_DIM_DP] = 4;
    j->global_batch = 2048;
    j->micro_batch_size = 1;
    j->zero = 1;
    j->recompute = 1;
    assert_int_equal(p3d_model_preset("gpt3-175b", &j->model, NULL), 0);
    j->has_model = 1;
}

/* The whole estimate, tp=8 pp=16 dp=4, B=2048, b=1, ZeRO-1, selective
 * recompute, default links (NV 450, RACK 50, XRACK 25 GB/s). */
static void eval_175b(void **state)
{
    (void)state;
    p3d_job j;
    job_175b(&j);
    j.tflops = 400; /* one sustained figure (--tflops): the closed-form time */
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_TP] = P3D_LINK_NVLINK;
    link[P3D_DIM_PP] = P3D_LINK_RACK;
    link[P3D_DIM_DP] = P3D_LINK_XRACK;
    p3d_cost c;
    char *err = NULL;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c, &err), 0);
    assert_int_equal(c.micro_batches, 512); /* 2048 / (4 * 1) */
    assert_int_equal(c.layers_per_stage, 6);
    assert_int_equal(c.inflight, 16);
    /* the first stage: (6 layers of 12h^2 + the embedding V h)/8 + 6 layers' norms (4h) */
    NEAR(c.params_per_gpu, 1437894144.0, 1e-12);
    NEAR(c.mem_weights, 2875788288.0, 1e-12);
    NEAR(c.mem_grads, 5751576576.0, 1e-12); /* fp32 main gradients */
    NEAR(c.mem_optim, 4313682432.0, 1e-12); /* 12 psi / 4 */
    /* 34sbh/8 * 6 layers * 16 in flight + (8sb + sbh) * 16 / 8 */
    NEAR(c.mem_act, 10318020608.0, 1e-12);
    NEAR(c.mem_total, 23259067904.0, 1e-12);
    NEAR(c.gpu_mem, 80e9, 0);
    assert_string_equal(c.gpu_mem_source, "default");
    assert_true(c.fits);
    NEAR(c.tp_bytes_layer, 352321536.0, 1e-12); /* 4 * 2*7/8 * sbh * 2 */
    NEAR(c.tp_time, 2.40518168576, 1e-9);       /* * 6 layers * 512 / 450e9 */
    NEAR(c.pp_bytes_boundary, 100663296.0, 1e-12);
    NEAR(c.pp_latency, 2 * 512 * 5e-6, 1e-12);      /* fwd + bwd message per micro-batch, 5 us on RACK */
    NEAR(c.pp_time, 0.12884901888 + 0.00512, 1e-9); /* /8 * 512 / 50e9 + latency */
    NEAR(c.dp_bytes_step, 4313682432.0, 1e-12);     /* 2*3/4 * 2 psi */
    NEAR(c.dp_time, 0.17254729728, 1e-9);           /* / 25e9 */
    /* last stage: 6 layers of (1 + s/6h) plus the LM head V/16h, against
     * (96 (1 + s/6h) + V/16h)/16 on average */
    const double lw = 1 + 2048.0 / (6 * 12288), hw = 51200.0 / (16 * 12288);
    NEAR(c.stage_imbalance, (6 * lw + hw) / ((96 * lw + hw) / 16), 1e-12);
    NEAR(c.stage_imbalance, 1.039486153522165, 1e-12);
    NEAR(c.compute_time, 22.02622438146048 * 1.039486153522165, 1e-9); /* 4.511e18/(512*400e12) */
    NEAR(c.bubble, 15.0 / 527.0, 1e-12);
    /* DP overlaps the last micro-batch's backward on the slowest stage:
     * 2/3 of compute/512 = 0.02981 s hidden, 0.14273 s exposed (more than
     * the first layer's bucket, dp/6) */
    NEAR(c.dp_overlap, 22.89595525890048 / 512 * 2 / 3, 1e-9);
    NEAR(c.dp_exposed, 0.14273485553664, 1e-9);
    /* (compute + tp + pp) * (1 + 15/512) + exposed dp */
    NEAR(c.step_time, 26.323009939102718, 1e-9);
    NEAR(c.mfu, 0.33842949901713665, 1e-9);
    /* no cluster: H100 figures */
    NEAR(c.tflops, 400, 0);
    NEAR(c.peak_tflops, 989, 0);
    assert_string_equal(c.gpu_name, "H100");
    assert_string_equal(c.tflops_source, "--tflops");
    /* without --tflops the time follows the GEMM shapes, and says that H100 was assumed */
    j.tflops = 0;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c, &err), 0);
    assert_string_equal(c.tflops_source, "GEMM shapes, H100 assumed");
    assert_true(c.tflops > 0.3 * 989 && c.tflops < 0.8 * 989);
}

/* Cluster figures win over defaults: link_gbps and the GPU's memory. */
static void eval_cluster_overrides(void **state)
{
    (void)state;
    p3d_job j;
    job_175b(&j);
    j.gpu_mem_bytes = 40e9;
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_TP] = P3D_LINK_NVLINK;
    link[P3D_DIM_PP] = P3D_LINK_RACK;
    link[P3D_DIM_DP] = P3D_LINK_XRACK;
    p3d_cluster cl;
    memset(&cl, 0, sizeof cl);
    cl.link_gbps[P3D_LINK_XRACK] = 50;
    p3d_cost c;
    assert_int_equal(p3d_cost_eval(&cl, &j, link, &c, NULL), 0);
    NEAR(c.dp_time, 0.08627364864, 1e-9); /* 4.313682432e9 / 50e9 */
    NEAR(c.gpu_mem, 40e9, 0);
    assert_string_equal(c.gpu_mem_source, "--gpu-mem");

    p3d_gpu g[2];
    memset(g, 0, sizeof g);
    g[0].mem_bytes = 85520809984ull; /* H100 80GB HBM3 as nvidia-smi counts it */
    g[1].mem_bytes = 85520809984ull;
    p3d_node n;
    memset(&n, 0, sizeof n);
    n.ngpus = 2;
    n.gpus = g;
    p3d_node *tp[1] = {&n};
    cl.ntopos = 1;
    cl.topos = tp;
    /* an explicit --gpu-mem wins over what the topology knows */
    assert_int_equal(p3d_cost_eval(&cl, &j, link, &c, NULL), 0);
    NEAR(c.gpu_mem, 40e9, 0);
    assert_string_equal(c.gpu_mem_source, "--gpu-mem");
    double keep = j.gpu_mem_bytes;
    j.gpu_mem_bytes = 0;
    assert_int_equal(p3d_cost_eval(&cl, &j, link, &c, NULL), 0);
    NEAR(c.gpu_mem, 85520809984.0, 0);
    assert_string_equal(c.gpu_mem_source, "topology");
    /* headroom: 5% of the GPU (4.28 GB here), at least 3 GB; --mem-reserve sets it */
    NEAR(c.mem_reserve, 0.05 * 85520809984.0, 1);
    assert_string_equal(c.mem_reserve_source, "default");
    NEAR(p3d_cost_default_reserve(40e9), 3e9, 0);
    assert_int_equal(c.fits, c.mem_total <= c.gpu_mem - c.mem_reserve);
    j.mem_reserve_set = 1;
    j.mem_reserve_bytes = 0;
    assert_int_equal(p3d_cost_eval(&cl, &j, link, &c, NULL), 0);
    NEAR(c.mem_reserve, 0, 0);
    assert_int_equal(c.fits, c.fits_raw);
    j.mem_reserve_set = 0;
    j.gpu_mem_bytes = keep;

    /* the GPU model picks the peak and the family's GEMM figures; a mixed
     * cluster uses its slowest known family; --tflops still wins */
    strcpy(g[0].model, "NVIDIA A100-SXM4-80GB");
    assert_int_equal(p3d_cost_eval(&cl, &j, link, &c, NULL), 0);
    assert_string_equal(c.gpu_name, "A100");
    NEAR(c.peak_tflops, 312, 0);
    assert_true(c.tflops > 0.3 * 312 && c.tflops < 0.75 * 312);
    assert_string_equal(c.tflops_source, "GEMM shapes");
    strcpy(g[1].model, "Tesla V100-SXM2-32GB");
    assert_int_equal(p3d_cost_eval(&cl, &j, link, &c, NULL), 0);
    assert_string_equal(c.gpu_name, "V100");
    assert_true(c.tflops < 0.8 * 125);
    j.tflops = 100;
    assert_int_equal(p3d_cost_eval(&cl, &j, link, &c, NULL), 0);
    NEAR(c.tflops, 100, 0);
    NEAR(c.peak_tflops, 125, 0);
    assert_string_equal(c.tflops_source, "--tflops");
}

/* b, m, B: one resolution for the cost model and the checks. */
static void batch_resolve(void **state)
{
    (void)state;
    p3d_job j;
    p3d_batch bt;
    char *err = NULL;
    p3d_job_init(&j);
    j.mesh.size[P3D_DIM_PP] = 4;
    j.micro_batches = 2;
    j.global_batch = 64; /* dp 1: b = 64 / 2 = 32, derived */
    assert_int_equal(p3d_batch_resolve(&j, &bt, &err), 0);
    assert_int_equal(bt.b, 32);
    assert_true(bt.b_derived);
    j.mesh.size[P3D_DIM_DP] = 2;
    j.micro_batch_size = 2;
    j.micro_batches = 4; /* 2 x 2 x 4 = 16 != 64 */
    assert_int_equal(p3d_batch_resolve(&j, &bt, &err), -1);
    assert_non_null(strstr(err, "= 16 samples, but --global-batch is 64"));
    P3D_FREE(&err);
    j.micro_batches = 0; /* m = 64 / (2 x 2) */
    assert_int_equal(p3d_batch_resolve(&j, &bt, &err), 0);
    assert_int_equal(bt.m, 16);
    assert_true(bt.m_derived);
    j.global_batch = 0; /* nothing to go by: m = 4 pp */
    assert_int_equal(p3d_batch_resolve(&j, &bt, &err), 0);
    assert_int_equal(bt.m, 16);
    assert_true(bt.m_assumed);
    assert_int_equal(bt.B, 64);
}

/* A DP all-reduce shorter than one micro-batch's backward still exposes
 * its first-layer bucket: 1/ceil(L/p) of it. */
static void dp_overlap_floor(void **state)
{
    (void)state;
    p3d_job j;
    job_175b(&j);
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_TP] = P3D_LINK_NVLINK;
    link[P3D_DIM_PP] = P3D_LINK_NVLINK;
    link[P3D_DIM_DP] = P3D_LINK_NVLINK; /* 4.3 GB at 450 GB/s = 9.6 ms < 29.8 ms backward */
    p3d_cost c;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c, NULL), 0);
    NEAR(c.dp_time, 4313682432.0 / 450e9, 1e-9);
    NEAR(c.dp_exposed, c.dp_time / 6, 1e-12);
    NEAR(c.pp_latency, 2 * 512 * 2e-6, 1e-12);
}

/* 70B in bf16 does not fit one GPU: 18 bytes/param of model state
 * (Megatron's count: the whole model, both embeddings, on the one shard),
 * and the bf16 weights alone are 138 GB > 80 GB. */
static void eval_70b_one_gpu(void **state)
{
    (void)state;
    p3d_job j;
    p3d_job_init(&j);
    assert_int_equal(p3d_model_preset("llama2-70b", &j.model, NULL), 0);
    j.has_model = 1;
    j.global_batch = 8;
    p3d_cost c;
    assert_int_equal(p3d_cost_eval(NULL, &j, NULL, &c, NULL), 0);
    assert_false(c.fits);
    assert_true(c.mem_weights > 80e9);
    NEAR(c.mem_weights + c.mem_grads + c.mem_optim, 18 * j.model.params, 1e-12);
    NEAR(j.model.params, 68.98e9, 0.002); /* the published total */
    assert_int_equal(c.micro_batches, 8);
    NEAR(c.bubble, 0, 0);
    NEAR(c.tp_time + c.pp_time + c.dp_time, 0, 0); /* one GPU: no traffic */
}

static void eval_full_recompute_and_interleave(void **state)
{
    (void)state;
    p3d_job j;
    job_175b(&j);
    j.recompute = 2;
    j.virtual_stages = 2;
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_TP] = P3D_LINK_NVLINK;
    link[P3D_DIM_PP] = P3D_LINK_RACK;
    link[P3D_DIM_DP] = P3D_LINK_XRACK;
    p3d_cost c;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c, NULL), 0);
    const double sbh = 2048.0 * 12288;
    /* 2sbh/8 per layer * 6 layers * 16 in flight * (1 + 15/32), the
     * embedding's (8sb + sbh)/8 per micro-batch in flight, one layer 34sbh/8 */
    const double flight = 16 * (1 + 15.0 / 32);
    NEAR(c.mem_act, 2 * sbh / 8 * 6 * flight + (8 * 2048 + sbh) / 8 * flight + 34 * sbh / 8, 1e-12);
    NEAR(c.tp_bytes_layer, 6 * 2 * 7.0 / 8 * sbh * 2, 1e-12); /* 6 all-reduces */
    NEAR(c.pp_time, 2 * (0.12884901888 + 0.00512), 1e-9);     /* v x the boundaries */
    NEAR(c.bubble_overhead, 15.0 / 1024, 1e-12);              /* (p-1)/(v*m) */
    NEAR(c.flops_step, 96.0 / 72.0 * c.flops_model, 1e-12);
    j.zero = 3;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c, NULL), 0);
    NEAR(c.dp_bytes_step, 1.5 * 4313682432.0, 1e-12);
}

/* Pipeline traffic hop by hop: a pipeline with 2 rack hops and 1 cross-rack
 * hop pays the average of its hops, not the worst link on all three. */
static void eval_per_hop_pp(void **state)
{
    (void)state;
    p3d_job j;
    job_175b(&j);
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_TP] = P3D_LINK_NVLINK;
    link[P3D_DIM_PP] = P3D_LINK_XRACK;
    link[P3D_DIM_DP] = P3D_LINK_XRACK;
    p3d_hops mixed, worst;
    memset(&mixed, 0, sizeof mixed);
    memset(&worst, 0, sizeof worst);
    mixed.n[P3D_DIM_PP][P3D_LINK_RACK] = 2;
    mixed.n[P3D_DIM_PP][P3D_LINK_XRACK] = 1;
    worst.n[P3D_DIM_PP][P3D_LINK_XRACK] = 3;
    p3d_cost cm, cw, cr, c0;
    assert_int_equal(p3d_cost_eval_hops(NULL, &j, link, &mixed, &cm, NULL), 0);
    assert_int_equal(p3d_cost_eval_hops(NULL, &j, link, &worst, &cw, NULL), 0);
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c0, NULL), 0);
    link[P3D_DIM_PP] = P3D_LINK_RACK;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &cr, NULL), 0);
    NEAR(cw.pp_time, c0.pp_time, 1e-12); /* all hops on the worst link: as before */
    NEAR(cm.pp_time, (2 * cr.pp_time + c0.pp_time) / 3, 1e-9);
    assert_true(cm.pp_time < cw.pp_time);
    assert_true(cm.step_time < cw.step_time);
    assert_true(cm.has_hops);
    /* collectives are paced by their slowest hop: hops do not change tp/dp */
    NEAR(cm.dp_time, cw.dp_time, 0);
}

static void eval_bad_input(void **state)
{
    (void)state;
    p3d_job j;
    p3d_cost c;
    char *err = NULL;
    p3d_job_init(&j);
    assert_int_equal(p3d_cost_eval(NULL, &j, NULL, &c, &err), -1);
    assert_non_null(strstr(err, "--model"));
    P3D_FREE(&err);
    job_175b(&j);
    j.global_batch = 2047;
    assert_int_equal(p3d_cost_eval(NULL, &j, NULL, &c, &err), -1);
    assert_non_null(strstr(err, "2047"));
    P3D_FREE(&err);
    job_175b(&j);
    j.mesh.size[P3D_DIM_PP] = 97;
    assert_int_equal(p3d_cost_eval(NULL, &j, NULL, &c, &err), -1);
    assert_non_null(strstr(err, "layers"));
    P3D_FREE(&err);
    job_175b(&j);
    j.micro_batches = 7; /* 4 * 1 * 7 != 2048 */
    assert_int_equal(p3d_cost_eval(NULL, &j, NULL, &c, &err), -1);
    P3D_FREE(&err);
}

/* Compute time from GEMM shapes: efficiency rises with every dimension
 * towards the family's ceiling; a wider h/t runs closer to peak; full
 * recompute adds a forward, selective only the attention's; small expert
 * GEMMs split over etp run worse than whole experts over ep. */
static void gemm_shapes(void **state)
{
    (void)state;
    const p3d_gpu_perf g = {3.35, 0.8, 64, 128, 0.5};
    NEAR(p3d_gemm_eff(&g, 64, 128, 128), 0.8 * 0.5 * 0.5 * 0.5, 1e-12);
    assert_true(p3d_gemm_eff(&g, 4096, 1024, 8192) < p3d_gemm_eff(&g, 4096, 2048, 8192));
    assert_true(p3d_gemm_eff(&g, 1e9, 1e9, 1e9) <= 0.8);
    p3d_job j;
    job_175b(&j);
    p3d_model_counts mc;
    assert_int_equal(p3d_model_count(&j.model, &mc, NULL), 0);
    p3d_cost t8, t4, full, none;
    memset(&t8, 0, sizeof t8);
    p3d_compute_times(&g, 989, &j.model, &mc, 1, 8, 1, 1, 8, 1, 2, &t8);
    p3d_compute_times(&g, 989, &j.model, &mc, 1, 4, 1, 1, 4, 1, 2, &t4);
    p3d_compute_times(&g, 989, &j.model, &mc, 1, 8, 1, 1, 8, 2, 2, &full);
    p3d_compute_times(&g, 989, &j.model, &mc, 1, 8, 1, 1, 8, 0, 2, &none);
    assert_true(t4.gemm_eff > t8.gemm_eff);
    NEAR(t8.t_layer, t8.t_layer_gemm + t8.t_layer_attn + t8.t_layer_mem, 1e-12);
    NEAR(full.t_layer - none.t_layer, (none.t_layer_gemm + none.t_layer_attn + none.t_layer_mem) / 3, 1e-9);
    NEAR(t8.t_layer - none.t_layer, none.t_layer_attn / 3, 1e-9);
    /* DeepSeek-V3's 2048-wide experts: 8 ways of etp leave 256 columns and
     * 128 tokens per expert; ep 8 keeps them whole with 8x the tokens */
    p3d_model ds;
    assert_int_equal(p3d_model_preset("deepseek-v3", &ds, NULL), 0);
    assert_int_equal(p3d_model_count(&ds, &mc, NULL), 0);
    p3d_cost etp8, ep8;
    p3d_compute_times(&g, 989, &ds, &mc, 1, 8, 1, 1, 8, 1, 2, &etp8);
    p3d_compute_times(&g, 989, &ds, &mc, 1, 8, 1, 8, 1, 1, 2, &ep8);
    assert_true(ep8.t_layer_gemm < etp8.t_layer_gemm);
}

static void link_defaults(void **state)
{
    (void)state;
    NEAR(p3d_link_default_gbps(P3D_LINK_NVLINK), 450, 0);
    NEAR(p3d_link_default_gbps(P3D_LINK_MNNVL), 900, 0);   /* GB200: 1.8 TB/s bidirectional */
    NEAR(p3d_link_default_gbps(P3D_LINK_PIX), 64, 0);      /* PCIe Gen5 x16 */
    NEAR(p3d_link_default_gbps(P3D_LINK_XRACK), 25, 0);    /* 2:1 oversubscribed spine */
    for (int l = P3D_LINK_PIX; l + 1 < P3D_LINK_RACK; l++) /* PCIe: slower the farther */
        assert_true(p3d_link_default_gbps((p3d_link)l) >= p3d_link_default_gbps((p3d_link)(l + 1)));
    NEAR(p3d_link_gbps(NULL, P3D_LINK_RACK), 50, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zero_paper_example),
        cmocka_unit_test(bubble),
        cmocka_unit_test(activations),
        cmocka_unit_test(flops),
        cmocka_unit_test(presets),
        cmocka_unit_test(eval_175b),
        cmocka_unit_test(eval_cluster_overrides),
        cmocka_unit_test(batch_resolve),
        cmocka_unit_test(dp_overlap_floor),
        cmocka_unit_test(eval_70b_one_gpu),
        cmocka_unit_test(eval_full_recompute_and_interleave),
        cmocka_unit_test(eval_per_hop_pp),
        cmocka_unit_test(eval_bad_input),
        cmocka_unit_test(link_defaults),
        cmocka_unit_test(gemm_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
