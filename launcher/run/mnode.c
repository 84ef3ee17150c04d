/*
 * mnode.c — one node of a multi-node job (docs/multinode.md).
 *
 *   rendezvous (rdzv.c bootstrap, rdzv_tcp.c gather/place)
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

#include "controller.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct mnode {
    const p3d_opts *o;
    p3d_rdzv *r;
    int me, nnodes;
    p3d_hello hello;           /* this node's record (topology owned here) */
    p3d_place_msg pm;          /* the placement as received */
    p3d_cluster *cluster;      /* names of all nodes; only our topology */
    p3d_envv extra;
    char *program, *run_dir, *placement_path;
    int *fds;                  /* leader: TCP per node rank (-1 self/lost) */
    p3d_hello *all;            /* leader: every node's HELLO */
    int up;                    /* others: TCP to the leader */
} mnode;

static void err_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void err_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("par3drun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Written under a per-process temporary name and renamed: several agents
 * of one host (tests, benchmarks) may share the directory. */
static int write_bytes(const char *path, const char *p, size_t n, char **err)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return p3d_err(err, "cannot write %s: %s", tmp, strerror(errno));
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            close(fd);
            unlink(tmp);
            return p3d_err(err, "cannot write %s: %s", tmp, strerror(errno));
        }
        off += (size_t)w;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        unlink(tmp);
        return p3d_err(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    }
    return 0;
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
        m->all = calloc((size_t)m->nnodes, sizeof *m->all);
        m->fds = calloc((size_t)m->nnodes, sizeof *m->fds);
        if (!m->all || !m->fds) {
            p3d_err(&err, "out of memory");
            goto out;
        }
        /* gather moves our HELLO into all[0] and the gathered topology goes
         * to the cluster; this node's own view keeps a copy */
        p3d_node *own = node_clone(h->topo, &err);
        if (!own)
            goto out;
        if (p3d_tcp_gather(lfd, r, &m->hello, m->all, m->fds, o->verbose, &err) < 0) {
            p3d_node_free(own);
            rc = P3D_EXIT_FAIL;
            goto out;
        }
        m->hello.topo = own;
        close(lfd);
        lfd = -1;
        if (p3d_mnode_place(o, r, m->all, m->nnodes, &frame, &err) < 0) {
            p3d_tcp_refuse_all(m->fds, m->nnodes, err);
            goto out;
        }
        if (p3d_tcp_broadcast(m->fds, m->nnodes, &frame, m->all, &err) < 0) {
            /* the others learn through their dropped connections */
            rc = P3D_EXIT_LOST;
            goto out;
        }
        /* the leader reads the same bytes the agents read */
        if (p3d_place_decode(frame.p + 5, frame.len - 5, &m->pm, &err) < 0)
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
        m->up = p3d_tcp_join(r, h, &m->pm, o->verbose, &err);
        if (m->up < 0) {
            rc = strstr(err ? err : "", "refused") ? P3D_EXIT_BADINPUT : P3D_EXIT_FAIL;
            goto out;
        }
    }
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
    if (write_bytes(m->placement_path, m->pm.json, m->pm.json_len, &err) < 0) {
        rc = P3D_EXIT_FAIL;
        goto out;
    }

    L.o = o;
    L.cluster = m->cluster;
    L.pl = m->pm.pl;
    L.job_id = m->pm.job_id;
    L.run_dir = m->run_dir;
    L.placement_path = m->placement_path;
    L.master_addr = m->pm.master_addr;
    L.master_port = m->pm.master_port;
    L.nccl_port = m->pm.nccl_port;
    L.extra_env = m->extra.v;
    L.nextra = m->extra.n;
    L.tag = o->tag_output < 0 ? L.pl->world > 1 : o->tag_output;
    L.emulate = 0;
    L.program = m->program;
    L.events_fd = -1;
    L.t0 = p3d_now();
    if (o->verbose) {
        int nl = 0;
        for (int q = 0; q < L.pl->world; q++)
            nl += L.pl->ranks[q].node == m->me;
        fprintf(stderr, "par3drun: node[%d] %s: job %s, %d of %d ranks here, placement %s, MASTER_ADDR=%s "
                        "MASTER_PORT=%d\n",
                m->me, m->cluster->nodes[m->me].name, L.job_id, nl, L.pl->world, m->placement_path, L.master_addr,
                L.master_port);
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
    for (int i = 0; m->all && i < m->nnodes; i++)
        p3d_hello_free(&m->all[i]);
    free(m->all);
    free(m->fds);
    p3d_hello_free(&m->hello);
    p3d_place_msg_free(&m->pm);
    p3d_cluster_free(m->cluster);
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
