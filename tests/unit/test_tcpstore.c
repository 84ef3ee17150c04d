/* SPDX-License-Identifier: BSD-3-Clause */
/* test_tcpstore.c — the agent store (launcher/run/store/tcpstore.h) at the wire:
 * a fake client encodes torch 1.x and 2.x queries byte for byte and checks
 * the replies; the same queries a byte at a time; every bound and every
 * malformed query drops the client and leaves the store serving; random
 * bytes never crash it nor grow it past its bounds; a new generation is
 * empty; and one round through a real socket and the event loop. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcpstore.h"

/* ---- the fake client: a query as torch encodes it ----------------------- */

typedef struct q {
    unsigned char b[4096];
    size_t n;
} q;

static void put(q *m, const void *p, size_t n)
{
    assert_true(m->n + n <= sizeof m->b);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void u8(q *m, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(m, &c, 1);
}
static void u64(q *m, uint64_t v)
{
    put(m, &v, 8);
}
static void u32(q *m, uint32_t v)
{
    put(m, &v, 4);
}
static void str(q *m, const char *s)
{
    u64(m, strlen(s));
    put(m, s, strlen(s));
}

/* torch 1.13's numbering, and 2.x's (VALIDATE first, WATCH_KEY gone) */
enum {
    V1_SET,
    V1_CSET,
    V1_GET,
    V1_ADD,
    V1_CHECK,
    V1_WAIT,
    V1_NUMKEYS,
    V1_WATCH,
    V1_DELETE,
    V1_APPEND,
    V1_MGET,
    V1_MSET,
    V1_CANCEL
}; /* 10-12: the 2.x releases before VALIDATE */
enum {
    V2_VALIDATE,
    V2_SET,
    V2_CSET,
    V2_GET,
    V2_ADD,
    V2_CHECK,
    V2_WAIT,
    V2_NUMKEYS,
    V2_DELETE,
    V2_APPEND,
    V2_MGET,
    V2_MSET,
    V2_CANCEL,
    V2_PING
};
#define MAGIC 0x3C85F7CEu

static int send_q(p3d_store *s, int id, q *m)
{
    int rc = p3d_store_input(s, id, m->b, m->n);
    m->n = 0;
    return rc;
}

/* What the store queued for id, taken (0-terminated copy in out). */
static size_t take(p3d_store *s, int id, unsigned char *out, size_t cap)
{
    size_t n = 0;
    const unsigned char *b = p3d_store_output(s, id, &n);
    assert_true(n <= cap);
    if (n)
        memcpy(out, b, n);
    p3d_store_sent(s, id, n);
    return n;
}

static int64_t take_i64(p3d_store *s, int id)
{
    unsigned char b[64] = {0};
    int64_t v;
    assert_int_equal(take(s, id, b, sizeof b), 8);
    memcpy(&v, b, 8);
    return v;
}

/* a string reply: u64 length then the bytes */
static void take_str(p3d_store *s, int id, const char *want)
{
    unsigned char b[256] = {0};
    size_t n = take(s, id, b, sizeof b);
    uint64_t l;
    assert_true(n >= 8);
    memcpy(&l, b, 8);
    assert_int_equal(l, strlen(want));
    assert_int_equal(n, 8 + l);
    assert_memory_equal(b + 8, want, l);
}

static void take_byte(p3d_store *s, int id, int want)
{
    unsigned char b[8];
    assert_int_equal(take(s, id, b, sizeof b), 1);
    assert_int_equal(b[0], want);
}

static void set1(q *m, const char *k, const char *v)
{
    u8(m, V1_SET);
    str(m, k);
    str(m, v);
}

/* ---- torch 1.13 --------------------------------------------------------- */

static void test_v1_queries(void **st)
{
    (void)st;
    p3d_store *s = p3d_store_new(NULL);
    int a = p3d_store_client_new(s, -1), w = p3d_store_client_new(s, -1);
    q m = {0};
    set1(&m, "k", "hello");
    assert_int_equal(send_q(s, a, &m), 0);
    assert_int_equal(p3d_store_client_version(s, a), 1);
    assert_null(p3d_store_output(s, a, &(size_t){0})); /* SET: no reply */
    u8(&m, V1_GET);
    str(&m, "k");
    assert_int_equal(send_q(s, a, &m), 0);
    take_str(s, a, "hello");
    for (int i = 1; i <= 2; i++) { /* ADD: the sum, kept as decimal text */
        u8(&m, V1_ADD);
        str(&m, "init/");
        u64(&m, 3);
        assert_int_equal(send_q(s, a, &m), 0);
        assert_int_equal(take_i64(s, a), 3 * i);
    }
    u8(&m, V1_GET);
    str(&m, "init/");
    assert_int_equal(send_q(s, a, &m), 0);
    take_str(s, a, "6");
    /* CHECK: ready only when every key is there */
    u8(&m, V1_CHECK);
    u64(&m, 2);
    str(&m, "k");
    str(&m, "later");
    assert_int_equal(send_q(s, a, &m), 0);
    take_byte(s, a, 1);
    /* WAIT: no answer until the last key comes, then STOP_WAITING */
    u8(&m, V1_WAIT);
    u64(&m, 2);
    str(&m, "k");
    str(&m, "later");
    assert_int_equal(send_q(s, w, &m), 0);
    assert_null(p3d_store_output(s, w, &(size_t){0}));
    set1(&m, "later", "x");
    assert_int_equal(send_q(s, a, &m), 0);
    take_byte(s, w, 0);
    u8(&m, V1_WAIT); /* all there: answered at once */
    u64(&m, 1);
    str(&m, "later");
    assert_int_equal(send_q(s, w, &m), 0);
    take_byte(s, w, 0);
    u8(&m, V1_NUMKEYS);
    assert_int_equal(send_q(s, a, &m), 0);
    assert_int_equal(take_i64(s, a), 3);
    /* COMPARE_SET: torch's rules */
    u8(&m, V1_CSET); /* missing, expected empty: set */
    str(&m, "c");
    str(&m, "");
    str(&m, "one");
    assert_int_equal(send_q(s, a, &m), 0);
    take_str(s, a, "one");
    u8(&m, V1_CSET); /* expected differs: unchanged, the value now */
    str(&m, "c");
    str(&m, "zzz");
    str(&m, "two");
    assert_int_equal(send_q(s, a, &m), 0);
    take_str(s, a, "one");
    u8(&m, V1_CSET); /* expected matches: swapped */
    str(&m, "c");
    str(&m, "one");
    str(&m, "two");
    assert_int_equal(send_q(s, a, &m), 0);
    take_str(s, a, "two");
    u8(&m, V1_CSET); /* missing, expected given: expected back, nothing set */
    str(&m, "d");
    str(&m, "e");
    str(&m, "f");
    assert_int_equal(send_q(s, a, &m), 0);
    take_str(s, a, "e");
    for (int want = 1; want >= 0; want--) {
        u8(&m, V1_DELETE);
        str(&m, "c");
        assert_int_equal(send_q(s, a, &m), 0);
        assert_int_equal(take_i64(s, a), want);
    }
    assert_int_equal(p3d_store_nkeys(s), 3);
    /* the 2.x releases before the handshake: MULTI_SET, MULTI_GET and
     * CANCEL_WAIT at 11, 10 and 12 of the same numbering */
    u8(&m, V1_MSET);
    u64(&m, 1);
    str(&m, "mk");
    str(&m, "mv");
    u8(&m, V1_MGET);
    u64(&m, 1);
    str(&m, "mk");
    u8(&m, V1_CANCEL);
    assert_int_equal(send_q(s, a, &m), 0);
    unsigned char b[32];
    assert_int_equal(take(s, a, b, sizeof b), 8 + 2 + 1);
    assert_memory_equal(b + 8, "mv", 2);
    assert_int_equal(b[10], 1); /* WAIT_CANCELED */
    assert_int_equal(p3d_store_client_version(s, a), 1);
    p3d_store_free(s);
}

/* The same conversation cut anywhere: a byte at a time, the same replies. */
static void test_v1_byte_at_a_time(void **st)
{
    (void)st;
    p3d_store *s = p3d_store_new(NULL);
    int a = p3d_store_client_new(s, -1);
    q m = {0};
    set1(&m, "key", "value");
    u8(&m, V1_ADD);
    str(&m, "n");
    u64(&m, (uint64_t)-5);
    u8(&m, V1_GET);
    str(&m, "key");
    for (size_t i = 0; i < m.n; i++)
        assert_int_equal(p3d_store_input(s, a, m.b + i, 1), 0);
    unsigned char b[64];
    size_t n = take(s, a, b, sizeof b);
    assert_int_equal(n, 8 + 8 + 5);
    int64_t v;
    memcpy(&v, b, 8);
    assert_int_equal(v, -5);
    assert_memory_equal(b + 16, "value", 5);
    p3d_store_free(s);
}

/* ---- torch 2.x ----------------------------------------------------------- */

static void test_v2_queries(void **st)
{
    (void)st;
    p3d_store *s = p3d_store_new(NULL);
    int a = p3d_store_client_new(s, -1), w = p3d_store_client_new(s, -1);
    q m = {0};
    u8(&m, V2_VALIDATE);
    u32(&m, MAGIC);
    u8(&m, V2_PING);
    u32(&m, 4242);
    assert_int_equal(send_q(s, a, &m), 0);
    assert_int_equal(p3d_store_client_version(s, a), 2);
    unsigned char b[64];
    uint32_t nonce;
    assert_int_equal(take(s, a, b, sizeof b), 4);
    memcpy(&nonce, b, 4);
    assert_int_equal(nonce, 4242);
    u8(&m, V2_SET);
    str(&m, "k");
    str(&m, "v");
    u8(&m, V2_APPEND);
    str(&m, "k");
    str(&m, "w");
    u8(&m, V2_MSET);
    u64(&m, 2);
    str(&m, "x");
    str(&m, "1");
    str(&m, "y");
    str(&m, "22");
    u8(&m, V2_MGET);
    u64(&m, 3);
    str(&m, "k");
    str(&m, "y");
    str(&m, "x");
    assert_int_equal(send_q(s, a, &m), 0);
    size_t n = take(s, a, b, sizeof b);
    assert_int_equal(n, 3 * 8 + 2 + 2 + 1);
    assert_memory_equal(b + 8, "vw", 2);
    assert_memory_equal(b + 18, "22", 2);
    assert_memory_equal(b + 28, "1", 1);
    /* a WAIT cancelled: WAIT_CANCELED, and the key coming later wakes nobody */
    u8(&m, V2_VALIDATE);
    u32(&m, MAGIC);
    u8(&m, V2_WAIT);
    u64(&m, 1);
    str(&m, "never");
    assert_int_equal(send_q(s, w, &m), 0);
    assert_null(p3d_store_output(s, w, &(size_t){0}));
    u8(&m, V2_CANCEL);
    assert_int_equal(send_q(s, w, &m), 0);
    take_byte(s, w, 1);
    u8(&m, V2_SET);
    str(&m, "never");
    str(&m, "now");
    assert_int_equal(send_q(s, a, &m), 0);
    assert_null(p3d_store_output(s, w, &(size_t){0}));
    u8(&m, V2_CHECK);
    u64(&m, 1);
    str(&m, "never");
    u8(&m, V2_NUMKEYS);
    u8(&m, V2_DELETE);
    str(&m, "x");
    assert_int_equal(send_q(s, w, &m), 0);
    assert_int_equal(take(s, w, b, sizeof b), 1 + 8 + 8);
    assert_int_equal(b[0], 0);
    int64_t v;
    memcpy(&v, b + 1, 8);
    assert_int_equal(v, 4);
    memcpy(&v, b + 9, 8);
    assert_int_equal(v, 1);
    p3d_store_free(s);
}

/* ---- hostile clients ----------------------------------------------------- */

/* Each: a fresh client sends it and is refused; the store still serves. */
static void refused(p3d_store *s, q *m)
{
    int id = p3d_store_client_new(s, -1);
    assert_true(id >= 0);
    assert_int_equal(send_q(s, id, m), -1);
    p3d_store_client_drop(s, id);
    int ok = p3d_store_client_new(s, -1);
    q g = {0};
    u8(&g, V1_NUMKEYS);
    assert_int_equal(send_q(s, ok, &g), 0);
    (void)take_i64(s, ok);
    p3d_store_client_drop(s, ok);
}

static void test_hostile(void **st)
{
    (void)st;
    p3d_store_limits lim = p3d_store_default_limits();
    lim.key_max = 16;
    lim.value_max = 64;
    lim.msg_max = 256;
    lim.out_max = 100;
    lim.keys_max = 3;
    lim.bytes_max = 1000;
    lim.clients_max = 4;
    lim.args_max = 4;
    p3d_store *s = p3d_store_new(&lim);
    q m = {0};
    set1(&m, "0123456789abcdefX", "v"); /* key over key_max */
    refused(s, &m);
    u8(&m, V1_SET); /* a length of 2^64-1: refused before any allocation */
    u64(&m, UINT64_MAX);
    refused(s, &m);
    u8(&m, V1_WATCH); /* not served */
    str(&m, "k");
    refused(s, &m);
    u8(&m, 200); /* no such query */
    refused(s, &m);
    u8(&m, V1_GET); /* GET of a missing key (torch WAITs first) */
    str(&m, "nope");
    refused(s, &m);
    u8(&m, V1_CHECK); /* more keys than args_max */
    u64(&m, 5);
    refused(s, &m);
    u8(&m, V2_VALIDATE); /* 2.x handshake with a wrong magic: read as 1.x, refused */
    u32(&m, 0xdeadbeef);
    u32(&m, 0xdeadbeef);
    refused(s, &m);
    set1(&m, "a", "not a number");
    u8(&m, V1_ADD);
    str(&m, "a");
    u64(&m, 1);
    refused(s, &m);
    set1(&m, "m", "x"); /* ADD past INT64_MAX */
    u8(&m, V1_ADD);
    str(&m, "m");
    u64(&m, (uint64_t)INT64_MAX);
    u8(&m, V1_ADD);
    str(&m, "m");
    u64(&m, 1);
    refused(s, &m);
    assert_int_equal(p3d_store_nkeys(s), 2); /* "a" and "m" */
    set1(&m, "b", "1");
    set1(&m, "c", "1"); /* a fourth key: over keys_max */
    refused(s, &m);
    /* a query within every field's bound but longer than msg_max: a 2.x
     * MULTI_SET of 4 pairs at their largest (393 bytes), cut at 300 */
    int id = p3d_store_client_new(s, -1);
    u8(&m, V2_VALIDATE);
    u32(&m, MAGIC);
    assert_int_equal(send_q(s, id, &m), 0);
    u8(&m, V2_MSET);
    u64(&m, 4);
    for (int i = 0; i < 4; i++) {
        char k[17], v[65];
        memset(k, 'a' + i, 16);
        k[16] = 0;
        memset(v, 'v', 64);
        v[64] = 0;
        str(&m, k);
        str(&m, v);
    }
    assert_int_equal(p3d_store_input(s, id, m.b, 200), 0); /* not complete yet */
    assert_int_equal(p3d_store_input(s, id, m.b + 200, 100), -1);
    m.n = 0;
    p3d_store_client_drop(s, id);
    /* replies a client does not read: past out_max it is dropped */
    id = p3d_store_client_new(s, -1);
    int rc = 0;
    for (int i = 0; i < 20 && rc == 0; i++) {
        u8(&m, V1_NUMKEYS);
        rc = send_q(s, id, &m);
    }
    assert_int_equal(rc, -1);
    p3d_store_client_drop(s, id);
    /* held_max: what all clients make the store buffer together; a SET
     * of a 60-byte value (87 bytes) that never completes */
    p3d_store_limits hl = lim;
    hl.held_max = 100;
    p3d_store *h = p3d_store_new(&hl);
    int h1 = p3d_store_client_new(h, -1), h2 = p3d_store_client_new(h, -1);
    unsigned char part[87] = {V1_SET, 10};
    part[19] = 60;
    assert_int_equal(p3d_store_input(h, h1, part, 30), 0);       /* 30 held */
    assert_int_equal(p3d_store_input(h, h2, part, 60), 0);       /* 90 */
    assert_int_equal(p3d_store_input(h, h1, part + 30, 30), -1); /* 120: over */
    p3d_store_client_drop(h, h1);
    p3d_store_client_drop(h, h2);
    int h3 = p3d_store_client_new(h, -1); /* dropped clients give their bytes back */
    assert_int_equal(p3d_store_input(h, h3, part, 80), 0);
    assert_int_equal(p3d_store_input(h, h3, part + 80, 7), 0); /* complete: served, nothing held */
    assert_int_equal(p3d_store_nkeys(h), 1);
    assert_int_equal(p3d_store_input(h, h3, part, 80), 0);
    p3d_store_free(h);
    /* clients_max */
    int ids[5];
    for (int i = 0; i < 4; i++)
        assert_true((ids[i] = p3d_store_client_new(s, -1)) >= 0);
    assert_int_equal(p3d_store_client_new(s, -1), -1);
    for (int i = 0; i < 4; i++)
        p3d_store_client_drop(s, ids[i]);
    p3d_store_free(s);
}

/* Random bytes into a store with small bounds: no crash (the sanitizer
 * build runs this too), and the bounds hold whatever came. */
static void test_random_bytes(void **st)
{
    (void)st;
    p3d_store_limits lim = p3d_store_default_limits();
    lim.key_max = 8;
    lim.value_max = 32;
    lim.msg_max = 128;
    lim.out_max = 256;
    lim.keys_max = 16;
    lim.bytes_max = 300;
    lim.args_max = 8;
    p3d_store *s = p3d_store_new(&lim);
    unsigned seed = 46;
    for (int round = 0; round < 3000; round++) {
        int id = p3d_store_client_new(s, -1);
        assert_true(id >= 0);
        unsigned char b[64];
        size_t n = (size_t)(rand_r(&seed) % (int)sizeof b);
        for (size_t i = 0; i < n; i++) {
            int r = rand_r(&seed);
            /* mostly small numbers: lengths and query types that parse */
            b[i] = (unsigned char)(r % 4 ? r % 12 : r >> 8);
        }
        if (p3d_store_input(s, id, b, n) < 0 || rand_r(&seed) % 2)
            p3d_store_client_drop(s, id);
        size_t k;
        p3d_store_output(s, id, &k);
        assert_true(k <= lim.out_max);
        assert_true(p3d_store_nkeys(s) <= lim.keys_max);
    }
    p3d_store_free(s);
}

/* A restart: no key and no connection of the generation before. */
static void test_generation(void **st)
{
    (void)st;
    p3d_store *s = p3d_store_new(NULL);
    int a = p3d_store_client_new(s, -1);
    q m = {0};
    set1(&m, "/worker/attempt_0/k", "v");
    assert_int_equal(send_q(s, a, &m), 0);
    p3d_store_generation(s, 0); /* the generation it serves: nothing */
    assert_int_equal(p3d_store_nkeys(s), 1);
    p3d_store_generation(s, 1);
    assert_int_equal(p3d_store_nkeys(s), 0);
    assert_int_equal(p3d_store_nclients(s), 0);
    p3d_store_generation(NULL, 2);
    p3d_store_free(s);
}

/* ---- through a socket and the loop --------------------------------------- */

static void test_socket(void **st)
{
    (void)st;
    int port = 0;
    char *err = NULL;
    p3d_store *s = p3d_store_listen("127.0.0.1", 0, &port, &err);
    assert_non_null(s);
    assert_true(port > 0);
    p3d_loop *l = p3d_loop_new();
    assert_int_equal(p3d_store_attach(s, l), 0);
    int fds[4];
    assert_int_equal(p3d_store_fds(s, fds, 4), 1);
    /* the port is open before the loop ever ran: a client connects now */
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
    q m = {0};
    set1(&m, "k", "net");
    u8(&m, V1_GET);
    str(&m, "k");
    assert_int_equal(send(c, m.b, m.n, 0), (ssize_t)m.n);
    unsigned char b[64];
    size_t got = 0;
    for (int pass = 0; pass < 50 && got < 11; pass++) {
        assert_int_equal(p3d_loop_once(l, p3d_now() + 0.1), 0);
        ssize_t r = recv(c, b + got, sizeof b - got, MSG_DONTWAIT);
        if (r > 0)
            got += (size_t)r;
    }
    assert_int_equal(got, 11);
    assert_memory_equal(b + 8, "net", 3);
    assert_int_equal(p3d_store_nclients(s), 1);
    close(c); /* gone: the store drops it */
    for (int pass = 0; pass < 50 && p3d_store_nclients(s); pass++)
        assert_int_equal(p3d_loop_once(l, p3d_now() + 0.1), 0);
    assert_int_equal(p3d_store_nclients(s), 0);
    p3d_store_free(s);
    p3d_loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_queries), cmocka_unit_test(test_v1_byte_at_a_time), cmocka_unit_test(test_v2_queries),
        cmocka_unit_test(test_hostile),    cmocka_unit_test(test_random_bytes),      cmocka_unit_test(test_generation),
        cmocka_unit_test(test_socket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
