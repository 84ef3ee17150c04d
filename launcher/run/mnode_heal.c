/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode_heal.c — the placement every node of a multi-node job holds, placed
 * again (docs/multinode.md, "When a node dies"; docs/launch.md, "Elastic
 * width"): a new placement adopted on a node, the leader's replacement of a
 * lost node, its shrink and grow, and the successor list built again
 * without the nodes lost. Below mnode.c, mnode_failover.c (a successor
 * heals too) and mnode_join.c (a joiner grows the list).
 */
#include "mnode_int.h"
#include "prepare.h"
#include "rundir.h"
#include "say.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A deep copy of a node record, through the wire encoding (which also
 * proves the record survives the trip the agents' records take). */
p3d_node *p3d_mnode_node_clone(const p3d_node *n, char **err)
{
    p3d_wbuf b = {0};
    p3d_node_encode(n, &b);
    if (b.oom) {
        p3d_wbuf_free(&b);
        p3d_err(err, "out of memory");
        return NULL;
    }
    p3d_rbuf r = {.p = b.p, .len = b.len};
    p3d_node *c = p3d_node_decode(&r, err);
    p3d_wbuf_free(&b);
    return c;
}

/* ---- a node replaced (docs/multinode.md, "When a node dies") ------------ */

/* The width figures every node holds (the placement frame's): full_dp
 * while the job runs below its full width, for the ranks' batch; the
 * leader's batch figures on a node given none (a joined one); and the
 * leader's --fault-window, which every node holds its ranks for. */
void p3d_mnode_width(mnode *m)
{
    int dp = p3d_mesh_size(&m->pm.pl->mesh, P3D_DIM_DP);
    m->job.full_dp = m->pm.full_dp > dp ? m->pm.full_dp : 0;
    m->job.min_dp = m->pm.min_dp;
    const p3d_opts *o = m->o;
    m->job.batch = m->pm.batch;
    m->job.batch_leader = o->global_batch <= 0 && o->micro_batch <= 0 && o->micro_batches <= 0;
    m->job.fault_window = m->pm.fault_ms / 1000.0;
    m->job.fault_leader = 1;
}

/* L->mn->adopt, every node (the leader after its own replace): the CPLACE body
 * becomes this node's placement for restart gen; placement.json replaced
 * in one rename, the previous one kept as placement.<gen>.json. */
int p3d_mnode_adopt(void *ctx, int type, const unsigned char *body, size_t len, int gen, char **err)
{
    mnode *m = ctx;
    p3d_place_msg pm;
    p3d_cluster *c = NULL;
    memset(&pm, 0, sizeof pm);
    unsigned char *full = NULL;
    size_t fl = 0;
    if (type == P3D_MSG_CDELTA) {
        if (p3d_delta_apply(m->pm.raw, m->pm.raw_len, body, len, &full, &fl, err) < 0)
            return -1;
        body = full;
        len = fl;
    }
    int d = p3d_cplace_decode(body, len, &pm, err);
    free(full);
    if (d < 0)
        return -1;
    /* gen < 0: the cluster grew (a node joined the running job), nothing
     * restarts; every node then holds the new count */
    if ((gen >= 0 ? pm.nnodes != m->nnodes : pm.nnodes < m->nnodes) || strcmp(pm.job_id, m->pm.job_id) != 0) {
        p3d_err(err, "the new placement is for job %s on %d nodes; this node runs job %s on %d", pm.job_id, pm.nnodes,
                m->pm.job_id, m->nnodes);
        goto fail;
    }
    p3d_node *t = p3d_mnode_node_clone(m->cluster->topos[0], err);
    if (!t || p3d_mnode_local_cluster(m->o, t, &pm, m->me, &c, err) < 0)
        goto fail;
    p3d_place_msg *op = realloc(m->old_pm, (size_t)(m->nold + 1) * sizeof *op);
    if (op)
        m->old_pm = op;
    p3d_cluster **oc = realloc(m->old_cl, (size_t)(m->nold + 1) * sizeof *oc);
    if (oc)
        m->old_cl = oc;
    if (!op || !oc) {
        p3d_err(err, "out of memory");
        goto fail;
    }
    if (gen >= 0 ? p3d_prep_replace_json(&m->prep, gen, pm.json, pm.json_len, err) < 0
                 : p3d_rundir_write(m->prep.run_dir, "placement.json", pm.json, pm.json_len, err) < 0)
        goto fail;
    if (gen < 0)
        m->nnodes = pm.nnodes;
    m->old_pm[m->nold] = m->pm;
    m->old_cl[m->nold++] = m->cluster;
    m->pm = pm;
    m->cluster = c;
    m->job.cluster = c;
    m->job.pl = m->pm.pl;
    m->job.job_id = m->pm.job_id;
    m->job.master_addr = m->pm.master_addr;
    m->job.master_port = m->pm.master_port;
    m->job.nccl_port = m->pm.nccl_port;
    if (gen >= 0)
        m->job.gen0 = gen;
    p3d_mnode_width(m);
    return 0;
fail:
    p3d_place_msg_free(&pm);
    p3d_cluster_free(c);
    return -1;
}

/* The leader placed again (a replacement, a shrink, a grow): the new
 * placement adopted here and its frame kept for the others
 * (L->job->cplace, or the difference from the one they hold); the
 * successor list built again without the nodes lost. 0, or -1 with *err. */
static int mnode_publish(mnode *m, int restart, char **err)
{
    const p3d_launch *L = m->L;
    int compact = 0;
    p3d_job j = m->res.job; /* the report of the width it runs at */
    j.mesh.size[P3D_DIM_DP] = p3d_mesh_size(&m->res.pl->mesh, P3D_DIM_DP);
    p3d_report_in in = p3d_plan_report_in(&m->res);
    in.job = &j;
    in.preflight_json = m->pf_json; /* the figures of the start, in every placement after it */
    char *json = p3d_report_json(&in);
    p3d_wbuf_free(&m->rframe);
    if (!json)
        return p3d_err(err, "cannot render the placement JSON (out of memory)");
    int rc = p3d_mnode_encode(m->o, m->pm.job_id, &m->res, m->peers, json, &m->rframe, &compact, err) < 0 ||
                     p3d_mnode_adopt(m, P3D_MSG_CPLACE, p3d_frame_body(&m->rframe), p3d_frame_body_len(&m->rframe),
                                     restart, err) < 0
                 ? -1
                 : 0;
    free(json);
    if (rc < 0)
        return -1;
    m->job.cplace = &m->rframe;
    /* the nodes hold base (the last placement sent; a second loss before
     * the restart keeps it): the difference is what goes, when smaller */
    p3d_wbuf_free(&m->rdelta);
    m->job.cdelta = NULL;
    p3d_wbuf_begin(&m->rdelta, P3D_MSG_CDELTA);
    if (m->base &&
        p3d_delta_make(m->base, m->base_len, p3d_frame_body(&m->rframe), p3d_frame_body_len(&m->rframe), &m->rdelta) ==
            0 &&
        p3d_wbuf_end(&m->rdelta) == 0 && m->rdelta.len < m->rframe.len)
        m->job.cdelta = &m->rdelta;
    if (m->o->verbose)
        fprintf(stderr,
                "par3drun: restart %d: the new placement is %zu bytes, %zu as the difference from the last "
                "one sent; sending the %s to every node\n",
                restart, m->rframe.len, m->rdelta.len, L->job->cdelta ? "difference" : "whole placement");
    /* the successor list without the nodes lost now, resent with the
     * restart (hub_respawn); kept as it was if it cannot be built */
    if (m->succ_list) {
        if (p3d_mnode_successors(m, restart) == 0)
            m->hooks->successors = &m->sframe; /* a successor's first list (the leader's is set already) */
        else if (m->o->verbose)
            fprintf(stderr,
                    "par3drun: restart %d: the successor list could not be built again; the nodes keep the "
                    "last one\n",
                    restart);
    }
    return 0;
}

/* L->replace, the leader: places again without the lost nodes (the
 * bundled policies move only their ranks, to a spare; an elastic job
 * without one drops whole replicas) and publishes it. */
int p3d_mnode_replace(void *ctx, const int *lost, int nlost, int restart, const char *reason, char **msg)
{
    mnode *m = ctx;
    const p3d_launch *L = m->L;
    int *was = NULL;
    char *err = NULL;
    int rc = p3d_place_heal(m->o, &m->res, lost, nlost, restart, reason, L->events_fd, L->t0, &was, msg);
    /* only spares lost: no restart carries a new successor list, so the
     * hub sends this one as it is (hub_replace); a frozen spare kept on
     * the list would hold every node that loses the leader */
    if (rc == 1 && m->succ_list && p3d_mnode_successors(m, m->job.gen0) == 0)
        m->hooks->successors = &m->sframe;
    if (rc != 0 && rc != 2)
        return rc;
    if (mnode_publish(m, restart, &err) < 0) {
        free(*msg);
        *msg = err;
        rc = -1;
    } else if (rc == 0) {
        rc = p3d_replace_story(&m->res, was, lost, nlost, restart, reason, L->events_fd, L->t0, msg);
    }
    free(was);
    return rc;
}

/* The leader's (and a successor's) replacement ops, and an elastic job's
 * grow. */
void p3d_mnode_heal_ops(mnode *m, p3d_launch *L)
{
    L->replace = p3d_mnode_replace;
    L->replace_ctx = m;
    if (m->res.job.min_dp > 0) {
        L->grow_room = p3d_mnode_grow_room;
        L->grow = p3d_mnode_grow;
    }
}

/* L->grow_room and L->grow, the leader: spares hold whole replicas again. */
int p3d_mnode_grow_room(void *ctx)
{
    mnode *m = ctx;
    return p3d_place_grow_room(&m->res);
}

int p3d_mnode_grow(void *ctx, int restart, const char *when, char **msg)
{
    mnode *m = ctx;
    char *err = NULL;
    int rc = p3d_place_grow(m->o, &m->res, restart, when, m->L->events_fd, m->L->t0, msg);
    if (rc == 0 && mnode_publish(m, restart, &err) < 0) {
        free(*msg);
        *msg = err;
        rc = -1;
    }
    return rc;
}

/* ---- the successor list ------------------------------------------------------- */

/* The leader: the successor list (at most 8 candidates, failover.h),
 * untagged, into m->sframe; the hub (each node's channel tags it)
 * sends it to each node (L->mn->successors) once it first speaks, and again
 * after every restart. gen: the generation it is for. Nodes lost or
 * excluded in the current placement are no candidates: after a
 * replacement the list is built again without them (p3d_mnode_replace),
 * so a node that lost the leader does not first wait on a dead or fenced
 * one. 0, or -1 (no failover then; m->sframe is kept as it was). */
int p3d_mnode_successors(mnode *m, int gen)
{
    const char **addr = calloc((size_t)m->nnodes, sizeof *addr);
    int *port = calloc((size_t)m->nnodes, sizeof *port), rc = -1;
    unsigned char *lost = calloc((size_t)m->nnodes, 1);
    p3d_successors s;
    if (addr && port && lost) {
        const p3d_cluster *c = m->have_res ? m->res.cluster : NULL;
        for (int i = 0; i < m->nnodes; i++) {
            addr[i] = m->peers[i].addr;
            port[i] = m->peers[i].failover_port;
            if (c && (size_t)i < c->nnodes)
                lost[i] = c->nodes[i].role == P3D_NODE_LOST || c->nodes[i].role == P3D_NODE_EXCLUDED;
        }
        p3d_wbuf f = {0};
        if (p3d_failover_list(m->nnodes, m->me, lost, addr, port, gen, &s) == 0 && p3d_successors_frame(&s, &f) == 0) {
            p3d_wbuf_free(&m->sframe);
            m->sframe = f;
            rc = 0;
        } else {
            p3d_wbuf_free(&f);
        }
    }
    free(lost);
    free(addr);
    free(port);
    return rc;
}
