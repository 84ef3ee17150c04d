/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_chan.c — the authenticated channel (wire.h, "the authenticated
 * channel"): the mutual challenge-response that opens every connection,
 * the session key it derives, and the per-connection tags and sequence
 * numbers of every frame after it. Why a channel object: the key and the
 * counters belong to one connection, so no frame can be sealed with the
 * wrong ones and none is valid anywhere else.
 */
#include "wire.h"

#include "loop.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The largest handshake frame: PROVE (2 x 32 bytes + headers). */
#define HS_FRAME_MAX 128

typedef struct part {
    const void *p;
    size_t n;
} part;

/* HMAC-SHA256(key, parts...) into out. 0 or -1. */
static int hmac(const unsigned char *key, size_t klen, const part *ps, int np, unsigned char out[P3D_TAG_LEN])
{
    int rc = -1;
    size_t n = 0;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *c = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM prm[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                        OSSL_PARAM_construct_end()};
    if (!c || klen == 0 || EVP_MAC_init(c, key, klen, prm) != 1)
        goto out;
    for (int i = 0; i < np; i++)
        if (ps[i].n && EVP_MAC_update(c, ps[i].p, ps[i].n) != 1)
            goto out;
    if (EVP_MAC_final(c, out, &n, P3D_TAG_LEN) != 1 || n != P3D_TAG_LEN)
        goto out;
    rc = 0;
out:
    EVP_MAC_CTX_free(c);
    EVP_MAC_free(mac);
    return rc;
}

static void be32_put(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* HMAC(K, label || T), T = ni || na || kind || proto. */
static int hs_mac(const p3d_hs *h, const char *label, unsigned char out[P3D_TAG_LEN])
{
    unsigned char kp[8];
    be32_put(kp, (uint32_t)h->kind);
    be32_put(kp + 4, P3D_WIRE_PROTO);
    part ps[] = {{label, strlen(label)}, {h->ni, P3D_NONCE_LEN}, {h->na, P3D_NONCE_LEN}, {kp, sizeof kp}};
    return hmac(h->key, h->klen, ps, 4, out);
}

static const char *kind_name(int k)
{
    return k == P3D_LINK_CTRL   ? "control"
           : k == P3D_LINK_TREE ? "tree"
           : k == P3D_LINK_GATE ? "failover"
           : k == P3D_LINK_RING ? "preflight ring"
                                : "unknown";
}

int p3d_hs_start(p3d_hs *h, const char *key, int acceptor, int kind, p3d_wbuf *out, char **err)
{
    memset(h, 0, sizeof *h);
    out->len = 0;
    out->oom = 0;
    size_t kl = key ? strlen(key) : 0;
    if (kl == 0 || kl > sizeof h->key)
        return p3d_err(err, "no job key (1..%zu bytes) to authenticate the connection with", sizeof h->key);
    memcpy(h->key, key, kl);
    h->klen = kl;
    h->acceptor = acceptor;
    h->kind = kind;
    if (RAND_bytes(acceptor ? h->na : h->ni, P3D_NONCE_LEN) != 1)
        return p3d_err(err, "no random bytes for the handshake (libcrypto)");
    if (!acceptor) {
        p3d_wbuf_begin(out, P3D_MSG_AUTH);
        p3d_wbuf_u32(out, P3D_WIRE_PROTO);
        p3d_wbuf_u32(out, (uint32_t)kind);
        p3d_wbuf_bytes(out, h->ni, P3D_NONCE_LEN);
        if (p3d_wbuf_end(out) < 0)
            return p3d_err(err, "out of memory");
    }
    return 0;
}

/* The acceptor takes AUTH: answers with its nonce and its proof. */
static int hs_auth(p3d_hs *h, const unsigned char *body, size_t len, p3d_wbuf *out, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    uint32_t proto = p3d_rbuf_u32(&r), kind = p3d_rbuf_u32(&r);
    if (r.bad || proto != P3D_WIRE_PROTO)
        return p3d_err(err,
                       "par3drun version mismatch: this node speaks wire protocol %d, the peer %u: run the "
                       "same par3drun on every node",
                       P3D_WIRE_PROTO, r.bad ? 0 : proto);
    if (len != 8 + P3D_NONCE_LEN)
        return p3d_err(err, "a malformed challenge (%zu bytes, %d expected)", len, 8 + P3D_NONCE_LEN);
    if ((int)kind != h->kind)
        return p3d_err(err, "a %s connection reached the %s port", kind_name((int)kind), kind_name(h->kind));
    memcpy(h->ni, body + 8, P3D_NONCE_LEN);
    unsigned char m[P3D_TAG_LEN];
    if (hs_mac(h, "p3d-acceptor", m) < 0)
        return p3d_err(err, "cannot compute the handshake (libcrypto)");
    p3d_wbuf_begin(out, P3D_MSG_PROVE);
    p3d_wbuf_bytes(out, h->na, P3D_NONCE_LEN);
    p3d_wbuf_bytes(out, m, sizeof m);
    return p3d_wbuf_end(out) < 0 ? p3d_err(err, "out of memory") : 0;
}

/* The initiator takes PROVE: checks the acceptor's proof, sends its own. */
static int hs_prove(p3d_hs *h, const unsigned char *body, size_t len, p3d_wbuf *out, char **err)
{
    unsigned char m[P3D_TAG_LEN];
    if (len != P3D_NONCE_LEN + P3D_TAG_LEN)
        return p3d_err(err, "a malformed handshake answer (%zu bytes, %d expected)", len, P3D_NONCE_LEN + P3D_TAG_LEN);
    memcpy(h->na, body, P3D_NONCE_LEN);
    if (hs_mac(h, "p3d-acceptor", m) < 0)
        return p3d_err(err, "cannot compute the handshake (libcrypto)");
    if (CRYPTO_memcmp(m, body + P3D_NONCE_LEN, P3D_TAG_LEN) != 0)
        return p3d_err(err, "wrong job token: the peer does not prove this job's key (another job, a different "
                            "--rdzv-token-file, or an impostor); nothing was sent to it");
    if (hs_mac(h, "p3d-initiator", m) < 0)
        return p3d_err(err, "cannot compute the handshake (libcrypto)");
    p3d_wbuf_begin(out, P3D_MSG_PROOF);
    p3d_wbuf_bytes(out, m, sizeof m);
    return p3d_wbuf_end(out) < 0 ? p3d_err(err, "out of memory") : 1;
}

/* The acceptor takes PROOF. */
static int hs_proof(p3d_hs *h, const unsigned char *body, size_t len, char **err)
{
    unsigned char m[P3D_TAG_LEN];
    if (len != P3D_TAG_LEN)
        return p3d_err(err, "a malformed handshake proof (%zu bytes, %d expected)", len, P3D_TAG_LEN);
    if (hs_mac(h, "p3d-initiator", m) < 0)
        return p3d_err(err, "cannot compute the handshake (libcrypto)");
    if (CRYPTO_memcmp(m, body, P3D_TAG_LEN) != 0)
        return p3d_err(err, "wrong job token: its proof does not match this job's key (an agent of another job, "
                            "a different --rdzv-token-file, or a stranger)");
    return 1;
}

int p3d_hs_step(p3d_hs *h, int type, const unsigned char *body, size_t len, p3d_wbuf *out, char **err)
{
    out->len = 0;
    out->oom = 0;
    int want = h->acceptor ? (h->step == 0 ? P3D_MSG_AUTH : P3D_MSG_PROOF) : P3D_MSG_PROVE;
    int rc;
    if (h->state != 0)
        return p3d_err(err, "the handshake is over");
    if (type == P3D_MSG_REFUSE) {
        p3d_rbuf r = {.p = body, .len = len};
        char *why = p3d_rbuf_str(&r, 1024);
        rc = p3d_err(err, "refused by the peer: %s", why && !r.bad ? why : "(no reason)");
        free(why);
        return rc;
    }
    if (type != want)
        return p3d_err(err, "expected the handshake's '%c' frame, got type 0x%02x%s", want, (unsigned)type & 0xff,
                       type == P3D_MSG_JOIN || type == P3D_MSG_TJOIN || type == P3D_MSG_REJOIN
                           ? " (a par3drun of wire protocol 9 or older: run the same par3drun on every node)"
                           : "");
    if (h->acceptor)
        rc = h->step == 0 ? hs_auth(h, body, len, out, err) : hs_proof(h, body, len, err);
    else
        rc = hs_prove(h, body, len, out, err);
    if (rc >= 0)
        h->step++;
    if (rc == 1)
        h->state = 1;
    if (rc < 0)
        h->state = -1;
    return rc;
}

void p3d_hs_wipe(p3d_hs *h)
{
    OPENSSL_cleanse(h, sizeof *h);
}

/* ---- the channel --------------------------------------------------------- */

p3d_chan *p3d_chan_new(const p3d_hs *h, int fd, p3d_framer *fr, const char *peer)
{
    if (h->state != 1)
        return NULL;
    p3d_chan *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    unsigned char kp[8];
    be32_put(kp, (uint32_t)h->kind);
    be32_put(kp + 4, P3D_WIRE_PROTO);
    static const char label[] = "p3d-session";
    part ps[] = {{label, sizeof label - 1}, {h->ni, P3D_NONCE_LEN}, {h->na, P3D_NONCE_LEN}, {kp, sizeof kp}};
    if (hmac(h->key, h->klen, ps, 4, c->sk) < 0) {
        free(c);
        return NULL;
    }
    c->fd = fd;
    c->acceptor = h->acceptor;
    if (fr) {
        c->fr = *fr;
        c->fr.first_max = 0;
        memset(fr, 0, sizeof *fr);
    }
    snprintf(c->peer, sizeof c->peer, "%s", peer ? peer : "?");
    return c;
}

void p3d_chan_free(p3d_chan *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    p3d_framer_free(&c->fr);
    OPENSSL_cleanse(c->sk, sizeof c->sk);
    free(c);
}

/* HMAC(session, direction || seq || type || body). */
static int chan_mac(const p3d_chan *c, int from_acceptor, uint64_t seq, unsigned char type, const unsigned char *body,
                    size_t len, unsigned char out[P3D_TAG_LEN])
{
    unsigned char hd[10];
    hd[0] = from_acceptor ? 'a' : 'i';
    for (int i = 0; i < 8; i++)
        hd[1 + i] = (unsigned char)(seq >> (56 - 8 * i));
    hd[9] = type;
    part ps[] = {{hd, sizeof hd}, {body, len}};
    return hmac(c->sk, sizeof c->sk, ps, 2, out);
}

int p3d_chan_tag(p3d_chan *c, const p3d_wbuf *frame, unsigned char tag[P3D_TAG_LEN])
{
    if (frame->oom || frame->len < P3D_FRAME_HDR ||
        chan_mac(c, c->acceptor, c->tx, (unsigned char)p3d_frame_type(frame), p3d_frame_body(frame),
                 p3d_frame_body_len(frame), tag) < 0)
        return -1;
    c->tx++;
    return 0;
}

int p3d_chan_reserve(p3d_wbuf *frame)
{
    if (frame->oom || frame->len < P3D_FRAME_HDR || frame->len - 4 + P3D_TAG_LEN > P3D_WIRE_MAX)
        return -1;
    be32_put(frame->p, (uint32_t)(frame->len - 4 + P3D_TAG_LEN));
    return 0;
}

int p3d_chan_send(p3d_chan *c, const p3d_wbuf *frame, double stall, char **err)
{
    unsigned char tag[P3D_TAG_LEN];
    p3d_wbuf out = {0};
    int rc = -1;
    if (p3d_chan_tag(c, frame, tag) < 0) {
        p3d_err(err, "cannot tag a frame (out of memory, or libcrypto failed)");
        goto out;
    }
    p3d_wbuf_bytes(&out, frame->p, frame->len);
    p3d_wbuf_bytes(&out, tag, sizeof tag);
    if (out.oom || out.len - 4 > P3D_WIRE_MAX) {
        p3d_err(err, "out of memory, or a frame over %u bytes", P3D_WIRE_MAX);
        goto out;
    }
    be32_put(out.p, (uint32_t)(out.len - 4));
    rc = p3d_frame_write_bounded(c->fd, &out, stall, err);
out:
    p3d_wbuf_free(&out);
    return rc;
}

int p3d_chan_open(p3d_chan *c, int type, const unsigned char *body, size_t *len, char **err)
{
    unsigned char tag[P3D_TAG_LEN];
    if (*len < P3D_TAG_LEN)
        return p3d_err(err, "%zu bytes, too short to hold its %d-byte tag", *len, P3D_TAG_LEN);
    size_t n = *len - P3D_TAG_LEN;
    if (chan_mac(c, !c->acceptor, c->rx, (unsigned char)type, body, n, tag) < 0)
        return p3d_err(err, "cannot compute the tag (libcrypto)");
    if (CRYPTO_memcmp(tag, body + n, P3D_TAG_LEN) != 0)
        return p3d_err(err,
                       "the tag does not match this connection's session key and frame number %llu (forged, "
                       "replayed, or corrupted)",
                       (unsigned long long)c->rx);
    c->rx++;
    *len = n;
    return 0;
}

int p3d_chan_fill(p3d_chan *c, char **err)
{
    return p3d_framer_fill(&c->fr, c->fd, err);
}

int p3d_chan_take(p3d_chan *c, unsigned char **body, size_t *len, char **err)
{
    int type = p3d_framer_take(&c->fr, body, len);
    if (type > 0 && p3d_chan_open(c, type, *body, len, err) < 0) {
        free(*body);
        *body = NULL;
        return -1;
    }
    return type;
}

int p3d_chan_read(p3d_chan *c, double deadline, unsigned char **body, size_t *len, char **err)
{
    *body = NULL;
    *len = 0;
    int type = p3d_framer_take(&c->fr, body, len);
    if (type == 0) {
        if (deadline > 0 && p3d_wait_fd(c->fd, P3D_LOOP_IN, deadline) <= 0)
            return p3d_err(err, "nothing from %s by the deadline", c->peer);
        type = p3d_frame_read(c->fd, body, len, err);
    }
    if (type > 0 && p3d_chan_open(c, type, *body, len, err) < 0) {
        free(*body);
        *body = NULL;
        return -1;
    }
    return type;
}

/* Reads one handshake frame (at most HS_FRAME_MAX bytes) by deadline into
 * buf: its length, or -1 with *err. */
static long hs_read(int fd, double deadline, unsigned char *buf, const char *peer, char **err)
{
    size_t have = 0, want = 4;
    while (have < want) {
        if (deadline > 0 && p3d_wait_fd(fd, P3D_LOOP_IN, deadline) <= 0)
            return p3d_err(err, "%s did not finish the handshake by the deadline", peer);
        ssize_t k = read(fd, buf + have, want - have);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return p3d_err(err, "%s closed the connection during the handshake%s", peer, k < 0 ? " (reset)" : "");
        have += (size_t)k;
        if (have == 4) {
            uint32_t n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
            /* a refusal may say more than a handshake frame holds */
            if (n < 1 || n > HS_FRAME_MAX + 1024)
                return p3d_err(err, "%s sent a handshake frame of %u bytes: not a par3drun peer of this version?", peer,
                               n);
            want = 4 + n;
        }
    }
    return (long)have;
}

void p3d_hs_refuse(int fd, const char *why)
{
    p3d_wbuf b = {0};
    p3d_wbuf_begin(&b, P3D_MSG_REFUSE);
    p3d_wbuf_str(&b, why);
    /* best effort, never blocking: a stranger that does not read is gone */
    if (p3d_wbuf_end(&b) == 0)
        (void)!send(fd, b.p, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    p3d_wbuf_free(&b);
}

p3d_chan *p3d_chan_handshake(int fd, const char *key, int acceptor, int kind, double deadline, const char *peer,
                             int *refused, char **err)
{
    p3d_hs h;
    p3d_wbuf out = {0};
    p3d_chan *c = NULL;
    unsigned char *buf = malloc(4 + HS_FRAME_MAX + 1024);
    int rc = buf ? p3d_hs_start(&h, key, acceptor, kind, &out, err) : p3d_err(err, "out of memory");
    if (refused)
        *refused = 0;
    while (rc == 0) {
        if (out.len && p3d_frame_write_bounded(fd, &out, deadline > 0 ? deadline - p3d_now() : 30, err) < 0) {
            rc = -1;
            break;
        }
        long n = hs_read(fd, deadline, buf, peer, err);
        if (n < 0) {
            rc = -1;
            break;
        }
        rc = p3d_hs_step(&h, buf[4], buf + 5, (size_t)n - 5, &out, err);
        /* refused in clear, or the acceptor failed its proof: another
         * job's key (not worth a retry) */
        if (rc < 0 && refused && (buf[4] == P3D_MSG_REFUSE || buf[4] == P3D_MSG_PROVE))
            *refused = 1;
        if (rc < 0 && acceptor && buf[4] != P3D_MSG_REFUSE)
            p3d_hs_refuse(fd, err && *err ? *err : "refused");
    }
    if (rc == 1 && out.len && p3d_frame_write_bounded(fd, &out, deadline > 0 ? deadline - p3d_now() : 30, err) < 0)
        rc = -1;
    if (rc == 1 && !(c = p3d_chan_new(&h, fd, NULL, peer)))
        p3d_err(err, "out of memory");
    p3d_hs_wipe(&h);
    p3d_wbuf_free(&out);
    free(buf);
    return c;
}
