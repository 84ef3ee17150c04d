/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_ring_auth.c — the --preflight TCP ring's mutual proof of the job
 * key (docs/multinode.md, "Security"). par3drun hands the key over through
 * an inherited descriptor (--bench-tcp-key-fd), never argv or the
 * environment.
 *
 * A challenge-response with a fresh nonce from each side, so that a proof
 * seen on the wire is worth nothing on another connection:
 *   acceptor -> connector  nonce_a (32 random bytes, sent at accept)
 *   connector -> acceptor  nonce_c || HMAC-SHA256(K, "p3d-ring-connector" 0 port 0 nonce_a nonce_c)
 *   acceptor -> connector  HMAC-SHA256(K, "p3d-ring-acceptor" 0 port 0 nonce_a nonce_c) || 'g'
 * (port: the listening port, 2 bytes). Every node of the ring is both an
 * acceptor and a connector in one thread, so neither side ever waits on
 * the other: the acceptor keeps its candidates in a pool that it reads
 * between turns (several at once: idle strangers cannot hold the port
 * while the previous node waits), the connector answers from its poll
 * loop (bench_node.c). The two labels differ: an answer is not a hello
 * reflected.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_ring_auth.h"

static int mac(const char *key, const char *label, int port, const unsigned char *nonce_a, const unsigned char *nonce_c,
               unsigned char out[32])
{
    unsigned char buf[64 + 2 * P3DW_RING_NONCE];
    size_t n = strlen(label) + 1;
    memcpy(buf, label, n);
    buf[n++] = (unsigned char)(port >> 8);
    buf[n++] = (unsigned char)port;
    buf[n++] = 0;
    memcpy(buf + n, nonce_a, P3DW_RING_NONCE);
    n += P3DW_RING_NONCE;
    memcpy(buf + n, nonce_c, P3DW_RING_NONCE);
    n += P3DW_RING_NONCE;
    unsigned int len = 0;
    return HMAC(EVP_sha256(), key, (int)strlen(key), buf, n, out, &len) && len == 32 ? 0 : -1;
}

int p3dw_ring_key_load(int fd, char *key, size_t cap)
{
    size_t n = 0;
    ssize_t r = 0;
    char more;
    while (n + 1 < cap && (r = read(fd, key + n, cap - 1 - n)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        n += (size_t)r;
    }
    /* a longer key is refused, not cut (fuzz/ring_auth found it cut) */
    while (r > 0 && (r = read(fd, &more, 1)) < 0 && errno == EINTR)
        ;
    close(fd);
    key[n] = '\0';
    return r != 0 || n < 8 || strlen(key) != n ? -1 : 0; /* the token is 8..255 bytes of text */
}

int p3dw_ring_hello(const char *key, int port, const unsigned char nonce_a[P3DW_RING_NONCE],
                    unsigned char out[P3DW_RING_HELLO], unsigned char want[32])
{
    if (RAND_bytes(out, P3DW_RING_NONCE) != 1 ||
        mac(key, "p3d-ring-connector", port, nonce_a, out, out + P3DW_RING_NONCE) < 0)
        return -1;
    return mac(key, "p3d-ring-acceptor", port, nonce_a, out, want);
}

/* ---- the acceptor's pool ------------------------------------------------ */

void p3dw_ring_pool_init(p3dw_ring_cand pool[P3DW_RING_PENDING])
{
    for (int i = 0; i < P3DW_RING_PENDING; i++)
        pool[i].fd = -1;
}

static void drop(p3dw_ring_cand *c, const char *why)
{
    fprintf(stderr, "p3d-worker: --bench-node: dropped a connection to the ring's port: %s\n", why);
    close(c->fd);
    c->fd = -1;
}

void p3dw_ring_pool_close(p3dw_ring_cand pool[P3DW_RING_PENDING])
{
    for (int i = 0; i < P3DW_RING_PENDING; i++)
        if (pool[i].fd >= 0)
            drop(&pool[i], "another connection proved the job key first");
}

/* Takes what waits on lfd into the pool, each sent its challenge at once
 * (32 bytes fit any new socket's buffer). An unkeyed ring has no pool:
 * the first connection is returned, else -1. */
static int take_new(p3dw_ring_cand pool[P3DW_RING_PENDING], int lfd, const char *key, double now, double wait_s)
{
    int fl = fcntl(lfd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK))
        fcntl(lfd, F_SETFL, fl | O_NONBLOCK);
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0 || !key)
            return c;
        int slot = 0;
        for (int i = 0; i < P3DW_RING_PENDING; i++)
            if (pool[i].fd < 0 || (pool[slot].fd >= 0 && pool[i].by < pool[slot].by))
                slot = i;
        if (pool[slot].fd >= 0)
            drop(&pool[slot], "evicted for a newer one (every slot taken by connections that had not proved the "
                              "job key)");
        p3dw_ring_cand *p = &pool[slot];
        p->fd = c;
        p->by = now + wait_s;
        p->got = 0;
        if (RAND_bytes(p->nonce, P3DW_RING_NONCE) != 1 ||
            send(c, p->nonce, P3DW_RING_NONCE, MSG_NOSIGNAL | MSG_DONTWAIT) != P3DW_RING_NONCE)
            drop(p, "cannot send it a challenge");
    }
}

/* Reads what candidate p sent: 1 when it proved the key (the answer sent),
 * 0 while it may still, -1 when it was dropped. */
static int hear(p3dw_ring_cand *p, const char *key, int port, double now, double wait_s)
{
    ssize_t r = recv(p->fd, p->hello + p->got, sizeof p->hello - p->got, MSG_DONTWAIT);
    if (r > 0)
        p->got += (size_t)r;
    else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        drop(p, "it closed before it proved the job key");
        return -1;
    }
    if (p->got < sizeof p->hello) {
        if (now <= p->by)
            return 0;
        char why[120];
        snprintf(why, sizeof why, "it did not prove the job key within %g s", wait_s);
        drop(p, why);
        return -1;
    }
    unsigned char want[32], ans[P3DW_RING_ANSWER];
    if (mac(key, "p3d-ring-connector", port, p->nonce, p->hello, want) < 0 ||
        CRYPTO_memcmp(want, p->hello + P3DW_RING_NONCE, 32) != 0 ||
        mac(key, "p3d-ring-acceptor", port, p->nonce, p->hello, ans) < 0) {
        drop(p, "it did not prove the job key (a wrong key, or a proof made for another connection)");
        return -1;
    }
    ans[32] = 'g';
    if (send(p->fd, ans, sizeof ans, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof ans) {
        drop(p, "cannot send it the answer");
        return -1;
    }
    return 1;
}

int p3dw_ring_admit(p3dw_ring_cand pool[P3DW_RING_PENDING], int lfd, const char *key, int port, double now,
                    double wait_s)
{
    int in = take_new(pool, lfd, key, now, wait_s);
    if (!key) {
        if (in >= 0 && send(in, "g", 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
            close(in);
            in = -1;
        }
        return in;
    }
    for (int i = 0; i < P3DW_RING_PENDING && in < 0; i++)
        if (pool[i].fd >= 0 && hear(&pool[i], key, port, now, wait_s) == 1) {
            in = pool[i].fd;
            pool[i].fd = -1;
        }
    if (in >= 0)
        p3dw_ring_pool_close(pool);
    return in;
}
