/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c - p3d-worker: options, backend choice, the run, --verify, report.
 * Exit codes: 0 ok; 1 a runtime failure (peer died, timeout, --verify
 * mismatch, no GPU for --backend cuda, a stale rank fenced out of a
 * checkpoint); 2 bad options or environment, a refused --checkpoint-dir or
 * a checkpoint of another mesh/model; 3 the checkpoint resumed from is at or
 * past --steps (nothing trained, nothing verified). */
#include "worker.h"
#include "cuda/cuda_rules.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { O_INT, O_DBL, O_U64, O_STR, O_FLAG, O_SIZE };

typedef struct opt_row {
    const char *name;
    int type;
    size_t off;
    double lo, hi;
    const char *help;
} opt_row;

#define OFF(f) offsetof(p3dw_opts, f)
static const opt_row rows[] = {
    {"layers", O_INT, OFF(layers), 1, 4096, "number of MLP layers (default 4)"},
    {"hidden", O_INT, OFF(hidden), 1, 65536, "hidden size h; each layer is h x 4h x h (default 64)"},
    {"global-batch", O_INT, OFF(global_batch), 1, 1 << 24, "samples per step, all replicas (default 16)"},
    {"seq-len", O_INT, OFF(seq_len), 1, 1 << 16,
     "tokens per sample, each one row of h values the MLP trains on (default 1); sets tokens/s"},
    {"micro-batches", O_INT, OFF(micro_batches), 1, 1 << 20, "micro-batches per replica and step (default 1)"},
    {"steps", O_INT, OFF(steps), 1, 1 << 20, "training steps (default 5)"},
    {"lr", O_DBL, OFF(lr), 0, 1e6, "SGD learning rate (default 1.0)"},
    {"seed", O_U64, OFF(seed), 0, 0, "seed of weights and data (default 1234)"},
    {"verify", O_FLAG, OFF(verify), 0, 0,
     "rank 0 reruns the training in one process on the CPU backend and compares losses"},
    {"verify-tol", O_DBL, OFF(verify_tol), 0, 1,
     "largest relative loss difference --verify accepts (default 1e-5 cpu, 1e-3 cuda)"},
    {"check-grad", O_FLAG, OFF(check_grad), 0, 0,
     "rank 0 checks one layer's gradients against finite differences first"},
    {"backend", O_STR, OFF(backend), 0, 0, "cpu, cuda or auto (default auto: cuda when a GPU is usable)"},
    {"p2p", O_STR, OFF(p2p), 0, 0,
     "buffered or strict: a send completes only once its receive is posted, as in NCCL (default buffered)"},
    {"json", O_FLAG, OFF(json), 0, 0,
     "JSON lines instead of text: losses, verify steps, every rank's report and the summary"},
    {"timeout", O_DBL, OFF(timeout), 0.1, 1e6, "seconds one communication may wait (default 120)"},
    {"connect-timeout", O_DBL, OFF(connect_timeout), 0.1, 1e6, "seconds for bootstrap and connections (default 30)"},
    {"bench-allreduce", O_FLAG, OFF(bench_allreduce), 0, 0, "benchmark the CPU ring all-reduce over the world"},
    {"bench-memcpy", O_FLAG, OFF(bench_memcpy), 0, 0, "benchmark memcpy (one process, no environment needed)"},
    {"bench-min", O_SIZE, OFF(bench_min), 4, 1ull << 34, "smallest benchmark buffer, bytes or K/M/G (default 1K)"},
    {"bench-max", O_SIZE, OFF(bench_max), 4, 1ull << 34, "largest benchmark buffer (default 64M)"},
    {"bench-iters", O_INT, OFF(bench_iters), 1, 100000, "repetitions per size (default 5)"},
    {"bench-node", O_FLAG, OFF(bench_node), 0, 0,
     "this node's preflight figures: compute, memory, TCP on a ring (par3drun --preflight runs it)"},
    {"bench-tcp-fd", O_INT, OFF(bench_tcp_fd), 0, 1 << 20,
     "--bench-node: the listening socket for the previous node's stream"},
    {"bench-tcp-key-fd", O_INT, OFF(bench_tcp_key_fd), 0, 1 << 20,
     "--bench-node: read the job key from this descriptor; the ring's connections prove it"},
    {"bench-tcp-peer", O_STR, OFF(bench_tcp_peer), 0, 0, "--bench-node: HOST:PORT of the next node of the ring"},
    {"bench-tcp-slot", O_STR, OFF(bench_tcp_slot), 0, 0,
     "--bench-node: I:N:T, stream in slot I of N from T (seconds since 1970): one link at a time, for nodes that share a host"},
    {"bench-serial", O_FLAG, OFF(bench_serial), 0, 0,
     "--bench-node with --bench-tcp-slot: compute and memory in slot I too (2 x --bench-seconds + 0.25 s each), after the ring's last slot (nodes that share a host's cores)"},
    {"bench-tcp-only", O_FLAG, OFF(bench_tcp_only), 0, 0,
     "--bench-node: the TCP ring's figures alone (par3drun runs it once a multi-node job's leader named each node's next one)"},
    {"bench-seconds", O_DBL, OFF(bench_seconds), 0.01, 60, "--bench-node: seconds per figure (default 0.2)"},
    {"checkpoint-dir", O_STR, OFF(checkpoint_dir), 0, 0,
     "save checkpoints in DIR (created, mode 0700) and resume from the newest complete one"},
    {"checkpoint-every", O_INT, OFF(checkpoint_every), 0, 1 << 20,
     "steps between checkpoints (default 0: only after the last step)"},
    {"checkpoint-keep", O_INT, OFF(checkpoint_keep), 0, 1 << 20,
     "complete checkpoints kept, older ones removed (default 2; 0: all)"},
    {"experts", O_INT, OFF(experts), 0, 4096,
     "experts per MoE layer; every second layer becomes MoE (default 0: none)"},
    {"top-k", O_INT, OFF(top_k), 1, 4096, "experts each token is routed to (default 2)"},
};
#define NROWS (sizeof rows / sizeof rows[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: p3d-worker [options]   (started by par3drun, one process per rank)\n\n");
    for (size_t i = 0; i < NROWS; i++)
        fprintf(f, "  --%-18s %s\n", rows[i].name, rows[i].help);
    fprintf(f, "  --%-18s %s\n", "help", "this text");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024.0;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024 * 1024;
    else if (*end)
        return -1;
    if (*end && end[1] && strcmp(end + 1, "iB") != 0 && strcmp(end + 1, "B") != 0)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* The row of the option named by a[0..len), or NULL. */
static const opt_row *find_row(const char *a, size_t len)
{
    const opt_row *row = NULL;
    for (size_t k = 0; k < NROWS; k++)
        if (strlen(rows[k].name) == len && !strncmp(rows[k].name, a, len))
            row = &rows[k];
    return row;
}

/* Stores val, read as the row's type, at base; 1 when it is not one the
 * row takes (said), else 0. */
static int set_value(const opt_row *row, char *base, const char *val)
{
    char *end = NULL;
    errno = 0;
    int bad = 0;
    switch (row->type) {
    case O_INT: {
        long v = strtol(val, &end, 10);
        bad = errno || *end || end == val || v < row->lo || v > row->hi;
        *(int *)base = (int)v;
        break;
    }
    case O_DBL: {
        double v = strtod(val, &end);
        bad = errno || *end || end == val || !(v >= row->lo && v <= row->hi);
        *(double *)base = v;
        break;
    }
    case O_U64:
        *(uint64_t *)base = strtoull(val, &end, 10);
        bad = errno || *end || end == val || *val == '-';
        break;
    case O_SIZE: {
        size_t v = 0;
        bad = parse_size(val, &v) || v < row->lo || v > row->hi;
        *(size_t *)base = v;
        break;
    }
    default: *(const char **)base = val;
    }
    if (bad) {
        if (row->type == O_SIZE || row->type == O_U64)
            fprintf(stderr, "p3d-worker: --%s '%s': expected %s\n", row->name, val,
                    row->type == O_SIZE ? "a size such as 4096, 64K or 1M in range" : "a non-negative integer");
        else
            fprintf(stderr, "p3d-worker: --%s '%s': expected a number in [%g, %g]\n", row->name, val, row->lo, row->hi);
    }
    return bad;
}

/* The options that only make sense together, and the words a string
 * option takes: 0, or -1 (said). */
static int check_opts(const p3dw_opts *o)
{
    if (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda") && strcmp(o->backend, "auto")) {
        fprintf(stderr, "p3d-worker: --backend '%s': expected cpu, cuda or auto\n", o->backend);
        return -1;
    }
    if (strcmp(o->p2p, "buffered") && strcmp(o->p2p, "strict")) {
        fprintf(stderr, "p3d-worker: --p2p '%s': expected buffered or strict\n", o->p2p);
        return -1;
    }
    if (o->checkpoint_dir && !*o->checkpoint_dir) {
        fprintf(stderr, "p3d-worker: --checkpoint-dir '': expected a directory\n");
        return -1;
    }
    if (o->checkpoint_every && !o->checkpoint_dir) {
        fprintf(stderr, "p3d-worker: --checkpoint-every needs --checkpoint-dir\n");
        return -1;
    }
    if (o->bench_min > o->bench_max) {
        fprintf(stderr, "p3d-worker: --bench-min is larger than --bench-max\n");
        return -1;
    }
    if ((o->bench_tcp_peer != NULL) != (o->bench_tcp_fd >= 0)) {
        fprintf(stderr, "p3d-worker: --bench-tcp-peer and --bench-tcp-fd go together (the ring's next node and "
                        "this node's listening socket)\n");
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, p3dw_opts *o)
{
    *o = (p3dw_opts){.layers = 4,
                     .hidden = 64,
                     .global_batch = 16,
                     .seq_len = 1,
                     .micro_batches = 1,
                     .steps = 5,
                     .lr = 1.0,
                     .seed = 1234,
                     .backend = "auto",
                     .timeout = 120,
                     .connect_timeout = 30,
                     .p2p = "buffered",
                     .bench_min = 1024,
                     .bench_max = 64u << 20,
                     .bench_iters = 5,
                     .checkpoint_keep = 2,
                     .top_k = 2,
                     .bench_tcp_fd = -1,
                     .bench_tcp_key_fd = -1,
                     .bench_seconds = 0.2};
    if (p3dw_env_batch(o))
        return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "p3d-worker: unexpected argument '%s' (see --help)\n", a);
            return -1;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const opt_row *row = find_row(a, len);
        if (!row) {
            fprintf(stderr, "p3d-worker: unknown option '--%.*s' (see --help)\n", (int)len, a);
            return -1;
        }
        char *base = (char *)o + row->off;
        if (row->type == O_FLAG) {
            if (eq) {
                fprintf(stderr, "p3d-worker: --%s takes no value\n", row->name);
                return -1;
            }
            *(int *)base = 1;
            continue;
        }
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            fprintf(stderr, "p3d-worker: --%s needs a value\n", row->name);
            return -1;
        }
        if (set_value(row, base, val))
            return -1;
    }
    return check_opts(o);
}

/* Picks the backend.  Returns the ops table (and *cuda for the CUDA one),
 * or NULL (message printed). */
static const p3d_ops *choose_backend(const p3dw_opts *o, const p3dw_env *e, const p3dw_cuda_api **cuda)
{
    int want_cuda = !strcmp(o->backend, "cuda");
    const char *why = NULL;
    *cuda = NULL;
    if (!want_cuda && strcmp(o->backend, "auto"))
        return &p3dw_cpu_ops;
    if ((*cuda = p3dw_cuda_pick(o->backend, &why)))
        return (*cuda)->ops;
    if (want_cuda) {
        fprintf(stderr, "p3d-worker: rank %d: --backend cuda: %s\n", e->rank, why);
        return NULL;
    }
    if (e->rank == 0)
        fprintf(stderr, "p3d-worker: %s; using the CPU backend\n", why);
    return &p3dw_cpu_ops;
}

/* --verify: the same training, one process (tp=pp=dp=1, one micro-batch)
 * on rank 0 and always on the CPU backend, whatever backend the job uses:
 * a wrong CUDA kernel, NCCL call or schedule shows as a difference.  The
 * reference's own loss must fall by 10% or more over the steps, or a
 * wrong backward/SGD/gradient reduction could hide in an unmoving loss
 * (a warning says so).  Returns 0 if every step agrees within tol. */
static int verify(const p3dw_opts *o, const double *losses, double tol, double *max_rel, double *drop)
{
    p3dw_run ref = {.ops = &p3dw_cpu_ops, .micro_batches = 1, .quiet = 1};
    const char *names[P3DW_NALL] = {"TP", "PP", "DP", "EP", "ETP", "EDP"};
    for (int d = 0; d < P3DW_NALL; d++)
        ref.g[d] = (p3dw_group){.size = 1, .rank = 0, .name = names[d]};
    double *rl = calloc((size_t)o->steps, sizeof *rl);
    p3dw_stats st;
    int rc = -1, bad = 0;
    p3dw_opts o1 = *o;
    o1.micro_batches = 1;
    if (!rl || p3dw_train(&o1, &ref, rl, &st))
        goto out;
    *max_rel = 0;
    for (int s = 0; s < o->steps; s++) {
        double rel = fabs(losses[s] - rl[s]) / fmax(fabs(rl[s]), 1e-30);
        if (!(rel <= tol)) /* NaN too */
            bad = 1;
        if (!(rel <= *max_rel))
            *max_rel = rel;
        if (o->json)
            printf("{\"verify_step\":%d,\"loss\":%.9g,\"reference\":%.9g,\"rel_diff\":%.3g,"
                   "\"ok\":%s}\n",
                   s + 1, losses[s], rl[s], rel, rel <= tol ? "true" : "false");
        else
            printf("p3d-worker: verify step %d: loss %.9g reference %.9g rel diff %.3g%s\n", s + 1, losses[s], rl[s],
                   rel, rel <= tol ? "" : "  MISMATCH");
    }
    *drop = (rl[0] - rl[o->steps - 1]) / fmax(fabs(rl[0]), 1e-30);
    printf("p3d-worker: verify: the reference loss fell by %.1f%% over %d steps%s\n", 100 * *drop, o->steps,
           *drop >= 0.1 ? "" : " (less than 10%: verify is weak here; raise --lr or --steps)");
    fflush(stdout);
    if (bad)
        fprintf(stderr,
                "p3d-worker: --verify FAILED: the distributed losses differ from the "
                "single-process CPU reference by up to %.3g (tolerance %g)\n",
                *max_rel, tol);
    rc = bad ? -1 : 0;
out:
    free(rl);
    return rc;
}

/* P3DW_BREAK (tests only): breaks one operation of the backend the job
 * runs on, never the CPU reference of --verify, to show that --verify and
 * --check-grad fail on a real bug.  "gelu": GeLU forward doubled (an op bug
 * shared by forward and loss); "dp-allreduce": the DP gradient all-reduce
 * does nothing; "edp-allreduce": the same for the experts' EDP all-reduce;
 * "router": the MoE router's weight gradient is dropped (moe.c; a bug the
 * CUDA tolerance of --verify must be tight enough to see). */
static int g_break_router;
static const p3d_ops *g_real;
static void broken_gelu(const void *Z, void *G, size_t n)
{
    g_real->gelu_fwd(Z, G, n);
    g_real->axpy(G, G, n, 1.0f);
}
static const char *g_skip; /* the group whose all-reduce does nothing */
static int broken_allreduce(p3dw_group *g, void *buf, size_t n)
{
    return strcmp(g->name, g_skip) ? g_real->allreduce(g, buf, n) : 0;
}
static const p3d_ops *maybe_break(const p3d_ops *ops, int rank)
{
    static p3d_ops broken;
    const char *b = getenv("P3DW_BREAK");
    if (!b || !*b)
        return ops;
    g_real = ops;
    broken = *ops;
    if (!strcmp(b, "gelu"))
        broken.gelu_fwd = broken_gelu;
    else if (!strcmp(b, "dp-allreduce") || !strcmp(b, "edp-allreduce")) {
        g_skip = b[0] == 'd' ? "DP" : "EDP";
        broken.allreduce = broken_allreduce;
    } else if (!strcmp(b, "router")) {
        g_break_router = 1;
    } else {
        fprintf(stderr,
                "p3d-worker: P3DW_BREAK='%s': expected gelu, dp-allreduce, "
                "edp-allreduce or router\n",
                b);
        return NULL;
    }
    if (rank == 0)
        fprintf(stderr,
                "p3d-worker: P3DW_BREAK=%s: the %s backend is broken on purpose "
                "(a test switch)\n",
                b, ops->name);
    return &broken;
}

/* P3DW_SOLO_COMM=1 (tests only): train.c and moe.c call every collective
 * even on groups of one, so that one GPU runs NCCL's all-reduce, grouped
 * send/receive (to itself) and all-to-all (the self segment only).  The CPU
 * backend's TCP layer has no self connection: there a size-1 send/receive
 * or all-to-all is a device copy through the ops table, so the switch can
 * be tested without a GPU (the op counts and losses in the report).
 * Returns 0 or 1, -1 for a malformed value (message printed). */
static const p3d_ops *g_solo_real;
static int solo_sendrecv(p3dw_group *g, int sto, const void *sbuf, size_t sn, int rfrom, void *rbuf, size_t rn)
{
    if (g->size != 1)
        return g_solo_real->sendrecv(g, sto, sbuf, sn, rfrom, rbuf, rn);
    if (sto != rfrom || sn != rn) {
        fprintf(stderr,
                "p3d-worker: internal error: a self send/receive of %zu floats to %d "
                "and %zu from %d\n",
                sn, sto, rn, rfrom);
        return -1;
    }
    g_solo_real->copy(rbuf, sbuf, sn);
    return 0;
}
static int solo_alltoallv(p3dw_group *g, const void *sbuf, const size_t *sbytes, void *rbuf, const size_t *rbytes)
{
    if (g->size != 1)
        return g_solo_real->alltoallv(g, sbuf, sbytes, rbuf, rbytes);
    if (sbytes[0] != rbytes[0] || sbytes[0] % sizeof(float)) {
        fprintf(stderr, "p3d-worker: internal error: a self all-to-all of %zu bytes into %zu\n", sbytes[0], rbytes[0]);
        return -1;
    }
    g_solo_real->copy(rbuf, sbuf, sbytes[0] / sizeof(float));
    return 0;
}
static int solo_comm(int rank, const p3d_ops **ops)
{
    static p3d_ops solo;
    const char *s = getenv("P3DW_SOLO_COMM");
    if (!s || !*s || !strcmp(s, "0"))
        return 0;
    if (strcmp(s, "1")) {
        fprintf(stderr, "p3d-worker: P3DW_SOLO_COMM='%s': expected 0 or 1 (a test switch)\n", s);
        return -1;
    }
    if (!strcmp((*ops)->name, "cpu")) {
        g_solo_real = *ops;
        solo = **ops;
        solo.sendrecv = solo_sendrecv;
        solo.alltoallv = solo_alltoallv;
        *ops = &solo;
    }
    if (rank == 0)
        fprintf(stderr, "p3d-worker: P3DW_SOLO_COMM=1: every collective runs, groups of one "
                        "included (a test switch)\n");
    return 1;
}

/* P3DW_DIE=RANK:STEP (tests only): rank RANK kills itself with SIGKILL
 * before step STEP, in the first attempt only (P3D_RESTART_COUNT unset or
 * 0), so that a restarted job gets past it.  Returns the step for this
 * rank (0: none) or -1 for a malformed value (message printed). */
static int die_step(int rank)
{
    const char *s = getenv("P3DW_DIE"), *rc = getenv("P3D_RESTART_COUNT");
    int r, step, n = 0;
    if (!s || !*s)
        return 0;
    if (sscanf(s, "%d:%d%n", &r, &step, &n) != 2 || s[n] || r < 0 || step < 1) {
        fprintf(stderr, "p3d-worker: P3DW_DIE='%s': expected RANK:STEP (a test switch)\n", s);
        return -1;
    }
    if (r != rank || (rc && *rc && strcmp(rc, "0")))
        return 0;
    return step;
}

/* P3DW_STALL=MS[:NODE:MS2] (tests only): every step MS milliseconds of
 * extra own work (a sleep inside the step, outside the collectives), MS2
 * on node NODE ($P3D_NODE): a slow node for the launcher's detection.
 * Returns the seconds for this rank, or -1 for a malformed value. */
static double stall_for(void)
{
    const char *s = getenv("P3DW_STALL"), *node = getenv("P3D_NODE");
    int ms, ms2 = 0, n = 0;
    char name[128] = "";
    if (!s || !*s)
        return 0;
    if ((sscanf(s, "%d%n", &ms, &n) != 1 || (s[n] && (sscanf(s + n, ":%127[^:]:%d", name, &ms2) != 2))) || ms < 0 ||
        ms > 60000 || ms2 < 0 || ms2 > 60000) {
        fprintf(stderr, "p3d-worker: P3DW_STALL='%s': expected MS or MS:NODE:MS (a test switch)\n", s);
        return -1;
    }
    return (name[0] && node && !strcmp(node, name) ? ms2 : ms) / 1000.0;
}

/* The rank's groups (TP, PP, DP and the MoE ones) as run.g; 0, or 2 when
 * the launcher's groups do not fit the bundled model. */
static int make_groups(tcp_world *w, const p3dw_env *e, const p3dw_opts *o, tcp_comm *comm, p3dw_run *run)
{
    if (p3dw_groups_make(w, e, comm, o->experts > 0))
        return 2;
    if (o->experts > 0) {
        /* etp == tp was checked; the MoE layer also relies on the ETP group
         * being the TP group itself (the same ranks hold the same tokens). */
        int same = comm[P3DW_ETP].size == comm[P3DW_TP].size;
        for (int i = 0; same && i < comm[P3DW_TP].size; i++)
            same = comm[P3DW_ETP].members[i] == comm[P3DW_TP].members[i];
        if (!same) {
            fprintf(stderr,
                    "p3d-worker: rank %d: --experts: the ETP group (P3D_ETP_GROUP) is "
                    "not the TP group: the rank order puts expert tensor parallelism "
                    "elsewhere than tp, which the bundled MoE layer does not support\n",
                    e->rank);
            return 2;
        }
    }
    const char *names[P3DW_NALL] = {"TP", "PP", "DP", "EP", "ETP", "EDP"};
    for (int d = 0; d < P3DW_NALL; d++)
        run->g[d] = (p3dw_group){.size = comm[d].size, .rank = comm[d].rank, .name = names[d], .impl = &comm[d]};
    return 0;
}

/* The checkpoint directory and the test switches into run; 0, or 2 on a
 * bad directory or switch. */
static int prepare_run(const p3dw_opts *o, tcp_world *w, p3dw_env *e, p3dw_ckpt *ck, p3dw_run *run)
{
    *ck = (p3dw_ckpt){.dir = o->checkpoint_dir,
                      .every = o->checkpoint_every,
                      .keep = o->checkpoint_keep,
                      .w = w,
                      .e = e,
                      .o = o,
                      .dfd = -1};
    if (o->checkpoint_dir) {
        if (p3dw_ckpt_open(ck))
            return 2;
        run->ckpt = ck;
    }
    if ((run->die_at_step = die_step(e->rank)) < 0 || (run->stall_s = stall_for()) < 0)
        return 2;
    return 0;
}

/* Rank 0's line about the run before the first step. */
static void announce(const p3dw_opts *o, const p3dw_env *e, const p3d_ops *ops)
{
    if (e->rank == 0)
        fprintf(stderr,
                "p3d-worker: %s backend, world %d = tp %d x pp %d x dp %d, %d layers, "
                "hidden %d, global batch %d (%d token%s each), %d micro-batches, %d steps\n",
                ops->name, e->world, e->size[0], e->size[1], e->size[2], o->layers, o->hidden, o->global_batch,
                o->seq_len, o->seq_len == 1 ? "" : "s", o->micro_batches, o->steps);
    if (e->rank == 0 && o->experts > 0)
        fprintf(stderr,
                "p3d-worker: MoE: %d experts, top-%d, every second layer; ep %d x "
                "etp %d x edp %d (%d experts per rank)\n",
                o->experts, o->top_k, e->size[P3DW_EP], e->size[P3DW_ETP], e->size[P3DW_EDP],
                o->experts / e->size[P3DW_EP]);
}

/* After training: every rank's record to all, the loss rank's losses to
 * rank 0, which checks them and prints the summary. Returns the exit
 * status: 1 when an exchange fails or the check does (grad_bad too). */
static int report(const p3dw_opts *o, p3dw_env *e, tcp_world *w, const p3d_ops *ops, int on_gpu, p3dw_rank_record *mine,
                  p3dw_rank_record *all, double *losses, int grad_bad)
{
    for (int d = 0; d < P3DW_NALL; d++)
        mine->coord[d] = e->coord[d];
    tcp_set_activity(w, "gathering the report");
    if (tcp_world_allgather(w, mine, all, sizeof *mine))
        return 1;
    p3dw_report_rank(e, ops->name, o->micro_batches, mine, o->json);
    /* The rank printing the loss (last stage, tp 0, dp 0) hands its losses
     * to rank 0, which compares them with its own reference run. */
    int loss_rank = -1;
    for (int r = 0; r < e->world; r++)
        if ((int)all[r].coord[1] == e->size[1] - 1 && all[r].coord[0] == 0 && all[r].coord[2] == 0)
            loss_rank = r;
    if (loss_rank != 0 && e->rank == loss_rank && tcp_world_send(w, 0, losses, sizeof *losses * o->steps))
        return 1;
    if (e->rank != 0)
        return 0;
    if (loss_rank != 0 && tcp_world_recv(w, loss_rank, losses, sizeof *losses * o->steps))
        return 1;
    const char *verdict = "off";
    double max_rel = 0;
    double drop = 0;
    if (o->verify) {
        double tol = o->verify_tol > 0 ? o->verify_tol : p3dw_verify_default_tol(on_gpu);
        verdict = verify(o, losses, tol, &max_rel, &drop) ? "fail" : "pass";
    }
    p3dw_report_summary(e, ops->name, o, all, e->world, verdict, max_rel, drop);
    return strcmp(verdict, "fail") && !grad_bad ? 0 : 1;
}

int main(int argc, char **argv)
{
    p3dw_opts o;
    p3dw_env e = {0};
    tcp_world *w = NULL;
    tcp_comm comm[P3DW_NALL] = {0};
    p3dw_run run = {0};
    p3dw_ckpt ck = {.dfd = -1};
    double *losses = NULL;
    p3dw_rank_record *all = NULL;
    int rc = 2, cuda_up = 0;
    const p3dw_cuda_api *cuda = NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_args(argc, argv, &o))
        goto out;
    if (o.bench_memcpy) {
        rc = p3dw_bench_memcpy(&o) ? 1 : 0;
        goto out;
    }
    if (o.bench_node) {
        rc = p3dw_bench_node(&o) ? 1 : 0;
        goto out;
    }
    if (p3dw_env_read(&e, 0))
        goto out;
    const p3d_ops *ops = &p3dw_cpu_ops;
    if (!o.bench_allreduce) {
        if (p3dw_check_shape(&o, e.size[0], e.size[1], e.size[2], o.micro_batches) ||
            p3dw_check_moe(&o, e.size[P3DW_TP], e.size[P3DW_EP], e.size[P3DW_ETP]))
            goto out;
        rc = 1; /* "no GPU" for --backend cuda is a runtime failure */
        if (!(ops = choose_backend(&o, &e, &cuda)))
            goto out;
        if (!(ops = maybe_break(ops, e.rank)) || (run.solo_comm = solo_comm(e.rank, &ops)) < 0) {
            rc = 2;
            goto out;
        }
        run.break_router = g_break_router;
    }
    rc = 1;
    if (!(w = tcp_world_init(&e, o.connect_timeout, o.timeout)))
        goto out;
    tcp_world_set_strict(w, !strcmp(o.p2p, "strict"));
    if (o.bench_allreduce) {
        rc = p3dw_bench_allreduce(&o, w) ? 1 : 0;
        goto out;
    }
    if ((rc = make_groups(w, &e, &o, comm, &run)))
        goto out;
    rc = 1;
    if (cuda) {
        /* A failed setup has aborted its own communicators (no teardown). */
        if (cuda->setup(w, &e, comm, run.g, o.timeout))
            goto out;
        cuda_up = 1;
    }
    /* After the CUDA setup (the check runs on the GPU then); every rank
     * waits for rank 0's verdict at the end through the report gather. */
    int grad_bad = 0;
    if (o.check_grad && e.rank == 0)
        grad_bad = p3dw_check_grad(&o, ops, 3e-2, !o.json) != 0;
    if ((rc = prepare_run(&o, w, &e, &ck, &run)))
        goto out;
    rc = 1;
    run.ops = ops;
    run.micro_batches = o.micro_batches;
    run.json = o.json;
    int last = e.coord[1] == e.size[1] - 1;
    run.print_loss = last && e.coord[0] == 0 && e.coord[2] == 0;
    losses = calloc((size_t)o.steps, sizeof *losses);
    p3dw_rank_record mine = {.rank = e.rank, .node_rank = e.node_rank};
    snprintf(mine.node, sizeof mine.node, "%s", e.node);
    all = calloc((size_t)e.world, sizeof *all);
    if (!losses || !all)
        goto out;
    announce(&o, &e, ops);
    if (run.ckpt)
        run.preempt_sig = p3dw_preempt_arm();
    int trc = p3dw_train(&o, &run, losses, &mine.st);
    if (trc) {
        rc = trc == -2 ? 2 : trc == -3 ? 3 : 1;
        goto out;
    }
    if (run.preempted) {
        /* the steps left are the resumed job's: no report, no --verify */
        if (e.rank == 0)
            fprintf(stderr,
                    "p3d-worker: preempted (SIG%s): checkpoint of step %d written; ending (the next "
                    "run resumes from it)\n",
                    sigabbrev_np(run.preempt_sig), run.preempted);
        rc = 0;
        goto out;
    }
    rc = report(&o, &e, w, ops, cuda != NULL, &mine, all, losses, grad_bad);
out:
    if (cuda_up)
        cuda->teardown(run.g, rc != 0);
    for (int d = 0; d < P3DW_NALL; d++)
        tcp_comm_free(&comm[d]);
    p3dw_ckpt_close(&ck);
    tcp_world_free(w);
    p3dw_env_free(&e);
    free(losses);
    free(all);
    return rc;
}
