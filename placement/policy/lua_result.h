/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lua_result.h — policy/ internal: the placement held in C (par3d.result,
 * lua_result.c) as its block operations see it, and the argument checks
 * they share; the MoE operations are lua_result_ep.c's.
 */
#ifndef P3D_LUA_RESULT_H
#define P3D_LUA_RESULT_H

#include "lua_internal.h"

#define RESULT_MT "p3d.result"

typedef struct result {
    int world;
    int *node; /* 1-based node index, 0: rank not assigned yet */
    int *gpu;
} result;

/* The result at arg (raises otherwise). */
result *p3d_lres_check(lua_State *L, int arg);
/* A rank of r at arg (raises when out of range). */
int p3d_lres_rank(lua_State *L, const result *r, int arg);
/* An int >= lo at arg; what names it in the message. */
int p3d_lres_int(lua_State *L, int arg, const char *what, lua_Integer lo);
/* Integer t[i] of a list argument, raising a message naming the list. */
int p3d_lres_int_at(lua_State *L, int t, lua_Integer i, const char *list);
/* A positive integer field k of table t (a mesh's sizes or strides). */
int p3d_lres_field(lua_State *L, int t, const char *k);

/* The strides and sizes of a mesh made by par3d.mesh, as the MoE
 * operations and res:tp_split read them. */
typedef struct ep_mesh {
    int world, tp, etp, ep, pp, stp, setp, sep, spp;
} ep_mesh;

/* The mesh table at arg into *m; fn names the caller in a message
 * (raises when arg is not such a mesh). */
void p3d_lres_ep_mesh(lua_State *L, int arg, ep_mesh *m, const char *fn);

/* lua_result_ep.c: par3d.ep_blocks and res:place_ep (docs/policies.md). */
int p3d_lua_ep_blocks(lua_State *L);
int p3d_lua_place_ep(lua_State *L);

#endif
