/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preflight.c — the preflight (preflight.h): before the placement is
 * started, every node runs a short benchmark of what the job will use, and
 * a node that holds the others back is excluded as a failed --health-check
 * is (the caller moves its ranks to a spare, place_replace.c).
 *
 * The benchmark is p3d-worker --bench-node (worker/bench_node.c), one per
 * node, all at once, run by the --health-check machinery (health.c: its
 * own process group, P3D_NODE set, output captured and bounded, SIGKILL at
 * --preflight-timeout). For the TCP figure the nodes form a ring: this
 * process opens one listening socket per node on the loopback (the nodes
 * of an --emulate job share this host) and hands node i its own socket and
 * node i+1's port, so that each node streams to its successor while its
 * predecessor streams to it. The ring is keyed as the one across hosts
 * (a key made for it, handed over in a pipe): any local user can connect
 * to the loopback.
 *
 * The verdict: per figure, the median over the nodes that gave one (the
 * judged node among them, judge.h: for an even count the lower middle,
 * never a mean, so one peer claiming a huge figure cannot move it); a node
 * whose figure is more than --slow-factor below it is excluded, and so is
 * one whose benchmark failed, timed out or printed no figures, or a figure
 * beyond any hardware (judge.h's bounds). A figure fewer than 3 nodes gave
 * is shown but not judged ("cannot judge"): with two nodes either could be
 * the slow one. A node's
 * TCP figure is the better of its two links: a slow node makes both of
 * its links slow, a neighbour only one of its own. With fewer than 3
 * nodes that cannot tell which end of a link is slow, so TCP is shown but
 * not judged.
 */
#include "preflight.h"
#include "ranks.h"

#include "strbuf.h"
#include "termsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* about this long per figure (the worker's --bench-seconds) */
#define PF_BENCH_SECONDS 0.2

/* What becomes of the NVLink links: emulated nodes share this host (and
 * its GPUs) and run the CPU backend; a node of its own benchmarks its GPUs
 * where one is usable (the worker's cuda_bench.cu) and its peer links. */
static const char PF_LINKS_EMULATED[] = "skipped: the CPU backend has no NVLink (emulated nodes share this host)";
static const char PF_LINKS_CPU[] = "skipped: no usable GPU, the benchmark ran on the CPU";

static const char PF_LINKS_GPU[] = "measured: peer copies between its GPUs over their fastest link class "
                                   "(NVLink where there is NVLink)";
static const char PF_LINKS_NO_PEER[] = "not measured: no two of its GPUs have peer access";
static const char PF_LINKS_ONE_GPU[] = "none: one GPU";

const char *p3d_preflight_links(const p3d_opts *o)
{
    return o->emulate ? PF_LINKS_EMULATED : PF_LINKS_CPU;
}

const char *p3d_preflight_node_links(const p3d_opts *o, const p3d_preflight_node *nd)
{
    if (!nd->gpus)
        return p3d_preflight_links(o);
    return nd->p2p_gbps >= 0 ? PF_LINKS_GPU : nd->gpus > 1 ? PF_LINKS_NO_PEER : PF_LINKS_ONE_GPU;
}

void p3d_preflight_node_clear(p3d_preflight_node *nd)
{
    nd->gflops = nd->mem_gbps = nd->tcp_out_mbps = nd->tcp_in_mbps = nd->p2p_gbps = -1;
    nd->gpus = 0;
}

int p3d_preflight_begin(p3d_preflight *pf, const p3d_opts *o, int n)
{
    memset(pf, 0, sizeof *pf);
    pf->n = n;
    pf->slow_factor = o->slow_factor;
    pf->timeout = o->preflight_timeout;
    pf->median_gflops = pf->median_mem_gbps = pf->median_tcp_mbps = pf->median_p2p_gbps = -1;
    pf->nodes = calloc((size_t)n + 1, sizeof *pf->nodes);
    if (!pf->nodes)
        return -1;
    for (int i = 0; i < n; i++) {
        p3d_preflight_node_clear(&pf->nodes[i]);
        pf->nodes[i].links = p3d_preflight_links(o);
    }
    return 0;
}

void p3d_preflight_free(p3d_preflight *pf)
{
    free(pf->nodes);
    memset(pf, 0, sizeof *pf);
}

/* The reference of the values >= 0 among v[0..n) (-1 when none; judge.h,
 * a low value is the bad one); tmp has n places. *judged: 3 or more. */
static double median(const double *v, int n, double *tmp, int *judged)
{
    int k = 0;
    double ref;
    for (int i = 0; i < n; i++)
        if (v[i] >= 0)
            tmp[k++] = v[i];
    *judged = p3d_judge_ref(tmp, k, 0, &ref) == 0;
    return ref;
}

/* One value of the figures line: a finite number >= 0, all of it. */
static int parse_num(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* A figure beyond any hardware (judge.h): 1 with the reason in why. */
static int beyond(const char *key, double v, char *why, size_t cap)
{
    static const struct {
        const char *key, *unit;
        double max;
    } b[] = {{"gflops", "GFLOP/s", P3D_JUDGE_GFLOPS_MAX}, {"mem_gbps", "GB/s", P3D_JUDGE_GBPS_MAX},
             {"p2p_gbps", "GB/s", P3D_JUDGE_GBPS_MAX},    {"tcp_out_mbps", "MB/s", P3D_JUDGE_MBPS_MAX},
             {"tcp_in_mbps", "MB/s", P3D_JUDGE_MBPS_MAX}, {"seconds", "s", P3D_JUDGE_SECONDS_MAX}};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        if (!strcmp(key, b[i].key) && v > b[i].max) {
            snprintf(why, cap, "its figures line says %s=%.6g: beyond any hardware (at most %g %s)", key, v, b[i].max,
                     b[i].unit);
            return 1;
        }
    return 0;
}

/* The worker's line "preflight backend=cpu gflops=G mem_gbps=M
 * [tcp_out_mbps=O tcp_in_mbps=I] links=skipped" (the last such line of
 * its output), strictly: every word known, every number whole; tcp_only:
 * the line of --bench-tcp-only, whose TCP figures are required instead of
 * compute and memory. 0, or -1 with what is wrong in why. */
static int parse_line(const char *text, p3d_preflight_node *nd, int tcp_only, char *why, size_t cap)
{
    const char *line = NULL;
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, "preflight ", 10))
            line = p;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    if (!line) {
        snprintf(why, cap, "its output has no 'preflight ...' figures line");
        return -1;
    }
    char buf[512];
    size_t len = strcspn(line, "\n");
    if (len >= sizeof buf) {
        snprintf(why, cap, "its figures line is longer than %zu bytes", sizeof buf - 1);
        return -1;
    }
    memcpy(buf, line, len);
    buf[len] = 0;
    p3d_preflight_node_clear(nd);
    double gpus = 0, maxrel = 0;
    char *save = NULL;
    strtok_r(buf, " ", &save); /* "preflight" */
    for (char *w = strtok_r(NULL, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(w, '=');
        double *dst = NULL;
        if (!eq) {
            snprintf(why, cap, "its figures line has '%.40s' where KEY=VALUE belongs", w);
            return -1;
        }
        *eq = 0;
        if (!strcmp(w, "backend") || !strcmp(w, "links"))
            continue;
        if (!strcmp(w, "gflops"))
            dst = &nd->gflops;
        else if (!strcmp(w, "mem_gbps"))
            dst = &nd->mem_gbps;
        else if (!strcmp(w, "tcp_out_mbps"))
            dst = &nd->tcp_out_mbps;
        else if (!strcmp(w, "tcp_in_mbps"))
            dst = &nd->tcp_in_mbps;
        else if (!strcmp(w, "seconds"))
            dst = &nd->seconds;
        else if (!strcmp(w, "p2p_gbps"))
            dst = &nd->p2p_gbps;
        else if (!strcmp(w, "gpus"))
            dst = &gpus;
        else if (!strcmp(w, "gemm_maxrel")) /* the worker judged it: said, not judged again */
            dst = &maxrel;
        if (dst && dst != &gpus && dst != &maxrel && parse_num(eq + 1, dst) == 0 && beyond(w, *dst, why, cap))
            return -1;
        if (!dst || parse_num(eq + 1, dst) < 0 || (dst == &gpus && (gpus != (int)gpus || gpus > 65536))) {
            snprintf(why, cap,
                     "its figures line has %s '%.40s=%.40s' (expected gpus, gflops, mem_gbps, p2p_gbps, "
                     "gemm_maxrel, tcp_out_mbps, tcp_in_mbps, seconds as numbers >= 0)",
                     dst ? "the bad value" : "the unknown word", w, eq + 1);
            return -1;
        }
    }
    nd->gpus = (int)gpus;
    if (tcp_only ? nd->tcp_out_mbps < 0 || nd->tcp_in_mbps < 0 : nd->gflops < 0 || nd->mem_gbps < 0) {
        snprintf(why, cap, "its figures line lacks %s",
                 tcp_only ? "tcp_out_mbps or tcp_in_mbps" : "gflops or mem_gbps");
        return -1;
    }
    return 0;
}

int p3d_preflight_parse(const char *text, p3d_preflight_node *nd, char *why, size_t cap)
{
    return parse_line(text, nd, 0, why, cap);
}

int p3d_preflight_parse_tcp(const char *text, p3d_preflight_node *nd, char *why, size_t cap)
{
    return parse_line(text, nd, 1, why, cap);
}

/* 'path' for sh -c, single quotes kept. */
static void sh_quote(p3d_sb *b, const char *s)
{
    p3d_sb_putc(b, '\'');
    for (; *s; s++)
        if (*s == '\'')
            p3d_sb_puts(b, "'\\''");
        else
            p3d_sb_putc(b, *s);
    p3d_sb_putc(b, '\'');
}

int p3d_preflight_ring(const p3d_opts *o, const char *name, int lfd, int key_fd, const char *addr, int port,
                       double *out_mbps, double *in_mbps, char *why, size_t cap)
{
    int rc = -1;
    char *err = NULL, *cmd = NULL, *outs[1] = {NULL};
    char *worker = p3d_resolve_program("p3d-worker", &err);
    p3d_health_res res;
    memset(&res, 0, sizeof res);
    if (!worker) {
        snprintf(why, cap, "%s", err ? err : "p3d-worker not found");
        goto out;
    }
    p3d_sb b = {0};
    p3d_sb_puts(&b, "exec ");
    sh_quote(&b, worker);
    /* the worker's own bound is --preflight-timeout; ours a little more,
     * so that a hanging neighbour gives 0 MB/s, not a killed benchmark */
    p3d_sb_printf(&b, " --bench-node --bench-tcp-only --bench-seconds %g --connect-timeout %g --bench-tcp-fd %d",
                  PF_BENCH_SECONDS, o->preflight_timeout, lfd);
    if (key_fd >= 0) /* the descriptor's number, never the key */
        p3d_sb_printf(&b, " --bench-tcp-key-fd %d", key_fd);
    p3d_sb_puts(&b, " --bench-tcp-peer ");
    char peer[300];
    snprintf(peer, sizeof peer, "%s:%d", addr, port);
    sh_quote(&b, peer);
    if (!(cmd = p3d_sb_finish(&b))) {
        snprintf(why, cap, "out of memory");
        goto out;
    }
    const char *cmds[1] = {cmd};
    p3d_health_cmd hc = {.cmds = cmds,
                         .timeout = o->preflight_timeout + 2,
                         .what = "--preflight TCP ring",
                         .outs = outs};
    p3d_health_run_cmd(&hc, &name, 1, NULL, &res);
    p3d_preflight_node nd;
    char pwhy[200];
    memset(&nd, 0, sizeof nd);
    if (!res.ok)
        snprintf(why, cap, "%s", res.how);
    else if (!outs[0])
        snprintf(why, cap, "its output was lost (out of memory)");
    else if (p3d_preflight_parse_tcp(outs[0], &nd, pwhy, sizeof pwhy) < 0)
        snprintf(why, cap, "%s", pwhy);
    else {
        *out_mbps = nd.tcp_out_mbps;
        *in_mbps = nd.tcp_in_mbps;
        rc = 0;
    }
out:
    free(outs[0]);
    free(cmd);
    free(worker);
    free(err);
    return rc;
}

int p3d_preflight_key_fd(const char *key)
{
    int p[2];
    size_t n = strlen(key);
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    /* at most 255 bytes: the pipe's buffer takes them at once */
    int ok = write(p[1], key, n) == (ssize_t)n && fcntl(p[0], F_SETFD, 0) == 0;
    close(p[1]);
    if (!ok) {
        close(p[0]);
        return -1;
    }
    return p[0];
}

/* A listening TCP socket on the loopback (inherited by the benchmarks:
 * no O_CLOEXEC); its port in *port. */
static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* The loopback ring of n benchmarks: for node i a listening socket
 * (fds[2i], its port in port[i]) and the read end of a pipe holding a key
 * made for this ring (fds[2i+1]), keyed like the ring across hosts: a
 * stranger on this host cannot take a benchmark's incoming link. Every
 * entry -1 or open; the caller closes them. 0, or -1 with err. */
static int ring_open(int n, int *fds, int *port, char **err)
{
    char key[33];
    if (p3d_random_hex(key, 16) < 0)
        return p3d_err(err, "--preflight: no random bytes for the ring's key (getrandom failed)");
    for (int i = 0; i < n; i++) {
        if ((fds[2 * i] = listen_loopback(&port[i])) < 0)
            return p3d_err(err, "--preflight: cannot open a listening TCP socket on the loopback: %s", strerror(errno));
        if ((fds[2 * i + 1] = p3d_preflight_key_fd(key)) < 0)
            return p3d_err(err, "--preflight: cannot hand the ring's key over: %s", strerror(errno));
    }
    return 0;
}

/* Node i's figures from what its benchmark said, or why it is excluded. */
static void take_figures(const p3d_opts *o, p3d_preflight *pf, int i, const char *name, const p3d_health_res *res,
                         const char *out)
{
    p3d_preflight_node *nd = &pf->nodes[i];
    char why[200];
    nd->name = name;
    nd->seconds = res->seconds;
    if (!res->ok) {
        snprintf(nd->why, sizeof nd->why, "its benchmark failed: %s", res->how);
    } else if (!out) {
        snprintf(nd->why, sizeof nd->why, "its benchmark's output was lost (out of memory)");
    } else if (p3d_preflight_parse(out, nd, why, sizeof why) < 0) {
        snprintf(nd->why, sizeof nd->why, "its benchmark gave no figures: %s", why);
    } else {
        nd->ran = 1;
        nd->links = p3d_preflight_node_links(o, nd);
        return;
    }
    p3d_preflight_node_clear(nd);
    nd->excluded = 1;
    pf->nexcluded++;
}

/* Node i against the medians: the first line of why names every figure
 * that is too low. */
static void judge(p3d_preflight *pf, int i)
{
    p3d_preflight_node *nd = &pf->nodes[i];
    double tcp = nd->tcp_out_mbps > nd->tcp_in_mbps ? nd->tcp_out_mbps : nd->tcp_in_mbps;
    struct {
        const char *what, *unit;
        double v, med;
        int on;
    } f[] = {{pf->any_gpu && !nd->gpus ? "compute (no usable GPU: its benchmark ran on the CPU)"
              : nd->gpus > 1           ? "compute (its slowest GPU)"
                                       : "compute",
              "GFLOP/s", nd->gflops, pf->median_gflops, pf->judged},
             {nd->gpus > 1 ? "memory bandwidth (its slowest GPU)" : "memory bandwidth", "GB/s", nd->mem_gbps,
              pf->median_mem_gbps, pf->judged},
             {"GPU peer link bandwidth (its slowest pair)", "GB/s", nd->p2p_gbps, pf->median_p2p_gbps, pf->p2p_judged},
             {"TCP bandwidth (the better of its two ring links)", "MB/s", tcp, pf->median_tcp_mbps,
              pf->tcp_judged && !nd->tcp_cleared}};
    size_t k = 0;
    for (size_t j = 0; j < sizeof f / sizeof f[0]; j++) {
        if (!f[j].on || f[j].v < 0 || f[j].med <= 0 || f[j].v * pf->slow_factor >= f[j].med)
            continue;
        char ratio[32];
        if (f[j].v > 0)
            snprintf(ratio, sizeof ratio, "%.2fx", f[j].med / f[j].v);
        else
            snprintf(ratio, sizeof ratio, "infinitely");
        int w = snprintf(nd->why + k, sizeof nd->why - k, "%s%s %.3g %s is %s below the median %.3g (--slow-factor %g)",
                         k ? "; " : "", f[j].what, f[j].v, f[j].unit, ratio, f[j].med, pf->slow_factor);
        if (w < 0 || (size_t)w >= sizeof nd->why - k)
            break;
        k += (size_t)w;
    }
    if (k) {
        nd->excluded = 1;
        pf->nexcluded++;
    }
}

/* Both ring links of node i below the median by more than --slow-factor. */
static int both_links_slow(const p3d_preflight *pf, int i)
{
    const p3d_preflight_node *nd = &pf->nodes[i];
    double med = pf->median_tcp_mbps, f = pf->slow_factor;
    return nd->tcp_in_mbps * f < med && nd->tcp_out_mbps * f < med;
}

/* Which nodes with both ring links slow are slow themselves. A slow node
 * makes both of its links slow, so in a run of r consecutive nodes that
 * all have both links slow (the r + 1 links between the two good nodes
 * around it), the slow nodes must touch every one of those links. With r
 * odd the fewest that do are unique: the 1st, 3rd, ... of the run (nodes 1
 * and 3 slow make node 2's links slow too; node 2 is cleared). With r even
 * several sets do as well and the ring cannot tell which: every node of
 * the run stays under suspicion. The ring is the nodes with TCP figures,
 * in node order (the order both preflights stream in). */
static void clear_between(p3d_preflight *pf, int *ord)
{
    int m = 0, start = -1, run = 0;
    for (int i = 0; i < pf->n; i++) {
        const p3d_preflight_node *nd = &pf->nodes[i];
        if (nd->ran && nd->tcp_in_mbps >= 0 && nd->tcp_out_mbps >= 0)
            ord[m++] = i;
    }
    for (int k = 0; k < m && start < 0; k++)
        if (!both_links_slow(pf, ord[k]))
            start = k;
    if (start < 0)
        return;            /* no good link anywhere: nothing to attribute against */
    int *runbuf = ord + m; /* room for the run: ord has 2n places */
    for (int s = 1; s <= m; s++) {
        int i = ord[(start + s) % m];
        if (both_links_slow(pf, i)) {
            runbuf[run++] = i;
            continue;
        }
        for (int j = 1; run % 2 == 1 && j < run; j += 2)
            pf->nodes[runbuf[j]].tcp_cleared = 1;
        run = 0;
    }
}

int p3d_preflight_judge(p3d_preflight *pf)
{
    int n = pf->n;
    double *tmp = calloc((size_t)n + 1, sizeof *tmp), *col = calloc((size_t)n + 1, sizeof *col);
    int *ord = calloc(2 * (size_t)n + 1, sizeof *ord);
    if (!tmp || !col || !ord) {
        free(tmp);
        free(col);
        free(ord);
        return -1;
    }
    for (int i = 0; i < n; i++)
        col[i] = pf->nodes[i].ran ? pf->nodes[i].gflops : -1;
    pf->median_gflops = median(col, n, tmp, &pf->judged);
    for (int i = 0; i < n; i++)
        col[i] = pf->nodes[i].ran ? pf->nodes[i].mem_gbps : -1;
    int mem_judged;
    pf->median_mem_gbps = median(col, n, tmp, &mem_judged);
    pf->judged &= mem_judged;
    for (int i = 0; i < n; i++) {
        col[i] = pf->nodes[i].ran ? pf->nodes[i].p2p_gbps : -1;
        pf->any_gpu |= pf->nodes[i].ran && pf->nodes[i].gpus > 0;
    }
    pf->median_p2p_gbps = median(col, n, tmp, &pf->p2p_judged);
    for (int i = 0; i < n; i++) {
        const p3d_preflight_node *nd = &pf->nodes[i];
        col[i] = !nd->ran ? -1 : nd->tcp_out_mbps > nd->tcp_in_mbps ? nd->tcp_out_mbps : nd->tcp_in_mbps;
    }
    /* which end of a slow link is slow needs a third node on the ring */
    pf->median_tcp_mbps = median(col, n, tmp, &pf->tcp_judged);
    pf->tcp_judged &= !pf->tcp_note;
    if (pf->tcp_judged && pf->median_tcp_mbps > 0)
        clear_between(pf, ord);
    for (int i = 0; i < n; i++)
        if (pf->nodes[i].ran && !pf->nodes[i].excluded)
            judge(pf, i);
    free(tmp);
    free(col);
    free(ord);
    return 0;
}

int p3d_preflight_run(const p3d_opts *o, const char *const *names, int n, p3d_preflight *pf, char **err)
{
    int rc = -1;
    char *worker = NULL, **cmds = NULL, **outs = NULL;
    int *fds = NULL, *port = NULL; /* fds: node i's ring socket and key pipe at 2i, 2i+1 */
    p3d_health_res *res = NULL;
    int begun = p3d_preflight_begin(pf, o, n);
    cmds = calloc((size_t)n + 1, sizeof *cmds);
    outs = calloc((size_t)n + 1, sizeof *outs);
    fds = malloc(2 * ((size_t)n + 1) * sizeof *fds);
    port = calloc((size_t)n + 1, sizeof *port);
    res = calloc((size_t)n + 1, sizeof *res);
    if (begun < 0 || !cmds || !outs || !fds || !port || !res) {
        p3d_err(err, "--preflight: out of memory");
        free(fds);
        fds = NULL;
        goto out;
    }
    for (int i = 0; i < 2 * n; i++)
        fds[i] = -1;
    worker = p3d_resolve_program("p3d-worker", err);
    if (!worker) {
        char *e = *err;
        *err = NULL;
        p3d_err(err, "--preflight runs p3d-worker --bench-node on every node: %s", e ? e : "p3d-worker not found");
        free(e);
        goto out;
    }
    int ring = n >= 2;
    if (ring && ring_open(n, fds, port, err) < 0)
        goto out;
    /* Nodes that share this host (--emulate) stream one link at a time,
     * each in its slot, and start computing together: concurrent streams
     * on shared cores measure the scheduler, not the links. When the slots
     * do not fit in the ring's share of the time bound (a third, less the
     * start-up), the links run at once, as on nodes of their own. */
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    double t_slots = rt.tv_sec + rt.tv_nsec * 1e-9 + 0.5; /* the benchmarks started by then */
    int slots = ring && o->emulate && 0.6 + n * (PF_BENCH_SECONDS + 0.05) <= o->preflight_timeout / 3;
    /* and compute one node at a time as well (the worker's --bench-serial:
     * two vCPUs are often SMT siblings, and a healthy emulated node came out
     * 1.4x below the others in CPU time), when the compute slots fit in two
     * thirds of the bound with the ring's */
    int serial = slots && 0.6 + n * (3 * PF_BENCH_SECONDS + 0.3) <= o->preflight_timeout * 2 / 3;
    for (int i = 0; i < n; i++) {
        p3d_sb b = {0};
        p3d_sb_puts(&b, "exec ");
        sh_quote(&b, worker);
        /* emulated nodes share this host and its GPUs: the CPU backend;
         * a node of its own benchmarks its GPUs where one is usable */
        p3d_sb_printf(&b, " --bench-node --backend %s --bench-seconds %g --connect-timeout %g",
                      o->emulate ? "cpu" : "auto", PF_BENCH_SECONDS, o->preflight_timeout);
        if (ring)
            p3d_sb_printf(&b, " --bench-tcp-fd %d --bench-tcp-key-fd %d --bench-tcp-peer 127.0.0.1:%d", fds[2 * i],
                          fds[2 * i + 1], port[(i + 1) % n]);
        if (slots)
            p3d_sb_printf(&b, " --bench-tcp-slot %d:%d:%.3f%s", i, n, t_slots, serial ? " --bench-serial" : "");
        if (!(cmds[i] = p3d_sb_finish(&b))) {
            p3d_err(err, "--preflight: out of memory");
            goto out;
        }
    }
    /* every benchmark would inherit every node's socket and key pipe:
     * each keeps its own only (a node that died leaves its port closed,
     * not held open by its neighbours) */
    p3d_health_cmd hc = {.cmds = (const char *const *)cmds,
                         .timeout = o->preflight_timeout,
                         .what = "--preflight benchmark",
                         .outs = outs,
                         .fds = ring ? fds : NULL,
                         .nfds = 2};
    double t0 = p3d_now();
    p3d_health_run_cmd(&hc, names, n, NULL, res);
    pf->seconds = p3d_now() - t0;
    for (int i = 0; i < n; i++)
        take_figures(o, pf, i, names[i], &res[i], outs[i]);
    if (p3d_preflight_judge(pf) < 0) {
        p3d_err(err, "--preflight: out of memory");
        goto out;
    }
    rc = 0;
out:
    for (int i = 0; fds && i < 2 * n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (int i = 0; cmds && i < n; i++)
        free(cmds[i]);
    for (int i = 0; outs && i < n; i++)
        free(outs[i]);
    free(cmds);
    free(outs);
    free(fds);
    free(port);
    free(res);
    free(worker);
    return rc;
}

static void put_fig(p3d_sb *b, double v, int width)
{
    if (v < 0)
        p3d_sb_printf(b, " %*s", width, "-");
    else if (v >= 1e4 && v < 1e9) /* a GPU's GFLOP/s: whole, not 5.1e+04 */
        p3d_sb_printf(b, " %*.0f", width, v);
    else
        p3d_sb_printf(b, " %*.4g", width, v);
}

void p3d_preflight_table(const p3d_preflight *pf, FILE *f)
{
    p3d_sb b = {0};
    int w = 4;
    for (int i = 0; i < pf->n; i++)
        if ((int)strlen(pf->nodes[i].name) > w)
            w = (int)strlen(pf->nodes[i].name);
    if (w > 40)
        w = 40;
    /* GPU nodes: their count and the peer links, in two more columns */
    if (pf->any_gpu)
        p3d_sb_printf(&b, "%-*s  %-8s %4s %9s %9s %9s %9s %9s  %s\n", w, "node", "result", "GPUs", "GFLOP/s",
                      "mem GB/s", "P2P GB/s", "TCP out", "TCP in", "why");
    else
        p3d_sb_printf(&b, "%-*s  %-8s %9s %9s %9s %9s  %s\n", w, "node", "result", "GFLOP/s", "mem GB/s", "TCP out",
                      "TCP in", "why");
    for (int i = 0; i < pf->n; i++) {
        const p3d_preflight_node *nd = &pf->nodes[i];
        p3d_sb_printf(&b, "%-*.40s  %-8s", w, nd->name, nd->excluded ? "EXCLUDED" : "ok");
        if (pf->any_gpu)
            p3d_sb_printf(&b, " %4d", nd->gpus);
        put_fig(&b, nd->gflops, 9);
        put_fig(&b, nd->mem_gbps, 9);
        if (pf->any_gpu)
            put_fig(&b, nd->p2p_gbps, 9);
        put_fig(&b, nd->tcp_out_mbps, 9);
        put_fig(&b, nd->tcp_in_mbps, 9);
        if (nd->excluded)
            p3d_sb_printf(&b, "  %s", nd->why);
        p3d_sb_putc(&b, '\n');
    }
    p3d_sb_printf(&b, "%-*s  %-8s", w, "median", "");
    if (pf->any_gpu)
        p3d_sb_printf(&b, " %4s", "");
    put_fig(&b, pf->median_gflops, 9);
    put_fig(&b, pf->median_mem_gbps, 9);
    if (pf->any_gpu)
        put_fig(&b, pf->median_p2p_gbps, 9);
    if (pf->median_tcp_mbps >= 0)
        put_fig(&b, pf->median_tcp_mbps, 19); /* of the better link per node */
    p3d_sb_putc(&b, '\n');
    p3d_sb_printf(&b,
                  "%d of %d node%s excluded (--slow-factor %g below the median on a figure, failed, or not done "
                  "within --preflight-timeout %g s); %.2f s. ",
                  pf->nexcluded, pf->n, pf->n == 1 ? "" : "s", pf->slow_factor, pf->timeout, pf->seconds);
    if (pf->tcp_note)
        p3d_sb_printf(&b, "TCP: %s. ", pf->tcp_note);
    else
        p3d_sb_printf(&b, "TCP: MB/s on a ring of pairs (node i streams to node i+1)%s. ",
                      pf->n < 2        ? ", none with one node"
                      : pf->tcp_judged ? ""
                                       : ", not judged with fewer than 3 nodes on it");
    p3d_sb_printf(&b, "NVLink links: %s.\n", pf->n ? pf->nodes[0].links : PF_LINKS_CPU);
    int nfig = 0;
    for (int i = 0; i < pf->n; i++)
        nfig += pf->nodes[i].ran && pf->nodes[i].gflops >= 0;
    if (nfig && !pf->judged)
        p3d_sb_printf(&b,
                      "Compute and memory: cannot judge: %d node%s gave figures (at least %d needed; with two, "
                      "either could be the slow one); none excluded for them.\n",
                      nfig, nfig == 1 ? "" : "s", P3D_JUDGE_MIN);
    if (pf->nrun_none)
        p3d_sb_printf(&b,
                      "%d node%s ran no preflight (started without --preflight: give every node the same "
                      "options); not judged.\n",
                      pf->nrun_none, pf->nrun_none == 1 ? "" : "s");
    int timed_out = 0;
    for (int i = 0; i < pf->n; i++)
        timed_out += strstr(pf->nodes[i].why, "timed out after") != NULL;
    if (pf->n > 1 && timed_out == pf->n)
        p3d_sb_printf(&b,
                      "Every node timed out: --preflight-timeout %g s is shorter than the benchmark takes here "
                      "(about %.1f s of CPU per node, and the TCP ring); give a longer one.\n",
                      pf->timeout, 3 * PF_BENCH_SECONDS);
    char *s = p3d_sb_finish(&b);
    if (s) {
        /* node names come from the cluster file: escaped */
        p3d_term_fputs(s, f);
        free(s);
    }
}

static void json_fig(p3d_sb *b, const char *key, double v)
{
    p3d_sb_printf(b, ", \"%s\": ", key);
    if (v < 0)
        p3d_sb_puts(b, "null");
    else
        p3d_sb_json_num(b, v);
}

/* One node's name, verdict and figures: the head of its object in the
 * report and of its events.jsonl record. */
static void node_figs(p3d_sb *b, const p3d_preflight_node *nd)
{
    p3d_sb_puts(b, "\"node\": ");
    p3d_sb_json_str(b, nd->name);
    p3d_sb_printf(b, ", \"excluded\": %s", nd->excluded ? "true" : "false");
    json_fig(b, "gflops", nd->gflops);
    json_fig(b, "mem_gbps", nd->mem_gbps);
    json_fig(b, "tcp_out_mbps", nd->tcp_out_mbps);
    json_fig(b, "tcp_in_mbps", nd->tcp_in_mbps);
    p3d_sb_printf(b, ", \"gpus\": %d", nd->gpus);
    json_fig(b, "p2p_gbps", nd->p2p_gbps);
}

char *p3d_preflight_json(const p3d_preflight *pf)
{
    p3d_sb b = {0};
    p3d_sb_printf(&b, "{\"slow_factor\": ");
    p3d_sb_json_num(&b, pf->slow_factor);
    p3d_sb_printf(&b, ", \"timeout_s\": ");
    p3d_sb_json_num(&b, pf->timeout);
    p3d_sb_printf(&b, ", \"seconds\": ");
    p3d_sb_json_num(&b, pf->seconds);
    p3d_sb_printf(&b,
                  ", \"excluded\": %d, \"tcp_judged\": %s, \"judged\": %s, \"median\": {\"gflops\": ", pf->nexcluded,
                  pf->tcp_judged ? "true" : "false", pf->judged ? "true" : "false");
    if (pf->median_gflops < 0)
        p3d_sb_puts(&b, "null");
    else
        p3d_sb_json_num(&b, pf->median_gflops);
    json_fig(&b, "mem_gbps", pf->median_mem_gbps);
    json_fig(&b, "p2p_gbps", pf->median_p2p_gbps);
    json_fig(&b, "tcp_mbps", pf->median_tcp_mbps);
    p3d_sb_puts(&b, "}, \"nodes\": [");
    for (int i = 0; i < pf->n; i++) {
        const p3d_preflight_node *nd = &pf->nodes[i];
        p3d_sb_puts(&b, i ? ", {" : "{");
        node_figs(&b, nd);
        p3d_sb_puts(&b, ", \"links\": ");
        p3d_sb_json_str(&b, nd->links);
        p3d_sb_puts(&b, ", \"seconds\": ");
        p3d_sb_json_num(&b, nd->seconds);
        p3d_sb_puts(&b, ", \"why\": ");
        p3d_sb_json_str(&b, nd->excluded ? nd->why : NULL);
        p3d_sb_putc(&b, '}');
    }
    p3d_sb_puts(&b, "]}");
    return p3d_sb_finish(&b);
}

void p3d_preflight_events(int events_fd, double t0, const p3d_preflight *pf)
{
    if (events_fd < 0)
        return;
    for (int i = 0; i < pf->n; i++) {
        const p3d_preflight_node *nd = &pf->nodes[i];
        p3d_sb b = {0};
        p3d_sb_puts(&b, "\"event\": \"preflight\", ");
        node_figs(&b, nd);
        json_fig(&b, "median_gflops", pf->median_gflops);
        json_fig(&b, "median_mem_gbps", pf->median_mem_gbps);
        json_fig(&b, "median_p2p_gbps", pf->median_p2p_gbps);
        json_fig(&b, "median_tcp_mbps", pf->median_tcp_mbps);
        p3d_sb_puts(&b, ", \"links\": ");
        p3d_sb_json_str(&b, nd->links);
        p3d_sb_puts(&b, ", \"slow_factor\": ");
        p3d_sb_json_num(&b, pf->slow_factor);
        p3d_sb_puts(&b, ", \"why\": ");
        p3d_sb_json_str(&b, nd->excluded ? nd->why : NULL);
        char *s = p3d_sb_finish(&b);
        if (s)
            p3d_event(events_fd, t0, "%s", s);
        free(s);
    }
}
