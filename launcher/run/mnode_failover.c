/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode_failover.c — the leader's succession on one node of a multi-node
 * job (docs/multinode.md, "When the leader dies"): the placement hash a
 * successor compares, where rejoined nodes are reached, the takeover
 * (the controller's TAKEOVER state, supervise.c) and the successor list
 * the leader hands every node (failover.h).
 */
#include "mnode_int.h"
#include "say.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* L->mn->place_hash: names the placement this node holds, for the successor
 * to compare with its own. */
uint64_t p3d_mnode_place_hash(void *ctx)
{
    mnode *m = ctx;
    return m->pm.raw ? p3d_delta_hash(m->pm.raw, m->pm.raw_len) : 0;
}

/* L->mn->rejoined (the successor): where a rejoined node is reached, and
 * where it takes nodes itself (for this successor's own successor list). */
void p3d_mnode_rejoined(void *ctx, int node, const char *addr, int master_port, int nccl_port, int failover_port)
{
    mnode *m = ctx;
    if (!m->peers || node < 0 || node >= m->nnodes)
        return;
    char *a = strdup(addr);
    if (!a)
        return;
    free(m->peers[node].addr);
    m->peers[node] =
        (p3d_mpeer){.addr = a, .master_port = master_port, .nccl_port = nccl_port, .failover_port = failover_port};
}

/* ---- the election (a backend that holds leadership: etcd) --------------- */

/* The node ranks of role r in the current placement, "1,4" ("-" none). */
static void role_list(const mnode *m, int role, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    const p3d_cluster *c = m->have_res ? m->res.cluster : NULL;
    for (size_t i = 0; c && i < c->nnodes && n + 12 < cap; i++)
        if ((int)c->nodes[i].role == role)
            n += (size_t)snprintf(out + n, cap - n, "%s%zu", n ? "," : "", i);
    if (!n)
        snprintf(out, cap, "-");
}

/* The leader: the job's state for its successor, kept current in the
 * backend after every placement every node holds (p3d_mnode_sent):
 * "restart G hash H lost L excluded E spares S". Best effort: a backend
 * that cannot keep it costs the successor's check, not the job. */
void p3d_mnode_keep(mnode *m)
{
    if (!m->elects || !m->leads)
        return; /* a successor keeps nothing before it was elected */
    char lost[256], excl[256], spares[256], text[1024], *err = NULL;
    role_list(m, P3D_NODE_LOST, lost, sizeof lost);
    role_list(m, P3D_NODE_EXCLUDED, excl, sizeof excl);
    role_list(m, P3D_NODE_SPARE, spares, sizeof spares);
    snprintf(text, sizeof text, "restart %d hash %016" PRIx64 " lost %s excluded %s spares %s", m->job.gen0,
             p3d_mnode_place_hash(m), lost, excl, spares);
    if (p3d_rdzv_keep(m->r, text, &err) < 0 && m->o->verbose)
        p3d_say_error("cannot keep the job's state for a successor: %s", err);
    free(err);
}

/* L->mn->sent (leader): every node now holds L->job->cplace, which the leader
 * adopted as m->pm; later differences are made against its bytes. */
void p3d_mnode_sent(void *ctx)
{
    mnode *m = ctx;
    m->base = m->pm.raw;
    m->base_len = m->pm.raw_len;
    p3d_mnode_keep(m);
}

/* L->elect_news: the backend's news, checked. A won election whose kept
 * state names another placement than the one this node holds is no win:
 * this node missed a restart and cannot lead the job it describes. */
static int elect_news(void *ctx, char *msg, size_t cap)
{
    mnode *m = ctx;
    char kept[1200];
    int k = p3d_rdzv_news(m->r, kept, sizeof kept);
    if (k != P3D_RDZV_NEWS_WON) {
        snprintf(msg, cap, "%s", kept);
        return k;
    }
    int gen = -1;
    uint64_t hash = 0, own = p3d_mnode_place_hash(m);
    if (!kept[0]) {
        snprintf(msg, cap, "elected by etcd (no job state was kept: this node's restart %d is the job's)", m->job.gen0);
        m->leads = 1;
        return k;
    }
    if (sscanf(kept, "restart %d hash %" SCNx64, &gen, &hash) != 2) {
        snprintf(msg, cap, "elected by etcd, but the job state kept there is not \"restart G hash H ...\": %.200s",
                 kept);
        return P3D_RDZV_NEWS_NOT_WON;
    }
    if (gen != m->job.gen0 || hash != own) {
        snprintf(msg, cap,
                 "elected by etcd, but the job state kept there is restart %d, placement %016" PRIx64
                 ", and this node holds restart %d, placement %016" PRIx64 ": it cannot lead that job",
                 gen, hash, m->job.gen0, own);
        return P3D_RDZV_NEWS_NOT_WON;
    }
    snprintf(msg, cap, "elected by etcd; the job state kept there matches this node's (%.300s)", kept);
    m->leads = 1;
    return k;
}

/* The leader (or a successor that bids to be one): the election's
 * descriptor and news go to the hub. */
void p3d_mnode_elect_setup(mnode *m)
{
    if (!m->elects)
        return;
    m->hooks->elect_fd = p3d_rdzv_notify_fd(m->r);
    m->hooks->elect_news = elect_news;
    m->hooks->elect_ctx = m;
}

/* The successor bids, in the background (its hub hears the result):
 * within --node-timeout past the lease's own TTL and the slack. */
static int campaign(mnode *m, const int *before, int nbefore)
{
    char value[700], *err = NULL;
    double nt = m->o->node_timeout > 0 ? m->o->node_timeout : 30;
    /* no token: the etcd plugin signs the value with it (docs/multinode.md) */
    /* m->jport_port: opened first (mnode.c, takeover_joins), 0 none */
    snprintf(value, sizeof value, "%d %s restart %d node %d join %d", m->gate ? m->gate_port : 0,
             m->join.addr && m->join.addr[0] ? m->join.addr : "127.0.0.1", m->job.gen0, m->me, m->jport_port);
    if (p3d_rdzv_campaign(m->r, before, nbefore, value, p3d_now() + 2 * nt + 2 * P3D_CTL_SLACK, &err) < 0) {
        p3d_say_error("cannot take over from the lost leader: %s", err);
        free(err);
        return -1;
    }
    return 0;
}

/* L->mn->takeover: this node succeeds the lost leader. It places from the
 * compact placement it holds (takeover.c), writes events.jsonl from here
 * on and runs the job's controller (supervise.c, TAKEOVER); under an
 * election it bids first, and the controller acts once it won. */
int p3d_mnode_takeover(void *ctx, int leader, double heard, const char *why, const int *before, int nbefore)
{
    mnode *m = ctx;
    p3d_launch *L = m->setup;
    if (m->elects && campaign(m, before, nbefore) < 0)
        return P3D_EXIT_LOST;
    p3d_mnode_elect_setup(m);
    char *err = NULL;
    p3d_place_msg tpm;
    if (m->have_res)
        p3d_plan_result_free(&m->res);
    m->have_res = 0;
    int t = p3d_takeover_plan(m->o, m->pm.raw, m->pm.raw_len, &m->res, &tpm, &err);
    p3d_place_msg_free(&tpm);
    if (t < 0) {
        p3d_say_error("cannot take over from the lost leader: %s", err ? err : "no plan");
        free(err);
        return P3D_EXIT_LOST;
    }
    m->have_res = 1;
    /* the start's --preflight figures, in every placement this node writes */
    free(m->pf_json);
    m->pf_json = p3d_takeover_preflight(m->pm.json, m->pm.json_len);
    p3d_mpeer_free(m->peers, m->nnodes);
    m->peers = calloc((size_t)m->nnodes, sizeof *m->peers);
    int *nodes = calloc((size_t)m->nnodes, sizeof *nodes);
    if (!m->peers || !nodes) {
        free(nodes);
        p3d_say_error("cannot take over from the lost leader: out of memory");
        return P3D_EXIT_LOST;
    }
    for (int i = 0; i < m->nnodes; i++) {
        nodes[i] = i;
        m->peers[i].addr = strdup("");
    }
    p3d_mnode_rejoined(m, m->me, m->join.addr ? m->join.addr : "", m->hello.master_port, m->hello.nccl_port,
                       m->gate ? m->gate_port : 0);
    /* this node's own successor list: built once the takeover's
     * replacement knows who rejoined and who is lost (p3d_mnode_replace),
     * sent with the restart */
    m->succ_list = m->hooks->failover;
    /* nodes lost or excluded before are no nodes of this generation: not
     * waited for, not counted in the majority (a second takeover) */
    free(m->unhealthy);
    m->unhealthy = calloc((size_t)m->nnodes, 1);
    for (int i = 0; m->unhealthy && i < m->nnodes; i++)
        m->unhealthy[i] = i != leader && (m->res.cluster->nodes[i].role == P3D_NODE_LOST ||
                                          m->res.cluster->nodes[i].role == P3D_NODE_EXCLUDED);
    m->hooks->unhealthy = m->unhealthy;
    if (L->events_fd < 0)
        L->events_fd = p3d_events_open(m->prep.run_dir);
    p3d_mnode_heal_ops(m, L); /* an elastic job goes on shrinking and growing (the frame's figures) */
    p3d_mnode_sent(m);        /* every node holds this placement: differences against it */
    int rc = p3d_hub_takeover(L, nodes, m->nnodes, m->me, leader, heard, why);
    free(nodes);
    return rc;
}
