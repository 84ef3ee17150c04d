/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_ring_auth.h — the --preflight TCP ring's mutual proof of the job
 * key (bench_ring_auth.c): a fresh-nonce challenge-response, and the
 * acceptor's pool of connections still proving it. No allocation; the
 * caller owns every buffer. */
#ifndef P3DW_BENCH_RING_AUTH_H
#define P3DW_BENCH_RING_AUTH_H

#include <stddef.h>

#define P3DW_RING_NONCE 32
#define P3DW_RING_HELLO 64  /* nonce_c || the connector's MAC */
#define P3DW_RING_ANSWER 33 /* the acceptor's MAC || 'g' */
#define P3DW_RING_PENDING 8 /* connections proving the key at once */

/* Reads the key (8..255 bytes of text) from fd to its end and closes fd:
 * 0, or -1. */
int p3dw_ring_key_load(int fd, char *key, size_t cap);
/* The connector, once it has the acceptor's challenge (nonce_a) on the
 * connection to port: its hello, and the answer it must get back (want).
 * 0, or -1. */
int p3dw_ring_hello(const char *key, int port, const unsigned char nonce_a[P3DW_RING_NONCE],
                    unsigned char out[P3DW_RING_HELLO], unsigned char want[32]);

/* The acceptor's side: connections taken from the listening socket, each
 * sent a fresh challenge and read (never waited on) until it proves the
 * key, fails, or its time is up. fd -1: a free slot. */
typedef struct p3dw_ring_cand {
    int fd;
    double by; /* its deadline (the caller's clock) */
    size_t got;
    unsigned char nonce[P3DW_RING_NONCE], hello[P3DW_RING_HELLO];
} p3dw_ring_cand;

/* Every slot free. */
void p3dw_ring_pool_init(p3dw_ring_cand pool[P3DW_RING_PENDING]);
/* One step, never blocking: accepts what waits on lfd (the oldest
 * candidate evicted when every slot is taken), reads what the candidates
 * sent, drops those that failed or ran past wait_s. key NULL: an unkeyed
 * ring, the first connection is the previous node. Returns the
 * connection of the candidate that proved the key, its answer and 'g'
 * sent (the caller owns it; every other candidate is closed), or -1 while
 * none has. Each drop is said on stderr. */
int p3dw_ring_admit(p3dw_ring_cand pool[P3DW_RING_PENDING], int lfd, const char *key, int port, double now,
                    double wait_s);
/* Closes every candidate. */
void p3dw_ring_pool_close(p3dw_ring_cand pool[P3DW_RING_PENDING]);

#endif
