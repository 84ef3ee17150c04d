/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend's GPU-free rules (worker/cuda/cuda_rules.h): the
 * driver/runtime version rule and --verify's default tolerances. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../worker/cuda/cuda_rules.h"

/* Minor-version compatibility: the same major with an older minor runs;
 * an older major or no driver (0) is refused. */
static void test_driver_rule(void **state)
{
    (void)state;
    assert_true(p3dw_cuda_driver_may_run(12080, 12090)); /* 12.8 driver, 12.9 runtime */
    assert_true(p3dw_cuda_driver_may_run(13000, 13010));
    assert_true(p3dw_cuda_driver_may_run(13000, 12090)); /* newer driver */
    assert_true(p3dw_cuda_driver_may_run(12090, 12090));
    assert_false(p3dw_cuda_driver_may_run(12090, 13000)); /* older major */
    assert_false(p3dw_cuda_driver_may_run(0, 12090));     /* no driver */
}

/* The CUDA tolerance must fail a dropped MoE router gradient (5e-4 at
 * global batch 64) with a margin of 10 or more and pass a correct run's
 * accumulation-order noise (<= 6e-8) with a margin of 100 or more. */
static void test_verify_tolerance(void **state)
{
    (void)state;
    double cuda = p3dw_verify_default_tol(1), cpu = p3dw_verify_default_tol(0);
    assert_true(cuda * 10 <= 5e-4);
    assert_true(cuda >= 100 * 6e-8);
    assert_true(cpu > 0 && cpu <= cuda);
    assert_true(cuda < 1e-3); /* the old, too loose value */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_rule),
        cmocka_unit_test(test_verify_tolerance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
