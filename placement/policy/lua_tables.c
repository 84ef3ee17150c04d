/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_tables.c — the read-only `cluster` and `job` tables a policy's
 * place(cluster, job) receives (field by field in docs/policies.md).
 *
 * Read-only through proxies: an empty table whose metatable indexes the
 * real one, refuses writes, and answers # and pairs; the real table is never
 * reachable from Lua (__metatable hides the metatable, pairs iterates with
 * the proxy as state). Everything a node shares with others of the same
 * topology (GPUs, NVLink domains, the bandwidth matrix, NICs) is built once
 * per topology and shared, so 16,384 nodes cost 16,384 small node tables.
 * All functions here allocate and must run in protected mode.
 */
#include "lua_internal.h"

#include <lauxlib.h>
#include <string.h>

static int ro_cluster_newindex(lua_State *L);
static int ro_job_newindex(lua_State *L);

/* The real table behind a proxy. ro_next is reachable from Lua (pairs
 * returns it), so it may be called with anything: like luaL_checkudata,
 * check that the metatable is one of ours (its __newindex is one of the C
 * functions no policy can reach) before trusting its __index; raw reads
 * only, so no metamethod of a forged metatable runs. */
static int real_of(lua_State *L, int idx)
{
    if (lua_type(L, idx) == LUA_TTABLE && lua_getmetatable(L, idx)) {
        lua_pushliteral(L, "__newindex");
        lua_rawget(L, -2);
        lua_CFunction ni = lua_tocfunction(L, -1);
        lua_pop(L, 1);
        if (ni == ro_cluster_newindex || ni == ro_job_newindex) {
            lua_pushliteral(L, "__index");
            lua_rawget(L, -2);
            lua_remove(L, -2);
            if (lua_type(L, -1) == LUA_TTABLE)
                return lua_gettop(L);
        }
    }
    return luaL_error(L, "not a par3drun read-only table");
}

static int ro_len(lua_State *L)
{
    real_of(L, 1);
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
    return 1;
}

static int ro_next(lua_State *L)
{
    lua_settop(L, 2);
    int real = real_of(L, 1);
    lua_pushvalue(L, 2);
    if (lua_next(L, real))
        return 2;
    lua_pushnil(L);
    return 1;
}

static int ro_pairs(lua_State *L)
{
    real_of(L, 1);
    lua_pushcfunction(L, ro_next);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

static int ro_cluster_newindex(lua_State *L)
{
    return luaL_error(L, "cluster is read-only (copy what you need into a table of your own)");
}

static int ro_job_newindex(lua_State *L)
{
    return luaL_error(L, "job is read-only (copy what you need into a table of your own)");
}

/* Replaces the table on top of the stack with its read-only proxy. */
static void seal(lua_State *L, lua_CFunction newindex)
{
    lua_createtable(L, 0, 0);
    lua_createtable(L, 0, 5);
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, ro_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, ro_pairs);
    lua_setfield(L, -2, "__pairs");
    lua_pushliteral(L, "read-only");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_replace(L, -2);
}

#define CSEAL(L) seal(L, ro_cluster_newindex)

static void set_str(lua_State *L, const char *k, const char *v)
{
    if (v && *v) {
        lua_pushstring(L, v);
        lua_setfield(L, -2, k);
    }
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static void push_gpus(lua_State *L, const p3d_node *n)
{
    lua_createtable(L, n->ngpus, 0);
    for (int g = 0; g < n->ngpus; g++) {
        const p3d_gpu *G = &n->gpus[g];
        lua_createtable(L, 0, 12);
        set_int(L, "index", G->index);
        set_str(L, "pci", G->pci);
        set_str(L, "model", G->model);
        set_str(L, "osdev", G->osdev);
        set_int(L, "numa", G->numa);
        set_int(L, "package", G->package);
        set_str(L, "cpus", G->cpus);
        set_int(L, "domain", G->domain);
        set_int(L, "mem", (lua_Integer)G->mem_bytes);
        if (G->nearest_nic >= 0 && G->nearest_nic < n->nnics) {
            set_str(L, "nearest_nic", n->nics[G->nearest_nic].name);
            set_int(L, "nearest_nic_index", G->nearest_nic);
            lua_pushboolean(L, G->nic_same_numa);
            lua_setfield(L, -2, "nic_same_numa");
        }
        CSEAL(L);
        lua_rawseti(L, -2, g + 1);
    }
    CSEAL(L);
}

static int ndomains_of(const p3d_node *n)
{
    int nd = n->ndomains;
    for (int g = 0; g < n->ngpus; g++)
        if (n->gpus[g].domain + 1 > nd)
            nd = n->gpus[g].domain + 1;
    return nd;
}

static void push_domains(lua_State *L, const p3d_node *n)
{
    int nd = ndomains_of(n);
    lua_createtable(L, nd, 0);
    for (int d = 0; d < nd; d++) {
        lua_createtable(L, 8, 0);
        int k = 0;
        for (int g = 0; g < n->ngpus; g++)
            if (n->gpus[g].domain == d) {
                lua_pushinteger(L, g);
                lua_rawseti(L, -2, ++k);
            }
        CSEAL(L);
        lua_rawseti(L, -2, d + 1);
    }
    CSEAL(L);
}

static void push_nvlink(lua_State *L, const p3d_node *n)
{
    lua_createtable(L, n->ngpus, 0);
    for (int i = 0; i < n->ngpus; i++) {
        lua_createtable(L, n->ngpus, 0);
        for (int j = 0; j < n->ngpus; j++) {
            lua_pushnumber(L, n->nvlink ? n->nvlink[(size_t)i * n->ngpus + j] : 0.0);
            lua_rawseti(L, -2, j + 1);
        }
        CSEAL(L);
        lua_rawseti(L, -2, i + 1);
    }
    CSEAL(L);
}

static void push_nics(lua_State *L, const p3d_node *n)
{
    lua_createtable(L, n->nnics, 0);
    for (int i = 0; i < n->nnics; i++) {
        lua_createtable(L, 0, 4);
        set_str(L, "name", n->nics[i].name);
        set_str(L, "pci", n->nics[i].pci);
        set_str(L, "kind", n->nics[i].kind);
        set_int(L, "numa", n->nics[i].numa);
        CSEAL(L);
        lua_rawseti(L, -2, i + 1);
    }
    CSEAL(L);
}

/* Pushes the plain (unsealed) table of what nodes of topology n share,
 * building it on first use; cache is the absolute index of a table keyed
 * by the topology's address. */
static void push_topo_parts(lua_State *L, int cache, const p3d_node *n)
{
    if (lua_rawgetp(L, cache, n) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_createtable(L, 0, 8);
    push_gpus(L, n);
    lua_setfield(L, -2, "gpus");
    push_domains(L, n);
    lua_setfield(L, -2, "domains");
    push_nvlink(L, n);
    lua_setfield(L, -2, "nvlink");
    push_nics(L, n);
    lua_setfield(L, -2, "nics");
    set_int(L, "ngpus", n->ngpus);
    set_int(L, "ndomains", ndomains_of(n));
    set_str(L, "topology", n->source);
    set_str(L, "hash", n->hash);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, cache, n);
}

static const char *const shared_fields[] = {"gpus",     "domains",  "nvlink", "nics", "ngpus",
                                            "ndomains", "topology", "hash",   NULL};

static int rack_of(const p3d_cluster *c, size_t i)
{
    int r = c->nodes[i].rack;
    return c->nracks && r >= 0 && (size_t)r < c->nracks ? r : 0;
}

static void push_node_lists(lua_State *L, const p3d_cluster *c, size_t count, const char *const *names,
                            int (*key)(const p3d_cluster *, size_t))
{
    lua_createtable(L, (int)count, 0);
    for (size_t k = 0; k < count; k++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, names ? names[k] : "default");
        lua_setfield(L, -2, "name");
        set_int(L, "index", (lua_Integer)k + 1);
        lua_createtable(L, 0, 0);
        lua_setfield(L, -2, "nodes");
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
    int lists = lua_gettop(L);
    for (size_t i = 0; i < c->nnodes; i++) {
        int k = key(c, i);
        if (k < 0 || (size_t)k >= count)
            continue;
        lua_rawgeti(L, lists, k + 1);
        lua_getfield(L, -1, "nodes");
        lua_pushinteger(L, (lua_Integer)i + 1);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        lua_pop(L, 2);
    }
    for (size_t k = 0; k < count; k++) {
        lua_rawgeti(L, lists, (lua_Integer)k + 1);
        lua_getfield(L, -1, "nodes");
        CSEAL(L);
        lua_setfield(L, -2, "nodes");
        CSEAL(L);
        lua_rawseti(L, lists, (lua_Integer)k + 1);
    }
    CSEAL(L);
}

/* cluster.rack_distance[a][b] reads the cluster's compact matrix (one int
 * per pair, in C) through read-only views: racks^2 Lua values would need
 * 256 MiB for 4,096 racks. Row views are made on first use and cached;
 * each is an empty table with its own small metatable, so `type`, `#`,
 * `ipairs` and `pairs` behave as on the other cluster tables. */
typedef struct rd_view {
    const p3d_cluster *c;
    lua_Integer row; /* 1-based; 0: the outer table */
} rd_view;

static const rd_view *rd_of(lua_State *L, int idx)
{
    if (lua_type(L, idx) == LUA_TTABLE && lua_getmetatable(L, idx)) {
        lua_pushliteral(L, "__newindex");
        lua_rawget(L, -2);
        int ours = lua_tocfunction(L, -1) == ro_cluster_newindex;
        lua_pop(L, 1);
        lua_pushliteral(L, "rd");
        lua_rawget(L, -2);
        const rd_view *v = ours ? lua_touserdata(L, -1) : NULL;
        lua_pop(L, 2);
        if (v)
            return v;
    }
    luaL_error(L, "not a par3drun rack distance table");
    return NULL;
}

static void push_rd_view(lua_State *L, const p3d_cluster *c, lua_Integer row);

static int rd_index(lua_State *L)
{
    const rd_view *v = rd_of(L, 1);
    int isnum = 0;
    lua_Integer k = lua_type(L, 2) == LUA_TNUMBER ? lua_tointegerx(L, 2, &isnum) : 0;
    if (!isnum || k < 1 || (size_t)k > v->c->nracks) {
        lua_pushnil(L);
        return 1;
    }
    if (v->row)
        lua_pushinteger(L, v->c->rack_dist[(size_t)(v->row - 1) * v->c->nracks + (size_t)(k - 1)]);
    else {
        /* rows are cached in the outer view's metatable, field "rows" */
        lua_getmetatable(L, 1);
        lua_pushliteral(L, "rows");
        lua_rawget(L, -2);
        if (lua_rawgeti(L, -1, k) == LUA_TNIL) {
            lua_pop(L, 1);
            push_rd_view(L, v->c, k);
            lua_pushvalue(L, -1);
            lua_rawseti(L, -3, k);
        }
    }
    return 1;
}

static int rd_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)rd_of(L, 1)->c->nracks);
    return 1;
}

static int rd_next(lua_State *L)
{
    const rd_view *v = rd_of(L, 1);
    lua_Integer k = lua_isnil(L, 2) ? 0 : luaL_checkinteger(L, 2);
    if (k < 0 || (size_t)k >= v->c->nracks)
        return 0;
    lua_settop(L, 1);
    lua_pushinteger(L, k + 1);
    lua_pushcfunction(L, rd_index);
    lua_pushvalue(L, 1);
    lua_pushinteger(L, k + 1);
    lua_call(L, 2, 1);
    return 2;
}

static int rd_pairs(lua_State *L)
{
    rd_of(L, 1);
    lua_pushcfunction(L, rd_next);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

static void push_rd_view(lua_State *L, const p3d_cluster *c, lua_Integer row)
{
    luaL_checkstack(L, 6, "rack distance");
    lua_createtable(L, 0, 0);
    lua_createtable(L, 0, 8);
    rd_view *v = lua_newuserdatauv(L, sizeof *v, 0);
    v->c = c;
    v->row = row;
    lua_setfield(L, -2, "rd");
    if (!row) {
        lua_createtable(L, 0, 0);
        lua_setfield(L, -2, "rows");
    }
    lua_pushcfunction(L, rd_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_cluster_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, rd_len);
    lua_setfield(L, -2, "__len");
    lua_pushcfunction(L, rd_pairs);
    lua_setfield(L, -2, "__pairs");
    lua_pushliteral(L, "read-only");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
}

static void push_rack_distance(lua_State *L, const p3d_cluster *c)
{
    push_rd_view(L, c, 0);
}

static int nvl_of(const p3d_cluster *c, size_t i)
{
    return c->nodes[i].nvl_domain;
}

void p3d_lua_push_cluster(lua_State *L, const p3d_cluster *c)
{
    luaL_checkstack(L, 16, "building the cluster table");
    p3d_sandbox_fit_cluster(p3d_sandbox_of(L), p3d_cluster_gpus(c));
    /* everything built here stays reachable: collection steps while it
     * grows would only re-mark it (a sixth of the policy stage at 1M
     * GPUs). The memory cap is the allocator's and still holds. */
    int gc_was_running = lua_gc(L, LUA_GCISRUNNING);
    lua_gc(L, LUA_GCSTOP);
    lua_createtable(L, 0, 0); /* topology cache */
    int cache = lua_gettop(L);
    lua_createtable(L, 0, 12);
    int ct = lua_gettop(L);
    set_str(L, "source", c->source);
    set_str(L, "slurm_topology", c->slurm_topology);
    set_int(L, "nnodes", (lua_Integer)c->nnodes);
    lua_Integer ngpus = 0;

    lua_createtable(L, (int)c->nnodes, 0);
    for (size_t i = 0; i < c->nnodes; i++) {
        const p3d_cnode *cn = &c->nodes[i];
        const p3d_node *t = cn->topo;
        lua_createtable(L, 0, 16);
        set_str(L, "name", cn->name);
        set_int(L, "index", (lua_Integer)i + 1);
        int r = rack_of(c, i);
        lua_pushstring(L, c->nracks ? c->racks[r] : "default");
        lua_setfield(L, -2, "rack");
        set_int(L, "rack_index", r + 1);
        if (cn->role == P3D_NODE_SPARE) {
            lua_pushboolean(L, 1);
            lua_setfield(L, -2, "spare");
        }
        if (cn->nvl_domain >= 0 && (size_t)cn->nvl_domain < c->nnvl_domains) {
            set_str(L, "nvlink_domain", c->nvl_domains[cn->nvl_domain]);
            set_int(L, "nvlink_domain_index", cn->nvl_domain + 1);
        }
        if (t) {
            push_topo_parts(L, cache, t);
            for (const char *const *f = shared_fields; *f; f++) {
                lua_getfield(L, -1, *f);
                lua_setfield(L, -3, *f);
            }
            lua_pop(L, 1);
            ngpus += t->ngpus;
        } else {
            set_int(L, "ngpus", 0);
        }
        CSEAL(L);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    CSEAL(L);
    lua_setfield(L, ct, "nodes");
    set_int(L, "ngpus", ngpus);

    push_node_lists(L, c, c->nracks ? c->nracks : 1, c->nracks ? (const char *const *)c->racks : NULL, rack_of);
    lua_setfield(L, ct, "racks");
    push_node_lists(L, c, c->nnvl_domains, (const char *const *)c->nvl_domains, nvl_of);
    lua_setfield(L, ct, "nvlink_domains");

    if (c->rack_dist && c->nracks) {
        push_rack_distance(L, c);
        lua_setfield(L, ct, "rack_distance");
    }

    lua_createtable(L, 0, P3D_LINK_COUNT);
    for (int l = 0; l < P3D_LINK_COUNT; l++)
        if (c->link_gbps[l] > 0) {
            lua_pushnumber(L, c->link_gbps[l]);
            lua_setfield(L, -2, p3d_link_name((p3d_link)l));
        }
    CSEAL(L);
    lua_setfield(L, ct, "link_gbps");

    CSEAL(L);
    lua_remove(L, cache);
    if (gc_was_running)
        lua_gc(L, LUA_GCRESTART);
}

#define JSEAL(L) seal(L, ro_job_newindex)

/* job.previous = {restart=, ranks={{rank=, node=NAME, gpu=}, ...},
 * failed={{name=, rack=, nvlink_domain=}, ...}} (docs/policies.md). */
static void push_previous(lua_State *L, const p3d_previous *p)
{
    luaL_checkstack(L, 8, "building job.previous");
    lua_createtable(L, 0, 3);
    set_int(L, "restart", p->restart);
    lua_createtable(L, p->world, 0);
    for (int r = 0; r < p->world; r++) {
        lua_createtable(L, 0, 3);
        set_int(L, "rank", r);
        set_str(L, "node", p->node[r]);
        set_int(L, "gpu", p->gpu[r]);
        JSEAL(L);
        lua_rawseti(L, -2, r + 1);
    }
    JSEAL(L);
    lua_setfield(L, -2, "ranks");
    lua_createtable(L, (int)p->nfailed, 0);
    for (size_t i = 0; i < p->nfailed; i++) {
        lua_createtable(L, 0, 3);
        set_str(L, "name", p->failed[i]);
        if (p->failed_rack && p->failed_rack[i])
            set_str(L, "rack", p->failed_rack[i]);
        if (p->failed_nvl && p->failed_nvl[i])
            set_str(L, "nvlink_domain", p->failed_nvl[i]);
        JSEAL(L);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    JSEAL(L);
    lua_setfield(L, -2, "failed");
    JSEAL(L);
    lua_setfield(L, -2, "previous");
}

void p3d_lua_push_job(lua_State *L, const p3d_job *j)
{
    const p3d_mesh *m = &j->mesh;
    luaL_checkstack(L, 8, "building the job table");
    lua_createtable(L, 0, 20);
    for (int d = 0; d < P3D_NDIMS; d++)
        set_int(L, p3d_dim_name(d), p3d_mesh_size(m, d));
    set_int(L, "world", p3d_mesh_world(m));
    lua_pushstring(L, m->order_str);
    lua_setfield(L, -2, "order");
    lua_createtable(L, P3D_NORDER, 0);
    for (int k = 0; k < P3D_NORDER; k++) {
        lua_pushstring(L, p3d_dim_name(m->order[k]));
        lua_rawseti(L, -2, k + 1);
    }
    JSEAL(L);
    lua_setfield(L, -2, "order_list");
    set_str(L, "rules", p3d_rules_name(m->rules));
    set_int(L, "micro_batches", j->micro_batches);
    set_int(L, "micro_batch_size", j->micro_batch_size);
    set_int(L, "global_batch", j->global_batch);
    set_int(L, "virtual_stages", j->virtual_stages);
    set_int(L, "dtype_bytes", j->dtype_bytes);
    set_int(L, "zero", j->zero);
    set_int(L, "spares", j->spares);
    set_int(L, "min_dp", j->min_dp);
    if (j->previous)
        push_previous(L, j->previous);
    if (j->has_model) {
        const p3d_model *md = &j->model;
        lua_createtable(L, 0, 7);
        set_str(L, "name", md->name);
        lua_pushnumber(L, md->params);
        lua_setfield(L, -2, "params");
        set_int(L, "layers", md->layers);
        set_int(L, "hidden", md->hidden);
        set_int(L, "heads", md->heads);
        set_int(L, "seq_len", md->seq_len);
        set_int(L, "vocab", md->vocab);
        JSEAL(L);
        lua_setfield(L, -2, "model");
    }
    JSEAL(L);
}
