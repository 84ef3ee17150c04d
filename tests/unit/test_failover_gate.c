/* SPDX-License-Identifier: BSD-3-Clause */
/* test_failover_gate.c — the failover port over loopback
 * (launcher/rdzv/rdzv_failover.c): a node that lost the leader dials a
 * successor (the handshake of wire_chan.c first), which takes its checked
 * reconnect and answers; strangers are dropped with the reason: a peer
 * with another job's key, a frame that announces more than a handshake
 * can be (refused before its body is read), another frame type after a
 * good handshake, a peer that sends nothing within the deadline, one that
 * closes half-way, and more strangers than slots (the oldest is evicted).
 * A node told no (an old leader meeting a newer generation) reads the
 * refusal and the newer generation. The dial blocks in its handshake, so
 * it runs on a thread while the test polls the gate as the hub does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "loop.h"
#include "rdzv.h"

#define KEY "unit-test-token-0123456789"

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* A dial on its own thread (it blocks in the handshake until the gate,
 * polled by the test, answers). */
typedef struct dialer {
    p3d_successor c;
    p3d_rejoin j;
    const char *key;
    int fate; /* 1: after the handshake, a FATE frame, not REJOIN */
    p3d_chan *ch;
    char *err;
    pthread_t t;
} dialer;

static void *dial_run(void *p)
{
    dialer *d = p;
    if (!d->fate) {
        d->ch = p3d_failover_dial(&d->c, &d->j, d->key, p3d_now() + 5, p3d_now() + 5, &d->err);
        return NULL;
    }
    int fd = raw_connect(d->c.port);
    d->ch = p3d_chan_handshake(fd, d->key, 0, P3D_LINK_GATE, p3d_now() + 5, "gate", NULL, &d->err);
    p3d_wbuf b = {0};
    p3d_wbuf_begin(&b, P3D_MSG_FATE);
    p3d_wbuf_u32(&b, 1);
    if (d->ch && p3d_wbuf_end(&b) == 0)
        p3d_chan_send(d->ch, &b, 5, NULL);
    p3d_wbuf_free(&b);
    return NULL;
}

static void dial_start(dialer *d, const char *addr, int port, const p3d_rejoin *j, const char *key, int fate)
{
    memset(d, 0, sizeof *d);
    d->c = (p3d_successor){.node_rank = 1, .port = port};
    snprintf(d->c.addr, sizeof d->c.addr, "%s", addr);
    d->j = *j;
    d->key = key;
    d->fate = fate;
    assert_int_equal(pthread_create(&d->t, NULL, dial_run, d), 0);
}

/* The gate polled while the dial runs: 1 when it took a node. */
static int take(p3d_fgate *g, double now, p3d_rejoin *j, p3d_chan **ch)
{
    for (int k = 0; k < 500; k++) {
        if (p3d_fgate_take(g, 5, now, NULL, 0, j, ch) == 1)
            return 1;
        usleep(2000);
    }
    return 0;
}

/* Waits for the dial's end: its channel (NULL: it failed). */
static p3d_chan *dial_end(dialer *d)
{
    pthread_join(d->t, NULL);
    free(d->err);
    d->err = NULL;
    return d->ch;
}

static void expect_drop(p3d_fgate *g, int before, double now, const char *needle)
{
    p3d_rejoin j;
    p3d_chan *ch = NULL;
    const char *why = NULL;
    for (int k = 0; k < 500 && p3d_fgate_dropped(g, NULL) == before; k++) {
        assert_int_equal(p3d_fgate_take(g, 5, now, NULL, 0, &j, &ch), 0);
        usleep(2000);
    }
    assert_int_equal(p3d_fgate_dropped(g, &why), before + 1);
    if (!strstr(why, needle))
        fail_msg("dropped for '%s', expected '%s'", why, needle);
}

static void test_rejoin_over_loopback(void **st)
{
    (void)st;
    int port = 0;
    char *err = NULL;
    p3d_fgate *g = p3d_fgate_open("127.0.0.1", 4, &port, &err);
    assert_non_null(g);
    assert_true(port > 0);
    p3d_fgate_set_key(g, KEY);
    p3d_rejoin j = {.proto = P3D_WIRE_PROTO,
                    .nnodes = 5,
                    .node_rank = 3,
                    .gen = 2,
                    .leader = 0,
                    .place_hash = 42,
                    .addr = "127.0.0.1",
                    .master_port = 7,
                    .nccl_port = 8};
    dialer d;
    dial_start(&d, "127.0.0.1", port, &j, KEY, 0);
    p3d_rejoin got;
    p3d_chan *sch = NULL;
    assert_int_equal(take(g, p3d_now(), &got, &sch), 1);
    p3d_chan *nch = dial_end(&d);
    assert_non_null(nch);
    assert_int_equal(got.node_rank, 3);
    assert_int_equal(got.gen, 2);
    assert_true(got.place_hash == 42);
    /* the successor answers: taken */
    p3d_rejoined a = {.accepted = 1, .gen = 2}, ans;
    p3d_wbuf w = {0};
    assert_int_equal(p3d_rejoined_frame(&a, &w), 0);
    assert_int_equal(p3d_chan_send(sch, &w, 5, &err), 0);
    p3d_wbuf_free(&w);
    assert_int_equal(p3d_failover_answer(nch, p3d_now() + 5, &ans, &err), 0);
    assert_int_equal(ans.accepted, 1);
    p3d_chan_free(nch);
    p3d_chan_free(sch);
    /* an old leader asks: refused, with the newer generation */
    j.node_rank = 0;
    j.leader = 0;
    dial_start(&d, "127.0.0.1", port, &j, KEY, 0);
    assert_int_equal(take(g, p3d_now(), &got, &sch), 1);
    nch = dial_end(&d);
    assert_non_null(nch);
    a = (p3d_rejoined){.accepted = 0, .gen = 3};
    snprintf(a.why, sizeof a.why, "this job is at generation 3: stop");
    assert_int_equal(p3d_rejoined_frame(&a, &w), 0);
    assert_int_equal(p3d_chan_send(sch, &w, 5, &err), 0);
    p3d_wbuf_free(&w);
    assert_int_equal(p3d_failover_answer(nch, p3d_now() + 5, &ans, &err), 0);
    assert_int_equal(ans.accepted, 0);
    assert_int_equal(ans.gen, 3);
    assert_string_equal(ans.why, a.why);
    p3d_chan_free(nch);
    p3d_chan_free(sch);
    /* a successor that never answers: the node gives up at its deadline */
    dial_start(&d, "127.0.0.1", port, &j, KEY, 0);
    assert_int_equal(take(g, p3d_now(), &got, &sch), 1);
    nch = dial_end(&d);
    assert_non_null(nch);
    assert_int_equal(p3d_failover_answer(nch, p3d_now() + 0.05, &ans, &err), -1);
    assert_non_null(strstr(err, "deadline"));
    free(err);
    err = NULL;
    p3d_chan_free(nch);
    p3d_chan_free(sch);
    p3d_fgate_close(g);
}

/* A node whose frame comes after its connection was accepted: the gate
 * holds it (p3d_fgate_waiting), the listening socket stays quiet, and
 * only a later take reads it — the hub's reason to look again while
 * strangers are held (a successor that waited for the next connection
 * instead lost such a node, and the takeover with it). */
static void test_frame_after_accept(void **st)
{
    (void)st;
    int port = 0;
    char *err = NULL;
    p3d_fgate *g = p3d_fgate_open("127.0.0.1", 4, &port, &err);
    assert_non_null(g);
    p3d_fgate_set_key(g, KEY);
    int fd = raw_connect(port);
    p3d_rejoin got;
    p3d_chan *sch = NULL;
    for (int k = 0; k < 200 && p3d_fgate_waiting(g) == 0; k++) {
        assert_int_equal(p3d_fgate_take(g, 5, p3d_now(), NULL, 0, &got, &sch), 0);
        usleep(2000);
    }
    assert_int_equal(p3d_fgate_waiting(g), 1);
    /* its challenge comes now, on the accepted connection */
    p3d_hs h;
    p3d_wbuf w = {0};
    assert_int_equal(p3d_hs_start(&h, KEY, 0, P3D_LINK_GATE, &w, &err), 0);
    assert_int_equal(p3d_frame_write(fd, &w, &err), 0);
    p3d_wbuf_free(&w);
    usleep(20000);
    struct pollfd pf = {.fd = p3d_fgate_fd(g), .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 0), 0); /* nothing new to accept */
    assert_int_equal(p3d_fgate_take(g, 5, p3d_now(), NULL, 0, &got, &sch), 0);
    /* the gate answered the challenge: the rest of the handshake, then
     * the reconnect */
    unsigned char *body = NULL;
    size_t len = 0;
    int type = p3d_frame_read(fd, &body, &len, &err);
    assert_int_equal(p3d_hs_step(&h, type, body, len, &w, &err), 1);
    free(body);
    assert_int_equal(p3d_frame_write(fd, &w, &err), 0);
    p3d_wbuf_free(&w);
    p3d_chan *c = p3d_chan_new(&h, fd, NULL, "node");
    assert_non_null(c);
    p3d_rejoin j = {.proto = P3D_WIRE_PROTO, .nnodes = 5, .node_rank = 2, .gen = 0, .leader = 0, .addr = "127.0.0.1"};
    assert_int_equal(p3d_rejoin_frame(&j, &w), 0);
    assert_int_equal(p3d_chan_send(c, &w, 5, &err), 0);
    p3d_wbuf_free(&w);
    assert_int_equal(take(g, p3d_now(), &got, &sch), 1);
    assert_int_equal(got.node_rank, 2);
    assert_int_equal(p3d_fgate_waiting(g), 0);
    p3d_chan_free(sch);
    p3d_chan_free(c);
    p3d_fgate_close(g);
}

/* Where the host has IPv6, 1 (::1 can be bound). */
static int have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* The failover port listens on the node's address only, in its family:
 * on ::1 (where the host has IPv6) it takes a node that dials ::1, and a
 * dial to 127.0.0.1 on that port is refused; without IPv6 the same on
 * 127.0.0.2 (all of 127/8 is this host). A gate without an address is
 * refused: it would listen on every interface. */
static void test_own_address_only(void **st)
{
    (void)st;
    int port = 0;
    char *err = NULL;
    assert_null(p3d_fgate_open(NULL, 4, &port, &err));
    assert_non_null(err);
    free(err);
    err = NULL;
    const char *at = have_ipv6_loopback() ? "::1" : "127.0.0.2";
    if (at[0] == '1')
        fprintf(stderr, "test_own_address_only: no IPv6 loopback here: 127.0.0.2\n");
    p3d_fgate *g = p3d_fgate_open(at, 4, &port, &err);
    assert_non_null(g);
    assert_true(port > 0);
    p3d_fgate_set_key(g, KEY);
    int fd = p3d_tcp_dial("127.0.0.1", port, p3d_now() + 2);
    if (fd >= 0) {
        close(fd);
        fail_msg("a dial to 127.0.0.1:%d reached a gate that listens on %s", port, at);
    }
    p3d_rejoin j = {.proto = P3D_WIRE_PROTO,
                    .nnodes = 5,
                    .node_rank = 2,
                    .gen = 1,
                    .leader = 0,
                    .addr = "x",
                    .failover_port = port};
    dialer d;
    dial_start(&d, at, port, &j, KEY, 0);
    p3d_rejoin got;
    p3d_chan *sch = NULL;
    int took = take(g, p3d_now(), &got, &sch);
    p3d_chan *nch = dial_end(&d);
    if (!took || !nch)
        fail_msg("dial %s:%d failed", at, port);
    assert_int_equal(got.node_rank, 2);
    assert_int_equal(got.failover_port, port);
    p3d_chan_free(nch);
    p3d_chan_free(sch);
    p3d_fgate_close(g);
}

/* Which address a node's ports bind (rdzv_addr.c): the route to a
 * leader at 127.0.0.2 leaves from 127.0.0.1 (Linux routes 127/8 through
 * lo with source 127.0.0.1), to ::1 from ::1; --bind-addr takes one
 * numeric address of this node, in either family, and refuses a name,
 * brackets, a port, a wildcard and a foreign address, naming the value. */
static void test_listen_address(void **st)
{
    (void)st;
    char a[128], *err = NULL;
    assert_int_equal(p3d_route_addr("127.0.0.2", 29400, a, sizeof a, &err), 0);
    assert_string_equal(a, "127.0.0.1");
    if (have_ipv6_loopback()) {
        assert_int_equal(p3d_route_addr("::1", 29400, a, sizeof a, &err), 0);
        assert_string_equal(a, "::1");
        assert_int_equal(p3d_bind_addr_check("--bind-addr", "::1", &err), 0);
    }
    assert_int_equal(p3d_bind_addr_check("--bind-addr", "127.0.0.3", &err), 0);
    assert_null(err);
    const char *bad[] = {"node001", "[::1]", "127.0.0.1:80", "0.0.0.0", "::", "192.0.2.77", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[64];
        snprintf(want, sizeof want, "--bind-addr '%s'", bad[i]);
        assert_int_equal(p3d_bind_addr_check("--bind-addr", bad[i], &err), -1);
        assert_non_null(err);
        if (!strstr(err, want))
            fail_msg("%s: %s", bad[i], err);
        free(err);
        err = NULL;
    }
    assert_int_equal(p3d_route_addr("no-such-host.invalid", 1, a, sizeof a, &err), -1);
    assert_non_null(err);
    free(err);
}

static void test_strangers_dropped(void **st)
{
    (void)st;
    int port = 0;
    char *err = NULL;
    p3d_fgate *g = p3d_fgate_open("127.0.0.1", 2, &port, &err);
    assert_non_null(g);
    p3d_fgate_set_key(g, KEY);
    double now = p3d_now();
    int d = 0;
    /* another job's key: the dial refuses the gate's proof and leaves */
    p3d_rejoin j = {.proto = P3D_WIRE_PROTO, .nnodes = 5, .node_rank = 3, .gen = 2, .leader = 0, .addr = "x"};
    dialer dl;
    dial_start(&dl, "127.0.0.1", port, &j, "another-job-key", 0);
    expect_drop(g, d++, now, "wrong job token");
    assert_null(dial_end(&dl));
    /* a huge announced length: refused before any body byte is read */
    int fd = raw_connect(port);
    unsigned char big[5] = {0x03, 0xff, 0xff, 0xff, 'A'};
    assert_int_equal(write(fd, big, sizeof big), (ssize_t)sizeof big);
    expect_drop(g, d++, now, "over the bound");
    close(fd);
    /* another frame type after a good handshake */
    dial_start(&dl, "127.0.0.1", port, &j, KEY, 1);
    expect_drop(g, d++, now, "expected a reconnect");
    p3d_chan_free(dial_end(&dl));
    /* half a frame, then closed */
    fd = raw_connect(port);
    unsigned char half[6] = {0, 0, 0, 40, 'A', 1};
    assert_int_equal(write(fd, half, sizeof half), (ssize_t)sizeof half);
    close(fd);
    expect_drop(g, d++, now, "closed");
    /* silent past the deadline */
    fd = raw_connect(port);
    p3d_rejoin x;
    p3d_chan *xch = NULL;
    usleep(20000);
    assert_int_equal(p3d_fgate_take(g, 5, now, NULL, 0, &x, &xch), 0);
    assert_int_equal(p3d_fgate_dropped(g, NULL), d);
    expect_drop(g, d++, now + P3D_FGATE_DEADLINE + 1, "no reconnect frame");
    close(fd);
    /* three silent strangers for two slots: the oldest goes */
    int f1 = raw_connect(port), f2 = raw_connect(port);
    usleep(20000);
    assert_int_equal(p3d_fgate_take(g, 5, now, NULL, 0, &x, &xch), 0);
    int f3 = raw_connect(port);
    expect_drop(g, d++, now + 1, "evicted");
    /* the deadline of the strangers left is reported */
    double next = now + 100;
    assert_int_equal(p3d_fgate_take(g, 5, now + 1, &next, 0, &x, &xch), 0);
    assert_true(next <= now + 1 + P3D_FGATE_DEADLINE);
    close(f1);
    close(f2);
    close(f3);
    p3d_fgate_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejoin_over_loopback), cmocka_unit_test(test_frame_after_accept),
        cmocka_unit_test(test_own_address_only),     cmocka_unit_test(test_listen_address),
        cmocka_unit_test(test_strangers_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
