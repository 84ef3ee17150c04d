/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hub_join.c — the leader's admission of a node joining the running job
 * (par3drun --join; docs/multinode.md, "Adding a node to a running job").
 *
 * The join port (rdzv.h, p3d_jport) hands over a joiner that proved the
 * job key and sent its record. Then, in this order:
 *   1. L->mn->join_check: its kind fits the job, its --health-check passed
 *      (refused: told why, exit 2 there);
 *   2. the controller's state: a stop, a preemption or a takeover refuses
 *      it (p3d_ctl_join says why); a replacement or a --health-check
 *      under way holds it (every agent retires or is checked: the join
 *      waits for the next generation, at most JOIN_HOLD seconds, then it
 *      is refused with a "retry");
 *   3. L->mn->join_add: the cluster grows by a spare, the grown placement is
 *      adopted here; p3d_ctl_join accepts it (ops.join_accept below): its
 *      link is added, it gets the placement and the generation to start
 *      on, every other node the grown placement (adopted without a
 *      restart), every node the successor list again.
 * Nothing blocks but the bounded sends every link gets.
 */
#include "hub_int.h"
#include "rdzv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a joiner is held while the job replaces or checks nodes. */
#define JOIN_HOLD 30.0

static void refuse(hub *h, p3d_joiner *jn, const char *why)
{
    char line[700], jn_[160], jw[600];
    const char *name = jn->j.hostname && jn->j.hostname[0] ? jn->j.hostname : "?";
    snprintf(line, sizeof line, "par3drun: node %s (%s) asked to join the job and was refused: %s\n", name,
             jn->j.addr ? jn->j.addr : "?", why);
    hub_say(h, line);
    p3d_json_str(jn_, sizeof jn_, name);
    p3d_json_str(jw, sizeof jw, why);
    p3d_event(h->L->events_fd, h->L->t0, "\"event\": \"join_refused\", \"node\": %s, \"state\": \"%s\", \"reason\": %s",
              jn_, p3d_ctl_state_name(p3d_ctl_get_state(h->ctl)), jw);
    p3d_tcp_refuse_chan(jn->ch, why);
    p3d_joiner_free(jn);
}

/* Every per-agent array of the hub one longer; the loop's watchers
 * taken again (their contexts moved). 0 or -1 (out of memory: nothing
 * is watched differently). */
static int hub_grow(hub *h)
{
    int n = h->n;
    for (int i = 0; i < n; i++)
        if (h->ln[i].fd >= 0)
            p3d_loop_unwatch(h->loop, h->ln[i].fd);
    alink *ln = realloc(h->ln, (size_t)(n + 2) * sizeof *ln);
    if (ln)
        h->ln = ln;
    lctx *lc = realloc(h->lc, (size_t)(n + 2) * sizeof *lc);
    if (lc)
        h->lc = lc;
    const char **names = realloc(h->names, (size_t)(n + 2) * sizeof *names);
    if (names)
        h->names = names;
    int *nodes = realloc(h->own_nodes, (size_t)(n + 2) * sizeof *nodes);
    if (nodes) {
        if (!h->own_nodes)
            memcpy(nodes, h->nodes, (size_t)n * sizeof *nodes);
        h->own_nodes = nodes;
        h->nodes = nodes;
    }
    for (int i = 0; i < n; i++) {
        h->lc[i] = (lctx){h, i};
        hub_watch(h, i);
    }
    if (!ln || !lc || !names || !nodes)
        return -1;
    memset(&h->ln[n], 0, sizeof h->ln[n]);
    h->ln[n].fd = -1;
    h->lc[n] = (lctx){h, n};
    return 0;
}

/* ops.join_accept: the joiner is agent a; its link, its placement and
 * generation; the grown placement to every other node. */
void hub_join_accept(void *ctx, int a, int gen, int start_now)
{
    hub *h = ctx;
    p3d_joiner *jn = h->joining;
    const p3d_wbuf *frame = h->L->job->cplace;
    if (!jn || a != h->n || hub_grow(h) < 0) {
        /* out of memory, or not ours: the controller counts it lost */
        if (a == h->n && jn)
            p3d_tcp_refuse_chan(jn->ch, "the leader is out of memory");
        return;
    }
    alink *l = &h->ln[a];
    h->own_nodes[a] = (int)h->L->job->cluster->nnodes - 1;
    h->names[a] = h->L->job->cluster->nodes[h->nodes[a]].name;
    h->n = a + 1;
    l->ch = jn->ch;
    jn->ch = NULL;
    l->fd = l->ch->fd;
    l->remote = 1;
    l->heard = p3d_now();
    hub_watch(h, a);
    char buf[64];
    p3d_amsg r = {.type = P3D_AM_RESTART, .gen = gen};
    int len = p3d_amsg_encode(&r, buf, sizeof buf);
    (void)start_now; /* the hub holds joiners while every agent retires: always now */
    if (!frame || p3d_chan_send(l->ch, frame, P3D_FATE_STALL, NULL) < 0 || len <= 0)
        l->broken = 1;
    else
        hub_send_one(h, a, buf, (size_t)len);
    for (int i = 0; i < h->n; i++) {
        alink *o = &h->ln[i];
        if (i != a && o->remote && o->fd >= 0 && !o->broken && !o->parked &&
            p3d_chan_send(o->ch, frame, P3D_FATE_STALL, NULL) < 0)
            o->broken = 1;
        o->succ_sent = 0; /* the list with the joiner, once each speaks */
    }
    if (h->L->mn->sent)
        h->L->mn->sent(h->L->mn->ctx);
    hub_peers(h);
    hub_write_status(h);
}

/* One joiner, now: checked, then handed to the controller. */
static void admit(hub *h, p3d_joiner *jn)
{
    char *why = NULL, *name = NULL;
    const char *no = NULL;
    p3d_ctl_state s = p3d_ctl_get_state(h->ctl);
    int ending = s == P3D_CTL_STOPPING || s == P3D_CTL_DONE || s == P3D_CTL_PREEMPTING || s == P3D_CTL_TAKEOVER;
    if (h->L->mn->join_check(h->L->mn->ctx, jn, &name, &why) < 0) {
        refuse(h, jn, why ? why : "it does not fit the job");
        goto out;
    }
    const p3d_grec *x = &jn->g.recs[0];
    int gpus = x->topo >= 0 && x->topo < jn->g.ntopos && jn->g.topos[x->topo] ? jn->g.topos[x->topo]->ngpus : 0;
    if (!ending && h->L->mn->join_add(h->L->mn->ctx, jn, &why) < 0) {
        refuse(h, jn, why ? why : "the leader cannot add it");
        goto out;
    }
    h->joining = jn;
    int a = p3d_ctl_join(h->ctl, name, jn->j.addr, gpus, p3d_now(), &no);
    h->joining = NULL;
    /* refused: the controller said it (a line, a join_refused record);
     * accepted: the link took the channel (or, out of memory, the node
     * is one the controller will count lost) */
    if (a < 0)
        p3d_tcp_refuse_chan(jn->ch, no ? no : "refused");
    p3d_joiner_free(jn);
out:
    free(why);
    free(name);
}

/* Held while the job replaces or checks nodes: no agent is to be added
 * to a generation that is being torn down or judged. */
static int must_hold(const hub *h)
{
    p3d_ctl_state s = p3d_ctl_get_state(h->ctl);
    return s == P3D_CTL_REPLACING || s == P3D_CTL_CHECKING || h->round != NULL;
}

static void hold(hub *h, p3d_joiner *jn)
{
    if (h->nheld >= P3D_JOIN_HELD) {
        refuse(h, jn, "the job is replacing a node and holds other joiners; retry in a few seconds");
        return;
    }
    h->held[h->nheld] = *jn;
    h->held_at[h->nheld++] = p3d_now();
    memset(jn, 0, sizeof *jn);
}

void hub_join_held(hub *h)
{
    double now = p3d_now();
    for (int i = 0; i < h->nheld;) {
        if (!must_hold(h) || now - h->held_at[i] >= JOIN_HOLD) {
            p3d_joiner jn = h->held[i];
            double at = h->held_at[i];
            h->nheld--;
            memmove(&h->held[i], &h->held[i + 1], (size_t)(h->nheld - i) * sizeof *h->held);
            memmove(&h->held_at[i], &h->held_at[i + 1], (size_t)(h->nheld - i) * sizeof *h->held_at);
            if (now - at >= JOIN_HOLD && must_hold(h))
                refuse(h, &jn, "the job has been replacing or checking nodes for too long; retry");
            else
                admit(h, &jn);
            continue;
        }
        i++;
    }
}

double hub_join_deadline(const hub *h)
{
    double d = 0;
    for (int i = 0; i < h->nheld; i++)
        if (!d || h->held_at[i] + JOIN_HOLD < d)
            d = h->held_at[i] + JOIN_HOLD;
    return d;
}

static void join_again(p3d_loop *lp, void *ctx)
{
    hub *h = ctx;
    h->join_timer = 0;
    hub_on_join(lp, -1, 0, h);
}

void hub_on_join(p3d_loop *lp, int fd, int ev, void *ctx)
{
    hub *h = ctx;
    (void)fd, (void)ev;
    p3d_joiner jn;
    double now = p3d_now(), next = now + 3600;
    while (p3d_jport_take(h->L->mn->jport, now, &next, h->L->o->verbose, &jn) == 1) {
        if (must_hold(h))
            hold(h, &jn);
        else
            admit(h, &jn);
    }
    /* held peers' bytes do not wake the listening socket: look again
     * shortly (the port drops them at their deadline) */
    if (p3d_jport_waiting(h->L->mn->jport) > 0 && !h->join_timer)
        h->join_timer = p3d_loop_at(lp, p3d_now() + 0.01, join_again, h);
}

void hub_join_start(hub *h)
{
    if (h->L->mn && h->L->mn->jport && h->L->mn->join_check && h->L->mn->join_add &&
        p3d_loop_watch(h->loop, p3d_jport_fd(h->L->mn->jport), P3D_LOOP_IN, hub_on_join, h) < 0)
        fprintf(stderr, "par3drun: warning: cannot watch the join port: nodes cannot join the running job\n");
}

void hub_join_end(hub *h)
{
    for (int i = 0; i < h->nheld; i++)
        refuse(h, &h->held[i], "the job is over");
    h->nheld = 0;
    p3d_loop_cancel(h->loop, h->join_timer);
    h->join_timer = 0;
    if (h->L->mn && h->L->mn->jport)
        p3d_loop_unwatch(h->loop, p3d_jport_fd(h->L->mn->jport));
    free(h->own_nodes);
    h->own_nodes = NULL;
}
