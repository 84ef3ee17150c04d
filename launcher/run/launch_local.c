/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch_local.c — a job whose nodes are all run from here: one node, or
 * every node of a cluster file with --emulate, or one node of it as
 * `par3drun __agent`. Places (as --dry-run does), writes the job's
 * placement JSON through the shared preparation (launch_prepare.c), then
 * hands the nodes to the supervisor (supervise.c). docs/launch.md.
 */
#include "prepare.h"
#include "plan.h"
#include "preflight.h"
#include "hub.h"
#include "rundir.h"
#include "tcpstore.h"
#include "termsafe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything a local launch owns; freed in one place. */
typedef struct launch_state {
    p3d_prep prep;
    p3d_plan_result res;
    int placed;
    char *job_id, *master_addr;
    int *nodes;
    int nnodes;
    const p3d_opts *o;
    const p3d_launch *L; /* read-only once prepare() filled it */
    int serve_store;     /* this process hosts every node: it serves the store */
    p3d_store *store;    /* the agent store (tcpstore.h), NULL none */
    p3d_jobstate job;    /* the placement of now, which L->job reads */
} launch_state;

/* The placement of now is the job's: placement.json written again (the
 * old one kept as placement.<restart>.json) and the agents forked next
 * read it; full_dp set while the job runs below its full width. */
static int adopt_placement(launch_state *S, int restart, char **msg)
{
    p3d_plan_result *res = &S->res;
    char *err = NULL;
    p3d_job j = res->job;
    j.mesh.size[P3D_DIM_DP] = p3d_mesh_size(&res->pl->mesh, P3D_DIM_DP);
    p3d_report_in in = p3d_plan_report_in(res);
    in.job = &j;
    char *json = p3d_report_json(&in);
    if (!json || p3d_prep_replace_json(&S->prep, restart, json, strlen(json), &err) < 0) {
        free(json);
        free(*msg);
        *msg = err ? err : strdup("cannot render the placement JSON (out of memory)");
        return -1;
    }
    free(json);
    int full = p3d_mesh_size(&res->job.mesh, P3D_DIM_DP);
    S->job.pl = res->pl;
    S->job.gen0 = restart;
    S->job.full_dp = j.mesh.size[P3D_DIM_DP] < full ? full : 0;
    return 0;
}

/* L->replace (launch.h): a lost node's ranks move to a spare, or (an
 * elastic job without one) the job runs on fewer replicas. */
static int replace_node(void *ctx, const int *lost, int nlost, int restart, const char *reason, char **msg)
{
    launch_state *S = ctx;
    const p3d_launch *L = S->L;
    int *was = NULL;
    int rc = p3d_place_heal(S->o, &S->res, lost, nlost, restart, reason, L->events_fd, L->t0, &was, msg);
    if (rc == 1 || rc < 0)
        return rc;
    if (adopt_placement(S, restart, msg) < 0)
        rc = -1;
    else if (rc == 0)
        rc = p3d_replace_story(&S->res, was, lost, nlost, restart, reason, L->events_fd, L->t0, msg);
    free(was);
    return rc;
}

/* L->grow_room and L->grow (launch.h): spares hold whole replicas again. */
static int grow_room(void *ctx)
{
    launch_state *S = ctx;
    return p3d_place_grow_room(&S->res);
}

static int grow_job(void *ctx, int restart, const char *when, char **msg)
{
    launch_state *S = ctx;
    int rc = p3d_place_grow(S->o, &S->res, restart, when, S->L->events_fd, S->L->t0, msg);
    if (rc == 0 && adopt_placement(S, restart, msg) < 0)
        rc = -1;
    return rc;
}

/* --preflight (launch_local's own, before any rank starts): the nodes
 * benchmarked, the excluded ones' ranks moved to spares, the nodes that
 * run what is left, placement.json written again with the figures. 0, or
 * an exit code with the message printed. */
static int after_preflight(const p3d_opts *o, launch_state *S, const p3d_launch *L)
{
    char *pf = NULL, *err = NULL;
    if (o->cmd == P3D_CMD_AGENT) {
        fputs("par3drun: __agent: --preflight is run by the launch that starts every node (--emulate), "
              "not by one node's agent\n",
              stderr);
        return P3D_EXIT_BADINPUT;
    }
    int rc = p3d_preflight_apply(o, &S->res, L->events_fd, L->t0, o->quiet ? NULL : stderr, &pf);
    if (rc) {
        free(pf);
        return rc;
    }
    int k = 0;
    for (int i = 0; i < S->nnodes; i++)
        if (S->res.cluster->nodes[S->nodes[i]].role != P3D_NODE_LOST)
            S->nodes[k++] = S->nodes[i];
    S->nnodes = k;
    S->job.pl = S->res.pl;
    p3d_report_in in = p3d_plan_report_in(&S->res);
    in.preflight_json = pf;
    char *json = p3d_report_json(&in);
    free(pf);
    if (!json || p3d_rundir_write(S->prep.run_dir, "placement.json", json, strlen(json), &err) < 0) {
        fputs("par3drun: ", stderr);
        p3d_term_fputs(err ? err : "cannot render the placement JSON (out of memory)", stderr);
        fputc('\n', stderr);
        rc = P3D_EXIT_FAIL;
    }
    free(json);
    free(err);
    return rc;
}

/* The placement's error-level checks, said on stderr; 1 when there was
 * one (nothing may start), else 0. */
static int check_errors(const launch_state *S)
{
    const p3d_analysis *an = S->res.an;
    if (!an || an->nerrors <= 0)
        return 0;
    fprintf(stderr, "par3drun: the placement fails %d error-level check%s; nothing started:\n", an->nerrors,
            an->nerrors == 1 ? "" : "s");
    for (size_t i = 0; i < an->nchecks; i++)
        if (an->checks[i].severity == P3D_SEV_ERROR)
            fprintf(stderr, "  %s: %s\n", an->checks[i].code, p3d_tesc(an->checks[i].message));
    fprintf(stderr, "  (see par3drun --dry-run with the same options)\n");
    return 1;
}

/* S->nodes: the nodes that hold ranks and the spares (whose agents run
 * too: no rank, they wait to take a lost node's ranks), in cluster order;
 * more than one needs --emulate here. */
static int job_nodes(const p3d_opts *o, launch_state *S, char **err)
{
    const p3d_placement *pl = S->res.pl;
    const p3d_cluster *c = S->res.cluster;
    S->nodes = calloc(c->nnodes + 1, sizeof *S->nodes);
    unsigned char *has = calloc(c->nnodes + 1, 1);
    if (!S->nodes || !has) {
        free(has);
        return p3d_err(err, "out of memory");
    }
    for (int r = 0; r < pl->world; r++)
        has[pl->ranks[r].node] = 1;
    for (size_t i = 0; i < c->nnodes; i++)
        if (has[i] || c->nodes[i].role == P3D_NODE_SPARE)
            S->nodes[S->nnodes++] = (int)i;
    free(has);
    if (S->nnodes > 1 && !o->emulate && o->cmd != P3D_CMD_AGENT)
        return p3d_err(err,
                       "the placement spans %d nodes of %s: start one par3drun per node (multi-node rendezvous, "
                       "docs/launch.md) or add --emulate to run them all on this host",
                       S->nnodes, o->cluster ? o->cluster : "the cluster");
    return 0;
}

/* The job's id and its run directory with the placement JSON in it; 0 or
 * an exit code with *err. */
static int job_rundir(const p3d_opts *o, launch_state *S, char **err)
{
    S->job_id = p3d_job_id_new(o);
    if (!S->job_id) {
        p3d_err(err, "out of memory (or no random bytes) for the job id");
        return P3D_EXIT_BADINPUT;
    }
    p3d_report_in in = p3d_plan_report_in(&S->res);
    char *json = p3d_report_json(&in);
    if (!json) {
        p3d_err(err, "cannot render the placement JSON (out of memory)");
        return P3D_EXIT_BADINPUT;
    }
    int rc = p3d_prep_rundir(&S->prep, S->job_id, -1, S->res.pl->world, json, strlen(json), err);
    free(json);
    return rc;
}

/* MASTER_ADDR and MASTER_PORT (and the agent store listening there for a
 * Python program), NCCL_COMM_ID's port; 0 or an exit code with *err. */
static int job_master(const p3d_opts *o, launch_state *S, p3d_launch *L, char **err)
{
    const p3d_placement *pl = S->res.pl;
    const p3d_cluster *c = S->res.cluster;
    /* Rank 0's node: on one host (one node, or --emulate) loopback is
     * right by construction; across hosts, rank 0's node name. */
    if (o->master_addr)
        S->master_addr = strdup(o->master_addr);
    else if (S->nnodes == 1 || o->emulate)
        S->master_addr = strdup("127.0.0.1");
    else
        S->master_addr = strdup(c->nodes[pl->ranks[0].node].name);
    if (S->master_addr && S->serve_store && !o->no_agent_store && p3d_prep_is_python(&S->prep)) {
        /* the agent store, listening before any rank starts: on port 0
         * the kernel's free port is ours at once (no probe-then-bind race) */
        char *se = NULL;
        S->store = p3d_store_listen(S->master_addr, o->master_port, &S->job.master_port, &se);
        if (!S->store) {
            p3d_err(err, "the agent store (TORCHELASTIC_USE_AGENT_STORE; --no-agent-store turns it off): %s",
                    se ? se : "out of memory");
            free(se);
            return P3D_EXIT_FAIL;
        }
        L->store = S->store;
    } else {
        S->job.master_port = o->master_port ? o->master_port : p3d_free_port();
    }
    if (!S->master_addr || !S->job.master_port) {
        p3d_err(err, "cannot find a free TCP port for MASTER_PORT (give --master-port)");
        return P3D_EXIT_FAIL;
    }
    /* NCCL_COMM_ID makes every ncclGetUniqueId point at one address, which
     * is only right for a program that creates one world communicator and
     * splits it: the bundled worker, run directly or through a wrapper
     * that execs it (timeout, nsys, a test script: p3d-worker among the
     * arguments), so the wrapped production start-up is the real one. */
    S->job.nccl_port = p3d_prep_nccl_port(&S->prep, 1, S->job.master_port);
    return 0;
}

/* Shared by launch and __agent: place, check, write the placement, fill L.
 * Returns 0, or an exit code with the message already printed. */
static int prepare(const p3d_opts *o, launch_state *S, p3d_launch *L)
{
    char *err = NULL;
    int rc = P3D_EXIT_BADINPUT, said = 0; /* said: the message is out */
    memset(L, 0, sizeof *L);
    L->job = &S->job;
    L->events_fd = -1;
    S->L = L;
    if ((rc = p3d_prep_begin(o, NULL, &S->prep, &err)) != 0)
        goto out;
    rc = P3D_EXIT_BADINPUT;
    if (p3d_place(o, &S->res, &err) < 0)
        goto out;
    S->placed = 1;
    if ((said = check_errors(S)))
        goto out;
    if (o->cmd != P3D_CMD_AGENT)
        p3d_launch_warnings(S->res.an, o->quiet);
    if (job_nodes(o, S, &err) < 0)
        goto out;
    if ((rc = job_rundir(o, S, &err)) != 0 || (rc = job_master(o, S, L, &err)) != 0)
        goto out;
    rc = P3D_EXIT_BADINPUT;
    S->job.cluster = S->res.cluster;
    S->job.pl = S->res.pl;
    S->job.job_id = S->job_id;
    S->job.master_addr = S->master_addr;
    S->job.min_dp = S->res.job.min_dp;
    p3d_prep_fill(&S->prep, L, 1);
    S->o = o;
    if (o->emulate && o->cmd != P3D_CMD_AGENT && (o->spares > 0 || S->res.job.min_dp > 0)) {
        L->replace = replace_node;
        L->replace_ctx = S;
    }
    if (o->emulate && o->cmd != P3D_CMD_AGENT && S->res.job.min_dp > 0) {
        L->grow_room = grow_room;
        L->grow = grow_job;
    }
    if (o->preflight && (rc = after_preflight(o, S, L)) != 0) {
        said = 1;
        goto out;
    }
    if (o->verbose)
        fprintf(stderr,
                "par3drun: job %s: placement %s, MASTER_ADDR=%s MASTER_PORT=%d "
                "(place %.1f ms: cluster %.1f, policy %.1f, checks %.1f, baseline %.1f)\n",
                p3d_tesc(S->job_id), p3d_tesc(S->prep.placement_path), p3d_tesc(S->master_addr), S->job.master_port,
                1e3 * (S->res.t_cluster + S->res.t_policy + S->res.t_check + S->res.t_baseline), 1e3 * S->res.t_cluster,
                1e3 * S->res.t_policy, 1e3 * S->res.t_check, 1e3 * S->res.t_baseline);
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
    /* a launch refused before it started leaves nothing behind */
    p3d_prep_finish(&S->prep, S->L, code, S->placed ? S->res.pl->world : 0);
    if (S->placed)
        p3d_plan_result_free(&S->res);
    free(S->job_id);
    free(S->master_addr);
    free(S->nodes);
    p3d_store_free(S->store);
}

int p3d_local_launch(const p3d_opts *o, int node)
{
    launch_state S;
    p3d_launch L;
    memset(&S, 0, sizeof S);
    S.serve_store = node < 0;
    int rc = prepare(o, &S, &L);
    if (rc == 0 && node < 0) {
        rc = p3d_launcher_run(&L, S.nodes, S.nnodes);
    } else if (rc == 0 && node >= S.nnodes) {
        fprintf(stderr, "par3drun: __agent --node-rank %d: the placement has ranks on %d node%s\n", node, S.nnodes,
                S.nnodes == 1 ? "" : "s");
        rc = P3D_EXIT_BADINPUT;
    } else if (rc == 0) {
        rc = p3d_launcher_run(&L, &S.nodes[node], 1);
    }
    cleanup(&S, rc);
    return rc;
}
