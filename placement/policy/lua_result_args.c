/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_result_args.c — the argument checks every block operation of
 * par3d.result shares (lua_result.c, lua_result_ep.c): the result itself,
 * a rank, a bounded int, an integer of a list, a mesh's field. Each raises
 * a Lua error naming what was wrong. Below both files: it calls neither.
 */
#include "lua_result.h"

#include <lauxlib.h>
#include <limits.h>

result *p3d_lres_check(lua_State *L, int arg)
{
    return luaL_checkudata(L, arg, RESULT_MT);
}

int p3d_lres_rank(lua_State *L, const result *r, int arg)
{
    lua_Integer v = luaL_checkinteger(L, arg);
    if (v < 0 || v >= r->world)
        return luaL_error(L, "rank %I is out of range 0..%d", v, r->world - 1);
    return (int)v;
}

/* A positive int at arg (node indices, GPU counts): 'what' names it. */
int p3d_lres_int(lua_State *L, int arg, const char *what, lua_Integer lo)
{
    lua_Integer v = luaL_checkinteger(L, arg);
    if (v < lo || v > INT_MAX)
        return luaL_error(L, "%s %I is out of range (expected %I or more)", what, v, lo);
    return (int)v;
}

/* Integer t[i] of a list argument, raising a message naming the list. */
int p3d_lres_int_at(lua_State *L, int t, lua_Integer i, const char *list)
{
    int ok;
    lua_rawgeti(L, t, i);
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || v < INT_MIN || v > INT_MAX)
        return luaL_error(L, "%s[%I] is %s, expected an integer", list, i, ok ? "out of range" : "not an integer");
    return (int)v;
}

/* An int field of a table at t ("size", "stride" of a mesh). */
int p3d_lres_field(lua_State *L, int t, const char *k)
{
    int ok;
    lua_getfield(L, t, k);
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    if (!ok || v < 1 || v > INT_MAX)
        return luaL_error(L, "res:nest_units: mesh field %s is not a positive integer", k);
    return (int)v;
}
