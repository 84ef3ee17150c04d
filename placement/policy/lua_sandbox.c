/*
 * lua_sandbox.c — the Lua 5.4 state policies run in, safe by construction
 * (STYLE.md 7-8): nothing is opened that a policy does not need, memory is
 * capped in the allocator, instructions are bounded by a count hook, and
 * every call goes through one docall with a traceback handler.
 */
#include "lua_internal.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The hook runs every HOOK_STEP instructions: cheap enough not to show in a
 * 100M-instruction policy, fine-grained enough to stop a loop promptly. */
#define HOOK_STEP 10000
#define PRINT_CAP (64 * 1024)
#define ALLOC_BYTES_PER_INSTR 2

struct p3d_sandbox {
    lua_State *L;
    size_t used, peak, cap;
    int hit_cap;              /* the allocator refused a block */
    unsigned long long instr, budget;
    int killed;               /* budget spent: every instruction now fails */
    size_t printed;           /* bytes print() wrote to stderr */
    char name[256];           /* chunk name of the last load, for messages */
};

static void count_hook(lua_State *L, lua_Debug *ar);

static p3d_sandbox *sandbox_of(lua_State *L)
{
    return *(p3d_sandbox **)lua_getextraspace(L);
}

/* The cap is checked only when a block grows, so freeing and shrinking
 * always succeed (Lua relies on that). A refused block makes Lua run an
 * emergency collection and retry before it raises LUA_ERRMEM. */
static void *sb_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    p3d_sandbox *sb = ud;
    if (!ptr)
        osize = 0; /* then osize encodes the object type, not a size */
    if (nsize == 0) {
        free(ptr);
        sb->used -= osize;
        return NULL;
    }
    if (nsize > osize && sb->used - osize + nsize > sb->cap) {
        sb->hit_cap = 1;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p)
        return NULL;
    sb->used = sb->used - osize + nsize;
    if (sb->used > sb->peak)
        sb->peak = sb->used;
    /* Allocation is work the count hook cannot see: a loop of
     * ("x"):rep(1 << 24) spends 16 MiB of memset per few instructions and
     * would run for hours inside the budget. Charging one instruction per
     * ALLOC_BYTES_PER_INSTR bytes makes the budget bound time again; the
     * hook notices at its next step. */
    if (nsize > osize && !sb->killed) {
        sb->instr += (nsize - osize) / ALLOC_BYTES_PER_INSTR;
        /* the hook runs every HOOK_STEP instructions, thousands of 16 MiB
         * blocks away: make it run on the next one (lua_sethook is safe
         * anywhere, even in a signal handler) */
        if (sb->instr > sb->budget && sb->L)
            lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, 1);
    }
    return p;
}

/* Redis's trick: once the budget is spent the hook fires on every
 * instruction and raises each time, so a pcall that catches the first kill
 * dies on its next instruction, and so does an error handler that loops. */
static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    p3d_sandbox *sb = sandbox_of(L);
    if (!sb->killed) {
        sb->instr += HOOK_STEP;
        if (sb->instr <= sb->budget)
            return;
        sb->killed = 1;
        lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    }
    /* level 0 is the running Lua function: name the line of the loop */
    luaL_where(L, 0);
    lua_pushfstring(L, "policy exceeded its instruction budget of %I instructions "
                       "(an endless loop? raise it with P3D_POLICY_MAX_INSTRUCTIONS)",
                    (lua_Integer)sb->budget);
    lua_concat(L, 2);
    lua_error(L);
}

/* lua.c's message handler: the message plus a traceback. It never calls
 * back into policy code (no __tostring), so it cannot be hijacked. */
static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg)
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* load(chunk [, chunkname [, mode [, env]]]): text chunks only, whatever
 * mode says; a reader function is refused too (it could assemble bytecode
 * piecewise, and policies never need one). */
static int sb_load(lua_State *L)
{
    size_t len;
    if (lua_type(L, 1) != LUA_TSTRING)
        return luaL_error(L, "load: only string chunks are allowed in a policy");
    const char *s = lua_tolstring(L, 1, &len);
    const char *chunkname = luaL_optstring(L, 2, "=(load)");
    int env = lua_isnone(L, 4) ? 0 : 4;
    int st = luaL_loadbufferx(L, s, len, chunkname, "t");
    if (st != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    if (env) {
        lua_pushvalue(L, env);
        if (!lua_setupvalue(L, -2, 1))
            lua_pop(L, 1);
    }
    return 1;
}

/* collectgarbage("count") only: a forced full collection costs one
 * instruction but unbounded time, which would dodge the budget. */
static int sb_collectgarbage(lua_State *L)
{
    const char *opt = luaL_optstring(L, 1, "collect");
    if (strcmp(opt, "count") != 0)
        return luaL_error(L, "collectgarbage: only \"count\" is allowed in a policy (got \"%s\")", opt);
    int kb = lua_gc(L, LUA_GCCOUNT, 0), b = lua_gc(L, LUA_GCCOUNTB, 0);
    lua_pushnumber(L, (lua_Number)kb + (lua_Number)b / 1024);
    return 1;
}

/* print goes to stderr (stdout may carry a JSON report), prefixed with the
 * policy's name and capped so a chatty loop cannot flood the terminal. */
static int sb_print(lua_State *L)
{
    p3d_sandbox *sb = sandbox_of(L);
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (sb->printed < PRINT_CAP) {
        fprintf(stderr, "[%s] %s\n", sb->name[0] ? sb->name : "policy", s);
        sb->printed += len + 1;
        if (sb->printed >= PRINT_CAP)
            fprintf(stderr, "[%s] (further print output suppressed)\n", sb->name[0] ? sb->name : "policy");
    }
    return 0;
}

/* xpcall(f, handler, ...) that calls the handler after the error has
 * unwound. Lua calls a real xpcall handler from inside the error, and when
 * the error came from the count hook, hooks are off until a pcall boundary:
 * a handler that loops would never be stopped. Without the debug library a
 * handler cannot inspect the failed stack anyway, so nothing is lost. */
static int sb_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 1);
    for (int i = 3; i <= n; i++)
        lua_pushvalue(L, i);
    if (lua_pcall(L, n - 2 > 0 ? n - 2 : 0, LUA_MULTRET, 0) == LUA_OK) {
        lua_pushboolean(L, 1);
        lua_replace(L, n); /* results follow the original arguments */
        return lua_gettop(L) - n + 1;
    }
    lua_pushvalue(L, 2);
    lua_insert(L, -2);
    lua_pcall(L, 1, 1, 0); /* an error in the handler is its result */
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
}

/* setmetatable without __gc: finalizers run with hooks disabled, so a
 * looping __gc would escape the instruction budget. Lua marks an object
 * for finalization only if __gc is present when the metatable is set, so
 * checking here is enough. */
static int sb_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: __gc metamethods are not allowed in a policy");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

static int sb_panic(lua_State *L)
{
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "par3drun: internal error: unprotected Lua error: %s\n", msg ? msg : "?");
    return 0; /* Lua aborts */
}

static const luaL_Reg allowed_libs[] = {
    {LUA_GNAME, luaopen_base},     {LUA_STRLIBNAME, luaopen_string},
    {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
    {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL}};

/* Names removed from base after opening it. */
static const char *const removed_globals[] = {"dofile", "loadfile", NULL};

/* Lua patterns backtrack inside one C call, where the count hook cannot
 * reach: ("a"):rep(3000):find(".-.-.-.-b") runs for hours on a single
 * instruction. So string.find/match/gmatch/gsub first bound the worst case:
 * with q quantifiers (* + -) a match attempt can try about n^q splits of an
 * n-byte subject, times n start positions when the pattern is not anchored
 * with ^. Above PATTERN_WORK_MAX (a few seconds of matching) the call fails
 * with a message instead of hanging the launcher (docs/limits.md). Plain
 * finds (find's 4th argument) and patterns without quantifiers are linear. */
#define PATTERN_WORK_MAX 4e9

static int pattern_quantifiers(const char *p, size_t len)
{
    int q = 0;
    size_t i = 0;
    while (i < len) {
        /* one single-char class: %x, [set], or a plain char */
        if (p[i] == '%') {
            if (i + 1 < len && (p[i + 1] == 'b')) {
                i += 4; /* %bxy matches balanced text, no quantifier after */
                continue;
            }
            if (i + 1 < len && p[i + 1] == 'f') {
                i += 2; /* %f[set]: a frontier, the set follows */
                if (i < len && p[i] == '[') {
                    i++;
                    if (i < len && p[i] == '^')
                        i++;
                    if (i < len)
                        i++; /* a leading ] belongs to the set */
                    while (i < len && p[i] != ']')
                        i += p[i] == '%' ? 2 : 1;
                    i++;
                }
                continue;
            }
            i += 2;
        } else if (p[i] == '[') {
            i++;
            if (i < len && p[i] == '^')
                i++;
            if (i < len)
                i++;
            while (i < len && p[i] != ']')
                i += p[i] == '%' ? 2 : 1;
            i++;
        } else {
            i++;
        }
        if (i < len && (p[i] == '*' || p[i] == '+' || p[i] == '-')) {
            q++;
            i++;
        } else if (i < len && p[i] == '?') {
            i++;
        }
    }
    return q;
}

static int pattern_guard(lua_State *L, int plain_arg)
{
    size_t n, plen;
    const char *s = luaL_checklstring(L, 1, &n);
    const char *p = luaL_checklstring(L, 2, &plen);
    (void)s;
    if (plain_arg && lua_toboolean(L, plain_arg))
        return 0;
    int anchored = plen > 0 && p[0] == '^';
    int q = pattern_quantifiers(p, plen);
    double work = anchored ? 1.0 : (double)n + 1;
    for (int k = 0; k < q && work <= PATTERN_WORK_MAX; k++)
        work *= (double)n + 1;
    if (q > 0 && work > PATTERN_WORK_MAX) {
        char msg[320]; /* lua_pushfstring knows no %zu or precisions */
        snprintf(msg, sizeof msg,
                 "pattern '%.40s' with %d repetition%s over a %zu-byte string could backtrack for "
                 "hours (limit: %.0e steps); anchor it with ^, use fewer of * + -, or split the "
                 "string first",
                 p, q, q == 1 ? "" : "s", n, PATTERN_WORK_MAX);
        return luaL_error(L, "%s", msg);
    }
    return 0;
}

/* upvalue 1: the original string function; upvalue 2: index of find's
 * "plain" argument (0 when the function has none) */
static int sb_pattern_call(lua_State *L)
{
    pattern_guard(L, (int)lua_tointeger(L, lua_upvalueindex(2)));
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

static void guard_patterns(lua_State *L)
{
    static const struct {
        const char *name;
        int plain_arg;
    } fns[] = {{"find", 4}, {"match", 0}, {"gmatch", 0}, {"gsub", 0}};
    lua_getglobal(L, "string");
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
        lua_getfield(L, -1, fns[i].name);
        lua_pushinteger(L, fns[i].plain_arg);
        lua_pushcclosure(L, sb_pattern_call, 2);
        lua_setfield(L, -2, fns[i].name);
    }
    lua_pop(L, 1);
}

static const luaL_Reg replaced_globals[] = {
    {"load", sb_load},       {"collectgarbage", sb_collectgarbage}, {"print", sb_print},
    {"xpcall", sb_xpcall},   {"setmetatable", sb_setmetatable},     {NULL, NULL}};

static int setup(lua_State *L)
{
    for (const luaL_Reg *l = allowed_libs; l->name; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    /* luaL_requiref records each library in package.loaded, which lives in
     * the registry only (package itself is never opened). */
    lua_pushglobaltable(L);
    for (const char *const *n = removed_globals; *n; n++) {
        lua_pushnil(L);
        lua_setfield(L, -2, *n);
    }
    luaL_setfuncs(L, replaced_globals, 0);
    lua_pop(L, 1);
    guard_patterns(L);
    return 0;
}

int p3d_sandbox_limits_from_env(p3d_sandbox_limits *lim, char **err)
{
    lim->mem_bytes = P3D_POLICY_MEM_DEFAULT;
    lim->instructions = P3D_POLICY_INSTR_DEFAULT;
    const char *m = getenv("P3D_POLICY_MEM_MB");
    if (m && *m) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(m, &end, 10);
        if (errno || *end || v < 4 || v > (1ULL << 20))
            return p3d_err(err, "P3D_POLICY_MEM_MB: expected a number of MiB between 4 and 1048576, got '%s'", m);
        lim->mem_bytes = (size_t)v << 20;
    }
    const char *i = getenv("P3D_POLICY_MAX_INSTRUCTIONS");
    if (i && *i) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(i, &end, 10);
        if (errno || *end || v < 1000)
            return p3d_err(err, "P3D_POLICY_MAX_INSTRUCTIONS: expected a whole number >= 1000, got '%s'", i);
        lim->instructions = v;
    }
    return 0;
}

int p3d_sandbox_new(const p3d_sandbox_limits *lim, p3d_sandbox **out, char **err)
{
    int rc = -1;
    *out = NULL;
    p3d_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return p3d_err(err, "out of memory creating the policy sandbox");
    sb->cap = lim && lim->mem_bytes ? lim->mem_bytes : P3D_POLICY_MEM_DEFAULT;
    sb->budget = lim && lim->instructions ? lim->instructions : P3D_POLICY_INSTR_DEFAULT;
    sb->L = lua_newstate(sb_alloc, sb);
    if (!sb->L) {
        p3d_err(err, "cannot create the policy's Lua state (memory limit %zu MiB too small?)", sb->cap >> 20);
        goto out;
    }
    *(p3d_sandbox **)lua_getextraspace(sb->L) = sb;
    lua_atpanic(sb->L, sb_panic);
    if (p3d_sandbox_protect(sb, setup, NULL, err) < 0)
        goto out;
    lua_sethook(sb->L, count_hook, LUA_MASKCOUNT, HOOK_STEP);
    rc = 0;
out:
    if (rc < 0)
        p3d_sandbox_free(sb);
    else
        *out = sb;
    return rc;
}

void p3d_sandbox_free(p3d_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->L)
        lua_close(sb->L);
    free(sb);
}

lua_State *p3d_sandbox_state(p3d_sandbox *sb)
{
    return sb->L;
}

unsigned long long p3d_sandbox_instructions(const p3d_sandbox *sb)
{
    return sb->instr;
}

size_t p3d_sandbox_peak_bytes(const p3d_sandbox *sb)
{
    return sb->peak;
}

/* Turns a failed pcall's status and error object into *err and pops it. */
static int failure(p3d_sandbox *sb, int st, char **err)
{
    lua_State *L = sb->L;
    const char *who = sb->name[0] ? sb->name : "policy";
    if (sb->hit_cap && (st == LUA_ERRMEM || st == LUA_ERRERR))
        p3d_err(err, "%s: policy exceeded its memory limit of %zu MiB (raise it with P3D_POLICY_MEM_MB)", who,
                sb->cap >> 20);
    else if (st == LUA_ERRMEM)
        p3d_err(err, "%s: out of memory", who);
    else {
        const char *msg = lua_tostring(L, -1);
        p3d_err(err, "%s", msg ? msg : "(error object is not a string)");
    }
    lua_pop(L, 1);
    return -1;
}

int p3d_sandbox_load(p3d_sandbox *sb, const char *buf, size_t len, const char *name, char **err)
{
    char chunkname[sizeof sb->name + 1];
    snprintf(sb->name, sizeof sb->name, "%s", name);
    snprintf(chunkname, sizeof chunkname, "@%s", name);
    sb->hit_cap = 0;
    int st = luaL_loadbufferx(sb->L, buf, len, chunkname, "t");
    return st == LUA_OK ? 0 : failure(sb, st, err);
}

int p3d_sandbox_call(p3d_sandbox *sb, int nargs, int nresults, char **err)
{
    lua_State *L = sb->L;
    int base = lua_gettop(L) - nargs; /* the function's slot */
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    sb->hit_cap = 0;
    int st = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    return st == LUA_OK ? 0 : failure(sb, st, err);
}

int p3d_sandbox_protect(p3d_sandbox *sb, lua_CFunction f, void *ud, char **err)
{
    lua_State *L = sb->L;
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, ud);
    return p3d_sandbox_call(sb, 1, 0, err);
}
