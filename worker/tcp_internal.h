/* SPDX-License-Identifier: BSD-3-Clause */
/* tcp_internal.h - what the three parts of the CPU backend's TCP
 * communicator share: tcp_boot.c (bootstrap, connections, splits),
 * tcp_xchg.c (the progress engine: framed messages, inboxes, posted
 * receives, --p2p strict) and tcp_allreduce.c (the ring all-reduce).
 * Private to worker/; the interface is in worker.h. */
#ifndef P3D_TCP_INTERNAL_H
#define P3D_TCP_INTERNAL_H

#include "worker.h"

#include <time.h>

#define HELLO_MAGIC 0x70336477u /* "p3dw" */
#define WORLD_TAG 1u
/* --p2p strict: a receiver posts its receive by sending a clear-to-send
 * frame with the message's tag | CTS_BIT (no payload); a sender starts only
 * once it holds one.  One CTS admits one message. */
#define CTS_BIT 0x80000000u
/* Staging buffer of a summing receive: received bytes are added into the
 * destination piece by piece while still in cache. */
#define STAGE_BYTES (256u << 10)

typedef struct msg {
    struct msg *next;
    uint32_t tag;
    size_t len;
    char data[];
} msg;

typedef struct conn {
    int fd;           /* -1: none */
    int closed;       /* peer closed or reset: nothing more will come */
    int err;          /* errno of the failure, 0 for a clean EOF */
    msg *head, *tail; /* complete messages not yet received (owned) */
    unsigned char hdr[16];
    size_t hdr_got;
    msg *cur; /* message being read into the inbox (owned) */
    size_t cur_got;
    /* The posted receive (exchange()): the next message with post_tag and
     * post_len goes to post_buf (borrowed, valid while posted), summed into
     * it when post_add is set; direct while its payload is being read. */
    int posted, post_done, direct;
    uint32_t post_tag;
    char *post_buf;
    size_t post_len, post_got, post_es;
    void (*post_add)(void *dst, const void *src, size_t n);
} conn;

struct tcp_world {
    int rank, size;
    double op_timeout, connect_timeout;
    int listen_fd;
    uint64_t job_hash;
    uint32_t *addr; /* IPv4, network order, per rank */
    uint16_t *port; /* listening port, host order, per rank */
    conn *c;        /* per rank */
    char *need;     /* ranks this process needs a direct connection to */
    uint32_t next_tag;
    char activity[64];
    struct pollfd *pfd;
    int *pfd_peer;
    char *stage; /* STAGE_BYTES, for summing receives (owned) */
    int strict;  /* --p2p strict: sends wait for the matching receive */
};

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint32_t get32(const unsigned char *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint64_t get64(const unsigned char *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* Closes a connection for good: nothing more will come (err: errno, 0 for
 * a clean end of stream). */
void tcp_conn_close(conn *c, int err);

/* Sends slen bytes to world rank `to` while receiving rlen bytes from
 * `from` (either side off with -1; they may be the same peer), both framed
 * with tag; received bytes land in rbuf, or are summed into it (add,
 * element size es).  Returns 0 or -1 (message printed). */
int tcp_exchange(tcp_world *w, uint32_t tag, int to, const void *sbuf, size_t slen, int from, void *rbuf, size_t rlen,
                 void (*add)(void *, const void *, size_t), size_t es);
int tcp_msg_send(tcp_world *w, int peer, uint32_t tag, const void *buf, size_t len);
int tcp_msg_recv(tcp_world *w, int peer, uint32_t tag, void *buf, size_t len);

#endif
