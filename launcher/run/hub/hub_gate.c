/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub_gate.c — leader failover, the successor's side of the hub: the
 * nodes that rejoin on its gate (failover.h) are taken while the takeover
 * waits for them and refused otherwise, each told the generation (an old
 * leader stops on it; docs/multinode.md, "When the leader dies").
 */
#include "hub_int.h"
#include "rdzv.h"

#include <stdio.h>
#include <unistd.h>

static void hub_answer(p3d_chan *ch, int accepted, int gen, const char *why)
{
    p3d_rejoined a = {.accepted = accepted, .gen = gen};
    snprintf(a.why, sizeof a.why, "%s", why ? why : "");
    p3d_wbuf w = {0};
    if (p3d_rejoined_frame(&a, &w) == 0)
        p3d_chan_send(ch, &w, P3D_FATE_STALL, NULL);
    p3d_wbuf_free(&w);
}

/* A node rejoined on the gate: taken while the takeover waits for it,
 * refused otherwise (told the generation: an old leader stops on it). */
static void hub_rejoin(hub *h, const p3d_rejoin *j, p3d_chan *ch)
{
    int a = -1, gen = p3d_ctl_restarts(h->ctl);
    for (int i = 0; i < h->n; i++)
        if (h->nodes[i] == j->node_rank)
            a = i;
    const char *no = NULL;
    char why[200];
    const p3d_mnode_hooks *mn = h->L->mn;
    uint64_t hash = mn && mn->place_hash ? mn->place_hash(mn->ctx) : 0;
    if (a < 0 || a == h->tk_me)
        no = "not a node of this job";
    else if (p3d_ctl_get_state(h->ctl) != P3D_CTL_TAKEOVER)
        no = "the takeover is over: this job runs a newer generation without that node";
    else if (p3d_ctl_is_dead(h->ctl, a))
        no = "the node was lost before";
    else if (h->ln[a].fd >= 0)
        no = "the node is connected already";
    else if (hash && j->place_hash != hash)
        no = "it holds another placement than the successor";
    if (no) {
        snprintf(why, sizeof why, "node rank %d refused: %s (generation %d)", j->node_rank, no, gen);
        if (h->L->o->verbose)
            fprintf(stderr, "par3drun: failover: %s\n", why);
        hub_answer(ch, 0, gen, why);
        p3d_chan_free(ch);
        return;
    }
    hub_answer(ch, 1, gen, "");
    alink *l = &h->ln[a];
    l->ch = ch;
    l->fd = ch->fd;
    l->remote = 1;
    l->parked = 1;
    l->retire_pending = l->broken = l->reported = 0;
    l->heard = p3d_now();
    hub_watch(h, a);
    if (mn && mn->rejoined)
        mn->rejoined(mn->ctx, j->node_rank, j->addr, j->master_port, j->nccl_port, j->failover_port);
    p3d_ctl_rejoin(h->ctl, a, j->gen, p3d_now());
}

static void gate_again(p3d_loop *lp, void *ctx)
{
    hub *h = ctx;
    h->gate_timer = 0;
    hub_on_gate(lp, -1, 0, h);
}

void hub_on_gate(p3d_loop *lp, int fd, int ev, void *ctx)
{
    hub *h = ctx;
    (void)fd;
    (void)ev;
    p3d_rejoin j;
    p3d_chan *ch = NULL;
    while (p3d_fgate_take(h->L->mn->gate, (int)h->L->job->cluster->nnodes, p3d_now(), NULL, h->L->o->verbose, &j,
                          &ch) == 1)
        hub_rejoin(h, &j, ch);
    /* a connection accepted before its frame came: its bytes do not wake
     * the listening socket, so look again shortly (the gate drops it after
     * P3D_FGATE_DEADLINE); a node that was stuck here was lost with the
     * spare its ranks needed */
    if (p3d_fgate_waiting(h->L->mn->gate) > 0 && !h->gate_timer)
        h->gate_timer = p3d_loop_at(lp, p3d_now() + 0.01, gate_again, h);
}
