/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cost_uneven.c — uneven pipeline stages (Megatron's
 * --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers):
 * the split Megatron accepts or refuses, the fullest stage setting the
 * memory and the slowest (the last runs the output layer) the pace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "p3d/p3d.h"

#define NEAR(a, b, rel) assert_true(fabs((double)(a) - (double)(b)) <= (rel)*fabs((double)(b)) + 1e-9)

static void splits(void **state)
{
    (void)state;
    int l[3];
    char *err = NULL;
    assert_int_equal(p3d_cost_stage_layers(32, 4, 1, 0, 0, l, &err), 0);
    assert_true(l[0] == 8 && l[1] == 8 && l[2] == 8);
    assert_int_equal(p3d_cost_stage_layers(32, 4, 1, 0, 5, l, &err), 0); /* 9 9 9 5 */
    assert_true(l[0] == 9 && l[1] == 9 && l[2] == 5);
    assert_int_equal(p3d_cost_stage_layers(32, 4, 1, 7, 7, l, &err), 0); /* 7 9 9 7 */
    assert_true(l[0] == 7 && l[1] == 9 && l[2] == 7);
    assert_int_equal(p3d_cost_stage_layers(32, 2, 1, 10, 0, l, &err), 0); /* no middle: 10 22 */
    assert_true(l[0] == 10 && l[1] == 10 && l[2] == 22);
    assert_int_equal(p3d_cost_stage_layers(32, 2, 1, 10, 22, l, &err), 0);
    /* refused as Megatron refuses them */
    assert_int_equal(p3d_cost_stage_layers(32, 4, 1, 0, 7, l, &err), -1); /* 25 over 3 stages */
    assert_non_null(strstr(err, "remaining 25 of 32 layers"));
    assert_int_equal(p3d_cost_stage_layers(32, 2, 1, 10, 10, l, &err), -1); /* 12 layers on no stage */
    assert_int_equal(p3d_cost_stage_layers(32, 4, 1, 20, 20, l, &err), -1);
    assert_int_equal(p3d_cost_stage_layers(32, 4, 1, 15, 15, l, &err), 0);  /* middles of one layer */
    assert_int_equal(p3d_cost_stage_layers(32, 4, 1, 15, 16, l, &err), -1); /* one layer, two stages */
    assert_int_equal(p3d_cost_stage_layers(32, 1, 1, 0, 5, l, &err), -1);
    assert_non_null(strstr(err, "pp > 1"));
    assert_int_equal(p3d_cost_stage_layers(32, 4, 2, 0, 5, l, &err), -1);
    assert_non_null(strstr(err, "interleaving"));
    free(err);
}

static void job_8b(p3d_job *j, int first, int last)
{
    p3d_job_init(j);
    j->mesh.size[P3D_DIM_TP] = 2;
    j->mesh.size[P3D_DIM_PP] = 4;
    j->mesh.size[P3D_DIM_DP] = 2;
    j->global_batch = 64;
    j->micro_batch_size = 1;
    j->zero = 1;
    j->recompute = 1;
    j->first_stage_layers = first;
    j->last_stage_layers = last;
    assert_int_equal(p3d_model_preset("llama3-8b", &j->model, NULL), 0);
    j->has_model = 1;
}

static void eval(int first, int last, p3d_cost *c)
{
    p3d_job j;
    job_8b(&j, first, last);
    p3d_link link[P3D_NDIMS] = {0};
    link[P3D_DIM_TP] = P3D_LINK_NVLINK;
    link[P3D_DIM_PP] = P3D_LINK_NVLINK;
    link[P3D_DIM_DP] = P3D_LINK_RACK;
    char *err = NULL;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, c, &err), 0);
    free(err);
}

static double max3(const double *x)
{
    return fmax(x[0], fmax(x[1], x[2]));
}

/* Llama 3 8B (32 layers, a 128K-vocabulary output layer) at pp = 4, m = 32. */
static void memory_and_time(void **state)
{
    (void)state;
    p3d_cost even, c;
    eval(0, 0, &even);
    /* even stages: Megatron's estimator, the first stage sets the memory */
    assert_int_equal(even.uneven, 0);
    NEAR(even.mem_total, even.stage_mem[0], 1e-12);
    assert_true(even.stage_mem[2] < even.stage_mem[0]); /* 1 micro-batch held on the last vs 4 */
    /* the last stage with the output layer is the slowest */
    NEAR(even.compute_time, even.micro_batches * (8 * even.t_layer + even.t_head), 1e-9);

    /* 7 9 9 7: the middle stages (9 layers) are the slowest; the first,
     * one layer lighter, still the fullest */
    eval(7, 7, &c);
    assert_true(c.uneven && c.stage_layers[0] == 7 && c.stage_layers[1] == 9 && c.stage_layers[2] == 7);
    NEAR(c.compute_time, c.micro_batches * 9 * c.t_layer, 1e-9);
    assert_true(c.compute_time < even.compute_time);
    NEAR(c.mem_total, max3(c.stage_mem), 1e-12);
    /* the first stage lost one layer: its states and the activations of the
     * 4 micro-batches it holds (min(m, pp)) */
    NEAR(c.stage_mem[0], even.stage_mem[0] - (even.mem_layer_states + 4 * even.mem_layer_act), 1e-6);
    /* the second stage: 9 layers, 3 micro-batches held, no embedding */
    NEAR(c.stage_mem[1], 9 * (even.mem_layer_states + 3 * even.mem_layer_act), 1e-6);
    assert_true(c.mem_total < even.mem_total);

    /* 2 10 10 10: a middle stage is now the fullest, and sets the memory */
    eval(2, 0, &c);
    assert_true(c.stage_layers[0] == 2 && c.stage_layers[1] == 10 && c.stage_layers[2] == 10);
    assert_true(c.stage_mem[1] > c.stage_mem[0]);
    NEAR(c.mem_total, c.stage_mem[1], 1e-12);
    NEAR(c.compute_time, c.micro_batches * (10 * c.t_layer + c.t_head), 1e-9);

    /* 7 7 7 11: the last stage, already the slowest, gets slower */
    eval(0, 11, &c);
    NEAR(c.compute_time, c.micro_batches * (11 * c.t_layer + c.t_head), 1e-9);
    assert_true(c.step_time > even.step_time);
}

static void refused(void **state)
{
    (void)state;
    p3d_job j;
    job_8b(&j, 0, 7);
    p3d_link link[P3D_NDIMS] = {0};
    p3d_cost c;
    char *err = NULL;
    assert_int_equal(p3d_cost_eval(NULL, &j, link, &c, &err), -1);
    assert_non_null(strstr(err, "--decoder-last-pipeline-num-layers 7"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(splits),
        cmocka_unit_test(memory_and_time),
        cmocka_unit_test(refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
