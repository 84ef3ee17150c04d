/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_patterns.c — string.find, match, gmatch and gsub for policies, run
 * where the CPU deadline can stop them.
 *
 * Lua's pattern matcher backtracks inside one C call that no hook reaches:
 * one find can run for hours (exponential in the quantifiers, quadratic
 * with %b or a long plain pattern, with or without an anchor). No guard
 * that guesses the cost from the pattern gets all of them right, so the
 * matching itself runs in a second, private lua_State, "the matcher": only
 * the string library, an allocator that links every block it hands out.
 * When the sandbox's CPU watchdog fires while the matcher runs, the signal
 * handler siglongjmps out of it; the matcher is then never touched again,
 * its blocks are freed one by one, and the policy gets the CPU-time error.
 * The policy's own state is only ever stopped through its hook.
 *
 * find and match run as they are in the matcher; gsub with a string
 * replacement too. gmatch and gsub with a function or table replacement
 * call back into the policy, so their loops are rebuilt here on top of the
 * matcher's find, with Lua 5.4's rules (no match may end where the last
 * one ended; in gmatch a leading ^ is an ordinary character). The subject
 * and pattern of such a loop are copied into the matcher once.
 * Written here rather than taken from a library: no maintained Lua pattern
 * matcher with a step limit exists in Debian, and reusing Lua's own one
 * keeps the exact semantics.
 */
#include "lua_sandbox_state.h"

#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

union p3d_mblock {
    struct {
        union p3d_mblock *prev, *next;
        size_t size;
    } h;
    max_align_t align;
};
typedef union p3d_mblock mblock;

/* The handler never longjmps while in_alloc is set: the block list and
 * malloc's own state stay consistent. The fences keep the compiler from
 * moving list updates across the flag. */
static void enter_alloc(p3d_sandbox *sb)
{
    sb->watch.in_alloc = 1;
    atomic_signal_fence(memory_order_seq_cst);
}

static void leave_alloc(p3d_sandbox *sb)
{
    atomic_signal_fence(memory_order_seq_cst);
    sb->watch.in_alloc = 0;
}

static void unlink_block(p3d_sandbox *sb, mblock *b)
{
    if (b->h.prev)
        b->h.prev->h.next = b->h.next;
    else
        sb->mblocks = b->h.next;
    if (b->h.next)
        b->h.next->h.prev = b->h.prev;
}

static void link_block(p3d_sandbox *sb, mblock *b)
{
    b->h.prev = NULL;
    b->h.next = sb->mblocks;
    if (sb->mblocks)
        sb->mblocks->h.prev = b;
    sb->mblocks = b;
}

/* Shares the sandbox's memory cap and charges growth like sb_alloc. */
static void *m_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    p3d_sandbox *sb = ud;
    (void)osize; /* the block header knows the size */
    mblock *b = ptr ? (mblock *)ptr - 1 : NULL;
    size_t old = b ? b->h.size : 0;
    void *res = NULL;
    enter_alloc(sb);
    if (nsize == 0) {
        if (b) {
            unlink_block(sb, b);
            sb->used -= old;
            free(b);
        }
    } else if ((nsize > old && sb->used - old + nsize > sb->cap) || nsize > SIZE_MAX / 2) {
        sb->hit_cap = nsize > old;
    } else {
        if (b)
            unlink_block(sb, b);
        mblock *n = realloc(b, sizeof *n + nsize);
        if (n) {
            sb->used = sb->used - old + nsize;
            if (sb->used > sb->peak)
                sb->peak = sb->used;
            if (nsize > old)
                sb->instr += (nsize - old) / 2;
            n->h.size = nsize;
            res = n + 1;
        } else {
            n = b; /* realloc failed: the old block stays */
        }
        if (n)
            link_block(sb, n);
    }
    leave_alloc(sb);
    return res;
}

static int m_panic(lua_State *M)
{
    (void)M;
    return 0; /* never reached: every use of M is inside lua_pcall */
}

/* Throws the matcher away after an interruption: its state may be half
 * way through anything, so only its blocks are freed. */
static void matcher_abandon(p3d_sandbox *sb)
{
    enter_alloc(sb);
    for (mblock *b = sb->mblocks, *n; b; b = n) {
        n = b->h.next;
        sb->used -= b->h.size;
        free(b);
    }
    sb->mblocks = NULL;
    leave_alloc(sb);
    sb->M = NULL;
    sb->mgen++;
    sb->nrelease = 0;
}

void p3d_matcher_close(p3d_sandbox *sb)
{
    if (sb->M)
        lua_close(sb->M);
    sb->M = NULL;
    sb->mgen++;
    matcher_abandon(sb); /* nothing is left unless lua_close was skipped */
    free(sb->release);
    sb->release = NULL;
    sb->nrelease = sb->release_cap = 0;
}

/* ---------------------------------------------------------------------- */
/* One call into the matcher                                               */
/* ---------------------------------------------------------------------- */

enum { A_NONE, A_STR, A_INT, A_BOOL, A_REF };

typedef struct marg {
    int kind;
    const char *s;
    size_t len;
    lua_Integer i; /* A_INT, A_BOOL, A_REF */
} marg;

typedef struct mreq {
    const char *fn; /* a string-library function, or NULL: store args[0] in the registry */
    int nargs;
    marg args[4];
    p3d_sandbox *sb;
} mreq;

static int m_body(lua_State *M)
{
    mreq *rq = lua_touserdata(M, 1);
    p3d_sandbox *sb = rq->sb;
    lua_settop(M, 0);
    while (sb->nrelease > 0)
        luaL_unref(M, LUA_REGISTRYINDEX, sb->release[--sb->nrelease]);
    if (rq->fn) {
        lua_getglobal(M, "string");
        lua_getfield(M, -1, rq->fn);
        lua_remove(M, 1);
    }
    for (int i = 0; i < rq->nargs; i++) {
        const marg *a = &rq->args[i];
        switch (a->kind) {
        case A_STR: lua_pushlstring(M, a->s, a->len); break;
        case A_INT: lua_pushinteger(M, a->i); break;
        case A_BOOL: lua_pushboolean(M, (int)a->i); break;
        case A_REF: lua_rawgeti(M, LUA_REGISTRYINDEX, a->i); break;
        default: lua_pushnil(M);
        }
    }
    if (!rq->fn) {
        lua_pushinteger(M, luaL_ref(M, LUA_REGISTRYINDEX));
        return 1;
    }
    lua_call(M, rq->nargs, LUA_MULTRET);
    return lua_gettop(M);
}

/* Raises a memory error in L the way its own allocator would: asks L for
 * more than the cap, so the message is the usual one. */
static int memory_error(lua_State *L, p3d_sandbox *sb)
{
    sb->hit_cap = 1;
    lua_newuserdatauv(L, sb->cap + 1, 0);
    return luaL_error(L, "out of memory");
}

static int m_open(lua_State *M)
{
    luaL_requiref(M, LUA_STRLIBNAME, luaopen_string, 1);
    return 0;
}

/* Runs rq in the matcher; its results are left on M's stack (the count is
 * returned). Errors of the string function become errors in L. */
static int matcher_run(lua_State *L, mreq *rq)
{
    p3d_sandbox *sb = p3d_sandbox_of(L);
    rq->sb = sb;
    if (sb->watch.expired || sb->killed == 2)
        return p3d_sandbox_time_error(L);
    if (!sb->M) {
        sb->M = lua_newstate(m_alloc, sb);
        if (!sb->M)
            return memory_error(L, sb);
        lua_atpanic(sb->M, m_panic);
        lua_pushcfunction(sb->M, m_open);
        if (lua_pcall(sb->M, 0, 0, 0) != LUA_OK) {
            lua_close(sb->M);
            sb->M = NULL;
            sb->mgen++;
            return memory_error(L, sb);
        }
    }
    lua_State *M = sb->M;
    int st;
    for (int attempt = 0;; attempt++) {
        lua_settop(M, 0);
        lua_pushcfunction(M, m_body);
        lua_pushlightuserdata(M, rq);
        /* savesigs 0: no system call per match; the handler's mask is put
         * back by hand below */
        if (sigsetjmp(sb->watch.jmp, 0)) {
            sb->watch.in_matcher = 0;
            pthread_sigmask(SIG_SETMASK, &sb->run_mask, NULL);
            matcher_abandon(sb);
            return p3d_sandbox_time_error(L);
        }
        sb->watch.in_matcher = 1;
        atomic_signal_fence(memory_order_seq_cst);
        st = lua_pcall(M, 1, LUA_MULTRET, 0);
        atomic_signal_fence(memory_order_seq_cst);
        sb->watch.in_matcher = 0;
        if (st != LUA_ERRMEM)
            break;
        lua_settop(M, 0);
        if (attempt > 0)
            return memory_error(L, sb);
        /* loops left early keep their copies in M until L collects them:
         * collect, release, and try once more */
        lua_gc(L, LUA_GCCOLLECT);
    }
    if (st != LUA_OK) {
        lua_pushstring(L, lua_tostring(M, -1));
        lua_settop(M, 0);
        return lua_error(L);
    }
    return lua_gettop(M);
}

/* Copies n results of M (from index `from`) to L and clears M's stack. */
static void take_results(lua_State *L, lua_State *M, int from, int n)
{
    luaL_checkstack(L, n, "too many captures");
    for (int i = from; i < from + n; i++) {
        size_t len;
        const char *s;
        switch (lua_type(M, i)) {
        case LUA_TNUMBER: lua_pushinteger(L, lua_tointeger(M, i)); break;
        case LUA_TSTRING:
            s = lua_tolstring(M, i, &len);
            lua_pushlstring(L, s, len);
            break;
        default: lua_pushnil(L);
        }
    }
    lua_settop(M, 0);
}

static void set_str(marg *a, lua_State *L, int idx)
{
    a->kind = A_STR;
    a->s = lua_tolstring(L, idx, &a->len);
}

/* find(s, p [, init [, plain]]) and match(s, p [, init]) */
static int call_whole(lua_State *L, const char *fn, int maxargs)
{
    mreq rq = {.fn = fn, .nargs = 2};
    luaL_checkstring(L, 1);
    luaL_checkstring(L, 2);
    set_str(&rq.args[0], L, 1);
    set_str(&rq.args[1], L, 2);
    if (!lua_isnoneornil(L, 3)) {
        rq.args[2] = (marg){.kind = A_INT, .i = luaL_checkinteger(L, 3)};
        rq.nargs = 3;
    }
    if (maxargs >= 4 && !lua_isnone(L, 4)) {
        if (rq.nargs < 3)
            rq.args[2] = (marg){.kind = A_NONE};
        rq.args[3] = (marg){.kind = A_BOOL, .i = lua_toboolean(L, 4)};
        rq.nargs = 4;
    }
    int n = matcher_run(L, &rq);
    take_results(L, p3d_sandbox_of(L)->M, 1, n);
    return n;
}

static int p_find(lua_State *L)
{
    return call_whole(L, "find", 4);
}

static int p_match(lua_State *L)
{
    return call_whole(L, "match", 3);
}

/* Stores the string at L's index idx in M's registry (pattern: with a
 * leading ^ escaped when literal_caret). */
static int pin(lua_State *L, const char *s, size_t len)
{
    mreq rq = {.fn = NULL, .nargs = 1};
    rq.args[0] = (marg){.kind = A_STR, .s = s, .len = len};
    int n = matcher_run(L, &rq);
    lua_State *M = p3d_sandbox_of(L)->M;
    int ref = n > 0 ? (int)lua_tointeger(M, -1) : LUA_NOREF;
    lua_settop(M, 0);
    return ref;
}

static void release(p3d_sandbox *sb, int ref)
{
    if (ref == LUA_NOREF || ref == LUA_REFNIL)
        return;
    if (sb->nrelease == sb->release_cap) {
        size_t nc = sb->release_cap ? sb->release_cap * 2 : 16;
        int *nr = realloc(sb->release, nc * sizeof *nr);
        if (!nr)
            return; /* the string stays in M until it closes */
        sb->release = nr;
        sb->release_cap = nc;
    }
    sb->release[sb->nrelease++] = ref;
}

/* A subject and pattern pinned in M for one loop. */
typedef struct pinned {
    p3d_sandbox *sb;
    unsigned gen;
    int sref, pref;
} pinned;

static void pin_pair(lua_State *L, pinned *pp, const char *s, size_t ls, const char *p, size_t lp)
{
    pp->sb = p3d_sandbox_of(L);
    pp->sref = pp->pref = LUA_NOREF;
    pp->sref = pin(L, s, ls);
    pp->pref = pin(L, p, lp);
    pp->gen = pp->sb->mgen;
}

static void unpin_pair(pinned *pp)
{
    if (pp->sref != LUA_NOREF && pp->gen == pp->sb->mgen && pp->sb->M) {
        release(pp->sb, pp->sref);
        release(pp->sb, pp->pref);
    }
    pp->sref = pp->pref = LUA_NOREF;
}

/* find(subject, pattern, init) on a pinned pair: pushes nothing and
 * returns 0 for no match, else returns the number of values left on M's
 * stack (start, end, captures...). */
static int pinned_find(lua_State *L, pinned *pp, lua_Integer init)
{
    if (pp->gen != pp->sb->mgen)
        return p3d_sandbox_time_error(L); /* M was abandoned meanwhile */
    mreq rq = {.fn = "find", .nargs = 3};
    rq.args[0] = (marg){.kind = A_REF, .i = pp->sref};
    rq.args[1] = (marg){.kind = A_REF, .i = pp->pref};
    rq.args[2] = (marg){.kind = A_INT, .i = init};
    int n = matcher_run(L, &rq);
    if (n < 2 || lua_isnil(pp->sb->M, 1)) {
        lua_settop(pp->sb->M, 0);
        return 0;
    }
    return n;
}

/* Pushes the captures of a find result (or the whole match when the
 * pattern has none) to L; returns how many. */
static int push_captures(lua_State *L, const char *s, lua_State *M, int n, lua_Integer st, lua_Integer en)
{
    if (n > 2) {
        take_results(L, M, 3, n - 2);
        return n - 2;
    }
    lua_settop(M, 0);
    lua_pushlstring(L, s + st - 1, (size_t)(en - st + 1));
    return 1;
}

/* ---------------------------------------------------------------------- */
/* gmatch                                                                  */
/* ---------------------------------------------------------------------- */

static int gm_gc(lua_State *L)
{
    pinned *pp = lua_touserdata(L, 1);
    if (pp && pp->sb)
        unpin_pair(pp); /* a loop left early, or an error */
    return 0;
}

/* Pushes a userdata holding subject and pattern pinned in M; its __gc
 * releases them when a loop is left early or fails. */
static pinned *push_pinned(lua_State *L, const char *s, size_t ls, const char *p, size_t lp)
{
    pinned *pp = lua_newuserdatauv(L, sizeof *pp, 0);
    memset(pp, 0, sizeof *pp);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, gm_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    pin_pair(L, pp, s, ls, p, lp);
    return pp;
}

/* upvalues: 1 the pinned pair (userdata), 2 the subject, 3 the next start
 * (1-based), 4 where the last match ended (1-based, one past; 0: none) */
static int gm_next(lua_State *L)
{
    pinned *pp = lua_touserdata(L, lua_upvalueindex(1));
    size_t ls;
    const char *s = lua_tolstring(L, lua_upvalueindex(2), &ls);
    lua_Integer pos = lua_tointeger(L, lua_upvalueindex(3));
    lua_Integer last = lua_tointeger(L, lua_upvalueindex(4));
    while (pos <= (lua_Integer)ls + 1) {
        int n = pinned_find(L, pp, pos);
        if (n == 0)
            break;
        lua_State *M = pp->sb->M;
        lua_Integer st = lua_tointeger(M, 1), en = lua_tointeger(M, 2);
        if (en + 1 == last) { /* empty, where the last match ended: go on */
            lua_settop(M, 0);
            pos = st + 1;
            continue;
        }
        lua_pushinteger(L, en + 1);
        lua_replace(L, lua_upvalueindex(3));
        lua_pushinteger(L, en + 1);
        lua_replace(L, lua_upvalueindex(4));
        return push_captures(L, s, M, n, st, en);
    }
    lua_pushinteger(L, (lua_Integer)ls + 2);
    lua_replace(L, lua_upvalueindex(3));
    unpin_pair(pp); /* done: free the copies now, not when L collects */
    return 0;
}

/* A relative start position as Lua 5.4's gmatch and gsub read it. */
static lua_Integer start_pos(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return pos;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 1;
    return (lua_Integer)len + pos + 1;
}

static int p_gmatch(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    lua_Integer init = start_pos(luaL_optinteger(L, 3, 1), ls);
    if (init > (lua_Integer)ls + 1)
        init = (lua_Integer)ls + 1;
    lua_settop(L, 2);
    /* in gmatch a leading ^ matches itself; find would take it as an anchor */
    if (lp > 0 && p[0] == '^') {
        lua_pushliteral(L, "%");
        lua_pushvalue(L, 2);
        lua_concat(L, 2);
        lua_replace(L, 2);
        p = lua_tolstring(L, 2, &lp);
    }
    push_pinned(L, s, ls, p, lp);
    lua_pushvalue(L, 1);
    lua_pushinteger(L, init);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, gm_next, 4);
    return 1;
}

/* ---------------------------------------------------------------------- */
/* gsub                                                                    */
/* ---------------------------------------------------------------------- */

/* gsub(s, p, repl [, n]) with a string or number replacement: in M. */
static int gsub_string(lua_State *L)
{
    mreq rq = {.fn = "gsub", .nargs = 3};
    set_str(&rq.args[0], L, 1);
    set_str(&rq.args[1], L, 2);
    luaL_checkstring(L, 3);
    set_str(&rq.args[2], L, 3);
    if (!lua_isnoneornil(L, 4)) {
        rq.args[3] = (marg){.kind = A_INT, .i = luaL_checkinteger(L, 4)};
        rq.nargs = 4;
    }
    int n = matcher_run(L, &rq);
    take_results(L, p3d_sandbox_of(L)->M, 1, n);
    return n;
}

static int p_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int tr = lua_type(L, 3);
    luaL_argexpected(L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
                     "string/function/table");
    if (tr == LUA_TNUMBER || tr == LUA_TSTRING)
        return gsub_string(L);
    lua_Integer max_s = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    int anchor = lp > 0 && p[0] == '^';
    lua_settop(L, 3);
    pinned *pp = push_pinned(L, s, ls, p, lp); /* index 4 */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_Integer src = 1, last = 0, n = 0;
    while (n < max_s) {
        int k = pinned_find(L, pp, src);
        if (k == 0)
            break;
        lua_State *M = pp->sb->M;
        lua_Integer st = lua_tointeger(M, 1), en = lua_tointeger(M, 2);
        luaL_addlstring(&b, s + src - 1, (size_t)(st - src));
        if (en + 1 == last) { /* empty, where the last match ended */
            lua_settop(M, 0);
            if (st > (lua_Integer)ls)
                break;
            luaL_addchar(&b, s[st - 1]);
            src = st + 1;
        } else {
            n++;
            int nc = push_captures(L, s, M, k, st, en);
            if (tr == LUA_TFUNCTION) {
                lua_pushvalue(L, 3);
                lua_insert(L, -nc - 1);
                lua_call(L, nc, 1);
            } else {
                lua_pop(L, nc - 1); /* the first capture is the key */
                lua_gettable(L, 3);
            }
            if (!lua_toboolean(L, -1)) {
                lua_pop(L, 1);
                luaL_addlstring(&b, s + st - 1, (size_t)(en - st + 1));
            } else if (!lua_isstring(L, -1)) {
                return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
            } else {
                luaL_addvalue(&b);
            }
            src = last = en + 1;
        }
        if (anchor)
            break;
    }
    if (src <= (lua_Integer)ls)
        luaL_addlstring(&b, s + src - 1, ls - (size_t)(src - 1));
    luaL_pushresult(&b);
    unpin_pair(pp);
    lua_pushinteger(L, n);
    return 2;
}

void p3d_matcher_install(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"find", p_find}, {"match", p_match}, {"gmatch", p_gmatch}, {"gsub", p_gsub}, {NULL, NULL}};
    lua_getglobal(L, LUA_STRLIBNAME);
    luaL_setfuncs(L, fns, 0);
    lua_pop(L, 1);
}
