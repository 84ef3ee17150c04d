/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode_join.c — a node joining the running job (par3drun --join;
 * docs/multinode.md, "Adding a node to a running job"), the multi-node
 * flow's part of it:
 *   the leader (L->join_check, L->join_add): does the joiner's kind fit
 *     the job (plan's p3d_join_fits over its record with the job's
 *     --nproc-per-node), did it run the job's --health-check and pass;
 *     then it is appended to the placement's cluster as a spare under a
 *     name of its own (a node that was lost and comes back gets a new
 *     one: "host:INDEX"), every per-node array one longer, the grown
 *     placement adopted here and put where the hub sends it to every node;
 *   the joiner (p3d_mnode_joined): its node index (the placement's last
 *     node) and the generation it starts on, from the leader's first
 *     packet after the placement.
 */
#include "mnode_int.h"

#include "plan.h"
#include "rdzv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The joiner's topology as the job counts it: a copy, given the job's
 * --nproc-per-node rank slots as every node of the start was. NULL with
 * *err. */
static p3d_node *joiner_topo(const mnode *m, const p3d_joiner *jn, char **err)
{
    const p3d_grec *x = &jn->g.recs[0];
    if (x->topo < 0 || x->topo >= jn->g.ntopos || !jn->g.topos[x->topo])
        return p3d_err(err, "its record has no topology"), NULL;
    p3d_wbuf b = {0};
    p3d_node_encode(jn->g.topos[x->topo], &b);
    p3d_rbuf r = {.p = b.p, .len = b.len};
    p3d_node *t = b.oom ? NULL : p3d_node_decode(&r, err);
    p3d_wbuf_free(&b);
    if (!t || m->o->nproc_per_node <= 0)
        return t;
    p3d_cluster *c = NULL;
    if (p3d_cluster_from_node(t, &c, err) < 0 || p3d_cluster_set_slots(c, m->o->nproc_per_node, err) < 0) {
        p3d_cluster_free(c);
        return NULL;
    }
    t = c->topos[0];
    c->topos[0] = NULL;
    c->ntopos = 0;
    p3d_cluster_free(c);
    return t;
}

static char *joiner_name(const mnode *m, const char *host, int index);

int p3d_mnode_join_check(void *ctx, const p3d_joiner *jn, char **name, char **why)
{
    mnode *m = ctx;
    *name = NULL;
    const p3d_grec *x = &jn->g.recs[0];
    if (m->o->health_check && x->health == P3D_GREC_HEALTH_NONE)
        return p3d_err(why, "the job runs --health-check on every node: give the joining node the same "
                            "--health-check");
    if (x->health == P3D_GREC_HEALTH_FAILED)
        return p3d_err(why, "it failed its --health-check (%s)", x->health_how ? x->health_how : "?");
    if (!m->have_res)
        return p3d_err(why, "the leader holds no placement to add it to");
    char *e = NULL;
    p3d_node *t = joiner_topo(m, jn, &e);
    if (!t) {
        p3d_err(why, "its topology: %s", e ? e : "?");
        free(e);
        return -1;
    }
    int rc = p3d_join_fits(m->res.cluster, t, &e);
    if (rc < 0) {
        p3d_err(why, "its kind does not fit the job: %s", e ? e : "?");
        free(e);
    }
    p3d_node_free(t);
    if (rc == 0 && !(*name = joiner_name(m, jn->j.hostname && jn->j.hostname[0] ? jn->j.hostname : "node", m->nnodes)))
        rc = p3d_err(why, "the leader is out of memory");
    return rc;
}

/* A name no node of the job has: the host's own, or "host:INDEX" (the
 * node's index) when a node of the host is there already, as the start
 * names several agents of one host ("host:RANK"): a lost node back under
 * a new identity, or another agent on the host. */
static char *joiner_name(const mnode *m, const char *host, int index)
{
    const p3d_cluster *c = m->res.cluster;
    size_t hl = strlen(host);
    int taken = 0;
    for (size_t i = 0; i < c->nnodes && !taken; i++) {
        const char *nm = c->nodes[i].name;
        taken = !strncmp(nm, host, hl) &&
                (!nm[hl] || (nm[hl] == ':' && nm[hl + 1] && strspn(nm + hl + 1, "0123456789") == strlen(nm + hl + 1)));
    }
    char *s = NULL;
    if (asprintf(&s, taken ? "%s:%d" : "%s", host, index) < 0)
        s = NULL;
    return s;
}

/* Every per-node array of the leader one longer, the joiner's entries
 * filled; 0 or -1 (out of memory: the arrays that did grow are harmless). */
static int grow_arrays(mnode *m, const p3d_joiner *jn)
{
    int n = m->nnodes;
    const p3d_grec *x = &jn->g.recs[0];
    p3d_mpeer *pe = realloc(m->peers, (size_t)(n + 1) * sizeof *pe);
    if (pe)
        m->peers = pe;
    /* a successor has neither: every entry zeroed, not only the new one */
    p3d_chan **ch = m->chans ? realloc(m->chans, (size_t)(n + 1) * sizeof *ch) : calloc((size_t)n + 1, sizeof *ch);
    if (ch)
        m->chans = ch;
    p3d_join *jo = m->joins ? realloc(m->joins, (size_t)(n + 1) * sizeof *jo) : calloc((size_t)n + 1, sizeof *jo);
    if (jo)
        m->joins = jo;
    p3d_health_res *hr = m->health ? realloc(m->health, (size_t)(n + 1) * sizeof *hr) : NULL;
    if (hr)
        m->health = hr;
    unsigned char *ck = m->checked ? realloc(m->checked, (size_t)n + 1) : NULL;
    if (ck)
        m->checked = ck;
    unsigned char *uh = m->unhealthy ? realloc(m->unhealthy, (size_t)n + 1) : NULL;
    if (uh)
        m->unhealthy = uh;
    char *addr = strdup(jn->j.addr && jn->j.addr[0] ? jn->j.addr : x->addr ? x->addr : "");
    if (!pe || !ch || !jo || !addr || (m->health && !hr) || (m->checked && !ck) || (m->unhealthy && !uh)) {
        free(addr);
        return -1;
    }
    m->peers[n] = (p3d_mpeer){.addr = addr,
                              .master_port = x->master_port,
                              .nccl_port = x->nccl_port,
                              .failover_port = x->failover_port};
    m->chans[n] = NULL; /* the hub holds its channel */
    memset(&m->joins[n], 0, sizeof m->joins[n]);
    if (m->health) {
        memset(&m->health[n], 0, sizeof m->health[n]);
        m->health[n].ok = x->health != P3D_GREC_HEALTH_FAILED;
        m->checked[n] = x->health != P3D_GREC_HEALTH_NONE;
        m->unhealthy[n] = 0;
    }
    return 0;
}

int p3d_mnode_join_add(void *ctx, const p3d_joiner *jn, char **err)
{
    mnode *m = ctx;
    int n = m->nnodes, compact = 0, rc = -1;
    char *name = NULL, *json = NULL;
    p3d_node *t = joiner_topo(m, jn, err);
    if (!t)
        return -1;
    name = joiner_name(m, jn->j.hostname && jn->j.hostname[0] ? jn->j.hostname : "node", n);
    if (!name || grow_arrays(m, jn) < 0) {
        p3d_node_free(t);
        p3d_err(err, "out of memory");
        goto out;
    }
    int idx = p3d_plan_add_spare(&m->res, t, name, jn->g.recs[0].rack, err);
    if (idx < 0)
        goto out;
    if (idx != n) {
        p3d_err(err, "the cluster has %d nodes, the job %d", idx, n);
        goto out;
    }
    m->nnodes = n + 1;
    p3d_report_in in = p3d_plan_report_in(&m->res);
    in.preflight_json = m->pf_json;
    json = p3d_report_json(&in);
    p3d_wbuf_free(&m->rframe);
    p3d_wbuf_free(&m->rdelta);
    m->job.cdelta = NULL;
    if (!json) {
        p3d_err(err, "cannot render the placement JSON (out of memory)");
        goto out;
    }
    if (p3d_mnode_encode(m->o, m->pm.job_id, &m->res, m->peers, json, &m->rframe, &compact, err) < 0 ||
        m->hooks->adopt(m, P3D_MSG_CPLACE, p3d_frame_body(&m->rframe), p3d_frame_body_len(&m->rframe), -1, err) < 0)
        goto out;
    m->job.cplace = &m->rframe;
    /* the successor list with the joiner: it goes to every node again
     * (the hub marks them) and is the joiner's way to a successor */
    if (m->succ_list && p3d_mnode_successors(m, m->job.gen0) == 0)
        m->hooks->successors = &m->sframe;
    rc = 0;
out:
    free(name);
    free(json);
    return rc;
}

void p3d_mnode_join_open(mnode *m)
{
    if (m->jport)
        return;
    const p3d_rdzv *r = m->r;
    const char *host = r->bind_addr[0] ? r->bind_addr : NULL;
    int bound = 0, want = r->boot.leader_port;
    char *e = NULL;
    int lfd = want > 0 ? p3d_tcp_listen(host, want, &bound, &e) : -1;
    if (lfd < 0) {
        free(e);
        e = NULL;
        lfd = p3d_tcp_listen(host, 0, &bound, &e);
    }
    m->jport = lfd >= 0 ? p3d_jport_new(lfd, r, &e) : NULL;
    if (!m->jport) {
        fprintf(stderr,
                "par3drun: warning: node[%d] leads the job now but has no join port (%s): nodes cannot "
                "join the job\n",
                m->me, e ? e : "?");
        free(e);
        return;
    }
    m->jport_port = bound;
    m->hooks->jport = m->jport;
    m->hooks->join_check = p3d_mnode_join_check;
    m->hooks->join_add = p3d_mnode_join_add;
    fprintf(stderr,
            "par3drun: node[%d] leads the job now: nodes join it at %s:%d (par3drun --join --rdzv "
            "static:%s:%d%s)\n",
            m->me, host ? host : "*", bound, host ? host : "THIS_HOST", bound,
            bound == want ? ", the job's rendezvous port" : "");
}

int p3d_mnode_join_unreached(const mnode *m, int tj, char **err)
{
    if (tj == -2) /* the leader refused it: its reason says it all */
        return P3D_EXIT_BADINPUT;
    if (!*err || !strstr(*err, "cannot reach"))
        return P3D_EXIT_FAIL; /* reached, then lost: as any node */
    const p3d_rdzv_boot *b = &m->r->boot;
    int etcd = !strcmp(m->r->ops->name, "etcd");
    char *e = *err;
    *err = NULL;
    if (etcd)
        /* etcd named this leader as the job's current one: it is gone
         * and no successor took the key (yet) */
        p3d_err(err,
                "%s: the job's leader that etcd names, %s:%d, is gone: the job ended, or its leader died and "
                "no successor has taken over yet (retry once the job's --node-timeout has passed)",
                e ? e : "?", b->leader_host, b->leader_port);
    else
        p3d_err(err,
                "%s: the leader at %s:%d is gone; if the job failed over, join through its successor, which "
                "takes joiners on the same port at its own address (its log says \"nodes join it at "
                "HOST:PORT\"): par3drun --join --rdzv static:SUCCESSOR:%d",
                e ? e : "?", b->leader_host, b->leader_port, b->leader_port);
    free(e);
    return etcd ? P3D_EXIT_BADINPUT : P3D_EXIT_FAIL;
}

int p3d_mnode_joined(mnode *m, char **err)
{
    m->nnodes = m->pm.nnodes;
    m->me = m->nnodes - 1; /* the leader appended this node last */
    m->hello.node_rank = m->me;
    double until = p3d_now() + 30;
    for (;;) {
        unsigned char *body = NULL;
        size_t len = 0;
        char *e = NULL;
        int type = p3d_chan_read(m->up, until, &body, &len, &e);
        p3d_amsg a;
        int k = type > 0 ? p3d_fate_take("the leader", 1, type, body, len, &a) : -1;
        if (k == 1 && a.type == P3D_AM_RESTART) {
            m->job.gen0 = a.gen;
            free(body);
            free(e);
            return 0;
        }
        free(body);
        if (k < 0 || (k == 1 && a.type == P3D_AM_STOP)) {
            p3d_err(err, "the leader %s before this node started",
                    k < 0 ? (e ? e : "closed the connection") : "stopped the job");
            free(e);
            return -1;
        }
        free(e);
    }
}
