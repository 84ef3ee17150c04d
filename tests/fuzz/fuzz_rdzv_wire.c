/*
 * fuzz_rdzv_wire.c — rendezvous wire messages (launcher/rdzv/rdzv_wire.c):
 * HELLO (agent -> leader, carries a node record) and PLACE (leader ->
 * agent). The first input byte is the frame's type byte, the rest its body,
 * exactly as p3d_frame_read hands them over. What decodes must encode and
 * decode again to the same bytes (a leader re-sends what it received).
 */
#include "fuzz_common.h"

#include "rdzv.h"

static void same_bytes(const p3d_wbuf *a, const p3d_wbuf *b, const char *what)
{
    if (a->oom || b->oom || a->len != b->len || memcmp(a->p, b->p, a->len)) {
        fprintf(stderr, "%s: re-encoding is not stable (%zu vs %zu bytes)\n", what, a->len, b->len);
        abort();
    }
}

static void hello(const uint8_t *body, size_t len)
{
    p3d_hello h, h2;
    p3d_wbuf b1 = {0}, b2 = {0};
    char *err = NULL;
    memset(&h2, 0, sizeof h2);
    if (p3d_hello_decode(body, len, &h, &err) < 0) {
        if (!err || !*err)
            abort();
        goto out;
    }
    if (!h.topo)
        goto out; /* another protocol number: the leader refuses it */
    if (p3d_hello_encode(&h, &b1) < 0)
        goto out; /* over P3D_WIRE_MAX cannot come from a smaller input */
    if (b1.len < 5 || b1.p[4] != P3D_MSG_HELLO)
        abort();
    if (p3d_hello_decode(b1.p + 5, b1.len - 5, &h2, &err) < 0) {
        fprintf(stderr, "HELLO: own encoding does not decode: %s\n", err);
        abort();
    }
    if (p3d_hello_encode(&h2, &b2) < 0)
        abort();
    same_bytes(&b1, &b2, "HELLO");
out:
    p3d_hello_free(&h);
    p3d_hello_free(&h2);
    p3d_wbuf_free(&b1);
    p3d_wbuf_free(&b2);
    free(err);
}

static void place(const uint8_t *body, size_t len)
{
    p3d_place_msg m, m2;
    p3d_wbuf b1 = {0}, b2 = {0};
    char *err = NULL;
    memset(&m2, 0, sizeof m2);
    if (p3d_place_decode(body, len, &m, &err) < 0) {
        if (!err || !*err)
            abort();
        goto out;
    }
    if (p3d_place_encode(&m, &b1) < 0)
        goto out;
    if (p3d_place_decode(b1.p + 5, b1.len - 5, &m2, &err) < 0) {
        fprintf(stderr, "PLACE: own encoding does not decode: %s\n", err);
        abort();
    }
    if (p3d_place_encode(&m2, &b2) < 0)
        abort();
    same_bytes(&b1, &b2, "PLACE");
out:
    p3d_place_msg_free(&m);
    p3d_place_msg_free(&m2);
    p3d_wbuf_free(&b1);
    p3d_wbuf_free(&b2);
    free(err);
}

static void node(const uint8_t *body, size_t len)
{
    p3d_rbuf r = {.p = body, .len = len};
    char *err = NULL;
    p3d_node *n = p3d_node_decode(&r, &err);
    if (!n && (!err || !*err))
        abort();
    if (n && (r.off > r.len || n->ngpus < 0))
        abort();
    p3d_node_free(n);
    free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* an exact-size copy of the body: reads past it are ASan reports */
    size_t len = size - 1;
    uint8_t *body = malloc(len ? len : 1);
    if (!body)
        abort();
    memcpy(body, data + 1, len);
    switch (data[0]) {
    case P3D_MSG_HELLO:
        hello(body, len);
        break;
    case P3D_MSG_PLACE:
        place(body, len);
        break;
    default:
        node(body, len);
        break;
    }
    free(body);
    return 0;
}
