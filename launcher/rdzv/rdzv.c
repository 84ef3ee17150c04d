/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdzv.c — the rendezvous backends (rdzv.h): the built-in static and slurm
 * backends, registered in the plugin registry (p3d/plugin.h) next to the
 * plugins it loads (pmix, etcd, any p3d_rdzv_NAME.so), `--rdzv auto`, and
 * the job token.
 */
#include "rdzv.h"
#include "decimal.h"
#include "p3d/plugin.h"
#include "termsafe.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

double p3d_rdzv_default_timeout(int nnodes)
{
    return 60.0 + 0.1 * (nnodes > 0 ? nnodes : 1);
}

static void copy(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "");
}

/* The token file is a key, treated as ssh treats a private key: a regular
 * file (a FIFO or a device would block or never end: opened O_NONBLOCK and
 * refused before any read, so no --rdzv-timeout is ever passed waiting on
 * it), readable by its owner only, and read with a bound. */
#define TOKEN_FILE_MAX 4096

int p3d_rdzv_read_token(const char *path, char *tok, size_t cap, char **err)
{
    int rc = -1;
    char buf[TOKEN_FILE_MAX + 1];
    struct stat st;
    ssize_t n = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return p3d_err(err, "--rdzv-token-file %s: %s", p3d_tesc(path), strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        p3d_err(err, "--rdzv-token-file %s: not a regular file: expected a file holding one line with the job's secret",
                p3d_tesc(path));
        goto out;
    }
    if (st.st_mode & 077) {
        p3d_err(err,
                "--rdzv-token-file %s: mode %04o is readable by group or others: the token is the job's key; "
                "run: chmod 600 %s",
                p3d_tesc(path), (unsigned)(st.st_mode & 07777), p3d_tesc(path));
        goto out;
    }
    if (st.st_size > TOKEN_FILE_MAX) {
        p3d_err(err, "--rdzv-token-file %s: %lld bytes: expected one line of at most 255 bytes", p3d_tesc(path),
                (long long)st.st_size);
        goto out;
    }
    while ((n = read(fd, buf, TOKEN_FILE_MAX)) < 0 && errno == EINTR)
        ;
    if (n < 0) {
        p3d_err(err, "--rdzv-token-file %s: %s", p3d_tesc(path), strerror(errno));
        goto out;
    }
    buf[n] = 0;
    char *s = buf, *e;
    while (isspace((unsigned char)*s))
        s++;
    e = s + strcspn(s, "\n");
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    *e = 0;
    if (!*s) {
        p3d_err(err, "--rdzv-token-file %s: empty: expected one line with the job's secret", p3d_tesc(path));
        goto out;
    }
    if (strlen(s) < 8 || strlen(s) >= cap || strlen(s) > 255) {
        p3d_err(err,
                "--rdzv-token-file %s: the token is %zu bytes: expected 8..255 (e.g. head -c 24 /dev/urandom "
                "| base64 > FILE)",
                p3d_tesc(path), strlen(s));
        goto out;
    }
    copy(tok, cap, s);
    rc = 0;
out:
    explicit_bzero(buf, sizeof buf);
    close(fd);
    return rc;
}

/* ---- static: everything from the command line ----------------------------- */

/* "HOST:PORT" or "[V6]:PORT" */
static int split_endpoint(const char *arg, char *host, size_t cap, int *port)
{
    const char *colon;
    if (arg[0] == '[') {
        const char *rb = strchr(arg, ']');
        if (!rb || rb[1] != ':')
            return -1;
        if ((size_t)(rb - arg - 1) >= cap)
            return -1;
        memcpy(host, arg + 1, (size_t)(rb - arg - 1));
        host[rb - arg - 1] = 0;
        colon = rb + 1;
    } else {
        colon = strrchr(arg, ':');
        if (!colon || colon == arg || (size_t)(colon - arg) >= cap)
            return -1;
        memcpy(host, arg, (size_t)(colon - arg));
        host[colon - arg] = 0;
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 1 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

static int static_detect(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *b, void **state,
                         char *msg, size_t cap)
{
    (void)timeout;
    *state = NULL;
    if (split_endpoint(arg, b->leader_host, sizeof b->leader_host, &b->leader_port) < 0)
        return p3d_plugin_say(msg, cap, "--rdzv static:%s: expected static:HOST:PORT (port 1..65535; [IPv6]:PORT)",
                              arg);
    if (o_nnodes == 0 && o_node_rank == -1)
        return 1; /* --join: the leader is where the job's nodes met */
    if (o_nnodes < 1)
        return p3d_plugin_say(msg, cap, "--rdzv static needs --nnodes N (how many agents meet)");
    if (o_node_rank < 0)
        return p3d_plugin_say(msg, cap, "--rdzv static needs --node-rank I (0 on the node that listens on %s)", arg);
    if (o_node_rank >= o_nnodes)
        return p3d_plugin_say(msg, cap, "--node-rank %d: expected 0..%d for --nnodes %d", o_node_rank, o_nnodes - 1,
                              o_nnodes);
    b->nnodes = o_nnodes;
    b->node_rank = o_node_rank;
    return 1;
}

const p3d_rdzv_ops p3d_rdzv_static = {
    .name = "static",
    .detect = static_detect,
};

/* A set, non-empty environment variable, or NULL. */
static const char *env(const char *k)
{
    const char *v = getenv(k);
    return v && *v ? v : NULL;
}

/* ---- k8s: a pod of an Indexed Job or a JobSet ------------------------------- */

#define K8S_DEFAULT_PORT 29400

int p3d_k8s_leader_host(const char *hostname, const char *fqdn, long index, char *out, size_t cap, char *msg,
                        size_t mcap)
{
    char suffix[32];
    size_t hl = hostname ? strlen(hostname) : 0;
    int sl = snprintf(suffix, sizeof suffix, "-%ld", index);
    if (!hl || (size_t)sl >= hl || strcmp(hostname + hl - (size_t)sl, suffix) != 0)
        return p3d_plugin_say(msg, mcap,
                              "k8s: the pod's hostname '%s' does not end in -%ld (JOB_COMPLETION_INDEX): not an "
                              "Indexed Job pod? give the leader as --rdzv k8s:HOST:PORT",
                              hostname ? hostname : "", index);
    /* the pod's DNS name is HOSTNAME.SUBDOMAIN.NAMESPACE.svc...; the
     * leader's is the same with index 0 */
    const char *domain = fqdn && !strncmp(fqdn, hostname, hl) && fqdn[hl] == '.' && fqdn[hl + 1] ? fqdn + hl : NULL;
    if (!domain)
        return p3d_plugin_say(msg, mcap,
                              "k8s: the pod '%s' has no DNS domain (set spec.subdomain to a headless Service in "
                              "the pod template), or give the leader as --rdzv k8s:HOST:PORT",
                              hostname);
    int n = snprintf(out, cap, "%.*s-0%s", (int)(hl - (size_t)sl), hostname, domain);
    if (n < 0 || (size_t)n >= cap)
        return p3d_plugin_say(msg, mcap, "k8s: the leader's DNS name is too long");
    return 0;
}

static int k8s_detect(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *b, void **state,
                      char *msg, size_t cap)
{
    (void)timeout;
    *state = NULL;
    const char *ix = env("JOB_COMPLETION_INDEX");
    long index = -1;
    if (ix) {
        unsigned long long v;
        if (p3d_decimal(ix, 1UL << 20, &v) < 0)
            return p3d_plugin_say(msg, cap,
                                  "k8s: JOB_COMPLETION_INDEX='%s': expected a node index 0..%ld in plain "
                                  "decimal digits",
                                  p3d_tesc(ix), 1L << 20);
        index = (long)v;
    }
    if (index < 0 && o_node_rank < 0)
        return p3d_plugin_say(msg, cap,
                              "k8s: JOB_COMPLETION_INDEX is not set (not a pod of an Indexed Job or "
                              "JobSet?): give --node-rank I");
    if (index >= 0 && o_node_rank >= 0 && index != o_node_rank)
        return p3d_plugin_say(msg, cap, "k8s: --node-rank %d disagrees with JOB_COMPLETION_INDEX=%ld", o_node_rank,
                              index);
    int rank = o_node_rank >= 0 ? o_node_rank : (int)index;
    if (o_nnodes < 1)
        return p3d_plugin_say(msg, cap, "--rdzv k8s needs --nnodes N (the Job's completions: a pod cannot see it)");
    if (rank >= o_nnodes)
        return p3d_plugin_say(msg, cap, "k8s: node index %d: expected 0..%d for --nnodes %d", rank, o_nnodes - 1,
                              o_nnodes);
    if (strchr(arg, ':')) {
        if (split_endpoint(arg, b->leader_host, sizeof b->leader_host, &b->leader_port) < 0)
            return p3d_plugin_say(msg, cap, "--rdzv k8s:%s: expected k8s, k8s:PORT or k8s:HOST:PORT (port 1..65535)",
                                  arg);
    } else {
        b->leader_port = K8S_DEFAULT_PORT;
        if (*arg) {
            char *end;
            long p = strtol(arg, &end, 10);
            if (*end || p < 1 || p > 65535)
                return p3d_plugin_say(msg, cap,
                                      "--rdzv k8s:%s: expected k8s, k8s:PORT or k8s:HOST:PORT (port 1..65535)", arg);
            b->leader_port = (int)p;
        }
        char host[256] = "", *fqdn = NULL;
        const char *h = env("HOSTNAME"); /* the pod's name; Kubernetes sets it */
        if (!h && gethostname(host, sizeof host - 1) == 0)
            h = host;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_CANONNAME}, *ai = NULL;
        if (h && getaddrinfo(h, NULL, &hints, &ai) == 0 && ai && ai->ai_canonname)
            fqdn = strdup(ai->ai_canonname);
        if (ai)
            freeaddrinfo(ai);
        int r = p3d_k8s_leader_host(h, fqdn, (long)rank, b->leader_host, sizeof b->leader_host, msg, cap);
        free(fqdn);
        if (r < 0)
            return r;
    }
    b->nnodes = o_nnodes;
    b->node_rank = rank;
    return 1;
}

const p3d_rdzv_ops p3d_rdzv_k8s = {
    .name = "k8s",
    .detect = k8s_detect,
};

/* ---- slurm: from the job step's environment -------------------------------- */

static const char *env2(const char *a, const char *b)
{
    return env(a) ? env(a) : env(b);
}

/* The address a Slurm node name stands for: DNS/hosts first, then the
 * controller's NodeAddr (fake or renamed nodes, where the name does not
 * resolve). Writes a numeric address. */
static int slurm_node_addr(const char *name, char *out, size_t cap, char *msg, size_t mcap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(name, NULL, &hints, &ai) == 0 && ai) {
        int r = getnameinfo(ai->ai_addr, ai->ai_addrlen, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST);
        freeaddrinfo(ai);
        if (r == 0)
            return 0;
    }
    /* scontrol prints NodeAddr=... for the node; a name with shell
     * characters never reaches the shell */
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("-_.", *p))
            return p3d_plugin_say(msg, mcap, "slurm: node name '%s' does not resolve", name);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "scontrol show node -o '%s' 2>/dev/null", name);
    FILE *f = popen(cmd, "r");
    char line[8192];
    int found = 0;
    if (f) {
        while (!found && fgets(line, sizeof line, f)) {
            char *a = strstr(line, "NodeAddr=");
            if (a) {
                a += 9;
                size_t n = strcspn(a, " \n");
                if (n && n < cap) {
                    memcpy(out, a, n);
                    out[n] = 0;
                    found = 1;
                }
            }
        }
        pclose(f);
    }
    if (!found)
        return p3d_plugin_say(
            msg, mcap,
            "slurm: the first node of the step, '%s', does not resolve and scontrol does not know its "
            "NodeAddr: give the leader's address with --rdzv slurm:ADDR",
            name);
    return 0;
}

static int slurm_detect(const char *arg, int o_nnodes, int o_node_rank, double timeout, p3d_rdzv_boot *b, void **state,
                        char *msg, size_t cap)
{
    (void)timeout;
    (void)o_nnodes;
    (void)o_node_rank;
    *state = NULL;
    const char *job = env("SLURM_JOB_ID");
    if (!job)
        return p3d_plugin_say(msg, cap, "SLURM_JOB_ID is not set (not inside a Slurm job)"), 0;
    const char *step = env2("SLURM_STEP_ID", "SLURM_STEPID");
    if (!step)
        return p3d_plugin_say(msg, cap, "not inside a job step (run par3drun with srun)"), 0;
    const char *list = env2("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST");
    const char *nn = env2("SLURM_STEP_NUM_NODES", "SLURM_NNODES");
    const char *nt = env2("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS");
    const char *nid = env("SLURM_NODEID");
    if (!list || !nn || !nid)
        return p3d_plugin_say(msg, cap,
                              "slurm: SLURM_STEP_NODELIST, SLURM_STEP_NUM_NODES and SLURM_NODEID must be set "
                              "inside a job step");
    unsigned long long vnn, vnid, vnt = 0, vjob, vstep;
    /* plain decimal digits only: " 1", "+1" or "1x" would name a node;
     * each count against its documented bound (docs/limits.md) before
     * anything is sized by it */
    const struct {
        const char *name, *val;
        unsigned long long *out, hi;
        const char *what;
    } num[] = {{"SLURM_STEP_NUM_NODES", nn, &vnn, P3D_RDZV_MAX_AGENTS, "the most agents par3drun supports"},
               {"SLURM_NODEID", nid, &vnid, P3D_RDZV_MAX_AGENTS - 1, "the last node index of the most agents"},
               {"SLURM_STEP_NUM_TASKS", nt, &vnt, P3D_RDZV_MAX_AGENTS, "one task per agent"},
               {"SLURM_JOB_ID", job, &vjob, INT_MAX, "a job id"},
               {"SLURM_STEP_ID", step, &vstep, INT_MAX, "a step id"}};
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) {
        if (!num[i].val)
            continue;
        if (p3d_decimal(num[i].val, ~0ULL >> 1, num[i].out) < 0)
            return p3d_plugin_say(msg, cap, "slurm: %s='%s': expected plain decimal digits (0..%llu)", num[i].name,
                                  p3d_tesc(num[i].val), num[i].hi);
        if (*num[i].out > num[i].hi)
            return p3d_plugin_say(msg, cap, "slurm: %s=%s: over its bound %llu (%s; docs/limits.md)", num[i].name,
                                  num[i].val, num[i].hi, num[i].what);
    }
    int nnodes = (int)vnn, rank = (int)vnid;
    if (nnodes < 1 || rank < 0 || rank >= nnodes)
        return p3d_plugin_say(msg, cap, "slurm: SLURM_NODEID=%s outside 0..%d (SLURM_STEP_NUM_NODES=%s)", nid,
                              nnodes - 1, nn);
    if (nt && vnt != (unsigned long long)nnodes)
        return p3d_plugin_say(
            msg, cap,
            "slurm: the step runs %s tasks on %d nodes: par3drun starts the ranks itself, run one per node "
            "(srun --ntasks-per-node=1)",
            nt, nnodes);
    char **names = NULL;
    size_t n = 0;
    char *e = NULL;
    /* counted before it is expanded (hostlist.c): no more names than the
     * count says are ever made */
    int k = p3d_hostlist_expand(list, &names, &n, (size_t)nnodes + 1, &e);
    if (k < 0 || n != (size_t)nnodes) {
        if (k < 0) /* no message at all: even that could not be allocated */
            p3d_plugin_say(msg, cap, "slurm: node list '%s': %s", p3d_tesc(list), e ? e : "out of memory expanding it");
        else
            p3d_plugin_say(msg, cap, "slurm: node list '%s' names %zu nodes, SLURM_STEP_NUM_NODES=%d", p3d_tesc(list),
                           n, nnodes);
        free(e);
        p3d_strv_free(names, n);
        return -1;
    }
    b->nnodes = nnodes;
    b->node_rank = rank;
    b->hostnames = calloc((size_t)nnodes, sizeof *b->hostnames);
    if (!b->hostnames) {
        p3d_strv_free(names, n);
        return p3d_plugin_say(msg, cap, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        b->hostnames[i] = names[i];
    free(names);
    if (arg && *arg)
        copy(b->leader_host, sizeof b->leader_host, arg);
    else if (slurm_node_addr(b->hostnames[0], b->leader_host, sizeof b->leader_host, msg, cap) < 0)
        return -1;
    /* A reserved port (srun --resv-ports / MpiParams=ports) cannot clash;
     * otherwise one derived from job and step, below Linux's ephemeral
     * range, so every node computes the same without talking. */
    const char *resv = env("SLURM_STEP_RESV_PORTS");
    unsigned long jid = (unsigned long)vjob, sid = (unsigned long)vstep;
    unsigned long long rp = 0;
    if (resv) {
        /* "PORT" or "FIRST-LAST": the first is ours */
        char first[16];
        size_t fl = strcspn(resv, "-");
        const char *last = resv[fl] ? resv + fl + 1 : NULL;
        unsigned long long lp;
        snprintf(first, sizeof first, "%.*s", (int)(fl < sizeof first ? fl : sizeof first - 1), resv);
        if (fl >= sizeof first || p3d_decimal(first, 65535, &rp) < 0 || rp < 1 ||
            (last && (p3d_decimal(last, 65535, &lp) < 0 || lp < rp)))
            return p3d_plugin_say(msg, cap,
                                  "slurm: SLURM_STEP_RESV_PORTS='%s': expected PORT or FIRST-LAST (decimal "
                                  "1..65535)",
                                  p3d_tesc(resv));
    }
    if (rp > 0)
        b->leader_port = (int)rp;
    else
        b->leader_port = 20000 + (int)((jid * 131 + sid * 7) % 10000);
    /* Not a secret (see docs/multinode.md, "Threat model"): it keeps
     * agents of another job or step from joining this one by accident. */
    snprintf(b->token, sizeof b->token, "slurm-job-%s-step-%s-uid-%d", job, step, (int)getuid());
    copy(b->job_id, sizeof b->job_id, job);
    return 1;
}

const p3d_rdzv_ops p3d_rdzv_slurm = {
    .name = "slurm",
    .detect = slurm_detect,
};

/* ---- plugins ---------------------------------------------------------------- */

static const p3d_plugin builtin_static = {P3D_PLUGIN_ABI, P3D_PLUGIN_RDZV, "static", &p3d_rdzv_static};
static const p3d_plugin builtin_slurm = {P3D_PLUGIN_ABI, P3D_PLUGIN_RDZV, "slurm", &p3d_rdzv_slurm};
static const p3d_plugin builtin_k8s = {P3D_PLUGIN_ABI, P3D_PLUGIN_RDZV, "k8s", &p3d_rdzv_k8s};

int p3d_rdzv_register_builtins(char **err)
{
    if (p3d_plugin_register(&builtin_static, err) < 0 || p3d_plugin_register(&builtin_slurm, err) < 0 ||
        p3d_plugin_register(&builtin_k8s, err) < 0)
        return -1;
    return 0;
}

/* The backend called name: a built-in, or p3d_rdzv_<name>.so. */
static int find_backend(const char *name, p3d_rdzv *r, char **err)
{
    const p3d_plugin *pl;
    char *e = NULL;
    if (p3d_rdzv_register_builtins(err) < 0)
        return -1;
    int k = p3d_plugin_find(P3D_PLUGIN_RDZV, name, &pl, &e);
    if (k <= 0) {
        if (k < 0) {
            char *b = p3d_plugin_builtin_names(P3D_PLUGIN_RDZV);
            p3d_err(err, "--rdzv %s: unknown backend: %s (built in: %s; plugins: p3d_rdzv_NAME.so, e.g. pmix, etcd)",
                    name, e ? e : "bad name", b ? b : "?");
            free(b);
        } else
            p3d_err(err, "rendezvous '%s' needs %s%s", name, e ? e : "a plugin",
                    !strcmp(name, "etcd")   ? " (Debian: install the par3drun-curl package)"
                    : !strcmp(name, "pmix") ? " (Debian: install the par3drun-pmix package)"
                                            : "");
        free(e);
        return -1;
    }
    const p3d_rdzv_ops *ops = pl->ops;
    if (!ops->detect || !ops->name)
        return p3d_err(err, "rendezvous '%s': incomplete ops table (no detect or name)", name);
    r->ops = ops;
    return 0;
}

/* ---- resolution ---------------------------------------------------------- */

/* Runs detect; 1 active, 0 declined (msg), -1 failed (*err). */
static int try_backend(p3d_rdzv *r, const char *arg, const p3d_opts *o, char *msg, size_t cap, char **err)
{
    double t = o->rdzv_timeout > 0 ? o->rdzv_timeout : p3d_rdzv_default_timeout(o->nnodes);
    memset(&r->boot, 0, sizeof r->boot);
    /* --job-id goes in: a backend that keys its store by job (etcd) needs
     * it during detect(); the others overwrite or ignore it */
    if (o->job_id)
        copy(r->boot.job_id, sizeof r->boot.job_id, o->job_id);
    /* a backend that holds leases lets a dead agent's registration (and
     * a dead leader's leadership) lapse as fast as the nodes notice it */
    r->boot.lease_ttl = o->node_timeout <= 0     ? 0
                        : o->node_timeout < 2    ? 2
                        : o->node_timeout > 3600 ? 3600
                                                 : (int)(o->node_timeout + 0.999);
    msg[0] = 0;
    /* --join: 0 nodes and node rank -1 (plugin.h): the backend finds the
     * running job's leader; the node's index comes from the leader
     * (P3D_JOIN_RUNNING) */
    int k = r->ops->detect(arg ? arg : "", o->join ? 0 : o->nnodes, o->join ? -1 : o->node_rank, t, &r->boot, &r->state,
                           msg, cap);
    if (k < 0) {
        p3d_err(err, "%s", msg[0] ? msg : "rendezvous failed");
        return -1;
    }
    if (k == 0)
        return 0;
    if (o->join) {
        r->boot.nnodes = 0;
        r->boot.node_rank = P3D_JOIN_RUNNING;
        return 1;
    }
    if (r->boot.nnodes < 1 || r->boot.node_rank < 0 || r->boot.node_rank >= r->boot.nnodes) {
        return p3d_err(err, "rendezvous '%s': node rank %d of %d nodes: out of range", r->ops->name, r->boot.node_rank,
                       r->boot.nnodes);
    }
    return 1;
}

static void close_backend(p3d_rdzv *r)
{
    if (r->ops && r->ops->close && r->state)
        r->ops->close(r->state);
    r->state = NULL;
    if (r->boot.hostnames) {
        for (int i = 0; i < r->boot.nnodes; i++)
            free(r->boot.hostnames[i]);
        free(r->boot.hostnames);
        r->boot.hostnames = NULL;
    }
    /* the plugin stays loaded (the registry never unloads one) */
    r->ops = NULL;
}

/* --join through a backend that cannot find a running job's leader:
 * -1 with *err naming what to use instead, else 0. */
static int join_refused(const char *name, const char *spec, char **err)
{
    if (!strcmp(name, "k8s")) {
        /* a pod finds its leader by its Job's index: a joiner has none */
        p3d_err(err,
                "--join --rdzv %s: the k8s rendezvous finds the leader by the pod's Job index, which a joining "
                "pod does not have: join through --rdzv static:LEADER:PORT (the job's leader pod, e.g. "
                "JOB-0.SERVICE, and the job's k8s port, 29400 by default; after a failover the successor's pod "
                "at the same port) with the job's --rdzv-token-file",
                spec);
        return -1;
    }
    if (strcmp(name, "static") && strcmp(name, "etcd")) {
        /* Slurm's and PMIx's joins are not built: said, not guessed */
        p3d_err(err,
                "--join needs the running job's leader: --rdzv static:HOST:PORT (or torchrun's "
                "--rdzv-endpoint HOST:PORT) or --rdzv etcd:URL --job-id ID; joining through --rdzv %s is not "
                "supported",
                spec);
        return -1;
    }
    return 0;
}

int p3d_rdzv_open(const p3d_opts *o, p3d_rdzv *r, char **err)
{
    char msg[1024];
    int rc = -1;
    memset(r, 0, sizeof *r);
    const char *spec = o->rdzv && *o->rdzv ? o->rdzv : "auto";
    char name[64];
    const char *colon = strchr(spec, ':');
    size_t nl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (nl >= sizeof name) {
        p3d_err(err, "--rdzv %s: unknown backend", spec);
        goto out;
    }
    memcpy(name, spec, nl);
    name[nl] = 0;
    const char *arg = colon ? colon + 1 : "";
    if (o->join && join_refused(name, spec, err) < 0)
        goto out;
    if (!strcmp(name, "none")) {
        rc = 0;
        goto out;
    }
    if (!strcmp(name, "auto")) {
        /* PMIx first: under srun --mpi=pmix both are there, and PMIx hands
         * over a secret token */
        if (env("PMIX_NAMESPACE")) {
            char *e = NULL;
            if (find_backend("pmix", r, &e) == 0) {
                int k = try_backend(r, "", o, msg, sizeof msg, err);
                free(e);
                if (k < 0)
                    goto out;
                if (k > 0 && r->boot.nnodes > 1) {
                    rc = 1;
                    goto out;
                }
                close_backend(r);
            } else {
                /* the plain Slurm environment still works without it */
                if (o->verbose || !env("SLURM_JOB_ID"))
                    fprintf(stderr, "par3drun: PMIX_NAMESPACE is set but %s%s\n", e,
                            env("SLURM_JOB_ID") ? "; using the Slurm environment" : "; running as a single node");
                free(e);
            }
        }
        if (env("SLURM_JOB_ID")) {
            if (find_backend("slurm", r, err) < 0)
                goto out;
            int k = try_backend(r, "", o, msg, sizeof msg, err);
            if (k < 0)
                goto out;
            if (k > 0 && r->boot.nnodes > 1) {
                rc = 1;
                goto out;
            }
            if (k == 0 && o->verbose)
                fprintf(stderr, "par3drun: rendezvous: slurm declined: %s; single node\n", msg);
            close_backend(r);
        }
        if (o->nnodes > 1 || o->node_rank >= 0) {
            p3d_err(err, "--nnodes/--node-rank need --rdzv static:HOST:PORT or etcd:URL (--rdzv auto only finds "
                         "PMIx and Slurm, and found neither)");
            goto out;
        }
        rc = 0;
        goto out;
    }
    if (find_backend(name, r, err) < 0)
        goto out;
    int k = try_backend(r, arg, o, msg, sizeof msg, err);
    if (k < 0)
        goto out;
    if (k == 0) {
        p3d_err(err, "--rdzv %s: %s", name, msg[0] ? msg : "not available here");
        goto out;
    }
    rc = 1;
out:
    if (rc == 1) {
        /* the token: a file beats the environment beats the backend's own */
        if (o->rdzv_token_file) {
            if (p3d_rdzv_read_token(o->rdzv_token_file, r->boot.token, sizeof r->boot.token, err) < 0)
                rc = -1;
        } else if (env("P3D_RDZV_TOKEN")) {
            copy(r->boot.token, sizeof r->boot.token, env("P3D_RDZV_TOKEN"));
        }
        if (rc == 1 && !r->boot.token[0] &&
            (!strcmp(r->ops->name, "static") || !strcmp(r->ops->name, "k8s") || !strcmp(r->ops->name, "etcd"))) {
            /* etcd holds no secret (it signs its values with the key): the
             * key comes from each node */
            p3d_err(err,
                    "--rdzv %s needs the job's token on every node: --rdzv-token-file FILE (same content "
                    "everywhere; e.g. head -c 24 /dev/urandom | base64 > FILE; on Kubernetes a Secret "
                    "mounted as a file) or P3D_RDZV_TOKEN",
                    r->ops->name);
            rc = -1;
        }
        if (rc == 1 && o->job_id)
            copy(r->boot.job_id, sizeof r->boot.job_id, o->job_id);
        /* inside a Slurm job every backend names the job as Slurm does
         * (--job-id's default), static and k8s too: one id in the run
         * directory, result.json and a requeued job's logs; Slurm's are
         * decimal, anything else (it names a directory) is not taken */
        const char *sj = env("SLURM_JOB_ID");
        if (rc == 1 && !r->boot.job_id[0] && sj && strlen(sj) <= 20 && strspn(sj, "0123456789") == strlen(sj))
            copy(r->boot.job_id, sizeof r->boot.job_id, sj);
        r->timeout = o->rdzv_timeout > 0 ? o->rdzv_timeout : p3d_rdzv_default_timeout(r->boot.nnodes);
    }
    if (rc != 1)
        close_backend(r);
    return rc;
}

int p3d_rdzv_publish(p3d_rdzv *r, char **err)
{
    char msg[1024] = "";
    if (!r->ops->publish)
        return 0;
    int k = r->ops->publish(r->state, &r->boot, msg, sizeof msg);
    if (k < 0) {
        p3d_err(err, "rendezvous '%s': %s", r->ops->name, msg[0] ? msg : "publish failed");
        return k == -2 && r->boot.node_rank == P3D_JOIN_RUNNING ? -2 : -1;
    }
    return 0;
}

/* ---- leadership held in the backend -------------------------------------- */

int p3d_rdzv_elects(const p3d_rdzv *r)
{
    const p3d_rdzv_ops *o = r ? r->ops : NULL;
    return o && r->state && o->campaign && o->keep && o->notify_fd && o->news && o->notify_fd(r->state) >= 0;
}

int p3d_rdzv_campaign(p3d_rdzv *r, const int *before, int nbefore, const char *value, double until, char **err)
{
    char msg[1024] = "";
    if (!p3d_rdzv_elects(r))
        return p3d_err(err, "rendezvous '%s' holds no leadership", r && r->ops ? r->ops->name : "none");
    if (r->ops->campaign(r->state, before, nbefore, value, until, msg, sizeof msg) < 0)
        return p3d_err(err, "rendezvous '%s': %s", r->ops->name, msg[0] ? msg : "cannot campaign");
    return 0;
}

int p3d_rdzv_keep(p3d_rdzv *r, const char *text, char **err)
{
    char msg[1024] = "";
    if (!p3d_rdzv_elects(r))
        return 0;
    if (r->ops->keep(r->state, text, msg, sizeof msg) < 0)
        return p3d_err(err, "rendezvous '%s': %s", r->ops->name, msg[0] ? msg : "cannot keep the job's state");
    return 0;
}

int p3d_rdzv_notify_fd(const p3d_rdzv *r)
{
    return p3d_rdzv_elects(r) ? r->ops->notify_fd(r->state) : -1;
}

int p3d_rdzv_news(p3d_rdzv *r, char *msg, size_t cap)
{
    if (cap)
        msg[0] = 0;
    return p3d_rdzv_elects(r) ? r->ops->news(r->state, msg, cap) : P3D_RDZV_NEWS_NONE;
}

int p3d_rdzv_fanout(const p3d_opts *o, int *fanout, char **err)
{
    *fanout = P3D_FANOUT_DEFAULT;
    if (o->rdzv_fanout > 0) {
        *fanout = o->rdzv_fanout;
        return 0;
    }
    const char *v = env("P3D_RDZV_FANOUT");
    if (!v)
        return 0;
    unsigned long long k;
    if (p3d_decimal(v, P3D_FANOUT_MAX, &k) < 0 || k < 1)
        return p3d_err(err,
                       "P3D_RDZV_FANOUT=%s: expected an integer 1..%d in plain decimal digits (children per "
                       "agent in the distribution tree)",
                       p3d_tesc(v), P3D_FANOUT_MAX);
    *fanout = (int)k;
    return 0;
}

void p3d_rdzv_close(p3d_rdzv *r)
{
    close_backend(r);
}
