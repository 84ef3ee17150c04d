/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cost_moe.c — the mixture-of-experts parts of the cost model against
 * hand-computed values (docs/cost-model.md, "Mixture of experts"); the
 * arithmetic is written out next to each expectation. */
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

#define NEAR(x, want, rel)                                                              \
    do {                                                                                \
        double x_ = (x), w_ = (want);                                                   \
        if (!(fabs(x_ - w_) <= (rel) * fabs(w_) + 1e-12))                               \
            fail_msg("%s = %.12g, want %.12g (rel %.g)", #x, x_, w_, (double)(rel));     \
    } while (0)

/* DeepSeek-V3: one SwiGLU expert 3*7168*2048 = 44,040,192 weights;
 *   routed   58 MoE layers * 256 * 44,040,192          = 653,908,770,816
 *   shared   58 * 1 * 44,040,192                       =   2,554,331,136
 *   dense    3 layers * 3*7168*18432                   =   1,189,085,184
 *   emb      2 * 129280 * 7168                         =   1,853,358,080
 *   attention = 671e9 - the four                       =  11,494,454,784
 *   active   = attn + 58*(8+1)*44,040,192 + dense + emb
 *            = 11,494,454,784 + 22,988,980,224 + 1,189,085,184 + 1,853,358,080
 *            = 37,525,878,272 (the report says 37B)
 *   matmul W = active - emb = 35,672,520,192 */
static void params_deepseek_v3(void **state)
{
    (void)state;
    p3d_model m;
    double e, a, w;
    assert_int_equal(p3d_model_preset("deepseek-v3", &m, NULL), 0);
    assert_int_equal(m.experts, 256);
    assert_int_equal(m.top_k, 8);
    assert_int_equal(m.moe_ffn, 2048);
    assert_int_equal(m.shared_experts, 1);
    assert_int_equal(m.dense_layers, 3);
    assert_int_equal(m.ffn, 18432);
    assert_int_equal(p3d_cost_moe_params(&m, &e, &a, &w, NULL), 0);
    NEAR(e, 653908770816.0, 1e-12);
    NEAR(a, 37525878272.0, 1e-12);
    NEAR(w, 35672520192.0, 1e-12);
}

/* Mixtral 8x22B: one expert 3*6144*16384 = 301,989,888;
 *   routed 56*8*301,989,888 = 135,291,469,824; emb 2*32000*6144 = 393,216,000;
 *   attention 140.6e9 - both = 4,915,314,176;
 *   active 4,915,314,176 + 56*2*301,989,888 + 393,216,000 = 39,131,397,632
 *   (Mistral AI: 39B active of 141B). A dense model: W = 12*L*h^2. */
static void params_mixtral_and_dense(void **state)
{
    (void)state;
    p3d_model m;
    double e, a, w;
    assert_int_equal(p3d_model_preset("mixtral-8x22b", &m, NULL), 0);
    assert_int_equal(p3d_cost_moe_params(&m, &e, &a, &w, NULL), 0);
    NEAR(e, 135291469824.0, 1e-12);
    NEAR(a, 39131397632.0, 1e-12);
    NEAR(w, 39131397632.0 - 393216000.0, 1e-12);
    assert_int_equal(p3d_model_preset("gpt3-175b", &m, NULL), 0);
    assert_int_equal(p3d_cost_moe_params(&m, &e, &a, &w, NULL), 0);
    NEAR(e, 0, 0);
    NEAR(a, 175e9, 1e-12);
    NEAR(w, 12.0 * 96 * 12288.0 * 12288.0, 1e-12);
    /* experts that cannot fit the parameter count are refused */
    char *err = NULL;
    assert_int_equal(p3d_model_preset("mixtral-8x22b", &m, NULL), 0);
    m.params = 100e9; /* < 135.3B of routed experts */
    assert_int_equal(p3d_cost_moe_params(&m, &e, &a, &w, &err), -1);
    assert_non_null(strstr(err, "cannot hold its experts"));
    P3D_FREE(&err);
}

/* 4 all-to-alls (dispatch, combine; forward, backward) of b*s/(cp*t) tokens
 * * top-k * h * 2 bytes * (ep-1)/ep:
 *   b=1 s=4096 h=7168 k=8 t=1 cp=1 ep=64: 4*4096*8*7168*2*63/64
 *   = 1,879,048,192 * 63/64 = 1,849,688,064 */
static void ep_bytes(void **state)
{
    (void)state;
    NEAR(p3d_cost_ep_bytes_layer(1, 4096, 7168, 8, 1, 1, 64, 2, 1), 1849688064.0, 1e-12);
    /* t=2, cp=2: a quarter of the tokens per GPU */
    NEAR(p3d_cost_ep_bytes_layer(1, 4096, 7168, 8, 2, 2, 64, 2, 1), 1849688064.0 / 4, 1e-12);
    /* full recompute: the forward's two again, 6 instead of 4 */
    NEAR(p3d_cost_ep_bytes_layer(1, 4096, 7168, 8, 1, 1, 64, 2, 2), 1849688064.0 * 1.5, 1e-12);
    /* ep=2: half leaves the GPU: 4*4096*2*6144*2*1/2 = 201,326,592 (Mixtral top-2) */
    NEAR(p3d_cost_ep_bytes_layer(1, 4096, 6144, 2, 1, 1, 2, 2, 0), 201326592.0, 1e-12);
    NEAR(p3d_cost_ep_bytes_layer(1, 4096, 7168, 8, 1, 1, 1, 2, 1), 0, 0);
}

/* DeepSeek-V3 layer, s=4096 b=1 h=7168 a=128, selective recompute:
 *   t=1: dense sbh*34 = 998,244,352; MLP 19sbh = 557,842,432;
 *        MoE 2sbh + sb*9*(2h + 6*2048) = 58,720,256 + 36864*26624
 *            = 58,720,256 + 981,467,136 = 1,040,187,392
 *        -> 998,244,352 - 557,842,432 + 1,040,187,392 = 1,480,589,312
 *   t=etp=4 with SP: 249,561,088 - 139,460,608 + (14,680,064 + 36864*(4*14336 + 12288)/4)
 *        = 249,561,088 - 139,460,608 + 656,408,576 = 766,509,056
 *   full recompute: the layer input only, 2sbh = 58,720,256 */
static void act_moe(void **state)
{
    (void)state;
    NEAR(p3d_cost_act_moe_layer(4096, 1, 7168, 128, 1, 0, 1, 9, 2048, 1), 1480589312.0, 1e-12);
    NEAR(p3d_cost_act_moe_layer(4096, 1, 7168, 128, 4, 1, 1, 9, 2048, 4), 766509056.0, 1e-12);
    NEAR(p3d_cost_act_moe_layer(4096, 1, 7168, 128, 1, 0, 2, 9, 2048, 1), 58720256.0, 1e-12);
}

/* 72*B*s*(W/12 + L*s*h/6 + h*V/16), DeepSeek-V3, B=1, s=4096:
 *   W/12 = 35,672,520,192/12 = 2,972,710,016; 61*4096*7168/6 = 298,494,634.67;
 *   7168*129280/16 = 57,917,440; sum 3,329,122,090.67 * 72 * 4096 = 981,798,054,002,688. W = 12Lh^2 is the dense formula. */
static void flops_w(void **state)
{
    (void)state;
    NEAR(p3d_cost_flops_w(72, 1, 4096, 61, 7168, 129280, 35672520192.0), 981798054002688.0, 1e-12);
    NEAR(p3d_cost_flops_w(72, 1536, 2048, 96, 12288, 51200, 12.0 * 96 * 12288.0 * 12288.0),
         p3d_cost_flops(72, 1536, 2048, 96, 12288, 51200), 1e-12);
}

static void job_dsv3(p3d_job *j)
{
    p3d_job_init(j);
    j->mesh.size[P3D_DIM_TP] = 1;
    j->mesh.size[P3D_DIM_PP] = 16;
    j->mesh.size[P3D_DIM_DP] = 128;
    j->mesh.size[P3D_DIM_EP] = 64;
    j->global_batch = 15360;
    j->micro_batch_size = 1;
    j->zero = 1;
    j->recompute = 1;
    assert_int_equal(p3d_model_preset("deepseek-v3", &j->model, NULL), 0);
    j->has_model = 1;
}

/* DeepSeek-V3's published layout on 2048 GPUs: tp1 pp16 ep64, dp 128 (ZeRO-1),
 * edp = 2048/(1*64*16) = 2; B = 15360, b = 1, m = 15360/128 = 120.
 *   dense psi = (671e9 - 653,908,770,816)/16 = 1,068,201,824
 *   expert psi = 653,908,770,816/(1*64*16) = 638,582,784
 *   weights 2*(both) = 3,413,569,216; optimizer 12*1,068,201,824/128 + 12*638,582,784/2
 *   = 100,143,921 + 3,831,496,704 = 3,931,640,625
 *   EP: 1,849,688,064 per layer * 4 MoE layers per stage * 120 = 887,850,270,720 B
 *       on RACK (50 GB/s): 17.7570054144 s
 *   edp: 2*(1/2)*2*638,582,784 = 1,277,165,568 B on XRACK (25 GB/s): 0.05108662272 s
 *   dp: 2*(127/128)*2*1,068,201,824 = 4,239,425,989 B */
static void eval_deepseek_layout(void **state)
{
    (void)state;
    p3d_job j;
    job_dsv3(&j);
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_PP] = P3D_LINK_RACK;
    link[P3D_DIM_DP] = P3D_LINK_XRACK;
    link[P3D_DIM_EP] = P3D_LINK_RACK;
    link[P3D_DIM_EDP] = P3D_LINK_XRACK;
    p3d_cost c;
    char *err = NULL;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c, &err), 0);
    assert_true(c.moe);
    NEAR(c.params_expert_per_gpu, 638582784.0, 1e-12);
    NEAR(c.params_per_gpu, 1068201824.0 + 638582784.0, 1e-12);
    NEAR(c.mem_weights, 3413569216.0, 1e-12);
    NEAR(c.mem_grads, 3413569216.0, 1e-12);
    NEAR(c.mem_optim, 3931640625.0, 1e-9);
    assert_int_equal(c.moe_layers_per_stage, 4);
    NEAR(c.ep_bytes_step, 887850270720.0, 1e-12);
    NEAR(c.ep_time, 17.7570054144, 1e-12);
    NEAR(c.edp_bytes_step, 1277165568.0, 1e-12);
    NEAR(c.edp_time, 0.05108662272, 1e-12);
    NEAR(c.dp_bytes_step, 4239425989.0, 1e-9);
    /* the EP all-to-alls are on the critical path: moving them to NVLink
     * (450 GB/s) saves (17.757 - 887.85/450) s times the bubble stretch */
    p3d_cost nv;
    link[P3D_DIM_EP] = P3D_LINK_NVLINK;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &nv, NULL), 0);
    NEAR(c.step_time - nv.step_time, (17.7570054144 - 887.85027072 / 450) * (1 + c.bubble_overhead), 1e-9);
    /* ep sharding: ep=32 doubles the routed experts per GPU */
    j.mesh.size[P3D_DIM_EP] = 32;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &nv, NULL), 0);
    NEAR(nv.params_expert_per_gpu, 2 * 638582784.0, 1e-12);
}

/* bad ep: not dividing the experts, or on a dense model */
static void eval_bad_ep(void **state)
{
    (void)state;
    p3d_job j;
    p3d_cost c;
    char *err = NULL;
    job_dsv3(&j);
    j.mesh.size[P3D_DIM_EP] = 3;
    j.mesh.size[P3D_DIM_DP] = 96;
    j.mesh.size[P3D_DIM_PP] = 1;
    assert_int_equal(p3d_cost_eval(NULL, &j, NULL, &c, &err), -1);
    assert_non_null(strstr(err, "--ep 3 does not divide the 256 experts"));
    P3D_FREE(&err);
    p3d_job_init(&j);
    j.mesh.size[P3D_DIM_EP] = 2;
    j.mesh.size[P3D_DIM_DP] = 2;
    j.global_batch = 8;
    assert_int_equal(p3d_model_preset("llama2-7b", &j.model, NULL), 0);
    j.has_model = 1;
    assert_int_equal(p3d_cost_eval(NULL, &j, NULL, &c, &err), -1);
    assert_non_null(strstr(err, "is dense"));
    P3D_FREE(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(params_deepseek_v3),
        cmocka_unit_test(params_mixtral_and_dense),
        cmocka_unit_test(ep_bytes),
        cmocka_unit_test(act_moe),
        cmocka_unit_test(flops_w),
        cmocka_unit_test(eval_deepseek_layout),
        cmocka_unit_test(eval_bad_ep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
