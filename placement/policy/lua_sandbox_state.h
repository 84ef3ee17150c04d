/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_sandbox_state.h — the sandbox's state, shared by lua_sandbox.c (limits,
 * CPU watchdog), lua_budget.c (the count hook, the kill) and lua_patterns.c
 * (the matcher the watchdog may abandon). Private to those files: it pulls
 * in <signal.h> and <setjmp.h>.
 */
#ifndef P3D_LUA_SANDBOX_STATE_H
#define P3D_LUA_SANDBOX_STATE_H

#include <setjmp.h>
#include <signal.h>
#include <time.h>

#include "lua_internal.h"

/* What the CPU watchdog's signal handler and the matcher share. */
typedef struct p3d_watch {
    volatile sig_atomic_t expired;    /* the CPU deadline has passed */
    volatile sig_atomic_t in_matcher; /* jmp is set: the matcher may be abandoned */
    volatile sig_atomic_t in_alloc;   /* the matcher's allocator is busy: wait */
    sigjmp_buf jmp;
} p3d_watch;

union p3d_mblock; /* a block of the matcher state (lua_patterns.c) */

struct p3d_sandbox {
    lua_State *L;
    size_t used, peak, cap;
    int hit_cap;              /* the allocator refused a block */
    int mem_fixed, cpu_fixed; /* set by the caller or environment: never scaled */
    unsigned long long instr, budget;
    int killed;       /* 1: budget spent, 2: CPU time spent; every instruction now fails */
    double cpu_limit; /* seconds of thread CPU time from cpu_start */
    struct timespec cpu_start;
    timer_t timer;
    int have_timer;
    sigset_t saved_mask, run_mask; /* before the sandbox / while it runs */
    p3d_watch watch;
    size_t printed, dropped; /* bytes print() wrote / left out */
    char name[256];          /* chunk name of the last load, for messages */
    /* the matcher (lua_patterns.c) */
    lua_State *M;
    union p3d_mblock *mblocks; /* every live block of M, to abandon it */
    unsigned mgen;             /* bumped when M is closed or abandoned */
    int *release;              /* registry refs of M to release on next use */
    size_t nrelease, release_cap;
};

/* The count hook runs every P3D_SANDBOX_HOOK_STEP instructions: cheap
 * enough not to show in a 100M-instruction policy, fine-grained enough to
 * stop a loop promptly. */
#define P3D_SANDBOX_HOOK_STEP 10000

/* lua_budget.c, below both lua_sandbox.c and lua_patterns.c: the
 * instruction and CPU-time budgets and the kill once one is spent. */
/* Thread CPU seconds since sb->cpu_start. */
double p3d_sandbox_cpu_used(const p3d_sandbox *sb);
/* The count hook: charges P3D_SANDBOX_HOOK_STEP instructions, kills the
 * policy when a budget is spent. */
void p3d_sandbox_count_hook(lua_State *L, lua_Debug *ar);
/* Marks the policy killed (why: 1 the instruction budget, 2 the CPU time)
 * and makes the hook fire on every instruction. */
void p3d_sandbox_kill(lua_State *L, p3d_sandbox *sb, int why);
/* Raises the kill's error in L, where the policy runs (never returns). */
int p3d_sandbox_raise_kill(lua_State *L, p3d_sandbox *sb);

/* Frees the matcher with the sandbox. */
void p3d_matcher_close(p3d_sandbox *sb);

#endif
