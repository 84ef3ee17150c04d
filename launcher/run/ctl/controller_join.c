/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * controller_join.c — a node joining the running job (par3drun --join;
 * docs/multinode.md, "Adding a node to a running job"): JOIN's cells.
 * The transport has authenticated the node and checked its kind; the
 * controller decides whether the job can take it now, and if so grows
 * every per-agent array by one: the node is a spare, running no rank,
 * which a later replacement (or a grow) may give ranks to. A takeover
 * refuses it ("retry"): the successor's majority is counted over the
 * generation's nodes, and a node that came in meanwhile would move it.
 */
#include "controller_int.h"

#include <stdlib.h>
#include <string.h>

/* p (n elements of size) as n + 1, the new one zeroed; NULL: out of
 * memory, p as it was. */
static void *grown(void *p, int n, size_t size)
{
    unsigned char *q = realloc(p, (size_t)(n + 1) * size);
    if (q)
        memset(q + (size_t)n * size, 0, size);
    return q;
}

/* The array p, of n elements, one longer: 0, or -1. */
#define GROW(p, n) ((q_ = grown((p), (n), sizeof *(p))) != NULL ? ((p) = q_, 0) : -1)

/* The names table the controller owns once a node joined: cfg.names'
 * pointers first (borrowed), then the joined ones' (owned in own[]). */
static int grow_names(p3d_ctl *c, const char *name)
{
    void *q_;
    int n = c->cfg.nagents;
    if (!c->join.names) {
        c->join.names = calloc((size_t)n + 1, sizeof *c->join.names);
        if (!c->join.names)
            return -1;
        for (int i = 0; i < n; i++)
            c->join.names[i] = c->cfg.names[i];
    } else if (GROW(c->join.names, n) < 0) {
        return -1;
    }
    if (GROW(c->join.own, c->join.n) < 0)
        return -1;
    char *copy = strdup(name);
    if (!copy)
        return -1;
    c->join.own[c->join.n] = copy;
    c->join.names[n] = copy;
    return 0;
}

/* Every per-agent array one longer (a failure leaves the count as it was:
 * an array longer than cfg.nagents is harmless). The arrays were allocated
 * for at least one agent; the scratch ones need no value. */
static int grow(p3d_ctl *c, const char *name)
{
    void *q_;
    int n = c->cfg.nagents, nr = c->cfg.nranks > 0 ? c->cfg.nranks : 0;
    if (n < 1)
        return -1;
    if (GROW(c->up_gen, n) < 0 || GROW(c->done_gen, n) < 0 || GROW(c->gone, n) < 0 || GROW(c->killed, n) < 0 ||
        GROW(c->dead, n) < 0 || GROW(c->retiring, n) < 0 || GROW(c->chk.lostq, n) < 0 || GROW(c->tk.rejoined, n) < 0 ||
        GROW(c->tk.olds, n) < 0 || GROW(c->posted, n) < 0 || GROW(c->prog, n) < 0 || GROW(c->order, n) < 0 ||
        GROW(c->flt.of, n) < 0 || GROW(c->flt.whole, n) < 0 || GROW(c->flt.seen, n + c->flt.nreplicas) < 0 ||
        GROW(c->nranks_of, n) < 0 || GROW(c->flt.f, nr + n) < 0 || grow_names(c, name) < 0)
        return -1;
    c->flt.cap = nr + n + 1;
    c->up_gen[n] = c->done_gen[n] = -1;
    c->prog[n].gen = -1;
    c->prog[n].group = -1;
    c->nranks_of[n] = 0; /* a spare: the fault window waits for no rank of it */
    c->cfg.nagents = n + 1;
    c->cfg.names = c->join.names;
    return 0;
}

void ctl_join_free(p3d_ctl *c)
{
    for (int i = 0; i < c->join.n; i++)
        free(c->join.own[i]);
    free(c->join.own);
    free(c->join.names);
}

static void refuse(p3d_ctl *c, const ctl_ev *e, const char *why)
{
    char jn[160], jw[200];
    c->join.result = -1;
    c->join.why = why;
    c->join.refused++;
    ctl_event(c, "\"event\": \"join_refused\", \"node\": %s, \"state\": \"%s\", \"reason\": %s",
              ctl_jstr(e->how, jn, sizeof jn), p3d_ctl_state_name(c->state), ctl_jstr(why, jw, sizeof jw));
    ctl_say(c, "par3drun: node %s asked to join the job and was refused: %s\n", e->how, why);
    if (c->ops.join_refuse)
        c->ops.join_refuse(c->ops.ctx, e->how, why);
}

/* The node is agent nagents from now on; start_now: its agent starts at
 * once (0: the respawn under way starts it). -1 when it cannot be kept. */
static int accept_node(p3d_ctl *c, const ctl_ev *e, int start_now)
{
    char jn[160], ja[160];
    if (grow(c, e->how) < 0) {
        refuse(c, e, "the leader is out of memory");
        return -1;
    }
    int a = c->cfg.nagents - 1;
    c->join.result = a;
    c->join.n++;
    ctl_event(c,
              "\"event\": \"join\", \"node\": %s, \"addr\": %s, \"gpus\": %d, \"agent\": %d, \"state\": \"%s\", "
              "\"generation\": %d",
              ctl_jstr(e->how, jn, sizeof jn), ctl_jstr(e->addr, ja, sizeof ja), e->gen, a,
              p3d_ctl_state_name(c->state), c->gen);
    ctl_say(c, "par3drun: node %s (%s, %d GPU%s) joined the job as a spare%s\n", e->how, e->addr, e->gen,
            e->gen == 1 ? "" : "s", start_now ? "" : "; it starts with the other nodes after the replacement");
    ctl_story(c, e->now, "node %s joined as a spare (%d GPU%s)", e->how, e->gen, e->gen == 1 ? "" : "s");
    if (c->ops.join_accept)
        c->ops.join_accept(c->ops.ctx, a, c->gen, start_now);
    /* a job below its full width looks at the spares at once, not at
     * its next once-a-second look: the joined node may hold a replica */
    c->els.poll_at = e->now;
    return a;
}

/* STARTING, RUNNING, CHECKING, RESTARTING, COLLECTING: a spare of this
 * generation from now on (its agent reports up and done like any). */
void ctl_on_join(p3d_ctl *c, const ctl_ev *e)
{
    if (accept_node(c, e, 1) >= 0)
        c->members++;
}

/* REPLACING: every agent retires before the respawn, which starts every
 * agent not dead: the joined one waits for it, gone until then (so that
 * all-gone still comes). */
void ctl_on_join_replacing(p3d_ctl *c, const ctl_ev *e)
{
    int a = accept_node(c, e, 0);
    if (a >= 0)
        ctl_mark_gone(c, a);
}

void ctl_on_join_ending(p3d_ctl *c, const ctl_ev *e)
{
    refuse(c, e, "the job is ending: nothing to join");
}

void ctl_on_join_takeover(p3d_ctl *c, const ctl_ev *e)
{
    refuse(c, e, "the job's leader was lost and a successor is taking over; retry once it is over");
}
