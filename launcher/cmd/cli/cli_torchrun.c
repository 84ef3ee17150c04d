/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli_torchrun.c — torchrun's command line in par3drun's terms: each of
 * torchrun's options either does what torchrun does with it, is accepted
 * where it changes nothing here (and docs/torchrun.md says why), or is
 * refused with what to use instead. Also torchrun's program forms (a .py
 * script, -m MODULE) and the interpreter they run under.
 */
#include "cli_torchrun.h"
#include "ranks.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Is the row named name among the ones given? */
static int given(const opt_row *const *seen, size_t nseen, const char *name)
{
    for (size_t k = 0; k < nseen; k++)
        if (!strcmp(seen[k]->name, name))
            return 1;
    return 0;
}

/* Does this host have an NVIDIA GPU (the driver lists one)? */
static int host_has_nvidia(void)
{
    struct stat st;
    for (int i = 0; i < 64; i++) {
        char p[32];
        snprintf(p, sizeof p, "/dev/nvidia%d", i);
        if (stat(p, &st) == 0)
            return 1;
    }
    return 0;
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > P3D_MAX_LOCAL ? P3D_MAX_LOCAL : (int)n;
}

int p3d_torchrun_nproc_word(const char *val, int *n)
{
    if (!strcmp(val, "gpu"))
        *n = 0; /* the placement's default: one rank per GPU */
    else if (!strcmp(val, "cpu"))
        *n = online_cpus();
    else if (!strcmp(val, "auto"))
        *n = host_has_nvidia() ? 0 : online_cpus();
    else
        return 0;
    return 1;
}

/* A whole decimal number in [1, max], or -1. */
static long number(const char *s, const char *end, long max)
{
    long v = 0;
    if (s == end)
        return -1;
    for (const char *p = s; p < end; p++) {
        if (!isdigit((unsigned char)*p) || v > max)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v >= 1 && v <= max ? v : -1;
}

int p3d_torchrun_nnodes(const char *val, int *n, int *min, char **err)
{
    const char *colon = strchr(val, ':');
    if (!colon)
        return 0;
    long lo = number(val, colon, 1 << 20), hi = number(colon + 1, colon + strlen(colon), 1 << 20);
    if (lo < 0 || hi < 0)
        return p3d_err(err, "--nnodes: expected N or torchrun's MIN:MAX (numbers from 1), got '%s'", val);
    if (lo > hi)
        return p3d_err(err, "--nnodes %s: MIN is larger than MAX", val);
    /* MIN < MAX: the job starts on MAX nodes and may shrink to what MIN
     * nodes hold (in replicas, once the mesh is known: place.c) */
    *n = (int)hi;
    *min = lo < hi ? (int)lo : 0;
    return 1;
}

/* torchrun's Std: "0".."3" for every local rank, or "LOCAL:V,..." per
 * local rank (V 0-3: 1 stdout, 2 stderr, 3 both). vals[P3D_MAX_LOCAL] gets
 * each local rank's value; 0, or -1 with *err. */
static int parse_std(const char *opt, const char *s, unsigned char *vals, char **err)
{
    if (s[0] >= '0' && s[0] <= '3' && !s[1]) {
        memset(vals, s[0] - '0', P3D_MAX_LOCAL);
        return 0;
    }
    memset(vals, 0, P3D_MAX_LOCAL);
    const char *p = s;
    while (*p) {
        const char *colon = strchr(p, ':'), *comma = strchr(p, ',');
        if (!comma)
            comma = p + strlen(p);
        long lr = colon && colon < comma ? number(p, colon, P3D_MAX_LOCAL) : -1;
        if (!strncmp(p, "0:", 2) && colon == p + 1)
            lr = 0;
        if (*comma && !comma[1]) /* "0:3," */
            lr = -1;
        if (lr < 0 || lr >= P3D_MAX_LOCAL || comma != colon + 2 || colon[1] < '0' || colon[1] > '3')
            return p3d_err(err, "--%s: expected 0-3 or LOCAL_RANK:0-3,... (torchrun's form, e.g. 0:3,1:1), got '%s'",
                           opt, s);
        vals[lr] = (unsigned char)(colon[1] - '0');
        p = *comma ? comma + 1 : comma;
    }
    return 0;
}

/* -r, -t and --local-ranks-filter: which local ranks' streams go to files
 * (torchrun's --log-dir layout) and which the terminal shows. */
static int torchrun_output(p3d_opts *o, char **err)
{
    unsigned char vals[P3D_MAX_LOCAL], tee[P3D_MAX_LOCAL];
    if (!o->redirects && !o->tee && !o->local_ranks_filter)
        return 0;
    o->local_hidden = calloc(P3D_MAX_LOCAL, 1);
    if (!o->local_hidden)
        return p3d_err(err, "out of memory");
    memset(tee, 0, sizeof tee);
    memset(vals, 0, sizeof vals);
    if (o->tee && parse_std("tee", o->tee, tee, err) < 0)
        return -1;
    if (o->redirects && parse_std("redirects", o->redirects, vals, err) < 0)
        return -1;
    int any = 0;
    for (int i = 0; i < P3D_MAX_LOCAL; i++)
        any |= vals[i] | tee[i];
    /* with --log-dir even -r 0 gives torchrun's tree (its directories);
     * without, only a stream to write makes a temporary DIR, as torchrun */
    if ((o->redirects || o->tee) && (o->log_dir || any)) {
        /* torchrun's layout: a file for each stream redirected or teed
         * (a tee is a redirect that the terminal shows too) */
        o->local_std = calloc(P3D_MAX_LOCAL, 1);
        if (!o->local_std)
            return p3d_err(err, "out of memory");
        for (int i = 0; i < P3D_MAX_LOCAL; i++)
            o->local_std[i] = (unsigned char)((vals[i] | tee[i]) | (vals[i] & ~tee[i] & 3) << 2);
    }
    if (o->local_ranks_filter) {
        memset(vals, 0, sizeof vals);
        const char *p = o->local_ranks_filter;
        for (;;) {
            const char *comma = strchr(p, ',');
            const char *end = comma ? comma : p + strlen(p);
            long lr = end == p + 1 && *p == '0' ? 0 : number(p, end, P3D_MAX_LOCAL - 1);
            if (lr < 0)
                return p3d_err(err, "--local-ranks-filter: expected local ranks like 0,1,2, got '%s'",
                               o->local_ranks_filter);
            vals[lr] = 1;
            if (!comma)
                break;
            p = comma + 1;
        }
        for (int i = 0; i < P3D_MAX_LOCAL; i++)
            o->local_hidden[i] |= !vals[i];
    }
    return 0;
}

/* --rdzv-conf K=V,...: the keys of torchrun's rendezvous handlers. */
static int torchrun_rdzv_conf(p3d_opts *o, int timeout_given, char **err)
{
    static const char *const inert[] = {
        "last_call_timeout", "close_timeout", "read_timeout", "keep_alive_interval", "keep_alive_max_attempt",
        "heartbeat",         "use_libuv",     "is_host",      "store_type",          "rank"};
    const char *p = o->rdzv_conf;
    while (p && *p) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq || eq == p)
            return p3d_err(err, "--rdzv-conf: expected KEY=VALUE,... got '%.*s'", (int)(end - p), p);
        size_t kl = (size_t)(eq - p);
        if ((kl == 12 && !strncmp(p, "join_timeout", kl)) || (kl == 7 && !strncmp(p, "timeout", kl))) {
            char num[32];
            char *e = NULL;
            size_t vl = (size_t)(end - eq - 1);
            snprintf(num, sizeof num, "%.*s", (int)(vl < sizeof num - 1 ? vl : sizeof num - 1), eq + 1);
            errno = 0;
            double t = strtod(num, &e);
            if (vl >= sizeof num || errno || e == num || *e || !(t >= 0.1 && t <= 1e6))
                return p3d_err(err, "--rdzv-conf %.*s: expected seconds from 0.1 to 1e6", (int)(end - p), p);
            if (timeout_given)
                return p3d_err(err, "--rdzv-conf %.*s and --rdzv-timeout both bound the rendezvous: give one", (int)kl,
                               p);
            o->rdzv_timeout = t;
        } else {
            size_t k = 0;
            while (k < sizeof inert / sizeof inert[0] && !(strlen(inert[k]) == kl && !strncmp(p, inert[k], kl)))
                k++;
            if (k == sizeof inert / sizeof inert[0])
                return p3d_err(err,
                               "--rdzv-conf: unknown key '%.*s' (join_timeout, timeout, and torchrun's "
                               "last_call_timeout, close_timeout, read_timeout, keep_alive_*, heartbeat, "
                               "use_libuv, is_host, which change nothing here)",
                               (int)kl, p);
        }
        p = comma ? comma + 1 : end;
    }
    return 0;
}

/* torchrun's --rdzv-endpoint/--rdzv-backend/--standalone in our terms. */
static int torchrun_rdzv(p3d_opts *o, char **err)
{
    const char *b = o->rdzv_backend;
    if (o->standalone && (o->rdzv_endpoint || o->nnodes > 1))
        return p3d_err(err, "--standalone is one node: drop --rdzv-endpoint and --nnodes, or drop --standalone");
    if (b && strcmp(b, "c10d") && strcmp(b, "static") && strcmp(b, "etcd") && strcmp(b, "etcd-v2"))
        return p3d_err(err, "--rdzv-backend: expected c10d, static, etcd or etcd-v2 (torchrun's names), got '%s'", b);
    if (!o->rdzv_endpoint && b && strcmp(b, "static"))
        return p3d_err(err, "--rdzv-backend %s needs --rdzv-endpoint HOST:PORT", b);
    if (!o->rdzv_endpoint && !strcmp(o->rdzv, "auto")) {
        if (o->nnodes <= 1 && o->node_rank == 0)
            o->node_rank = -1; /* torchrun's default node rank of a one-node job */
        else if (o->nnodes > 1 && o->master_addr && !getenv("SLURM_JOB_ID") && !getenv("PMIX_NAMESPACE")) {
            /* torchrun's static rendezvous: the agents meet at
             * MASTER_ADDR:MASTER_PORT (default 29500); the ranks' store
             * then takes a free port of rank 0's node */
            if (asprintf(&o->rdzv_owned, "static:%s:%d", o->master_addr, o->master_port ? o->master_port : 29500) < 0)
                return p3d_err(err, "out of memory");
            o->rdzv = o->rdzv_owned;
            o->master_addr = NULL;
            o->master_port = 0;
        }
        return 0;
    }
    if (!o->rdzv_endpoint)
        return 0;
    if (strcmp(o->rdzv, "auto"))
        return p3d_err(err, "--rdzv-endpoint and --rdzv both say where to meet: give one of them");
    const char *ep = o->rdzv_endpoint, *colon = strrchr(ep, ':');
    if (!colon || colon == ep || !colon[1])
        return p3d_err(err, "--rdzv-endpoint: expected HOST:PORT, got '%s'", ep);
    int etcd = b && !strncmp(b, "etcd", 4);
    if (asprintf(&o->rdzv_owned, etcd ? "etcd:http://%s" : "static:%s", ep) < 0)
        return p3d_err(err, "out of memory");
    o->rdzv = o->rdzv_owned;
    return 0;
}

/* Printable, without spaces or shell/path specials, at most max long. */
static int plain_word(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!isalnum((unsigned char)s[n]) && !strchr("_.-", s[n]))
            return 0;
    return n > 0 && n <= max;
}

/* The options that choose among torchrun's fixed words. */
static int torchrun_words(p3d_opts *o, const opt_row *const *seen, size_t nseen, char **err)
{
    if (o->start_method && strcmp(o->start_method, "spawn") && strcmp(o->start_method, "fork") &&
        strcmp(o->start_method, "forkserver"))
        return p3d_err(err, "--start-method: expected spawn, fork or forkserver, got '%s'", o->start_method);
    if (o->event_log_handler && strcmp(o->event_log_handler, "null"))
        return p3d_err(err,
                       "--event-log-handler %s: not supported (a Python handler); par3drun writes every "
                       "event to RUN_DIR/events.jsonl (--run-dir DIR keeps it)",
                       o->event_log_handler);
    if (o->logs_specs)
        return p3d_err(err,
                       "--logs-specs %s: not supported (a Python entry point of torchrun's); use --log-dir "
                       "DIR, --output-ranks, --local-ranks-filter",
                       o->logs_specs);
    if (o->local_addr)
        return p3d_err(err,
                       "--local-addr %s: not supported: other nodes reach an agent at the address its "
                       "rendezvous connection came from (MASTER_ADDR: --master-addr)",
                       o->local_addr);
    if (o->numa_binding) {
        const char *b = !strcmp(o->numa_binding, "node")        ? "numa"
                        : !strcmp(o->numa_binding, "exclusive") ? "core"
                                                                : NULL;
        if (!b)
            return p3d_err(err,
                           "--numa-binding %s: not supported; node (--bind numa, par3drun's default) and "
                           "exclusive (--bind core) are",
                           o->numa_binding);
        if (given(seen, nseen, "bind"))
            return p3d_err(err, "--numa-binding and --bind both say how to bind: give one");
        o->bind = b;
    }
    if (o->role && (strlen(o->role) > 128 || !plain_word(o->role, 128)))
        return p3d_err(err, "--role: expected a name of letters, digits, _ . - (at most 128), got '%s'", o->role);
    if (o->rdzv_id) {
        if (!plain_word(o->rdzv_id, 64))
            return p3d_err(err, "--rdzv-id: expected an id of letters, digits, _ . - (at most 64), got '%s'",
                           o->rdzv_id);
        if (o->job_id)
            return p3d_err(err, "--rdzv-id and --job-id both name the job: give one");
        o->job_id = o->rdzv_id;
    }
    return 0;
}

/* --signals-to-handle: par3drun always handles these (docs/launch.md). */
static int torchrun_signals(const char *list, char **err)
{
    static const char *const known[] = {"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"};
    const char *p = list;
    while (p && *p) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        while (p < end && *p == ' ')
            p++;
        size_t l = (size_t)(end - p), k = 0;
        while (l && p[l - 1] == ' ')
            l--;
        while (k < sizeof known / sizeof known[0] && !(strlen(known[k]) == l && !strncmp(p, known[k], l)))
            k++;
        if (k == sizeof known / sizeof known[0])
            return p3d_err(err,
                           "--signals-to-handle: '%.*s' is not one par3drun handles (it always handles "
                           "SIGTERM, SIGINT, SIGHUP, SIGQUIT: stop the job; SIGUSR1, SIGUSR2: passed to "
                           "the ranks)",
                           (int)l, p);
        p = comma ? comma + 1 : end;
    }
    return 0;
}

int p3d_torchrun_apply(p3d_opts *o, const opt_row *const *seen, size_t nseen, char **err)
{
    if (torchrun_rdzv(o, err) < 0 || torchrun_rdzv_conf(o, given(seen, nseen, "rdzv-timeout"), err) < 0 ||
        torchrun_words(o, seen, nseen, err) < 0 || torchrun_output(o, err) < 0)
        return -1;
    return o->signals_to_handle ? torchrun_signals(o->signals_to_handle, err) : 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The interpreter: --python, PAR3D_PYTHON, torchrun's PYTHON_EXEC, else
 * python3 on PATH (said once). The resolved path, or NULL with *err. */
static char *python_path(const p3d_opts *o, const char *what, char **err)
{
    const char *env = getenv("PAR3D_PYTHON"), *exec = getenv("PYTHON_EXEC");
    const char *py = o->python ? o->python : env && *env ? env : exec && *exec ? exec : "python3";
    char *e = NULL, *path = p3d_resolve_program(py, &e);
    if (!path) {
        p3d_err(err, "no Python interpreter to run %s: %s (give --python PATH or set PAR3D_PYTHON)", what,
                e ? e : "out of memory");
        free(e);
        return NULL;
    }
    if (py[0] == 'p' && !strcmp(py, "python3") && !o->quiet)
        fprintf(stderr, "par3drun: running %s with %s (python3 on PATH; --python or PAR3D_PYTHON choose another)\n",
                what, path);
    return path;
}

/* Why prog cannot run, or NULL when it can (spawn.c's search). */
static char *not_runnable(const char *prog)
{
    char *e = NULL, *path = p3d_resolve_program(prog, &e);
    if (path || strchr(prog, '/')) { /* a path: its own reason, no search */
        free(path);
        return path ? NULL : e ? e : strdup("out of memory");
    }
    free(e); /* not the PATH it searched: a long list that says little */
    e = NULL;
    if (asprintf(&e, "cannot run %s: not found in PATH, not a path and not a .py script", prog) < 0)
        e = NULL;
    return e ? e : strdup("out of memory");
}

int p3d_torchrun_program(p3d_opts *o, char **err)
{
    if (o->argc == 0)
        return 0;
    const char *prog = o->argv[0];
    if (o->module && o->no_python)
        return p3d_err(err, "-m/--module runs python -m %s: drop it or drop --no-python", prog);
    if (o->module && o->run_path)
        return p3d_err(err, "-m/--module and --run-path: give one");
    int py = o->module || o->run_path || (o->positional && !o->no_python && ends_with(prog, ".py"));
    if (!py) {
        char *why = not_runnable(prog);
        if (!why)
            return 0;
        /* not on PATH and no .py: show both forms */
        int rc = p3d_err(err,
                         "%s; the forms are: par3drun [options] SCRIPT.py [ARGS...] (run with python3, "
                         "or -m MODULE), par3drun [options] [--] PROGRAM [ARGS...] (a program on PATH or a path)",
                         why);
        free(why);
        return rc;
    }
    if (!o->module && access(prog, R_OK) != 0)
        return p3d_err(err, "cannot read the script %s: %s", prog, strerror(errno));
    char *path = python_path(o, prog, err);
    if (!path)
        return -1;
    char **v = calloc((size_t)o->argc + 4, sizeof *v);
    if (!v) {
        free(path);
        return p3d_err(err, "out of memory");
    }
    int n = 0;
    v[n++] = path;
    v[n++] = (char *)"-u"; /* torchrun's: unbuffered, so a rank's lines arrive as written */
    if (o->module)
        v[n++] = (char *)"-m";
    for (int i = 0; i < o->argc; i++)
        v[n++] = o->argv[i];
    o->python_owned = path;
    o->argv_owned = v;
    o->argv = v;
    o->argc = n;
    return 0;
}
