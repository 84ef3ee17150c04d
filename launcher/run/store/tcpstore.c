/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcpstore.c — the c10d TCPStore protocol, server side, without sockets
 * (tcpstore.h). Learnt from torch's TCPStore.cpp (1.13) and
 * TCPStoreBackend.cpp (2.x); written from the wire up:
 *
 *   query   1 byte, the query type (numbering below, per version)
 *   string  u64 length (host order, as torch sends size_t), then bytes:
 *           keys and values alike
 *   int     i64 / u64, host order; u32 for the 2.x magic and ping nonce
 *
 * A query is decoded twice: once to see that it is complete and within
 * bounds (nothing changes), then to act. So a half-received query costs
 * nothing but its bytes, and a hostile one is refused before any effect.
 */
#include "tcpstore_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OP_BAD,
    OP_VALIDATE,
    OP_SET,
    OP_CSET,
    OP_GET,
    OP_ADD,
    OP_CHECK,
    OP_WAIT,
    OP_NUMKEYS,
    OP_DELETE,
    OP_APPEND,
    OP_MGET,
    OP_MSET,
    OP_CANCEL,
    OP_PING,
};
/* QueryType without a handshake: torch 1.13's, which the 2.x releases
 * before VALIDATE extended with MULTI_GET, MULTI_SET and CANCEL_WAIT
 * (WATCH_KEY, 7, is not served: a callback connection only a user's
 * watch_key uses); and torch 2.x's with VALIDATE first */
static const unsigned char v1_ops[] = {OP_SET, OP_CSET,   OP_GET,    OP_ADD,  OP_CHECK, OP_WAIT,  OP_NUMKEYS,
                                       OP_BAD, OP_DELETE, OP_APPEND, OP_MGET, OP_MSET,  OP_CANCEL};
static const unsigned char v2_ops[] = {OP_VALIDATE, OP_SET,    OP_CSET,   OP_GET,  OP_ADD,  OP_CHECK,  OP_WAIT,
                                       OP_NUMKEYS,  OP_DELETE, OP_APPEND, OP_MGET, OP_MSET, OP_CANCEL, OP_PING};
#define V2_MAGIC 0x3C85F7CEu
enum { CHECK_READY = 0, CHECK_NOT_READY = 1, WAIT_STOP = 0, WAIT_CANCELED = 1 };

p3d_store_limits p3d_store_default_limits(void)
{
    return (p3d_store_limits){.key_max = 64u << 10,
                              .value_max = 32u << 20,
                              .msg_max = 80u << 20,
                              .out_max = 80u << 20,
                              .bytes_max = (size_t)512u << 20,
                              .keys_max = 1u << 20,
                              .clients_max = 65536,
                              .args_max = 65536,
                              .held_max = (size_t)512u << 20};
}

/* ---- decoding --------------------------------------------------------- */

typedef struct rd {
    const unsigned char *p;
    size_t n, at;
    int need, bad; /* need: incomplete; bad: breaks the protocol or a bound */
} rd;

static int rd_has(rd *r, size_t k)
{
    if (r->need || r->bad)
        return 0;
    if (r->n - r->at < k) {
        r->need = 1;
        return 0;
    }
    return 1;
}

static uint64_t rd_u64(rd *r)
{
    uint64_t v = 0;
    if (rd_has(r, 8)) {
        memcpy(&v, r->p + r->at, 8);
        r->at += 8;
    }
    return v;
}

static uint32_t rd_u32(rd *r)
{
    uint32_t v = 0;
    if (rd_has(r, 4)) {
        memcpy(&v, r->p + r->at, 4);
        r->at += 4;
    }
    return v;
}

/* A string of at most max bytes: its bytes (inside the input) or NULL. */
static const unsigned char *rd_str(rd *r, size_t max, size_t *len)
{
    uint64_t l = rd_u64(r);
    if (r->need || r->bad)
        return NULL;
    if (l > max) {
        r->bad = 1;
        return NULL;
    }
    if (!rd_has(r, (size_t)l))
        return NULL;
    const unsigned char *b = r->p + r->at;
    r->at += (size_t)l;
    *len = (size_t)l;
    return b;
}

/* A count of keys (CHECK, WAIT, MULTI_*), bounded. */
static size_t rd_count(rd *r, size_t max)
{
    uint64_t n = rd_u64(r);
    if (!r->need && !r->bad && n > max)
        r->bad = 1;
    return r->need || r->bad ? 0 : (size_t)n;
}

/* ---- keys ---------------------------------------------------------------- */

static st_kv *kv_find(p3d_store *s, const void *k, size_t kl)
{
    for (size_t i = 0; i < s->nkv; i++)
        if (s->kv[i].klen == kl && !memcmp(s->kv[i].key, k, kl))
            return &s->kv[i];
    return NULL;
}

/* Sets key k to v (v may be NULL with vl 0). 0, or -1 when a bound or
 * memory refuses it (nothing changed). */
static int kv_set(p3d_store *s, const void *k, size_t kl, const void *v, size_t vl)
{
    st_kv *e = kv_find(s, k, kl);
    size_t old = e ? e->vlen : 0, add = e ? 0 : kl;
    if (s->bytes - old + add + vl > s->lim.bytes_max || (!e && s->nkv >= s->lim.keys_max))
        return -1;
    unsigned char *nv = malloc(vl ? vl : 1);
    if (!nv)
        return -1;
    if (vl)
        memcpy(nv, v, vl);
    if (!e) {
        if (s->nkv == s->capkv) {
            size_t cap = s->capkv ? 2 * s->capkv : 64;
            st_kv *g = realloc(s->kv, cap * sizeof *g);
            if (!g) {
                free(nv);
                return -1;
            }
            s->kv = g;
            s->capkv = cap;
        }
        char *nk = malloc(kl ? kl : 1);
        if (!nk) {
            free(nv);
            return -1;
        }
        if (kl)
            memcpy(nk, k, kl);
        e = &s->kv[s->nkv++];
        *e = (st_kv){.key = nk, .klen = kl};
    }
    free(e->val);
    e->val = nv;
    e->vlen = vl;
    s->bytes = s->bytes - old + add + vl;
    return 0;
}

static int kv_delete(p3d_store *s, const void *k, size_t kl)
{
    st_kv *e = kv_find(s, k, kl);
    if (!e)
        return 0;
    s->bytes -= e->klen + e->vlen;
    free(e->key);
    free(e->val);
    *e = s->kv[--s->nkv];
    return 1;
}

/* ---- replies ------------------------------------------------------------- */

/* Queues n bytes for c; past its bound (or out of memory) c is dead. */
static void out_put(st_client *c, const void *b, size_t n)
{
    if (c->dead)
        return;
    if (c->outlen - c->outoff + n > c->s->lim.out_max || c->s->held + n > c->s->lim.held_max) {
        c->dead = 1;
        return;
    }
    if (c->outoff && c->outoff == c->outlen)
        c->outoff = c->outlen = 0;
    if (c->outlen + n > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 256;
        while (cap < c->outlen + n)
            cap *= 2;
        unsigned char *g = realloc(c->out, cap);
        if (!g) {
            c->dead = 1;
            return;
        }
        c->out = g;
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, b, n);
    c->outlen += n;
    c->s->held += n;
}

static void out_u8(st_client *c, unsigned char v)
{
    out_put(c, &v, 1);
}
static void out_i64(st_client *c, int64_t v)
{
    out_put(c, &v, 8);
}
static void out_str(st_client *c, const void *b, size_t n)
{
    uint64_t l = n;
    out_put(c, &l, 8);
    out_put(c, b, n);
}

static void told(st_client *c)
{
    if (c->s->on_output)
        c->s->on_output(c->s, c->id);
}

static void wait_clear(st_client *c)
{
    for (size_t i = 0; i < c->nwait; i++)
        free(c->wkeys[i]);
    free(c->wkeys);
    free(c->wlens);
    c->wkeys = NULL;
    c->wlens = NULL;
    c->nwait = 0;
    c->waiting = 0;
}

/* A key came: every WAIT whose keys are all there now is answered. */
static void wake(p3d_store *s)
{
    for (size_t i = 0; i < s->ncl; i++) {
        st_client *c = s->cl[i];
        if (!c || !c->waiting)
            continue;
        size_t k = 0;
        while (k < c->nwait && kv_find(s, c->wkeys[k], c->wlens[k]))
            k++;
        if (k < c->nwait)
            continue;
        wait_clear(c);
        out_u8(c, WAIT_STOP);
        told(c);
    }
}

/* ---- the queries: each decodes its arguments, and acts only when act -- */

/* A decimal int64 as ADD keeps it (torch reads it back with stoll). */
static int parse_i64(const unsigned char *b, size_t n, int64_t *v)
{
    char t[24];
    if (n == 0 || n >= sizeof t)
        return -1;
    memcpy(t, b, n);
    t[n] = 0;
    char *end;
    errno = 0;
    long long x = strtoll(t, &end, 10);
    if (errno || *end || end == t)
        return -1;
    *v = x;
    return 0;
}

static int q_set(st_client *c, rd *r, int act)
{
    size_t kl = 0, vl = 0;
    const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
    const unsigned char *v = rd_str(r, c->s->lim.value_max, &vl);
    if (!act || !k || !v)
        return 0;
    if (kv_set(c->s, k, kl, v, vl) < 0)
        return -1;
    wake(c->s);
    return 0;
}

/* COMPARE_SET as torch: a missing key is set only when expected is empty;
 * the reply is the value now (or, missing and not set, expected). */
static int q_cset(st_client *c, rd *r, int act)
{
    size_t kl = 0, el = 0, dl = 0;
    const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
    const unsigned char *ex = rd_str(r, c->s->lim.value_max, &el);
    const unsigned char *de = rd_str(r, c->s->lim.value_max, &dl);
    if (!act || !k || !ex || !de)
        return 0;
    st_kv *e = kv_find(c->s, k, kl);
    if (!e && el) {
        out_str(c, ex, el);
        return 0;
    }
    if (!e || (e->vlen == el && !memcmp(e->val, ex, el))) {
        if (kv_set(c->s, k, kl, de, dl) < 0)
            return -1;
        wake(c->s);
        e = kv_find(c->s, k, kl);
    }
    out_str(c, e->val, e->vlen);
    return 0;
}

/* GET of a missing key: torch's clients WAIT first; one that does not
 * breaks the protocol (torch's own server fails the connection too). */
static int q_get(st_client *c, rd *r, int act)
{
    size_t kl = 0;
    const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
    if (!act || !k)
        return 0;
    st_kv *e = kv_find(c->s, k, kl);
    if (!e)
        return -1;
    out_str(c, e->val, e->vlen);
    return 0;
}

static int q_add(st_client *c, rd *r, int act)
{
    size_t kl = 0;
    const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
    int64_t d = (int64_t)rd_u64(r), v = 0;
    if (!act || !k)
        return 0;
    st_kv *e = kv_find(c->s, k, kl);
    if (e && parse_i64(e->val, e->vlen, &v) < 0)
        return -1;
    if (__builtin_add_overflow(v, d, &v))
        return -1;
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", (long long)v);
    if (kv_set(c->s, k, kl, t, (size_t)n) < 0)
        return -1;
    out_i64(c, v);
    wake(c->s);
    return 0;
}

/* CHECK and WAIT: a count, then the keys. */
static int q_keys(st_client *c, rd *r, int act, int wait)
{
    size_t n = rd_count(r, c->s->lim.args_max), have = 0;
    for (size_t i = 0; i < n && !r->need && !r->bad; i++) {
        size_t kl = 0;
        const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
        if (k && act && kv_find(c->s, k, kl))
            have++;
    }
    if (!act || r->need || r->bad)
        return 0;
    if (!wait) {
        out_u8(c, have == n ? CHECK_READY : CHECK_NOT_READY);
        return 0;
    }
    if (have == n) {
        out_u8(c, WAIT_STOP);
        return 0;
    }
    if (c->waiting) /* torch waits for one WAIT at a time */
        return -1;
    /* remember the keys (decoded again: the first pass kept nothing) */
    rd again = {.p = r->p, .n = r->n, .at = 1};
    (void)rd_u64(&again);
    c->wkeys = calloc(n, sizeof *c->wkeys);
    c->wlens = calloc(n, sizeof *c->wlens);
    if (!c->wkeys || !c->wlens)
        return -1;
    c->waiting = 1;
    for (size_t i = 0; i < n; i++) {
        size_t kl = 0;
        const unsigned char *k = rd_str(&again, c->s->lim.key_max, &kl);
        c->wkeys[c->nwait] = malloc(kl ? kl : 1);
        if (!c->wkeys[c->nwait])
            return -1;
        memcpy(c->wkeys[c->nwait], k, kl);
        c->wlens[c->nwait++] = kl;
    }
    return 0;
}

static int q_delete(st_client *c, rd *r, int act)
{
    size_t kl = 0;
    const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
    if (act && k)
        out_i64(c, kv_delete(c->s, k, kl));
    return 0;
}

static int q_append(st_client *c, rd *r, int act)
{
    size_t kl = 0, vl = 0;
    const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
    const unsigned char *v = rd_str(r, c->s->lim.value_max, &vl);
    if (!act || !k || !v)
        return 0;
    st_kv *e = kv_find(c->s, k, kl);
    size_t old = e ? e->vlen : 0;
    if (old + vl > c->s->lim.value_max)
        return -1;
    unsigned char *t = malloc(old + vl + 1);
    if (!t)
        return -1;
    if (old)
        memcpy(t, e->val, old);
    memcpy(t + old, v, vl);
    int rc = kv_set(c->s, k, kl, t, old + vl);
    free(t);
    if (rc == 0)
        wake(c->s);
    return rc;
}

/* MULTI_GET (a count, the keys; every key must be there, as for GET) and
 * MULTI_SET (a count, then key and value pairs). */
static int q_multi(st_client *c, rd *r, int act, int set)
{
    size_t n = rd_count(r, c->s->lim.args_max);
    for (size_t i = 0; i < n && !r->need && !r->bad; i++) {
        size_t kl = 0, vl = 0;
        const unsigned char *k = rd_str(r, c->s->lim.key_max, &kl);
        const unsigned char *v = set ? rd_str(r, c->s->lim.value_max, &vl) : NULL;
        if (!act || !k || (set && !v))
            continue;
        st_kv *e = set ? NULL : kv_find(c->s, k, kl);
        if (set ? kv_set(c->s, k, kl, v, vl) < 0 : !e)
            return -1;
        if (!set)
            out_str(c, e->val, e->vlen);
    }
    if (act && set && !r->need && !r->bad)
        wake(c->s);
    return 0;
}

/* One query from the start of c's input: 1 served (*used bytes), 0 not
 * complete yet, -1 drop the client. */
static int serve_one(st_client *c, size_t *used)
{
    const unsigned char *ops = c->ver == 2 ? v2_ops : v1_ops;
    size_t nops = c->ver == 2 ? sizeof v2_ops : sizeof v1_ops;
    int op = c->in[0] < nops ? ops[c->in[0]] : OP_BAD;
    for (int act = 0; act < 2; act++) {
        rd r = {.p = c->in, .n = c->inlen, .at = 1};
        int rc = 0;
        switch (op) {
        case OP_VALIDATE:
            if (rd_u32(&r) != V2_MAGIC && !r.need)
                r.bad = 1;
            break;
        case OP_SET: rc = q_set(c, &r, act); break;
        case OP_CSET: rc = q_cset(c, &r, act); break;
        case OP_GET: rc = q_get(c, &r, act); break;
        case OP_ADD: rc = q_add(c, &r, act); break;
        case OP_CHECK: rc = q_keys(c, &r, act, 0); break;
        case OP_WAIT: rc = q_keys(c, &r, act, 1); break;
        case OP_NUMKEYS:
            if (act)
                out_i64(c, (int64_t)c->s->nkv);
            break;
        case OP_DELETE: rc = q_delete(c, &r, act); break;
        case OP_APPEND: rc = q_append(c, &r, act); break;
        case OP_MGET: rc = q_multi(c, &r, act, 0); break;
        case OP_MSET: rc = q_multi(c, &r, act, 1); break;
        case OP_CANCEL:
            if (act) {
                wait_clear(c);
                out_u8(c, WAIT_CANCELED);
            }
            break;
        case OP_PING: {
            uint32_t nonce = rd_u32(&r);
            if (act)
                out_put(c, &nonce, 4);
            break;
        }
        default: r.bad = 1;
        }
        if (r.bad || rc < 0)
            return -1;
        if (r.need)
            return 0;
        *used = r.at;
    }
    return 1;
}

/* torch 2.x opens with VALIDATE (0) and the magic; torch 1.x has no
 * handshake and its query 0 is SET, whose u64 key length would have to be
 * over a GiB to look like the magic (above any key_max). */
static int detect(st_client *c)
{
    if (c->in[0] != 0) {
        c->ver = 1;
        return 1;
    }
    if (c->inlen < 5)
        return 0;
    uint32_t m;
    memcpy(&m, c->in + 1, 4);
    c->ver = m == V2_MAGIC ? 2 : 1;
    return 1;
}

/* ---- clients ------------------------------------------------------------- */

static st_client *client(const p3d_store *s, int id)
{
    return id >= 0 && (size_t)id < s->ncl ? s->cl[id] : NULL;
}

int p3d_store_client_new(p3d_store *s, int fd)
{
    if (s->nlive >= s->lim.clients_max)
        return -1;
    size_t id = 0;
    while (id < s->ncl && s->cl[id])
        id++;
    if (id == s->ncl && s->ncl == s->capcl) {
        size_t cap = s->capcl ? 2 * s->capcl : 16;
        st_client **g = realloc(s->cl, cap * sizeof *g);
        if (!g)
            return -1;
        s->cl = g;
        s->capcl = cap;
    }
    st_client *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    *c = (st_client){.s = s, .id = (int)id, .fd = fd};
    if (id == s->ncl)
        s->ncl++;
    s->cl[id] = c;
    s->nlive++;
    return (int)id;
}

void p3d_store_client_drop(p3d_store *s, int id)
{
    st_client *c = client(s, id);
    if (!c)
        return;
    if (c->fd >= 0) {
        if (s->loop)
            p3d_loop_unwatch(s->loop, c->fd);
        close(c->fd);
    }
    wait_clear(c);
    s->held -= c->inlen + (c->outlen - c->outoff);
    free(c->in);
    free(c->out);
    free(c);
    s->cl[id] = NULL;
    s->nlive--;
}

int p3d_store_input(p3d_store *s, int id, const void *buf, size_t len)
{
    st_client *c = client(s, id);
    if (!c || c->dead || s->held + len > s->lim.held_max)
        return -1;
    if (c->inlen + len > c->incap) {
        size_t cap = c->incap ? c->incap : 4096;
        while (cap < c->inlen + len)
            cap *= 2;
        unsigned char *g = realloc(c->in, cap);
        if (!g)
            return -1;
        c->in = g;
        c->incap = cap;
    }
    if (len)
        memcpy(c->in + c->inlen, buf, len);
    c->inlen += len;
    s->held += len;
    int rc = 0;
    while (c->inlen > 0 && !c->dead) {
        size_t used = 0;
        int r = c->ver ? 1 : detect(c);
        if (r > 0)
            r = serve_one(c, &used);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0)
            break;
        memmove(c->in, c->in + used, c->inlen - used);
        c->inlen -= used;
        s->held -= used;
    }
    if (c->inlen > s->lim.msg_max || c->dead)
        rc = -1;
    return rc;
}

const unsigned char *p3d_store_output(const p3d_store *s, int id, size_t *len)
{
    st_client *c = client(s, id);
    *len = c ? c->outlen - c->outoff : 0;
    return *len ? c->out + c->outoff : NULL;
}

void p3d_store_sent(p3d_store *s, int id, size_t n)
{
    st_client *c = client(s, id);
    if (!c)
        return;
    size_t k = n <= c->outlen - c->outoff ? n : c->outlen - c->outoff;
    c->outoff += k;
    s->held -= k;
    if (c->outoff == c->outlen)
        c->outoff = c->outlen = 0;
}

int p3d_store_client_version(const p3d_store *s, int id)
{
    st_client *c = client(s, id);
    return c ? c->ver : 0;
}

/* ---- the store ----------------------------------------------------------- */

p3d_store *p3d_store_new(const p3d_store_limits *lim)
{
    p3d_store *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->lim = lim ? *lim : p3d_store_default_limits();
    s->lfd = -1;
    return s;
}

static void drop_keys(p3d_store *s)
{
    for (size_t i = 0; i < s->nkv; i++) {
        free(s->kv[i].key);
        free(s->kv[i].val);
    }
    s->nkv = 0;
    s->bytes = 0;
}

void p3d_store_generation(p3d_store *s, int gen)
{
    if (!s || gen == s->gen)
        return;
    s->gen = gen;
    drop_keys(s);
    for (size_t i = 0; i < s->ncl; i++)
        p3d_store_client_drop(s, (int)i);
}

void p3d_store_free(p3d_store *s)
{
    if (!s)
        return;
    drop_keys(s);
    for (size_t i = 0; i < s->ncl; i++)
        p3d_store_client_drop(s, (int)i);
    if (s->lfd >= 0) {
        if (s->loop)
            p3d_loop_unwatch(s->loop, s->lfd);
        close(s->lfd);
    }
    free(s->kv);
    free(s->cl);
    free(s);
}

size_t p3d_store_nkeys(const p3d_store *s)
{
    return s->nkv;
}
size_t p3d_store_nclients(const p3d_store *s)
{
    return s->nlive;
}
