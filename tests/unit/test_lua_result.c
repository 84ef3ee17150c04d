/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lua_result.c — par3d.result, the placement held in C: a policy
 * filling it with block operations gets the same placement as the same
 * layout returned rank by rank; its C loops charge the instruction budget
 * (a policy of a few Lua instructions can still run out); a result with a
 * hole, the wrong world or a bad slot is refused with a message; its
 * metatable is hidden; par3d.place_nested (the plain list) and the bundled
 * policies' par3d.layout_nested place identically.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "policy_fixture.h"
#include "policy_internal.h"

static p3d_cluster *cl; /* 2048 nodes x 8 GPUs, racks of 32 */
static p3d_job job;     /* tp 8, pp 16, dp 128: world 16384 */

static int setup(void **state)
{
    (void)state;
    cl = fx_simple(2048, 8, 8, 32);
    fx_job(&job, 8, 1, 1, 128, 16, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fx_free(cl);
    return 0;
}

static int run(const char *src, unsigned long long instructions, p3d_placement **pl, char **msg)
{
    p3d_sandbox_limits lim = {256u << 20, instructions, 0};
    p3d_placement *p = NULL;
    *msg = NULL;
    int rc = p3d_policy_run_text("t.lua", "t.lua", src, strlen(src), cl, &job, &lim, &p, msg);
    if (pl)
        *pl = p;
    else
        p3d_placement_free(p);
    return rc;
}

static void expect_fail(const char *src, unsigned long long instructions, const char *want)
{
    char *msg;
    assert_int_equal(run(src, instructions, NULL, &msg), -1);
    assert_non_null(msg);
    if (!strstr(msg, want))
        fprintf(stderr, "message lacks '%s':\n%s\n", want, msg);
    assert_non_null(strstr(msg, want));
    free(msg);
}

static void expect_same(const p3d_placement *a, const p3d_placement *b)
{
    assert_int_equal(a->world, b->world);
    for (int r = 0; r < a->world; r++) {
        assert_int_equal(a->ranks[r].node, b->ranks[r].node);
        assert_int_equal(a->ranks[r].gpu, b->ranks[r].gpu);
        assert_int_equal(a->ranks[r].local_rank, b->ranks[r].local_rank);
        for (int d = 0; d < P3D_NDIMS; d++)
            assert_int_equal(a->ranks[r].coord[d], b->ranks[r].coord[d]);
    }
    assert_int_equal(a->nnotes, b->nnotes);
    for (size_t i = 0; i < a->nnotes; i++)
        assert_string_equal(a->notes[i], b->notes[i]);
}

/* host-list order, rank by rank and by whole nodes and slot runs */
static const char *by_rank = "function place(c, j)\n"
                             "  local res = {}\n"
                             "  for r = 0, par3d.mesh(j).world - 1 do\n"
                             "    res[r + 1] = {rank = r, node = r // 8 + 1, gpu = r % 8} end\n"
                             "  return res, {'n'}\n"
                             "end\n";
static const char *by_node = "function place(c, j)\n"
                             "  local res = par3d.result(par3d.mesh(j).world)\n"
                             "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                             "  return res, {'n'}\n"
                             "end\n";
static const char *by_slots = "function place(c, j)\n"
                              "  local W = par3d.mesh(j).world\n"
                              "  local res, nodes, gpus = par3d.result(W), {}, {}\n"
                              "  for s = 1, W do nodes[s], gpus[s] = (s - 1) // 8 + 1, (s - 1) % 8 end\n"
                              "  for u = 0, W // 8 - 1 do res:assign_slots(u * 8, nodes, gpus, u * 8 + 1, 8) end\n"
                              "  assert(#res == W and select(2, res:get(9)) == 1 and res:get(9) == 2)\n"
                              "  return res, {'n'}\n"
                              "end\n";

static void test_block_ops_place_like_rank_by_rank(void **state)
{
    (void)state;
    p3d_placement *a, *b, *d;
    char *msg;
    assert_int_equal(run(by_rank, 0, &a, &msg), 0);
    assert_int_equal(run(by_node, 0, &b, &msg), 0);
    assert_int_equal(run(by_slots, 0, &d, &msg), 0);
    expect_same(a, b);
    expect_same(a, d);
    assert_int_equal(b->ranks[9].node, 1);
    assert_int_equal(b->ranks[9].gpu, 1);
    assert_string_equal(b->notes[0], "n");
    p3d_placement_free(a);
    p3d_placement_free(b);
    p3d_placement_free(d);
}

/* megatron.lua returns layout_nested's par3d.result; a user policy
 * returning place_nested's plain list (which it may edit) places the same */
static void test_layout_nested_equals_place_nested(void **state)
{
    (void)state;
    p3d_placement *a = NULL, *b;
    char *msg = NULL;
    const char *list = "function place(c, j) local res, notes = par3d.place_nested(c, j)\n"
                       "  assert(type(res) == 'table' and res[1].rank == 0 and res[1].tp == 0)\n"
                       "  return res, notes end\n";
    const char *block = "function place(c, j) return par3d.layout_nested(c, j) end\n";
    assert_int_equal(p3d_policy_run("megatron", NULL, cl, &job, &a, &msg), 0);
    assert_int_equal(run(list, 0, &b, &msg), 0);
    /* megatron rewrites the notes' "pipelines" wording; compare the ranks */
    for (int r = 0; r < a->world; r++) {
        assert_int_equal(a->ranks[r].node, b->ranks[r].node);
        assert_int_equal(a->ranks[r].gpu, b->ranks[r].gpu);
    }
    p3d_placement_free(b);
    assert_int_equal(run(block, 0, &b, &msg), 0);
    for (int r = 0; r < a->world; r++) {
        assert_int_equal(a->ranks[r].node, b->ranks[r].node);
        assert_int_equal(a->ranks[r].gpu, b->ranks[r].gpu);
    }
    p3d_placement_free(a);
    p3d_placement_free(b);
}

/* a dozen Lua instructions, 40 x 16384 ranks of C work: the budget is spent
 * by what the C helpers charge, and pcall cannot swallow it */
static void test_c_work_charges_the_budget(void **state)
{
    (void)state;
    char *msg;
    const char *few = "function place(c, j)\n"
                      "  local res = par3d.result(par3d.mesh(j).world)\n"
                      "  for k = 1, %d do pcall(res.assign, res, 0, 1, 0, 16384) end\n"
                      "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                      "  return res\n"
                      "end\n";
    char src[512];
    snprintf(src, sizeof src, few, 1);
    unsigned long long base_ins;
    assert_int_equal(run(src, 0, NULL, &msg), 0);
    p3d_policy_last_stats(&base_ins, NULL);
    snprintf(src, sizeof src, few, 41);
    unsigned long long more;
    assert_int_equal(run(src, 0, NULL, &msg), 0);
    p3d_policy_last_stats(&more, NULL);
    /* 40 more calls of 16384 ranks each are charged, not ~200 instructions */
    assert_true(more - base_ins >= 40ULL * 16384);
    /* and a budget the Lua alone fits in is spent by them */
    expect_fail(src, base_ins + 100000, "instruction budget");
    snprintf(src, sizeof src, few, 1);
    char *m2;
    assert_int_equal(run(src, base_ins + 100000, NULL, &m2), 0);
}

static void test_bad_results_refused(void **state)
{
    (void)state;
    expect_fail("function place(c, j) local r = par3d.result(par3d.mesh(j).world)\n"
                "  for n = 1, #c.nodes - 1 do r:assign((n - 1) * 8, n, 0, 8) end\n"
                "  return r end\n",
                0, "rank 16376 is not assigned");
    expect_fail("function place(c, j) return par3d.result(8) end\n", 0,
                "a par3d.result of 8 ranks, expected 16384");
    expect_fail("function place(c, j) local r = par3d.result(16384); r:assign(16380, 1, 0, 8) end\n", 0,
                "ranks 16380..16387 are out of range 0..16383");
    expect_fail("function place(c, j) local r = par3d.result(16384); r:set(16384, 1, 0) end\n", 0,
                "rank 16384 is out of range 0..16383");
    expect_fail("function place(c, j) local r = par3d.result(16384)\n"
                "  for n = 1, #c.nodes do r:assign((n - 1) * 8, n, 0, 8) end\n"
                "  r:set(5, 3000, 0) return r end\n",
                0, "node 3000 is not a node index 1..2048");
    /* the validator sees a result like any other: GPU 9 of an 8-GPU node */
    expect_fail("function place(c, j) local r = par3d.result(16384)\n"
                "  for n = 1, #c.nodes do r:assign((n - 1) * 8, n, 0, 8) end\n"
                "  r:set(5, 1, 9) return r end\n",
                0, "rank 5");
    expect_fail("function place(c, j) local r = par3d.result(16384)\n"
                "  r:assign_slots(0, {1, 1}, {0, 'x'}, 1, 2) end\n",
                0, "gpus[2] is not an integer");
    expect_fail("function place(c, j) local m = par3d.mesh(j); local r = par3d.result(m.world)\n"
                "  r:nest_units(m, {1, 2}, {}, {}) end\n",
                0, "order has 2 units, expected 2048");
    /* the metatable is hidden: no way to change the methods or add __gc */
    expect_fail("function place(c, j) local r = par3d.result(4)\n"
                "  assert(getmetatable(r) == false, 'metatable visible') error('hidden') end\n",
                0, "hidden");
}

/* par3d.fill: a C loop over a plain table, charged per element */
static void test_fill(void **state)
{
    (void)state;
    const char *ok = "function place(c, j)\n"
                     "  local t = {1, 2}\n"
                     "  par3d.fill(t, 2, 3, 'x')\n"
                     "  assert(#t == 4 and t[1] == 1 and t[2] == 'x' and t[4] == 'x', 'fill')\n"
                     "  local res = par3d.result(par3d.mesh(j).world)\n"
                     "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                     "  return res\n"
                     "end\n";
    char *msg;
    assert_int_equal(run(ok, 0, NULL, &msg), 0);
    expect_fail("function place(c, j) par3d.fill(c.nodes, 1, 2, 0) end\n", 0, "expected a plain table");
    expect_fail("function place(c, j) par3d.fill({}, 0, 2, 0) end\n", 0, "par3d.fill: range 0 + 2 is out of range");
    expect_fail("function place(c, j) for i = 1, 100 do par3d.fill({}, 1, 1 << 20, 0) end end\n", 50000000ULL,
                "instruction budget");
}

/* the collector is stopped while the cluster table is built and must run
 * again for the policy: 300 MB of garbage in a 48 MiB sandbox */
static void test_collector_runs_for_the_policy(void **state)
{
    (void)state;
    const char *src = "function place(c, j)\n"
                      "  for i = 1, 3000000 do local t = {i, i, i, i} end\n"
                      "  local res = par3d.result(par3d.mesh(j).world)\n"
                      "  for n = 1, #c.nodes do res:assign((n - 1) * 8, n, 0, 8) end\n"
                      "  return res\n"
                      "end\n";
    p3d_sandbox_limits lim = {48u << 20, 0, 0};
    p3d_placement *p = NULL;
    char *msg = NULL;
    int rc = p3d_policy_run_text("t.lua", "t.lua", src, strlen(src), cl, &job, &lim, &p, &msg);
    if (rc)
        fprintf(stderr, "%s\n", msg);
    assert_int_equal(rc, 0);
    /* running, it keeps the heap near what is live; stopped, only the
     * emergency collection at the cap would save the policy */
    size_t peak;
    p3d_policy_last_stats(NULL, &peak);
    printf("peak Lua heap %zu KiB\n", peak >> 10);
    assert_true(peak < ((size_t)32 << 20));
    p3d_placement_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_ops_place_like_rank_by_rank),
        cmocka_unit_test(test_layout_nested_equals_place_nested),
        cmocka_unit_test(test_c_work_charges_the_budget),
        cmocka_unit_test(test_bad_results_refused),
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_collector_runs_for_the_policy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
