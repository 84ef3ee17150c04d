/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_cdelta.c — a placement made again (a replaced node) sent as the
 * difference from the one every node already holds (CDELTA, rdzv.h).
 *
 * A replacement moves one node's ranks; the new compact placement
 * (wire_cplace.c) is the old one with a few spans changed: the report's
 * head and tail, the rank runs around the moved ranks. So instead of the
 * whole frame to every node (141 KB x 16,382 nodes = 2.3 GB from the
 * leader at 16,384 nodes, spares included), the leader sends what changed:
 * "copy these bytes of the old frame" / "insert these bytes", found the
 * way rsync does (a rolling hash of the new frame's windows looked up
 * among the old frame's aligned blocks, each match grown both ways).
 *
 * Body: u64 base hash, u32 base length, u64 new hash, u32 new length,
 * u32 op count, then per op one byte 'C' (u32 offset, u32 length) or 'I'
 * (u32 length, the bytes). Applying checks every offset and length
 * against both frames before copying, and the result's length and hash;
 * the result is then decoded like any CPLACE body (all of its checks).
 * The hash (FNV-1a, 64 bits) names the base so that a node holding
 * another placement says so instead of building a wrong one; it is not a
 * security boundary (the connection is, with the job token).
 */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK 32
#define ROLL_P 1099511628211ull

uint64_t p3d_delta_hash(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static uint64_t window(const unsigned char *p)
{
    uint64_t h = 0;
    for (int i = 0; i < BLOCK; i++)
        h = h * ROLL_P + p[i];
    return h;
}

typedef struct dops {
    p3d_wbuf ops;
    uint32_t n;
} dops;

static void op_copy(dops *d, size_t off, size_t len)
{
    unsigned char k = 'C';
    p3d_wbuf_bytes(&d->ops, &k, 1);
    p3d_wbuf_u32(&d->ops, (uint32_t)off);
    p3d_wbuf_u32(&d->ops, (uint32_t)len);
    d->n++;
}

static void op_insert(dops *d, const unsigned char *p, size_t len)
{
    if (!len)
        return;
    unsigned char k = 'I';
    p3d_wbuf_bytes(&d->ops, &k, 1);
    p3d_wbuf_u32(&d->ops, (uint32_t)len);
    p3d_wbuf_bytes(&d->ops, p, len);
    d->n++;
}

int p3d_delta_make(const unsigned char *old, size_t on, const unsigned char *nw, size_t nn, p3d_wbuf *out)
{
    if (on > P3D_WIRE_MAX || nn > P3D_WIRE_MAX)
        return -1;
    size_t nb = on / BLOCK, cap = 16;
    while (cap < 2 * nb)
        cap <<= 1;
    /* old's aligned blocks: hash -> offset + 1 (0: empty), open addressing */
    uint64_t *key = calloc(cap, sizeof *key);
    size_t *val = calloc(cap, sizeof *val);
    dops d = {{0}, 0};
    if (!key || !val) {
        free(key);
        free(val);
        return -1;
    }
    for (size_t b = 0; b < nb; b++) {
        uint64_t h = window(old + b * BLOCK);
        size_t s = (size_t)(h ^ (h >> 29)) & (cap - 1);
        while (val[s] && key[s] != h)
            s = (s + 1) & (cap - 1);
        if (!val[s]) {
            key[s] = h;
            val[s] = b * BLOCK + 1;
        }
    }
    uint64_t top = 1; /* ROLL_P^(BLOCK-1): the outgoing byte's weight */
    for (int i = 1; i < BLOCK; i++)
        top *= ROLL_P;
    size_t i = 0, pend = 0;
    uint64_t h = nn >= BLOCK ? window(nw) : 0;
    while (nb && i + BLOCK <= nn) {
        size_t s = (size_t)(h ^ (h >> 29)) & (cap - 1), o = 0;
        while (val[s] && key[s] != h)
            s = (s + 1) & (cap - 1);
        if (val[s] && !memcmp(old + val[s] - 1, nw + i, BLOCK))
            o = val[s];
        if (o) {
            o--;
            size_t len = BLOCK;
            while (o + len < on && i + len < nn && old[o + len] == nw[i + len])
                len++;
            while (o > 0 && i > pend && old[o - 1] == nw[i - 1])
                o--, i--, len++;
            op_insert(&d, nw + pend, i - pend);
            op_copy(&d, o, len);
            i += len;
            pend = i;
            if (i + BLOCK <= nn)
                h = window(nw + i);
            continue;
        }
        if (i + BLOCK < nn)
            h = (h - nw[i] * top) * ROLL_P + nw[i + BLOCK];
        i++;
    }
    op_insert(&d, nw + pend, nn - pend);
    free(key);
    free(val);
    p3d_wbuf_u64(out, p3d_delta_hash(old, on));
    p3d_wbuf_u32(out, (uint32_t)on);
    p3d_wbuf_u64(out, p3d_delta_hash(nw, nn));
    p3d_wbuf_u32(out, (uint32_t)nn);
    p3d_wbuf_u32(out, d.n);
    p3d_wbuf_bytes(out, d.ops.p, d.ops.len);
    int bad = d.ops.oom;
    p3d_wbuf_free(&d.ops);
    return bad || out->oom ? -1 : 0;
}

int p3d_delta_apply(const unsigned char *old, size_t on, const unsigned char *delta, size_t dn, unsigned char **out,
                    size_t *outn, char **err)
{
    p3d_rbuf r = {.p = delta, .len = dn};
    uint64_t bh = p3d_rbuf_u64(&r);
    uint32_t bl = p3d_rbuf_u32(&r);
    uint64_t nh = p3d_rbuf_u64(&r);
    uint32_t nl = p3d_rbuf_u32(&r);
    uint32_t nops = p3d_rbuf_u32(&r);
    *out = NULL;
    *outn = 0;
    if (r.bad || nl > P3D_WIRE_MAX || nops > dn)
        return p3d_err(err, "the placement difference is malformed (header)");
    if (bl != on || bh != p3d_delta_hash(old, on))
        return p3d_err(err,
                       "the placement difference is against another placement than this node's (%u bytes, "
                       "hash %016llx; this node holds %zu bytes, hash %016llx)",
                       bl, (unsigned long long)bh, on, (unsigned long long)p3d_delta_hash(old, on));
    unsigned char *b = malloc(nl ? nl : 1);
    if (!b)
        return p3d_err(err, "out of memory");
    size_t w = 0;
    for (uint32_t k = 0; k < nops; k++) {
        if (r.off >= r.len)
            goto bad;
        unsigned char kind = r.p[r.off++];
        if (kind == 'C') {
            uint32_t off = p3d_rbuf_u32(&r), len = p3d_rbuf_u32(&r);
            if (r.bad || off > on || len > on - off || len > nl - w)
                goto bad;
            memcpy(b + w, old + off, len);
            w += len;
        } else if (kind == 'I') {
            size_t len;
            const unsigned char *p = p3d_rbuf_blob(&r, nl - w, &len);
            if (r.bad || !p)
                goto bad;
            memcpy(b + w, p, len);
            w += len;
        } else {
            goto bad;
        }
    }
    if (r.off != r.len || w != nl || p3d_delta_hash(b, w) != nh)
        goto bad;
    *out = b;
    *outn = w;
    return 0;
bad:
    free(b);
    return p3d_err(err, "the placement difference is malformed (an operation out of range, or the result is not "
                        "the placement it names)");
}
