/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_result.c — a placement held in C (par3d.result, docs/policies.md
 * "Block operations"): the rank -> (node, GPU) map of a world, filled by
 * block operations that each assign a contiguous rank range (a whole node,
 * a unit of slots) or a whole layout at once, so that a bundled policy
 * does O(nodes) Lua work and O(ranks) C work. place() may return it
 * instead of a list of tables; policy_run.c copies it without reading a
 * table per rank, and validates it like any other result.
 *
 * Every operation charges the ranks it writes or reads to the instruction
 * budget before it runs (p3d_sandbox_charge): the count hook sees none of
 * the C loop. The userdata's memory is the sandbox's (lua_newuserdatauv),
 * so it counts against the memory cap. Its metatable is hidden
 * (__metatable), so a policy can neither change the methods nor give new
 * results a finalizer.
 */
#include "lua_internal.h"

#include <lauxlib.h>
#include <limits.h>
#include <string.h>

#define RESULT_MT "p3d.result"

typedef struct result {
    int world;
    int *node; /* 1-based node index, 0: rank not assigned yet */
    int *gpu;
} result;

static result *check_result(lua_State *L, int arg)
{
    return luaL_checkudata(L, arg, RESULT_MT);
}

static int check_rank_in(lua_State *L, const result *r, int arg)
{
    lua_Integer v = luaL_checkinteger(L, arg);
    if (v < 0 || v >= r->world)
        return luaL_error(L, "rank %I is out of range 0..%d", v, r->world - 1);
    return (int)v;
}

/* A positive int at arg (node indices, GPU counts): 'what' names it. */
static int check_int(lua_State *L, int arg, const char *what, lua_Integer lo)
{
    lua_Integer v = luaL_checkinteger(L, arg);
    if (v < lo || v > INT_MAX)
        return luaL_error(L, "%s %I is out of range (expected %I or more)", what, v, lo);
    return (int)v;
}

/* Integer t[i] of a list argument, raising a message naming the list. */
static int int_at(lua_State *L, int t, lua_Integer i, const char *list)
{
    int ok;
    lua_rawgeti(L, t, i);
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || v < INT_MIN || v > INT_MAX)
        return luaL_error(L, "%s[%I] is %s, expected an integer", list, i, ok ? "out of range" : "not an integer");
    return (int)v;
}

/* par3d.result(world) -> an empty placement of world ranks */
static int l_result(lua_State *L)
{
    lua_Integer w = luaL_checkinteger(L, 1);
    if (w < 1 || w > (1 << 28))
        return luaL_error(L, "par3d.result: world %I is out of range 1..%d", w, 1 << 28);
    p3d_sandbox_charge(L, (unsigned long long)w);
    size_t n = (size_t)w;
    result *r = lua_newuserdatauv(L, sizeof *r + 2 * n * sizeof(int), 0);
    r->world = (int)w;
    r->node = (int *)(r + 1);
    r->gpu = r->node + n;
    memset(r->node, 0, 2 * n * sizeof(int));
    luaL_setmetatable(L, RESULT_MT);
    return 1;
}

/* res:set(rank, node, gpu): one rank */
static int l_set(lua_State *L)
{
    result *r = check_result(L, 1);
    int q = check_rank_in(L, r, 2);
    r->node[q] = check_int(L, 3, "node", 1);
    r->gpu[q] = check_int(L, 4, "gpu", 0);
    return 0;
}

/* res:assign(first, node, gpu0, n): ranks first .. first+n-1 get GPUs
 * gpu0 .. gpu0+n-1 of node (a whole node, or one NVLink domain of it) */
static int l_assign(lua_State *L)
{
    result *r = check_result(L, 1);
    int first = check_rank_in(L, r, 2), node = check_int(L, 3, "node", 1), g0 = check_int(L, 4, "gpu", 0);
    int n = check_int(L, 5, "count", 0);
    if (n > r->world - first)
        return luaL_error(L, "res:assign: ranks %d..%d are out of range 0..%d", first, first + n - 1, r->world - 1);
    if (n > INT_MAX - g0)
        return luaL_error(L, "res:assign: GPU %d + %d is out of range", g0, n);
    p3d_sandbox_charge(L, (unsigned long long)n);
    for (int i = 0; i < n; i++) {
        r->node[first + i] = node;
        r->gpu[first + i] = g0 + i;
    }
    return 0;
}

/* res:assign_slots(first, nodes, gpus, slot0, n): ranks first+i get
 * (nodes[slot0+i], gpus[slot0+i]) for i < n — a unit of par3d.units
 * (U.node, U.gpu), or any slot lists, onto a contiguous rank range */
static int l_assign_slots(lua_State *L)
{
    result *r = check_result(L, 1);
    int first = check_rank_in(L, r, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    int s0 = check_int(L, 5, "slot", 1), n = check_int(L, 6, "count", 0);
    if (n > r->world - first)
        return luaL_error(L, "res:assign_slots: ranks %d..%d are out of range 0..%d", first, first + n - 1,
                          r->world - 1);
    p3d_sandbox_charge(L, 3ULL * (unsigned long long)n);
    for (int i = 0; i < n; i++) {
        lua_Integer k = (lua_Integer)s0 + i;
        int node = int_at(L, 3, k, "nodes"), gpu = int_at(L, 4, k, "gpus");
        if (node < 1 || gpu < 0)
            return luaL_error(L, "res:assign_slots: slot %I: node %d gpu %d (expected node >= 1, gpu >= 0)", k,
                              node, gpu);
        r->node[first + i] = node;
        r->gpu[first + i] = gpu;
    }
    return 0;
}

/* An int field of a table at t ("size", "stride" of a mesh). */
static int field_int(lua_State *L, int t, const char *k)
{
    int ok;
    lua_getfield(L, t, k);
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || v < 1 || v > INT_MAX)
        return luaL_error(L, "res:nest_units: mesh field %s is not a positive integer", k);
    return (int)v;
}

/* res:nest_units(mesh, order, nodes, gpus): par3d.place_nested's layout in
 * one call. Each rank's dense coordinates (t, c, p, s) from the mesh's
 * strides pick unit order[p*cp*pp + s*cp + c + 1] and slot t of it:
 * (nodes, gpus)[(unit-1)*tp + t + 1]. Units are tp consecutive slots. */
static int l_nest_units(lua_State *L)
{
    result *r = check_result(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    luaL_checktype(L, 5, LUA_TTABLE);
    if (lua_getfield(L, 2, "size") != LUA_TTABLE || lua_getfield(L, 2, "stride") != LUA_TTABLE)
        return luaL_error(L, "res:nest_units: expected a mesh made by par3d.mesh");
    int sz = lua_gettop(L) - 1, st = sz + 1;
    int tp = field_int(L, sz, "tp"), cp = field_int(L, sz, "cp"), dp = field_int(L, sz, "dp");
    int pp = field_int(L, sz, "pp");
    int stp = field_int(L, st, "tp"), scp = field_int(L, st, "cp"), sdp = field_int(L, st, "dp");
    int spp = field_int(L, st, "pp");
    lua_settop(L, 5);
    if ((long long)tp * cp * dp * pp != r->world)
        return luaL_error(L, "res:nest_units: the mesh has %I ranks, the result %d", (lua_Integer)tp * cp * dp * pp,
                          r->world);
    lua_Integer nord = (lua_Integer)lua_rawlen(L, 3), nslot = (lua_Integer)lua_rawlen(L, 4);
    if (nord < (lua_Integer)cp * pp * dp)
        return luaL_error(L, "res:nest_units: order has %I units, expected %d (cp*pp*dp)", nord, cp * pp * dp);
    p3d_sandbox_charge(L, 4ULL * (unsigned long long)r->world);
    int per = cp * pp;
    for (int q = 0; q < r->world; q++) {
        int t = (q / stp) % tp, c = (q / scp) % cp, p = (q / sdp) % dp, s = (q / spp) % pp;
        lua_Integer idx = (lua_Integer)p * per + (lua_Integer)s * cp + c + 1;
        int u = int_at(L, 3, idx, "order");
        lua_Integer k = ((lua_Integer)u - 1) * tp + t + 1;
        if (u < 1 || k > nslot)
            return luaL_error(L, "res:nest_units: order[%I] = %d names no unit of %d slots (%I slots)", idx, u, tp,
                              nslot);
        r->node[q] = int_at(L, 4, k, "nodes");
        r->gpu[q] = int_at(L, 5, k, "gpus");
    }
    return 0;
}

/* res:get(rank) -> node, gpu (nil when the rank is not assigned) */
static int l_get(lua_State *L)
{
    result *r = check_result(L, 1);
    int q = check_rank_in(L, r, 2);
    if (!r->node[q])
        return 0;
    lua_pushinteger(L, r->node[q]);
    lua_pushinteger(L, r->gpu[q]);
    return 2;
}

/* res:totable() -> {{rank=, node=, gpu=}, ...}: the list a policy returns
 * rank by rank (unassigned ranks are left out) */
static int l_totable(lua_State *L)
{
    result *r = check_result(L, 1);
    p3d_sandbox_charge(L, 4ULL * (unsigned long long)r->world);
    lua_createtable(L, r->world, 0);
    lua_Integer n = 0;
    for (int q = 0; q < r->world; q++) {
        if (!r->node[q])
            continue;
        lua_createtable(L, 0, 3);
        lua_pushinteger(L, q);
        lua_setfield(L, -2, "rank");
        lua_pushinteger(L, r->node[q]);
        lua_setfield(L, -2, "node");
        lua_pushinteger(L, r->gpu[q]);
        lua_setfield(L, -2, "gpu");
        lua_rawseti(L, -2, ++n);
    }
    return 1;
}

static int l_len(lua_State *L)
{
    lua_pushinteger(L, check_result(L, 1)->world);
    return 1;
}

static int l_tostring(lua_State *L)
{
    lua_pushfstring(L, "par3d.result(%d)", check_result(L, 1)->world);
    return 1;
}

/* par3d.fill(t, first, n, v): t[first .. first+n-1] = v (raw sets: t is
 * the policy's own table; a read-only proxy has no array to fill) */
static int l_fill(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer first = luaL_checkinteger(L, 2), n = luaL_checkinteger(L, 3);
    luaL_checkany(L, 4);
    if (n < 0 || n > (1 << 28) || first < 1 || first > LUA_MAXINTEGER - n)
        return luaL_error(L, "par3d.fill: range %I + %I is out of range (first >= 1, 0 <= n <= %d)", first, n,
                          1 << 28);
    if (lua_getmetatable(L, 1))
        return luaL_error(L, "par3d.fill: expected a plain table (this one has a metatable)");
    p3d_sandbox_charge(L, (unsigned long long)n);
    for (lua_Integer i = 0; i < n; i++) {
        lua_pushvalue(L, 4);
        lua_rawseti(L, 1, first + i);
    }
    return 0;
}

void p3d_lua_result_register(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"set", l_set},   {"assign", l_assign},   {"assign_slots", l_assign_slots}, {"nest_units", l_nest_units},
        {"get", l_get},   {"totable", l_totable}, {NULL, NULL},
    };
    if (luaL_newmetatable(L, RESULT_MT)) {
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, l_len);
        lua_setfield(L, -2, "__len");
        lua_pushcfunction(L, l_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, l_result);
    lua_setfield(L, -2, "result");
    lua_pushcfunction(L, l_fill);
    lua_setfield(L, -2, "fill");
}

int p3d_lua_result_get(lua_State *L, int idx, int *world, const int **node, const int **gpu)
{
    const result *r = luaL_testudata(L, idx, RESULT_MT);
    if (!r)
        return 0;
    *world = r->world;
    *node = r->node;
    *gpu = r->gpu;
    return 1;
}
