/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_shrink.c — the policy's say in a shrink (p3d/elastic.h,
 * docs/policies.md "Shrinking"): C computes the width and a default
 * choice of replicas (p3d_shrink_plan); a policy that returns a
 * shrink(cluster, job, s) hook may choose instead which whole surviving
 * replicas stay and in which dp order. It runs in the same sandbox with the
 * same limits as place(); what it returns is validated with raw accesses,
 * and the placement built from it goes through p3d_reshape_check.
 */
#include "policy_internal.h"
#include "policy_source.h"
#include "reshape_internal.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct shrink_ctx {
    p3d_sandbox *sb;
    const char *chunk, *text;
    size_t len;
    char *helper;
    size_t helper_len;
    const p3d_cluster *c;
    const p3d_job *job;
    const p3d_placement *pl;
    const p3d_gpuref *lost;
    size_t nlost;
    const p3d_reshape *def; /* C's default */
    unsigned char *intact;  /* [old dp]: whole after the loss */
    int *keep;              /* what the hook chose, def->width.dp entries */
    int hooked;             /* 1: the policy has a shrink hook and chose */
    char *err;
} shrink_ctx;

static void push_ints(lua_State *L, const char *key, const int *v, int n)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, v[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, key);
}

/* s.rack[d + 1]: the rack of old replica d (of its first rank's node). */
static void push_racks(lua_State *L, const shrink_ctx *x)
{
    lua_createtable(L, x->def->old_dp, 0);
    for (int r = 0; r < x->pl->world; r++) {
        const p3d_rank *k = &x->pl->ranks[r];
        if (k->coord[P3D_DIM_TP] || k->coord[P3D_DIM_CP] || k->coord[P3D_DIM_PP])
            continue;
        lua_pushstring(L, x->c->racks[x->c->nodes[k->node].rack]);
        lua_rawseti(L, -2, k->coord[P3D_DIM_DP] + 1);
    }
    lua_setfield(L, -2, "rack");
}

/* s = {from_dp, dp, min_dp, keep, intact, lost, rack} */
static void push_survey(lua_State *L, const shrink_ctx *x)
{
    int old = x->def->old_dp, n = 0;
    int *in = malloc(sizeof *in * (size_t)old);
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, old);
    lua_setfield(L, -2, "from_dp");
    lua_pushinteger(L, x->def->width.dp);
    lua_setfield(L, -2, "dp");
    lua_pushinteger(L, x->job->min_dp);
    lua_setfield(L, -2, "min_dp");
    push_ints(L, "keep", x->def->from, x->def->width.dp);
    for (int d = 0; in && d < old; d++)
        if (x->intact[d])
            in[n++] = d;
    push_ints(L, "intact", in ? in : &n, in ? n : 0);
    free(in);
    lua_createtable(L, (int)x->nlost, 0);
    for (size_t i = 0; i < x->nlost; i++) {
        const char *nm = x->c->nodes[x->lost[i].node].name;
        if (x->lost[i].gpu < 0)
            lua_pushstring(L, nm);
        else
            lua_pushfstring(L, "%s:gpu%d", nm, x->lost[i].gpu);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "lost");
    push_racks(L, x);
}

/* The hook's list at res: exactly dp distinct whole old replicas. */
static int collect(lua_State *L, shrink_ctx *x, int res)
{
    int dp = x->def->width.dp, old = x->def->old_dp;
    if (lua_type(L, res) != LUA_TTABLE)
        return p3d_err(&x->err, "%s: shrink() returned %s, expected a list of %d replica (dp) indices", x->chunk,
                       luaL_typename(L, res), dp);
    if (lua_rawlen(L, res) != (size_t)dp)
        return p3d_err(&x->err, "%s: shrink() returned %zu replicas, expected exactly s.dp = %d", x->chunk,
                       (size_t)lua_rawlen(L, res), dp);
    for (int j = 0; j < dp; j++) {
        int ok = 0;
        lua_rawgeti(L, res, j + 1);
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        lua_pop(L, 1);
        if (!ok || v < 0 || v >= old)
            return p3d_err(&x->err, "%s: shrink() entry %d: expected a dp index 0..%d of the old placement", x->chunk,
                           j + 1, old - 1);
        if (!x->intact[v])
            return p3d_err(&x->err, "%s: shrink() entry %d: replica %d lost GPUs (s.intact lists the whole ones)",
                           x->chunk, j + 1, (int)v);
        for (int i = 0; i < j; i++)
            if (x->keep[i] == v)
                return p3d_err(&x->err, "%s: shrink() names replica %d twice", x->chunk, (int)v);
        x->keep[j] = (int)v;
    }
    x->hooked = 1;
    return 0;
}

/* In protected mode: par3d, the policy chunk, its shrink() if any. */
static int shrink_body(lua_State *L)
{
    shrink_ctx *x = lua_touserdata(L, 1);
    lua_settop(L, 0);
    if (p3d_policy_load_par3d(x->sb, x->helper, x->helper_len, &x->err) < 0 ||
        p3d_policy_declare(x->sb, x->chunk, x->text, x->len, &x->err) < 0)
        return 0;
    int decl = lua_gettop(L), ty = p3d_policy_decl_field(L, decl, "shrink");
    if (ty == LUA_TNIL)
        return 0; /* no hook: C's default stands */
    if (ty != LUA_TFUNCTION) {
        p3d_err(&x->err, "%s: %s 'shrink' is %s, expected a function shrink(cluster, job, s) (or none)", x->chunk,
                p3d_policy_decl_where(L, decl), luaL_typename(L, -1));
        return 0;
    }
    p3d_lua_push_cluster(L, x->c);
    p3d_lua_push_job(L, x->job);
    push_survey(L, x);
    if (p3d_sandbox_call(x->sb, 3, 1, &x->err) < 0) {
        char *e = x->err;
        x->err = NULL;
        p3d_err(&x->err, "%s: shrink(cluster, job, s) failed: %s", x->chunk, e);
        free(e);
        return 0;
    }
    if (!lua_isnil(L, -1)) /* nil: the default */
        collect(L, x, lua_gettop(L));
    return 0;
}

/* intact[d] = 0 for every old replica d that lost a GPU. */
static int mark_broken(const p3d_cluster *c, const p3d_placement *pl, const p3d_gpuref *lost, size_t nlost,
                       unsigned char *intact)
{
    rs_lostmap lm = {0};
    if (rs_lostmap_make(c, lost, nlost, &lm) < 0) {
        rs_lostmap_free(&lm);
        return -1;
    }
    for (int r = 0; r < pl->world; r++)
        if (rs_lostmap_has(&lm, pl->ranks[r].node, pl->ranks[r].gpu))
            intact[pl->ranks[r].coord[P3D_DIM_DP]] = 0;
    rs_lostmap_free(&lm);
    return 0;
}

/* Runs the hook of policy (when it has one) on the default d; x->keep and
 * x->hooked say what it chose. */
static int run_hook(const char *policy, const char *sha, shrink_ctx *x, char **err)
{
    p3d_policy_src r;
    p3d_sandbox_limits lim;
    int rc = -1;
    memset(&r, 0, sizeof r);
    if (p3d_policy_resolve(policy, &r, err) < 0 ||
        (sha && *sha && p3d_policy_check_pin(r.source, r.text, r.len, sha, err) < 0))
        goto out;
    x->chunk = r.chunk, x->text = r.text, x->len = r.len;
    if (p3d_policy_read_helper(&x->helper, &x->helper_len, err) < 0 || p3d_sandbox_limits_from_env(&lim, err) < 0 ||
        p3d_sandbox_new(&lim, &x->sb, err) < 0 || p3d_sandbox_protect(x->sb, shrink_body, x, err) < 0)
        goto out;
    if (x->err) {
        p3d_err(err, "%s", x->err);
        goto out;
    }
    rc = 0;
out:
    p3d_sandbox_free(x->sb);
    x->sb = NULL;
    p3d_policy_src_free(&r);
    free(x->helper);
    x->helper = NULL;
    P3D_FREE(&x->err);
    return rc;
}

int p3d_policy_shrink(const char *policy, const char *sha256_pin, const p3d_cluster *c, const p3d_job *job,
                      const p3d_placement *pl, const p3d_elastic *e, const p3d_gpuref *lost, size_t nlost,
                      p3d_reshape *out, char **err)
{
    int rc = -1, old = p3d_mesh_size(&pl->mesh, P3D_DIM_DP);
    shrink_ctx x;
    memset(&x, 0, sizeof x);
    if (p3d_shrink_plan(c, pl, e, lost, nlost, out, err) < 0)
        return -1;
    x.intact = malloc((size_t)old);
    x.keep = malloc(sizeof *x.keep * (size_t)out->width.dp);
    if (!x.intact || !x.keep) {
        p3d_err(err, "out of memory");
        goto out;
    }
    memset(x.intact, 1, (size_t)old);
    if (mark_broken(c, pl, lost, nlost, x.intact) < 0) {
        p3d_err(err, "out of memory");
        goto out;
    }
    x.c = c, x.job = job, x.pl = pl, x.lost = lost, x.nlost = nlost, x.def = out;
    if (policy && run_hook(policy, sha256_pin, &x, err) < 0)
        goto out;
    if (x.hooked && rs_keep(pl, x.keep, out->width.dp, out) < 0) {
        p3d_err(err, "out of memory building the policy's shrink");
        goto out;
    }
    char *why = NULL;
    if (p3d_reshape_check(c, pl, out->pl, e, lost, nlost, &why) < 0) {
        p3d_err(err, "%s: the shrink %s is refused: %s", x.hooked ? policy : "par3drun",
                x.hooked ? "its shrink() chose" : "it computed", why ? why : "out of memory");
        free(why);
        goto out;
    }
    rc = 0;
out:
    if (rc < 0)
        p3d_reshape_free(out);
    free(x.intact);
    free(x.keep);
    return rc;
}
