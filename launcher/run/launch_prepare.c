/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch_prepare.c — the preparation every launch goes through, on one
 * host (launch_local.c) and on a node of a multi-node job (mnode.c):
 * checked options, the resolved program, the extra environment, the run
 * directory with the placement JSON, and the read-only p3d_launch the
 * agents get (prepare.h).
 */
#include "prepare.h"
#include "say.h"
#include "ranks.h"
#include "rundir.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

char *p3d_job_id_new(const p3d_opts *o)
{
    if (o->job_id)
        return strdup(o->job_id);
    const char *s = getenv("SLURM_JOB_ID");
    /* Slurm's ids are decimal; anything else would name the run directory
     * (par3drun-../x): a random id then, as outside Slurm */
    if (s && *s && strlen(s) <= 20 && strspn(s, "0123456789") == strlen(s))
        return strdup(s);
    char *id = malloc(13);
    if (id && p3d_random_hex(id, 6) < 0) {
        free(id); /* no randomness: said by the caller as out of resources */
        id = NULL;
    }
    return id;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* the bundled worker: see p3d_prep_nccl_port (prepare.h) */
static int is_worker(const p3d_prep *P, int wrapped)
{
    int worker = !strcmp(base_name(P->program), "p3d-worker");
    for (int i = 1; wrapped && !worker && i < P->o->argc; i++)
        worker = !strcmp(base_name(P->o->argv[i]), "p3d-worker");
    return worker;
}

int p3d_prep_is_python(const p3d_prep *P)
{
    int py = P->o->python_owned != NULL || !strncmp(base_name(P->program), "python", 6);
    for (int i = 1; !py && i < P->o->argc; i++)
        py = !strncmp(base_name(P->o->argv[i]), "python", 6);
    return py && !is_worker(P, 1);
}

int p3d_prep_nccl_port(const p3d_prep *P, int wrapped, int master_port)
{
    int port = 0;
    if (!is_worker(P, wrapped))
        return 0;
    for (int k = 0; k < 8 && (!port || port == master_port); k++)
        port = p3d_free_port();
    return port == master_port ? 0 : port;
}

int p3d_prep_begin(const p3d_opts *o, const char *rdzv, p3d_prep *P, char **err)
{
    int rc = P3D_EXIT_BADINPUT; /* every refusal here is the input's */
    P->o = o;
    P->rdzv = rdzv;
    if (!rdzv && o->emulate && !o->cluster) {
        p3d_err(err, "--emulate runs the nodes of a cluster file on this host: give --cluster FILE");
        goto out;
    }
    if (o->argc < 1) {
        p3d_err(err, "no program to launch: par3drun [options] -- PROGRAM [ARGS...]");
        goto out;
    }
    if (rdzv && o->emulate) {
        p3d_err(err,
                "--emulate runs a cluster file's nodes on one host; it does not mix with a multi-node "
                "rendezvous (--rdzv %s)",
                rdzv);
        goto out;
    }
    if (rdzv && o->cluster)
        p3d_warn("--cluster is not used in a multi-node job: nodes come from the rendezvous (racks: "
                 "--slurm-topology)");
    /* 127 stays for a program that disappears between this check and the exec */
    P->program = p3d_resolve_program(o->argv[0], err);
    if (!P->program)
        goto out;
    for (size_t i = 0; i < o->nenv_files; i++)
        if (p3d_env_file_read(o->env_files[i], &P->extra, err) < 0)
            goto out;
    for (size_t i = 0; i < o->nenv; i++)
        if (p3d_envv_put(&P->extra, o->env[i]) < 0) {
            p3d_err(err, "--env '%s': expected KEY=VALUE", o->env[i]);
            goto out;
        }
    rc = 0;
out:
    return rc;
}

int p3d_prep_rundir(p3d_prep *P, const char *job_id, int node, int world, const char *json, size_t len, char **err)
{
    const p3d_opts *o = P->o;
    /* a node of a multi-node job that cannot write its run directory ends
     * 1, as one that loses the rendezvous; on one host it is refused (2) */
    int io = P->rdzv ? P3D_EXIT_FAIL : P3D_EXIT_BADINPUT;
    int rc = P3D_EXIT_BADINPUT, hang_sig, preempt_sig;
    if (p3d_check_output_ranks(o, world, err) < 0 ||
        (o->hang_signal && p3d_signal_parse(o->hang_signal, &hang_sig, err) < 0) ||
        p3d_preempt_signal(o, &preempt_sig, err) < 0)
        goto out;
    if (o->run_dir) {
        P->run_dir = strdup(o->run_dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        int n = node < 0 ? asprintf(&P->run_dir, "%s/par3drun-%s", tmp && *tmp ? tmp : "/tmp", job_id)
                         : asprintf(&P->run_dir, "%s/par3drun-%s.%d", tmp && *tmp ? tmp : "/tmp", job_id, node);
        if (n < 0)
            P->run_dir = NULL;
        P->own_run_dir = !o->keep_run_dir;
    }
    if (!P->run_dir) {
        p3d_err(err, "out of memory");
        goto out;
    }
    if (p3d_rundir_make(P->run_dir, err) < 0) { /* rundir.h: private or refused */
        rc = io;
        goto out;
    }
    if (o->log_dir && p3d_check_log_dir(o->log_dir, err) < 0)
        goto out;
    if (asprintf(&P->placement_path, "%s/placement.json", P->run_dir) < 0) {
        P->placement_path = NULL;
        p3d_err(err, "out of memory");
        goto out;
    }
    /* rundir.c: O_EXCL under a random name, renamed inside the checked directory */
    if (p3d_rundir_write(P->run_dir, "placement.json", json, len, err) < 0) {
        rc = io;
        goto out;
    }
    rc = 0;
out:
    return rc;
}

int p3d_prep_replace_json(p3d_prep *P, int gen, const char *json, size_t len, char **err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/placement.%d.json", P->run_dir, gen);
    if (gen + 1 > P->nkept)
        P->nkept = gen + 1;
    unlink(path);
    if (link(P->placement_path, path) < 0)
        fprintf(stderr, "par3drun: warning: cannot keep the previous placement as %s: %s\n", path, strerror(errno));
    return p3d_rundir_write(P->run_dir, "placement.json", json, len, err);
}

void p3d_prep_fill(p3d_prep *P, p3d_launch *L, int events)
{
    const p3d_opts *o = P->o;
    L->o = o;
    L->run_dir = P->run_dir;
    L->run_dir_own = P->own_run_dir;
    L->placement_path = P->placement_path;
    L->extra_env = P->extra.v;
    L->nextra = P->extra.n;
    L->tag = o->tag_output < 0 ? L->job->pl->world > 1 : o->tag_output;
    L->emulate = o->emulate;
    L->program = P->program;
    L->events_fd = events ? p3d_events_open(P->run_dir) : -1;
    L->t0 = p3d_now();
    P->started = 1;
}

void p3d_prep_finish(p3d_prep *P, const p3d_launch *L, int code, int world)
{
    /* after the job: L is read-only to the end (launch.h) */
    if (L->events_fd >= 0)
        close(L->events_fd);
    p3d_rundir_finish(P->run_dir, P->own_run_dir, P->started ? code : 0, world, P->nkept);
    p3d_envv_free(&P->extra);
    free(P->program);
    free(P->run_dir);
    free(P->placement_path);
    memset(P, 0, sizeof *P);
}
