/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_run.c — running a policy: --policy is resolved and pinned
 * (policy_resolve.c, policy_pin.c), then place(cluster, job) runs in the
 * sandbox, and what it returned is validated before C trusts any of it:
 * exactly one entry per rank, a bijection onto existing GPUs, coordinates
 * consistent with the declared order. Validation reads the result with raw
 * accesses only, so a returned table with metatables cannot fool it.
 */
#include "policy_internal.h"
#include "say.h"
#include "termsafe.h"
#include "policy_source.h"
#include "sha256.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NOTES 64
#define MAX_NOTE_LEN 1000

static _Thread_local unsigned long long last_instructions;
static _Thread_local size_t last_peak;

void p3d_policy_last_stats(unsigned long long *instructions, size_t *peak_bytes)
{
    if (instructions)
        *instructions = last_instructions;
    if (peak_bytes)
        *peak_bytes = last_peak;
}

int p3d_policy_run(const char *policy, const char *sha256_pin, const p3d_cluster *c, const p3d_job *job,
                   p3d_placement **out, char **err)
{
    int rc = -1;
    p3d_policy_src r;
    p3d_sandbox_limits lim;
    *out = NULL;
    if (p3d_policy_resolve(policy, &r, err) < 0)
        goto out;
    if (sha256_pin && *sha256_pin && p3d_policy_check_pin(r.source, r.text, r.len, sha256_pin, err) < 0)
        goto out;
    if ((!sha256_pin || !*sha256_pin) && r.source &&
        (!strncmp(r.source, "http://", 7) || !strncmp(r.source, "https://", 8))) {
        /* a URL's content can change under the same name (docs/policies.md) */
        char hex[65];
        if (p3d_sha256_hex(r.text, r.len, hex) == 0)
            p3d_warn("policy %s is not pinned: whoever can change that URL changes the placement; pin this "
                     "version with --policy-sha256 %s",
                     r.source, hex);
    }
    if (p3d_sandbox_limits_from_env(&lim, err) < 0)
        goto out;
    long long naive_min;
    if (p3d_naive_is_bundled(r.source) && !job->previous) {
        if (p3d_naive_computed_min(&naive_min, err) < 0)
            goto out;
        p3d_mesh m = job->mesh;
        char *e = NULL;
        int world = p3d_mesh_derive(&m, &e) == 0 ? p3d_mesh_world(&m) : -1;
        free(e);
        if (world >= 0 && world >= naive_min) {
            rc = p3d_naive_compute(c, job, r.source, out, err);
            goto out;
        }
    }
    if (p3d_policy_run_text(r.chunk, r.source, r.text, r.len, c, job, &lim, out, err) < 0)
        goto out;
    free((*out)->policy);
    (*out)->policy = r.name;
    r.name = NULL;
    rc = 0;
out:
    p3d_policy_src_free(&r);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* Running and validating                                                  */
/* ---------------------------------------------------------------------- */

typedef struct run_ctx {
    p3d_sandbox *sb;
    const char *chunk;
    const char *text;
    size_t len;
    char *helper; /* par3d.lua source */
    size_t helper_len;
    const p3d_cluster *c;
    const p3d_job *job;
    int world;
    p3d_placement *pl;
    size_t *by_name; /* node indices sorted by name, built on demand */
    char *err;       /* a step failed: message for the caller */
} run_ctx;

static const p3d_cluster *sort_cluster;
static int cmp_node_name(const void *a, const void *b)
{
    return strcmp(sort_cluster->nodes[*(const size_t *)a].name, sort_cluster->nodes[*(const size_t *)b].name);
}

/* Node index for a name, -1 when none: bsearch over a sorted index. */
static long node_by_name(run_ctx *x, const char *name)
{
    const p3d_cluster *c = x->c;
    if (!x->by_name) {
        x->by_name = malloc((c->nnodes ? c->nnodes : 1) * sizeof *x->by_name);
        if (!x->by_name)
            return -2;
        for (size_t i = 0; i < c->nnodes; i++)
            x->by_name[i] = i;
        sort_cluster = c;
        qsort(x->by_name, c->nnodes, sizeof *x->by_name, cmp_node_name);
    }
    size_t lo = 0, hi = c->nnodes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int k = strcmp(c->nodes[x->by_name[mid]].name, name);
        if (k == 0)
            return (long)x->by_name[mid];
        if (k < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

enum { F_RANK, F_NODE, F_GPU, F_DIM0, NFIELDS = F_DIM0 + P3D_NDIMS };

/* Integer field: 1 found, 0 absent, -1 not an integer number. */
static int int_field(lua_State *L, int t, int key, lua_Integer *v)
{
    lua_pushvalue(L, key);
    int ty = lua_rawget(L, t), rc = 0;
    if (ty == LUA_TNUMBER) {
        int ok;
        *v = lua_tointegerx(L, -1, &ok);
        rc = ok ? 1 : -1;
    } else if (ty != LUA_TNIL)
        rc = -1;
    lua_pop(L, 1);
    return rc;
}

static int finish(lua_State *L, run_ctx *x, int res, int notes_idx);

/* A par3d.result: its arrays are C's already, no table per rank to read. */
static int collect_result(lua_State *L, run_ctx *x, int res, int bworld, const int *bnode, const int *bgpu,
                          int notes_idx)
{
    const p3d_cluster *c = x->c;
    const char *who = x->chunk;
    p3d_rank *R = x->pl->ranks;
    if (bworld != x->world)
        return p3d_err(&x->err,
                       "%s: place() returned a par3d.result of %d ranks, expected %d (world = "
                       "tp*cp*dp*pp)",
                       who, bworld, x->world);
    for (int r = 0; r < bworld; r++) {
        if (!bnode[r])
            return p3d_err(&x->err, "%s: place() returned a par3d.result where rank %d is not assigned", who, r);
        if ((size_t)bnode[r] > c->nnodes)
            return p3d_err(&x->err, "%s: rank %d: node %d is not a node index 1..%zu (or a node name)", who, r,
                           bnode[r], c->nnodes);
        R[r].node = bnode[r] - 1;
        R[r].gpu = bgpu[r];
        for (int d = 0; d < P3D_NDIMS; d++)
            R[r].coord[d] = P3D_COORD_UNSET;
    }
    /* a result carries no notes field: the second value's notes */
    return finish(L, x, res, notes_idx);
}

/* Validates the result at index res (and notes at notes_idx) into x->pl. */
static int collect(lua_State *L, run_ctx *x, int res, int notes_idx)
{
    const p3d_cluster *c = x->c;
    const char *who = x->chunk;
    int world = x->world;
    int bworld;
    const int *bnode, *bgpu;
    if (p3d_lua_result_get(L, res, &bworld, &bnode, &bgpu))
        return collect_result(L, x, res, bworld, bnode, bgpu, notes_idx);
    if (lua_type(L, res) != LUA_TTABLE)
        return p3d_err(&x->err,
                       "%s: place() returned %s, expected a table with one entry per rank ({rank=, node=, "
                       "gpu=}, %d entries) or a par3d.result",
                       who, luaL_typename(L, res), world);
    size_t n = lua_rawlen(L, res);
    if (n > (size_t)world)
        return p3d_err(&x->err,
                       "%s: place() returned %zu entries, expected %d (one per rank, world = "
                       "tp*cp*dp*pp)",
                       who, n, world);
    int keys = lua_gettop(L) + 1;
    static const char *const fixed[] = {"rank", "node", "gpu"};
    luaL_checkstack(L, NFIELDS + 4, "validating the placement");
    for (int f = 0; f < F_DIM0; f++)
        lua_pushstring(L, fixed[f]);
    for (int d = 0; d < P3D_NDIMS; d++)
        lua_pushstring(L, p3d_dim_name(d));

    p3d_rank *R = x->pl->ranks;
    for (int r = 0; r < world; r++)
        R[r].node = -1;
    for (size_t i = 1; i <= n; i++) {
        int ty = lua_rawgeti(L, res, (lua_Integer)i);
        int e = lua_gettop(L);
        if (ty != LUA_TTABLE)
            return p3d_err(&x->err, "%s: entry %zu of place()'s result is %s, expected a table {rank=, node=, gpu=}",
                           who, i, luaL_typename(L, e));
        lua_Integer rank, gpu, node = -1;
        int k = int_field(L, e, keys + F_RANK, &rank);
        if (k <= 0)
            return p3d_err(&x->err, "%s: entry %zu: field 'rank' %s, expected an integer 0..%d", who, i,
                           k == 0 ? "is missing" : "is not an integer", world - 1);
        if (rank < 0 || rank >= world)
            return p3d_err(&x->err, "%s: entry %zu: rank %lld is out of range 0..%d", who, i, (long long)rank,
                           world - 1);
        if (R[rank].node >= 0)
            return p3d_err(&x->err, "%s: rank %lld appears twice in place()'s result (entry %zu again)", who,
                           (long long)rank, i);
        /* node: 1-based index into cluster.nodes, or a node name */
        lua_pushvalue(L, keys + F_NODE);
        int nt = lua_rawget(L, e);
        if (nt == LUA_TSTRING) {
            size_t nl;
            const char *nm = lua_tolstring(L, -1, &nl);
            char where[64];
            snprintf(where, sizeof where, "place() result, rank %lld", (long long)rank);
            if (p3d_policy_check_name(nm, nl, who, where, &x->err) < 0)
                return -1;
            long ni = node_by_name(x, nm);
            if (ni == -2)
                return p3d_err(&x->err, "out of memory");
            if (ni < 0)
                return p3d_err(&x->err, "%s: rank %lld: node '%s' is not in the cluster", who, (long long)rank,
                               p3d_tesc(nm));
            node = ni;
        } else if (nt == LUA_TNUMBER) {
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < 1 || (size_t)v > c->nnodes)
                return p3d_err(&x->err, "%s: rank %lld: node %s is not a node index 1..%zu (or a node name)", who,
                               (long long)rank, lua_tostring(L, -1), c->nnodes);
            node = v - 1;
        } else
            return p3d_err(&x->err, "%s: rank %lld: field 'node' %s, expected a node index 1..%zu or a node name", who,
                           (long long)rank, nt == LUA_TNIL ? "is missing" : "has the wrong type", c->nnodes);
        lua_pop(L, 1);
        k = int_field(L, e, keys + F_GPU, &gpu);
        if (k <= 0)
            return p3d_err(&x->err, "%s: rank %lld: field 'gpu' %s, expected a GPU index of %s", who, (long long)rank,
                           k == 0 ? "is missing" : "is not an integer", c->nodes[node].name);
        R[rank].node = (int)node;
        R[rank].gpu = gpu < 0 ? -1 : gpu > INT_MAX ? INT_MAX : (int)gpu; /* the validator names the range */
        for (int d = 0; d < P3D_NDIMS; d++) {
            lua_Integer v;
            k = int_field(L, e, keys + F_DIM0 + d, &v);
            if (k < 0)
                return p3d_err(&x->err, "%s: rank %lld: field '%s' is not an integer", who, (long long)rank,
                               p3d_dim_name(d));
            R[rank].coord[d] = k == 0 ? P3D_COORD_UNSET : v < 0 || v > INT_MAX ? INT_MAX : (int)v;
        }
        lua_pop(L, 1);
    }
    if (n < (size_t)world) {
        int miss = 0;
        while (miss < world && R[miss].node >= 0)
            miss++;
        return p3d_err(&x->err, "%s: place() returned %zu entries for a world of %d: rank %d is missing", who, n, world,
                       miss);
    }
    return finish(L, x, res, notes_idx);
}

/* What every result gets once x->pl->ranks holds it: validation, the
 * coordinates, local ranks and the notes (result.notes of a table result,
 * else place()'s second value). */
static int finish(lua_State *L, run_ctx *x, int res, int notes_idx)
{
    const p3d_cluster *c = x->c;
    const p3d_mesh *m = &x->pl->mesh;
    const char *who = x->chunk;
    int world = x->world;
    p3d_rank *R = x->pl->ranks;
    if (p3d_placement_validate(c, m, x->pl, who, 1, &x->err) < 0)
        return -1;
    for (int r = 0; r < world; r++)
        p3d_mesh_coord(m, r, R[r].coord);
    /* local_rank: position among the node's ranks, ascending by rank */
    int *count = calloc(c->nnodes ? c->nnodes : 1, sizeof *count);
    if (!count)
        return p3d_err(&x->err, "out of memory");
    for (int r = 0; r < world; r++)
        R[r].local_rank = count[R[r].node]++;
    free(count);

    /* notes: result.notes, else a second return value (list or string) */
    int nidx = 0;
    if (lua_type(L, res) == LUA_TTABLE) {
        lua_pushliteral(L, "notes");
        if (lua_rawget(L, res) != LUA_TTABLE)
            lua_pop(L, 1);
        else
            nidx = lua_gettop(L);
    }
    if (nidx) {
        /* result.notes wins over the second value */
    } else if (lua_type(L, notes_idx) == LUA_TTABLE)
        nidx = notes_idx;
    else if (lua_type(L, notes_idx) == LUA_TSTRING) {
        lua_createtable(L, 1, 0);
        lua_pushvalue(L, notes_idx);
        lua_rawseti(L, -2, 1);
        nidx = lua_gettop(L);
    } else if (!lua_isnil(L, notes_idx))
        return p3d_err(&x->err, "%s: place()'s second result must be a list of strings (notes), got %s", who,
                       luaL_typename(L, notes_idx));
    if (nidx) {
        size_t nn = lua_rawlen(L, nidx);
        if (nn > MAX_NOTES)
            nn = MAX_NOTES;
        x->pl->notes = calloc(nn ? nn : 1, sizeof(char *));
        if (!x->pl->notes)
            return p3d_err(&x->err, "out of memory");
        for (size_t i = 1; i <= nn; i++) {
            if (lua_rawgeti(L, nidx, (lua_Integer)i) != LUA_TSTRING)
                return p3d_err(&x->err, "%s: note %zu is %s, expected a string", who, i, luaL_typename(L, -1));
            size_t l;
            const char *s = lua_tolstring(L, -1, &l);
            /* escaped: notes reach the terminal in text reports */
            x->pl->notes[x->pl->nnotes] = p3d_sandbox_escape(s, l, MAX_NOTE_LEN, 0);
            if (!x->pl->notes[x->pl->nnotes])
                return p3d_err(&x->err, "out of memory");
            x->pl->nnotes++;
            lua_pop(L, 1);
        }
    }
    return 0;
}

int p3d_policy_read_helper(char **text, size_t *len, char **err)
{
    char hpath[4096];
    snprintf(hpath, sizeof hpath, "%s/lua/par3d.lua", p3d_data_dir());
    return p3d_read_small_file(hpath, "policy helper module", P3D_POLICY_MAX_BYTES, text, len, err);
}

int p3d_policy_check_name(const char *nm, size_t nl, const char *who, const char *where, char **err)
{
    const char *nul = memchr(nm, 0, nl);
    if (!nul)
        return 0;
    char *esc = p3d_sandbox_escape(nm, nl, 200, 0);
    p3d_err(err, "%s: %s: the node name '%s' holds a NUL byte at offset %zu; expected a node name of cluster.nodes",
            who, where, esc ? esc : "?", (size_t)(nul - nm));
    free(esc);
    return -1;
}

int p3d_policy_load_par3d(p3d_sandbox *sb, const char *text, size_t len, char **err)
{
    lua_State *L = p3d_sandbox_state(sb);
    if (p3d_sandbox_load(sb, text, len, "par3d.lua", err) < 0)
        return -1;
    luaopen_par3d_core(L);            /* the chunk's arguments: the mesh arithmetic in C, */
    p3d_policy_push_module_loader(L); /* and the loader of lua/par3d/NAME.lua */
    lua_pushvalue(L, -1);
    lua_insert(L, -4); /* kept below the chunk, to be closed after it */
    int rc = p3d_sandbox_call(sb, 2, 1, err);
    p3d_policy_close_module_loader(L, rc < 0 ? -1 : -2);
    lua_remove(L, rc < 0 ? -1 : -2);
    if (rc < 0)
        return -1;
    if (!lua_istable(L, -1))
        return p3d_err(err, "par3d.lua: expected the module to return a table, got %s", luaL_typename(L, -1));
    lua_pushvalue(L, -1);
    lua_setglobal(L, "par3d");
    return 0;
}

/* What the policy declares in `follows` ("megatron" or "devicemesh";
 * absent: megatron, the order string's original reader) sets the mesh's
 * shape rules, and the mesh is resolved under them. decl: the declaration
 * (p3d_policy_declare). */
static int declared_rules(lua_State *L, run_ctx *x, int decl)
{
    int rc = -1, rules = P3D_RULES_MEGATRON;
    int ty = p3d_policy_decl_field(L, decl, "follows");
    if (ty == LUA_TSTRING)
        rules = p3d_rules_parse(lua_tostring(L, -1));
    if ((ty != LUA_TNIL && ty != LUA_TSTRING) || rules < 0) {
        const char *v = ty == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1);
        p3d_err(&x->err,
                "%s: follows = %s%.60s%s: expected \"megatron\" (Megatron-LM's order-string rules) or "
                "\"devicemesh\" (PyTorch DeviceMesh's)",
                x->chunk, ty == LUA_TSTRING ? "'" : "(a ", p3d_tesc(v), ty == LUA_TSTRING ? "'" : ")");
        goto out;
    }
    x->pl->mesh.rules = rules;
    if (p3d_mesh_resolve(&x->pl->mesh, &x->err) < 0)
        goto out;
    rc = 0;
out:
    lua_pop(L, 1);
    return rc;
}

/* The whole run, in protected mode: the libraries' setup has happened;
 * here the helper module, the tables, the policy and place() run. Each Lua
 * call goes through p3d_sandbox_call (the docall); a failed step leaves its
 * message in x->err and returns normally. */
static int run_body(lua_State *L)
{
    run_ctx *x = lua_touserdata(L, 1);
    lua_settop(L, 0);
    if (p3d_policy_load_par3d(x->sb, x->helper, x->helper_len, &x->err) < 0)
        return 0;
    lua_pop(L, 1);
    if (p3d_policy_declare(x->sb, x->chunk, x->text, x->len, &x->err) < 0)
        return 0;
    int decl = lua_gettop(L);
    /* whose shape rules the mesh obeys: the policy says, before it sees
     * the job (the job table carries them into par3d.mesh) */
    if (declared_rules(L, x, decl) < 0)
        return 0;
    p3d_job job = *x->job;
    job.mesh = x->pl->mesh;
    p3d_lua_push_cluster(L, x->c); /* decl + 1 */
    p3d_lua_push_job(L, &job);     /* decl + 2 */
    if (p3d_policy_decl_field(L, decl, "place") != LUA_TFUNCTION) {
        p3d_err(&x->err, "%s: the policy does not define a function place(cluster, job) (found %s)", x->chunk,
                luaL_typename(L, -1));
        return 0;
    }
    lua_pushvalue(L, decl + 1);
    lua_pushvalue(L, decl + 2);
    if (p3d_sandbox_call(x->sb, 2, 2, &x->err) < 0)
        return 0;
    int top = lua_gettop(L);
    collect(L, x, top - 1, top);
    return 0;
}

int p3d_policy_run_text(const char *name, const char *source, const char *text, size_t len, const p3d_cluster *c,
                        const p3d_job *job, const p3d_sandbox_limits *lim, p3d_placement **out, char **err)
{
    int rc = -1;
    run_ctx x;
    p3d_sandbox_limits envlim;
    memset(&x, 0, sizeof x);
    *out = NULL;
    x.chunk = name;
    x.text = text;
    x.len = len;
    x.c = c;
    x.job = job;
    p3d_mesh mesh;
    /* sizes only: the policy declares whose rules hold (run_body) */
    if (p3d_policy_sizes(c, job, &mesh, &x.world, err) < 0)
        return -1;
    x.pl = calloc(1, sizeof *x.pl);
    if (!x.pl || !(x.pl->ranks = calloc((size_t)x.world, sizeof *x.pl->ranks))) {
        p3d_err(err, "out of memory");
        goto out;
    }
    x.pl->world = x.world;
    x.pl->mesh = mesh;
    x.pl->policy = p3d_policy_display_name(name);
    x.pl->policy_source = strdup(source ? source : name);
    if (p3d_policy_read_helper(&x.helper, &x.helper_len, err) < 0)
        goto out;
    if (!lim) {
        if (p3d_sandbox_limits_from_env(&envlim, err) < 0)
            goto out;
        lim = &envlim;
    }
    if (p3d_sandbox_new(lim, &x.sb, err) < 0)
        goto out;
    if (p3d_sandbox_protect(x.sb, run_body, &x, err) < 0)
        goto out;
    last_instructions = p3d_sandbox_instructions(x.sb);
    last_peak = p3d_sandbox_peak_bytes(x.sb);
    if (x.err) {
        p3d_err(err, "%s", x.err);
        goto out;
    }
    *out = x.pl;
    x.pl = NULL;
    rc = 0;
out:
    if (x.sb) {
        last_instructions = p3d_sandbox_instructions(x.sb);
        last_peak = p3d_sandbox_peak_bytes(x.sb);
    }
    p3d_sandbox_free(x.sb);
    p3d_placement_free(x.pl);
    free(x.err);
    free(x.helper);
    free(x.by_name);
    return rc;
}
