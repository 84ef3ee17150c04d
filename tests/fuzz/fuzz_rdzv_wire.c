/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_rdzv_wire.c — rendezvous wire messages (launcher/rdzv/rdzv_wire.c):
 * HELLO (agent -> leader, carries a node record) and PLACE (leader ->
 * agent), and the distribution tree's JOIN, TREE, TJOIN, GATHER (records
 * merged up the tree) and CPLACE (the compact placement every node
 * expands into the placement JSON; launcher/rdzv/rdzv_tree_wire.c,
 * launcher/wire/wire_cplace.c), and CDELTA (a placement made again as
 * the difference from a base, mnode_delta.c: applied to a fixed base, it
 * gives an error or a body of exactly the length and hash it names), and
 * FATE: the agent packet (launcher/wire/agent_proto.c) a FATE frame carries,
 * which is how a parent sends its children the restart (R), stop (T),
 * forward (U), retire (Q), health request (C) and heartbeat (B); for the
 * frames a parent sends (TREE, CPLACE, CDELTA, FATE) also the channel's
 * tag and the fate channel's handler (tagged() below); and the
 * handshake every connection opens with (AUTH, PROVE, PROOF: handshake()
 * below). The
 * first input byte is the frame's type byte, the rest its body,
 * exactly as p3d_frame_read hands them over. What decodes must encode and
 * decode again to the same bytes (a leader re-sends what it received).
 */
#include "fuzz_common.h"

#include "rdzv.h"
#include "mnode.h"
#include "agent.h"
#include "wire.h"

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

/* JOIN, TREE, TJOIN, GATHER: what decodes re-encodes to a frame that
 * decodes to the same bytes again. */
#define STABLE(NAME, T, ENC, DEC, FREE)                                                                           \
    static void NAME(const uint8_t *body, size_t len)                                                            \
    {                                                                                                            \
        T x, y;                                                                                                  \
        p3d_wbuf b1 = {0}, b2 = {0};                                                                             \
        char *err = NULL;                                                                                        \
        memset(&y, 0, sizeof y);                                                                                 \
        if (DEC(body, len, &x, &err) < 0) {                                                                      \
            if (!err || !*err)                                                                                   \
                abort();                                                                                         \
            free(err);                                                                                           \
            FREE(&x);                                                                                            \
            return;                                                                                              \
        }                                                                                                        \
        if (ENC(&x, &b1) == 0) {                                                                                 \
            if (DEC(b1.p + 5, b1.len - 5, &y, &err) < 0) {                                                       \
                fprintf(stderr, #NAME ": own encoding does not decode: %s\n", err);                              \
                abort();                                                                                         \
            }                                                                                                    \
            if (ENC(&y, &b2) < 0)                                                                                \
                abort();                                                                                         \
            same_bytes(&b1, &b2, #NAME);                                                                         \
        }                                                                                                        \
        FREE(&x);                                                                                                \
        FREE(&y);                                                                                                \
        p3d_wbuf_free(&b1);                                                                                      \
        p3d_wbuf_free(&b2);                                                                                      \
        free(err);                                                                                               \
    }

/* a JOIN/TJOIN of another protocol stops after the token: compare only
 * what the current protocol decodes */
static int join_dec(const unsigned char *p, size_t n, p3d_join *j, char **e)
{
    int rc = p3d_join_decode(p, n, j, e);
    return rc == 0 && j->proto != P3D_WIRE_PROTO ? (p3d_err(e, "other protocol"), -1) : rc;
}
static int tjoin_dec(const unsigned char *p, size_t n, p3d_tjoin *t, char **e)
{
    int rc = p3d_tjoin_decode(p, n, t, e);
    return rc == 0 && t->proto != P3D_WIRE_PROTO ? (p3d_err(e, "other protocol"), -1) : rc;
}
static int gather_dec(const unsigned char *p, size_t n, p3d_gather *g, char **e)
{
    return p3d_gather_decode(p, n, 1 << 20, g, e);
}
STABLE(join, p3d_join, p3d_join_encode, join_dec, p3d_join_free)
STABLE(treepos, p3d_treepos, p3d_treepos_encode, p3d_treepos_decode, p3d_treepos_free)
STABLE(tjoin, p3d_tjoin, p3d_tjoin_encode, tjoin_dec, p3d_tjoin_free)
STABLE(gather, p3d_gather, p3d_gather_encode, gather_dec, p3d_gather_free)

/* CPLACE: decodes to an error or to a placement whose every rank is on a
 * node that exists, and a NUL-terminated JSON. */
static void cplace(const uint8_t *body, size_t len)
{
    p3d_place_msg m;
    char *err = NULL;
    if (p3d_cplace_decode(body, len, &m, &err) < 0) {
        if (!err || !*err)
            abort();
        free(err);
        return;
    }
    if (!m.json || m.json[m.json_len] != 0 || !m.pl || m.pl->world < 1)
        abort();
    for (int q = 0; q < m.pl->world; q++)
        if (m.pl->ranks[q].node < 0 || m.pl->ranks[q].node >= m.nnodes)
            abort();
    p3d_place_msg_free(&m);
}

/* The fixed base a CDELTA input is applied to (seeds: gen_wire_seeds.c
 * makes theirs against the same bytes). */
static void delta_base(unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)("placement-base-" [i % 15] + i / 15 % 7);
}

static void cdelta(const uint8_t *body, size_t len)
{
    unsigned char base[4096], *out = NULL;
    size_t outn = 0;
    char *err = NULL;
    delta_base(base, sizeof base);
    if (p3d_delta_apply(base, sizeof base, body, len, &out, &outn, &err) < 0) {
        if (!err || !*err || out)
            abort();
        free(err);
        return;
    }
    /* the body names the result's length and hash: it must be those */
    if (len < 24 || outn != ((size_t)body[20] << 24 | (size_t)body[21] << 16 | (size_t)body[22] << 8 | body[23]))
        abort();
    free(out);
}

/* FATE: an agent packet decodes to -1 or to fields in range that encode
 * to a packet decoding to the same fields and text (the text cut to fit
 * P3D_AMSG_MAX is the only change encoding may make). */
static void fate(const uint8_t *body, size_t len)
{
    if (len >= P3D_AMSG_MAX)
        return; /* p3d_amsg_recv never hands over more */
    char *pkt = malloc(len + 1), *enc = malloc(P3D_AMSG_MAX + 1);
    p3d_amsg m, m2;
    if (!pkt || !enc)
        abort();
    memcpy(pkt, body, len);
    if (p3d_amsg_decode(pkt, len, &m) == 0) {
        if (!m.text || (m.type == P3D_AM_BEAT && m.ms < 0) || m.seq < 0)
            abort();
        int n = p3d_amsg_encode(&m, enc, P3D_AMSG_MAX);
        if (n <= 0 || (size_t)n > P3D_AMSG_MAX)
            abort();
        if (p3d_amsg_decode(enc, (size_t)n, &m2) < 0) {
            fprintf(stderr, "FATE: own encoding does not decode: %.*s\n", n > 80 ? 80 : n, enc);
            abort();
        }
        if (m.type != m2.type || m.gen != m2.gen || m.code != m2.code || m.rank != m2.rank || m.sig != m2.sig ||
            m.nranks != m2.nranks || m.seq != m2.seq || m.ok != m2.ok || m.ms != m2.ms ||
            strncmp(m.text, m2.text, strlen(m2.text)) != 0) {
            fprintf(stderr, "FATE: re-encoding changed a field\n");
            abort();
        }
    }
    free(pkt);
    free(enc);
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

/* The channel's tag (wire_chan.c) on every frame after a handshake: a
 * pair of channels made once (an in-memory handshake), so their sequence
 * numbers run on from input to input. What one end tags the other opens
 * to the same body, once; one flipped bit anywhere in the type, the body
 * or the tag, the same frame again (a replay), the frame on a third
 * channel of the same job, or reflected back to its sender, is refused
 * with a message and leaves the counters as they were; the input itself
 * taken as a received frame is refused (but for a 2^-256 chance). Then
 * the fate channel's handler (p3d_fate_take, as the leader or a relay
 * runs it) gets the opened body: taken, handed back (a placement,
 * downward only) or dropped with a line; never a crash. */
#define FUZZ_KEY "fuzz-job-token-0123456789"
static p3d_chan *ch_i, *ch_a, *ch_other;

/* An in-memory handshake of kind; the two ends' channels. */
static void chan_pair(int kind, p3d_chan **i, p3d_chan **a)
{
    p3d_hs hi, ha;
    p3d_wbuf o1 = {0}, o2 = {0}, o3 = {0};
    if (p3d_hs_start(&hi, FUZZ_KEY, 0, kind, &o1, NULL) < 0 || p3d_hs_start(&ha, FUZZ_KEY, 1, kind, &o2, NULL) < 0 ||
        p3d_hs_step(&ha, o1.p[4], o1.p + 5, o1.len - 5, &o2, NULL) != 0 ||
        p3d_hs_step(&hi, o2.p[4], o2.p + 5, o2.len - 5, &o3, NULL) != 1 ||
        p3d_hs_step(&ha, o3.p[4], o3.p + 5, o3.len - 5, &o1, NULL) != 1)
        abort();
    *i = p3d_chan_new(&hi, -1, NULL, "i");
    *a = p3d_chan_new(&ha, -1, NULL, "a");
    if (!*i || !*a)
        abort();
    p3d_wbuf_free(&o1);
    p3d_wbuf_free(&o2);
    p3d_wbuf_free(&o3);
}

/* 0 when c opens body (n bytes, a copy) as type; the error freed. */
static int try_open(p3d_chan *c, int type, const unsigned char *body, size_t n, size_t *out)
{
    char *err = NULL;
    *out = n;
    int rc = p3d_chan_open(c, type, body, out, &err);
    if (rc < 0 && !err)
        abort();
    free(err);
    return rc;
}

static void tagged(int type, const uint8_t *body, size_t len)
{
    p3d_wbuf f = {0};
    unsigned char tag[P3D_TAG_LEN];
    unsigned salt = len ? body[len - 1] : 7;
    p3d_wbuf_begin(&f, type);
    p3d_wbuf_bytes(&f, body, len);
    if (p3d_wbuf_end(&f) < 0 || p3d_chan_tag(ch_i, &f, tag) < 0)
        abort();
    size_t bl = len + P3D_TAG_LEN, n;
    /* the body as received: the handler writes the decoder's NUL past the
     * packet, into the tag's room */
    unsigned char *b = malloc(bl);
    if (!b)
        abort();
    if (len)
        memcpy(b, body, len);
    memcpy(b + len, tag, P3D_TAG_LEN);
    uint64_t rx = ch_a->rx;
    /* one bit flipped (the type byte counts as position bl) */
    size_t pos = (len * 131 + salt) % (bl + 1);
    unsigned char bit = (unsigned char)(1u << (salt & 7));
    if (pos < bl)
        b[pos] ^= bit;
    if (try_open(ch_a, pos < bl ? type : type ^ bit, b, bl, &n) == 0 || ch_a->rx != rx)
        abort();
    if (pos < bl)
        b[pos] ^= bit;
    /* on another connection, reflected, or as the input itself */
    if (try_open(ch_other, type, b, bl, &n) == 0 || try_open(ch_i, type, b, bl, &n) == 0 ||
        try_open(ch_a, type, body, len, &n) == 0)
        abort();
    if (try_open(ch_a, type, b, bl, &n) != 0 || n != len || ch_a->rx != rx + 1)
        abort();
    if (try_open(ch_a, type, b, bl, &n) == 0) /* replayed */
        abort();
    p3d_amsg m;
    int down = salt & 1;
    int k = p3d_fate_take("fuzz peer \x1b[2J", down, type, b, len, &m);
    if (k < 0 || (k == 2 && !down) ||
        (k == 1 && (type != P3D_MSG_FATE || !m.text || !p3d_amsg_dir_ok(m.type, down))))
        abort();
    free(b);
    p3d_wbuf_free(&f);
}

/* The handshake (wire_chan.c) fed the input as the peer's frames, to an
 * acceptor and to an initiator (a length byte, then that many bytes: the
 * type and the body, repeated): never a crash, never "done" (a proof
 * needs the job key and the fresh nonce), and after a refusal nothing
 * more is taken. */
static void handshake(const uint8_t *data, size_t size)
{
    for (int acceptor = 0; acceptor < 2; acceptor++) {
        p3d_hs h;
        p3d_wbuf out = {0};
        if (p3d_hs_start(&h, FUZZ_KEY, acceptor, P3D_LINK_CTRL + (int)(size % 4), &out, NULL) < 0)
            abort();
        size_t off = 0;
        int refused = 0;
        while (off < size) {
            size_t n = data[off++];
            if (n == 0 || n > size - off)
                n = size - off;
            if (n == 0)
                break; /* a length byte and nothing after it */
            char *err = NULL;
            int rc = p3d_hs_step(&h, data[off], data + off + 1, n - 1, &out, &err);
            off += n;
            if (rc == 1 || (refused && rc >= 0) || (rc < 0 && !err) || (rc == 0 && acceptor && !out.len && h.step))
                abort();
            refused |= rc < 0;
            free(err);
        }
        p3d_wbuf_free(&out);
        p3d_hs_wipe(&h);
    }
}

/* The failover frames (wire_rejoin.c), as their channel hands them over
 * (the tag checked and removed): opened for a 64-node job; what opens
 * encodes back to a frame that opens to the same fields, and what is
 * refused says why. */
static void rejoin_frames(int type, const uint8_t *body, size_t len)
{
    p3d_wbuf again = {0};
    char *err = NULL;
    const unsigned char *b = body;
    size_t n = len;
    int ok = 0, back = 0;
    if (type == P3D_MSG_REJOIN) {
        p3d_rejoin j, j2;
        ok = p3d_rejoin_open(type, b, n, 64, &j, &err) == 0;
        back = ok && p3d_rejoin_frame(&j, &again) == 0 &&
               p3d_rejoin_open(type, again.p + 5, again.len - 5, 64, &j2, &err) == 0 && !memcmp(&j, &j2, sizeof j);
    } else if (type == P3D_MSG_SUCCESSORS) {
        p3d_successors c, c2;
        ok = p3d_successors_open(type, b, n, 64, &c, &err) == 0;
        back = ok && p3d_successors_frame(&c, &again) == 0 &&
               p3d_successors_open(type, again.p + 5, again.len - 5, 64, &c2, &err) == 0 &&
               !memcmp(&c, &c2, sizeof c);
    } else {
        p3d_rejoined a, a2;
        ok = p3d_rejoined_open(type, b, n, &a, &err) == 0;
        back = ok && p3d_rejoined_frame(&a, &again) == 0 &&
               p3d_rejoined_open(type, again.p + 5, again.len - 5, &a2, &err) == 0 && !memcmp(&a, &a2, sizeof a);
    }
    if (ok != back || (!ok && !err))
        abort();
    free(err);
    p3d_wbuf_free(&again);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    p3d_chan *spare;
    chan_pair(P3D_LINK_CTRL, &ch_i, &ch_a);
    chan_pair(P3D_LINK_CTRL, &spare, &ch_other);
    p3d_chan_free(spare);
    return 0;
}

/* The whole input as the byte stream of a peer that has not joined (wire.h,
 * p3d_framer_feed), in pieces as the transport reads them: a refused first
 * frame has nothing of its body buffered; the framer never holds more than
 * one first frame and one read; every frame taken is as long as it said. */
static void preauth_stream(const uint8_t *data, size_t size)
{
    enum { MAX = 1024, ROOM = 97 };
    p3d_framer f = {0};
    p3d_framer_first_max(&f, MAX);
    size_t off = 0;
    int first = 1;
    while (off < size) {
        size_t want = p3d_framer_want(&f, ROOM);
        size_t n = size - off < want ? size - off : want;
        char *err = NULL;
        int r = p3d_framer_feed(&f, data + off, n, &err);
        off += n;
        if (r < 0) {
            if (!err || (r == -2 && (!first || f.len >= 4)))
                abort();
            free(err);
            break;
        }
        if (first && f.len > 4 + MAX + ROOM)
            abort();
        unsigned char *body = NULL;
        size_t len = 0;
        while (r == 1 && f.len >= 5) {
            size_t before = f.len;
            int type = p3d_framer_take(&f, &body, &len);
            if (f.len >= before || f.first_max)
                abort();
            if (type > 0 && before - f.len != len + 5)
                abort();
            free(body);
            body = NULL;
            first = 0;
            r = p3d_framer_feed(&f, NULL, 0, &err); /* the next frame, judged as it stands */
            if (r < 0 && (r == -2 || !err))
                abort(); /* the bound ended with the first frame */
            free(err);
            err = NULL;
        }
        if (r < 0)
            break;
    }
    p3d_framer_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    preauth_stream(data, size);
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
    case P3D_MSG_JOIN:
        join(body, len);
        break;
    case P3D_MSG_TREE:
        treepos(body, len);
        tagged(data[0], body, len);
        break;
    case P3D_MSG_TJOIN:
        tjoin(body, len);
        break;
    case P3D_MSG_GATHER:
        gather(body, len);
        break;
    case P3D_MSG_CPLACE:
        cplace(body, len);
        tagged(data[0], body, len);
        break;
    case P3D_MSG_CDELTA:
        cdelta(body, len);
        tagged(data[0], body, len);
        break;
    case P3D_MSG_FATE:
        fate(body, len);
        tagged(data[0], body, len);
        break;
    case P3D_MSG_SUCCESSORS:
    case P3D_MSG_REJOIN:
    case P3D_MSG_REJOINED:
        rejoin_frames(data[0], body, len);
        break;
    case P3D_MSG_AUTH:
    case P3D_MSG_PROVE:
    case P3D_MSG_PROOF:
    case P3D_MSG_REFUSE:
        handshake(data + 1, size - 1);
        tagged(data[0], body, len);
        break;
    default:
        node(body, len);
        handshake(data, size);
        break;
    }
    free(body);
    return 0;
}
