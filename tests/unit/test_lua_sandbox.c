/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_lua_sandbox.c — the policy sandbox and the result validator: what a
 * policy cannot reach (files, commands, bytecode, debug/package), limits it
 * cannot dodge (instructions through pcall/xpcall, memory), how its errors
 * read (file:line + traceback), and every way a returned placement can be
 * wrong (duplicate GPU, missing rank, wrong coordinates, metatable tricks).
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
#include "sha256.h"

/* A valid naive result for the 2x8 cluster (used by policies below). */
#define NAIVE_BODY                                                                                                     \
    "local function naive(cluster, job)\n"                                                                             \
    "  local m = par3d.mesh(job); local res = {}\n"                                                                    \
    "  for r = 0, m.world - 1 do local c = m:coords(r)\n"                                                              \
    "    c.rank, c.node, c.gpu = r, r // 8 + 1, r % 8; res[r + 1] = c end\n"                                           \
    "  return res\n"                                                                                                   \
    "end\n"

static p3d_cluster *cl;
static p3d_job job;

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

static const p3d_sandbox_limits small = {16u << 20, 20000000ULL, 0};

/* Runs src as policy `name`; returns rc, *msg the error (caller frees). */
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

static void expect_ok(const char *name, const char *src)
{
    char *msg;
    int rc = run(name, src, NULL, &msg);
    if (rc != 0)
        fprintf(stderr, "unexpected failure: %s\n", msg);
    assert_int_equal(rc, 0);
}

/* Fails, and the message contains every string given (NULL-terminated). */
static void expect_fail(const char *name, const char *src, ...)
{
    char *msg;
    int rc = run(name, src, NULL, &msg);
    assert_int_equal(rc, -1);
    assert_non_null(msg);
    va_list ap;
    va_start(ap, src);
    for (const char *want; (want = va_arg(ap, const char *));) {
        if (!strstr(msg, want))
            fprintf(stderr, "message lacks '%s':\n%s\n", want, msg);
        assert_non_null(strstr(msg, want));
    }
    va_end(ap);
    free(msg);
}

static void test_valid_policy_runs(void **state)
{
    (void)state;
    p3d_placement *pl;
    char *msg;
    const char *src = NAIVE_BODY "function place(cluster, job) return naive(cluster, job), {'a note'} end\n";
    assert_int_equal(run("ok.lua", src, &pl, &msg), 0);
    assert_int_equal(pl->world, 16);
    assert_int_equal(pl->ranks[9].node, 1);
    assert_int_equal(pl->ranks[9].gpu, 1);
    assert_int_equal(pl->ranks[9].local_rank, 1);
    assert_int_equal(pl->ranks[9].coord[P3D_DIM_PP], 1); /* 9 = tp 1 + 2*dp 0 + 8*pp 1 */
    assert_int_equal((int)pl->nnotes, 1);
    assert_string_equal(pl->notes[0], "a note");
    assert_string_equal(pl->policy, "ok");
    p3d_placement_free(pl);
}

static void test_no_dangerous_globals(void **state)
{
    (void)state;
    expect_ok("globals.lua", NAIVE_BODY
              "for _, k in ipairs{'io','os','package','debug','require','dofile','loadfile','coroutine'} do\n"
              "  if _G[k] ~= nil then error(k .. ' is reachable') end\n"
              "end\n"
              "assert(string and table and math and utf8 and pcall and load)\n"
              "function place(c, j) return naive(c, j) end\n");
    expect_fail("io.lua", "function place(c, j) local f = io.open('/etc/passwd') end\n", "io.lua:1:", "global 'io'",
                "stack traceback", NULL);
    expect_fail("os.lua", "function place(c, j) os.execute('true') end\n", "os.lua:1:", "global 'os'", NULL);
    expect_fail("req.lua", "local d = require('debug')\n", "req.lua:1:", "global 'require'", NULL);
}

/* Calls the loader at the top of the stack (left there) with name; rc of
 * the call, the result's type in *type or the error in *msg. */
static int call_loader(p3d_sandbox *sb, const char *name, int *type, char **msg)
{
    lua_State *L = p3d_sandbox_state(sb);
    lua_pushvalue(L, -1);
    lua_pushstring(L, name);
    *msg = NULL;
    int rc = p3d_sandbox_call(sb, 1, 1, msg);
    if (rc == 0) {
        *type = lua_type(L, -1);
        lua_pop(L, 1);
    }
    return rc;
}

/* lua/par3d.lua's modules come through the sandbox's own loader: bare
 * names only, from the data dir only, text only, and nothing once
 * par3d.lua has returned; policies see every module's functions but
 * neither the loader nor the modules' private table. */
static void test_module_loader(void **state)
{
    (void)state;
    p3d_sandbox *sb = NULL;
    char *msg = NULL;
    int type = LUA_TNIL;
    assert_int_equal(p3d_sandbox_new(&small, &sb, &msg), 0);
    lua_State *L = p3d_sandbox_state(sb);
    p3d_policy_push_module_loader(L);
    assert_int_equal(call_loader(sb, "mesh", &type, &msg), 0);
    assert_int_equal(type, LUA_TFUNCTION);
    static const char *const bad[] = {"../megatron", "mesh.lua", "Mesh", "", "/etc/passwd", "a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(call_loader(sb, bad[i], &type, &msg), -1);
        if (!strstr(msg, "is not a module name"))
            fprintf(stderr, "%s: %s\n", bad[i], msg);
        assert_non_null(strstr(msg, "is not a module name"));
        free(msg);
    }
    assert_int_equal(call_loader(sb, "nosuch", &type, &msg), -1);
    assert_non_null(strstr(msg, "lua/par3d/nosuch.lua"));
    free(msg);
    p3d_policy_close_module_loader(L, -1);
    assert_int_equal(call_loader(sb, "mesh", &type, &msg), -1);
    assert_non_null(strstr(msg, "closed"));
    free(msg);
    p3d_sandbox_free(sb);

    expect_ok("modules.lua",
              NAIVE_BODY "for _, f in ipairs{'mesh', 'stable_sort', 'racks', 'node_sequence', 'capacity', 'units',\n"
                         "                   'rack_counts', 'pack', 'place_nested', 'place_ep', 'replace',\n"
                         "                   'spare_units', 'default_spares'} do\n"
                         "  assert(type(par3d[f]) == 'function', 'par3d.' .. f .. ' is missing')\n"
                         "end\n"
                         "assert(load_module == nil and shared == nil and par3d.load_module == nil)\n"
                         "function place(c, j) return naive(c, j) end\n");
}

static void test_no_bytecode(void **state)
{
    (void)state;
    /* string.dump works, but load refuses the binary chunk whatever mode says */
    expect_ok("dump.lua", NAIVE_BODY "local bc = string.dump(function() return 1 end)\n"
                                     "local f, e = load(bc, 'x', 'b')\n"
                                     "assert(f == nil and e:find('binary chunk'), 'bytecode loaded: ' .. tostring(e))\n"
                                     "local g = load('return x + 1', 'chunk', 't', {x = 41})\n"
                                     "assert(g() == 42)\n"
                                     "assert(not pcall(load, function() return nil end))\n"
                                     "function place(c, j) return naive(c, j) end\n");
}

static void test_collectgarbage_limited(void **state)
{
    (void)state;
    expect_ok("gc.lua", NAIVE_BODY "assert(type(collectgarbage('count')) == 'number')\n"
                                   "function place(c, j) return naive(c, j) end\n");
    expect_fail("gc2.lua", "collectgarbage('collect')\n", "gc2.lua:1:", "only \"count\"", NULL);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_instruction_budget(void **state)
{
    (void)state;
    double t0 = now();
    expect_fail("loop.lua", "function place(c, j)\n  while true do end\nend\n",
                "loop.lua:2:", "instruction budget of 20000000", NULL);
    /* pcall cannot swallow the kill */
    expect_fail("pcall.lua",
                NAIVE_BODY "function place(c, j)\n"
                           "  while true do pcall(function() while true do end end) end\n"
                           "end\n",
                "instruction budget", NULL);
    /* nor can a result returned right after a caught kill */
    expect_fail("late.lua",
                NAIVE_BODY "function place(c, j)\n"
                           "  pcall(function() while true do end end)\n"
                           "  return naive(c, j)\n"
                           "end\n",
                "instruction budget", NULL);
    /* nor an error handler that loops itself */
    expect_fail("xpcall.lua",
                "function place(c, j)\n"
                "  for i = 1, 1e9 do\n"
                "    xpcall(function() while true do end end, function(m) while true do end end)\n"
                "  end\n"
                "end\n",
                "instruction budget", NULL);
    /* nor string methods called in a loop through metatables */
    expect_fail("meta.lua",
                "local t = setmetatable({}, {__index = function(t, k) return t[k + 1] end})\n"
                "function place(c, j) return t[1] end\n",
                "meta.lua", NULL);
    /* finalizers run with hooks off: refused outright */
    expect_fail("gc.lua", "function place(c, j)\n  setmetatable({}, {__gc = function() while true do end end})\nend\n",
                "gc.lua:2:", "__gc metamethods are not allowed", NULL);
    /* xpcall still behaves like xpcall */
    expect_ok("xp.lua",
              NAIVE_BODY "local ok, v = xpcall(function(a, b) return a + b end, function(m) return 'h' end, 1, 2)\n"
                         "assert(ok == true and v == 3)\n"
                         "local ok2, v2 = xpcall(function() error('boom') end, function(m) return 'h:' .. m end)\n"
                         "assert(ok2 == false and v2:find('h:.*boom'))\n"
                         "function place(c, j) return naive(c, j) end\n");
    /* figures only: a hang is caught by ctest's timeout, not a timed assertion */
    print_message("instruction-budget kills took %.2f s\n", now() - t0);
}

static void test_memory_cap(void **state)
{
    (void)state;
    expect_fail("mem.lua",
                "function place(c, j)\n"
                "  local t = {}\n"
                "  for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end\n"
                "end\n",
                "mem.lua", "memory limit of 16 MiB", NULL);
    expect_fail("rep.lua", "function place(c, j) return string.rep('x', 1 << 30) end\n", "memory limit of 16 MiB",
                NULL);
    /* a caught memory error leaves a usable state */
    expect_ok("memok.lua", NAIVE_BODY "local ok = pcall(string.rep, 'x', 1 << 30)\n"
                                      "assert(not ok)\n"
                                      "function place(c, j) return naive(c, j) end\n");
}

static void test_error_locations(void **state)
{
    (void)state;
    expect_fail("syntax.lua", "-- a comment\nfunction place(c, j)\n  return {\nend\n", "syntax.lua:4:", NULL);
    expect_fail("runtime.lua",
                "local function inner(x)\n  return x.field.missing\nend\n"
                "function place(c, j)\n  local v = inner({})\n  return v\nend\n",
                "runtime.lua:2:", "attempt to index a nil value", "stack traceback", "runtime.lua:5", NULL);
    expect_fail("err.lua", "function place(c, j) error('no room for tp=' .. j.tp) end\n", "err.lua:1: no room for tp=2",
                NULL);
    expect_fail("noplace.lua", "local x = 1\n", "noplace.lua", "does not define a function place", NULL);
    expect_fail("errobj.lua", "function place(c, j) error({}) end\n", "error object is a table value", NULL);
}

static void test_read_only_tables(void **state)
{
    (void)state;
    expect_fail("w1.lua", "function place(c, j) c.nodes = {} end\n", "w1.lua:1:", "cluster is read-only", NULL);
    expect_fail("w2.lua", "function place(c, j) c.nodes[1].name = 'x' end\n", "cluster is read-only", NULL);
    expect_fail("w3.lua", "function place(c, j) c.nodes[1].gpus[1].domain = 3 end\n", "cluster is read-only", NULL);
    expect_fail("w4.lua", "function place(c, j) j.tp = 4 end\n", "w4.lua:1:", "job is read-only", NULL);
    expect_fail("w5.lua", "function place(c, j) setmetatable(c, nil) end\n", "protected metatable", NULL);
    expect_fail("w6.lua", "function place(c, j) table.insert(c.nodes, 1) end\n", "cluster is read-only", NULL);
    /* reading works through #, ipairs, pairs; the real table stays hidden */
    expect_ok("r.lua", NAIVE_BODY
              "function place(c, j)\n"
              "  assert(#c.nodes == 2 and c.nnodes == 2 and c.ngpus == 16)\n"
              "  local n = 0; for i, nd in ipairs(c.nodes) do n = n + nd.ngpus end; assert(n == 16)\n"
              "  local k = 0; for key, v in pairs(c.nodes[1]) do k = k + 1 end; assert(k >= 8)\n"
              "  local f, s = pairs(c); assert(s == c)\n"
              "  assert(getmetatable(c) == 'read-only')\n"
              "  assert(c.nodes[2].name == 'n00002' and c.nodes[2].rack == 'r1' and c.nodes[2].rack_index == 1)\n"
              "  assert(#c.nodes[1].domains == 1 and #c.nodes[1].domains[1] == 8 and c.nodes[1].domains[1][1] == 0)\n"
              "  assert(c.nodes[1].gpus[3].index == 2 and c.nodes[1].gpus[3].pci == '0000:1a:00.0')\n"
              "  assert(c.nodes[1].nvlink[1][2] == 450 and c.nodes[1].nvlink[1][1] == 0)\n"
              "  assert(c.nodes[1].gpus == c.nodes[2].gpus)  -- shared per topology\n"
              "  assert(#c.racks == 1 and #c.racks[1].nodes == 2)\n"
              "  assert(j.tp == 2 and j.pp == 2 and j.dp == 4 and j.world == 16 and j.order == 'tp-cp-ep-dp-pp')\n"
              "  assert(j.order_list[1] == 'tp' and #j.order_list == 5 and j.model == nil)\n"
              "  return naive(c, j)\n"
              "end\n");
}

static void test_validator(void **state)
{
    (void)state;
    /* duplicate GPU */
    expect_fail("dup.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[2].gpu = 0; return r end\n",
                "dup.lua", "GPU 0 of n00001 is assigned to both rank 0 and rank 1", NULL);
    /* missing rank */
    expect_fail("miss.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[16] = nil; return r end\n",
                "15 entries for a world of 16: rank 15 is missing", NULL);
    /* too many entries */
    expect_fail("many.lua",
                NAIVE_BODY "function place(c, j) local r = naive(c, j); r[17] = {rank=0,node=1,gpu=0}; return r end\n",
                "17 entries, expected 16", NULL);
    /* duplicate rank */
    expect_fail("duprank.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[2].rank = 0; return r end\n",
                "rank 0 appears twice", NULL);
    /* wrong coordinates for the declared order */
    expect_fail("coord.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[3].dp = 0; return r end\n",
                "rank 2: dp=0, but under order tp-cp-ep-dp-pp", "rank 2 has dp=1", NULL);
    /* nonexistent node / GPU, bad types */
    expect_fail("node.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[1].node = 3; return r end\n",
                "node 3 is not a node index 1..2", NULL);
    expect_fail("name.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[1].node = 'nx'; return r end\n",
                "node 'nx' is not in the cluster", NULL);
    expect_fail("gpu.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[1].gpu = 8; return r end\n",
                "GPU 8 does not exist on n00001", NULL);
    expect_fail("type.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[1].gpu = '0'; return r end\n",
                "field 'gpu' is not an integer", NULL);
    expect_fail("frac.lua", NAIVE_BODY "function place(c, j) local r = naive(c, j); r[1].rank = 0.5; return r end\n",
                "field 'rank' is not an integer", NULL);
    expect_fail("ret.lua", "function place(c, j) return 42 end\n", "returned number", NULL);
    /* metatable tricks: entries served by __index, a __len that lies */
    expect_fail("trick1.lua",
                NAIVE_BODY "function place(c, j)\n"
                           "  local r = naive(c, j)\n"
                           "  return setmetatable({}, {__index = r, __len = function() return 16 end})\n"
                           "end\n",
                "0 entries for a world of 16: rank 0 is missing", NULL);
    expect_fail("trick2.lua",
                NAIVE_BODY "function place(c, j)\n"
                           "  local r = naive(c, j)\n"
                           "  r[1] = setmetatable({}, {__index = r[1]})\n"
                           "  return r\n"
                           "end\n",
                "field 'rank' is missing", NULL);
    /* node by name and notes as a field */
    p3d_placement *pl;
    char *msg;
    const char *src = NAIVE_BODY "function place(c, j)\n"
                                 "  local r = naive(c, j)\n"
                                 "  for _, e in ipairs(r) do e.node = c.nodes[e.node].name end\n"
                                 "  r.notes = {'one', 'two'}\n"
                                 "  return r\n"
                                 "end\n";
    assert_int_equal(run("names.lua", src, &pl, &msg), 0);
    assert_int_equal(pl->ranks[15].node, 1);
    assert_int_equal((int)pl->nnotes, 2);
    assert_string_equal(pl->notes[1], "two");
    p3d_placement_free(pl);
}

static void test_resolve(void **state)
{
    (void)state;
    p3d_placement *pl = NULL;
    char *msg = NULL;
    assert_int_equal(p3d_policy_run("megatron", NULL, cl, &job, &pl, &msg), 0);
    assert_string_equal(pl->policy, "megatron");
    assert_non_null(strstr(pl->policy_source, "lua/megatron.lua"));
    p3d_placement_free(pl);
    assert_int_equal(p3d_policy_run("naive.lua", NULL, cl, &job, &pl, &msg), 0);
    assert_string_equal(pl->policy, "naive");
    p3d_placement_free(pl);
    assert_int_equal(p3d_policy_run("nosuch", NULL, cl, &job, &pl, &msg), -1);
    assert_non_null(strstr(msg, "unknown policy 'nosuch'"));
    assert_non_null(strstr(msg, "megatron"));
    P3D_FREE(&msg);
    assert_int_equal(p3d_policy_run("/nonexistent/p.lua", NULL, cl, &job, &pl, &msg), -1);
    assert_non_null(strstr(msg, "/nonexistent/p.lua: cannot open"));
    P3D_FREE(&msg);

    /* the pin is checked on the bytes */
    char path[4096], hex[65];
    char *text;
    size_t len;
    snprintf(path, sizeof path, "%s/lua/naive.lua", p3d_data_dir());
    assert_int_equal(p3d_read_small_file(path, "policy", 1 << 20, &text, &len, &msg), 0);
    p3d_sha256_hex(text, len, hex);
    free(text);
    assert_int_equal(p3d_policy_run(path, hex, cl, &job, &pl, &msg), 0);
    p3d_placement_free(pl);
    for (char *h = hex; *h; h++)
        if (*h >= 'a' && *h <= 'f')
            *h = (char)(*h - 'a' + 'A');
    assert_int_equal(p3d_policy_run(path, hex, cl, &job, &pl, &msg), 0); /* case-insensitive */
    p3d_placement_free(pl);
    hex[0] = hex[0] == '0' ? '1' : '0';
    assert_int_equal(p3d_policy_run(path, hex, cl, &job, &pl, &msg), -1);
    assert_non_null(strstr(msg, "refusing to run it"));
    P3D_FREE(&msg);
    assert_int_equal(p3d_policy_run(path, "abc", cl, &job, &pl, &msg), -1);
    assert_non_null(strstr(msg, "expected 64 hex digits"));
    P3D_FREE(&msg);
}

/* the documented example policy runs and passes validation */
static void test_example_policy(void **state)
{
    (void)state;
    char path[4096];
    const char *src = getenv("P3D_SRC");
    snprintf(path, sizeof path, "%s/examples/policies/rack_per_replica.lua", src ? src : "..");
    p3d_placement *pl = NULL;
    char *msg = NULL;
    if (p3d_policy_run(path, NULL, cl, &job, &pl, &msg) < 0)
        fprintf(stderr, "%s\n", msg);
    assert_non_null(pl);
    assert_string_equal(pl->policy, "rack_per_replica");
    assert_int_equal(pl->ranks[1].node, 0);
    p3d_placement_free(pl);
}

static void test_world_too_large(void **state)
{
    (void)state;
    p3d_job big;
    fx_job(&big, 8, 1, 1, 4, 1, NULL);
    p3d_placement *pl = NULL;
    char *msg = NULL;
    assert_int_equal(p3d_policy_run("megatron", NULL, cl, &big, &pl, &msg), -1);
    assert_non_null(strstr(msg, "world size 32"));
    assert_non_null(strstr(msg, "16 GPUs"));
    free(msg);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    p3d_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    p3d_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    p3d_sha256_hex(m, strlen(m), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    p3d_sha256_hex(a, 1000000, hex);
    free(a);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* 55 and 56 bytes: the padding boundary */
    char b[64];
    memset(b, 'a', sizeof b);
    p3d_sha256_hex(b, 55, hex);
    assert_string_equal(hex, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    p3d_sha256_hex(b, 56, hex);
    assert_string_equal(hex, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_policy_runs),
        cmocka_unit_test(test_no_dangerous_globals),
        cmocka_unit_test(test_no_bytecode),
        cmocka_unit_test(test_module_loader),
        cmocka_unit_test(test_collectgarbage_limited),
        cmocka_unit_test(test_instruction_budget),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_error_locations),
        cmocka_unit_test(test_read_only_tables),
        cmocka_unit_test(test_validator),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_world_too_large),
        cmocka_unit_test(test_example_policy),
        cmocka_unit_test(test_sha256_vectors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
