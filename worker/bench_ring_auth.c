/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_ring_auth.c — the --preflight TCP ring's proof of the job key
 * (docs/multinode.md, "Security"). par3drun hands the key over through an
 * inherited descriptor (--bench-tcp-key-fd), never argv or the
 * environment.
 *
 * The connector proves first, in the bytes it sends right after connect:
 *   nonce_c (32 random bytes) || HMAC-SHA256(K, "p3d-ring-connector" 0 port 0 nonce_c)
 * (port: the listening port it connects to, as 2 bytes), so the acceptor
 * can check a candidate with one bounded read and never waits on a peer
 * that is itself waiting (every node of the ring is both). The acceptor
 * answers with HMAC-SHA256(K, "p3d-ring-acceptor" 0 nonce_c) before its
 * go byte: the connector streams only to a node that proved the key.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_ring_auth.h"

static int mac(const char *key, const char *label, int port, const unsigned char *nonce, unsigned char out[32])
{
    unsigned char buf[64 + P3DW_RING_NONCE];
    size_t n = strlen(label) + 1;
    memcpy(buf, label, n);
    if (port >= 0) {
        buf[n++] = (unsigned char)(port >> 8);
        buf[n++] = (unsigned char)port;
        buf[n++] = 0;
    }
    memcpy(buf + n, nonce, P3DW_RING_NONCE);
    n += P3DW_RING_NONCE;
    unsigned int len = 0;
    return HMAC(EVP_sha256(), key, (int)strlen(key), buf, n, out, &len) && len == 32 ? 0 : -1;
}

int p3dw_ring_key_load(int fd, char *key, size_t cap)
{
    size_t n = 0;
    ssize_t r = 0;
    while (n + 1 < cap && (r = read(fd, key + n, cap - 1 - n)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    key[n] = '\0';
    return r < 0 || n < 8 || strlen(key) != n ? -1 : 0; /* the token is 8..255 bytes of text */
}

int p3dw_ring_hello(const char *key, int port, unsigned char out[P3DW_RING_HELLO], unsigned char want[32])
{
    if (RAND_bytes(out, P3DW_RING_NONCE) != 1 || mac(key, "p3d-ring-connector", port, out, out + P3DW_RING_NONCE) < 0)
        return -1;
    return mac(key, "p3d-ring-acceptor", -1, out, want);
}

/* recv exactly n bytes by the wall-clock deadline: 0, or -1 */
static int recv_by(int fd, unsigned char *b, size_t n, double wait_s)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t got = 0;
    while (got < n) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        double left = wait_s - ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            return -1;
        ssize_t r = recv(fd, b + got, n - got, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return -1;
        if (r > 0)
            got += (size_t)r;
    }
    return 0;
}

int p3dw_ring_check(int fd, const char *key, int port, double wait_s, unsigned char answer[32])
{
    unsigned char h[P3DW_RING_HELLO], want[32];
    if (recv_by(fd, h, sizeof h, wait_s) < 0 || mac(key, "p3d-ring-connector", port, h, want) < 0 ||
        CRYPTO_memcmp(want, h + P3DW_RING_NONCE, 32) != 0)
        return -1;
    return mac(key, "p3d-ring-acceptor", -1, h, answer);
}
