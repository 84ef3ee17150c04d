/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_decl.c — what a policy file declares: its hooks place, spares
 * and shrink, and whose shape rules it follows. A policy says so in the table
 * its chunk returns (`return {follows = "megatron", place = place, spares
 * = spares}`); a policy that returns nothing declares them as globals (the
 * older form, still read: docs/policies.md "What a policy declares").
 * The runners (policy_run.c, policy_spares.c, policy_shrink.c) read hooks
 * through here, so the two forms mean the same to all.
 */
#include "policy_internal.h"
#include "termsafe.h"

#include <lauxlib.h>
#include <string.h>

/* The fields a returned declaration may have: a misspelt one ("plcae")
 * would otherwise leave the policy silently without its hook. */
static const char *const decl_fields[] = {"place", "spares", "follows", "shrink"};

static int check_fields(lua_State *L, int decl, const char *chunk, char **err)
{
    lua_pushnil(L);
    while (lua_next(L, decl)) { /* raw: lua_next ignores metamethods */
        int known = 0;
        if (lua_type(L, -2) == LUA_TSTRING)
            for (size_t i = 0; i < sizeof decl_fields / sizeof *decl_fields; i++)
                known |= strcmp(lua_tostring(L, -2), decl_fields[i]) == 0;
        if (!known) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2);
            p3d_err(err,
                    "%s: the table the policy returns has a field '%s'; expected only place, spares, "
                    "shrink and follows",
                    chunk, p3d_tesc(k));
            lua_pop(L, 2);
            return -1;
        }
        lua_pop(L, 1);
    }
    return 0;
}

int p3d_policy_declare(p3d_sandbox *sb, const char *chunk, const char *text, size_t len, char **err)
{
    lua_State *L = p3d_sandbox_state(sb);
    if (p3d_sandbox_load(sb, text, len, chunk, err) < 0 || p3d_sandbox_call(sb, 0, 1, err) < 0)
        return -1;
    int ty = lua_type(L, -1);
    if (ty == LUA_TNIL) { /* the older form: hooks and follows are globals */
        lua_pop(L, 1);
        lua_pushglobaltable(L);
        return 0;
    }
    if (ty != LUA_TTABLE) {
        p3d_err(err,
                "%s: the policy returns %s; expected a table {place = ..., spares = ..., follows = ...} "
                "(or nothing, with place as a global function)",
                chunk, luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    if (check_fields(L, lua_gettop(L), chunk, err) < 0) {
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

int p3d_policy_decl_field(lua_State *L, int decl, const char *field)
{
    lua_pushstring(L, field);
    return lua_rawget(L, decl); /* raw: the policy may have given _G a metatable */
}

const char *p3d_policy_decl_where(lua_State *L, int decl)
{
    int globals;
    lua_pushglobaltable(L);
    globals = lua_rawequal(L, -1, decl);
    lua_pop(L, 1);
    return globals ? "the global" : "the returned table's field";
}
