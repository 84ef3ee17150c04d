/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cmd_launch.c — `par3drun [options] -- PROGRAM`: place (as --dry-run
 * does), write the job's placement JSON, then hand the nodes to the
 * supervisor (supervise.c). Also the internal `par3drun __agent`, which runs
 * one node of the same job on its own (docs/launch.md).
 */
#include "commands.h"
#include "termsafe.h"
#include "launch.h"
#include "rundir.h"
#include "place.h"
#include "rdzv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* Everything cmd_launch owns; freed in one place. */
typedef struct launch_state {
    p3d_plan_result res;
    int placed;
    p3d_envv extra;
    char *job_id, *run_dir, *placement_path, *program, *master_addr;
    int own_run_dir;    /* created by us under $TMPDIR: removed at the end */
    int *nodes;
    int nnodes;
    const p3d_opts *o;
    p3d_launch *L;
    p3d_jobstate job;   /* the placement of now, which L->job reads */
    int nkept;          /* placement.<R>.json files written */
} launch_state;



static char *make_job_id(const p3d_opts *o)
{
    if (o->job_id)
        return strdup(o->job_id);
    const char *s = getenv("SLURM_JOB_ID");
    if (s && *s)
        return strdup(s);
    unsigned char r[6];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        unsigned long x = (unsigned long)getpid() ^ (unsigned long)p3d_now();
        memcpy(r, &x, sizeof r < sizeof x ? sizeof r : sizeof x);
    }
    char *id = malloc(13);
    if (id)
        for (int i = 0; i < 6; i++)
            sprintf(id + 2 * i, "%02x", r[i]);
    return id;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}




/* L->replace (launch.h): a lost node's ranks move to a spare. */
static int replace_node(void *ctx, const int *lost, int nlost, int restart, const char *reason, char **msg)
{
    launch_state *S = ctx;
    p3d_launch *L = S->L;
    p3d_plan_result *res = &S->res;
    char *err = NULL, path[PATH_MAX];
    int *was = NULL;
    int rc = p3d_replace_place(S->o, res, lost, nlost, restart, reason, L->events_fd, L->t0, &was, msg);
    if (rc != 0)
        return rc;
    rc = -1;
    /* the placement the job ran with stays as placement.<restart>.json;
     * placement.json is replaced in one rename */
    snprintf(path, sizeof path, "%s/placement.%d.json", S->run_dir, restart);
    unlink(path);
    if (link(S->placement_path, path) == 0)
        S->nkept = restart + 1 > S->nkept ? restart + 1 : S->nkept;
    {
        p3d_report_in in = p3d_plan_report_in(res);
        char *json = p3d_report_json(&in);
        if (!json || p3d_rundir_write(S->run_dir, "placement.json", json, strlen(json), &err) < 0) {
            free(json);
            *msg = err ? err : strdup("cannot render the placement JSON (out of memory)");
            err = NULL;
            goto out;
        }
        free(json);
    }
    S->job.pl = res->pl;
    S->job.gen0 = restart;
    rc = p3d_replace_story(res, was, lost, nlost, restart, reason, L->events_fd, L->t0, msg);
out:
    free(err);
    free(was);
    return rc;
}

/* Shared by launch and __agent: place, check, write the placement, fill L.
 * Returns 0, or an exit code with the message already printed. */
static int prepare(const p3d_opts *o, launch_state *S, p3d_launch *L)
{
    char *err = NULL;
    int rc = P3D_EXIT_BADINPUT, said = 0; /* said: the message is out */
    memset(L, 0, sizeof *L);
    L->o = o;
    L->job = &S->job;
    if (o->emulate && !o->cluster) {
        p3d_err(&err, "--emulate runs the nodes of a cluster file on this host: give --cluster FILE");
        goto out;
    }
    if (o->argc < 1) {
        p3d_err(&err, "no program to launch: par3drun [options] -- PROGRAM [ARGS...]");
        goto out;
    }
    /* checked here, once, so that a typo is one line and exit 2 rather
     * than a failure per rank; 127 stays for a program that disappears
     * between this check and the exec */
    S->program = p3d_resolve_program(o->argv[0], &err);
    if (!S->program)
        goto out;
    if (p3d_place(o, &S->res, &err) < 0)
        goto out;
    S->placed = 1;
    const p3d_placement *pl = S->res.pl;
    const p3d_cluster *c = S->res.cluster;
    if (S->res.an && S->res.an->nerrors > 0) {
        fprintf(stderr, "par3drun: the placement fails %d error-level check%s; nothing started:\n",
                S->res.an->nerrors, S->res.an->nerrors == 1 ? "" : "s");
        for (size_t i = 0; i < S->res.an->nchecks; i++)
            if (S->res.an->checks[i].severity == P3D_SEV_ERROR)
                fprintf(stderr, "  %s: %s\n", S->res.an->checks[i].code, p3d_tesc(S->res.an->checks[i].message));
        fprintf(stderr, "  (see par3drun --dry-run with the same options)\n");
        said = 1;
        goto out;
    }
    if (o->cmd != P3D_CMD_AGENT)
        p3d_launch_warnings(S->res.an, o->quiet);
    /* the nodes that hold ranks, in cluster order */
    S->nodes = calloc(c->nnodes + 1, sizeof *S->nodes);
    unsigned char *has = calloc(c->nnodes + 1, 1);
    if (!S->nodes || !has) {
        free(has);
        p3d_err(&err, "out of memory");
        goto out;
    }
    for (int r = 0; r < pl->world; r++)
        has[pl->ranks[r].node] = 1;
    /* the spares' agents run too: no rank, they wait to take a lost
     * node's ranks */
    for (size_t i = 0; i < c->nnodes; i++)
        if (has[i] || c->nodes[i].role == P3D_NODE_SPARE)
            S->nodes[S->nnodes++] = (int)i;
    free(has);
    if (S->nnodes > 1 && !o->emulate && o->cmd != P3D_CMD_AGENT) {
        p3d_err(&err, "the placement spans %d nodes of %s: start one par3drun per node (multi-node rendezvous, "
                      "docs/launch.md) or add --emulate to run them all on this host",
                S->nnodes, o->cluster ? o->cluster : "the cluster");
        goto out;
    }

    int hang_sig;
    if (p3d_check_output_ranks(o, pl->world, &err) < 0 ||
        (o->hang_signal && p3d_signal_parse(o->hang_signal, &hang_sig, &err) < 0))
        goto out;

    S->job_id = make_job_id(o);
    if (!S->job_id) {
        p3d_err(&err, "out of memory");
        goto out;
    }
    if (o->run_dir) {
        S->run_dir = strdup(o->run_dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        if (asprintf(&S->run_dir, "%s/par3drun-%s", tmp && *tmp ? tmp : "/tmp", S->job_id) < 0)
            S->run_dir = NULL;
        S->own_run_dir = !o->keep_run_dir;
    }
    if (!S->run_dir || p3d_rundir_make(S->run_dir, &err) < 0) { /* rundir.h: private or refused */
        if (!S->run_dir)
            p3d_err(&err, "out of memory");
        goto out;
    }
    if (o->log_dir && p3d_check_log_dir(o->log_dir, &err) < 0)
        goto out;
    if (asprintf(&S->placement_path, "%s/placement.json", S->run_dir) < 0) {
        S->placement_path = NULL;
        p3d_err(&err, "out of memory");
        goto out;
    }
    {
        p3d_report_in in = p3d_plan_report_in(&S->res);
        char *json = p3d_report_json(&in);
        if (!json) {
            p3d_err(&err, "cannot render the placement JSON (out of memory)");
            goto out;
        }
        /* rundir.c: O_EXCL under a random name, renamed inside the checked directory */
        int w = p3d_rundir_write(S->run_dir, "placement.json", json, strlen(json), &err);
        free(json);
        if (w < 0)
            goto out;
    }

    for (size_t i = 0; i < o->nenv_files; i++)
        if (p3d_env_file_read(o->env_files[i], &S->extra, &err) < 0)
            goto out;
    for (size_t i = 0; i < o->nenv; i++)
        if (p3d_envv_put(&S->extra, o->env[i]) < 0) {
            p3d_err(&err, "--env '%s': expected KEY=VALUE", o->env[i]);
            goto out;
        }

    /* Rank 0's node: on one host (one node, or --emulate) loopback is
     * right by construction; across hosts, rank 0's node name. */
    if (o->master_addr)
        S->master_addr = strdup(o->master_addr);
    else if (S->nnodes == 1 || o->emulate)
        S->master_addr = strdup("127.0.0.1");
    else
        S->master_addr = strdup(c->nodes[pl->ranks[0].node].name);
    S->job.master_port = o->master_port ? o->master_port : p3d_free_port();
    if (!S->master_addr || !L->job->master_port) {
        p3d_err(&err, "cannot find a free TCP port for MASTER_PORT (give --master-port)");
        rc = P3D_EXIT_FAIL;
        goto out;
    }
    /* NCCL_COMM_ID makes every ncclGetUniqueId point at one address, which
     * is only right for a program that creates one world communicator and
     * splits it: the bundled worker, run directly or through a wrapper
     * that execs it (timeout, nsys, a test script: p3d-worker among the
     * arguments), so the wrapped production start-up is the real one. */
    int worker = !strcmp(base_name(S->program), "p3d-worker");
    for (int i = 1; !worker && i < o->argc; i++)
        worker = !strcmp(base_name(o->argv[i]), "p3d-worker");
    if (worker) {
        for (int k = 0; k < 8 && (!L->job->nccl_port || L->job->nccl_port == L->job->master_port); k++)
            S->job.nccl_port = p3d_free_port();
        if (L->job->nccl_port == L->job->master_port)
            S->job.nccl_port = 0;
    }

    S->job.cluster = c;
    S->job.pl = pl;
    S->job.job_id = S->job_id;
    L->run_dir = S->run_dir;
    L->run_dir_own = S->own_run_dir;
    L->placement_path = S->placement_path;
    S->job.master_addr = S->master_addr;
    L->extra_env = S->extra.v;
    L->nextra = S->extra.n;
    L->tag = o->tag_output < 0 ? pl->world > 1 : o->tag_output;
    L->emulate = o->emulate;
    L->program = S->program;
    L->events_fd = p3d_events_open(S->run_dir);
    L->t0 = p3d_now();
    S->o = o;
    S->L = L;
    if (o->emulate && o->cmd != P3D_CMD_AGENT && o->spares > 0) {
        L->replace = replace_node;
        L->replace_ctx = S;
    }
    if (o->verbose)
        fprintf(stderr,
                "par3drun: job %s: %d ranks on %d node%s, placement %s, MASTER_ADDR=%s MASTER_PORT=%d "
                "(place %.1f ms: cluster %.1f, policy %.1f, checks %.1f, baseline %.1f)\n",
                p3d_tesc(S->job_id), pl->world, S->nnodes, S->nnodes == 1 ? "" : "s", p3d_tesc(S->placement_path),
                p3d_tesc(S->master_addr),
                L->job->master_port,
                1e3 * (S->res.t_cluster + S->res.t_policy + S->res.t_check + S->res.t_baseline),
                1e3 * S->res.t_cluster, 1e3 * S->res.t_policy, 1e3 * S->res.t_check, 1e3 * S->res.t_baseline);
    rc = 0;
out:
    if (rc && !said) {
        fputs("par3drun: ", stderr);
        p3d_term_fputs(err ? err : "out of memory (no room for the message itself)", stderr);
        fputc('\n', stderr);
    }
    free(err);
    return rc;
}

static void cleanup(launch_state *S, int code)
{
    if (S->L && S->L->events_fd >= 0) {
        close(S->L->events_fd);
        S->L->events_fd = -1;
    }
    /* a launch refused before it started leaves nothing behind */
    p3d_rundir_finish(S->run_dir, S->own_run_dir, S->L ? code : 0, S->placed ? S->res.pl->world : 0, S->nkept);
    if (S->placed)
        p3d_plan_result_free(&S->res);
    p3d_envv_free(&S->extra);
    free(S->job_id);
    free(S->run_dir);
    free(S->placement_path);
    free(S->program);
    free(S->master_addr);
    free(S->nodes);
}

int p3d_cmd_launch(const p3d_opts *o)
{
    launch_state S;
    p3d_launch L;
    /* one agent per node with a rendezvous (rdzv.h, mnode.c) when --rdzv
     * or the environment (PMIx, Slurm) asks for it */
    int mrc = p3d_rdzv_launch(o);
    if (mrc >= 0)
        return mrc;
    memset(&S, 0, sizeof S);
    int rc = prepare(o, &S, &L);
    if (rc == 0)
        rc = p3d_launcher_run(&L, S.nodes, S.nnodes);
    cleanup(&S, rc);
    return rc;
}

/* `par3drun __agent --node-rank I [the job's options] -- PROGRAM`: one node
 * of the job, under a job controller of its own (the one-agent case of
 * supervise.c: it decides restarts of this node and prints its root cause). The placement is computed
 * again from the same options — the policies are deterministic on the same
 * input — so several __agents of one job agree without talking. Give them
 * the same --job-id, --run-dir and --master-port. */
int p3d_cmd_agent(const p3d_opts *o)
{
    launch_state S;
    p3d_launch L;
    memset(&S, 0, sizeof S);
    int rc = prepare(o, &S, &L);
    if (rc == 0) {
        int node = o->node_rank < 0 ? 0 : o->node_rank;
        if (node >= S.nnodes) {
            fprintf(stderr, "par3drun: __agent --node-rank %d: the placement has ranks on %d node%s\n", node,
                    S.nnodes, S.nnodes == 1 ? "" : "s");
            rc = P3D_EXIT_BADINPUT;
        } else {
            rc = p3d_launcher_run(&L, &S.nodes[node], 1);
        }
    }
    cleanup(&S, rc);
    return rc;
}
