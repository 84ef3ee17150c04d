/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_sandbox_escape.c — the escapes test_lua_sandbox.c does not cover
 * (issues 8, 13): work the instruction count hook cannot see (pattern
 * backtracking and allocation inside single C calls, slow instructions:
 * stopped by the CPU deadline), recursion, what a
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
#include <unistd.h>

#include "policy_fixture.h"
#include "policy_internal.h"

static p3d_cluster *cl;
static p3d_job job;
/* 16 MiB, 2e7 instructions, 2 s of CPU */
static const p3d_sandbox_limits small = {16u << 20, 20000000ULL, 2.0};
static const p3d_sandbox_limits *limits = &small;

#define GOOD_POLICY                                                                                                    \
    "function place(cluster, job)\n"                                                                                   \
    "  local m = par3d.mesh(job); local res = {}\n"                                                                    \
    "  for r = 0, m.world - 1 do local c = m:coords(r)\n"                                                              \
    "    c.rank, c.node, c.gpu = r, r // 8 + 1, (r * 3) % 8; res[r + 1] = c end\n"                                     \
    "  return res, {'good'}\n"                                                                                         \
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
    int rc = p3d_policy_run_text(name, name, src, strlen(src), cl, &job, limits, &p, msg);
    if (pl)
        *pl = p;
    else
        p3d_placement_free(p);
    return rc;
}

/* Fails, and the message holds every string given. `secs`, once a
 * wall-clock bound, is only printed against: the CPU deadline bounds the
 * run, and tests hold no wall-clock upper bounds. */
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
        fprintf(stderr, "%s: took %.1f s (expected about %.0f s)\n", name, dt, secs);
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

/* Lua patterns backtrack inside one C call: each of these runs for hours
 * on a handful of instructions, unless the CPU watchdog abandons the
 * matcher. The later ones fooled the old pattern guard (issue 13); the
 * last one is a loop of slow instructions (4 MiB string comparisons). */
static void test_pattern_backtracking(void **state)
{
    (void)state;
    static const char *const calls[] = {
        "s:find('.-.-.-.-b')",
        "string.find(s, '.*.*.*b')",
        "s:match('(.-)(.-)(.-)(.-)b')",
        "s:gsub('.-.-.-x', '')",
        "for w in s:gmatch('a-a-a-a-b') do end",
        "s:gsub('.-.-.-x', function() end)",
        "s:gsub('.-.-.-x', {})",
        "pcall(string.find, s, '.-.-.-.-b'); return s:find('.-.-.-.-b')",
        "for i = 1, 100 do pcall(string.find, s, '.-.-.-.-b') end",
        "s:find('[%][]?.-.-.-.-b]')",
        "for w in ('^'):rep(60000):gmatch('^.-.-b') do end",
        "local t = ('('):rep(1 << 20); t:find('%b()')",
        "local p = ('ab'):rep(1 << 19); local t = ('ab'):rep(1 << 20); t:find(p .. 'c', 1, true)",
        "local t = ('x'):rep(4 << 20); local u = t .. ''; while true do local _ = t < u end",
    };
    static const p3d_sandbox_limits roomy = {64u << 20, 2000000000ULL, 1.0};
    limits = &roomy;
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++) {
        char src[512];
        snprintf(src, sizeof src, "function place(c, j)\n  local s = string.rep('a', 4000)\n  %s\nend\n", calls[i]);
        char name[32];
        snprintf(name, sizeof name, "pattern%zu.lua", i);
        expect_fail_fast(name, src, 10.0, "CPU time limit of 1.0 s", NULL);
    }
    limits = &small;
    /* what policies really do still works: anchored, short, plain */
    expect_ok("patok.lua", "local a, d = ('node017'):match('^(%a+)(%d+)$')\n"
                           "assert(a == 'node' and d == '017')\n"
                           "assert(('n1,n2,n3'):gsub(',', ' ') == 'n1 n2 n3')\n"
                           "local big = string.rep('x', 1 << 20) .. 'needle'\n"
                           "assert(big:find('needle', 1, true) == (1 << 20) + 1)\n"
                           "assert(big:find('^x+needle$'))\n"
                           "local n = 0; for w in ('a b c'):gmatch('%a+') do n = n + 1 end; assert(n == 3)\n"
                           "assert(('[x]'):find('[]]'))\n" GOOD_POLICY);
    /* the matcher keeps Lua 5.4's semantics where its loops are rebuilt */
    expect_ok("patsem.lua",
              "local function gm(s, p, i) local t = {}\n"
              "  for a, b in s:gmatch(p, i) do t[#t+1] = tostring(a) .. '|' .. tostring(b) end\n"
              "  return table.concat(t, ',') end\n"
              "assert(gm('abc', '()') == '1|nil,2|nil,3|nil,4|nil')\n"
              "assert(gm('a,b,,c', '([^,]*)') == 'a|nil,b|nil,|nil,c|nil', gm('a,b,,c', '([^,]*)'))\n"
              "assert(gm('^a^b', '^(%a)') == 'a|nil,b|nil')\n"
              "assert(gm('k=v, x=y', '(%w+)=(%w+)') == 'k|v,x|y')\n"
              "assert(gm('hello world', '%a+', 3) == 'llo|nil,world|nil')\n"
              "assert(gm('abc', '%a', -1) == 'c|nil')\n"
              "local function g(...) local r, n = string.gsub(...) return r .. '#' .. n end\n"
              "assert(g('abc', '', function(x) return '-' end) == '-a-b-c-#4')\n"
              "assert(g('abc', '%w', {a = 1, b = false}) == '1bc#3')\n"
              "assert(g('hello world', '(o)', function(o) return o:upper() end, 1) == 'hellO world#1')\n"
              "assert(g('abc', '^a', function() return 'X' end) == 'Xbc#1')\n"
              "assert(g('a b', '()', function(p) return p end) == '1a2 3b4#4')\n"
              "assert(g('xyz', 'q', function() return 'Q' end) == 'xyz#0')\n"
              "assert(g('abab', 'b', '%0%0') == 'abbabb#2')\n"
              "assert(g('a.b', '%.', '%%') == 'a%b#1')\n"
              "assert(not pcall(string.gsub, 'a', 'a', function() return {} end))\n"
              "assert(select('#', ('abc'):find('b')) == 2 and ('abc'):find('(b)()') == 2)\n"
              "assert(select(3, ('abc'):find('(b)()')) == 'b' and select(4, ('abc'):find('(b)()')) == 3)\n"
              "assert(('abc'):match('.', 2) == 'b' and ('a+b'):find('+', 1, true) == 2)\n"
              "assert(not pcall(string.find, 'a', '%'))\n"
              "local ok, e = pcall(string.match, 'a', '(()'); assert(not ok and e:find('unfinished capture'))\n"
              "local it = ('a b c d'):gmatch('%a'); it(); it = nil; collectgarbage('count')\n"
              "local big = ('x'):rep(300000)  -- loops left early: 18 MB of copies, freed on the way\n"
              "for i = 1, 60 do for w in big:gmatch('x') do break end end\n" GOOD_POLICY);
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
    expect_fail_fast("reppcall.lua", "function place(c, j)\n  while true do pcall(string.rep, 'x', 1 << 22) end\nend\n",
                     20.0, "instruction budget", NULL);
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
        /* multi-line entries in parentheses: one element each, on purpose
         * (clang's -Wstring-concatenation) */
        ("getmetatable('').__index = function() error('hijacked') end\n"
         "string.rep = nil; table.insert = nil; par3d = nil\n"
         "setmetatable(_G, {__index = function() error('global hijack') end})\n"
         "function place(c, j) return {} end\n"),
        ("function place(c, j) return setmetatable({}, {__len = function() return 16 end,\n"
         "  __index = function(t, i) return {rank = i - 1, node = 1, gpu = 0} end}) end\n"),
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

/* Issue 13: C functions a policy reaches, called with forged arguments or
 * huge counts, fail with a message instead of crashing or spinning. */
static void test_forged_arguments(void **state)
{
    (void)state;
    expect_fail_fast("forge.lua", "function place(c, j) local f = pairs(c); f(setmetatable({}, {__index = 1})) end\n",
                     5.0, "not a par3drun read-only table", NULL);
    expect_fail_fast(
        "forge2.lua",
        "function place(c, j) local f = pairs(c); f(setmetatable({}, {__index = {}, __newindex = print})) end\n", 5.0,
        "not a par3drun read-only table", NULL);
    expect_fail_fast("forge3.lua", "function place(c, j) local f = pairs(c.nodes); return f('x') end\n", 5.0,
                     "not a par3drun read-only table", NULL);
    expect_fail_fast("move.lua", "function place(c, j) table.move({1}, 1, math.maxinteger, 0) end\n", 5.0,
                     "instruction budget", NULL);
    expect_fail_fast(
        "insert.lua",
        "function place(c, j) table.insert(setmetatable({}, {__len = function() return 1e15 end}), 1, 2) end\n", 5.0,
        "instruction budget", NULL);
    /* xpcall pushes its arguments again: a few hundred need luaL_checkstack */
    expect_ok("xpcall.lua", "function place0() end\n"
                            "local t = {} for i = 1, 7000 do t[i] = i end\n"
                            "local ok, n = xpcall(function(...) return select('#', ...) end, print, table.unpack(t))\n"
                            "assert(ok and n == 7000)\n" GOOD_POLICY);
}

/* Output: print is capped and escaped, error messages are cut and escaped. */
static void test_output_cap(void **state)
{
    (void)state;
    char *msg;
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    dup2(fileno(tmp), 2);
    int rc = run("chatty.lua",
                 "function place(c, j)\n"
                 "  print(('x'):rep(1 << 20))\n"
                 "  print('\\npar3drun: all checks passed\\27[2J\\7\\r')\n"
                 "  error(('e'):rep(1 << 20) .. '\\n\\27]0;pwned\\7')\n"
                 "end\n",
                 NULL, &msg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long size = ftell(tmp);
    char buf[256];
    int forged = 0, dropped = 0;
    rewind(tmp);
    while (fgets(buf, sizeof buf, tmp)) {
        if (!strncmp(buf, "par3drun:", 9) || strchr(buf, 27) || strchr(buf, 7) || strchr(buf, '\r'))
            forged = 1;
        if (strstr(buf, "more bytes of print output dropped"))
            dropped = 1;
    }
    fclose(tmp);
    assert_int_equal(rc, -1);
    assert_true(size < 70 * 1024 + 4096); /* 64 KiB of output, then one line */
    assert_false(forged);
    assert_true(dropped);
    assert_true(strlen(msg) < 20000);
    assert_non_null(strstr(msg, "more bytes)"));
    assert_null(strchr(msg, 27));
    free(msg);
}

/* rack_distance is a view on the C matrix: a 4,096-rack cluster fits the
 * default memory, and the view reads like a table. */
static void test_rack_distance_view(void **state)
{
    (void)state;
    size_t nr = 4096;
    p3d_cluster *big = fx_simple(nr, 8, 8, 0);
    for (size_t r = 0; r < big->nracks; r++)
        free(big->racks[r]);
    free(big->racks);
    big->nracks = nr;
    big->racks = calloc(nr, sizeof *big->racks);
    free(big->rack_dist);
    big->rack_dist = calloc(nr * nr, sizeof *big->rack_dist);
    for (size_t a = 0; a < nr; a++) {
        big->racks[a] = malloc(16);
        snprintf(big->racks[a], 16, "r%zu", a);
        big->nodes[a].rack = (int)a;
        for (size_t b = 0; b < nr; b++)
            big->rack_dist[a * nr + b] = a == b ? 0 : 2 + (a / 64 != b / 64) * 2;
    }
    static const char src[] =
        "function place(c, j)\n"
        "  local d = c.rack_distance\n"
        "  assert(type(d) == 'table' and #d == 4096 and #d[1] == 4096 and d[1] == d[1])\n"
        "  assert(d[1][1] == 0 and d[1][2] == 2 and d[1][65] == 4 and d[4096][4095] == 2)\n"
        "  assert(d[0] == nil and d[4097] == nil and d[1][0] == nil and d['1'] == nil)\n"
        "  local s = 0 for a = 1, #d do local row = d[a] for b = 1, #row, 97 do s = s + row[b] end end\n"
        "  local n = 0 for k, v in pairs(d[7]) do n = n + 1 end assert(n == 4096)\n"
        "  local m = 0 for k, v in ipairs(d) do m = m + 1 end assert(m == 4096)\n"
        "  assert(not pcall(function() d[1][1] = 5 end) and getmetatable(d) == 'read-only')\n"
        "  local f = pairs(d); assert(not pcall(f, {}, nil))\n"
        "  return nil\n"
        "end\n";
    char *msg = NULL;
    p3d_placement *pl = NULL;
    /* default limits: memory scaled to the cluster */
    int rc = p3d_policy_run_text("rd.lua", "rd.lua", src, strlen(src), big, &job, NULL, &pl, &msg);
    assert_int_equal(rc, -1);
    if (!strstr(msg, "returned nil"))
        fprintf(stderr, "rd.lua: %s\n", msg);
    assert_non_null(strstr(msg, "returned nil"));
    free(msg);
    P3D_FREE(&big->rack_dist); /* the fixture's free does not own it */
    fx_free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_backtracking),
        cmocka_unit_test(test_forged_arguments),
        cmocka_unit_test(test_output_cap),
        cmocka_unit_test(test_rack_distance_view),
        cmocka_unit_test(test_allocation_work),
        cmocka_unit_test(test_recursion),
        cmocka_unit_test(test_reachable),
        cmocka_unit_test(test_no_half_state),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
