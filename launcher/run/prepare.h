/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prepare.h — run/ internal: the launch preparation the single-node path
 * (launch_local.c: one node, --emulate, __agent) and the multi-node path
 * (mnode.c) share (launch_prepare.c). Between its two steps each path
 * finds its placement its own way (p3d_place here, the rendezvous there).
 * Only files of launcher/run/ include this.
 */
#ifndef P3D_PREPARE_H
#define P3D_PREPARE_H

#include "launch.h"
#include "ranks.h"

/* What the preparation owns; zeroed before p3d_prep_begin, freed by
 * p3d_prep_finish. */
typedef struct p3d_prep {
    const p3d_opts *o;
    const char *rdzv; /* the rendezvous backend's name; NULL: one host */
    char *program;    /* resolved o->argv[0] */
    p3d_envv extra;   /* --env-file then --env */
    char *run_dir, *placement_path;
    int own_run_dir; /* made under $TMPDIR: p3d_rundir_finish decides */
    int nkept;       /* placement.<R>.json files kept */
    int started;     /* p3d_prep_fill ran: the job was handed over */
} p3d_prep;

/* Before anything is placed: the refusals of the path (rdzv set: --emulate
 * does not mix with a rendezvous, --cluster is unused; unset: --emulate
 * needs --cluster), a program, its resolution (a typo is one line and exit
 * 2 rather than a failure per rank), the --env files and --env values.
 * 0, or an exit code with *err. */
int p3d_prep_begin(const p3d_opts *o, const char *rdzv, p3d_prep *P, char **err);

/* Once the placement is known (world ranks, job id, its JSON bytes): the
 * options checked against it (--output-ranks, --hang-signal, --log-dir)
 * and the run directory with placement.json in it ($TMPDIR/par3drun-JOB,
 * JOB.NODE on a node of a multi-node job: node >= 0). 0, or an exit code
 * with *err. */
int p3d_prep_rundir(p3d_prep *P, const char *job_id, int node, int world, const char *json, size_t len, char **err);

/* A replacement (restart gen): the placement the job ran with stays as
 * placement.<gen>.json, placement.json is replaced in one rename.
 * 0, or -1 with *err. */
int p3d_prep_replace_json(p3d_prep *P, int gen, const char *json, size_t len, char **err);

/* Fills what every agent reads (L->job set by the caller, with its
 * placement): options, run directory, program, environment, output tags,
 * events.jsonl (opened when events), the job's clock. */
void p3d_prep_fill(p3d_prep *P, p3d_launch *L, int events);

/* events.jsonl closed, the run directory removed when the rule says so
 * (a job refused before the start leaves nothing behind), P freed. */
void p3d_prep_finish(p3d_prep *P, const p3d_launch *L, int code, int world);

/* The job's id: --job-id, else $SLURM_JOB_ID, else 12 random hex digits.
 * malloc'd, NULL when out of memory. */
char *p3d_job_id_new(const p3d_opts *o);
/* The NCCL_COMM_ID port of a job run by the bundled worker (p3d-worker;
 * wrapped: also a wrapper that execs it, p3d-worker among the arguments:
 * timeout, nsys, a test script): a free port other than master_port; 0
 * for any other program, or when none was found. */
int p3d_prep_nccl_port(const p3d_prep *P, int wrapped, int master_port);
/* 1 when the job's program is Python, so a torch program may be, and the
 * agent store is worth serving (docs/torchrun.md, "The agent store"): the
 * script, -m and --run-path forms, or a program named python* run directly
 * or through a wrapper (timeout, nsys: python* among the arguments). A
 * program whose rank 0 listens on MASTER_PORT itself, as the bundled
 * worker's does, is not Python and keeps the port to itself. */
int p3d_prep_is_python(const p3d_prep *P);

#endif
