/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_result_ep.c — the MoE block operations of par3d.result: the EP
 * blocks of a mesh (par3d.ep_blocks) and res:place_ep, par3d.place_ep's
 * per-rank work in C (docs/policies.md, "Block operations"). Each charges
 * the ranks it touches to the sandbox's budget first, as lua_result.c's
 * operations do.
 */
#include "lua_result.h"

#include <lauxlib.h>
#include <limits.h>
#include <string.h>

void p3d_lres_ep_mesh(lua_State *L, int arg, ep_mesh *m, const char *fn)
{
    luaL_checktype(L, arg, LUA_TTABLE);
    int top = lua_gettop(L);
    if (lua_getfield(L, arg, "size") != LUA_TTABLE || lua_getfield(L, arg, "stride") != LUA_TTABLE)
        luaL_error(L, "%s: expected a mesh made by par3d.mesh", fn);
    int sz = top + 1, st = top + 2;
    m->tp = p3d_lres_field(L, sz, "tp");
    m->etp = p3d_lres_field(L, sz, "etp");
    m->ep = p3d_lres_field(L, sz, "ep");
    m->pp = p3d_lres_field(L, sz, "pp");
    m->stp = p3d_lres_field(L, st, "tp");
    m->setp = p3d_lres_field(L, st, "etp");
    m->sep = p3d_lres_field(L, st, "ep");
    m->spp = p3d_lres_field(L, st, "pp");
    lua_getfield(L, arg, "world");
    int ok;
    lua_Integer w = lua_tointegerx(L, -1, &ok);
    if (!ok || w < 1 || w > (1 << 28))
        luaL_error(L, "%s: mesh.world is not a world size", fn);
    m->world = (int)w;
    lua_settop(L, top);
}

/* The EP blocks of a mesh: the smallest rank sets closed under the TP
 * groups and the expert tp and ep groups (every rank joined with its
 * predecessor in each; the smaller root wins, so a block's root is its
 * lowest rank). root[r] is r's block; mem lists the blocks' ranks block
 * after block (blocks by root, ranks ascending); block root k is
 * mem[start[k] .. end[k]) (filled for roots only). Scratch in one userdata
 * left on the stack (the sandbox's memory). */
typedef struct ep_blocks {
    int *root, *start, *end, *mem;
} ep_blocks;

static int find_root(int *parent, int x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static void blocks_of(lua_State *L, const ep_mesh *m, ep_blocks *b)
{
    size_t w = (size_t)m->world;
    p3d_sandbox_charge(L, 12ULL * w);
    int *a = lua_newuserdatauv(L, 4 * w * sizeof(int), 0);
    b->root = a;
    b->start = a + w;
    b->end = a + 2 * w;
    b->mem = a + 3 * w;
    int *parent = b->root;
    for (int r = 0; r < m->world; r++)
        parent[r] = r;
    const int s[3] = {m->stp, m->setp, m->sep}, n[3] = {m->tp, m->etp, m->ep};
    for (int d = 0; d < 3; d++) {
        if (n[d] <= 1)
            continue;
        for (int r = 0; r < m->world; r++)
            if ((r / s[d]) % n[d] != 0 && r >= s[d]) {
                int x = find_root(parent, r), y = find_root(parent, r - s[d]);
                if (x < y)
                    parent[y] = x;
                else if (y < x)
                    parent[x] = y;
            }
    }
    for (int r = 0; r < m->world; r++)
        b->root[r] = find_root(parent, r);
    /* counting sort by root */
    for (int r = 0; r < m->world; r++)
        if (b->root[r] == r)
            b->end[r] = 0;
    for (int r = 0; r < m->world; r++)
        b->end[b->root[r]]++;
    int at = 0;
    for (int r = 0; r < m->world; r++)
        if (b->root[r] == r) {
            b->start[r] = at;
            at += b->end[r];
            b->end[r] = b->start[r];
        }
    for (int r = 0; r < m->world; r++)
        b->mem[b->end[b->root[r]]++] = r;
}

/* par3d.ep_blocks(mesh) -> S, n: every EP block has S ranks and n of them
 * hold pipeline stage 0; nil when the blocks differ in size (the layout
 * then falls back to par3d.place_nested) */
int p3d_lua_ep_blocks(lua_State *L)
{
    ep_mesh m;
    ep_blocks b;
    p3d_lres_ep_mesh(L, 1, &m, "par3d.ep_blocks");
    blocks_of(L, &m, &b);
    int S = b.end[0] - b.start[0], n0 = 0;
    for (int r = 0; r < m.world; r++) {
        if (b.root[r] != r)
            continue;
        if (b.end[r] - b.start[r] != S)
            return 0;
        n0 += (r / m.spp) % m.pp == 0;
    }
    lua_pushinteger(L, S);
    lua_pushinteger(L, n0);
    return 2;
}

/* res:place_ep(mesh, order, nodes, gpus): par3d.place_ep's layout in one
 * call. The b-th block holding stage 0 (blocks by lowest rank), moved to
 * stage s, goes onto unit order[b*pp + s + 1] (0-based b): its ranks in
 * order, each TP group on consecutive slots of the unit, slot j of unit u
 * being (nodes, gpus)[(u-1)*S + j] (S ranks a block, par3d.ep_blocks). */
int p3d_lua_place_ep(lua_State *L)
{
    result *res = p3d_lres_check(L, 1);
    ep_mesh m;
    ep_blocks b;
    p3d_lres_ep_mesh(L, 2, &m, "res:place_ep");
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    luaL_checktype(L, 5, LUA_TTABLE);
    lua_settop(L, 5);
    if (m.world != res->world)
        return luaL_error(L, "res:place_ep: the mesh has %d ranks, the result %d", m.world, res->world);
    blocks_of(L, &m, &b);
    int S = b.end[0] - b.start[0];
    lua_Integer nord = (lua_Integer)lua_rawlen(L, 3), nslot = (lua_Integer)lua_rawlen(L, 4);
    p3d_sandbox_charge(L, 6ULL * (unsigned long long)m.world);
    int *stamp = lua_newuserdatauv(L, (size_t)m.world * sizeof(int), 0);
    memset(stamp, 0, (size_t)m.world * sizeof(int));
    int iter = 0;
    lua_Integer bi = 0;
    for (int k = 0; k < m.world; k++) {
        if (b.root[k] != k || (k / m.spp) % m.pp != 0)
            continue;
        if (b.end[k] - b.start[k] != S)
            return luaL_error(L, "res:place_ep: EP blocks differ in size (%d, %d ranks)", S, b.end[k] - b.start[k]);
        for (int st = 0; st < m.pp; st++) {
            lua_Integer idx = bi * m.pp + st + 1;
            if (idx > nord)
                return luaL_error(L, "res:place_ep: order has %I units, block %I stage %d needs more", nord, bi, st);
            int u = p3d_lres_int_at(L, 3, idx, "order");
            lua_Integer slot = ((lua_Integer)u - 1) * S;
            if (u < 1 || slot + S > nslot)
                return luaL_error(L, "res:place_ep: order[%I] = %d names no unit of %d slots (%I slots)", idx, u, S,
                                  nslot);
            iter++;
            for (int j = b.start[k]; j < b.end[k]; j++) {
                long long r = (long long)b.mem[j] + (long long)st * m.spp;
                if (r >= m.world)
                    return luaL_error(L, "res:place_ep: rank %d of stage %d is out of range", b.mem[j], st);
                if (stamp[r] == iter)
                    continue;
                int base = (int)r - (((int)r / m.stp) % m.tp) * m.stp;
                for (int i = 0; i < m.tp; i++) {
                    int q = base + i * m.stp;
                    if (q >= m.world)
                        return luaL_error(L, "res:place_ep: TP group of rank %d is out of range", (int)r);
                    stamp[q] = iter;
                    slot++;
                    if (slot > nslot)
                        return luaL_error(L, "res:place_ep: unit %d runs past the %I slots", u, nslot);
                    res->node[q] = p3d_lres_int_at(L, 4, slot, "nodes");
                    res->gpu[q] = p3d_lres_int_at(L, 5, slot, "gpus");
                }
            }
        }
        bi++;
    }
    lua_settop(L, 5);
    return 0;
}
