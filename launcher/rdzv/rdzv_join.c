/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv_join.c — a node joining the running job (par3drun --join;
 * docs/multinode.md, "Adding a node to a running job"), the bytes of it:
 * the leader's join port (its rendezvous port, kept open once the job
 * runs) and what a joiner goes through there.
 *
 * A joiner is a stranger like any peer of the rendezvous (rdzv_tcp.c's
 * pending slots, the limits of rdzv_tcp_internal.h): the handshake of
 * wire_chan.c (link kind P3D_LINK_CTRL, the job key), then a JOIN of node
 * rank P3D_JOIN_RUNNING; it is told its place (a TREE of no parent and no
 * children: the leader is its parent) and sends its record (a GATHER of
 * one). Only then is it handed to the caller (the hub), which decides. A
 * JOIN of a node rank (an agent of the job's start, come too late) is
 * refused with a message that says so. The joiner's own side is
 * p3d_tree_join, whose leader is the parent of a joiner.
 */
#include "rdzv_tcp_internal.h"
#include "termsafe.h"

#include "loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Strangers held at once (handshake and JOIN), and joiners told their
 * place whose record has not come yet. */
#define JPORT_SLOTS 16

typedef struct told {
    p3d_chan *ch; /* NULL: a free slot */
    p3d_join j;
    char peer[160];
    double since;
} told;

struct p3d_jport {
    int lfd;
    const p3d_rdzv *r;
    pending s[JPORT_SLOTS];
    told w[JPORT_SLOTS];
};

p3d_jport *p3d_jport_new(int lfd, const p3d_rdzv *r, char **err)
{
    p3d_jport *p = calloc(1, sizeof *p);
    if (!p) {
        close(lfd);
        p3d_err(err, "out of memory");
        return NULL;
    }
    p->lfd = lfd;
    p->r = r;
    for (int i = 0; i < JPORT_SLOTS; i++)
        p->s[i].fd = -1;
    return p;
}

int p3d_jport_fd(const p3d_jport *p)
{
    return p ? p->lfd : -1;
}

static void told_drop(told *t, const char *why, int verbose)
{
    if (verbose)
        fprintf(stderr, "par3drun: join port: dropped %s: %s\n", t->peer, why);
    p3d_chan_free(t->ch);
    t->ch = NULL;
    p3d_join_free(&t->j);
}

/* A stranger's JOIN: refused (the channel closed; 0), or told its place
 * and moved to a told slot (1). */
static int jport_join(p3d_jport *p, pending *s, int type, const unsigned char *body, size_t len)
{
    p3d_join j;
    char why[512], *e = NULL;
    const char *verdict = NULL;
    memset(&j, 0, sizeof j);
    int d = type == P3D_MSG_JOIN ? p3d_join_decode(body, len, &j, &e) : -1;
    if (type != P3D_MSG_JOIN)
        verdict = "expected JOIN";
    else
        verdict = rz_auth_verdict(p->r, j.proto, j.version, d == 0 ? j.job_id : NULL, why, sizeof why);
    if (!verdict && d < 0)
        verdict = e ? e : "malformed JOIN";
    if (!verdict && j.node_rank != P3D_JOIN_RUNNING)
        verdict = "the job's rendezvous is over: the job runs (an agent given --node-rank came too late; to add a "
                  "node to the running job, start it with par3drun --join)";
    int slot = -1;
    for (int i = 0; i < JPORT_SLOTS && slot < 0 && !verdict; i++)
        if (!p->w[i].ch)
            slot = i;
    if (!verdict && slot < 0)
        verdict = "the leader admits other nodes right now; retry in a few seconds";
    p3d_treepos t = {.parent = 0, .addr = "", .nchildren = 0, .fanout = 1, .ring_addr = ""};
    p3d_wbuf b = {0};
    if (!verdict && (p3d_treepos_encode(&t, &b) < 0 || p3d_chan_send(s->ch, &b, 1.0, NULL) < 0))
        verdict = "cannot answer it";
    p3d_wbuf_free(&b);
    if (verdict) {
        rz_refuse_joiner(s, "par3drun: join port", j.hostname, verdict);
        p3d_join_free(&j);
        free(e);
        return 0;
    }
    free(e);
    told *w = &p->w[slot];
    w->ch = s->ch;
    w->j = j;
    w->since = p3d_now();
    snprintf(w->peer, sizeof w->peer, "%s", s->peer);
    s->ch = NULL;
    s->fd = -1;
    p3d_hs_wipe(&s->hs);
    s->hs_on = 0;
    rz_drop_pending(s, "told its place", 0);
    return 1;
}

/* The strangers: accepted, their handshake and JOIN read as they come. */
static void jport_strangers(p3d_jport *p, double now, double *next, int verbose)
{
    rz_accept_all(p->lfd, p->s, JPORT_SLOTS, verbose);
    double until = next ? *next : now + 3600;
    rz_expire_pending(p->s, JPORT_SLOTS, now, &until, verbose);
    for (int i = 0; i < JPORT_SLOTS; i++) {
        pending *s = &p->s[i];
        if (s->fd < 0)
            continue;
        unsigned char *body = NULL;
        size_t len = 0;
        int type = rz_pending_auth(s, p->r->boot.token, P3D_LINK_CTRL, &body, &len);
        if (type > 0)
            jport_join(p, s, type, body, len);
        free(body);
    }
    if (next)
        *next = until;
}

/* A told joiner's record: 1 handed over in *out, 0 not yet, -1 dropped. */
static int told_record(told *w, double now, double *next, int verbose, p3d_joiner *out)
{
    char *e = NULL;
    unsigned char *body = NULL;
    size_t len = 0;
    int f = p3d_chan_fill(w->ch, &e);
    int type = p3d_chan_take(w->ch, &body, &len, &e);
    if (type == 0 && f >= 0) {
        free(e);
        if (now - w->since >= HELLO_DEADLINE) {
            told_drop(w, "no record within 10 s", verbose);
            return -1;
        }
        if (next && w->since + HELLO_DEADLINE < *next)
            *next = w->since + HELLO_DEADLINE;
        return 0;
    }
    memset(out, 0, sizeof *out);
    int ok = type == P3D_MSG_GATHER && p3d_gather_decode(body, len, 1, &out->g, &e) == 0;
    if (ok && out->g.nrec != 1) {
        p3d_gather_free(&out->g);
        ok = 0;
        p3d_err(&e, "a joiner's record must be its own alone, it sent %d", out->g.nrec);
    }
    free(body);
    if (!ok) {
        char why[300];
        snprintf(why, sizeof why, "its record: %s", type <= 0 ? (e ? e : "closed") : e ? e : "not a record");
        fprintf(stderr, "par3drun: join port: refused %s: %s\n", w->peer, p3d_tesc(why));
        if (type > 0)
            p3d_tcp_refuse_chan(w->ch, why);
        told_drop(w, why, 0);
        free(e);
        return -1;
    }
    free(e);
    out->j = w->j;
    out->ch = w->ch;
    rz_set_nonblock(out->ch->fd, 0);
    memset(w, 0, sizeof *w);
    return 1;
}

int p3d_jport_take(p3d_jport *p, double now, double *next, int verbose, p3d_joiner *out)
{
    jport_strangers(p, now, next, verbose);
    for (int i = 0; i < JPORT_SLOTS; i++)
        if (p->w[i].ch && told_record(&p->w[i], now, next, verbose, out) == 1)
            return 1;
    return 0;
}

int p3d_jport_waiting(const p3d_jport *p)
{
    int k = 0;
    for (int i = 0; p && i < JPORT_SLOTS; i++)
        k += (p->s[i].fd >= 0) + (p->w[i].ch != NULL);
    return k;
}

void p3d_joiner_free(p3d_joiner *j)
{
    p3d_join_free(&j->j);
    p3d_gather_free(&j->g);
    p3d_chan_free(j->ch);
    memset(j, 0, sizeof *j);
}

void p3d_jport_close(p3d_jport *p)
{
    if (!p)
        return;
    for (int i = 0; i < JPORT_SLOTS; i++) {
        rz_drop_pending(&p->s[i], "closed", 0);
        if (p->w[i].ch)
            told_drop(&p->w[i], "closed", 0);
    }
    if (p->lfd >= 0)
        close(p->lfd);
    free(p);
}
