/* SPDX-License-Identifier: BSD-3-Clause */
/* test_plan_place.c — p3d_plan_place (placement/cost/plan.c): which rows
 * are handed to the placing callback, and the order the plan is left in
 * (placed without an error first, by their placed step time; then placed
 * with one; then every other row as it was). `par3drun plan`'s callback
 * runs the dry run (tests/integration/plan_runline.sh); this one is a
 * table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "p3d/p3d.h"

/* A plan of n rows, row i tp = tp[i] (the shape), step time 1 + i/10
 * (sorted, as the search leaves it). */
static p3d_plan *plan_of(const int *tp, size_t n)
{
    p3d_plan *pl = calloc(1, sizeof *pl);
    assert_non_null(pl);
    pl->rows = calloc(n, sizeof *pl->rows);
    assert_non_null(pl->rows);
    pl->nrows = n;
    for (size_t i = 0; i < n; i++) {
        p3d_plan_row *r = &pl->rows[i];
        r->tp = tp[i], r->pp = 1, r->dp = 1, r->cp = 1, r->ep = 1, r->etp = tp[i];
        r->micro_batch = (int)i + 1; /* tells variants of one shape apart */
        r->cost.step_time = 1.0 + (double)i / 10;
    }
    return pl;
}

/* The callback's table: the placed step time for each tp (0: not placed),
 * and errors; it records the order of the rows it saw. */
struct fake {
    double placed_time[9];
    int errors[9];
    int seen[16], nseen;
    int fail_at;
};

static int fake_place(void *ctx, p3d_plan_row *r, char **err)
{
    struct fake *f = ctx;
    f->seen[f->nseen++] = r->micro_batch;
    if (f->fail_at == r->tp)
        return p3d_err(err, "fatal at tp %d", r->tp);
    if (f->placed_time[r->tp] <= 0)
        return 0;
    r->placed = 1;
    r->cost.step_time = f->placed_time[r->tp];
    r->nerrors = f->errors[r->tp];
    snprintf(r->policy, sizeof r->policy, "%s", r->tp == 2 ? "naive" : "megatron");
    return 0;
}

static void order(p3d_plan *pl, int *out)
{
    for (size_t i = 0; i < pl->nrows; i++)
        out[i] = pl->rows[i].micro_batch;
}

/* Shapes tp 1, 1, 2, 4, 8, 8 (variants of tp 1 and 8): k = 3 places the
 * best variant of tp 1, 2 and 4 only. tp 4 places fastest, tp 1 has an
 * error-level check, tp 2 could not be placed. */
static void reorders_placed_first(void **state)
{
    (void)state;
    static const int tp[] = {1, 1, 2, 4, 8, 8};
    p3d_plan *pl = plan_of(tp, 6);
    struct fake f = {.fail_at = -1};
    f.placed_time[1] = 0.5, f.errors[1] = 1;
    f.placed_time[4] = 2.0;
    char *err = NULL;
    assert_int_equal(p3d_plan_place(pl, 3, fake_place, &f, &err), 0);
    assert_int_equal(f.nseen, 3);
    assert_int_equal(f.seen[0], 1); /* the best variant of each shape */
    assert_int_equal(f.seen[1], 3);
    assert_int_equal(f.seen[2], 4);
    int got[6];
    order(pl, got);
    /* tp 4 (placed, clean), tp 1 (placed, error), then the rest in order:
     * tp 1's second variant, tp 2 (unplaced), tp 8 twice */
    static const int want[] = {4, 1, 2, 3, 5, 6};
    assert_memory_equal(got, want, sizeof want);
    assert_true(pl->rows[0].placed);
    assert_true(pl->rows[0].cost.step_time == 2.0);
    assert_string_equal(pl->rows[0].policy, "megatron");
    assert_false(pl->rows[3].placed);
    assert_null(err);
    p3d_plan_free(pl);
}

/* Placed estimates re-rank the clean rows: plan's third shape places
 * fastest and comes first. */
static void ranks_by_placed_time(void **state)
{
    (void)state;
    static const int tp[] = {1, 2, 4};
    p3d_plan *pl = plan_of(tp, 3);
    struct fake f = {.fail_at = -1};
    f.placed_time[1] = 3.0, f.placed_time[2] = 2.5, f.placed_time[4] = 1.5;
    char *err = NULL;
    assert_int_equal(p3d_plan_place(pl, 10, fake_place, &f, &err), 0);
    int got[3];
    order(pl, got);
    static const int want[] = {3, 2, 1};
    assert_memory_equal(got, want, sizeof want);
    assert_string_equal(pl->rows[1].policy, "naive");
    p3d_plan_free(pl);
}

/* A callback failure ends the plan with its message; the rows stay. */
static void callback_failure(void **state)
{
    (void)state;
    static const int tp[] = {1, 2};
    p3d_plan *pl = plan_of(tp, 2);
    struct fake f = {.fail_at = 2};
    f.placed_time[1] = 9.0;
    char *err = NULL;
    assert_int_equal(p3d_plan_place(pl, 5, fake_place, &f, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err, "fatal at tp 2"));
    assert_int_equal(pl->nrows, 2);
    assert_int_equal(pl->rows[0].micro_batch, 1);
    free(err);
    p3d_plan_free(pl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reorders_placed_first),
        cmocka_unit_test(ranks_by_placed_time),
        cmocka_unit_test(callback_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
