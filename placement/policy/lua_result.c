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
 * results a finalizer. The MoE block operations: lua_result_ep.c; the
 * argument checks they share: lua_result_args.c.
 */
#include "lua_result.h"

#include <lauxlib.h>
#include <limits.h>
#include <string.h>

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
    result *r = p3d_lres_check(L, 1);
    int q = p3d_lres_rank(L, r, 2);
    r->node[q] = p3d_lres_int(L, 3, "node", 1);
    r->gpu[q] = p3d_lres_int(L, 4, "gpu", 0);
    return 0;
}

/* res:assign(first, node, gpu0, n): ranks first .. first+n-1 get GPUs
 * gpu0 .. gpu0+n-1 of node (a whole node, or one NVLink domain of it) */
static int l_assign(lua_State *L)
{
    result *r = p3d_lres_check(L, 1);
    int first = p3d_lres_rank(L, r, 2), node = p3d_lres_int(L, 3, "node", 1), g0 = p3d_lres_int(L, 4, "gpu", 0);
    int n = p3d_lres_int(L, 5, "count", 0);
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
    result *r = p3d_lres_check(L, 1);
    int first = p3d_lres_rank(L, r, 2);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    int s0 = p3d_lres_int(L, 5, "slot", 1), n = p3d_lres_int(L, 6, "count", 0);
    if (n > r->world - first)
        return luaL_error(L, "res:assign_slots: ranks %d..%d are out of range 0..%d", first, first + n - 1,
                          r->world - 1);
    p3d_sandbox_charge(L, 3ULL * (unsigned long long)n);
    for (int i = 0; i < n; i++) {
        lua_Integer k = (lua_Integer)s0 + i;
        int node = p3d_lres_int_at(L, 3, k, "nodes"), gpu = p3d_lres_int_at(L, 4, k, "gpus");
        if (node < 1 || gpu < 0)
            return luaL_error(L, "res:assign_slots: slot %I: node %d gpu %d (expected node >= 1, gpu >= 0)", k, node,
                              gpu);
        r->node[first + i] = node;
        r->gpu[first + i] = gpu;
    }
    return 0;
}


/* res:nest_units(mesh, order, nodes, gpus): par3d.place_nested's layout in
 * one call. Each rank's dense coordinates (t, c, p, s) from the mesh's
 * strides pick unit order[p*cp*pp + s*cp + c + 1] and slot t of it:
 * (nodes, gpus)[(unit-1)*tp + t + 1]. Units are tp consecutive slots. */
static int l_nest_units(lua_State *L)
{
    result *r = p3d_lres_check(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    luaL_checktype(L, 5, LUA_TTABLE);
    if (lua_getfield(L, 2, "size") != LUA_TTABLE || lua_getfield(L, 2, "stride") != LUA_TTABLE)
        return luaL_error(L, "res:nest_units: expected a mesh made by par3d.mesh");
    int sz = lua_gettop(L) - 1, st = sz + 1;
    int tp = p3d_lres_field(L, sz, "tp"), cp = p3d_lres_field(L, sz, "cp"), dp = p3d_lres_field(L, sz, "dp");
    int pp = p3d_lres_field(L, sz, "pp");
    int stp = p3d_lres_field(L, st, "tp"), scp = p3d_lres_field(L, st, "cp"), sdp = p3d_lres_field(L, st, "dp");
    int spp = p3d_lres_field(L, st, "pp");
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
        int u = p3d_lres_int_at(L, 3, idx, "order");
        lua_Integer k = ((lua_Integer)u - 1) * tp + t + 1;
        if (u < 1 || k > nslot)
            return luaL_error(L, "res:nest_units: order[%I] = %d names no unit of %d slots (%I slots)", idx, u, tp,
                              nslot);
        r->node[q] = p3d_lres_int_at(L, 4, k, "nodes");
        r->gpu[q] = p3d_lres_int_at(L, 5, k, "gpus");
    }
    return 0;
}

/* res:tp_split(mesh, cluster) -> split, groups: how many of the TP groups
 * have a rank on another node or in another NVLink domain of its node
 * than the group's first rank (cluster.nodes[i].domains; a GPU in none
 * counts as one domain of its own kind, as place_ep's note always did). */
static int l_tp_split(lua_State *L)
{
    result *res = p3d_lres_check(L, 1);
    ep_mesh m;
    p3d_lres_ep_mesh(L, 2, &m, "res:tp_split");
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    if (m.world != res->world)
        return luaL_error(L, "res:tp_split: the mesh has %d ranks, the result %d", m.world, res->world);
    lua_getfield(L, 3, "nodes");
    int nodes = lua_gettop(L);
    lua_Integer nn = luaL_len(L, nodes);
    if (nn < 0 || nn > (1 << 24))
        return luaL_error(L, "res:tp_split: cluster.nodes has %I entries", nn);
    p3d_sandbox_charge(L, 2ULL * (unsigned long long)m.world + 8ULL * (unsigned long long)nn);
    /* each node's GPU -> domain map, one map per distinct domains table
     * (nodes of one topology share theirs): dmap[first[i] + g] */
    size_t *first = lua_newuserdatauv(L, ((size_t)nn + 1) * sizeof *first, 0);
    lua_createtable(L, 0, 4); /* domains table -> offset of its map */
    int seen = lua_gettop(L);
    size_t total = 0;
    for (lua_Integer i = 1; i <= nn; i++) {
        lua_geti(L, nodes, i);
        lua_getfield(L, -1, "domains");
        lua_pushvalue(L, -1);
        if (lua_isnil(L, -2)) {
            first[i - 1] = total++; /* no GPUs (nothing to look up) */
        } else if (lua_rawget(L, seen) == LUA_TNUMBER) {
            first[i - 1] = (size_t)lua_tointeger(L, -1);
        } else {
            lua_getfield(L, -3, "ngpus");
            lua_Integer g = lua_tointeger(L, -1);
            lua_pop(L, 1);
            first[i - 1] = total;
            total += (size_t)(g > 0 && g < (1 << 20) ? g : 0) + 1;
            lua_pushvalue(L, -2);
            lua_pushinteger(L, (lua_Integer)first[i - 1]);
            lua_rawset(L, seen);
        }
        lua_pop(L, 3);
    }
    int *dmap = lua_newuserdatauv(L, (total ? total : 1) * sizeof *dmap, 0);
    for (size_t k = 0; k < total; k++)
        dmap[k] = 0;
    size_t *len = lua_newuserdatauv(L, ((size_t)nn + 1) * sizeof *len, 0);
    int *filled = lua_newuserdatauv(L, (total ? total : 1) * sizeof *filled, 0);
    memset(filled, 0, (total ? total : 1) * sizeof *filled);
    for (lua_Integer i = 1; i <= nn; i++) {
        size_t f = first[i - 1];
        lua_geti(L, nodes, i);
        lua_getfield(L, -1, "ngpus");
        lua_Integer g = lua_tointeger(L, -1);
        len[i - 1] = (size_t)(g > 0 && g < (1 << 20) ? g : 0);
        lua_pop(L, 1);
        if (!filled[f] && len[i - 1]) {
            filled[f] = 1;
            lua_getfield(L, -1, "domains");
            lua_Integer nd = lua_istable(L, -1) ? luaL_len(L, -1) : 0;
            for (lua_Integer d = 1; d <= nd; d++) {
                lua_geti(L, -1, d);
                lua_Integer ng = luaL_len(L, -1);
                for (lua_Integer x = 1; x <= ng; x++) {
                    lua_geti(L, -1, x);
                    lua_Integer gpu = lua_tointeger(L, -1);
                    lua_pop(L, 1);
                    if (gpu >= 0 && (size_t)gpu < len[i - 1])
                        dmap[f + 1 + (size_t)gpu] = (int)d;
                }
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
#define DOM(q)                                                                                                         \
    (res->node[q] >= 1 && res->node[q] <= nn && res->gpu[q] >= 0 && (size_t)res->gpu[q] < len[res->node[q] - 1]        \
         ? dmap[first[res->node[q] - 1] + 1 + (size_t)res->gpu[q]]                                                     \
         : 0)
    lua_Integer split = 0, groups = 0;
    for (int r = 0; r < m.world; r++) {
        if ((r / m.stp) % m.tp != 0)
            continue;
        groups++;
        int da = DOM(r);
        for (int i = 1; i < m.tp; i++) {
            int q = r + i * m.stp;
            if (q >= m.world)
                break;
            if (res->node[q] != res->node[r] || DOM(q) != da) {
                split++;
                break;
            }
        }
    }
#undef DOM
    lua_settop(L, 3);
    lua_pushinteger(L, split);
    lua_pushinteger(L, groups);
    return 2;
}

/* par3d.unit_tiers(U, S, cluster) -> t1, t2, t3, in_rack: how many of the
 * U.n units (S slots each, par3d.units) are of tier 1, 2 and 3, and how
 * many of tier 3 keep every slot in their rack U.rack[u]
 * (cluster.nodes[i].rack_index) */
static int l_unit_tiers(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int S = p3d_lres_int(L, 2, "unit size", 1);
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    lua_getfield(L, 1, "n");
    lua_Integer nu = lua_tointeger(L, -1);
    lua_getfield(L, 1, "tier");
    lua_getfield(L, 1, "rack");
    lua_getfield(L, 1, "node");
    lua_getfield(L, 3, "nodes");
    int tier = 5, rack = 6, node = 7, nodes = 8;
    if (nu < 0 || !lua_istable(L, tier) || !lua_istable(L, rack) || !lua_istable(L, node) || !lua_istable(L, nodes))
        return luaL_error(L, "par3d.unit_tiers: expected units made by par3d.units and a cluster");
    lua_Integer nn = luaL_len(L, nodes);
    if (nn < 0 || nn > (1 << 24))
        return luaL_error(L, "par3d.unit_tiers: cluster.nodes has %I entries", nn);
    p3d_sandbox_charge(L, 4ULL * (unsigned long long)nn + 2ULL * (unsigned long long)nu);
    int *rack_of = lua_newuserdatauv(L, ((size_t)nn + 1) * sizeof *rack_of, 0);
    for (lua_Integer i = 1; i <= nn; i++) {
        lua_geti(L, nodes, i);
        lua_getfield(L, -1, "rack_index");
        rack_of[i] = (int)lua_tointeger(L, -1);
        lua_pop(L, 2);
    }
    lua_Integer count[4] = {0, 0, 0, 0}, in_rack = 0;
    for (lua_Integer u = 1; u <= nu; u++) {
        int t = p3d_lres_int_at(L, tier, u, "U.tier");
        if (t < 1 || t > 3)
            return luaL_error(L, "par3d.unit_tiers: U.tier[%I] is %d, expected 1, 2 or 3", u, t);
        count[t]++;
        if (t != 3)
            continue;
        int rk = p3d_lres_int_at(L, rack, u, "U.rack"), one = 1;
        p3d_sandbox_charge(L, (unsigned long long)S);
        for (lua_Integer p = (u - 1) * S + 1; p <= u * S && one; p++) {
            int nd = p3d_lres_int_at(L, node, p, "U.node");
            if (nd < 1 || nd > nn || rack_of[nd] != rk)
                one = 0;
        }
        in_rack += one;
    }
    lua_pushinteger(L, count[1]);
    lua_pushinteger(L, count[2]);
    lua_pushinteger(L, count[3]);
    lua_pushinteger(L, in_rack);
    return 4;
}

/* res:keep_previous(ranks, byname) -> lost, order: par3d.replace's pass
 * over the previous placement. Rank r (ranks[r+1] = {node=NAME, gpu=},
 * job.previous.ranks) keeps its node and GPU when byname[NAME] names a node
 * index; the others are listed by node: lost[NAME] = {ranks={r, ...},
 * gpus={g, ...}}, order the names in the order their first rank comes. */
static int l_keep_previous(lua_State *L)
{
    result *res = p3d_lres_check(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    p3d_sandbox_charge(L, 6ULL * (unsigned long long)res->world);
    lua_createtable(L, 0, 1); /* lost */
    lua_createtable(L, 1, 0); /* order */
    int lost = 4, order = 5;
    lua_Integer nlost = 0;
    for (int r = 0; r < res->world; r++) {
        if (lua_geti(L, 2, (lua_Integer)r + 1) != LUA_TTABLE)
            return luaL_error(L, "res:keep_previous: previous rank %d is missing", r);
        int ok;
        lua_getfield(L, -1, "gpu");
        lua_Integer g = lua_tointegerx(L, -1, &ok);
        if (!ok || g < 0 || g > INT_MAX)
            return luaL_error(L, "res:keep_previous: previous rank %d has no GPU index", r);
        lua_pop(L, 1);
        if (lua_getfield(L, -1, "node") != LUA_TSTRING)
            return luaL_error(L, "res:keep_previous: previous rank %d has no node name", r);
        lua_pushvalue(L, -1);
        lua_Integer i = lua_rawget(L, 3) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
        lua_pop(L, 1);
        if (i >= 1 && i <= INT_MAX) {
            res->node[r] = (int)i;
            res->gpu[r] = (int)g;
            lua_pop(L, 2);
            continue;
        }
        /* stack: rank table, name */
        lua_pushvalue(L, -1);
        if (lua_rawget(L, lost) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_createtable(L, 0, 2);
            lua_createtable(L, 8, 0);
            lua_setfield(L, -2, "ranks");
            lua_createtable(L, 8, 0);
            lua_setfield(L, -2, "gpus");
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, lost);
            lua_pushvalue(L, -2);
            lua_rawseti(L, order, ++nlost);
        }
        lua_getfield(L, -1, "ranks");
        lua_pushinteger(L, r);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        lua_pop(L, 1);
        lua_getfield(L, -1, "gpus");
        lua_pushinteger(L, g);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        lua_pop(L, 4);
    }
    lua_settop(L, 5);
    return 2;
}

/* res:get(rank) -> node, gpu (nil when the rank is not assigned) */
static int l_get(lua_State *L)
{
    result *r = p3d_lres_check(L, 1);
    int q = p3d_lres_rank(L, r, 2);
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
    result *r = p3d_lres_check(L, 1);
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
    lua_pushinteger(L, p3d_lres_check(L, 1)->world);
    return 1;
}

static int l_tostring(lua_State *L)
{
    lua_pushfstring(L, "par3d.result(%d)", p3d_lres_check(L, 1)->world);
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
        return luaL_error(L, "par3d.fill: range %I + %I is out of range (first >= 1, 0 <= n <= %d)", first, n, 1 << 28);
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
        {"set", l_set},
        {"assign", l_assign},
        {"assign_slots", l_assign_slots},
        {"nest_units", l_nest_units},
        {"get", l_get},
        {"totable", l_totable},
        {"place_ep", p3d_lua_place_ep},
        {"tp_split", l_tp_split},
        {"keep_previous", l_keep_previous},
        {NULL, NULL},
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
    lua_pushcfunction(L, p3d_lua_ep_blocks);
    lua_setfield(L, -2, "ep_blocks");
    lua_pushcfunction(L, l_unit_tiers);
    lua_setfield(L, -2, "unit_tiers");
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
