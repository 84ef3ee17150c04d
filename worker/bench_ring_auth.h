/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_ring_auth.h — the --preflight TCP ring's proof of the job key
 * (bench_ring_auth.c). No allocation; the caller owns every buffer. */
#ifndef P3DW_BENCH_RING_AUTH_H
#define P3DW_BENCH_RING_AUTH_H

#include <stddef.h>

#define P3DW_RING_NONCE 32
#define P3DW_RING_HELLO 64 /* nonce_c || the connector's MAC */

/* Reads the key (8..255 bytes of text) from fd to its end and closes fd:
 * 0, or -1. */
int p3dw_ring_key_load(int fd, char *key, size_t cap);
/* The connector: its hello for the listener on port, and the answer it
 * must get back (want). 0, or -1. */
int p3dw_ring_hello(const char *key, int port, unsigned char out[P3DW_RING_HELLO], unsigned char want[32]);
/* The acceptor: reads a candidate's hello on fd (within wait_s seconds)
 * and checks it for this listener's port: 0 with the answer to send back,
 * -1 when it did not prove the key in time. */
int p3dw_ring_check(int fd, const char *key, int port, double wait_s, unsigned char answer[32]);

#endif
