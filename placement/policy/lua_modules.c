/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_modules.c — the one way Lua code reaches another file: lua/par3d.lua
 * loads its modules, lua/par3d/NAME.lua, through the loader made here and
 * passed to it as its second chunk argument. No `require`, no package
 * searchers: the loader takes a bare lower-case name (no path, no dot),
 * reads only <data dir>/lua/par3d/NAME.lua with the same size cap as a
 * policy, compiles it as text ("t": never bytecode) into the sandbox's
 * global environment, and is closed once par3d.lua has returned, so a
 * policy that got hold of it could load nothing. What a module does runs
 * under the sandbox's memory cap and instruction budget like the rest.
 */
#include "policy_internal.h"
#include "policy_source.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest module name; the bundled ones are far shorter. */
#define MODULE_NAME_MAX 32

/* load_module(name) -> the module's compiled chunk (not yet run).
 * Upvalue 1: the module directory; upvalue 2: true while open. */
static int load_module(lua_State *L)
{
    size_t nl;
    const char *name = luaL_checklstring(L, 1, &nl);
    if (!lua_toboolean(L, lua_upvalueindex(2)))
        return luaL_error(L, "par3d module loader: closed (only lua/par3d.lua loads modules, while it starts)");
    int ok = nl > 0 && nl <= MODULE_NAME_MAX;
    for (size_t i = 0; ok && i < nl; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || name[i] == '_';
    if (!ok)
        return luaL_error(L, "par3d module loader: '%s' is not a module name (expected 1 to %d of a-z and _)",
                          nl > 64 ? "(too long)" : name, MODULE_NAME_MAX);
    const char *dir = lua_tostring(L, lua_upvalueindex(1));
    char path[4096], chunkname[MODULE_NAME_MAX + 16], msg[1024];
    snprintf(path, sizeof path, "%s/%s.lua", dir, name);
    snprintf(chunkname, sizeof chunkname, "@par3d/%s.lua", name);
    char *text = NULL, *err = NULL;
    size_t len = 0;
    if (p3d_read_small_file(path, "policy helper module", P3D_POLICY_MAX_BYTES, &text, &len, &err) < 0) {
        /* copied first: luaL_error does not return, err must not leak */
        snprintf(msg, sizeof msg, "%.1000s", err ? err : "policy helper module: cannot read it");
        free(err);
        return luaL_error(L, "%s", msg);
    }
    int st = luaL_loadbufferx(L, text, len, chunkname, "t");
    free(text);
    if (st != LUA_OK)
        return lua_error(L);
    return 1;
}

void p3d_policy_push_module_loader(lua_State *L)
{
    lua_pushfstring(L, "%s/lua/par3d", p3d_data_dir());
    lua_pushboolean(L, 1);
    lua_pushcclosure(L, load_module, 2);
}

void p3d_policy_close_module_loader(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_pushboolean(L, 0);
    lua_setupvalue(L, idx, 2);
}
