/*
 * test_sandbox_escape.c — the escapes test_lua_sandbox.c does not cover
 * (issue 8): work the instruction count hook cannot see (pattern
 * backtracking and allocation inside single C calls), recursion, what a
 * policy can reach through the string metatable and load's environment,
 * and that a failed policy leaves nothing behind: a good policy run after
 * each kind of failure in the same process gives the same placement as a
 * run in a fresh process would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <time.h>

#include "policy_fixture.h"
#include "policy_internal.h"

static p3d_cluster *cl;
static p3d_job job;
static const p3d_sandbox_limits small = {16u << 20, 20000000ULL};

#define GOOD_POLICY                                                                                        \
    "function place(cluster, job)\n"                                                                       \
    "  local m = par3d.mesh(job); local res = {}\n"                                                        \
    "  for r = 0, m.world - 1 do local c = m:coords(r)\n"                                                  \
    "    c.rank, c.node, c.gpu = r, r // 8 + 1, (r * 3) % 8; res[r + 1] = c end\n"                          \
    "  return res, {'good'}\n"                                                                             \
    "end\n"

static int setup(void **state)
{
    (void)state;
    cl = fx_simple(2, 8, 8, 0);
    fx_job(&job, 2, 1, 1, 4, 2, NULL); /* world 16 */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fx_free(cl);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run(const char *name, const char *src, p3d_placement **pl, char **msg)
{
    p3d_placement *p = NULL;
    *msg = NULL;
    int rc = p3d_policy_run_text(name, name, src, strlen(src), cl, &job, &small, &p, msg);
    if (pl)
        *pl = p;
    else
        p3d_placement_free(p);
    return rc;
}

/* Fails within `secs` seconds, and the message holds every string given. */
static void expect_fail_fast(const char *name, const char *src, double secs, ...)
{
    char *msg;
    double t0 = now();
    int rc = run(name, src, NULL, &msg);
    double dt = now() - t0;
    if (rc == 0)
        fprintf(stderr, "%s: ran to completion\n", name);
    assert_int_equal(rc, -1);
    assert_non_null(msg);
    va_list ap;
    va_start(ap, secs);
    for (const char *want; (want = va_arg(ap, const char *));) {
        if (!strstr(msg, want))
            fprintf(stderr, "%s: message lacks '%s':\n%s\n", name, want, msg);
        assert_non_null(strstr(msg, want));
    }
    va_end(ap);
    if (getenv("P3D_UNDER_VALGRIND"))
        secs *= 20; /* scripts/valgrind.sh: everything runs ~20x slower */
    if (dt > secs)
        fprintf(stderr, "%s: took %.1f s (bound %.0f s)\n", name, dt, secs);
    assert_true(dt <= secs);
    free(msg);
}

static void expect_ok(const char *name, const char *src)
{
    char *msg;
    int rc = run(name, src, NULL, &msg);
    if (rc != 0)
        fprintf(stderr, "%s: unexpected failure: %s\n", name, msg);
    assert_int_equal(rc, 0);
    free(msg);
}

/* Lua patterns backtrack inside one C call: without the guard each of
 * these runs for hours on a handful of instructions. */
static void test_pattern_backtracking(void **state)
{
    (void)state;
    static const char *const calls[] = {
        "s:find('.-.-.-.-b')",  "string.find(s, '.*.*.*b')", "s:match('(a*)*b')",
        "s:gsub('.-.-.-x', '')", "for w in s:gmatch('a-a-a-a-b') do end",
        "pcall(string.find, s, '.-.-.-.-b'); return s:find('.-.-.-.-b')",
    };
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        char src[512];
        snprintf(src, sizeof src, "function place(c, j)\n  local s = string.rep('a', 4000)\n  %s\nend\n",
                 calls[i]);
        expect_fail_fast("pattern.lua", src, 10.0, "could backtrack", NULL);
    }
    /* what policies really do still works: anchored, short, plain */
    expect_ok("patok.lua", "local a, d = ('node017'):match('^(%a+)(%d+)$')\n"
                           "assert(a == 'node' and d == '017')\n"
                           "assert(('n1,n2,n3'):gsub(',', ' ') == 'n1 n2 n3')\n"
                           "local big = string.rep('x', 1 << 20) .. 'needle'\n"
                           "assert(big:find('needle', 1, true) == (1 << 20) + 1)\n"
                           "assert(big:find('^x+needle$'))\n"
                           "local n = 0; for w in ('a b c'):gmatch('%a+') do n = n + 1 end; assert(n == 3)\n"
                           "assert(('[x]'):find('[]]'))\n" GOOD_POLICY);
}

/* Allocation is charged to the instruction budget: big strings in a loop
 * cannot run for hours under a budget meant for seconds. */
static void test_allocation_work(void **state)
{
    (void)state;
    expect_fail_fast("rep.lua", "function place(c, j)\n  while true do local s = ('x'):rep(1 << 22) end\nend\n", 20.0,
                     "instruction budget", NULL);
    expect_fail_fast("concat.lua",
                     "function place(c, j)\n  local t = {} for i = 1, 4096 do t[i] = 'xxxxxxxx' end\n"
                     "  while true do local s = table.concat(t) .. table.concat(t) end\nend\n",
                     20.0, "instruction budget", NULL);
    /* pcall around the allocation cannot swallow the kill */
    expect_fail_fast("reppcall.lua",
                     "function place(c, j)\n  while true do pcall(string.rep, 'x', 1 << 22) end\nend\n", 20.0,
                     "instruction budget", NULL);
}

static void test_recursion(void **state)
{
    (void)state;
    expect_fail_fast("rec.lua", "local function f(n) return 1 + f(n + 1) end\nfunction place(c, j) return f(1) end\n",
                     20.0, "memory limit", NULL); /* 16 MiB fills before the 1M-slot Lua stack */
    expect_fail_fast("tail.lua", "local function f(n) return f(n + 1) end\nfunction place(c, j) return f(1) end\n",
                     20.0, "instruction budget", NULL);
    /* a __index chain recursing through C */
    expect_fail_fast("idx.lua",
                     "local t = setmetatable({}, {__index = function(t, k) return t[k .. 'x'] end})\n"
                     "function place(c, j) return t.a end\n",
                     20.0, "idx.lua", NULL);
}

/* What the string metatable, load's env and the globals expose. */
static void test_reachable(void **state)
{
    (void)state;
    expect_ok("reach.lua", "local smt = getmetatable('')\n"
                           "assert(smt.__index == string)\n"
                           "for _, k in ipairs{'io','os','package','debug','require','dofile','loadfile',\n"
                           "                   'coroutine'} do\n"
                           "  assert(_G[k] == nil and string[k] == nil, k)\n"
                           "end\n"
                           "local f = load('return _ENV')\n"
                           "assert(f() == _G)\n"
                           "local g = load('return io', 'x', 't', setmetatable({}, {__index = _G}))\n"
                           "assert(g() == nil)\n"
                           "assert(rawget(_G, 'io') == nil)\n"
                           "assert(not pcall(load, string.dump(function() end)) or\n"
                           "       load(string.dump(function() end)) == nil)\n"
                           "for _, o in ipairs{'collect', 'step', 'stop', 'restart', 'incremental',\n"
                           "                   'generational', 'setpause'} do\n"
                           "  assert(not pcall(collectgarbage, o), o)\n"
                           "end\n" GOOD_POLICY);
}

static int same_placement(const p3d_placement *a, const p3d_placement *b)
{
    if (a->world != b->world || a->nnotes != b->nnotes)
        return 0;
    for (int r = 0; r < a->world; r++)
        if (memcmp(&a->ranks[r], &b->ranks[r], sizeof a->ranks[r]))
            return 0;
    for (size_t i = 0; i < a->nnotes; i++)
        if (strcmp(a->notes[i], b->notes[i]))
            return 0;
    return 1;
}

/* A policy failure never leaves the launcher in a half state: after each
 * kind of failure, the good policy gives the reference placement and the
 * statistics describe the new run. */
static void test_no_half_state(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "function place(c, j) while true do end end\n",
        "function place(c, j) local t = {} for i = 1, 1e9 do t[i] = ('x'):rep(100) .. i end end\n",
        "function place(c, j) error('boom') end\n",
        "function place(c, j) return {\n",
        "getmetatable('').__index = function() error('hijacked') end\n"
        "string.rep = nil; table.insert = nil; par3d = nil\n"
        "setmetatable(_G, {__index = function() error('global hijack') end})\n"
        "function place(c, j) return {} end\n",
        "function place(c, j) return setmetatable({}, {__len = function() return 16 end,\n"
        "  __index = function(t, i) return {rank = i - 1, node = 1, gpu = 0} end}) end\n",
        "function place(c, j) local s = ('a'):rep(4000); return s:find('.-.-.-.-b') end\n",
    };
    p3d_placement *ref = NULL, *pl = NULL;
    char *msg = NULL;
    unsigned long long ref_instr, instr;
    size_t ref_peak, peak;
    assert_int_equal(run("good.lua", GOOD_POLICY, &ref, &msg), 0);
    p3d_policy_last_stats(&ref_instr, &ref_peak);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(run("bad.lua", bad[i], &pl, &msg), -1);
        assert_null(pl);
        assert_non_null(msg);
        free(msg);
        msg = NULL;
        assert_int_equal(run("good.lua", GOOD_POLICY, &pl, &msg), 0);
        assert_true(same_placement(ref, pl));
        p3d_policy_last_stats(&instr, &peak);
        /* same work as the reference run: nothing carried over */
        assert_true(instr == ref_instr);
        assert_true(peak == ref_peak);
        p3d_placement_free(pl);
        pl = NULL;
    }
    p3d_placement_free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_backtracking), cmocka_unit_test(test_allocation_work),
        cmocka_unit_test(test_recursion),            cmocka_unit_test(test_reachable),
        cmocka_unit_test(test_no_half_state),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
