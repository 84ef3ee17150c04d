/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fate_take.c — the fate channel's frame handler (agent_link.c
 * p3d_fate_take) and the channel's tag under it (wire/wire_chan.c): a frame
 * with a bad tag is refused (the caller disconnects), a correctly tagged
 * packet that does not parse or travels the wrong way is dropped with one
 * escaped line naming the peer, and those lines are rate-limited. Both
 * directions: the leader reading a node's health results and heartbeats,
 * a relay reading the leader's restart, health request and heartbeat. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "wire.h"
#include "agent.h"
#include "rdzv.h"

#define KEY "unit-test-token-0123456789"
#define PEER_SAID "par3drun: node n2\\x1b[2J: "

/* stderr into a file while fn-like blocks run: what they said */
static int saved_fd = -1;
static char cap_path[64];

static void capture_start(void)
{
    strcpy(cap_path, "/tmp/p3d_fate_XXXXXX");
    int fd = mkstemp(cap_path);
    assert_true(fd >= 0);
    fflush(stderr);
    saved_fd = dup(2);
    dup2(fd, 2);
    close(fd);
}

static char *capture_end(void)
{
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    FILE *f = fopen(cap_path, "r");
    assert_non_null(f);
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(cap_path);
    return buf;
}

/* A frame body as the channel hands it over: pkt, with the room its tag
 * took behind it. */
static int take(int down, int type, const char *pkt, size_t n, const char *key, p3d_amsg *m, char **err)
{
    (void)key;
    (void)err;
    unsigned char *b = malloc(n + P3D_TAG_LEN);
    memcpy(b, pkt, n);
    int k = p3d_fate_take("node n2\x1b[2J", down, type, b, n, m);
    free(b);
    return k;
}

/* Two ends of a handshake done in memory: i (initiator), a (acceptor). */
static void hs_pair(p3d_hs *i, p3d_hs *a)
{
    p3d_wbuf o1 = {0}, o2 = {0}, o3 = {0};
    assert_int_equal(p3d_hs_start(i, KEY, 0, P3D_LINK_CTRL, &o1, NULL), 0);
    assert_int_equal(p3d_hs_start(a, KEY, 1, P3D_LINK_CTRL, &o2, NULL), 0);
    assert_int_equal(p3d_hs_step(a, o1.p[4], o1.p + 5, o1.len - 5, &o2, NULL), 0);
    assert_int_equal(p3d_hs_step(i, o2.p[4], o2.p + 5, o2.len - 5, &o3, NULL), 1);
    assert_int_equal(p3d_hs_step(a, o3.p[4], o3.p + 5, o3.len - 5, &o1, NULL), 1);
    p3d_wbuf_free(&o1);
    p3d_wbuf_free(&o2);
    p3d_wbuf_free(&o3);
}

static void test_good_packets(void **state)
{
    (void)state;
    p3d_amsg m;
    char *err = NULL;
    capture_start();
    assert_int_equal(take(0, P3D_MSG_FATE, "h 3 0\nGPU 2 fell off the bus", 28, KEY, &m, &err), 1);
    assert_int_equal(m.type, P3D_AM_HEALTH);
    assert_int_equal(m.seq, 3);
    assert_int_equal(take(1, P3D_MSG_FATE, "r 2", 3, KEY, &m, &err), 1);
    assert_int_equal(m.gen, 2);
    assert_int_equal(take(1, P3D_MSG_FATE, "b 5000", 6, KEY, &m, &err), 1);
    assert_int_equal(take(0, P3D_MSG_FATE, "b 0", 3, KEY, &m, &err), 1);
    assert_int_equal(take(1, P3D_MSG_CPLACE, "whatever", 8, KEY, &m, &err), 2);
    char *said = capture_end();
    assert_string_equal(said, "");
    assert_null(err);
}

static void test_bad_tag_disconnects(void **state)
{
    (void)state;
    /* a FATE frame tagged on another connection of the same job (a
     * replay), read by the leader: -1, one escaped line, the node lost */
    p3d_hs i, a, i2, a2;
    hs_pair(&i, &a);
    hs_pair(&i2, &a2);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    p3d_chan *leader = p3d_chan_new(&a, sv[0], NULL, "n2"), *other = p3d_chan_new(&i2, sv[1], NULL, "x");
    assert_non_null(leader);
    assert_non_null(other);
    p3d_wbuf f = {0};
    p3d_wbuf_begin(&f, P3D_MSG_FATE);
    p3d_wbuf_bytes(&f, "b 0", 3);
    assert_int_equal(p3d_wbuf_end(&f), 0);
    assert_int_equal(p3d_chan_send(other, &f, 5, NULL), 0);
    p3d_wbuf_free(&f);
    char *err = NULL;
    int calls = 0;
    capture_start();
    int k = p3d_fate_read(leader, "node n2\x1b[2J", NULL, &calls, &err);
    char *said = capture_end();
    assert_int_equal(k, -1);
    assert_int_equal(calls, 0);
    assert_non_null(err);
    assert_non_null(strstr(err, "tag does not match"));
    free(err);
    assert_non_null(strstr(said, "par3drun: node n2\\x1b[2J: a frame failed its tag check"));
    assert_non_null(strstr(said, "disconnecting: the node counts as lost"));
    assert_null(strchr(said, '\x1b'));
    p3d_chan_free(leader);
    p3d_chan_free(other);
    p3d_chan_free(p3d_chan_new(&i, -1, NULL, "i"));
    p3d_chan_free(p3d_chan_new(&a2, -1, NULL, "a2"));
}

/* Runs one case in a child (the rate limit's state is per process):
 * returns what it said on stderr; *k gets p3d_fate_take's result. */
static char *in_child_key(int down, int type, const char *pkt, size_t n, int times, const char *key, int *k)
{
    capture_start();
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        p3d_amsg m;
        char *err = NULL;
        int r = 0;
        for (int i = 0; i < times; i++)
            r = take(down, type, pkt, n, key, &m, &err);
        fflush(stderr);
        _exit(r + 10);
    }
    int st = 0;
    waitpid(c, &st, 0);
    char *said = capture_end();
    assert_true(WIFEXITED(st));
    *k = WEXITSTATUS(st) - 10;
    return said;
}

static char *in_child(int down, int type, const char *pkt, size_t n, int times, int *k)
{
    return in_child_key(down, type, pkt, n, times, KEY, k);
}

static void test_bad_packets_dropped(void **state)
{
    (void)state;
    static const struct {
        int down, type;
        const char *pkt;
        size_t n;
        const char *why;
    } cases[] = {
        {0, P3D_MSG_FATE, "h x 1", 5, "packet 'h': field seq missing or not an integer"},
        {0, P3D_MSG_FATE, "h 1 7\nok", 8, "field ok missing or not an integer in 0..1"},
        {1, P3D_MSG_FATE, "r -1", 4, "packet 'r': field gen"},
        {1, P3D_MSG_FATE, "b", 1, "packet 'b': field ms"},
        {1, P3D_MSG_FATE, "c 1 2", 5, "bytes after its 1 field): \"c 1 2\""},
        {1, P3D_MSG_FATE, "Zzz", 3, "unknown packet type 0x5a"},
        {1, P3D_MSG_FATE, "b 1\0 2", 6, "a NUL byte inside the packet): \"b 1\\x00 2\""},
        {1, P3D_MSG_FATE, "", 0, "an empty packet"},
        {1, P3D_MSG_FATE, "r 1\n\x1b[2J", 8, "carries no text, but text follows): \"r 1\\n\\x1b[2J\""},
        {1, P3D_MSG_FATE, "h 1 1\nok", 8, "a fate packet 'h' that only travels from an agent to the leader"},
        {0, P3D_MSG_FATE, "r 1", 3, "a fate packet 'r' that only travels from the leader to an agent"},
        {0, P3D_MSG_CPLACE, "x", 1, "an unexpected frame of type 0x43"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int k;
        char *said = in_child(cases[i].down, cases[i].type, cases[i].pkt, cases[i].n, 1, &k);
        assert_int_equal(k, 0);
        if (!strstr(said, cases[i].why) || !strstr(said, ": dropped\n") ||
            strncmp(said, PEER_SAID, strlen(PEER_SAID)) || strchr(said, '\x1b'))
            fail_msg("case %zu: '%s' does not say '%s' as one escaped line naming the peer", i, said, cases[i].why);
    }
}

static void test_rate_limited(void **state)
{
    (void)state;
    int k;
    char *said = in_child(1, P3D_MSG_FATE, "r -1", 4, 200, &k);
    assert_int_equal(k, 0);
    int lines = 0;
    for (const char *p = said; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 5);
}

static void test_escaped_packet_text(void **state)
{
    (void)state;
    /* the decoder's reason names the field, never quotes the packet */
    char pkt[] = "t 9\x1b[2J 300";
    p3d_amsg m;
    const char *why = NULL;
    assert_int_equal(p3d_amsg_decode_why(pkt, strlen(pkt), &m, &why), -1);
    assert_non_null(why);
    assert_null(strchr(why, '\x1b'));
    assert_int_equal(p3d_amsg_dir_ok(P3D_AM_HEALTH, 0), 1);
    assert_int_equal(p3d_amsg_dir_ok(P3D_AM_HEALTH, 1), 0);
    assert_int_equal(p3d_amsg_dir_ok(P3D_AM_BEAT, 1), 1);
    assert_int_equal(p3d_amsg_dir_ok(P3D_AM_BEAT, 0), 1);
    assert_int_equal(p3d_amsg_dir_ok(P3D_AM_RESUMED, 0), 1);
    assert_int_equal(p3d_amsg_dir_ok(P3D_AM_RESUMED, 1), 0);
    assert_int_equal(p3d_amsg_dir_ok('Z', 0), 0);
}

static int setup(void **state)
{
    (void)state;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* the children of these start from this process's rate-limit
         * state: nothing may be said here before them */
        cmocka_unit_test(test_good_packets),        cmocka_unit_test(test_bad_packets_dropped),
        cmocka_unit_test(test_rate_limited),        cmocka_unit_test(test_escaped_packet_text),
        cmocka_unit_test(test_bad_tag_disconnects),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
