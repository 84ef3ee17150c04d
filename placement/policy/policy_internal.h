/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * policy_internal.h — policy runner internals (private to placement/;
 * unit tests include it to run policies from strings with small limits).
 */
#ifndef P3D_POLICY_INTERNAL_H
#define P3D_POLICY_INTERNAL_H

#include "lua_internal.h"
#include "p3d/p3d.h"
#include "read_file.h"

/* Runs policy source text (already fetched) named `name` (as shown in
 * messages, e.g. "megatron.lua"); source is recorded as policy_source.
 * lim NULL means the environment's limits. Caller frees *out with
 * p3d_placement_free(). */
int p3d_policy_run_text(const char *name, const char *source, const char *text, size_t len, const p3d_cluster *c,
                        const p3d_job *job, const p3d_sandbox_limits *lim, p3d_placement **out, char **err);

/* The refusals every placement makes before it places (policy_run.c), in
 * one order for the policy runner and the computed naive baseline: each
 * mesh size >= 1, the derived sizes consistent, a cluster with nodes and
 * enough GPUs for the world. *mesh is job's mesh with its sizes derived;
 * *world its world size. 0, or -1 with *err. */
int p3d_policy_sizes(const p3d_cluster *c, const p3d_job *job, p3d_mesh *mesh, int *world, char **err);

/* Statistics of the last p3d_policy_run_text in this thread (for bench/
 * and tests): instructions, peak Lua heap bytes. */
void p3d_policy_last_stats(unsigned long long *instructions, size_t *peak_bytes);

/* Pushes the C core of the par3d module (lua_par3d.c): the mesh arithmetic
 * of mesh.c. par3d.lua receives it as its chunk argument. */
int luaopen_par3d_core(lua_State *L);

/* Pushes the loader lua/par3d.lua gets as its second chunk argument
 * (lua_modules.c): load_module(name) compiles <data dir>/lua/par3d/NAME.lua
 * (name: a-z and _ only) as text and returns the chunk. */
void p3d_policy_push_module_loader(lua_State *L);
/* Closes the loader at idx: every later call raises an error. */
void p3d_policy_close_module_loader(lua_State *L, int idx);

/* Reads the helper module lua/par3d.lua (under p3d_data_dir()) into *text
 * (malloc'd, *len bytes). 0 or -1 with *err naming the file. */
int p3d_policy_read_helper(char **text, size_t *len, char **err);
/* In the sandbox's protected body: runs the helper module text (its chunk
 * argument: luaopen_par3d_core), sets it as the global `par3d` and leaves
 * the module table on the stack. 0, or -1 with *err. */
int p3d_policy_load_par3d(p3d_sandbox *sb, const char *text, size_t len, char **err);

/* What a policy declares (policy_decl.c): runs the policy chunk `text`
 * (named chunk in messages) in the protected body and pushes its
 * declaration — the table the chunk returned, its fields checked (place,
 * spares, follows only), or the globals table when it returned nothing
 * (the older form). 0, or -1 with *err and nothing pushed. */
int p3d_policy_declare(p3d_sandbox *sb, const char *chunk, const char *text, size_t len, char **err);
/* Pushes decl[field] (raw) and returns its Lua type. */
int p3d_policy_decl_field(lua_State *L, int decl, const char *field);
/* For messages: "the global" or "the returned table's field", as decl is
 * the globals table or a returned declaration. */
const char *p3d_policy_decl_where(lua_State *L, int decl);

/* A node name a hook returned (nm[0..nl), as Lua holds it) is text without
 * NUL: "n1\0evil" is not n1. 0, or -1 with *err naming who, where (the
 * hook and entry: "place() result, rank 3") and the offset. */
int p3d_policy_check_name(const char *nm, size_t nl, const char *who, const char *where, char **err);

/* The naive baseline computed (policy_naive.c): at or above this many ranks
 * (P3D_NAIVE_COMPUTED_MIN in the environment overrides it) the bundled
 * naive.lua is not run; p3d_naive_compute gives its placement from the rank
 * order alone. p3d_naive_computed_min: 0, or -1 with *err on a bad value. */
#define P3D_NAIVE_COMPUTED_MIN 1024
int p3d_naive_computed_min(long long *min, char **err);
/* 1 when source is the bundled <data dir>/lua/naive.lua. */
int p3d_naive_is_bundled(const char *source);
/* naive.lua's placement of job on c, without a second policy run: the same
 * refusals, ranks, coordinates and local ranks. Caller frees *out with
 * p3d_placement_free(). */
int p3d_naive_compute(const p3d_cluster *c, const p3d_job *job, const char *source, p3d_placement **out, char **err);

#endif
