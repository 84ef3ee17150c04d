/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mnode.c — one node of a multi-node job (docs/multinode.md).
 *
 *   rendezvous (rdzv.c bootstrap, rdzv_tree_*.c gather/place)
 *   -> every node: the placement in memory + the same JSON bytes on disk
 *   -> every node forks its agent (agent.c) over a socket pair, exactly
 *      as the single-node launcher does:
 *        leader (node rank 0): runs the job controller (controller.c over
 *          supervise.c's transports): its own agent on the socket pair,
 *          the others over their TCP connections;
 *        other nodes: a relay (relay.c).
 * The messages are agent_proto.h's, relayed as P3D_MSG_FATE frames.
 * The placement itself: mnode_place.c.
 */
#include "mnode.h"
#include "rundir.h"
#include "termsafe.h"

#include "controller.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct mnode {
    const p3d_opts *o;
    p3d_jobstate job;          /* the placement of now, which L->job reads */
    p3d_rdzv *r;
    int me, nnodes;
    p3d_hello hello;           /* this node's record (topology owned here) */
    p3d_place_msg pm;          /* the placement as received */
    p3d_cluster *cluster;      /* names of all nodes; only our topology */
    p3d_envv extra;
    char *program, *run_dir, *placement_path;
    int own_run_dir;   /* no --run-dir: ours (p3d_rundir_finish) */
    int nkept;         /* placement.<R>.json files kept */
    int *fds;                  /* leader: TCP per node rank (-1 self/lost) */
    p3d_join *joins;           /* leader: every node's JOIN */
    p3d_join join;             /* this node's JOIN */
    p3d_gather mine;           /* this node's record, as the tree gathers it */
    p3d_tree_stats st;
    int up;                    /* others: TCP to the leader */
    p3d_launch *L;             /* the job, as the agents get it */
    p3d_plan_result res;       /* leader: the placement (replacements) */
    int have_res;
    p3d_mpeer *peers;          /* leader: every node's MASTER_ADDR/ports */
    p3d_wbuf rframe;           /* leader: the latest replacement's CPLACE */
    p3d_wbuf rdelta;           /*   and as a CDELTA against base */
    const unsigned char *base; /* leader: the CPLACE body every node holds: */
    size_t base_len;           /*   raw of m->pm or an old_pm (kept to the end) */
    p3d_health_res own_health; /* this node's pre-start --health-check */
    int own_checked;           /*   run (this node has --health-check) */
    p3d_health_res *health;    /* leader: every node's, by node rank */
    unsigned char *checked;    /*   which ran one */
    unsigned char *unhealthy;  /*   which failed it (L->unhealthy) */
    p3d_place_msg *old_pm;     /* placements replaced: kept to the end */
    p3d_cluster **old_cl;      /*   (names are borrowed from them) */
    int nold;
} mnode;

static void err_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void err_line(const char *fmt, ...)
{
    /* what it quotes may come from outside (a spec, a peer): one path to
     * the terminal (termsafe.h) */
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    fputs("par3drun: ", stderr);
    p3d_term_fputs(m ? m : "out of memory", stderr);
    fputc('\n', stderr);
    free(m);
}

static void random_hex(char *out, size_t nbytes)
{
    unsigned char r[64];
    if (nbytes > sizeof r)
        nbytes = sizeof r;
    if (getrandom(r, nbytes, 0) != (ssize_t)nbytes)
        for (size_t i = 0; i < nbytes; i++)
            r[i] = (unsigned char)(rand() ^ (int)getpid() ^ (int)(p3d_now() * 1e6));
    for (size_t i = 0; i < nbytes; i++)
        sprintf(out + 2 * i, "%02x", r[i]);
}

/* A deep copy of a node record, through the wire encoding (which also
 * proves the record survives the trip the agents' records take). */
static p3d_node *node_clone(const p3d_node *n, char **err)
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

/* The leader holds one control connection per node: its descriptor limit
 * is raised to the hard limit when the soft one is too small. */
static int fd_room(int nnodes, char **err)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)nnodes + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        return p3d_err(err, "the leader of %d nodes needs %llu file descriptors; the hard limit is %llu (raise it: "
                            "ulimit -Hn, /etc/security/limits.conf, or systemd LimitNOFILE)",
                       nnodes, (unsigned long long)need, (unsigned long long)rl.rlim_max);
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need * 2 ? need * 2 : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return p3d_err(err, "cannot raise the file descriptor limit to %llu: %s", (unsigned long long)rl.rlim_cur,
                       strerror(errno));
    return 0;
}

/* This node's JOIN and its record as the tree gathers it. */
static int own_record(mnode *m, char **err)
{
    const p3d_hello *h = &m->hello;
    p3d_join *j = &m->join;
    j->proto = P3D_WIRE_PROTO;
    j->version = strdup(P3D_VERSION);
    j->token = strdup(m->r->boot.token);
    j->job_id = strdup(m->r->boot.job_id);
    j->nnodes = m->nnodes;
    j->node_rank = m->me;
    j->hostname = strdup(h->hostname);
    j->addr = strdup(h->addr ? h->addr : "");
    j->port = m->me == 0 ? m->r->boot.leader_port : 0;
    if (!j->version || !j->token || !j->job_id || !j->hostname || !j->addr)
        return p3d_err(err, "out of memory");
    p3d_node *t = node_clone(h->topo, err);
    if (!t)
        return -1;
    p3d_grec rec = {.rank = m->me, .hostname = h->hostname, .addr = h->addr, .rack = h->rack,
                    .master_port = h->master_port, .nccl_port = h->nccl_port,
                    .health = !m->own_checked         ? P3D_GREC_HEALTH_NONE
                              : m->own_health.ok ? P3D_GREC_HEALTH_OK
                                                 : P3D_GREC_HEALTH_FAILED,
                    .health_how = m->own_health.how};
    return p3d_gather_add(&m->mine, &rec, t, err);
}

/* ---- a node replaced (docs/multinode.md, "When a node dies") ------------ */

/* L->adopt, every node (the leader after its own replace): the CPLACE body
 * becomes this node's placement for restart gen; placement.json replaced
 * in one rename, the previous one kept as placement.<gen>.json. */
static int mnode_adopt(void *ctx, int type, const unsigned char *body, size_t len, int gen, char **err)
{
    mnode *m = ctx;
    p3d_place_msg pm;
    p3d_cluster *c = NULL;
    char path[PATH_MAX];
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
    if (pm.nnodes != m->nnodes || strcmp(pm.job_id, m->pm.job_id) != 0) {
        p3d_err(err, "the new placement is for job %s on %d nodes; this node runs job %s on %d", pm.job_id,
                pm.nnodes, m->pm.job_id, m->nnodes);
        goto fail;
    }
    p3d_node *t = node_clone(m->cluster->topos[0], err);
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
    snprintf(path, sizeof path, "%s/placement.%d.json", m->run_dir, gen);
    if (gen + 1 > m->nkept)
        m->nkept = gen + 1;
    unlink(path);
    if (link(m->placement_path, path) < 0)
        fprintf(stderr, "par3drun: warning: cannot keep the previous placement as %s: %s\n", path, strerror(errno));
    if (p3d_rundir_write(m->run_dir, "placement.json", pm.json, pm.json_len, err) < 0)
        goto fail;
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
    m->job.gen0 = gen;
    return 0;
fail:
    p3d_place_msg_free(&pm);
    p3d_cluster_free(c);
    return -1;
}

/* L->replace, the leader: places again without the lost nodes (the
 * bundled policies move only their ranks, to a spare), adopts the new
 * placement here and keeps its frame for the others (L->job->cplace). */
static int mnode_replace(void *ctx, const int *lost, int nlost, int restart, const char *reason, char **msg)
{
    mnode *m = ctx;
    p3d_launch *L = m->L;
    int *was = NULL, compact = 0;
    char *json = NULL, *err = NULL;
    int rc = p3d_replace_place(m->o, &m->res, lost, nlost, restart, reason, L->events_fd, L->t0, &was, msg);
    if (rc != 0)
        return rc;
    rc = -1;
    p3d_report_in in = p3d_plan_report_in(&m->res);
    json = p3d_report_json(&in);
    p3d_wbuf_free(&m->rframe);
    if (!json) {
        p3d_err(&err, "cannot render the placement JSON (out of memory)");
        goto out;
    }
    if (p3d_mnode_encode(m->o, m->pm.job_id, &m->res, m->peers, json, &m->rframe, &compact, &err) < 0 ||
        mnode_adopt(m, P3D_MSG_CPLACE, p3d_frame_body(&m->rframe), p3d_frame_body_len(&m->rframe), restart, &err) < 0)
        goto out;
    m->job.cplace = &m->rframe;
    /* the nodes hold base (the last placement sent; a second loss before
     * the restart keeps it): the difference is what goes, when smaller */
    p3d_wbuf_free(&m->rdelta);
    m->job.cdelta = NULL;
    p3d_wbuf_begin(&m->rdelta, P3D_MSG_CDELTA);
    if (m->base && p3d_delta_make(m->base, m->base_len, p3d_frame_body(&m->rframe), p3d_frame_body_len(&m->rframe), &m->rdelta) == 0 &&
        p3d_wbuf_end(&m->rdelta) == 0 && m->rdelta.len < m->rframe.len)
        m->job.cdelta = &m->rdelta;
    if (m->o->verbose)
        fprintf(stderr, "par3drun: restart %d: the new placement is %zu bytes, %zu as the difference from the last "
                        "one sent; sending the %s to every node\n",
                restart, m->rframe.len, m->rdelta.len, L->job->cdelta ? "difference" : "whole placement");
    rc = p3d_replace_story(&m->res, was, lost, nlost, restart, reason, L->events_fd, L->t0, msg);
out:
    if (rc < 0 && err) {
        free(*msg);
        *msg = err;
        err = NULL;
    }
    free(err);
    free(json);
    free(was);
    return rc;
}

/* L->sent (leader): every node now holds L->job->cplace, which the leader
 * adopted as m->pm; later differences are made against its bytes. */
static void mnode_sent(void *ctx)
{
    mnode *m = ctx;
    m->base = m->pm.raw;
    m->base_len = m->pm.raw_len;
}

/* ---- --health-check before the start (docs/multinode.md) ----------------- */

/* This node's own check, run before it joins (all nodes at once, while
 * they would wait for the rendezvous anyway); the result travels in its
 * gathered record. P3D_NODE is the name this node knows itself by. */
static void own_health(mnode *m, const char *name)
{
    if (!m->o->health_check)
        return;
    m->own_checked = 1;
    p3d_health_run(m->o, &name, 1, NULL, &m->own_health);
    if (!m->own_health.ok)
        err_line("node %s failed its --health-check before the start (%s)%s", name, m->own_health.how,
                 m->me == 0 ? "" : "; the leader excludes it");
}

/* The leader: every node's pre-start result, from the gathered records,
 * kept for the events and the controller (p3d_gather is freed early). */
static int keep_health(mnode *m, const p3d_gather *g, char **err)
{
    m->health = calloc((size_t)m->nnodes, sizeof *m->health);
    m->checked = calloc((size_t)m->nnodes, 1);
    m->unhealthy = calloc((size_t)m->nnodes, 1);
    if (!m->health || !m->checked || !m->unhealthy)
        return p3d_err(err, "out of memory");
    for (int i = 0; i < g->nrec; i++) {
        const p3d_grec *x = &g->recs[i];
        if (x->rank < 0 || x->rank >= m->nnodes || x->health == P3D_GREC_HEALTH_NONE)
            continue;
        m->checked[x->rank] = 1;
        m->health[x->rank].ok = x->health == P3D_GREC_HEALTH_OK;
        m->unhealthy[x->rank] = x->health == P3D_GREC_HEALTH_FAILED;
        p3d_health_set_how(&m->health[x->rank], m->unhealthy[x->rank] ? x->health_how : "passed");
    }
    return 0;
}

/* The leader, once events.jsonl is open: a "health" event per node that
 * ran its check, a line per excluded node, one warning when the nodes'
 * options disagree. */
static void tell_health(mnode *m, const p3d_launch *L)
{
    int with = 0, without = 0;
    for (int i = 0; i < m->nnodes; i++) {
        with += m->checked[i];
        without += !m->checked[i];
        if (!m->checked[i])
            continue;
        p3d_health_event(L->events_fd, L->t0, m->pm.names[i], &m->health[i]);
        if (m->unhealthy[i])
            err_line("node %s failed its --health-check before the start (%s): excluded, it runs no rank; a spare "
                     "took its place",
                     m->pm.names[i], m->health[i].how);
    }
    if (with && without)
        err_line("warning: %d of %d nodes ran no --health-check (give every node the same options); they count as "
                 "healthy",
                 without, m->nnodes);
}

/* ---- the flow ------------------------------------------------------------- */

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int p3d_mnode_launch(const p3d_opts *o, p3d_rdzv *r)
{
    mnode M = {.o = o, .r = r, .me = r->boot.node_rank, .nnodes = r->boot.nnodes, .up = -1};
    mnode *m = &M;
    char *err = NULL;
    int rc = P3D_EXIT_BADINPUT, lfd = -1;
    p3d_wbuf frame = {0};
    p3d_launch L;
    memset(&L, 0, sizeof L);
    L.job = &m->job;
    L.events_fd = -1;

    if (o->argc < 1) {
        p3d_err(&err, "no program to launch: par3drun [options] -- PROGRAM [ARGS...]");
        goto out;
    }
    if (o->emulate) {
        p3d_err(&err, "--emulate runs a cluster file's nodes on one host; it does not mix with a multi-node "
                      "rendezvous (--rdzv %s)", r->ops->name);
        goto out;
    }
    if (o->cluster)
        fprintf(stderr, "par3drun: warning: --cluster is not used in a multi-node job: nodes come from the "
                        "rendezvous (racks: --slurm-topology)\n");
    m->program = p3d_resolve_program(o->argv[0], &err);
    if (!m->program) {
        rc = P3D_EXIT_BADINPUT; /* as cmd_launch.c: checked before any start */
        goto out;
    }
    for (size_t i = 0; i < o->nenv_files; i++)
        if (p3d_env_file_read(o->env_files[i], &m->extra, &err) < 0)
            goto out;
    for (size_t i = 0; i < o->nenv; i++)
        if (p3d_envv_put(&m->extra, o->env[i]) < 0) {
            p3d_err(&err, "--env '%s': expected KEY=VALUE", o->env[i]);
            goto out;
        }

    /* this node's record */
    /* Under Slurm the node's Slurm name: topology.conf speaks in those, and
     * they differ from the hostname on renamed or fake nodes */
    char host[256] = "localhost", name[256];
    gethostname(host, sizeof host - 1);
    const char *sn = getenv("SLURMD_NODENAME");
    snprintf(name, sizeof name, "%s", sn && *sn ? sn : host);
    p3d_hello *h = &m->hello;
    h->proto = P3D_WIRE_PROTO;
    h->version = strdup(P3D_VERSION);
    h->token = strdup(r->boot.token);
    h->nnodes = m->nnodes;
    h->node_rank = m->me;
    h->hostname = strdup(name);
    h->master_port = p3d_free_port();
    h->nccl_port = 0;
    if (!strcmp(base_name(m->program), "p3d-worker"))
        for (int k = 0; k < 8 && (!h->nccl_port || h->nccl_port == h->master_port); k++)
            h->nccl_port = p3d_free_port();
    if (p3d_topo_load(o->topology ? o->topology : "local", &h->topo, &err) < 0 ||
        p3d_node_apply_allocation(&h->topo, o->nproc_per_node, &err) < 0)
        goto out;
    h->rack = p3d_slurm_env_rack(); /* this node's leaf switch, if Slurm says */

    if (m->me == 0) {
        /* the leader: listen, publish, gather, place, send */
        if (!r->boot.leader_host[0])
            snprintf(r->boot.leader_host, sizeof r->boot.leader_host, "%s", host);
        if (!r->boot.token[0]) {
            random_hex(r->boot.token, 24);
            free(h->token);
            h->token = strdup(r->boot.token);
        }
        if (!r->boot.job_id[0])
            random_hex(r->boot.job_id, 6);
        h->job_id = strdup(r->boot.job_id);
        h->addr = strdup(r->boot.leader_host);
        lfd = p3d_tcp_listen(r->boot.leader_host, r->boot.leader_port, &r->boot.leader_port, &err);
        if (lfd < 0) {
            rc = P3D_EXIT_FAIL;
            goto out;
        }
        if (o->verbose)
            fprintf(stderr, "par3drun: rendezvous (%s): leader listening on %s:%d for %d nodes, job %s\n",
                    r->ops->name, r->boot.leader_host, r->boot.leader_port, m->nnodes, r->boot.job_id);
        if (p3d_rdzv_publish(r, &err) < 0) {
            rc = P3D_EXIT_FAIL;
            goto out;
        }
        int fanout;
        if (p3d_rdzv_fanout(o, &fanout, &err) < 0 || fd_room(m->nnodes, &err) < 0) {
            rc = P3D_EXIT_BADINPUT;
            goto out;
        }
        m->joins = calloc((size_t)m->nnodes, sizeof *m->joins);
        m->fds = calloc((size_t)m->nnodes, sizeof *m->fds);
        if (!m->joins || !m->fds) {
            p3d_err(&err, "out of memory");
            goto out;
        }
        own_health(m, name);
        if (own_record(m, &err) < 0)
            goto out;
        p3d_gather g;
        if (p3d_tree_gather(lfd, r, fanout, &m->join, &m->mine, &g, m->fds, m->joins, o->verbose, &m->st, &err) < 0) {
            rc = P3D_EXIT_FAIL;
            goto out;
        }
        close(lfd);
        lfd = -1;
        int e = keep_health(m, &g, &err);
        if (e == 0)
            e = p3d_mnode_place_keep(o, r, &g, m->nnodes, &frame, &m->st, &m->res, &m->peers, &err);
        p3d_gather_free(&g);
        m->have_res = e == 0;
        if (e < 0) {
            /* a failed --health-check that nothing can make up for: the
             * job stops before anything runs, as a lost node would */
            if (e == -2)
                rc = P3D_EXIT_LOST;
            p3d_tcp_refuse_all(m->fds, m->nnodes, err);
            goto out;
        }
        /* down the tree: the leader's own children; they pass it on */
        int nk = m->nnodes - 1 < fanout ? m->nnodes - 1 : fanout;
        int ranks[P3D_FANOUT_MAX];
        for (int i = 0; i < nk; i++)
            ranks[i] = i + 1;
        double t1 = p3d_now();
        p3d_wbuf sealed = {0};
        if (p3d_frame_seal(&frame, r->boot.token, &sealed) < 0)
            p3d_err(&err, "rendezvous: cannot seal the placement frame (out of memory, or libcrypto failed)");
        int sent = sealed.len ? p3d_tree_send(m->fds + 1, ranks, nk, &sealed, 30 + 0.01 * m->nnodes, &m->st, &err)
                              : -1;
        p3d_wbuf_free(&sealed);
        if (sent < 0) {
            /* the others learn through their dropped connections */
            rc = P3D_EXIT_LOST;
            goto out;
        }
        m->st.t_send = p3d_now() - t1;
        if (o->verbose)
            fprintf(stderr, "par3drun: rendezvous: %d nodes: records in after %.3f s, placed in %.3f s, the placement "
                            "(%zu bytes, JSON %zu bytes) sent to %d tree children in %.3f s; the leader sent %llu bytes\n",
                    m->nnodes, m->st.t_join, m->st.t_place, m->st.cplace_len, m->st.json_len, nk, m->st.t_send,
                    (unsigned long long)m->st.bytes_sent);
        /* the leader expands the same bytes the agents expand */
        if (p3d_cplace_decode(p3d_frame_body(&frame), p3d_frame_body_len(&frame), &m->pm, &err) < 0)
            goto out;
    } else {
        h->job_id = strdup(r->boot.job_id);
        if (p3d_rdzv_publish(r, &err) < 0) {
            rc = P3D_EXIT_FAIL;
            goto out;
        }
        /* the backend may just have handed over the token (pmix, etcd) */
        free(h->token);
        h->token = strdup(r->boot.token);
        own_health(m, name);
        if (own_record(m, &err) < 0)
            goto out;
        m->up = p3d_tree_join(r, &m->join, &m->mine, &m->pm, o->verbose, &m->st, &err);
        if (m->up < 0) {
            /* refused by the leader: 2; no rendezvous (a late agent's
             * "Connection refused" included): 1, as the leader's timeout */
            rc = m->up == -2 ? P3D_EXIT_BADINPUT : P3D_EXIT_FAIL;
            goto out;
        }
    }
    /* the fate channel's frames carry a tag keyed by the job token
     * (rdzv.h, P3D_TAG_LEN): both ends hold it from here on */
    p3d_wire_set_key(r->boot.token);
    if (m->pm.nnodes != m->nnodes) {
        p3d_err(&err, "the leader placed on %d nodes, this node expected %d", m->pm.nnodes, m->nnodes);
        goto out;
    }
    {
        p3d_node *t = m->hello.topo;
        m->hello.topo = NULL;
        if (p3d_mnode_local_cluster(o, t, &m->pm, m->me, &m->cluster, &err) < 0)
            goto out;
    }

    /* the run dir: the placement JSON, the same bytes on every node */
    if (o->run_dir) {
        m->run_dir = strdup(o->run_dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        if (asprintf(&m->run_dir, "%s/par3drun-%s.%d", tmp && *tmp ? tmp : "/tmp", m->pm.job_id, m->me) < 0)
            m->run_dir = NULL;
        m->own_run_dir = !o->keep_run_dir;
    }
    if (!m->run_dir || p3d_rundir_make(m->run_dir, &err) < 0) { /* rundir.h: private or refused */
        if (!m->run_dir)
            p3d_err(&err, "out of memory");
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    int hang_sig;
    if ((o->log_dir && p3d_check_log_dir(o->log_dir, &err) < 0) ||
        p3d_check_output_ranks(o, m->pm.pl->world, &err) < 0 ||
        (o->hang_signal && p3d_signal_parse(o->hang_signal, &hang_sig, &err) < 0))
        goto out;
    if (asprintf(&m->placement_path, "%s/placement.json", m->run_dir) < 0) {
        m->placement_path = NULL;
        p3d_err(&err, "out of memory");
        goto out;
    }
    if (p3d_rundir_write(m->run_dir, "placement.json", m->pm.json, m->pm.json_len, &err) < 0) {
        rc = P3D_EXIT_FAIL;
        goto out;
    }

    L.o = o;
    m->job.cluster = m->cluster;
    m->job.pl = m->pm.pl;
    m->job.job_id = m->pm.job_id;
    L.run_dir = m->run_dir;
    L.run_dir_own = m->own_run_dir;
    L.placement_path = m->placement_path;
    m->job.master_addr = m->pm.master_addr;
    m->job.master_port = m->pm.master_port;
    m->job.nccl_port = m->pm.nccl_port;
    L.extra_env = m->extra.v;
    L.nextra = m->extra.n;
    L.tag = o->tag_output < 0 ? L.job->pl->world > 1 : o->tag_output;
    L.emulate = 0;
    L.program = m->program;
    L.events_fd = m->me == 0 ? p3d_events_open(m->run_dir) : -1;
    L.t0 = p3d_now();
    m->L = &L;
    L.adopt = mnode_adopt;
    L.adopt_ctx = m;
    L.sent = mnode_sent;
    if (m->me == 0)
        mnode_sent(m); /* the placement every node got at the rendezvous */
    if (m->me == 0 && o->spares > 0 && m->have_res) {
        L.replace = mnode_replace;
        L.replace_ctx = m;
    }
    if (m->me == 0 && m->checked) {
        tell_health(m, &L);
        L.unhealthy = m->unhealthy;
    }
    if (o->verbose) {
        int nl = 0;
        for (int q = 0; q < L.job->pl->world; q++)
            nl += L.job->pl->ranks[q].node == m->me;
        fprintf(stderr, "par3drun: node[%d] %s: job %s, %d of %d ranks here, placement %s, MASTER_ADDR=%s "
                        "MASTER_PORT=%d\n",
                m->me, m->cluster->nodes[m->me].name, L.job->job_id, nl, L.job->pl->world, m->placement_path, L.job->master_addr,
                L.job->master_port);
    }
    if (m->me == 0) {
        /* the job controller: our own agent forked here, the others over
         * their rendezvous connections (handed over to it) */
        int *nodes = calloc((size_t)m->nnodes, sizeof *nodes);
        if (!nodes) {
            p3d_err(&err, "out of memory");
            rc = P3D_EXIT_FAIL;
            goto out;
        }
        for (int i = 0; i < m->nnodes; i++)
            nodes[i] = i;
        m->fds[0] = -1;
        rc = p3d_hub_run(&L, nodes, m->nnodes, m->fds);
        free(nodes);
        for (int i = 0; i < m->nnodes; i++)
            m->fds[i] = -1;
    } else {
        rc = p3d_relay_run(&L, m->me, m->up);
        m->up = -1;
    }
out:
    if (err) {
        err_line("%s", err);
        if (m->fds && m->me == 0 && rc != 0)
            p3d_tcp_refuse_all(m->fds, m->nnodes, err);
    }
    free(err);
    if (lfd >= 0)
        close(lfd);
    if (m->up >= 0)
        close(m->up);
    for (int i = 0; m->fds && i < m->nnodes; i++)
        if (m->fds[i] >= 0)
            close(m->fds[i]);
    for (int i = 0; m->joins && i < m->nnodes; i++)
        p3d_join_free(&m->joins[i]);
    free(m->joins);
    p3d_join_free(&m->join);
    p3d_gather_free(&m->mine);
    free(m->fds);
    p3d_hello_free(&m->hello);
    if (L.events_fd >= 0)
        close(L.events_fd);
    L.events_fd = -1;
    p3d_rundir_finish(m->run_dir, m->own_run_dir, rc, L.job->pl ? L.job->pl->world : 0, m->nkept);
    p3d_place_msg_free(&m->pm);
    p3d_cluster_free(m->cluster);
    for (int i = 0; i < m->nold; i++) {
        p3d_place_msg_free(&m->old_pm[i]);
        p3d_cluster_free(m->old_cl[i]);
    }
    free(m->old_pm);
    free(m->old_cl);
    if (m->have_res)
        p3d_plan_result_free(&m->res);
    p3d_mpeer_free(m->peers, m->nnodes);
    p3d_wbuf_free(&m->rframe);
    p3d_wbuf_free(&m->rdelta);
    free(m->health);
    free(m->checked);
    free(m->unhealthy);
    p3d_envv_free(&m->extra);
    p3d_wbuf_free(&frame);
    free(m->program);
    free(m->run_dir);
    free(m->placement_path);
    return rc;
}

int p3d_rdzv_launch(const p3d_opts *o)
{
    p3d_rdzv r;
    char *err = NULL;
    /* --emulate is a one-host job by definition: inside an allocation it
     * must not turn into a Slurm rendezvous by auto-detection */
    if (o->emulate && (!o->rdzv || !strcmp(o->rdzv, "auto")))
        return -1;
    int k = p3d_rdzv_open(o, &r, &err);
    if (k == 0)
        return -1;
    if (k < 0) {
        err_line("%s", err ? err : "rendezvous failed");
        free(err);
        return P3D_EXIT_BADINPUT;
    }
    int rc = p3d_mnode_launch(o, &r);
    p3d_rdzv_close(&r);
    return rc;
}
