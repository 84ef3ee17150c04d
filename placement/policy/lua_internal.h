/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_internal.h — the embedded Lua host for placement policies (private to
 * placement/; unit tests include it to reach the sandbox directly).
 *
 * A sandbox is one lua_State built by construction (STYLE.md 7-8): only
 * base (without dofile/loadfile, with a text-only `load`), string, table,
 * math and utf8 are opened; memory is capped in the lua_Alloc; a count hook
 * bounds the instructions and the thread's CPU time and, once either is
 * spent, fails on every further instruction so pcall/xpcall cannot swallow
 * the kill. A CPU-time timer (a watchdog signal) also reaches time spent
 * inside one C call: the pattern functions run in a separate matcher state
 * it may abandon (lua_patterns.c). Both default limits grow with the
 * cluster the policy is given (docs/limits.md).
 */
#ifndef P3D_LUA_INTERNAL_H
#define P3D_LUA_INTERNAL_H

#include <lua.h>
#include <stddef.h>

#include "p3d/p3d.h"

/* Default memory: 256 MiB plus 4 KiB per GPU of the cluster; default CPU
 * time: 10 s plus 40 us per GPU (a 1,048,576-GPU cluster: 4.3 GiB, 52 s). */
#define P3D_POLICY_MEM_DEFAULT ((size_t)256 << 20)
#define P3D_POLICY_MEM_PER_GPU ((size_t)4 << 10)
#define P3D_POLICY_INSTR_DEFAULT 2000000000ULL
#define P3D_POLICY_CPU_DEFAULT 10.0
#define P3D_POLICY_CPU_PER_GPU 40e-6
/* print() output kept per run; the rest is counted and reported. */
#define P3D_POLICY_OUTPUT_CAP (64 * 1024)

typedef struct p3d_sandbox_limits {
    size_t mem_bytes;                /* 0 = default, scaled to the cluster */
    unsigned long long instructions; /* 0 = P3D_POLICY_INSTR_DEFAULT */
    double cpu_seconds;              /* 0 = default, scaled to the cluster */
} p3d_sandbox_limits;

/* Defaults, overridden by $P3D_POLICY_MEM_MB, $P3D_POLICY_MAX_INSTRUCTIONS
 * and $P3D_POLICY_CPU_SECONDS (documented in docs/policies.md). Bad values
 * are an error. */
int p3d_sandbox_limits_from_env(p3d_sandbox_limits *lim, char **err);

typedef struct p3d_sandbox p3d_sandbox; /* lua_sandbox_state.h */

/* par3d.result (lua_result.c): adds core.result to the table on top of the
 * stack and registers the result metatable. p3d_lua_result_get: 1 when the
 * value at idx is a result, with its world and rank -> node (1-based, 0:
 * unassigned) and GPU arrays (borrowed from the Lua value), else 0. */
void p3d_lua_result_register(lua_State *L);
int p3d_lua_result_get(lua_State *L, int idx, int *world, const int **node, const int **gpu);

/* Work a C helper does for a policy, counted as n instructions against the
 * budget before it runs (the count hook sees none of it): raises the
 * budget error when n does not fit, and every later instruction fails as
 * after any kill. Returns 0 otherwise; outside a sandbox it does nothing. */
int p3d_sandbox_charge(lua_State *L, unsigned long long n);

/* Creates the state and opens the allowed libraries (inside lua_pcall).
 * Caller frees with p3d_sandbox_free(). */
int p3d_sandbox_new(const p3d_sandbox_limits *lim, p3d_sandbox **out, char **err);
void p3d_sandbox_free(p3d_sandbox *sb);
lua_State *p3d_sandbox_state(p3d_sandbox *sb);

/* Compiles a text chunk (binary chunks are refused) named `name` (shown in
 * messages as "name:LINE:") and pushes it. */
int p3d_sandbox_load(p3d_sandbox *sb, const char *buf, size_t len, const char *name, char **err);

/* The one docall: calls the function below nargs arguments with a traceback
 * message handler. On failure *err gets "name:LINE: message" plus the
 * traceback, or the memory / instruction limit message; the stack is left
 * as lua_pcall leaves it minus the error object. */
int p3d_sandbox_call(p3d_sandbox *sb, int nargs, int nresults, char **err);

/* Runs f(L) with ud as its only argument in protected mode (memory errors
 * in C code that builds tables become *err, never a panic). */
int p3d_sandbox_protect(p3d_sandbox *sb, lua_CFunction f, void *ud, char **err);

/* The sandbox a state belongs to. */
p3d_sandbox *p3d_sandbox_of(lua_State *L);

/* Raises the default memory and CPU limits (those the caller did not fix)
 * for a cluster of `gpus` GPUs; p3d_lua_push_cluster calls it. */
void p3d_sandbox_fit_cluster(p3d_sandbox *sb, size_t gpus);

/* Marks the CPU time as spent and raises its error in L (never returns). */
int p3d_sandbox_time_error(lua_State *L);

/* Copies s[0..len) with control characters written as \n, \t, \xHH
 * (keep_lines: newline and tab stay as they are), at most cap bytes of
 * input, then " ... (N more bytes)". Returns a malloc'ed string or NULL. */
char *p3d_sandbox_escape(const char *s, size_t len, size_t cap, int keep_lines);

/* lua_patterns.c: installs string.find/match/gmatch/gsub that run in the
 * matcher (see lua_sandbox_state.h). */
void p3d_matcher_install(lua_State *L);

/* Instructions executed so far (rounded to the hook's step). */
unsigned long long p3d_sandbox_instructions(const p3d_sandbox *sb);
/* Peak bytes allocated by the state. */
size_t p3d_sandbox_peak_bytes(const p3d_sandbox *sb);

/* lua_tables.c: push the read-only `cluster` / `job` tables. Must run in
 * protected mode (they allocate). */
void p3d_lua_push_cluster(lua_State *L, const p3d_cluster *c);
void p3d_lua_push_job(lua_State *L, const p3d_job *j);

#endif
