/*
 * mnode.c — one node of a multi-node job (docs/multinode.md).
 *
 *   rendezvous (rdzv.c bootstrap, rdzv_tcp.c gather/place)
 *   -> every node: the placement in memory + the same JSON bytes on disk
 *   -> this process forks the node's agent (supervise.c, p3d_agent_run)
 *      over a SOCK_SEQPACKET pair, exactly as the single-node launcher
 *      does, and becomes its upstream:
 *        leader (node rank 0): the job's controller — it decides restarts
 *          and the job's fate from every node's reports (its own agent on
 *          the socket pair, the others over their TCP connections);
 *        other nodes: a relay — agent packets go up as FATE frames,
 *          the leader's orders come down to the agent.
 *
 * Packets are supervise.c's ("F gen code rank\nsummary", "D gen", "R gen",
 * "T sig", "U sig") plus two of the job-fate channel: "S sig" (node ->
 * leader: a signal arrived here, stop the job) and "T sig code" (the stop
 * order carries the job's exit code, so every node exits with it).
 */
#include "rdzv.h"

#include "launch.h"
#include "place.h"

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

/* The job's code when a node's agent is lost (connection dropped). */
#define P3D_EXIT_LOST P3D_EXIT_FAIL

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

/* ---- the leader's placement ---------------------------------------------- */

/* The cluster in node-rank order from the HELLOs. Records with the same
 * hash share one topology (as a cluster file's nodes do); hostnames that
 * occur twice (several agents on one host) become "host:RANK". */
static int gathered_cluster(mnode *m, p3d_cluster **out, char **err)
{
    int n = m->nnodes, rc = -1;
    p3d_cluster *c = NULL;
    p3d_node *first = m->all[0].topo;
    m->all[0].topo = NULL;
    if (p3d_cluster_from_node(first, &c, err) < 0)
        goto out;
    p3d_cnode *nodes = realloc(c->nodes, (size_t)n * sizeof *nodes);
    p3d_node **topos = realloc(c->topos, (size_t)n * sizeof *topos);
    if (nodes)
        c->nodes = nodes;
    if (topos)
        c->topos = topos;
    if (!nodes || !topos) {
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 1; i < n; i++) {
        p3d_node *t = m->all[i].topo;
        m->all[i].topo = NULL;
        const p3d_node *use = NULL;
        for (size_t k = 0; k < c->ntopos && !use; k++)
            if (!strcmp(c->topos[k]->hash, t->hash))
                use = c->topos[k];
        if (use) {
            p3d_node_free(t);
        } else {
            c->topos[c->ntopos++] = t;
            use = t;
        }
        c->nodes[i] = (p3d_cnode){.name = NULL, .topo = use, .rack = 0, .nvl_domain = -1};
        c->nnodes++;
    }
    for (int i = 0; i < n; i++) {
        const char *h = m->all[i].hostname && m->all[i].hostname[0] ? m->all[i].hostname : "node";
        int dup = 0;
        for (int k = 0; k < n && !dup; k++)
            dup = k != i && m->all[k].hostname && !strcmp(m->all[k].hostname, h);
        char *name = NULL;
        if (asprintf(&name, dup ? "%s:%d" : "%s", h, i) < 0) {
            p3d_err(err, "out of memory");
            goto out;
        }
        free(c->nodes[i].name);
        c->nodes[i].name = name;
    }
    /* reports name where the nodes came from */
    free(c->source);
    if (asprintf(&c->source, "rendezvous:%s", m->r->ops->name) < 0) {
        c->source = NULL;
        p3d_err(err, "out of memory");
        goto out;
    }
    const p3d_opts *o = m->o;
    if (o->nproc_per_node > 0 && p3d_cluster_set_slots(c, o->nproc_per_node, err) < 0)
        goto out;
    if (o->slurm_topology) {
        if (p3d_cluster_apply_slurm_topology(c, o->slurm_topology, err) < 0)
            goto out;
    } else { /* racks the agents read from SLURM_TOPOLOGY_ADDR */
        char **racks = calloc((size_t)n, sizeof *racks);
        if (!racks) {
            p3d_err(err, "out of memory");
            goto out;
        }
        for (int i = 0; i < n; i++)
            racks[i] = m->all[i].rack;
        int e = p3d_cluster_set_racks(c, racks, err);
        free(racks);
        if (e < 0)
            goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    p3d_cluster_free(c);
    return rc;
}

/* Places on the gathered cluster and builds the PLACE frame. */
static int leader_place(mnode *m, p3d_wbuf *frame, char **err)
{
    int rc = -1, n = m->nnodes;
    p3d_cluster *c = NULL;
    p3d_plan_result res;
    int placed = 0;
    char *json = NULL;
    memset(&res, 0, sizeof res);
    if (gathered_cluster(m, &c, err) < 0)
        goto out;
    {
        p3d_cluster *own = c;
        c = NULL; /* p3d_place_cluster owns it from here, also on failure */
        if (p3d_place_cluster(m->o, own, &res, err) < 0)
            goto out;
    }
    placed = 1;
    if (res.an && res.an->nerrors > 0) {
        char buf[4096];
        int k = snprintf(buf, sizeof buf, "the placement fails %d error-level check%s; nothing started:",
                         res.an->nerrors, res.an->nerrors == 1 ? "" : "s");
        for (size_t i = 0; i < res.an->nchecks && k < (int)sizeof buf; i++)
            if (res.an->checks[i].severity == P3D_SEV_ERROR)
                k += snprintf(buf + k, sizeof buf - (size_t)k, " %s: %s", res.an->checks[i].code,
                              res.an->checks[i].message);
        p3d_err(err, "%s", buf);
        goto out;
    }
    p3d_report_in in = p3d_plan_report_in(&res);
    json = p3d_report_json(&in);
    if (!json) {
        p3d_err(err, "cannot render the placement JSON (out of memory)");
        goto out;
    }
    const p3d_placement *pl = res.pl;
    int n0 = pl->ranks[0].node;
    p3d_place_msg pm = {
        .job_id = m->all[0].job_id,
        .master_addr = m->o->master_addr ? (char *)m->o->master_addr : m->all[n0].addr,
        .master_port = m->o->master_port ? m->o->master_port : m->all[n0].master_port,
        .nccl_port = m->all[n0].nccl_port,
        .nnodes = n,
        .pl = res.pl,
        .json = json,
        .json_len = strlen(json),
    };
    pm.names = calloc((size_t)n, sizeof *pm.names);
    pm.hashes = calloc((size_t)n, sizeof *pm.hashes);
    if (!pm.names || !pm.hashes) {
        free(pm.names);
        free(pm.hashes);
        p3d_err(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        pm.names[i] = res.cluster->nodes[i].name;
        pm.hashes[i] = (char *)res.cluster->nodes[i].topo->hash;
    }
    int e = p3d_place_encode(&pm, frame);
    free(pm.names);
    free(pm.hashes);
    if (e < 0) {
        p3d_err(err, "cannot encode the placement (out of memory, or over %u bytes)", P3D_WIRE_MAX);
        goto out;
    }
    if (m->o->verbose)
        fprintf(stderr,
                "par3drun: rendezvous: placed %d ranks on %d nodes (cluster %.1f ms, policy %.1f ms, checks %.1f "
                "ms, baseline %.1f ms); placement %zu bytes\n",
                pl->world, n, 1e3 * res.t_cluster, 1e3 * res.t_policy, 1e3 * res.t_check, 1e3 * res.t_baseline,
                strlen(json));
    rc = 0;
out:
    free(json);
    if (placed)
        p3d_plan_result_free(&res);
    p3d_cluster_free(c);
    return rc;
}

/* ---- this node's view of the job ----------------------------------------- */

/* The agent's cluster: every node's name (rank environment, tags), and
 * only this node's topology — the only one an agent reads (binding,
 * CUDA_VISIBLE_DEVICES, the root-cause summary). */
static int local_cluster(mnode *m, char **err)
{
    int n = m->pm.nnodes, rc = -1;
    p3d_node *t = m->hello.topo;
    m->hello.topo = NULL;
    if (p3d_cluster_from_node(t, &m->cluster, err) < 0)
        goto out;
    p3d_cluster *c = m->cluster;
    if (m->o->nproc_per_node > 0 && p3d_cluster_set_slots(c, m->o->nproc_per_node, err) < 0)
        goto out;
    if (strcmp(c->topos[0]->hash, m->pm.hashes[m->me]) != 0) {
        p3d_err(err, "node[%d] %s: the leader placed on topology hash %s, this node has %s (different "
                     "--nproc-per-node on this node?)",
                m->me, m->pm.names[m->me], m->pm.hashes[m->me], c->topos[0]->hash);
        goto out;
    }
    p3d_cnode *nodes = realloc(c->nodes, (size_t)n * sizeof *nodes);
    if (!nodes) {
        p3d_err(err, "out of memory");
        goto out;
    }
    c->nodes = nodes;
    free(c->nodes[0].name);
    for (int i = 0; i < n; i++) {
        c->nodes[i] = (p3d_cnode){.name = strdup(m->pm.names[i]), .topo = i == m->me ? c->topos[0] : NULL,
                                  .rack = 0, .nvl_domain = -1};
        if (!c->nodes[i].name) {
            c->nnodes = (size_t)i;
            p3d_err(err, "out of memory");
            goto out;
        }
    }
    c->nnodes = (size_t)n;
    rc = 0;
out:
    return rc;
}

/* ---- the job-fate loops --------------------------------------------------- */

typedef struct fate {
    mnode *m;
    const p3d_launch *L;
    int sfd;
    pid_t agent;               /* local agent, 0 once reaped */
    int agent_status;
    int local;                 /* socket pair to the local agent */
    p3d_framer *fr;            /* per node rank (leader) or [0] (relay) */
    int *done_gen;             /* leader: per node */
    int gen;
    int stopping;
    double stop_at;
    int code;                  /* the job's code once decided, -1 undecided */
    char *summary;             /* leader: root cause, printed once */
} fate;

static void send_local(fate *f, const char *s)
{
    if (f->local >= 0)
        while (send(f->local, s, strlen(s), MSG_NOSIGNAL) < 0 && errno == EINTR)
            ;
}

static int send_frame(int fd, const char *s, size_t len)
{
    p3d_wbuf b = {0};
    p3d_wbuf_begin(&b, P3D_MSG_FATE);
    p3d_wbuf_bytes(&b, s, len);
    int rc = p3d_wbuf_end(&b) == 0 ? p3d_frame_write(fd, &b, NULL) : -1;
    p3d_wbuf_free(&b);
    return rc;
}

/* Leader: sends a packet to every node (its own agent included). */
static void l_all(fate *f, const char *s)
{
    send_local(f, s);
    for (int i = 0; i < f->m->nnodes; i++)
        if (f->m->fds[i] >= 0 && send_frame(f->m->fds[i], s, strlen(s)) < 0) {
            close(f->m->fds[i]);
            f->m->fds[i] = -1;
        }
}

static void l_stop(fate *f, int sig, int code)
{
    char msg[48];
    if (f->code < 0)
        f->code = code;
    if (f->stopping && sig != SIGKILL && sig != SIGQUIT)
        sig = SIGKILL; /* asked twice: no more grace */
    if (!f->stopping)
        f->stop_at = p3d_now();
    f->stopping = 1;
    snprintf(msg, sizeof msg, "T %d %d\n", sig, f->code);
    l_all(f, msg);
}

static void l_lost(fate *f, int node, const char *how)
{
    if (f->stopping)
        return;
    char *s = NULL;
    if (asprintf(&s, "par3drun: root cause: lost the agent of node %s (node rank %d): %s\n",
                 f->L->cluster->nodes[node].name, node, how) < 0)
        s = NULL;
    free(f->summary);
    f->summary = s;
    l_stop(f, SIGTERM, P3D_EXIT_LOST);
}

/* Leader: one packet from node `node`. */
static void l_packet(fate *f, int node, const char *buf)
{
    int g = 0, code = 0, rank = 0, sig = 0;
    if (buf[0] == 'D' && sscanf(buf + 1, " %d", &g) == 1) {
        if (g == f->gen)
            f->done_gen[node] = g;
        int all = 1;
        for (int k = 0; k < f->m->nnodes; k++)
            if (f->done_gen[k] != f->gen)
                all = 0;
        if (all && !f->stopping) {
            f->code = 0;
            l_stop(f, 0, 0);
        }
        return;
    }
    if (buf[0] == 'S' && sscanf(buf + 1, " %d", &sig) == 1) {
        if (!f->stopping)
            err_line("node %s (node rank %d) got signal %d: stopping the job", f->L->cluster->nodes[node].name,
                     node, sig);
        l_stop(f, sig > 0 && sig < 65 ? sig : SIGTERM, 128 + sig);
        return;
    }
    if (buf[0] != 'F' || sscanf(buf + 1, " %d %d %d", &g, &code, &rank) != 3)
        return;
    if (g != f->gen || f->stopping)
        return; /* a consequence of a failure already being handled */
    const char *sum = strchr(buf, '\n');
    sum = sum ? sum + 1 : "";
    if (f->gen < f->m->o->max_restarts) {
        fputs(sum, stderr);
        f->gen++;
        err_line("restarting all ranks on all %d nodes (restart %d of %d)", f->m->nnodes, f->gen,
                 f->m->o->max_restarts);
        char msg[32];
        snprintf(msg, sizeof msg, "R %d\n", f->gen);
        for (int k = 0; k < f->m->nnodes; k++)
            f->done_gen[k] = -1;
        l_all(f, msg);
        return;
    }
    free(f->summary);
    if (!sum[0]) {
        f->summary = NULL;
        if (asprintf(&f->summary, "par3drun: root cause: node %s could not start its ranks (exit code %d)\n",
                     f->L->cluster->nodes[node].name, code) < 0)
            f->summary = NULL;
    } else {
        f->summary = strdup(sum);
    }
    l_stop(f, SIGTERM, code);
}

/* Relay: one packet from the leader, for the local agent. */
static void r_packet(fate *f, const char *buf)
{
    int sig = 0, code = 0;
    if (buf[0] == 'T' && sscanf(buf + 1, " %d %d", &sig, &code) == 2) {
        if (f->code < 0)
            f->code = code;
        if (!f->stopping)
            f->stop_at = p3d_now();
        f->stopping = 1;
    }
    send_local(f, buf);
}

/* Reads every packet the local agent has queued. Returns -1 at EOF. */
static int read_local(fate *f, int leader)
{
    char buf[65536];
    for (;;) {
        ssize_t n = recv(f->local, buf, sizeof buf - 1, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            close(f->local);
            f->local = -1;
            return -1;
        }
        buf[n] = 0;
        if (leader) {
            l_packet(f, f->m->me, buf);
        } else {
            if (buf[0] == 'F' && !f->stopping) {
                int g, code, rank;
                if (sscanf(buf + 1, " %d %d %d", &g, &code, &rank) == 3 && g >= f->m->o->max_restarts)
                    err_line("node %s: rank %d failed with exit code %d; the leader stops the job",
                             f->L->cluster->nodes[f->m->me].name, rank, code);
            }
            if (f->m->up >= 0 && send_frame(f->m->up, buf, (size_t)n) < 0) {
                close(f->m->up);
                f->m->up = -1;
            }
        }
    }
}

static int code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return P3D_EXIT_FAIL;
}

static void reap(fate *f)
{
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (p == f->agent) {
            f->agent = 0;
            f->agent_status = st;
        }
}

/* Handles a signal of the node's own process. */
static void on_signal(fate *f, int sig, int leader)
{
    char msg[48];
    if (sig == SIGCHLD) {
        reap(f);
        return;
    }
    if (sig == SIGUSR1 || sig == SIGUSR2) {
        snprintf(msg, sizeof msg, "U %d\n", sig);
        if (leader)
            l_all(f, msg);
        else
            send_local(f, msg);
        return;
    }
    if (leader) {
        l_stop(f, sig, 128 + sig);
        return;
    }
    /* a node's own signal (scancel signals every node; a by-hand Ctrl-C
     * one): stop here at once and tell the leader to stop the rest */
    snprintf(msg, sizeof msg, "S %d\n", sig);
    if (f->m->up >= 0 && send_frame(f->m->up, msg, strlen(msg)) < 0) {
        close(f->m->up);
        f->m->up = -1;
    }
    if (f->code < 0)
        f->code = 128 + sig;
    int again = f->stopping;
    if (!f->stopping)
        f->stop_at = p3d_now();
    f->stopping = 1;
    snprintf(msg, sizeof msg, "T %d\n", again && sig != SIGQUIT ? SIGKILL : sig);
    send_local(f, msg);
}

/* The loop both roles share; returns the node's exit code. */
static int fate_loop(fate *f)
{
    mnode *m = f->m;
    int leader = m->me == 0, n = m->nnodes;
    struct pollfd *pfd = calloc((size_t)n + 3, sizeof *pfd);
    int *owner = calloc((size_t)n + 3, sizeof *owner);
    double deadline = leader && m->o->timeout > 0 ? p3d_now() + m->o->timeout : 0;
    if (!pfd || !owner) {
        free(pfd);
        free(owner);
        err_line("out of memory");
        l_stop(f, SIGKILL, P3D_EXIT_FAIL);
        return P3D_EXIT_FAIL;
    }
    for (;;) {
        /* done when the local agent is gone and (leader) every node has
         * hung up — or grace + 5 s after the stop, whichever first */
        int remote = 0;
        if (leader)
            for (int i = 0; i < n; i++)
                remote += m->fds[i] >= 0;
        if (!f->agent && f->local < 0) {
            if (!leader || remote == 0)
                break;
            if (f->stopping && p3d_now() > f->stop_at + m->o->grace + 5)
                break;
        }
        int np = 0;
        pfd[np] = (struct pollfd){.fd = f->sfd, .events = POLLIN};
        owner[np++] = -2;
        if (f->local >= 0) {
            pfd[np] = (struct pollfd){.fd = f->local, .events = POLLIN};
            owner[np++] = -1;
        }
        if (leader) {
            for (int i = 0; i < n; i++)
                if (m->fds[i] >= 0) {
                    pfd[np] = (struct pollfd){.fd = m->fds[i], .events = POLLIN};
                    owner[np++] = i;
                }
        } else if (m->up >= 0) {
            pfd[np] = (struct pollfd){.fd = m->up, .events = POLLIN};
            owner[np++] = 0;
        }
        int ms = 1000;
        if (deadline > 0 && !f->stopping) {
            double d = deadline - p3d_now();
            ms = d <= 0 ? 0 : d < 1 ? (int)(d * 1000) + 1 : 1000;
        }
        int pr = poll(pfd, (nfds_t)np, ms);
        if (pr < 0 && errno != EINTR)
            break;
        if (deadline > 0 && !f->stopping && p3d_now() >= deadline) {
            err_line("--timeout %g s reached; stopping the job on all %d nodes", m->o->timeout, n);
            l_stop(f, SIGTERM, P3D_EXIT_TIMEOUT);
        }
        for (int k = 0; k < np && pr > 0; k++) {
            if (!pfd[k].revents)
                continue;
            if (owner[k] == -2) {
                struct signalfd_siginfo si;
                while (read(f->sfd, &si, sizeof si) == (ssize_t)sizeof si)
                    on_signal(f, (int)si.ssi_signo, leader);
                continue;
            }
            if (owner[k] == -1) {
                if (read_local(f, leader) < 0 && !f->stopping) {
                    /* our own agent is gone without being told to stop */
                    reap(f);
                    if (leader)
                        l_lost(f, m->me, "its agent process ended unexpectedly");
                    else if (f->code < 0)
                        f->code = P3D_EXIT_LOST;
                }
                continue;
            }
            int node = owner[k];
            int fd = leader ? m->fds[node] : m->up;
            p3d_framer *fr = &f->fr[leader ? node : 0];
            char *e = NULL;
            int got = p3d_framer_fill(fr, fd, &e);
            unsigned char *body;
            size_t len;
            int type;
            while (got >= 0 && (type = p3d_framer_take(fr, &body, &len)) > 0) {
                if (type == P3D_MSG_FATE && len < 65536) {
                    char *s = malloc(len + 1);
                    if (s) {
                        memcpy(s, body, len);
                        s[len] = 0;
                        if (leader)
                            l_packet(f, node, s);
                        else
                            r_packet(f, s);
                        free(s);
                    }
                }
                free(body);
            }
            if (got < 0) {
                if (leader) {
                    close(m->fds[node]);
                    m->fds[node] = -1;
                    if (!f->stopping) {
                        char how[256];
                        snprintf(how, sizeof how, "the connection %s (killed, crashed, or the node is down)",
                                 e && !strcmp(e, "closed") ? "closed" : e ? e : "failed");
                        l_lost(f, node, how);
                    }
                } else {
                    close(m->up);
                    m->up = -1;
                    if (!f->stopping) {
                        err_line("node %s: lost the connection to the rendezvous leader (%s): stopping the local "
                                 "ranks",
                                 f->L->cluster->nodes[m->me].name, f->L->cluster->nodes[0].name);
                        if (f->code < 0)
                            f->code = P3D_EXIT_LOST;
                        f->stopping = 1;
                        f->stop_at = p3d_now();
                        send_local(f, "T 15\n");
                    }
                }
            }
            free(e);
        }
    }
    free(pfd);
    free(owner);
    if (f->agent) {
        kill(f->agent, SIGKILL);
        waitpid(f->agent, &f->agent_status, 0);
        f->agent = 0;
    }
    if (f->code < 0)
        f->code = code_of(f->agent_status);
    return f->code;
}

/* Forks the local agent and runs the fate loop. */
static int run_node(mnode *m, const p3d_launch *L)
{
    fate F = {.m = m, .L = L, .sfd = -1, .local = -1, .code = -1};
    fate *f = &F;
    int rc = P3D_EXIT_FAIL, sv[2] = {-1, -1};
    sigset_t ss;
    p3d_launch_sigset(&ss);
    signal(SIGPIPE, SIG_IGN);
    f->fr = calloc((size_t)m->nnodes, sizeof *f->fr);
    f->done_gen = calloc((size_t)m->nnodes, sizeof *f->done_gen);
    if (!f->fr || !f->done_gen || sigprocmask(SIG_BLOCK, &ss, NULL) < 0 ||
        (f->sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        err_line("cannot set up the node supervisor: %s", strerror(errno));
        goto out;
    }
    for (int i = 0; i < m->nnodes; i++)
        f->done_gen[i] = -1;
    pid_t me = getpid();
    fflush(NULL);
    pid_t c = fork();
    if (c < 0) {
        err_line("cannot fork the agent: %s", strerror(errno));
        goto out;
    }
    if (c == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != me)
            _exit(P3D_EXIT_FAIL);
        close(sv[0]);
        close(f->sfd);
        if (m->up >= 0)
            close(m->up);
        for (int i = 0; m->fds && i < m->nnodes; i++)
            if (m->fds[i] >= 0)
                close(m->fds[i]);
        int arc = p3d_agent_run(L, m->me, sv[1]);
        fflush(NULL);
        _exit(arc);
    }
    close(sv[1]);
    sv[1] = -1;
    f->agent = c;
    f->local = sv[0];
    sv[0] = -1;
    rc = fate_loop(f);
    if (m->me == 0 && f->summary && f->summary[0])
        fputs(f->summary, stderr);
out:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (f->local >= 0)
        close(f->local);
    if (f->sfd >= 0)
        close(f->sfd);
    for (int i = 0; f->fr && i < m->nnodes; i++)
        p3d_framer_free(&f->fr[i]);
    free(f->fr);
    free(f->done_gen);
    free(f->summary);
    return rc;
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
        if (leader_place(m, &frame, &err) < 0) {
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
    if (local_cluster(m, &err) < 0)
        goto out;

    /* the run dir: the placement JSON, the same bytes on every node */
    if (o->run_dir) {
        m->run_dir = strdup(o->run_dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        if (asprintf(&m->run_dir, "%s/par3drun-%s.%d", tmp && *tmp ? tmp : "/tmp", m->pm.job_id, m->me) < 0)
            m->run_dir = NULL;
    }
    if (!m->run_dir || p3d_mkdir_p(m->run_dir, 0700) < 0) {
        p3d_err(&err, "--run-dir %s: cannot create it: %s", m->run_dir ? m->run_dir : "?", strerror(errno));
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    if ((o->log_dir && p3d_check_log_dir(o->log_dir, &err) < 0) ||
        p3d_check_output_ranks(o, m->pm.pl->world, &err) < 0)
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
    if (o->verbose) {
        int nl = 0;
        for (int q = 0; q < L.pl->world; q++)
            nl += L.pl->ranks[q].node == m->me;
        fprintf(stderr, "par3drun: node[%d] %s: job %s, %d of %d ranks here, placement %s, MASTER_ADDR=%s "
                        "MASTER_PORT=%d\n",
                m->me, m->cluster->nodes[m->me].name, L.job_id, nl, L.pl->world, m->placement_path, L.master_addr,
                L.master_port);
    }
    rc = run_node(m, &L);
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
