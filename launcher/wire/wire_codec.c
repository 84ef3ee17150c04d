/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_codec.c — the rendezvous wire format (wire.h): building and reading
 * frame bodies, the HELLO and PLACE messages, the node record (the frame's
 * tag and its travel are wire_frame.c's). Decoders are pure functions over a byte
 * range: every count is checked against the bytes left before anything is
 * allocated, so they can be fuzzed and a hostile peer costs an error.
 */
#include "wire.h"

#include "loop.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- encoding ------------------------------------------------------------ */

static void wb_reserve(p3d_wbuf *b, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

void p3d_wbuf_bytes(p3d_wbuf *b, const void *p, size_t n)
{
    wb_reserve(b, n);
    if (b->oom)
        return;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

void p3d_wbuf_u32(p3d_wbuf *b, uint32_t v)
{
    unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    p3d_wbuf_bytes(b, x, 4);
}

void p3d_wbuf_u64(p3d_wbuf *b, uint64_t v)
{
    p3d_wbuf_u32(b, (uint32_t)(v >> 32));
    p3d_wbuf_u32(b, (uint32_t)v);
}

static void wb_blob(p3d_wbuf *b, const void *p, size_t n)
{
    if (n > P3D_WIRE_MAX) {
        b->oom = 1;
        return;
    }
    p3d_wbuf_u32(b, (uint32_t)n);
    p3d_wbuf_bytes(b, p, n);
}

void p3d_wbuf_str(p3d_wbuf *b, const char *s)
{
    wb_blob(b, s ? s : "", s ? strlen(s) : 0);
}

/* The frame's length field sits at the start of the buffer; one buffer
 * holds one frame. */
void p3d_wbuf_begin(p3d_wbuf *b, int type)
{
    b->len = 0;
    p3d_wbuf_u32(b, 0);
    unsigned char t = (unsigned char)type;
    p3d_wbuf_bytes(b, &t, 1);
}

int p3d_wbuf_end(p3d_wbuf *b)
{
    if (b->oom || b->len < P3D_FRAME_HDR || b->len - 4 > P3D_WIRE_MAX)
        return -1;
    uint32_t n = (uint32_t)(b->len - 4);
    b->p[0] = (unsigned char)(n >> 24);
    b->p[1] = (unsigned char)(n >> 16);
    b->p[2] = (unsigned char)(n >> 8);
    b->p[3] = (unsigned char)n;
    return 0;
}

void p3d_wbuf_free(p3d_wbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- decoding ------------------------------------------------------------ */

uint32_t p3d_rbuf_u32(p3d_rbuf *r)
{
    if (r->bad || r->len - r->off < 4) {
        r->bad = 1;
        return 0;
    }
    const unsigned char *x = r->p + r->off;
    r->off += 4;
    return (uint32_t)x[0] << 24 | (uint32_t)x[1] << 16 | (uint32_t)x[2] << 8 | x[3];
}

uint64_t p3d_rbuf_u64(p3d_rbuf *r)
{
    uint64_t hi = p3d_rbuf_u32(r);
    return hi << 32 | p3d_rbuf_u32(r);
}

const unsigned char *p3d_rbuf_blob(p3d_rbuf *r, size_t max, size_t *n)
{
    uint32_t k = p3d_rbuf_u32(r);
    *n = 0;
    if (r->bad || k > max || r->len - r->off < k) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *p = r->p + r->off;
    r->off += k;
    *n = k;
    return p;
}

char *p3d_rbuf_str(p3d_rbuf *r, size_t max)
{
    size_t n;
    const unsigned char *p = p3d_rbuf_blob(r, max, &n);
    if (!p || memchr(p, 0, n)) {
        r->bad = 1;
        return NULL;
    }
    char *s = malloc(n + 1);
    if (!s) {
        r->bad = 1;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* A signed int sent as u32 (two's complement); -1 is common. */
static int rb_int(p3d_rbuf *r, int lo, int hi)
{
    int32_t v = (int32_t)p3d_rbuf_u32(r);
    if (v < lo || v > hi) {
        r->bad = 1;
        return lo;
    }
    return v;
}

static void wb_int(p3d_wbuf *b, int v)
{
    p3d_wbuf_u32(b, (uint32_t)(int32_t)v);
}

int p3d_rbuf_int(p3d_rbuf *r, int lo, int hi)
{
    return rb_int(r, lo, hi);
}
void p3d_wbuf_int(p3d_wbuf *b, int v)
{
    wb_int(b, v);
}

static void rb_fixed(p3d_rbuf *r, char *dst, size_t cap)
{
    char *s = p3d_rbuf_str(r, cap - 1);
    if (s)
        memcpy(dst, s, strlen(s) + 1);
    free(s);
}

static double rb_double(p3d_rbuf *r)
{
    uint64_t u = p3d_rbuf_u64(r);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static void wb_double(p3d_wbuf *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    p3d_wbuf_u64(b, u);
}

/* ---- node record --------------------------------------------------------- */

#define STR_MAX 4096 /* names, PCI ids, cpusets */
#define NOTES_MAX (1u << 20)
#define MAX_GPUS 4096 /* as p3d_node_alloc */

void p3d_node_encode(const p3d_node *n, p3d_wbuf *b)
{
    int g = n->ngpus, k = n->nnics;
    p3d_wbuf_str(b, n->hostname);
    p3d_wbuf_str(b, n->source);
    p3d_wbuf_str(b, n->source_kind);
    wb_int(b, g);
    wb_int(b, k);
    wb_int(b, n->nnuma);
    wb_int(b, n->npackages);
    wb_int(b, n->ncores);
    wb_int(b, n->npus);
    for (int i = 0; i < g; i++) {
        const p3d_gpu *x = &n->gpus[i];
        p3d_wbuf_str(b, x->pci);
        p3d_wbuf_str(b, x->model);
        p3d_wbuf_str(b, x->osdev);
        wb_int(b, x->numa);
        wb_int(b, x->package);
        p3d_wbuf_str(b, x->cpus);
        p3d_wbuf_u64(b, x->mem_bytes);
        /* what an allocation made of it (alloc.c): the ranks' P3D_GPU_PHYS
         * and CUDA_VISIBLE_DEVICES entry after a record went through here */
        wb_int(b, x->phys);
        p3d_wbuf_str(b, x->visible);
    }
    for (int j = 0; j < k; j++) {
        p3d_wbuf_str(b, n->nics[j].name);
        p3d_wbuf_str(b, n->nics[j].pci);
        p3d_wbuf_str(b, n->nics[j].kind);
        wb_int(b, n->nics[j].numa);
    }
    for (size_t i = 0; i < (size_t)g * (size_t)g; i++)
        wb_double(b, n->nvlink[i]);
    p3d_wbuf_bytes(b, n->gg_class, (size_t)g * (size_t)g);
    p3d_wbuf_bytes(b, n->gn_class, (size_t)g * (size_t)k);
    p3d_wbuf_str(b, n->fabric_uuid);
    wb_int(b, n->fabric_clique);
    p3d_wbuf_str(b, n->notes);
    p3d_wbuf_str(b, n->hash);
}

p3d_node *p3d_node_decode(p3d_rbuf *r, char **err)
{
    p3d_node *n = calloc(1, sizeof *n);
    char *notes = NULL, *hash = NULL, *e = NULL;
    if (!n) {
        p3d_err(err, "out of memory");
        return NULL;
    }
    n->hostname = p3d_rbuf_str(r, STR_MAX);
    n->source = p3d_rbuf_str(r, STR_MAX);
    n->source_kind = p3d_rbuf_str(r, STR_MAX);
    int g = rb_int(r, 0, MAX_GPUS), k = rb_int(r, 0, MAX_GPUS);
    n->nnuma = rb_int(r, 0, 1 << 20);
    n->npackages = rb_int(r, 0, 1 << 20);
    n->ncores = rb_int(r, 0, 1 << 24);
    n->npus = rb_int(r, 0, 1 << 24);
    if (r->bad)
        goto bad;
    /* Each GPU needs at least 44 bytes, each NIC 16, each matrix entry 9:
     * refuse counts the remaining bytes cannot hold before allocating. */
    size_t left = r->len - r->off, gg = (size_t)g * (size_t)g, gk = (size_t)g * (size_t)k;
    if ((size_t)g * 44 + (size_t)k * 16 + gg * 9 + gk > left)
        goto bad;
    n->gpus = calloc(g ? (size_t)g : 1, sizeof *n->gpus);
    n->nics = calloc(k ? (size_t)k : 1, sizeof *n->nics);
    n->nvlink = calloc(gg ? gg : 1, sizeof *n->nvlink);
    n->gg_class = malloc(gg ? gg : 1);
    n->gn_class = malloc(gk ? gk : 1);
    if (!n->gpus || !n->nics || !n->nvlink || !n->gg_class || !n->gn_class) {
        p3d_err(err, "out of memory");
        goto fail;
    }
    n->ngpus = g;
    n->nnics = k;
    for (int i = 0; i < g; i++) {
        p3d_gpu *x = &n->gpus[i];
        x->index = i;
        rb_fixed(r, x->pci, sizeof x->pci);
        rb_fixed(r, x->model, sizeof x->model);
        rb_fixed(r, x->osdev, sizeof x->osdev);
        x->numa = rb_int(r, -1, 1 << 20);
        x->package = rb_int(r, -1, 1 << 20);
        x->cpus = p3d_rbuf_str(r, 1 << 20);
        x->mem_bytes = p3d_rbuf_u64(r);
        x->phys = rb_int(r, 0, MAX_GPUS - 1);
        rb_fixed(r, x->visible, sizeof x->visible);
        x->nearest_nic = x->domain = -1;
    }
    for (int j = 0; j < k; j++) {
        rb_fixed(r, n->nics[j].name, sizeof n->nics[j].name);
        rb_fixed(r, n->nics[j].pci, sizeof n->nics[j].pci);
        rb_fixed(r, n->nics[j].kind, sizeof n->nics[j].kind);
        n->nics[j].numa = rb_int(r, -1, 1 << 20);
    }
    for (size_t i = 0; i < gg; i++)
        n->nvlink[i] = rb_double(r);
    if (gg) {
        if (r->len - r->off < gg)
            goto bad;
        memcpy(n->gg_class, r->p + r->off, gg);
        r->off += gg;
    }
    if (gk) {
        if (r->len - r->off < gk)
            goto bad;
        memcpy(n->gn_class, r->p + r->off, gk);
        r->off += gk;
    }
    char *fu = p3d_rbuf_str(r, STR_MAX);
    if (fu && *fu)
        n->fabric_uuid = fu;
    else
        free(fu);
    n->fabric_clique = rb_int(r, -1, 1 << 30);
    notes = p3d_rbuf_str(r, NOTES_MAX);
    hash = p3d_rbuf_str(r, 16);
    if (r->bad)
        goto bad;
    /* Re-derive domains, nearest NICs and the hash here: the leader places
     * on what it computed, and a record whose facts do not give the hash
     * the agent computed (another par3drun build, a corrupted record) is
     * refused rather than placed on. */
    if (p3d_node_finish(n, &e) < 0) {
        p3d_err(err, "node record of %s: %s", n->hostname ? n->hostname : "?", e ? e : "invalid");
        goto fail;
    }
    if (strcmp(n->hash, hash) != 0) {
        p3d_err(err,
                "node record of %s: topology hash %s computed here, the agent sent %s "
                "(different par3drun builds?)",
                n->hostname ? n->hostname : "?", n->hash, hash);
        goto fail;
    }
    /* the agent's notes already include the ones finish() just added again */
    free(n->notes);
    n->notes = notes && *notes ? notes : NULL;
    if (!n->notes)
        free(notes);
    notes = NULL;
    free(hash);
    free(e);
    return n;
bad:
    p3d_err(err, "malformed node record");
fail:
    free(notes);
    free(hash);
    free(e);
    p3d_node_free(n);
    return NULL;
}

/* ---- HELLO ----------------------------------------------------------------- */

int p3d_hello_encode(const p3d_hello *h, p3d_wbuf *b)
{
    p3d_wbuf_begin(b, P3D_MSG_HELLO);
    p3d_wbuf_u32(b, h->proto);
    p3d_wbuf_str(b, h->version);
    p3d_wbuf_str(b, h->job_id);
    wb_int(b, h->nnodes);
    wb_int(b, h->node_rank);
    p3d_wbuf_str(b, h->hostname);
    p3d_wbuf_str(b, h->addr);
    wb_int(b, h->master_port);
    wb_int(b, h->nccl_port);
    if (h->topo)
        p3d_node_encode(h->topo, b);
    if (h->rack && h->rack[0])
        p3d_wbuf_str(b, h->rack);
    return p3d_wbuf_end(b);
}

int p3d_hello_decode(const unsigned char *body, size_t len, p3d_hello *h, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    char *e = NULL;
    memset(h, 0, sizeof *h);
    h->proto = p3d_rbuf_u32(&r);
    h->version = p3d_rbuf_str(&r, 64);
    /* proto and version first: an agent of another version gets told so
     * even when the rest of its HELLO is laid out differently */
    if (r.bad || h->proto != P3D_WIRE_PROTO)
        return r.bad ? p3d_err(err, "malformed HELLO") : 0;
    h->job_id = p3d_rbuf_str(&r, 127);
    h->nnodes = rb_int(&r, 1, 1 << 20);
    h->node_rank = rb_int(&r, 0, (1 << 20) - 1);
    h->hostname = p3d_rbuf_str(&r, 255);
    h->addr = p3d_rbuf_str(&r, 255);
    h->master_port = rb_int(&r, 0, 65535);
    h->nccl_port = rb_int(&r, 0, 65535);
    if (r.bad)
        return p3d_err(err, "malformed HELLO");
    h->topo = p3d_node_decode(&r, &e);
    if (!h->topo) {
        p3d_err(err, "HELLO of node rank %d (%s): %s", h->node_rank, h->hostname, e ? e : "bad node record");
        free(e);
        return -1;
    }
    if (r.off < r.len) { /* the rack, when the agent knew one */
        h->rack = p3d_rbuf_str(&r, 255);
        if (r.bad)
            return p3d_err(err, "HELLO of node rank %d: malformed rack name", h->node_rank);
    }
    if (r.off != r.len)
        return p3d_err(err, "HELLO of node rank %d: %zu trailing bytes", h->node_rank, r.len - r.off);
    return 0;
}

void p3d_hello_free(p3d_hello *h)
{
    free(h->version);
    free(h->job_id);
    free(h->hostname);
    free(h->addr);
    free(h->rack);
    p3d_node_free(h->topo);
    memset(h, 0, sizeof *h);
}

/* ---- PLACE ----------------------------------------------------------------- */

void p3d_mesh_encode(p3d_wbuf *b, const p3d_placement *pl)
{
    p3d_wbuf_str(b, pl->policy);
    p3d_wbuf_str(b, pl->policy_source);
    p3d_wbuf_str(b, pl->mesh.order_str);
    for (int d = 0; d < P3D_NDIMS; d++) {
        wb_int(b, pl->mesh.size[d]);
        wb_int(b, pl->mesh.order[d]);
    }
    wb_int(b, pl->mesh.rules);
    wb_int(b, pl->world);
}

int p3d_mesh_decode(p3d_rbuf *r, p3d_placement *pl)
{
    pl->policy = p3d_rbuf_str(r, STR_MAX);
    pl->policy_source = p3d_rbuf_str(r, STR_MAX);
    rb_fixed(r, pl->mesh.order_str, sizeof pl->mesh.order_str);
    for (int d = 0; d < P3D_NDIMS; d++) {
        pl->mesh.size[d] = rb_int(r, 1, 1 << 24);
        pl->mesh.order[d] = rb_int(r, 0, P3D_NDIMS - 1);
    }
    pl->mesh.rules = rb_int(r, P3D_RULES_MEGATRON, P3D_RULES_DEVICEMESH);
    /* both grids (p3d/job.h) must describe the same world; each product
     * is bounded before the mesh code multiplies it in int/long long (four
     * sizes of 2^24 would overflow) */
    static const int grid[2][4] = {{P3D_DIM_TP, P3D_DIM_CP, P3D_DIM_DP, P3D_DIM_PP},
                                   {P3D_DIM_ETP, P3D_DIM_EDP, P3D_DIM_EP, P3D_DIM_PP}};
    for (int g = 0; g < 2 && !r->bad; g++) {
        long long prod = 1;
        for (int i = 0; i < 4 && !r->bad; i++) {
            int v = pl->mesh.size[grid[g][i]];
            prod *= v > 1 ? v : 1;
            if (prod > 1 << 24)
                r->bad = 1;
        }
    }
    p3d_mesh check = pl->mesh;
    char *merr = NULL;
    int world = r->bad ? -1 : p3d_mesh_world(&pl->mesh);
    if (world > 0 && (p3d_mesh_set_order(&check, pl->mesh.order_str, &merr) < 0 ||
                      p3d_mesh_resolve(&check, &merr) < 0 || memcmp(&check, &pl->mesh, sizeof check) != 0))
        world = -1;
    free(merr);
    pl->world = rb_int(r, 1, 1 << 24);
    if (r->bad || world <= 0 || pl->world != world) {
        r->bad = 1;
        return -1;
    }
    return world;
}

int p3d_width_ok(int full_dp, int min_dp, const p3d_placement *pl)
{
    int dp = p3d_mesh_size(&pl->mesh, P3D_DIM_DP);
    return full_dp ? min_dp <= full_dp && dp <= full_dp && dp >= min_dp : !min_dp;
}

void p3d_wbatch_encode(p3d_wbuf *b, const p3d_wbatch *w)
{
    wb_int(b, w->global);
    wb_int(b, w->micro);
    wb_int(b, w->micros);
    wb_int(b, w->tol_mpct);
}

void p3d_wbatch_decode(p3d_rbuf *r, p3d_wbatch *w)
{
    w->global = rb_int(r, 0, 1 << 30);
    w->micro = rb_int(r, 0, 1 << 30);
    w->micros = rb_int(r, 0, 1 << 30);
    w->tol_mpct = rb_int(r, 0, 100000); /* --batch-tolerance: 0..100 % */
}

int p3d_place_encode(const p3d_place_msg *m, p3d_wbuf *b)
{
    const p3d_placement *pl = m->pl;
    p3d_wbuf_begin(b, P3D_MSG_PLACE);
    p3d_wbuf_str(b, m->job_id);
    p3d_wbuf_str(b, m->master_addr);
    wb_int(b, m->master_port);
    wb_int(b, m->nccl_port);
    wb_int(b, m->full_dp);
    wb_int(b, m->min_dp);
    p3d_wbatch_encode(b, &m->batch);
    wb_int(b, m->fault_ms);
    wb_int(b, m->nnodes);
    for (int i = 0; i < m->nnodes; i++) {
        p3d_wbuf_str(b, m->names[i]);
        p3d_wbuf_str(b, m->hashes[i]);
    }
    p3d_mesh_encode(b, pl);
    for (int q = 0; q < pl->world; q++) {
        const p3d_rank *k = &pl->ranks[q];
        wb_int(b, k->node);
        wb_int(b, k->gpu);
        wb_int(b, k->local_rank);
        for (int d = 0; d < P3D_NDIMS; d++)
            wb_int(b, k->coord[d]);
    }
    wb_blob(b, m->json, m->json_len);
    return p3d_wbuf_end(b);
}

int p3d_place_decode(const unsigned char *body, size_t len, p3d_place_msg *m, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    memset(m, 0, sizeof *m);
    m->job_id = p3d_rbuf_str(&r, 127);
    m->master_addr = p3d_rbuf_str(&r, 255);
    m->master_port = rb_int(&r, 0, 65535);
    m->nccl_port = rb_int(&r, 0, 65535);
    m->full_dp = rb_int(&r, 0, 1 << 24);
    m->min_dp = rb_int(&r, 0, 1 << 24);
    p3d_wbatch_decode(&r, &m->batch);
    m->fault_ms = rb_int(&r, 0, P3D_FAULT_MS_MAX);
    int nn = rb_int(&r, 1, 1 << 20);
    if (r.bad || (size_t)nn * 8 > r.len - r.off)
        goto bad;
    m->names = calloc((size_t)nn, sizeof *m->names);
    m->hashes = calloc((size_t)nn, sizeof *m->hashes);
    m->pl = calloc(1, sizeof *m->pl);
    if (!m->names || !m->hashes || !m->pl)
        goto oom;
    m->nnodes = nn;
    for (int i = 0; i < nn; i++) {
        m->names[i] = p3d_rbuf_str(&r, 255);
        m->hashes[i] = p3d_rbuf_str(&r, 16);
    }
    p3d_placement *pl = m->pl;
    int world = p3d_mesh_decode(&r, pl);
    if (world < 0 || (size_t)world * 32 > r.len - r.off || !p3d_width_ok(m->full_dp, m->min_dp, pl))
        goto bad;
    pl->ranks = calloc((size_t)world, sizeof *pl->ranks);
    if (!pl->ranks)
        goto oom;
    for (int q = 0; q < world; q++) {
        p3d_rank *k = &pl->ranks[q];
        k->node = rb_int(&r, 0, nn - 1);
        k->gpu = rb_int(&r, 0, MAX_GPUS - 1);
        k->local_rank = rb_int(&r, 0, world - 1);
        for (int d = 0; d < P3D_NDIMS; d++)
            k->coord[d] = rb_int(&r, 0, pl->mesh.size[d] - 1);
    }
    size_t jn;
    const unsigned char *j = p3d_rbuf_blob(&r, P3D_WIRE_MAX, &jn);
    if (r.bad || !j || r.off != r.len)
        goto bad;
    m->json = malloc(jn + 1);
    if (!m->json)
        goto oom;
    memcpy(m->json, j, jn);
    m->json[jn] = 0;
    m->json_len = jn;
    return 0;
oom:
    p3d_place_msg_free(m);
    return p3d_err(err, "out of memory");
bad:
    p3d_place_msg_free(m);
    return p3d_err(err, "malformed PLACE message from the leader");
}

void p3d_place_msg_free(p3d_place_msg *m)
{
    for (int i = 0; i < m->nnodes; i++) {
        free(m->names ? m->names[i] : NULL);
        free(m->hashes ? m->hashes[i] : NULL);
    }
    free(m->names);
    free(m->hashes);
    free(m->job_id);
    free(m->master_addr);
    p3d_placement_free(m->pl);
    free(m->json);
    free(m->raw);
    memset(m, 0, sizeof *m);
}
