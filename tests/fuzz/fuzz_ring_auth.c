/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_ring_auth.c — the --preflight ring's challenge-response
 * (worker/bench_ring_auth.c), the listening side: a candidate in the pool
 * (a fixed challenge, a fixed key) sends the input's bytes. It is admitted
 * exactly when its first 64 bytes are a nonce_c and the HMAC this harness
 * computes on its own for that challenge; else it is dropped or left
 * waiting, never admitted, and nothing crashes. Byte 0 of the input picks
 * what follows the bytes: 0 the candidate closes its end, 1 it stays
 * open; 2: the input instead goes through p3dw_ring_key_load (a pipe),
 * which takes it exactly when it is 8..255 bytes of text without NUL.
 */
#include "fuzz_common.h"

#include "../../worker/bench_ring_auth.c"

#include <openssl/hmac.h>
#include <sys/socket.h>

#define KEY "fuzz-ring-key-0123456789"

/* The acceptor's expected proof, written here from the protocol (the
 * module's own mac() is not trusted to check itself). */
static int valid_hello(const uint8_t *h, size_t n, const unsigned char nonce_a[32], int port)
{
    unsigned char msg[128], out[32];
    unsigned int len = 0;
    size_t k = sizeof "p3d-ring-connector";
    if (n < 64)
        return 0;
    memcpy(msg, "p3d-ring-connector", k);
    msg[k++] = (unsigned char)(port >> 8);
    msg[k++] = (unsigned char)port;
    msg[k++] = 0;
    memcpy(msg + k, nonce_a, 32);
    memcpy(msg + k + 32, h, 32);
    HMAC(EVP_sha256(), KEY, (int)strlen(KEY), msg, k + 64, out, &len);
    return !memcmp(out, h + 32, 32);
}

static void key_load(const uint8_t *d, size_t n)
{
    int p[2];
    char key[256];
    if (n > 4096 || pipe(p) < 0)
        return;
    if (write(p[1], d, n) != (ssize_t)n)
        abort();
    close(p[1]);
    int rc = p3dw_ring_key_load(p[0], key, sizeof key);
    int want = n >= 8 && n <= 255 && !memchr(d, 0, n);
    if ((rc == 0) != want || (rc == 0 && memcmp(key, d, n)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    int mode = data[0] % 3, s[2];
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    if (mode == 2) {
        key_load(d, n);
        return 0;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, s) < 0)
        return 0;
    p3dw_ring_cand pool[P3DW_RING_PENDING];
    unsigned char nonce_a[32];
    memset(nonce_a, 0xa5, sizeof nonce_a);
    p3dw_ring_pool_init(pool);
    pool[0] = (p3dw_ring_cand){.fd = s[0], .by = 1.0};
    memcpy(pool[0].nonce, nonce_a, sizeof nonce_a);
    if (n && send(s[1], d, n, MSG_NOSIGNAL) != (ssize_t)n)
        abort(); /* 4 KiB fit a socketpair's buffer */
    if (mode == 0)
        shutdown(s[1], SHUT_WR);
    /* now 0 is before the candidate's deadline: only its bytes decide;
     * no listening socket (-1): nothing new is taken */
    int in = p3dw_ring_admit(pool, -1, KEY, 29500, 0.0, 1.0);
    if ((in >= 0) != valid_hello(d, n, nonce_a, 29500))
        abort();
    if (in >= 0) {
        unsigned char ans[P3DW_RING_ANSWER];
        if (recv(s[1], ans, sizeof ans, 0) != (ssize_t)sizeof ans || ans[32] != 'g')
            abort();
        close(in);
    }
    p3dw_ring_pool_close(pool);
    close(s[1]);
    return 0;
}
