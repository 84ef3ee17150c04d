/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_cplace.c — the compact placement (CPLACE, wire.h): what the
 * leader sends down the distribution tree instead of the placement JSON.
 *
 * The JSON report (placement/report/report_json.c) is ~200 bytes a rank;
 * almost all of it is the "ranks" and "groups" arrays, which are a
 * function of: rank -> (node, GPU, local rank), the mesh, each node's
 * name, rack and NVLink domain, and the node topologies (NUMA node, NIC
 * and NVLink island of each GPU). So the message carries those (8 bytes a
 * rank, one record per distinct topology) plus the report's few head and
 * tail lines verbatim; every node renders the middle with the same
 * p3d_report_json the leader used and splices. The leader expands its own
 * message the same way and compares: when the bytes differ (a report
 * field this encoding does not carry), the JSON goes along verbatim
 * instead, so the result is byte-identical on every node either way.
 */
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CP_COMPACT 1
#define CP_VERBATIM 0

/* Where the report's middle (ranks and groups) starts and ends. */
static const char MARK_RANKS[] = "\n  \"ranks\": [\n";
static const char MARK_CHECKS[] = ",\n  \"checks\": ";

static int split_json(const char *json, size_t *head, size_t *tail_at)
{
    const char *r = strstr(json, MARK_RANKS);
    if (!r)
        return -1;
    const char *c = strstr(r, MARK_CHECKS);
    if (!c)
        return -1;
    *head = (size_t)(r - json) + 1; /* keeps the newline */
    *tail_at = (size_t)(c - json);
    return 0;
}

/* ---- varints and runs ---------------------------------------------------- */

static void wb_var(p3d_wbuf *b, uint64_t v)
{
    unsigned char x[10];
    int n = 0;
    do {
        x[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            x[n] |= 0x80;
        n++;
    } while (v);
    p3d_wbuf_bytes(b, x, (size_t)n);
}

static void wb_zig(p3d_wbuf *b, int64_t v)
{
    wb_var(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static uint64_t rb_var(p3d_rbuf *r)
{
    uint64_t v = 0;
    for (int sh = 0; sh < 64; sh += 7) {
        if (r->bad || r->off >= r->len) {
            r->bad = 1;
            return 0;
        }
        unsigned char c = r->p[r->off++];
        v |= (uint64_t)(c & 0x7f) << sh;
        if (!(c & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t rb_zig(p3d_rbuf *r)
{
    uint64_t u = rb_var(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* A name as prefix + decimal number (width: zero-padded digits, 0 none);
 * 0 when it does not end in a number that formats back to itself. */
static int name_split(const char *s, size_t *plen, unsigned long *num, int *width)
{
    size_t n = strlen(s), i = n;
    while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
        i--;
    if (i == n || n - i > 9)
        return 0;
    *plen = i;
    *num = strtoul(s + i, NULL, 10);
    *width = s[i] == '0' && n - i > 1 ? (int)(n - i) : 0;
    char back[16];
    snprintf(back, sizeof back, "%0*lu", *width, *num);
    return strcmp(back, s + i) == 0;
}

/* Node names as runs "prefix, first number, count, width" (node001..
 * node512 is one run); a name without a number is a run of count 0. */
static void enc_names(p3d_wbuf *b, const p3d_cluster *c)
{
    p3d_wbuf runs = {0};
    uint32_t nr = 0;
    for (size_t i = 0; i < c->nnodes;) {
        const char *s = c->nodes[i].name;
        size_t pl;
        unsigned long num;
        int w;
        nr++;
        if (!name_split(s, &pl, &num, &w)) {
            wb_var(&runs, strlen(s));
            p3d_wbuf_bytes(&runs, s, strlen(s));
            wb_var(&runs, 0);
            i++;
            continue;
        }
        size_t j = i + 1;
        for (; j < c->nnodes; j++) {
            const char *t = c->nodes[j].name;
            size_t pl2;
            unsigned long n2;
            int w2;
            if (!name_split(t, &pl2, &n2, &w2) || pl2 != pl || w2 != w || n2 != num + (j - i) || strncmp(s, t, pl))
                break;
        }
        wb_var(&runs, pl);
        p3d_wbuf_bytes(&runs, s, pl);
        wb_var(&runs, j - i);
        wb_var(&runs, num);
        wb_var(&runs, (uint64_t)w);
        i = j;
    }
    p3d_wbuf_u32(b, nr);
    p3d_wbuf_bytes(b, runs.p, runs.len);
    if (runs.oom)
        b->oom = 1;
    p3d_wbuf_free(&runs);
}

/* One run of equal steps between consecutive ranks. */
typedef struct rrun {
    int count;
    int d[3];
} rrun;
#define REPEAT_MAXL 8

static void enc_compact(const p3d_cplace_in *in, p3d_wbuf *b, size_t head, size_t tail_at)
{
    const p3d_cluster *c = in->cluster;
    const p3d_placement *pl = in->pl;
    size_t jl = strlen(in->json);
    p3d_wbuf_begin(b, P3D_MSG_CPLACE);
    p3d_wbuf_int(b, CP_COMPACT);
    p3d_wbuf_str(b, in->job_id);
    p3d_wbuf_str(b, in->master_addr);
    p3d_wbuf_int(b, in->master_port);
    p3d_wbuf_int(b, in->nccl_port);
    p3d_wbuf_int(b, in->full_dp);
    p3d_wbuf_int(b, in->min_dp);
    p3d_wbatch_encode(b, &in->batch);
    p3d_wbuf_int(b, in->fault_ms);
    p3d_wbuf_int(b, (int)c->nnodes);
    p3d_wbuf_u32(b, (uint32_t)head);
    p3d_wbuf_bytes(b, in->json, head);
    p3d_wbuf_u32(b, (uint32_t)(jl - tail_at));
    p3d_wbuf_bytes(b, in->json + tail_at, jl - tail_at);
    p3d_mesh_encode(b, pl);
    p3d_wbuf_int(b, (int)c->ntopos);
    for (size_t t = 0; t < c->ntopos; t++)
        p3d_node_encode(c->topos[t], b);
    p3d_wbuf_int(b, (int)c->nracks);
    for (size_t i = 0; i < c->nracks; i++)
        p3d_wbuf_str(b, c->racks[i]);
    p3d_wbuf_int(b, (int)c->nnvl_domains);
    for (size_t i = 0; i < c->nnvl_domains; i++)
        p3d_wbuf_str(b, c->nvl_domains[i]);
    enc_names(b, c);
    /* per node: topology, rack, NVLink domain, as runs of equal triples */
    p3d_wbuf runs = {0};
    uint32_t nr = 0;
    for (size_t i = 0; i < c->nnodes;) {
        int t[3], u[3];
        size_t j = i;
        for (; j < c->nnodes; j++) {
            const p3d_cnode *n = &c->nodes[j];
            int *x = j == i ? t : u;
            x[0] = 0;
            for (size_t k = 0; k < c->ntopos; k++)
                if (c->topos[k] == n->topo)
                    x[0] = (int)k;
            x[1] = n->rack;
            x[2] = n->nvl_domain;
            if (j > i && memcmp(t, u, sizeof t))
                break;
        }
        wb_var(&runs, j - i);
        wb_var(&runs, (uint64_t)t[0]);
        wb_var(&runs, (uint64_t)t[1]);
        wb_zig(&runs, t[2]);
        nr++;
        i = j;
    }
    p3d_wbuf_u32(b, nr);
    p3d_wbuf_bytes(b, runs.p, runs.len);
    /* per rank: the step (node, GPU, local rank) from the previous rank,
     * as runs of equal steps (a node's ranks on consecutive GPUs are one),
     * and "the last L runs again, T times" for periodic layouts: the
     * layouts policies produce are a few runs repeated */
    runs.len = 0;
    nr = 0;
    size_t nrun = 0;
    rrun *rr = malloc(((size_t)pl->world + 1) * sizeof *rr);
    if (!rr) {
        b->oom = 1;
        p3d_wbuf_free(&runs);
        return;
    }
    int prev[3] = {0, 0, 0};
    for (int q = 0; q < pl->world;) {
        const p3d_rank *k = &pl->ranks[q];
        rrun x = {1, {k->node - prev[0], k->gpu - prev[1], k->local_rank - prev[2]}};
        int r = q + 1;
        while (r < pl->world && pl->ranks[r].node - pl->ranks[r - 1].node == x.d[0] &&
               pl->ranks[r].gpu - pl->ranks[r - 1].gpu == x.d[1] &&
               pl->ranks[r].local_rank - pl->ranks[r - 1].local_rank == x.d[2])
            r++;
        x.count = r - q;
        rr[nrun++] = x;
        const p3d_rank *last = &pl->ranks[r - 1];
        prev[0] = last->node;
        prev[1] = last->gpu;
        prev[2] = last->local_rank;
        q = r;
    }
    for (size_t i = 0; i < nrun;) {
        size_t bestL = 0, bestT = 0;
        for (size_t L = 1; L <= REPEAT_MAXL && L <= i; L++) {
            size_t t = 0;
            while (i + (t + 1) * L <= nrun && !memcmp(&rr[i + t * L], &rr[i - L], L * sizeof *rr))
                t++;
            if (t * L > bestT * bestL)
                bestL = L, bestT = t;
        }
        if (bestT * bestL >= 2) {
            wb_var(&runs, 0); /* count 0: a repeat */
            wb_var(&runs, bestL);
            wb_var(&runs, bestT);
            i += bestT * bestL;
        } else {
            wb_var(&runs, (uint64_t)rr[i].count);
            wb_zig(&runs, rr[i].d[0]);
            wb_zig(&runs, rr[i].d[1]);
            wb_zig(&runs, rr[i].d[2]);
            i++;
        }
        nr++;
    }
    free(rr);
    p3d_wbuf_u32(b, nr);
    p3d_wbuf_bytes(b, runs.p, runs.len);
    if (runs.oom)
        b->oom = 1;
    p3d_wbuf_free(&runs);
}

/* The verbatim form: the old PLACE body inside. */
static int enc_verbatim(const p3d_cplace_in *in, p3d_wbuf *b, char **err)
{
    const p3d_cluster *c = in->cluster;
    p3d_place_msg pm = {
        .job_id = (char *)in->job_id,
        .master_addr = (char *)in->master_addr,
        .master_port = in->master_port,
        .nccl_port = in->nccl_port,
        .full_dp = in->full_dp,
        .min_dp = in->min_dp,
        .batch = in->batch,
        .fault_ms = in->fault_ms,
        .nnodes = (int)c->nnodes,
        .pl = (p3d_placement *)in->pl,
        .json = (char *)in->json,
        .json_len = strlen(in->json),
    };
    p3d_wbuf inner = {0};
    pm.names = calloc(c->nnodes + 1, sizeof *pm.names);
    pm.hashes = calloc(c->nnodes + 1, sizeof *pm.hashes);
    int rc = -1;
    if (!pm.names || !pm.hashes) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        pm.names[i] = c->nodes[i].name;
        pm.hashes[i] = (char *)c->nodes[i].topo->hash;
    }
    if (p3d_place_encode(&pm, &inner) < 0) {
        p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        goto out;
    }
    p3d_wbuf_begin(b, P3D_MSG_CPLACE);
    p3d_wbuf_int(b, CP_VERBATIM);
    p3d_wbuf_bytes(b, p3d_frame_body(&inner), p3d_frame_body_len(&inner));
    if (p3d_wbuf_end(b) < 0) {
        p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        goto out;
    }
    rc = 0;
out:
    free(pm.names);
    free(pm.hashes);
    p3d_wbuf_free(&inner);
    return rc;
}

int p3d_cplace_encode(const p3d_cplace_in *in, p3d_wbuf *b, int *compact, char **err)
{
    size_t head, tail_at;
    *compact = 0;
    if (split_json(in->json, &head, &tail_at) == 0) {
        enc_compact(in, b, head, tail_at);
        if (p3d_wbuf_end(b) < 0)
            return p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        /* the proof: expanded here as on every node, it is the same bytes */
        p3d_place_msg m;
        char *e = NULL;
        if (p3d_cplace_decode(p3d_frame_body(b), p3d_frame_body_len(b), &m, &e) == 0) {
            *compact = m.json_len == strlen(in->json) && !memcmp(m.json, in->json, m.json_len);
            p3d_place_msg_free(&m);
        }
        free(e);
        if (*compact)
            return 0;
    }
    return enc_verbatim(in, b, err);
}

/* ---- expansion --------------------------------------------------------------- */

static int dec_strv(p3d_rbuf *r, char ***v, size_t *n, int lo)
{
    int k = p3d_rbuf_int(r, lo, 1 << 20);
    if (r->bad || (size_t)k * 4 > r->len - r->off)
        return -1;
    *v = calloc((size_t)k + 1, sizeof **v);
    if (!*v)
        return -1;
    for (int i = 0; i < k; i++) {
        (*v)[i] = p3d_rbuf_str(r, 255);
        *n = (size_t)i + 1;
        if (!(*v)[i])
            return -1;
    }
    return 0;
}

/* Renders the report's middle on c and pl (p3d_report_json with an empty
 * analysis: only its ranks and groups are kept) and splices. */
static char *expand(const p3d_cluster *c, const p3d_placement *pl, const unsigned char *head, size_t hn,
                    const unsigned char *tail, size_t tn, size_t *outn)
{
    p3d_analysis *an = calloc(1, sizeof *an);
    char *full = NULL, *out = NULL;
    if (!an)
        return NULL;
    p3d_report_in in = {.cluster = c, .pl = pl, .an = an};
    full = p3d_report_json(&in);
    size_t h, t;
    if (full && split_json(full, &h, &t) == 0) {
        size_t mid = t - h;
        out = malloc(hn + mid + tn + 1);
        if (out) {
            memcpy(out, head, hn);
            memcpy(out + hn, full + h, mid);
            memcpy(out + hn + mid, tail, tn);
            out[hn + mid + tn] = 0;
            *outn = hn + mid + tn;
        }
    }
    free(full);
    free(an);
    return out;
}

/* What the decoders below return: the message is dec_compact's. */
enum { DEC_OK = 0, DEC_BAD = -1, DEC_OOM = -2 };

/* The node names: runs of a prefix and consecutive numbers, or one name
 * whole (enc_compact). c->nnodes counts the names held, so the cluster
 * frees them whatever happens. */
static int dec_names(p3d_rbuf *r, p3d_cluster *c, int nn)
{
    uint32_t nr = p3d_rbuf_u32(r);
    int filled = 0;
    for (uint32_t i = 0; i < nr && !r->bad; i++) {
        uint64_t pl = rb_var(r);
        if (r->bad || pl > 255 || pl > r->len - r->off)
            return DEC_BAD;
        const char *pre = (const char *)r->p + r->off;
        r->off += pl;
        uint64_t cnt = rb_var(r);
        if (cnt == 0) { /* a name without a number, whole */
            if (filled >= nn || !pl || memchr(pre, 0, pl))
                return DEC_BAD;
            char *lit = malloc(pl + 1);
            if (!lit)
                return DEC_OOM;
            memcpy(lit, pre, pl);
            lit[pl] = 0;
            c->nodes[filled++].name = lit;
            c->nnodes = (size_t)filled; /* freed with the cluster from here */
            continue;
        }
        uint64_t num = rb_var(r), w = rb_var(r);
        if (r->bad || cnt > (uint64_t)(nn - filled) || w > 9 || num > 999999999ull || num + cnt > 1000000000ull)
            return DEC_BAD;
        for (uint64_t k = 0; k < cnt; k++) {
            char *nm = malloc(pl + 11);
            if (!nm)
                return DEC_OOM;
            memcpy(nm, pre, pl);
            snprintf(nm + pl, 11, "%0*lu", (int)w, (unsigned long)(num + k));
            if (memchr(nm, 0, pl)) {
                free(nm);
                return DEC_BAD;
            }
            c->nodes[filled++].name = nm;
            c->nnodes = (size_t)filled;
        }
    }
    c->nnodes = (size_t)filled;
    return r->bad || filled != nn ? DEC_BAD : DEC_OK;
}

/* Each node's topology, rack and NVLink domain, as runs of nodes that
 * share all three (indices into c's tables). */
static int dec_node_runs(p3d_rbuf *r, p3d_cluster *c, int nn, int nt)
{
    uint32_t nr = p3d_rbuf_u32(r);
    int filled = 0;
    for (uint32_t i = 0; i < nr && !r->bad; i++) {
        uint64_t cnt = rb_var(r), t = rb_var(r), rk = rb_var(r);
        int64_t nv = rb_zig(r);
        if (r->bad || cnt < 1 || cnt > (uint64_t)(nn - filled) || t >= (uint64_t)nt || rk >= c->nracks || nv < -1 ||
            nv >= (int64_t)c->nnvl_domains)
            return DEC_BAD;
        for (uint64_t k = 0; k < cnt; k++, filled++) {
            p3d_cnode *n = &c->nodes[filled];
            n->topo = c->topos[t];
            n->rack = (int)rk;
            n->nvl_domain = (int)nv;
        }
    }
    return r->bad || filled != nn ? DEC_BAD : DEC_OK;
}

/* Every rank's node, GPU and local rank: runs of equal steps from the
 * rank before, and repeats of the last runs (REPEAT_MAXL). */
static int dec_ranks(p3d_rbuf *r, const p3d_cluster *c, p3d_placement *pl, int nn)
{
    pl->ranks = calloc((size_t)pl->world, sizeof *pl->ranks);
    if (!pl->ranks)
        return DEC_OOM;
    uint32_t nr = p3d_rbuf_u32(r);
    int q = 0;
    int64_t cur[3] = {0, 0, 0};
    /* the runs as decoded, for repeats: at most one per rank */
    rrun *hist = malloc(((size_t)pl->world + 1) * sizeof *hist);
    size_t nh = 0;
    if (!hist)
        return DEC_OOM;
    for (uint32_t i = 0; i < nr && !r->bad && q <= pl->world; i++) {
        uint64_t cnt = rb_var(r), L = 1, T = 1;
        rrun one;
        if (cnt == 0) {
            L = rb_var(r);
            T = rb_var(r);
            if (r->bad || L < 1 || L > REPEAT_MAXL || L > nh || T < 1 || T > (uint64_t)pl->world)
                break;
        } else {
            int64_t d0 = rb_zig(r), d1 = rb_zig(r), d2 = rb_zig(r);
            if (r->bad || cnt > (uint64_t)pl->world || d0 < -(1 << 24) || d0 > 1 << 24 || d1 < -(1 << 24) ||
                d1 > 1 << 24 || d2 < -(1 << 24) || d2 > 1 << 24)
                break;
            one = (rrun){(int)cnt, {(int)d0, (int)d1, (int)d2}};
        }
        size_t base = nh - (cnt == 0 ? L : 0);
        for (uint64_t t = 0; t < T && q <= pl->world; t++)
            for (uint64_t j = 0; j < L && q <= pl->world; j++) {
                rrun x = cnt ? one : hist[base + j];
                if ((uint64_t)x.count > (uint64_t)(pl->world - q) || nh >= (size_t)pl->world) {
                    q = pl->world + 1;
                    break;
                }
                hist[nh++] = x;
                for (int k = 0; k < x.count; k++, q++) {
                    for (int y = 0; y < 3; y++)
                        cur[y] += x.d[y];
                    if (cur[0] < 0 || cur[0] >= nn || cur[1] < 0 || cur[1] >= c->nodes[cur[0]].topo->ngpus ||
                        cur[2] < 0 || cur[2] >= pl->world) {
                        q = pl->world + 1;
                        break;
                    }
                    p3d_rank *rk = &pl->ranks[q];
                    rk->node = (int)cur[0];
                    rk->gpu = (int)cur[1];
                    rk->local_rank = (int)cur[2];
                    p3d_mesh_coord(&pl->mesh, q, rk->coord);
                }
            }
    }
    free(hist);
    return r->bad || q != pl->world ? DEC_BAD : DEC_OK;
}

static int dec_compact(p3d_rbuf *r, p3d_place_msg *m, p3d_cluster **keep, char **err)
{
    p3d_cluster *c = calloc(1, sizeof *c);
    const unsigned char *head, *tail;
    size_t hn, tn;
    int rc = -1;
    if (!c || !(m->pl = calloc(1, sizeof *m->pl)))
        goto oom;
    m->job_id = p3d_rbuf_str(r, 127);
    m->master_addr = p3d_rbuf_str(r, 255);
    m->master_port = p3d_rbuf_int(r, 0, 65535);
    m->nccl_port = p3d_rbuf_int(r, 0, 65535);
    m->full_dp = p3d_rbuf_int(r, 0, 1 << 24);
    m->min_dp = p3d_rbuf_int(r, 0, 1 << 24);
    p3d_wbatch_decode(r, &m->batch);
    m->fault_ms = p3d_rbuf_int(r, 0, P3D_FAULT_MS_MAX);
    int nn = p3d_rbuf_int(r, 1, 1 << 20);
    head = p3d_rbuf_blob(r, P3D_WIRE_MAX, &hn);
    tail = p3d_rbuf_blob(r, P3D_WIRE_MAX, &tn);
    /* the JSON's own bytes: text without NUL bytes */
    if (r->bad || !head || !tail || memchr(head, 0, hn) || memchr(tail, 0, tn) || p3d_mesh_decode(r, m->pl) < 0 ||
        !p3d_width_ok(m->full_dp, m->min_dp, m->pl))
        goto bad;
    int nt = p3d_rbuf_int(r, 1, 1 << 16);
    if (r->bad || (size_t)nt * 60 > r->len - r->off)
        goto bad;
    c->topos = calloc((size_t)nt, sizeof *c->topos);
    if (!c->topos)
        goto oom;
    for (int i = 0; i < nt; i++) {
        char *e = NULL;
        c->topos[i] = p3d_node_decode(r, &e);
        if (!c->topos[i]) {
            p3d_err(err, "malformed placement from the leader: %s", e ? e : "bad node record");
            free(e);
            goto out;
        }
        c->ntopos++;
    }
    if (dec_strv(r, &c->racks, &c->nracks, 0) < 0 || dec_strv(r, &c->nvl_domains, &c->nnvl_domains, 0) < 0)
        goto bad;
    c->nodes = calloc((size_t)nn, sizeof *c->nodes);
    m->names = calloc((size_t)nn, sizeof *m->names);
    m->hashes = calloc((size_t)nn, sizeof *m->hashes);
    if (!c->nodes || !m->names || !m->hashes)
        goto oom;
    m->nnodes = nn;
    int dr = dec_names(r, c, nn);
    if (dr == DEC_OOM)
        goto oom;
    if (dr != DEC_OK)
        goto bad;
    if (dec_node_runs(r, c, nn, nt) != DEC_OK)
        goto bad;
    for (int i = 0; i < nn; i++) {
        m->names[i] = strdup(c->nodes[i].name);
        m->hashes[i] = strdup(c->nodes[i].topo->hash);
        if (!m->names[i] || !m->hashes[i])
            goto oom;
    }
    dr = dec_ranks(r, c, m->pl, nn);
    if (dr == DEC_OOM)
        goto oom;
    if (dr != DEC_OK)
        goto bad;
    if (r->off != r->len)
        goto bad;
    m->json = expand(c, m->pl, head, hn, tail, tn, &m->json_len);
    if (!m->json)
        goto oom;
    rc = 0;
    goto out;
oom:
    p3d_err(err, "out of memory");
    goto out;
bad:
    p3d_err(err, "malformed placement from the leader");
out:
    if (keep && rc == 0) {
        *keep = c;
        c = NULL;
    }
    p3d_cluster_free(c);
    return rc;
}

static int cplace_decode(const unsigned char *body, size_t len, p3d_place_msg *m, p3d_cluster **keep, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    memset(m, 0, sizeof *m);
    int kind = p3d_rbuf_int(&r, CP_VERBATIM, CP_COMPACT);
    if (r.bad)
        return p3d_err(err, "malformed placement from the leader");
    if (kind == CP_VERBATIM && keep) {
        p3d_err(err, "the placement was sent as JSON, without the nodes' topologies");
        return -1;
    }
    if (kind == CP_VERBATIM ? p3d_place_decode(body + r.off, len - r.off, m, err) < 0
                            : dec_compact(&r, m, keep, err) < 0) {
        p3d_place_msg_free(m);
        return -1;
    }
    m->raw = malloc(len ? len : 1);
    if (!m->raw) {
        p3d_place_msg_free(m);
        return p3d_err(err, "out of memory");
    }
    memcpy(m->raw, body, len);
    m->raw_len = len;
    return 0;
}

int p3d_cplace_decode(const unsigned char *body, size_t len, p3d_place_msg *m, char **err)
{
    return cplace_decode(body, len, m, NULL, err);
}

int p3d_cplace_decode_cluster(const unsigned char *body, size_t len, p3d_place_msg *m, p3d_cluster **cluster,
                              char **err)
{
    *cluster = NULL;
    int rc = cplace_decode(body, len, m, cluster, err);
    if (rc < 0 && *cluster) {
        p3d_cluster_free(*cluster);
        *cluster = NULL;
    }
    return rc;
}
