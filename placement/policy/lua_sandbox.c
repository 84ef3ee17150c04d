/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_sandbox.c — the Lua 5.4 state policies run in, safe by construction
 * (STYLE.md 7-8): nothing is opened that a policy does not need, memory is
 * capped in the allocator, instructions are bounded by a count hook, and
 * every call goes through one docall with a traceback handler. The count
 * hook and the kill it raises are lua_budget.c's.
 */
/* SIGEV_THREAD_ID and gettid need _GNU_SOURCE, which the build defines */
#include "lua_sandbox_state.h"
#include "decimal.h"
#include "termsafe.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALLOC_BYTES_PER_INSTR 2
/* An error message longer than this is cut (one error("x"):rep(2^24) would
 * otherwise put 16 MiB on the terminal). */
#define ERROR_CAP 4096
/* After the deadline the watchdog signal repeats every WATCH_REPEAT_NS
 * until the policy has stopped (the matcher may be in its allocator). */
#define WATCH_REPEAT_NS 10000000L

static p3d_sandbox *sandbox_of(lua_State *L)
{
    return p3d_sandbox_of(L);
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
        /* the hook runs every P3D_SANDBOX_HOOK_STEP instructions,
         * thousands of 16 MiB blocks away: make it run on the next one
         * (lua_sethook is safe anywhere, even in a signal handler) */
        if (sb->instr > sb->budget && sb->L)
            lua_sethook(sb->L, p3d_sandbox_count_hook, LUA_MASKCOUNT, 1);
    }
    return p;
}

/* ---------------------------------------------------------------------- */
/* CPU time: a deadline on the thread's CPU clock                          */
/* ---------------------------------------------------------------------- */

/* The instruction budget does not bound time: one comparison of two 10 MiB
 * strings is one instruction and 0.4 ms, one pattern match can be hours.
 * So the policy also gets a deadline on its thread's CPU clock, checked by
 * the hook at every step, and a POSIX CPU-time timer whose signal handler
 * (1) sets the hook to fire on the very next instruction and (2) abandons
 * the matcher when that is where the time goes. The signal is a real-time
 * one aimed at this thread only (SIGEV_THREAD_ID) and unblocked just while
 * a sandbox lives, so it never reaches the launcher's own signal handling. */
static int watch_signal(void)
{
    return SIGRTMAX - 3;
}

static void watch_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code != SI_TIMER || !si->si_value.sival_ptr)
        return;
    p3d_sandbox *sb = si->si_value.sival_ptr;
    sb->watch.expired = 1;
    if (sb->watch.in_matcher && !sb->watch.in_alloc)
        siglongjmp(sb->watch.jmp, 1);
    if (sb->L)
        lua_sethook(sb->L, p3d_sandbox_count_hook, LUA_MASKCOUNT, 1);
}

static pthread_once_t watch_once = PTHREAD_ONCE_INIT;
static int watch_installed;

static void install_watch_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = watch_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    watch_installed = sigaction(watch_signal(), &sa, NULL) == 0;
}

/* (Re)arms the timer for cpu_start + cpu_limit. Without a timer (the
 * system refused one) the hook still bounds time spent in Lua code. */
static void arm_watch(p3d_sandbox *sb)
{
    if (!sb->have_timer)
        return;
    double end = (double)sb->cpu_start.tv_sec + (double)sb->cpu_start.tv_nsec * 1e-9 + sb->cpu_limit;
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)end;
    its.it_value.tv_nsec = (long)((end - (double)(time_t)end) * 1e9);
    if (its.it_value.tv_nsec >= 1000000000L)
        its.it_value.tv_nsec = 999999999L;
    its.it_interval.tv_nsec = WATCH_REPEAT_NS;
    timer_settime(sb->timer, TIMER_ABSTIME, &its, NULL);
}

static void start_watch(p3d_sandbox *sb)
{
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &sb->cpu_start);
    pthread_sigmask(SIG_SETMASK, NULL, &sb->run_mask);
    pthread_once(&watch_once, install_watch_handler);
    if (!watch_installed)
        return;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = watch_signal();
    sev.sigev_value.sival_ptr = sb;
    sev._sigev_un._tid = (pid_t)gettid();
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &sb->timer) < 0)
        return;
    sb->have_timer = 1;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, watch_signal());
    pthread_sigmask(SIG_UNBLOCK, &s, &sb->saved_mask);
    pthread_sigmask(SIG_SETMASK, NULL, &sb->run_mask);
    arm_watch(sb);
}

/* Deletes the timer and swallows a signal it may still have queued, so no
 * handler ever sees a freed sandbox. */
static void stop_watch(p3d_sandbox *sb)
{
    if (!sb->have_timer)
        return;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, watch_signal());
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    timer_delete(sb->timer);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&s, NULL, &zero) > 0)
        ;
    pthread_sigmask(SIG_SETMASK, &sb->saved_mask, NULL);
    sb->have_timer = 0;
}

void p3d_sandbox_fit_cluster(p3d_sandbox *sb, size_t gpus)
{
    if (!sb->mem_fixed) {
        size_t want = P3D_POLICY_MEM_DEFAULT + gpus * P3D_POLICY_MEM_PER_GPU;
        if (want > sb->cap)
            sb->cap = want;
    }
    if (!sb->cpu_fixed) {
        double want = P3D_POLICY_CPU_DEFAULT + (double)gpus * P3D_POLICY_CPU_PER_GPU;
        if (want > sb->cpu_limit) {
            sb->cpu_limit = want;
            arm_watch(sb);
        }
    }
}

char *p3d_sandbox_escape(const char *s, size_t len, size_t cap, int keep_lines)
{
    return p3d_term_dup(s, len, cap, keep_lines ? P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB : 0);
}

/* Does msg start with Lua's "chunkname:line:" position? */
static int has_position(const char *msg)
{
    const char *c = strchr(msg, ':');
    while (c) {
        const char *d = c + 1;
        while (*d >= '0' && *d <= '9')
            d++;
        if (d > c + 1 && *d == ':')
            return 1;
        c = strchr(c + 1, ':');
        if (c && c - msg > 512)
            break;
    }
    return 0;
}

/* lua.c's message handler: the message plus a traceback. It never calls
 * back into policy code (no __tostring), so it cannot be hijacked. */
static int msghandler(lua_State *L)
{
    size_t len;
    const char *msg = lua_tolstring(L, 1, &len);
    if (!msg)
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    else {
        /* the policy's own text: one line, bounded, no terminal controls */
        char *e = p3d_sandbox_escape(msg, len, ERROR_CAP, 0);
        if (!e)
            return 1; /* the message as it is: out of memory is no time to cut */
        lua_pushstring(L, e);
        free(e);
        msg = lua_tostring(L, -1);
    }
    /* error(msg, 0) is the policy's own message for the user, said on
     * purpose without a position: no traceback. A message with a
     * "chunk:line:" position is a fault to locate: with one. */
    if (!has_position(msg))
        return 1;
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
 * policy's name, control characters escaped (no forged lines, no terminal
 * escapes), and capped at P3D_POLICY_OUTPUT_CAP bytes per run; what is left
 * out is counted and reported once when the sandbox closes. */
static int sb_print(lua_State *L)
{
    p3d_sandbox *sb = sandbox_of(L);
    int n = lua_gettop(L);
    luaL_checkstack(L, 4, "print");
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
    size_t room = sb->printed < P3D_POLICY_OUTPUT_CAP ? P3D_POLICY_OUTPUT_CAP - sb->printed : 0;
    if (room == 0) {
        sb->dropped += len + 1;
        return 0;
    }
    size_t keep = len < room ? len : room;
    char *e = p3d_sandbox_escape(s, keep, keep, 0);
    if (!e)
        return luaL_error(L, "print: out of memory");
    fprintf(stderr, "[%s] %s\n", sb->name[0] ? sb->name : "policy", e);
    free(e);
    sb->printed += keep + 1;
    sb->dropped += len - keep;
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
    /* the function and its n-2 arguments are pushed again */
    luaL_checkstack(L, n, "too many arguments to xpcall");
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

static const luaL_Reg allowed_libs[] = {{LUA_GNAME, luaopen_base},       {LUA_STRLIBNAME, luaopen_string},
                                        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
                                        {LUA_UTF8LIBNAME, luaopen_utf8}, {NULL, NULL}};

/* Names removed from base after opening it. */
static const char *const removed_globals[] = {"dofile", "loadfile", NULL};

/* table.move, insert and remove loop in C over a range the caller names
 * (or a __len metamethod reports): table.move(t, 1, math.maxinteger, 0)
 * is 2^63 steps in one call, where neither hook nor CPU watchdog reaches.
 * Each charges its element count to the instruction budget before it
 * runs, so such a call fails at once. upvalue 1: the original function;
 * upvalue 2: which one (0 move, 1 insert, 2 remove). */
static int sb_table_call(lua_State *L)
{
    p3d_sandbox *sb = sandbox_of(L);
    int which = (int)lua_tointeger(L, lua_upvalueindex(2));
    int n = lua_gettop(L);
    lua_Integer count = 0;
    if (which == 0) {
        lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
        if (e >= f)
            count = (f <= 0 && e > LUA_MAXINTEGER + f) ? LUA_MAXINTEGER : e - f + 1;
    } else if (n >= 2) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_Integer len = luaL_len(L, 1);
        lua_Integer pos = which == 1 && n == 2 ? len : lua_isinteger(L, 2) ? lua_tointeger(L, 2) : len;
        if (len > pos && pos > LUA_MININTEGER + 1)
            count = len - pos + 1;
        else if (len < 0)
            count = LUA_MAXINTEGER;
    }
    if (count > 0) {
        unsigned long long left = sb->budget > sb->instr ? sb->budget - sb->instr : 0;
        if ((unsigned long long)count > left) {
            sb->instr = sb->budget + 1;
            p3d_sandbox_kill(L, sb, 1);
            return p3d_sandbox_raise_kill(L, sb);
        }
        sb->instr += (unsigned long long)count;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

int p3d_sandbox_charge(lua_State *L, unsigned long long n)
{
    p3d_sandbox *sb = sandbox_of(L);
    if (!sb)
        return 0;
    unsigned long long left = sb->budget > sb->instr ? sb->budget - sb->instr : 0;
    if (!sb->killed && n > left) {
        sb->instr = sb->budget + 1;
        p3d_sandbox_kill(L, sb, 1);
    }
    if (sb->killed)
        return p3d_sandbox_raise_kill(L, sb);
    sb->instr += n;
    return 0;
}

static void charge_table_functions(lua_State *L)
{
    static const char *const names[] = {"move", "insert", "remove"};
    lua_getglobal(L, LUA_TABLIBNAME);
    for (int i = 0; i < 3; i++) {
        lua_getfield(L, -1, names[i]);
        lua_pushinteger(L, i);
        lua_pushcclosure(L, sb_table_call, 2);
        lua_setfield(L, -2, names[i]);
    }
    lua_pop(L, 1);
}

static const luaL_Reg replaced_globals[] = {
    {"load", sb_load},     {"collectgarbage", sb_collectgarbage}, {"print", sb_print},
    {"xpcall", sb_xpcall}, {"setmetatable", sb_setmetatable},     {NULL, NULL}};

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
    p3d_matcher_install(L);
    charge_table_functions(L);
    return 0;
}

int p3d_sandbox_limits_from_env(p3d_sandbox_limits *lim, char **err)
{
    lim->mem_bytes = 0; /* scaled to the cluster */
    lim->instructions = P3D_POLICY_INSTR_DEFAULT;
    lim->cpu_seconds = 0; /* scaled to the cluster */
    /* plain decimal digits (decimal.h): strtoull took "-1" as 2^64-1 */
    unsigned long long v;
    int k = p3d_env_decimal("P3D_POLICY_MEM_MB", 1ULL << 20, &v);
    if (k < 0 || (k > 0 && v < 4))
        return p3d_err(err, "P3D_POLICY_MEM_MB: expected a number of MiB between 4 and 1048576, got '%s'",
                       p3d_tesc(getenv("P3D_POLICY_MEM_MB")));
    if (k > 0)
        lim->mem_bytes = (size_t)v << 20;
    k = p3d_env_decimal("P3D_POLICY_MAX_INSTRUCTIONS", (1ULL << 62), &v);
    if (k < 0 || (k > 0 && v < 1000))
        return p3d_err(err, "P3D_POLICY_MAX_INSTRUCTIONS: expected a whole number >= 1000, got '%s'",
                       p3d_tesc(getenv("P3D_POLICY_MAX_INSTRUCTIONS")));
    if (k > 0)
        lim->instructions = v;
    const char *t = getenv("P3D_POLICY_CPU_SECONDS");
    if (t && *t) {
        char *end;
        errno = 0;
        double v = strtod(t, &end);
        if (errno || *end || !(v >= 0.1 && v <= 86400))
            return p3d_err(err, "P3D_POLICY_CPU_SECONDS: expected seconds between 0.1 and 86400, got '%s'",
                           p3d_tesc(t));
        lim->cpu_seconds = v;
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
    sb->mem_fixed = lim && lim->mem_bytes;
    sb->cap = sb->mem_fixed ? lim->mem_bytes : P3D_POLICY_MEM_DEFAULT;
    sb->budget = lim && lim->instructions ? lim->instructions : P3D_POLICY_INSTR_DEFAULT;
    sb->cpu_fixed = lim && lim->cpu_seconds > 0;
    sb->cpu_limit = sb->cpu_fixed ? lim->cpu_seconds : P3D_POLICY_CPU_DEFAULT;
    sb->L = lua_newstate(sb_alloc, sb);
    if (!sb->L) {
        p3d_err(err, "cannot create the policy's Lua state (memory limit %zu MiB too small?)", sb->cap >> 20);
        goto out;
    }
    *(p3d_sandbox **)lua_getextraspace(sb->L) = sb;
    lua_atpanic(sb->L, sb_panic);
    if (p3d_sandbox_protect(sb, setup, NULL, err) < 0)
        goto out;
    lua_sethook(sb->L, p3d_sandbox_count_hook, LUA_MASKCOUNT, P3D_SANDBOX_HOOK_STEP);
    start_watch(sb);
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
    stop_watch(sb);
    if (sb->dropped)
        fprintf(stderr, "[%s] (%zu more bytes of print output dropped: the cap is %d KiB per run)\n",
                sb->name[0] ? sb->name : "policy", sb->dropped, P3D_POLICY_OUTPUT_CAP >> 10);
    p3d_matcher_close(sb);
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
        size_t len;
        const char *msg = lua_tolstring(L, -1, &len);
        char *e = msg ? p3d_sandbox_escape(msg, len, ERROR_CAP * 2, 1) : NULL;
        p3d_err(err, "%s", e ? e : msg ? msg : "(error object is not a string)");
        free(e);
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
