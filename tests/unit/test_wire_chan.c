/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The authenticated channel (wire_chan.c): both sides prove the job key,
 * a stranger without it learns nothing and is refused, and a frame is
 * valid only once, in one direction, on the connection it was sent on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "loop.h"
#include "wire.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define KEY "job-key-0123456789"

/* Runs a handshake between two in-memory sides: frames handed back and
 * forth. Returns the initiator's last step result, *arc the acceptor's. */
static int pair(p3d_hs *i, p3d_hs *a, const char *ki, const char *ka, int kind_i, int kind_a, int *arc)
{
    p3d_wbuf o1 = {0}, o2 = {0}, o3 = {0};
    assert_int_equal(p3d_hs_start(i, ki, 0, kind_i, &o1, NULL), 0);
    assert_int_equal(p3d_hs_start(a, ka, 1, kind_a, &o2, NULL), 0);
    assert_int_equal(o2.len, 0);
    int irc = -1;
    *arc = p3d_hs_step(a, p3d_frame_type(&o1), p3d_frame_body(&o1), p3d_frame_body_len(&o1), &o2, NULL);
    if (*arc == 0) {
        irc = p3d_hs_step(i, p3d_frame_type(&o2), p3d_frame_body(&o2), p3d_frame_body_len(&o2), &o3, NULL);
        if (irc == 1)
            *arc = p3d_hs_step(a, p3d_frame_type(&o3), p3d_frame_body(&o3), p3d_frame_body_len(&o3), &o1, NULL);
    }
    p3d_wbuf_free(&o1);
    p3d_wbuf_free(&o2);
    p3d_wbuf_free(&o3);
    return irc;
}

static void test_handshake_ok(void **st)
{
    (void)st;
    p3d_hs i, a;
    int arc;
    assert_int_equal(pair(&i, &a, KEY, KEY, P3D_LINK_CTRL, P3D_LINK_CTRL, &arc), 1);
    assert_int_equal(arc, 1);
    p3d_chan *ci = p3d_chan_new(&i, -1, NULL, "i"), *ca = p3d_chan_new(&a, -1, NULL, "a");
    assert_non_null(ci);
    assert_non_null(ca);
    assert_memory_equal(ci->sk, ca->sk, sizeof ci->sk);
    /* the session key is not the job key's plain HMAC of nothing: two
     * handshakes give two keys */
    p3d_hs i2, a2;
    assert_int_equal(pair(&i2, &a2, KEY, KEY, P3D_LINK_CTRL, P3D_LINK_CTRL, &arc), 1);
    p3d_chan *c2 = p3d_chan_new(&i2, -1, NULL, "i2");
    assert_memory_not_equal(ci->sk, c2->sk, sizeof ci->sk);
    p3d_chan_free(ci);
    p3d_chan_free(ca);
    p3d_chan_free(c2);
}

static void test_wrong_key_refused(void **st)
{
    (void)st;
    p3d_hs i, a;
    int arc;
    /* the acceptor lacks the key: the initiator refuses its proof and
     * sends nothing more */
    assert_int_equal(pair(&i, &a, KEY, "impostor-key-000", P3D_LINK_CTRL, P3D_LINK_CTRL, &arc), -1);
    assert_int_equal(arc, 0);
    /* the link kinds differ: the acceptor refuses the challenge */
    assert_int_equal(pair(&i, &a, KEY, KEY, P3D_LINK_GATE, P3D_LINK_RING, &arc), -1);
    assert_int_equal(arc, -1);
}

/* An initiator without the key gets past nothing: its PROOF, whatever it
 * sends, does not match. */
static void test_stranger_proof_refused(void **st)
{
    (void)st;
    p3d_hs a;
    p3d_wbuf o = {0}, auth = {0};
    char *err = NULL;
    unsigned char nonce[P3D_NONCE_LEN] = {1}, junk[P3D_TAG_LEN] = {2};
    assert_int_equal(p3d_hs_start(&a, KEY, 1, P3D_LINK_TREE, &o, NULL), 0);
    p3d_wbuf_begin(&auth, P3D_MSG_AUTH);
    p3d_wbuf_u32(&auth, P3D_WIRE_PROTO);
    p3d_wbuf_u32(&auth, P3D_LINK_TREE);
    p3d_wbuf_bytes(&auth, nonce, sizeof nonce);
    assert_int_equal(p3d_wbuf_end(&auth), 0);
    assert_int_equal(p3d_hs_step(&a, P3D_MSG_AUTH, p3d_frame_body(&auth), p3d_frame_body_len(&auth), &o, NULL), 0);
    assert_int_equal(p3d_hs_step(&a, P3D_MSG_PROOF, junk, sizeof junk, &o, &err), -1);
    assert_non_null(strstr(err, "wrong job token"));
    free(err);
    err = NULL;
    /* an old agent's JOIN where the challenge belongs: told why */
    p3d_hs b;
    assert_int_equal(p3d_hs_start(&b, KEY, 1, P3D_LINK_CTRL, &o, NULL), 0);
    assert_int_equal(p3d_hs_step(&b, P3D_MSG_JOIN, junk, sizeof junk, &o, &err), -1);
    assert_non_null(strstr(err, "wire protocol 9 or older"));
    free(err);
    p3d_wbuf_free(&o);
    p3d_wbuf_free(&auth);
}

static void test_tags_replay(void **st)
{
    (void)st;
    p3d_hs i, a, i2, a2;
    int arc;
    assert_int_equal(pair(&i, &a, KEY, KEY, P3D_LINK_CTRL, P3D_LINK_CTRL, &arc), 1);
    assert_int_equal(pair(&i2, &a2, KEY, KEY, P3D_LINK_CTRL, P3D_LINK_CTRL, &arc), 1);
    p3d_chan *ci = p3d_chan_new(&i, -1, NULL, "i"), *ca = p3d_chan_new(&a, -1, NULL, "a");
    p3d_chan *ca2 = p3d_chan_new(&a2, -1, NULL, "a2");
    p3d_wbuf f = {0};
    p3d_wbuf_begin(&f, P3D_MSG_FATE);
    p3d_wbuf_str(&f, "t 15 1");
    assert_int_equal(p3d_wbuf_end(&f), 0);
    unsigned char tag[P3D_TAG_LEN];
    assert_int_equal(p3d_chan_tag(ci, &f, tag), 0);
    size_t bl = p3d_frame_body_len(&f);
    unsigned char *body = malloc(bl + P3D_TAG_LEN);
    memcpy(body, p3d_frame_body(&f), bl);
    memcpy(body + bl, tag, P3D_TAG_LEN);
    char *err = NULL;
    /* on another connection of the same job: refused */
    size_t n = bl + P3D_TAG_LEN;
    assert_int_equal(p3d_chan_open(ca2, P3D_MSG_FATE, body, &n, &err), -1);
    free(err);
    err = NULL;
    /* as another type: refused */
    n = bl + P3D_TAG_LEN;
    assert_int_equal(p3d_chan_open(ca, P3D_MSG_REFUSE, body, &n, &err), -1);
    free(err);
    err = NULL;
    /* the real one, once */
    n = bl + P3D_TAG_LEN;
    assert_int_equal(p3d_chan_open(ca, P3D_MSG_FATE, body, &n, NULL), 0);
    assert_int_equal(n, bl);
    /* the same again (a replay later on the same connection): refused */
    n = bl + P3D_TAG_LEN;
    assert_int_equal(p3d_chan_open(ca, P3D_MSG_FATE, body, &n, &err), -1);
    assert_non_null(strstr(err, "replayed"));
    free(err);
    err = NULL;
    /* reflected back to its sender: refused (the direction is in the tag) */
    n = bl + P3D_TAG_LEN;
    assert_int_equal(p3d_chan_open(ci, P3D_MSG_FATE, body, &n, &err), -1);
    free(err);
    free(body);
    p3d_wbuf_free(&f);
    p3d_chan_free(ci);
    p3d_chan_free(ca);
    p3d_chan_free(ca2);
    p3d_chan_free(p3d_chan_new(&i2, -1, NULL, "i2"));
}

typedef struct side {
    int fd, acceptor;
    const char *key;
    p3d_chan *c;
    char *err;
} side;

static void *run_side(void *p)
{
    side *s = p;
    s->c = p3d_chan_handshake(s->fd, s->key, s->acceptor, P3D_LINK_GATE, p3d_now() + 20, "peer", NULL, &s->err);
    return NULL;
}

/* Over a real socket: a frame sent on the channel arrives whole and
 * checked; a wrong key on the acceptor's side ends in an error on both
 * sides, never in a hang. */
static void test_socket(void **st)
{
    (void)st;
    for (int wrong = 0; wrong < 2; wrong++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        side a = {.fd = sv[0], .acceptor = 1, .key = wrong ? "not-the-key-xyz" : KEY};
        side i = {.fd = sv[1], .acceptor = 0, .key = KEY};
        pthread_t t;
        pthread_create(&t, NULL, run_side, &a);
        run_side(&i);
        if (wrong)
            close(sv[1]); /* the initiator gave up: the acceptor's read ends */
        pthread_join(t, NULL);
        if (wrong) {
            assert_null(i.c);
            assert_non_null(strstr(i.err, "does not prove this job's key"));
            assert_null(a.c);
            close(sv[0]);
        } else {
            assert_non_null(i.c);
            assert_non_null(a.c);
            p3d_wbuf f = {0};
            p3d_wbuf_begin(&f, P3D_MSG_REJOIN);
            p3d_wbuf_u32(&f, 7);
            assert_int_equal(p3d_wbuf_end(&f), 0);
            assert_int_equal(p3d_chan_send(i.c, &f, 5, NULL), 0);
            assert_int_equal(p3d_chan_send(i.c, &f, 5, NULL), 0);
            unsigned char *body;
            size_t len;
            for (int k = 0; k < 2; k++) {
                assert_int_equal(p3d_chan_read(a.c, p3d_now() + 5, &body, &len, NULL), P3D_MSG_REJOIN);
                assert_int_equal(len, 4);
                free(body);
            }
            p3d_wbuf_free(&f);
        }
        free(a.err);
        free(i.err);
        p3d_chan_free(a.c);
        p3d_chan_free(i.c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_ok),
        cmocka_unit_test(test_wrong_key_refused),
        cmocka_unit_test(test_stranger_proof_refused),
        cmocka_unit_test(test_tags_replay),
        cmocka_unit_test(test_socket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
