/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcpstore.h — the public header of launcher/run/store/, the agent store: a server of torch.distributed's c10d
 * TCPStore wire protocol, run by the par3drun process that hosts global
 * rank 0, listening on MASTER_ADDR:MASTER_PORT before any rank starts
 * (TORCHELASTIC_USE_AGENT_STORE=True), as torchrun's agent does: no rank
 * ever finds the port closed, so none pays torch's ~1 s reconnect back-off
 * (docs/torchrun.md, "init_process_group").
 *
 * Two layers. The protocol core (tcpstore.c) knows no socket: bytes a
 * client sent go in (p3d_store_input), the bytes to send back come out
 * (p3d_store_output); unit tests and fuzzers drive it directly. The
 * network part (tcpstore_net.c) listens, accepts and moves bytes through
 * par3drun's event loop (no thread, no blocking call).
 *
 * Both torch 1.x (no handshake; SET is query 0) and torch 2.x (a VALIDATE
 * with a magic number first; the queries shifted by one) are spoken; a
 * connection's first bytes say which. Every byte is hostile: keys, values,
 * messages, replies waiting to be sent, keys stored, bytes stored and
 * clients are bounded (p3d_store_limits); a client that breaks the
 * protocol or a bound is dropped, never the store.
 */
#ifndef P3D_TCPSTORE_H
#define P3D_TCPSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "loop.h"

typedef struct p3d_store p3d_store;

typedef struct p3d_store_limits {
    size_t key_max;   /* bytes of one key */
    size_t value_max; /* bytes of one value */
    size_t msg_max;   /* bytes of one query (what a client may make us buffer) */
    size_t out_max;   /* reply bytes waiting for one client */
    size_t bytes_max; /* keys and values stored, all together */
    size_t keys_max;  /* keys stored */
    size_t clients_max;
    size_t args_max; /* keys in one CHECK, WAIT, MULTI_GET or MULTI_SET */
    size_t held_max; /* query and reply bytes buffered for all clients together */
} p3d_store_limits;

/* The defaults: key 64 KiB, value 32 MiB, query 80 MiB, replies 80 MiB,
 * 512 MiB and 1M keys stored, 65536 clients, 65536 keys a query, 512 MiB
 * buffered for all clients. */
p3d_store_limits p3d_store_default_limits(void);

/* ---- the protocol core (tcpstore.c) ----------------------------------- */

/* An empty store; lim NULL: the defaults. NULL when out of memory. */
p3d_store *p3d_store_new(const p3d_store_limits *lim);
/* Frees the store, its keys and clients; closes every fd it owns (the
 * listener and the connections of tcpstore_net.c). NULL does nothing. */
void p3d_store_free(p3d_store *s);

/* A new client (fd: its connection, owned by the store from now on; -1 in
 * tests). Its id (>= 0), or -1 when the clients bound is reached or out of
 * memory (fd is then not taken). */
int p3d_store_client_new(p3d_store *s, int fd);
/* Bytes client id sent: every complete query in them is served. 0, or -1
 * when the client must be dropped (protocol error, a bound broken). */
int p3d_store_input(p3d_store *s, int id, const void *buf, size_t len);
/* The bytes waiting to be sent to client id (NULL/0: none) and, after a
 * send, how many went (p3d_store_sent). */
const unsigned char *p3d_store_output(const p3d_store *s, int id, size_t *len);
void p3d_store_sent(p3d_store *s, int id, size_t n);
/* Drops client id (closes its fd). */
void p3d_store_client_drop(p3d_store *s, int id);
/* The clients' protocol: 0 not known yet, 1 torch 1.x, 2 torch 2.x. */
int p3d_store_client_version(const p3d_store *s, int id);

/* Keys held and clients connected (for tests and the verbose line). */
size_t p3d_store_nkeys(const p3d_store *s);
size_t p3d_store_nclients(const p3d_store *s);

/* A fresh store for a new generation of ranks: every key is dropped and
 * every client connection closed (the ranks of the generation before are
 * gone), as torchrun's agent starts each restart on a new store. Only when
 * gen differs from the generation the store serves (so saying it again
 * does nothing). s may be NULL. */
void p3d_store_generation(p3d_store *s, int gen);

/* ---- the network part (tcpstore_net.c) -------------------------------- */

/* Listens on host:port (port 0: a free one) now, before the loop runs, so
 * that a rank connecting at any time after this finds the port open.
 * *bound gets the port. The store, or NULL with *err (malloc'd). */
p3d_store *p3d_store_listen(const char *host, int port, int *bound, char **err);
/* Serves through loop l from now on; l NULL: through no loop (before the
 * loop it served through is freed). s NULL does nothing. 0, or -1 (out of
 * memory). */
int p3d_store_attach(p3d_store *s, p3d_loop *l);
/* The fds the store holds (listener and connections), for a forked child
 * to close: how many there are, and up to cap of them in fds. s may be
 * NULL (0). */
int p3d_store_fds(const p3d_store *s, int *fds, int cap);

#endif
