/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli.c — the option table and its parser.
 *
 * Every option is one row: name, argument type, where it lands in p3d_opts,
 * bounds, which commands take it, and its help line. --help is generated
 * from the same rows, so help and parser cannot drift apart.
 */
#include "cli.h"
#include "ranks.h"
#include "rdzv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_table.h"
#include "cli_torchrun.h"

static void opts_defaults(p3d_opts *o)
{
    memset(o, 0, sizeof *o);
    o->topology = "local";
    o->format = "text";
    o->policy = "megatron";
    o->zero = -1;
    o->mem_reserve_gb = -1;
    o->batch_tolerance = -1;
    o->bind = "numa";
    o->tag_output = -1;
    o->grace = 10.0;
    o->max_no_progress = 3;
    o->no_progress_exit_code = 93;
    o->max_job_restarts = 3;
    o->fault_window = 2.0;
    o->health_check_timeout = 30.0;
    o->node_timeout = 30.0;
    o->progress_interval = 5.0;
    o->slow_factor = 1.3;
    o->slow_windows = 3;
    o->slow_node = "report";
    o->slow_wait = 600.0;
    o->grow_wait = 600.0;
    o->preflight_timeout = 30.0;
    o->node_rank = -1;
    o->rdzv = "auto";
}

/* The option named by name[0..len); torchrun's _ spellings count as -. */
static const opt_row *find_row(const char *name, size_t len)
{
    for (size_t i = 0; i < p3d_cli_nrows; i++) {
        const char *n = p3d_cli_rows[i].name;
        size_t k = 0;
        while (k < len && n[k] && (n[k] == name[k] || (n[k] == '-' && name[k] == '_')))
            k++;
        if (k == len && !n[k])
            return &p3d_cli_rows[i];
    }
    return NULL;
}

/* Edit distance of a[0..la) and b, bounded (rows of at most 64). */
static size_t distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b), prev[65], cur[65];
    if (la > 64 || lb > 64)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            int same = a[i - 1] == b[j - 1] || (a[i - 1] == '_' && b[j - 1] == '-');
            size_t v = prev[j - 1] + !same;
            if (prev[j] + 1 < v)
                v = prev[j] + 1;
            if (cur[j - 1] + 1 < v)
                v = cur[j - 1] + 1;
            cur[j] = v;
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

/* The option nearest to name[0..len) (a typo: at most a third of its
 * letters off, or a prefix of exactly one option), or NULL. */
static const char *nearest_option(const char *name, size_t len)
{
    const char *best = NULL, *prefix = NULL;
    size_t bd = len / 3 + 1;
    int nprefix = 0;
    for (size_t i = 0; i < p3d_cli_nrows; i++) {
        size_t d = distance(name, len, p3d_cli_rows[i].name);
        if (d < bd) {
            bd = d;
            best = p3d_cli_rows[i].name;
        }
        if (len >= 2 && !strncmp(p3d_cli_rows[i].name, name, len)) {
            prefix = p3d_cli_rows[i].name;
            nprefix++;
        }
    }
    return best ? best : nprefix == 1 ? prefix : NULL;
}

/* mpirun/srun short options people type, and ours. */
static const char *short_hint(const char *a)
{
    if (!strcmp(a, "-n") || !strcmp(a, "-np") || !strcmp(a, "-N"))
        return "--nproc-per-node N (ranks per node) or --nnodes N";
    if (!strcmp(a, "-v"))
        return "--verbose";
    if (!strcmp(a, "-V"))
        return "--version";
    return NULL;
}

/* torchrun's short options as their long form ("-r3" is "--redirects" with
 * *attached "3", pointing into a): 1 with out filled, 0 for any other. */
static int short_long(const char *a, char *out, size_t cap, const char **attached)
{
    static const char *const longs[][2] = {{"h", "help"}, {"m", "module"}, {"r", "redirects"}, {"t", "tee"}};
    for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++) {
        if (a[1] != longs[i][0][0])
            continue;
        if (a[2] && a[1] != 'r' && a[1] != 't')
            return 0;
        snprintf(out, cap, "--%s", longs[i][1]);
        *attached = a[2] ? a + 2 + (a[2] == '=') : NULL;
        return strlen(out) < cap - 1;
    }
    return 0;
}

/* A first word that is no program but looks like a subcommand typo. */
static const char *nearest_command(const char *a)
{
    static const char *const cmds[] = {"topo", "plan", "cluster", "preflight", "status", "runs"};
    if (strchr(a, '/'))
        return NULL;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (distance(a, strlen(a), cmds[i]) <= (strlen(cmds[i]) > 4 ? 2u : 1u))
            return cmds[i];
    return NULL;
}

/* Is a a program the launch would run (spawn.c's execvp-like search)? */
static int on_path(const char *a)
{
    char *e = NULL, *path = p3d_resolve_program(a, &e);
    int found = path != NULL;
    free(e);
    free(path);
    return found;
}

static const char *cmd_name(p3d_cmd c)
{
    switch (c) {
    case P3D_CMD_TOPO: return "topo";
    case P3D_CMD_PLAN: return "plan";
    case P3D_CMD_CLUSTER: return "cluster";
    case P3D_CMD_STATUS: return "status";
    case P3D_CMD_PREFLIGHT: return "preflight";
    case P3D_CMD_RUNS: return "runs";
    case P3D_CMD_DRYRUN: return "--dry-run";
    default: return "launch";
    }
}

static int set_value(p3d_opts *o, const opt_row *r, const char *val, char **err)
{
    char *base = (char *)o;
    char *end = NULL;
    switch (r->type) {
    case T_FLAG: *(int *)(base + r->off) = 1; return 0;
    case T_NOFLAG: *(int *)(base + r->off) = 0; return 0;
    case T_STR:
        if (!*val)
            return p3d_err(err, "--%s: expected %s, got an empty string", r->name, r->metavar);
        *(const char **)(base + r->off) = val;
        return 0;
    case T_STRV: {
        const char ***v = (const char ***)(base + r->off);
        size_t *n = (size_t *)(base + r->count_off);
        const char **nv = realloc(*v, (*n + 1) * sizeof **v);
        if (!nv)
            return p3d_err(err, "out of memory");
        nv[(*n)++] = val;
        *v = nv;
        return 0;
    }
    case T_INT: {
        errno = 0;
        int word = 0, k;
        /* torchrun's forms: --nproc-per-node gpu|cpu|auto, --nnodes N:N */
        if (r->off == OFF(nproc_per_node) && p3d_torchrun_nproc_word(val, &word)) {
            *(int *)(base + r->off) = word;
            return 0;
        }
        if (r->off == OFF(nnodes) && (k = p3d_torchrun_nnodes(val, &word, &o->nnodes_min, err)) != 0) {
            if (k > 0)
                *(int *)(base + r->off) = word;
            return k > 0 ? 0 : -1;
        }
        long long x = strtoll(val, &end, 10);
        if (errno || end == val || *end)
            return p3d_err(err, "--%s: expected %s, got '%s'", r->name,
                           strchr(r->metavar, '|') ? r->metavar : "an integer", val);
        if ((double)x < r->min || (double)x > r->max)
            return p3d_err(err, "--%s: %lld is out of range (expected %.0f to %.0f)", r->name, x, r->min, r->max);
        *(int *)(base + r->off) = (int)x;
        return 0;
    }
    case T_DOUBLE: {
        errno = 0;
        double x = strtod(val, &end);
        if (errno || end == val || *end || !isfinite(x))
            return p3d_err(err, "--%s: expected a number, got '%s'", r->name, val);
        if (x < r->min || x > r->max)
            return p3d_err(err, "--%s: %g is out of range (expected %g to %g)", r->name, x, r->min, r->max);
        if (r->off == OFF(node_timeout) && x > 0 && x < 1)
            return p3d_err(err, "--node-timeout: %g is too short (0 turns it off, else at least 1 s)", x);
        *(double *)(base + r->off) = x;
        return 0;
    }
    }
    return p3d_err(err, "internal: bad option type");
}

/* --bind-addr, else P3D_BIND_ADDR (launching only): checked here, where a
 * bad value is the user's input (exit 2), not at the rendezvous. */
static int bind_addr(p3d_opts *o, char **err)
{
    const char *env = getenv("P3D_BIND_ADDR");
    if (o->cmd != P3D_CMD_LAUNCH && o->cmd != P3D_CMD_AGENT)
        return 0;
    if (!o->bind_addr && env && *env)
        o->bind_addr = env;
    if (!o->bind_addr)
        return 0;
    return p3d_bind_addr_check(o->bind_addr == env ? "P3D_BIND_ADDR" : "--bind-addr", o->bind_addr, err);
}

/* What one parse has seen: the rows given (for "given twice", what applies
 * to which command, torchrun's options), --dry-run. */
typedef struct cli_seen {
    const opt_row *rows[P3D_CLI_MAX_ROWS + 1];
    size_t n;
    int dry;
} cli_seen;

/* The subcommand, which may only come first; the index of the first
 * argument after it. */
static int subcommand(int argc, char **argv, p3d_opts *o)
{
    static const struct {
        const char *name;
        p3d_cmd cmd;
    } subs[] = {{"topo", P3D_CMD_TOPO},     {"plan", P3D_CMD_PLAN},           {"cluster", P3D_CMD_CLUSTER},
                {"status", P3D_CMD_STATUS}, {"preflight", P3D_CMD_PREFLIGHT}, {"runs", P3D_CMD_RUNS},
                {"__agent", P3D_CMD_AGENT}};
    for (size_t k = 0; argc > 1 && k < sizeof subs / sizeof *subs; k++)
        if (strcmp(argv[1], subs[k].name) == 0) {
            o->cmd = subs[k].cmd;
            return 2;
        }
    return 1;
}

/* An argument that is not an option at argv[i]: status's and runs's
 * directory, or the program (torchrun/mpirun style, without "--"). 1 when
 * it ends the options, 0 to go on, -1 with *err. */
static int positional(int argc, char **argv, int i, p3d_opts *o, char **err)
{
    const char *a = argv[i];
    if (o->cmd == P3D_CMD_STATUS && !o->status_dir) {
        o->status_dir = a;
        return 0;
    }
    if (o->cmd == P3D_CMD_RUNS && !o->runs_dir) {
        o->runs_dir = a;
        return 0;
    }
    if (o->cmd == P3D_CMD_LAUNCH && i == 1 && nearest_command(a) && !on_path(a))
        return p3d_err(err,
                       "unknown command '%s': did you mean 'par3drun %s'? (a program to launch "
                       "goes after --: par3drun [options] -- PROGRAM)",
                       a, nearest_command(a));
    if (o->cmd == P3D_CMD_LAUNCH || o->cmd == P3D_CMD_AGENT) {
        /* torchrun/mpirun style: the program may follow the options
         * without "--". */
        o->argv = argv + i;
        o->argc = argc - i;
        o->positional = 1;
        return 1;
    }
    return p3d_err(err, "unexpected argument '%s' (see par3drun %s --help)", a, cmd_name(o->cmd));
}

/* The long option a (after short-option translation; attached: -r3's 3)
 * with its value from the same word or the next (*i moves past it). */
static int long_option(int argc, char **argv, int *i, const char *a, const char *attached, p3d_opts *o, cli_seen *seen,
                       char **err)
{
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const opt_row *r = find_row(name, len);
    if (!r) {
        const char *near = nearest_option(name, len);
        if (near)
            return p3d_err(err, "unknown option '--%.*s': did you mean --%s? (see par3drun --help)", (int)len, name,
                           near);
        return p3d_err(err, "unknown option '--%.*s' (see par3drun --help)", (int)len, name);
    }
    if (strcmp(r->name, "dry-run") == 0) {
        seen->dry = 1;
        return 0;
    }
    const char *val = NULL;
    if (r->type == T_FLAG || r->type == T_NOFLAG) {
        if (eq)
            return p3d_err(err, "--%s takes no value", r->name);
    } else if (attached) {
        val = attached;
    } else if (eq) {
        val = eq + 1;
    } else if (*i + 1 < argc) {
        val = argv[++*i];
    } else {
        return p3d_err(err, "--%s: expected %s after it", r->name, r->metavar);
    }
    /* A second value would silently replace the first: refuse it (list
     * options are the repeatable ones). Agents get the job's options plus
     * their own, so they are left alone. */
    if (r->type != T_STRV && o->cmd != P3D_CMD_AGENT)
        for (size_t k = 0; k < seen->n; k++)
            if (seen->rows[k] == r)
                return p3d_err(err, "--%s given twice", r->name);
    if (set_value(o, r, val, err) < 0)
        return -1;
    if (seen->n < p3d_cli_nrows)
        seen->rows[seen->n++] = r;
    return 0;
}

/* The arguments from argv[i] on: options, then the program. */
static int arguments(int argc, char **argv, int i, p3d_opts *o, cli_seen *seen, char **err)
{
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            o->argv = argv + i + 1;
            o->argc = argc - i - 1;
            return 0;
        }
        char shortopt[64];
        const char *attached = NULL; /* -r3's 3, in argv */
        if (a[0] == '-' && a[1] && a[1] != '-' && short_long(a, shortopt, sizeof shortopt, &attached))
            a = shortopt;
        if (a[0] == '-' && a[1] && a[1] != '-') {
            const char *h = short_hint(a);
            return p3d_err(err, "unknown option '%s'%s%s%s (par3drun's options are long: see par3drun --help)", a,
                           h ? ": did you mean " : "", h ? h : "", h ? "?" : "");
        }
        int k = strncmp(a, "--", 2) != 0 ? positional(argc, argv, i, o, err)
                                         : long_option(argc, argv, &i, a, attached, o, seen, err);
        if (k != 0)
            return k < 0 ? -1 : 0;
    }
    return 0;
}

/* The switches read from the environment. */
static int env_switches(p3d_opts *o, char **err)
{
    const char *keep = getenv("P3D_KEEP_RUN_DIR");
    if (keep && *keep && strcmp(keep, "0")) {
        if (strcmp(keep, "1"))
            return p3d_err(err, "P3D_KEEP_RUN_DIR: expected 1 or 0, got '%s'", keep);
        o->keep_run_dir = 1;
    }
    const char *tc = getenv("P3D_TOPO_CACHE");
    if (tc && *tc && strcmp(tc, "1")) {
        if (strcmp(tc, "0"))
            return p3d_err(err, "P3D_TOPO_CACHE: expected 1 or 0, got '%s'", tc);
        o->no_topo_cache = 1;
    }
    return 0;
}

/* --join: what the running job decided already (its mesh, its nodes,
 * its rendezvous' shape) is not the joiner's to give. */
static const char *const job_owned[] = {"tp",
                                        "pp",
                                        "dp",
                                        "min-dp",
                                        "cp",
                                        "ep",
                                        "expert-model-parallel-size",
                                        "etp",
                                        "expert-tensor-parallel-size",
                                        "order",
                                        "policy",
                                        "policy-candidates",
                                        "policy-sha256",
                                        "micro-batches",
                                        "micro-batch",
                                        "global-batch",
                                        "spares",
                                        "exclude",
                                        "nnodes",
                                        "node-rank",
                                        "emulate",
                                        "cluster",
                                        "slurm-topology",
                                        "master-addr",
                                        "master-port",
                                        "max-restarts",
                                        "standalone",
                                        "virtual-stages"};

static int join_options(const p3d_opts *o, const cli_seen *seen, char **err)
{
    if (!o->join)
        return 0;
    if (o->cmd != P3D_CMD_LAUNCH)
        return p3d_err(err,
                       "--join starts a node of a running job: it takes a program (par3drun --join [options] "
                       "-- PROGRAM), not %s",
                       seen->dry ? "--dry-run" : cmd_name(o->cmd));
    for (size_t k = 0; k < seen->n; k++)
        for (size_t i = 0; i < sizeof job_owned / sizeof *job_owned; i++)
            if (!strcmp(seen->rows[k]->name, job_owned[i]))
                return p3d_err(err,
                               "--%s cannot be given with --join: the running job has it already (a joining "
                               "node takes the job's mesh and gets its node index from the leader); drop it",
                               seen->rows[k]->name);
    return 0;
}

/* Options that depend on each other or on the command: spares need
 * restarts, each option applies to its commands only. */
static int combinations(p3d_opts *o, const cli_seen *seen, char **err)
{
    if (join_options(o, seen, err) < 0)
        return -1;
    if (o->spares > 0 && (o->cmd == P3D_CMD_LAUNCH || o->cmd == P3D_CMD_AGENT)) {
        /* every replacement is a restart: spares without restarts would
         * only fail at the first loss */
        int given = 0;
        for (size_t k = 0; k < seen->n; k++)
            given |= seen->rows[k]->off == OFF(max_restarts);
        if (!given)
            o->max_restarts = o->spares;
        else if (o->max_restarts == 0)
            return p3d_err(err,
                           "--spares %d with --max-restarts 0: replacing a lost node is a restart, so no "
                           "spare could ever be used; give --max-restarts N (N >= 1) or drop --spares",
                           o->spares);
    }
    if (o->cmd != P3D_CMD_AGENT) {
        for (size_t k = 0; k < seen->n; k++)
            if (!(seen->rows[k]->cmds & (1u << o->cmd)))
                return p3d_err(err, "--%s does not apply to %s (see par3drun %s--help)", seen->rows[k]->name,
                               cmd_name(o->cmd),
                               o->cmd == P3D_CMD_TOPO        ? "topo "
                               : o->cmd == P3D_CMD_PLAN      ? "plan "
                               : o->cmd == P3D_CMD_CLUSTER   ? "cluster "
                               : o->cmd == P3D_CMD_PREFLIGHT ? "preflight "
                               : o->cmd == P3D_CMD_RUNS      ? "runs "
                                                             : "");
    }
    return 0;
}

/* What the command needs given, and the values only a word set can take. */
static int command_needs(p3d_opts *o, char **err)
{
    if (o->cmd == P3D_CMD_DRYRUN && o->argc > 0)
        return p3d_err(err, "--dry-run starts nothing: drop the program '%s' or drop --dry-run", o->argv[0]);
    if (o->cmd == P3D_CMD_STATUS && !o->status_dir && !o->help)
        return p3d_err(err, "status: expected a run directory: par3drun status RUN_DIR (the job's --run-dir)");
    if (o->cmd == P3D_CMD_LAUNCH && o->argc == 0)
        return p3d_err(err, "no program to launch: par3drun [options] SCRIPT.py [ARGS...] or par3drun [options] -- "
                            "PROGRAM [ARGS...] (or --dry-run to only place)");
    if (o->cmd == P3D_CMD_LAUNCH && p3d_torchrun_program(o, err) < 0)
        return -1;
    if (strcmp(o->bind, "numa") && strcmp(o->bind, "core") && strcmp(o->bind, "none"))
        return p3d_err(err, "--bind: expected numa, core or none, got '%s'", o->bind);
    if (strcmp(o->slow_node, "report") && strcmp(o->slow_node, "replace"))
        return p3d_err(err, "--slow-node: expected report or replace, got '%s'", o->slow_node);
    return 0;
}

int p3d_cli_parse(int argc, char **argv, p3d_opts *o, char **err)
{
    opts_defaults(o);
    cli_seen seen = {.n = 0};
    if (arguments(argc, argv, subcommand(argc, argv, o), o, &seen, err) < 0)
        return -1;
    if (seen.dry && o->cmd == P3D_CMD_RUNS) {
        o->runs_dry = 1;
    } else if (seen.dry) {
        if (o->cmd != P3D_CMD_LAUNCH)
            return p3d_err(err, "--dry-run cannot be combined with '%s'", cmd_name(o->cmd));
        o->cmd = P3D_CMD_DRYRUN;
    }
    if (o->help || o->version)
        return 0;
    if (p3d_torchrun_apply(o, seen.rows, seen.n, err) < 0 || env_switches(o, err) < 0 || bind_addr(o, err) < 0 ||
        combinations(o, &seen, err) < 0 || command_needs(o, err) < 0)
        return -1;
    return 0;
}

void p3d_cli_free(p3d_opts *o)
{
    free(o->env);
    free(o->env_files);
    free(o->policy_candidates);
    free(o->rdzv_owned);
    free(o->local_hidden);
    free(o->local_std);
    free(o->argv_owned);
    free(o->python_owned);
    o->rdzv_owned = NULL;
    o->local_hidden = NULL;
    o->local_std = NULL;
    o->argv_owned = NULL;
    o->python_owned = NULL;
    o->env = NULL;
    o->env_files = NULL;
    o->policy_candidates = NULL;
}

static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return -1;
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return 0;
        }
        size_t ncap = *cap * 2 + (size_t)n + 1;
        char *nb = realloc(*buf, ncap);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = ncap;
    }
}

char *p3d_cli_help(p3d_cmd cmd)
{
    size_t len = 0, cap = 4096;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    b[0] = 0;
    if (cmd == P3D_CMD_TOPO) {
        append(&b, &len, &cap,
               "usage: par3drun topo [--topology SRC] [--format text|json] [--output FILE]\n\n"
               "Shows one node's GPUs, NICs, NUMA affinity, the GPU/NIC link matrix in\n"
               "nvidia-smi topo -m notation, the NVLink domains and each GPU's nearest NIC.\n\n");
    } else if (cmd == P3D_CMD_CLUSTER) {
        append(
            &b, &len, &cap,
            "usage: par3drun cluster [--cluster SRC] [--slurm-topology FILE] [--format text|json] [--output FILE]\n\n"
            "Prints the resolved cluster: nodes, GPUs per node, racks, NVLink domains and the GPUs\n"
            "this node's allocation excludes. SRC: a cluster file, kubectl get nodes -o json, or aws\n"
            "ec2 describe-instance-topology; without it, this node. --format json writes a cluster\n"
            "file (docs/cluster-file.md).\n\n");
    } else if (cmd == P3D_CMD_STATUS) {
        append(&b, &len, &cap,
               "usage: par3drun status RUN_DIR\n\n"
               "Shows a running (or ended) job's nodes, generation, spares, steps and slowest nodes\n"
               "from RUN_DIR/status.txt, which the job rewrites every --progress-interval once its\n"
               "ranks write progress lines, and at every change of state or generation (a failure,\n"
               "a replacement, a restart) (docs/launch.md, \"When a node is slow\").\n\n");
    } else if (cmd == P3D_CMD_RUNS) {
        append(&b, &len, &cap,
               "usage: par3drun runs [DIR]\n"
               "       par3drun runs --prune [--older-than DURATION] [--keep N] [--dry-run] [DIR]\n\n"
               "Lists the run directories jobs kept (after a failure, or with --keep-run-dir) in DIR\n"
               "(default $TMPDIR, else /tmp: the par3drun-JOB ones): job, when last written, verdict\n"
               "(the end event of events.jsonl: ok, failed (exit N), running, no end) and size, newest\n"
               "first. --prune removes the ended ones (and unfinished ones no process holds); only\n"
               "directories of yours that par3drun made, never through a symbolic link\n"
               "(docs/launch.md, \"Run directories\").\n\n");
    } else if (cmd == P3D_CMD_PREFLIGHT) {
        append(&b, &len, &cap,
               "usage: par3drun preflight --cluster FILE --emulate [placement options]\n\n"
               "Places the job as a launch would, runs p3d-worker --bench-node on every node it uses\n"
               "(spares too): compute, memory bandwidth, TCP on a ring of pairs, and on GPU nodes\n"
               "every GPU's SGEMM (checked against the CPU) and their peer links. Prints one row per\n"
               "node and exits: 0 when every node passed, 1 when one is excluded (--slow-factor below\n"
               "the median, failed or timed out), 2 on bad input (docs/launch.md, \"Preflight\").\n\n");
    } else if (cmd == P3D_CMD_PLAN) {
        append(&b, &len, &cap,
               "usage: par3drun plan --cluster FILE --model NAME --global-batch N [options]\n\n"
               "Searches tp, pp, dp, micro-batch size and count (and ZeRO with --search-zero),\n"
               "keeps the layouts that fit memory and the hard rules, and ranks them by\n"
               "estimated step time.\n\n");
    } else {
        append(&b, &len, &cap,
               "par3drun %s — topology-aware launcher for 3D-parallel (tp x pp x dp) training\n\n"
               "usage: par3drun [options] -- PROGRAM [ARGS...]   place, start and supervise the ranks\n"
               "       par3drun [options] train.py [ARGS...]      the same, with python (torchrun's form)\n"
               "       par3drun --dry-run [options]               place, check and report only\n"
               "       par3drun --version                         print the version\n"
               "       par3drun topo [--topology SRC]             show this node's topology\n"
               "       par3drun plan --cluster FILE --model M     recommend tp/pp/dp layouts\n"
               "       par3drun cluster [--cluster SRC]           show the resolved cluster\n"
               "       par3drun status RUN_DIR                    a running job's nodes and slowest nodes\n"
               "       par3drun preflight [options]               benchmark every node, print a table\n"
               "       par3drun runs [--prune]                    list (or remove) kept run directories\n"
               "(par3drun COMMAND --help: that command's options; torchrun's options: docs/torchrun.md)\n\n"
               "examples:\n"
               "  par3drun --dry-run --cluster examples/clusters/2x-dgx-h100.json --tp 8 --pp 2\n"
               "  par3drun --emulate --cluster examples/clusters/2x-dgx-h100.json --tp 2 --pp 2 -- p3d-worker\n"
               "  srun --ntasks-per-node=1 --mpi=pmix par3drun --policy megatron -- ./train.py\n\n",
               P3D_VERSION);
    }
    /* A group's header is printed with its first row that applies to this
     * command, so a command never shows an empty group. */
    size_t g = 0;
    const char *pending = NULL;
    int printed = 0;
    for (size_t i = 0; i < p3d_cli_nrows; i++) {
        const opt_row *r = &p3d_cli_rows[i];
        if (g < p3d_cli_ngroups && strcmp(p3d_cli_groups[g].first, r->name) == 0)
            pending = p3d_cli_groups[g++].title;
        if (!(r->cmds & (1u << cmd)) && !(cmd == P3D_CMD_LAUNCH && (r->cmds & C_DRY)))
            continue;
        if (pending) {
            append(&b, &len, &cap, "%s%s:\n", printed ? "\n" : "", pending);
            pending = NULL;
            printed = 1;
        }
        char left[64];
        if (r->metavar)
            snprintf(left, sizeof left, "--%s %s", r->name, r->metavar);
        else
            snprintf(left, sizeof left, "--%s", r->name);
        const char *help = r->help;
        /* topo, plan and preflight write text or json only (cmd_topo.c, cmd_plan.c, cmd_preflight.c) */
        if (r->off == OFF(format) && (cmd == P3D_CMD_TOPO || cmd == P3D_CMD_PLAN || cmd == P3D_CMD_PREFLIGHT))
            help = "report format: text or json";
        append(&b, &len, &cap, "  %-28s %s\n", left, help);
    }
    append(&b, &len, &cap,
           "\nExit codes: 0 ok; 2 bad input or a placement that fails an error-level check;\n"
           "a launched job returns its first failing rank's code (128+signal for a signal).\n"
           "Environment: P3D_DATA_DIR (bundled policies/topologies), P3D_PLUGIN_DIR, NO_COLOR,\n"
           "P3D_TOPO_CACHE, P3D_TOPO_CACHE_DIR (the topology cache), PAR3D_PYTHON (the interpreter\n"
           "of a .py program and -m).\n");
    return b;
}
