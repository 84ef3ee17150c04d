/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcpstore_int.h — what tcpstore.c (the protocol) and tcpstore_net.c (the
 * sockets) share; nothing else includes it.
 */
#ifndef P3D_TCPSTORE_INT_H
#define P3D_TCPSTORE_INT_H

#include "tcpstore.h"

typedef struct st_kv {
    char *key; /* owned; klen bytes (not NUL-terminated data) */
    size_t klen;
    unsigned char *val; /* owned; vlen bytes */
    size_t vlen;
} st_kv;

typedef struct st_client {
    p3d_store *s;
    int id, fd;        /* fd owned (-1: a test's client) */
    int ver;           /* 0 unknown, 1 torch 1.x, 2 torch 2.x */
    int dead;          /* broke a bound while another client was served: drop it */
    unsigned char *in; /* bytes of a query not complete yet */
    size_t inlen, incap;
    unsigned char *out; /* replies: out[outoff..outlen) still to send */
    size_t outlen, outcap, outoff;
    char **wkeys; /* a WAIT not answered yet: its keys (owned) */
    size_t *wlens, nwait;
    int waiting;
} st_client;

struct p3d_store {
    p3d_store_limits lim;
    st_kv *kv; /* unordered; linear lookups (a torch job holds O(world) keys) */
    size_t nkv, capkv, bytes;
    st_client **cl; /* by id; NULL: a free id */
    size_t ncl, capcl, nlive;
    size_t held; /* bytes in the clients' in and out buffers (held_max) */
    int gen;
    int lfd; /* the listener (tcpstore_net.c), -1 none */
    p3d_loop *loop;
    /* told when client id has new bytes to send or is dead (net part) */
    void (*on_output)(p3d_store *s, int id);
};

#endif
