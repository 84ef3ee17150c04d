/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_rejoin.c — the frames of leader failover (wire.h; docs/multinode.md,
 * "When the leader dies"): the successor list the leader sends, the
 * reconnect a node sends a successor, and the successor's answer.
 *
 * They arrive when something has already gone wrong, from whoever reaches
 * the failover port: each is read as hostile. The size is checked first
 * (a few hundred bytes at most), then every field against its range.
 * They travel on an authenticated channel (wire_chan.c): the tag was
 * checked, and removed, before they get here.
 */
#include "wire.h"

#include "p3d/base.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest bodies, without the channel's tag. */
#define SUCCESSORS_MAX (8 + P3D_FAILOVER_CANDIDATES * (12 + P3D_FAILOVER_ADDR_MAX))
#define REJOIN_MAX (48 + P3D_FAILOVER_ADDR_MAX)
#define REJOINED_MAX (12 + P3D_REJOIN_WHY_MAX)

static const char *frame_name(int type)
{
    switch (type) {
    case P3D_MSG_SUCCESSORS: return "successor list (S)";
    case P3D_MSG_REJOIN: return "reconnect (L)";
    default: return "reconnect answer (M)";
    }
}

/* Begins a frame of type in out, emptied first; the caller ends it with
 * finish. */
static p3d_wbuf *begin(p3d_wbuf *out, int type)
{
    out->len = 0;
    out->oom = 0;
    p3d_wbuf_begin(out, type);
    return out;
}

static int finish(p3d_wbuf *out)
{
    return p3d_wbuf_end(out);
}

/* The checks every frame here gets before its fields are read: its type
 * and its size. 0 with *n the body's length. */
static int open_checked(int want, int type, size_t len, size_t max, size_t *n, char **err)
{
    if (type != want)
        return p3d_err(err, "expected a %s frame, got type %d", frame_name(want), type);
    if (len > max)
        return p3d_err(err, "%s frame of %zu bytes: at most %zu expected", frame_name(want), len, max);
    *n = len;
    return 0;
}

static int field_err(p3d_rbuf *r, char **err, int type, const char *what)
{
    return p3d_err(err, "%s frame: %s", frame_name(type),
                   r->bad ? what : "bytes left over after the last field (a newer sender?)");
}

/* ---- SUCCESSORS ------------------------------------------------------------ */

int p3d_successors_frame(const p3d_successors *s, p3d_wbuf *out)
{
    if (s->n < 0 || s->n > P3D_FAILOVER_CANDIDATES || s->gen < 0)
        return -1;
    p3d_wbuf *b = begin(out, P3D_MSG_SUCCESSORS);
    p3d_wbuf_int(b, s->gen);
    p3d_wbuf_int(b, s->n);
    for (int i = 0; i < s->n; i++) {
        const p3d_successor *c = &s->c[i];
        if (c->node_rank < 0 || c->port < 1 || c->port > 65535 || !c->addr[0])
            return -1;
        p3d_wbuf_int(b, c->node_rank);
        p3d_wbuf_str(b, c->addr);
        p3d_wbuf_int(b, c->port);
    }
    return finish(out);
}

int p3d_successors_open(int type, const unsigned char *body, size_t len, int nnodes, p3d_successors *out, char **err)
{
    size_t n = 0;
    if (open_checked(P3D_MSG_SUCCESSORS, type, len, SUCCESSORS_MAX, &n, err) < 0)
        return -1;
    if (nnodes < 1)
        return p3d_err(err, "%s frame: no job to check it against", frame_name(type));
    memset(out, 0, sizeof *out);
    p3d_rbuf r = {.p = body, .len = n};
    out->gen = p3d_rbuf_int(&r, 0, INT_MAX);
    out->n = p3d_rbuf_int(&r, 0, P3D_FAILOVER_CANDIDATES < nnodes ? P3D_FAILOVER_CANDIDATES : nnodes);
    if (r.bad)
        return field_err(&r, err, type, "the generation or the count (0..8, and no more than the job's nodes)");
    int prev = -1;
    for (int i = 0; i < out->n; i++) {
        p3d_successor *c = &out->c[i];
        c->node_rank = p3d_rbuf_int(&r, 0, nnodes - 1);
        char *a = p3d_rbuf_str(&r, P3D_FAILOVER_ADDR_MAX);
        c->port = p3d_rbuf_int(&r, 1, 65535);
        if (a)
            snprintf(c->addr, sizeof c->addr, "%s", a);
        free(a);
        if (r.bad || !c->addr[0]) {
            r.bad = 1;
            return field_err(&r, err, type,
                             "a candidate: node rank 0..nnodes-1, an address of 1..255 bytes, a port "
                             "1..65535");
        }
        if (c->node_rank <= prev)
            return p3d_err(err,
                           "%s frame: candidate %d (node rank %d) does not come after node rank %d: the list "
                           "goes lowest node rank first",
                           frame_name(type), i, c->node_rank, prev);
        prev = c->node_rank;
    }
    if (r.off != r.len)
        return field_err(&r, err, type, "");
    return 0;
}

/* ---- REJOIN ------------------------------------------------------------------ */

int p3d_rejoin_frame(const p3d_rejoin *j, p3d_wbuf *out)
{
    if (j->nnodes < 1 || j->node_rank < 0 || j->node_rank >= j->nnodes || j->gen < 0 || j->leader < 0 ||
        j->leader >= j->nnodes || !j->addr[0] || strlen(j->addr) > P3D_FAILOVER_ADDR_MAX || j->master_port < 0 ||
        j->master_port > 65535 || j->nccl_port < 0 || j->nccl_port > 65535 || j->failover_port < 0 ||
        j->failover_port > 65535)
        return -1;
    p3d_wbuf *b = begin(out, P3D_MSG_REJOIN);
    p3d_wbuf_u32(b, j->proto);
    p3d_wbuf_int(b, j->nnodes);
    p3d_wbuf_int(b, j->node_rank);
    p3d_wbuf_int(b, j->gen);
    p3d_wbuf_int(b, j->leader);
    p3d_wbuf_u64(b, j->place_hash);
    p3d_wbuf_str(b, j->addr);
    p3d_wbuf_int(b, j->master_port);
    p3d_wbuf_int(b, j->nccl_port);
    p3d_wbuf_int(b, j->failover_port);
    return finish(out);
}

int p3d_rejoin_open(int type, const unsigned char *body, size_t len, int nnodes, p3d_rejoin *out, char **err)
{
    size_t n = 0;
    if (open_checked(P3D_MSG_REJOIN, type, len, REJOIN_MAX, &n, err) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    p3d_rbuf r = {.p = body, .len = n};
    out->proto = p3d_rbuf_u32(&r);
    if (!r.bad && out->proto != P3D_WIRE_PROTO)
        return p3d_err(err, "%s frame: wire protocol %u, this par3drun speaks %d (the same par3drun on every node)",
                       frame_name(type), out->proto, P3D_WIRE_PROTO);
    out->nnodes = p3d_rbuf_int(&r, 1, INT_MAX);
    if (!r.bad && out->nnodes != nnodes)
        return p3d_err(err, "%s frame: the sender's job has %d nodes, this one %d", frame_name(type), out->nnodes,
                       nnodes);
    out->node_rank = p3d_rbuf_int(&r, 0, nnodes - 1);
    out->gen = p3d_rbuf_int(&r, 0, INT_MAX);
    out->leader = p3d_rbuf_int(&r, 0, nnodes - 1);
    out->place_hash = p3d_rbuf_u64(&r);
    char *a = p3d_rbuf_str(&r, P3D_FAILOVER_ADDR_MAX);
    if (a)
        snprintf(out->addr, sizeof out->addr, "%s", a);
    free(a);
    out->master_port = p3d_rbuf_int(&r, 0, 65535);
    out->nccl_port = p3d_rbuf_int(&r, 0, 65535);
    out->failover_port = p3d_rbuf_int(&r, 0, 65535);
    if (!r.bad && !out->addr[0])
        r.bad = 1;
    if (r.bad || r.off != r.len)
        return field_err(&r, err, type,
                         "node rank and leader 0..nnodes-1, a generation >= 0, the placement hash, "
                         "an address of 1..255 bytes, ports 0..65535");
    return 0;
}

/* ---- REJOINED ---------------------------------------------------------------- */

int p3d_rejoined_frame(const p3d_rejoined *a, p3d_wbuf *out)
{
    if (a->gen < 0 || strlen(a->why) > P3D_REJOIN_WHY_MAX)
        return -1;
    p3d_wbuf *b = begin(out, P3D_MSG_REJOINED);
    p3d_wbuf_int(b, a->accepted ? 1 : 0);
    p3d_wbuf_int(b, a->gen);
    p3d_wbuf_str(b, a->why);
    return finish(out);
}

int p3d_rejoined_open(int type, const unsigned char *body, size_t len, p3d_rejoined *out, char **err)
{
    size_t n = 0;
    if (open_checked(P3D_MSG_REJOINED, type, len, REJOINED_MAX, &n, err) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    p3d_rbuf r = {.p = body, .len = n};
    out->accepted = p3d_rbuf_int(&r, 0, 1);
    out->gen = p3d_rbuf_int(&r, 0, INT_MAX);
    char *w = p3d_rbuf_str(&r, P3D_REJOIN_WHY_MAX);
    if (w)
        snprintf(out->why, sizeof out->why, "%s", w);
    free(w);
    if (r.bad || r.off != r.len)
        return field_err(&r, err, type, "accepted 0 or 1, a generation >= 0, a reason of at most 199 bytes");
    return 0;
}
