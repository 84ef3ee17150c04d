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

#define NEAR(x, want, rel)                                                                                             \
    do {                                                                                                               \
        double x_ = (x), w_ = (want);                                                                                  \
        if (!(fabs(x_ - w_) <= (rel)*fabs(w_) + 1e-12))                                                                \
            fail_msg("%s = %.12g, want %.12g (rel %.g)", #x, x_, w_, (double)(rel));                                   \
    } while (0)

/* DeepSeek-V3 in Megatron-LM's estimator's terms (h 7168, 128 heads):
 *   MLA  q 1536*(7168 + 128*192 + 1) + kv 512*(7168 + 128*256 + 1)
 *        + 7168*64 + 128*128*7168                       =     187,107,328 per layer
 *   routed 58 MoE layers * 2*7168*2048*256*3/2          = 653,908,770,816
 *   the rest (dense MLPs, shared experts, norms, routers, embeddings)
 *   total                                               = 671,026,404,352 (671B)
 *   active (8 of the 256 experts)                       =  37,552,282,624 (37B)
 *   matmul W (active without norms, routers, embeddings)=  35,591,612,416 */
static void params_deepseek_v3(void **state)
{
    (void)state;
    p3d_model m;
    p3d_model_counts c;
    assert_int_equal(p3d_model_preset("deepseek-v3", &m, NULL), 0);
    assert_int_equal(m.experts, 256);
    assert_int_equal(m.top_k, 8);
    assert_int_equal(m.moe_ffn, 2048);
    assert_int_equal(m.shared_experts, 1);
    assert_int_equal(m.dense_layers, 3);
    assert_int_equal(m.ffn, 18432);
    assert_int_equal(p3d_model_count(&m, &c, NULL), 0);
    NEAR(c.attn, 187107328.0, 1e-12);
    NEAR(c.expert_block, 653908770816.0, 1e-12);
    NEAR(c.total, 671026404352.0, 1e-12);
    NEAR(m.params, 671026404352.0, 1e-12);
    NEAR(c.active, 37552282624.0, 1e-12);
    NEAR(c.matmul, 35591612416.0, 1e-12);
}

/* Mixtral 8x22B: attention 2h^2(1 + 8/48) = 88,080,384 per layer;
 *   routed 56*8*2*6144*16384*3/2 = 135,291,469,824; with norms (2h per
 *   layer), routers (8h), the final norm and untied embeddings 2*32000*6144
 *   the total is 140,620,634,112 (141B), active (top-2) 39,152,031,744
 *   (39B). A dense model: W = 12*L*h^2. */
static void params_mixtral_and_dense(void **state)
{
    (void)state;
    p3d_model m;
    p3d_model_counts c;
    assert_int_equal(p3d_model_preset("mixtral-8x22b", &m, NULL), 0);
    assert_int_equal(p3d_model_count(&m, &c, NULL), 0);
    NEAR(c.expert_block, 135291469824.0, 1e-12);
    NEAR(c.total, 140620634112.0, 1e-12);
    NEAR(c.active, 39152031744.0, 1e-12);
    NEAR(c.matmul, 38755368960.0, 1e-12);
    assert_int_equal(p3d_model_preset("gpt3-175b", &m, NULL), 0);
    assert_int_equal(p3d_model_count(&m, &c, NULL), 0);
    NEAR(c.expert_block, 0, 0);
    NEAR(c.active, c.total, 1e-12);
    NEAR(c.matmul, 12.0 * 96 * 12288.0 * 12288.0, 1e-12);
    /* --params smaller than the embeddings is refused; otherwise the
     * layers are scaled to it */
    char *err = NULL;
    assert_int_equal(p3d_model_preset("mixtral-8x22b", &m, NULL), 0);
    m.params = 1e8;
    m.params_forced = 1;
    assert_int_equal(p3d_model_count(&m, &c, &err), -1);
    assert_non_null(strstr(err, "cannot hold the embeddings"));
    P3D_FREE(&err);
    m.params = 100e9;
    assert_int_equal(p3d_model_count(&m, &c, &err), 0);
    NEAR(c.total, 100e9, 1e-12);
    NEAR(c.expert_block, 135291469824.0 * c.scale, 1e-12);
    /* experts that contradict themselves are refused, naming the model */
    assert_int_equal(p3d_model_preset("mixtral-8x22b", &m, NULL), 0);
    m.top_k = 9;
    assert_int_equal(p3d_model_count(&m, &c, &err), -1);
    assert_non_null(strstr(err, "top-k"));
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

/* 72*B*s*(W/12 + L*s*h/6 + h*V/16), B=1, s=4096, W = 35,672,520,192:
 *   W/12 = 2,972,710,016; 61*4096*7168/6 = 298,494,634.67;
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
 * The first stage holds 4 of the 61 layers' share (f = 4/61) and the embedding:
 *   dense psi = tp_block*f + V*h + norms*f      = 1,927,615,135.475
 *   expert psi = 653,908,770,816*f/64           =   669,988,494.689
 *   weights 2*(both); fp32 main gradients 4*(both);
 *   optimizer 12*dense/128 + 12*expert/2        = 4,200,644,887.08
 *   EP: 1,849,688,064 per layer * 4 MoE layers per stage * 120 = 887,850,270,720 B
 *       on RACK (50 GB/s): 17.7570054144 s
 *   edp: 2*(1/2)*2*669,988,494.689 = 1,339,976,989.38 B on XRACK (25 GB/s)
 *   dp: 2*(127/128)*2*1,927,615,135.475 = 7,650,222,568.92 B */
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
    NEAR(c.params_expert_per_gpu, 669988494.6885246, 1e-12);
    NEAR(c.params_per_gpu, 1927615135.47541 + 669988494.6885246, 1e-12);
    NEAR(c.mem_weights, 5195207260.327869, 1e-12);
    NEAR(c.mem_grads, 10390414520.655739, 1e-12);
    NEAR(c.mem_optim, 4200644887.081967, 1e-9);
    assert_int_equal(c.moe_layers_per_stage, 4);
    NEAR(c.ep_bytes_step, 887850270720.0, 1e-12);
    NEAR(c.ep_time, 17.7570054144, 1e-12);
    NEAR(c.edp_bytes_step, 1339976989.3770492, 1e-12);
    NEAR(c.edp_time, 0.05359907957508197, 1e-12);
    NEAR(c.dp_bytes_step, 7650222568.918034, 1e-9);
    /* the EP all-to-alls are on the critical path: moving them to NVLink
     * (450 GB/s) saves (17.757 - 887.85/450) s times the bubble stretch */
    p3d_cost nv;
    link[P3D_DIM_EP] = P3D_LINK_NVLINK;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &nv, NULL), 0);
    NEAR(c.step_time - nv.step_time, (17.7570054144 - 887.85027072 / 450) * (1 + c.bubble_overhead), 1e-9);
    /* ep sharding: ep=32 doubles the routed experts per GPU */
    j.mesh.size[P3D_DIM_EP] = 32;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &nv, NULL), 0);
    NEAR(nv.params_expert_per_gpu, 2 * 669988494.6885246, 1e-12);
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
        cmocka_unit_test(flops_w),
        cmocka_unit_test(eval_deepseek_layout),
        cmocka_unit_test(eval_bad_ep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
