/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_spares.c — choosing the hot spares (--spares K): the policy's
 * optional spares(cluster, job) hook, else par3d.default_spares (the one
 * implementation of the default rule, lua/par3d.lua), run in the same
 * sandbox with the same limits as place(). The hook sees only the usable
 * nodes; what it returns is validated with raw accesses before any node
 * becomes a spare: a list of exactly K distinct usable nodes, by name or by
 * 1-based index into cluster.nodes (docs/policies.md "Choosing the spares").
 */
#include "policy_internal.h"
#include "policy_source.h"
#include "strmap.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct spares_ctx {
    p3d_sandbox *sb;
    const char *chunk; /* the policy in messages, NULL: the default rule */
    const char *text;
    size_t len;
    char *helper;
    size_t helper_len;
    p3d_cluster *c;          /* the whole cluster: roles are set here */
    const p3d_cluster *view; /* its usable nodes, what the hook sees */
    const size_t *map;       /* view index -> cluster index */
    const p3d_job *job;
    size_t *chosen; /* cluster indices, job->spares of them */
    char *err;
} spares_ctx;

static const char *role_words(int role)
{
    switch (role) {
    case P3D_NODE_EXCLUDED: return "is excluded (--exclude or a failed --health-check)";
    case P3D_NODE_LOST: return "was lost";
    case P3D_NODE_SPARE: return "is already a spare";
    default: return "is not usable";
    }
}

/* Validates the list at index res into x->chosen. */
static int collect(lua_State *L, spares_ctx *x, int res, const char *who)
{
    const p3d_cluster *c = x->c;
    int k = x->job->spares;
    if (lua_type(L, res) != LUA_TTABLE)
        return p3d_err(&x->err, "%s: spares() returned %s, expected a list of %d node name%s (--spares %d)", who,
                       luaL_typename(L, res), k, k == 1 ? "" : "s", k);
    size_t n = lua_rawlen(L, res);
    if (n != (size_t)k)
        return p3d_err(&x->err, "%s: spares() returned %zu node%s, expected exactly %d (--spares %d)", who, n,
                       n == 1 ? "" : "s", k, k);
    p3d_strmap byname = {0};
    size_t *pos = calloc(c->nnodes ? c->nnodes : 1, sizeof *pos); /* entry+1 that named node i */
    int rc = -1;
    if (!pos || p3d_strmap_init(&byname, c->nnodes) < 0)
        goto oom;
    for (size_t i = 0; i < c->nnodes; i++)
        if (p3d_strmap_put(&byname, c->nodes[i].name, i, NULL) < 0)
            goto oom;
    for (size_t e = 1; e <= n; e++) {
        int ty = lua_rawgeti(L, res, (lua_Integer)e);
        size_t node;
        if (ty == LUA_TSTRING) {
            size_t nl;
            const char *nm = lua_tolstring(L, -1, &nl);
            char where[64];
            snprintf(where, sizeof where, "spares() entry %zu", e);
            if (p3d_policy_check_name(nm, nl, who, where, &x->err) < 0)
                goto out;
            if (!p3d_strmap_get(&byname, nm, &node)) {
                char *esc = p3d_sandbox_escape(nm, strlen(nm), 200, 0);
                p3d_err(&x->err, "%s: spares() entry %zu: node '%s' is not in the cluster", who, e, esc ? esc : "?");
                free(esc);
                goto out;
            }
        } else if (ty == LUA_TNUMBER) {
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < 1 || (size_t)v > x->view->nnodes) {
                p3d_err(&x->err,
                        "%s: spares() entry %zu: %s is not a node index 1..%zu into cluster.nodes (or a "
                        "node name)",
                        who, e, lua_tostring(L, -1), x->view->nnodes);
                goto out;
            }
            node = x->map[v - 1];
        } else {
            p3d_err(&x->err,
                    "%s: spares() entry %zu is %s, expected a node name or a 1-based index into "
                    "cluster.nodes",
                    who, e, luaL_typename(L, -1));
            goto out;
        }
        lua_pop(L, 1);
        if (c->nodes[node].role != P3D_NODE_USE) {
            p3d_err(&x->err, "%s: spares() entry %zu: node '%s' %s; a spare must be one of cluster.nodes", who, e,
                    c->nodes[node].name, role_words(c->nodes[node].role));
            goto out;
        }
        if (pos[node]) {
            p3d_err(&x->err, "%s: spares() names node '%s' twice (entries %zu and %zu); expected %d distinct nodes",
                    who, c->nodes[node].name, pos[node], e, k);
            goto out;
        }
        pos[node] = e;
        x->chosen[e - 1] = node;
    }
    rc = 0;
    goto out;
oom:
    p3d_err(&x->err, "out of memory");
out:
    free(pos);
    p3d_strmap_free(&byname);
    return rc;
}

/* In protected mode: par3d, the tables, the policy chunk, then its
 * spares() or par3d.default_spares. */
static int spares_body(lua_State *L)
{
    spares_ctx *x = lua_touserdata(L, 1);
    lua_settop(L, 0);
    if (p3d_policy_load_par3d(x->sb, x->helper, x->helper_len, &x->err) < 0)
        return 0;
    int par3d = lua_gettop(L);
    p3d_lua_push_cluster(L, x->view);
    p3d_lua_push_job(L, x->job);
    int args = lua_gettop(L) - 1;
    const char *who = "par3d.default_spares";
    int hook = 0;
    if (x->chunk) {
        if (p3d_policy_declare(x->sb, x->chunk, x->text, x->len, &x->err) < 0)
            return 0;
        int decl = lua_gettop(L);
        int ty = p3d_policy_decl_field(L, decl, "spares");
        if (ty == LUA_TFUNCTION) {
            hook = 1;
            who = x->chunk;
        } else if (ty != LUA_TNIL) {
            p3d_err(&x->err,
                    "%s: %s 'spares' is %s, expected a function spares(cluster, job) (or none: "
                    "par3d.default_spares chooses)",
                    x->chunk, p3d_policy_decl_where(L, decl), luaL_typename(L, -1));
            return 0;
        } else {
            lua_pop(L, 1);
        }
        lua_remove(L, decl);
    }
    if (!hook) {
        lua_pushliteral(L, "default_spares");
        if (lua_rawget(L, par3d) != LUA_TFUNCTION) {
            p3d_err(&x->err, "par3d.lua: par3d.default_spares is missing");
            return 0;
        }
    }
    lua_pushvalue(L, args);
    lua_pushvalue(L, args + 1);
    if (p3d_sandbox_call(x->sb, 2, 1, &x->err) < 0) {
        if (hook) { /* say which call failed: the policy has two */
            char *e = x->err;
            x->err = NULL;
            p3d_err(&x->err, "%s: spares(cluster, job) failed: %s", x->chunk, e);
            free(e);
        }
        return 0;
    }
    collect(L, x, lua_gettop(L), who);
    return 0;
}

int p3d_policy_pick_spares(const char *policy, const char *sha256_pin, p3d_cluster *c, const p3d_job *job, char **err)
{
    int k = job->spares, rc = -1;
    size_t usable = 0;
    if (k <= 0)
        return 0;
    for (size_t i = 0; i < c->nnodes; i++)
        usable += c->nodes[i].role == P3D_NODE_USE;
    if ((size_t)k >= usable)
        return p3d_err(err, "--spares %d: the cluster has %zu usable node%s%s; at least one must run ranks", k, usable,
                       usable == 1 ? "" : "s", usable < c->nnodes ? " (after --exclude)" : "");
    spares_ctx x;
    p3d_policy_src r;
    p3d_sandbox_limits lim;
    memset(&x, 0, sizeof x);
    memset(&r, 0, sizeof r);
    p3d_cluster view = *c;
    size_t *map = calloc(usable, sizeof *map);
    p3d_cnode *nodes = calloc(usable, sizeof *nodes);
    x.chosen = calloc((size_t)k, sizeof *x.chosen);
    if (!map || !nodes || !x.chosen) {
        p3d_err(err, "out of memory");
        goto out;
    }
    size_t m = 0;
    for (size_t i = 0; i < c->nnodes; i++)
        if (c->nodes[i].role == P3D_NODE_USE) {
            nodes[m] = c->nodes[i];
            map[m++] = i;
        }
    view.nodes = nodes;
    view.nnodes = m;
    x.c = c;
    x.view = &view;
    x.map = map;
    x.job = job;
    if (policy) {
        if (p3d_policy_resolve(policy, &r, err) < 0)
            goto out;
        if (sha256_pin && *sha256_pin && p3d_policy_check_pin(r.source, r.text, r.len, sha256_pin, err) < 0)
            goto out;
        x.chunk = r.chunk;
        x.text = r.text;
        x.len = r.len;
    }
    if (p3d_policy_read_helper(&x.helper, &x.helper_len, err) < 0 || p3d_sandbox_limits_from_env(&lim, err) < 0 ||
        p3d_sandbox_new(&lim, &x.sb, err) < 0 || p3d_sandbox_protect(x.sb, spares_body, &x, err) < 0)
        goto out;
    if (x.err) {
        p3d_err(err, "%s", x.err);
        goto out;
    }
    for (int e = 0; e < k; e++)
        c->nodes[x.chosen[e]].role = P3D_NODE_SPARE;
    rc = 0;
out:
    p3d_sandbox_free(x.sb);
    p3d_policy_src_free(&r);
    free(x.err);
    free(x.helper);
    free(x.chosen);
    free(map);
    free(nodes);
    return rc;
}
