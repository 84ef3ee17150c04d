/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_budget.c — a policy's instruction and CPU-time budgets: the count
 * hook that charges them, and the kill once one is spent. Below both
 * lua_sandbox.c (which installs the hook) and lua_patterns.c (whose
 * matcher raises the CPU-time error when the watchdog abandons it), so
 * neither needs the other for it.
 */
#include "lua_sandbox_state.h"

#include <lauxlib.h>
#include <stdio.h>
#include <time.h>

p3d_sandbox *p3d_sandbox_of(lua_State *L)
{
    return *(p3d_sandbox **)lua_getextraspace(L);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double p3d_sandbox_cpu_used(const p3d_sandbox *sb)
{
    return cpu_now() - ((double)sb->cpu_start.tv_sec + (double)sb->cpu_start.tv_nsec * 1e-9);
}

void p3d_sandbox_kill(lua_State *L, p3d_sandbox *sb, int why)
{
    if (!sb->killed)
        sb->killed = why;
    lua_sethook(L, p3d_sandbox_count_hook, LUA_MASKCOUNT, 1);
}

int p3d_sandbox_raise_kill(lua_State *L, p3d_sandbox *sb)
{
    /* level 0 is the running Lua function: name the line of the loop (in
     * a C function, luaL_where says nothing) */
    luaL_where(L, 0);
    if (sb->killed == 2) {
        char msg[200]; /* lua_pushfstring knows no precisions */
        snprintf(msg, sizeof msg,
                 "policy exceeded its CPU time limit of %.1f s (an endless loop or a slow pattern? "
                 "raise it with P3D_POLICY_CPU_SECONDS)",
                 sb->cpu_limit);
        lua_pushstring(L, msg);
    } else {
        lua_pushfstring(L,
                        "policy exceeded its instruction budget of %I instructions "
                        "(an endless loop? raise it with P3D_POLICY_MAX_INSTRUCTIONS)",
                        (lua_Integer)sb->budget);
    }
    lua_concat(L, 2);
    return lua_error(L);
}

int p3d_sandbox_time_error(lua_State *L)
{
    p3d_sandbox *sb = p3d_sandbox_of(L);
    sb->watch.expired = 1;
    p3d_sandbox_kill(L, sb, 2);
    return p3d_sandbox_raise_kill(L, sb);
}

/* Redis's trick: once the budget or the time is spent the hook fires on
 * every instruction and raises each time, so a pcall that catches the
 * first kill dies on its next instruction, and so does an error handler
 * that loops. */
void p3d_sandbox_count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    p3d_sandbox *sb = p3d_sandbox_of(L);
    if (!sb->killed) {
        sb->instr += P3D_SANDBOX_HOOK_STEP;
        if (sb->instr > sb->budget)
            p3d_sandbox_kill(L, sb, 1);
        else if (sb->watch.expired || p3d_sandbox_cpu_used(sb) > sb->cpu_limit)
            p3d_sandbox_kill(L, sb, 2);
        else
            return;
    }
    p3d_sandbox_raise_kill(L, sb);
}
