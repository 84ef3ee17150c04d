/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_tree.c — the distribution tree's messages (wire.h): JOIN,
 * TREE, TJOIN and GATHER, and the merging of gathered records. Pure
 * functions over byte ranges, like wire_codec.c: every count is checked
 * against the bytes left before anything is allocated (fuzzed in
 * tests/fuzz/fuzz_rdzv_wire.c).
 */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#define NAME_MAX_ 255

/* ---- JOIN ------------------------------------------------------------------ */

int p3d_join_encode(const p3d_join *j, p3d_wbuf *b)
{
    p3d_wbuf_begin(b, P3D_MSG_JOIN);
    p3d_wbuf_u32(b, j->proto);
    p3d_wbuf_str(b, j->version);
    p3d_wbuf_str(b, j->job_id);
    p3d_wbuf_int(b, j->nnodes);
    p3d_wbuf_int(b, j->node_rank);
    p3d_wbuf_str(b, j->hostname);
    p3d_wbuf_str(b, j->addr);
    p3d_wbuf_int(b, j->port);
    p3d_wbuf_int(b, j->ring_port);
    return p3d_wbuf_end(b);
}

int p3d_join_decode(const unsigned char *body, size_t len, p3d_join *j, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    memset(j, 0, sizeof *j);
    j->proto = p3d_rbuf_u32(&r);
    j->version = p3d_rbuf_str(&r, 64);
    /* proto and version first: an agent of another version is told so */
    if (r.bad || j->proto != P3D_WIRE_PROTO)
        return r.bad ? p3d_err(err, "malformed JOIN") : 0;
    j->job_id = p3d_rbuf_str(&r, 127);
    j->nnodes = p3d_rbuf_int(&r, 0, 1 << 20);
    j->node_rank = p3d_rbuf_int(&r, P3D_JOIN_RUNNING, (1 << 20) - 1);
    j->hostname = p3d_rbuf_str(&r, NAME_MAX_);
    j->addr = p3d_rbuf_str(&r, NAME_MAX_);
    j->port = p3d_rbuf_int(&r, 0, 65535);
    j->ring_port = p3d_rbuf_int(&r, 0, 65535);
    /* 0 nodes only for a node joining the running job, and only then */
    if (r.bad || r.off != r.len || (j->nnodes == 0) != (j->node_rank == P3D_JOIN_RUNNING))
        return p3d_err(err, "malformed JOIN");
    return 0;
}

void p3d_join_free(p3d_join *j)
{
    free(j->version);
    free(j->job_id);
    free(j->hostname);
    free(j->addr);
    memset(j, 0, sizeof *j);
}

/* ---- TREE ------------------------------------------------------------------ */

int p3d_treepos_encode(const p3d_treepos *t, p3d_wbuf *b)
{
    p3d_wbuf_begin(b, P3D_MSG_TREE);
    p3d_wbuf_int(b, t->parent);
    p3d_wbuf_str(b, t->addr);
    p3d_wbuf_int(b, t->port);
    p3d_wbuf_int(b, t->nchildren);
    p3d_wbuf_int(b, t->fanout);
    p3d_wbuf_str(b, t->ring_addr ? t->ring_addr : "");
    p3d_wbuf_int(b, t->ring_port);
    return p3d_wbuf_end(b);
}

int p3d_treepos_decode(const unsigned char *body, size_t len, p3d_treepos *t, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    memset(t, 0, sizeof *t);
    t->parent = p3d_rbuf_int(&r, 0, (1 << 20) - 1);
    t->addr = p3d_rbuf_str(&r, NAME_MAX_);
    t->port = p3d_rbuf_int(&r, 0, 65535);
    t->nchildren = p3d_rbuf_int(&r, 0, P3D_FANOUT_MAX);
    t->fanout = p3d_rbuf_int(&r, 1, P3D_FANOUT_MAX);
    t->ring_addr = p3d_rbuf_str(&r, NAME_MAX_);
    t->ring_port = p3d_rbuf_int(&r, 0, 65535);
    if (r.bad || r.off != r.len || (t->parent > 0 && t->port == 0) || t->nchildren > t->fanout ||
        (t->ring_port > 0 && (!t->ring_addr || !t->ring_addr[0]))) {
        p3d_treepos_free(t);
        return p3d_err(err, "malformed TREE message from the leader");
    }
    return 0;
}

void p3d_treepos_free(p3d_treepos *t)
{
    free(t->addr);
    free(t->ring_addr);
    memset(t, 0, sizeof *t);
}

/* ---- TJOIN ------------------------------------------------------------------ */

int p3d_tjoin_encode(const p3d_tjoin *t, p3d_wbuf *b)
{
    p3d_wbuf_begin(b, P3D_MSG_TJOIN);
    p3d_wbuf_u32(b, t->proto);
    p3d_wbuf_str(b, t->version);
    p3d_wbuf_str(b, t->job_id);
    p3d_wbuf_int(b, t->node_rank);
    return p3d_wbuf_end(b);
}

int p3d_tjoin_decode(const unsigned char *body, size_t len, p3d_tjoin *t, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    memset(t, 0, sizeof *t);
    t->proto = p3d_rbuf_u32(&r);
    t->version = p3d_rbuf_str(&r, 64);
    if (r.bad || t->proto != P3D_WIRE_PROTO)
        return r.bad ? p3d_err(err, "malformed TJOIN") : 0;
    t->job_id = p3d_rbuf_str(&r, 127);
    t->node_rank = p3d_rbuf_int(&r, 0, (1 << 20) - 1);
    if (r.bad || r.off != r.len)
        return p3d_err(err, "malformed TJOIN");
    return 0;
}

void p3d_tjoin_free(p3d_tjoin *t)
{
    free(t->version);
    free(t->job_id);
    memset(t, 0, sizeof *t);
}

/* ---- GATHER -------------------------------------------------------------- */

int p3d_gather_encode(const p3d_gather *g, p3d_wbuf *b)
{
    p3d_wbuf_begin(b, P3D_MSG_GATHER);
    p3d_wbuf_int(b, g->ntopos);
    for (int i = 0; i < g->ntopos; i++)
        p3d_node_encode(g->topos[i], b);
    p3d_wbuf_int(b, g->nrec);
    for (int i = 0; i < g->nrec; i++) {
        const p3d_grec *x = &g->recs[i];
        p3d_wbuf_int(b, x->rank);
        p3d_wbuf_str(b, x->hostname);
        p3d_wbuf_str(b, x->addr);
        p3d_wbuf_str(b, x->rack);
        p3d_wbuf_int(b, x->master_port);
        p3d_wbuf_int(b, x->nccl_port);
        p3d_wbuf_int(b, x->failover_port);
        p3d_wbuf_int(b, x->topo);
        p3d_wbuf_int(b, x->health);
        p3d_wbuf_str(b, x->health == P3D_GREC_HEALTH_FAILED && x->health_how ? x->health_how : "");
        p3d_wbuf_str(b, x->preflight ? x->preflight : "");
    }
    return p3d_wbuf_end(b);
}

/* A decoded text field that reaches a terminal: printable ASCII only (0
 * otherwise); "" becomes NULL. */
static int text_field(char **s)
{
    for (const char *c = *s; *c; c++)
        if (*c < 32 || *c > 126)
            return 0;
    if (!**s) {
        free(*s);
        *s = NULL;
    }
    return 1;
}

int p3d_gather_decode(const unsigned char *body, size_t len, int nnodes, p3d_gather *g, char **err)
{
    p3d_rbuf r = {.p = body, .len = len};
    char *e = NULL;
    memset(g, 0, sizeof *g);
    int nt = p3d_rbuf_int(&r, 1, 1 << 16);
    /* a node record is at least ~60 bytes, a record 36 */
    if (r.bad || (size_t)nt * 60 > r.len - r.off)
        goto bad;
    g->topos = calloc((size_t)nt, sizeof *g->topos);
    if (!g->topos)
        goto oom;
    for (int i = 0; i < nt; i++) {
        g->topos[i] = p3d_node_decode(&r, &e);
        if (!g->topos[i]) {
            p3d_err(err, "GATHER: %s", e ? e : "bad node record");
            free(e);
            p3d_gather_free(g);
            return -1;
        }
        g->ntopos++;
    }
    int nr = p3d_rbuf_int(&r, 1, nnodes);
    if (r.bad || (size_t)nr * 36 > r.len - r.off)
        goto bad;
    g->recs = calloc((size_t)nr, sizeof *g->recs);
    if (!g->recs)
        goto oom;
    for (int i = 0; i < nr; i++) {
        p3d_grec *x = &g->recs[i];
        g->nrec++;
        x->rank = p3d_rbuf_int(&r, 0, nnodes - 1);
        x->hostname = p3d_rbuf_str(&r, NAME_MAX_);
        x->addr = p3d_rbuf_str(&r, NAME_MAX_);
        x->rack = p3d_rbuf_str(&r, NAME_MAX_);
        x->master_port = p3d_rbuf_int(&r, 0, 65535);
        x->nccl_port = p3d_rbuf_int(&r, 0, 65535);
        x->failover_port = p3d_rbuf_int(&r, 0, 65535);
        x->topo = p3d_rbuf_int(&r, 0, nt - 1);
        x->health = p3d_rbuf_int(&r, P3D_GREC_HEALTH_NONE, P3D_GREC_HEALTH_FAILED);
        x->health_how = p3d_rbuf_str(&r, P3D_GREC_HOW_MAX);
        x->preflight = p3d_rbuf_str(&r, P3D_GREC_HOW_MAX);
        if (r.bad)
            goto bad;
        if (!x->rack[0]) {
            free(x->rack);
            x->rack = NULL;
        }
        /* a reason (printable ASCII: it reaches a terminal) only with a
         * failure, and a failure always has one */
        if ((x->health == P3D_GREC_HEALTH_FAILED) != (x->health_how[0] != 0))
            goto bad;
        /* the preflight line too: printable, "" for none */
        if (!text_field(&x->health_how) || !text_field(&x->preflight))
            goto bad;
    }
    if (r.off != r.len)
        goto bad;
    return 0;
oom:
    p3d_gather_free(g);
    return p3d_err(err, "out of memory");
bad:
    p3d_gather_free(g);
    return p3d_err(err, "malformed GATHER message");
}

/* The index of topo in g (by hash), adding it when new (taken either way). */
static int topo_index(p3d_gather *g, p3d_node *t)
{
    for (int i = 0; i < g->ntopos; i++)
        if (!strcmp(g->topos[i]->hash, t->hash)) {
            p3d_node_free(t);
            return i;
        }
    p3d_node **nt = realloc(g->topos, (size_t)(g->ntopos + 1) * sizeof *nt);
    if (!nt) {
        p3d_node_free(t);
        return -1;
    }
    g->topos = nt;
    g->topos[g->ntopos] = t;
    return g->ntopos++;
}

static int grow_recs(p3d_gather *g, int more)
{
    p3d_grec *nr = realloc(g->recs, (size_t)(g->nrec + more) * sizeof *nr);
    if (!nr)
        return -1;
    g->recs = nr;
    return 0;
}

int p3d_gather_merge(p3d_gather *dst, p3d_gather *src, char **err)
{
    int *map = calloc((size_t)src->ntopos + 1, sizeof *map);
    if (!map || grow_recs(dst, src->nrec) < 0) {
        free(map);
        return p3d_err(err, "out of memory");
    }
    for (int i = 0; i < src->ntopos; i++) {
        map[i] = topo_index(dst, src->topos[i]);
        src->topos[i] = NULL;
        if (map[i] < 0) {
            free(map);
            return p3d_err(err, "out of memory");
        }
    }
    for (int i = 0; i < src->nrec; i++) {
        dst->recs[dst->nrec] = src->recs[i];
        dst->recs[dst->nrec].topo = map[src->recs[i].topo];
        dst->nrec++;
    }
    free(map);
    free(src->recs);
    src->recs = NULL;
    src->nrec = 0;
    p3d_gather_free(src);
    return 0;
}

int p3d_gather_add(p3d_gather *g, const p3d_grec *r, p3d_node *topo, char **err)
{
    if (grow_recs(g, 1) < 0) {
        p3d_node_free(topo);
        return p3d_err(err, "out of memory");
    }
    int t = topo_index(g, topo);
    p3d_grec *x = &g->recs[g->nrec];
    memset(x, 0, sizeof *x);
    x->rank = r->rank;
    x->master_port = r->master_port;
    x->nccl_port = r->nccl_port;
    x->failover_port = r->failover_port;
    x->topo = t;
    x->hostname = strdup(r->hostname ? r->hostname : "");
    x->addr = strdup(r->addr ? r->addr : "");
    x->rack = r->rack && r->rack[0] ? strdup(r->rack) : NULL;
    x->health = r->health;
    if (r->health == P3D_GREC_HEALTH_FAILED)
        x->health_how = strndup(r->health_how && r->health_how[0] ? r->health_how : "failed", P3D_GREC_HOW_MAX);
    if (r->preflight && r->preflight[0])
        x->preflight = strndup(r->preflight, P3D_GREC_HOW_MAX);
    g->nrec++;
    if (t < 0 || !x->hostname || !x->addr || (r->rack && r->rack[0] && !x->rack) ||
        (r->health == P3D_GREC_HEALTH_FAILED && !x->health_how) || (r->preflight && r->preflight[0] && !x->preflight))
        return p3d_err(err, "out of memory");
    return 0;
}

void p3d_gather_free(p3d_gather *g)
{
    for (int i = 0; g->topos && i < g->ntopos; i++)
        p3d_node_free(g->topos[i]);
    for (int i = 0; g->recs && i < g->nrec; i++) {
        free(g->recs[i].hostname);
        free(g->recs[i].addr);
        free(g->recs[i].rack);
        free(g->recs[i].health_how);
        free(g->recs[i].preflight);
    }
    free(g->topos);
    free(g->recs);
    memset(g, 0, sizeof *g);
}
