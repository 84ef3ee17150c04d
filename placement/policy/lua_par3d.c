/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_par3d.c — the C core of the `par3d` module policies see: the mesh
 * arithmetic of mesh.c (both of Megatron's grids, p3d/job.h), so that Lua
 * and C can never disagree on a rank. lua/par3d.lua receives this table as
 * its chunk argument and wraps it (par3d.mesh, mesh:rank, ...).
 *
 * A mesh travels as the plain table core.mesh() returns:
 *   {order = {"tp","cp","ep","dp","pp"}, size = {tp=,cp=,ep=,dp=,pp=,etp=,edp=},
 *    stride = {...same keys...}, world = N, order_str = "tp-cp-ep-dp-pp"}
 * and is read back from its size and order_str fields on every call.
 */
#include "lua_internal.h"
#include "p3d/p3d.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

static int dim_of(lua_State *L, int arg)
{
    const char *s = luaL_checkstring(L, arg);
    for (int d = 0; d < P3D_NDIMS; d++)
        if (strcmp(s, p3d_dim_name(d)) == 0)
            return d;
    return luaL_argerror(L, arg,
                         lua_pushfstring(L, "unknown dimension '%s' (expected tp, cp, ep, dp, pp, etp, edp)", s));
}

/* Raises err (freed) as a Lua error. */
static int raise(lua_State *L, char *err)
{
    lua_pushstring(L, err ? err : "mesh: error");
    free(err);
    return lua_error(L);
}

static int int_at(lua_State *L, int t, const char *k, int dflt)
{
    int ty = lua_getfield(L, t, k), ok = 0;
    lua_Integer v = ty == LUA_TNIL ? dflt : lua_tointegerx(L, -1, &ok);
    if (ty != LUA_TNIL && !ok)
        luaL_error(L, "mesh: field '%s' is not an integer", k);
    lua_pop(L, 1);
    if (v < 0 || v > (1 << 24))
        luaL_error(L, "mesh: %s=%d is out of range", k, (int)v);
    return (int)v;
}

/* rules at table t: "megatron" (also when absent) or "devicemesh". */
static int rules_at(lua_State *L, int t)
{
    int rules = P3D_RULES_MEGATRON;
    int ty = lua_getfield(L, t, "rules");
    if (ty != LUA_TNIL && (ty != LUA_TSTRING || (rules = p3d_rules_parse(lua_tostring(L, -1))) < 0))
        luaL_error(L, "mesh: field 'rules' is %s, expected \"megatron\" or \"devicemesh\"",
                   ty == LUA_TSTRING ? "an unknown name" : luaL_typename(L, -1));
    lua_pop(L, 1);
    return rules;
}

/* A resolved p3d_mesh from sizes at table t (tp, cp, ep, dp, pp, etp) and
 * an order string (or nil: t.order, else the default), under the shape
 * rules named at table rules_tab (the job's: job.rules). */
static void read_mesh(lua_State *L, int t, int order_arg, int rules_tab, p3d_mesh *m)
{
    p3d_job j;
    char *err = NULL;
    p3d_job_init(&j);
    *m = j.mesh;
    for (int d = 0; d < P3D_NORDER; d++)
        m->size[d] = int_at(L, t, p3d_dim_name(d), 1);
    m->size[P3D_DIM_ETP] = int_at(L, t, "etp", 0);
    const char *order = NULL;
    if (order_arg && !lua_isnoneornil(L, order_arg))
        order = luaL_checkstring(L, order_arg);
    else if (lua_getfield(L, t, "order_str") == LUA_TSTRING ||
             (lua_pop(L, 1), lua_getfield(L, t, "order")) == LUA_TSTRING)
        order = lua_tostring(L, -1);
    if (order && p3d_mesh_set_order(m, order, &err) < 0)
        raise(L, err);
    m->rules = rules_at(L, rules_tab);
    if (p3d_mesh_resolve(m, &err) < 0)
        raise(L, err);
}

/* The mesh table of a mesh: size and stride of every dim, via t.size. */
static void read_mesh_table(lua_State *L, int t, p3d_mesh *m)
{
    luaL_checktype(L, t, LUA_TTABLE);
    if (lua_getfield(L, t, "size") != LUA_TTABLE)
        luaL_error(L, "expected a mesh made by par3d.mesh (no size table)");
    int st = lua_gettop(L);
    lua_getfield(L, t, "order_str");
    read_mesh(L, st, lua_gettop(L), t, m);
    lua_settop(L, st - 1);
}

static void push_dims(lua_State *L, const int v[P3D_NDIMS])
{
    lua_createtable(L, 0, P3D_NDIMS);
    for (int d = 0; d < P3D_NDIMS; d++) {
        lua_pushinteger(L, v[d]);
        lua_setfield(L, -2, p3d_dim_name(d));
    }
}

/* core.mesh(job [, order]) -> mesh table */
static int l_mesh(lua_State *L)
{
    p3d_mesh m;
    int v[P3D_NDIMS];
    luaL_checktype(L, 1, LUA_TTABLE);
    read_mesh(L, 1, 2, 1, &m);
    lua_createtable(L, 0, 6);
    lua_pushstring(L, p3d_rules_name(m.rules));
    lua_setfield(L, -2, "rules");
    lua_createtable(L, P3D_NORDER, 0);
    for (int k = 0; k < P3D_NORDER; k++) {
        lua_pushstring(L, p3d_dim_name(m.order[k]));
        lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "order");
    lua_pushstring(L, m.order_str);
    lua_setfield(L, -2, "order_str");
    for (int d = 0; d < P3D_NDIMS; d++)
        v[d] = m.size[d];
    push_dims(L, v);
    lua_setfield(L, -2, "size");
    for (int d = 0; d < P3D_NDIMS; d++)
        v[d] = p3d_mesh_stride(&m, d);
    push_dims(L, v);
    lua_setfield(L, -2, "stride");
    lua_pushinteger(L, p3d_mesh_world(&m));
    lua_setfield(L, -2, "world");
    return 1;
}

/* core.parse_order(s) -> {"tp", ...} (all five, left-out ones appended) */
static int l_parse_order(lua_State *L)
{
    p3d_job j;
    char *err = NULL;
    p3d_job_init(&j);
    if (p3d_mesh_set_order(&j.mesh, luaL_checkstring(L, 1), &err) < 0)
        return raise(L, err);
    lua_createtable(L, P3D_NORDER, 0);
    for (int k = 0; k < P3D_NORDER; k++) {
        lua_pushstring(L, p3d_dim_name(j.mesh.order[k]));
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

static int check_rank(lua_State *L, const p3d_mesh *m, int arg)
{
    lua_Integer r = luaL_checkinteger(L, arg);
    int w = p3d_mesh_world(m);
    if (r < 0 || r >= w)
        return luaL_error(L, "rank %d is out of range 0..%d", (int)r, w - 1);
    return (int)r;
}

/* core.coords(mesh, rank) -> {tp=, cp=, ep=, dp=, pp=, etp=, edp=} */
static int l_coords(lua_State *L)
{
    p3d_mesh m;
    int c[P3D_NDIMS];
    read_mesh_table(L, 1, &m);
    p3d_mesh_coord(&m, check_rank(L, &m, 2), c);
    push_dims(L, c);
    return 1;
}

/* core.rank(mesh, coords) -> rank of the dense coordinates (missing = 0) */
static int l_rank(lua_State *L)
{
    p3d_mesh m;
    int c[P3D_NDIMS] = {0};
    read_mesh_table(L, 1, &m);
    luaL_checktype(L, 2, LUA_TTABLE);
    for (int d = 0; d < P3D_NDIMS; d++) {
        int v = int_at(L, 2, p3d_dim_name(d), 0);
        if (v >= p3d_mesh_size(&m, d))
            return luaL_error(L, "%s=%d is out of range 0..%d", p3d_dim_name(d), v, p3d_mesh_size(&m, d) - 1);
        c[d] = v;
    }
    lua_pushinteger(L, p3d_mesh_rank(&m, c));
    return 1;
}

static void push_group(lua_State *L, const p3d_mesh *m, int dim, int r, int *buf)
{
    int n = p3d_group_members(m, dim, r, buf, p3d_mesh_size(m, dim));
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, buf[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

/* core.group(mesh, dim, rank) -> the ranks of rank's dim group, ascending */
static int l_group(lua_State *L)
{
    p3d_mesh m;
    read_mesh_table(L, 1, &m);
    int dim = dim_of(L, 2), r = check_rank(L, &m, 3);
    int *buf = lua_newuserdatauv(L, sizeof(int) * (size_t)p3d_mesh_size(&m, dim), 0);
    push_group(L, &m, dim, r, buf);
    return 1;
}

/* core.groups(mesh, dim) -> every group of dim, by smallest rank */
static int l_groups(lua_State *L)
{
    p3d_mesh m;
    read_mesh_table(L, 1, &m);
    int dim = dim_of(L, 2), n = p3d_mesh_size(&m, dim), w = p3d_mesh_world(&m);
    int st = p3d_mesh_stride(&m, dim), ng = w / n;
    int *buf = lua_newuserdatauv(L, sizeof(int) * (size_t)n, 0);
    lua_createtable(L, ng, 0);
    for (int g = 0; g < ng; g++) {
        int first = (g / st) * st * n + g % st;
        push_group(L, &m, dim, first, buf);
        lua_rawseti(L, -2, g + 1);
    }
    return 1;
}

int luaopen_par3d_core(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"mesh", l_mesh},   {"parse_order", l_parse_order}, {"coords", l_coords}, {"rank", l_rank},
        {"group", l_group}, {"groups", l_groups},           {NULL, NULL},
    };
    luaL_newlib(L, fns);
    p3d_lua_result_register(L);
    return 1;
}
