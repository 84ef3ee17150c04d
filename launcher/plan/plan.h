/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * plan.h — the public header of launcher/plan/: the placement pipeline
 * that --dry-run, `par3drun plan`, `par3drun cluster` and every launch
 * run (place.c: options -> cluster -> job -> policy -> checks, plus the
 * naive baseline), placing again without lost nodes (place_replace.c), at
 * another width (place_reshape.c), and
 * the placement's warnings as the launch prints them (warnings.c). It
 * starts nothing and owns no process: what it owns is the plan result.
 */
#ifndef P3D_PLAN_H
#define P3D_PLAN_H

#include "opts.h"
#include "p3d/elastic.h"
#include "p3d/p3d.h"

/* ---- place.c: the placement pipeline shared by `--dry-run` and launch ---- */

/* options -> cluster -> job -> policy -> checks, plus the naive baseline
 * that reports compare against. docs/dry-run.md describes what it reads. */
typedef struct p3d_plan_result {
    p3d_cluster *cluster;   /* owned */
    p3d_job job;            /* dp resolved */
    p3d_placement *pl;      /* the chosen policy's placement, owned */
    p3d_analysis *an;       /* its checks and link scores, owned */
    p3d_placement *base_pl; /* naive.lua on the same input; NULL when the
                                 policy is naive itself or the baseline failed */
    p3d_analysis *base_an;
    char *base_err; /* why there is no baseline (NULL when there is
                                 one or the policy is naive), owned */
    /* The other bundled policies (and --policy-candidates) on the same
     * input, when a model gives estimates: each one's step time and error
     * count. With --policy auto, pl/an are the placement that passes
     * every error-level check with the fewest warning-level ones, the
     * fastest estimate among those (a warning says the placement works
     * against the job, so it is not outweighed by a few percent of an
     * estimate), and alt[] holds the rest. */
    struct p3d_policy_alt {
        char name[64];
        double step_time; /* seconds, 0 without an estimate */
        int nerrors, nwarnings;
        char warned[96]; /* its warning-level check codes, comma-separated */
        char why[160];   /* what the faster one saves, when it is faster */
    } alt[8];
    int nalt;
    int auto_chosen; /* 1: --policy auto picked pl */
    /* The nodes the policy sees: those with role P3D_NODE_USE (plus, for a
     * replacement, the spares), borrowed from cluster; view_map[i] is view
     * node i's index in cluster. NULL when every node is used. */
    p3d_cluster *view;
    int *view_map;
    /* seconds per stage, for --verbose and bench/ */
    double t_cluster, t_policy, t_check, t_baseline;
} p3d_plan_result;

/* Where the nodes come from, in this order:
 *  1. --cluster FILE; inside a Slurm allocation (SLURM_JOB_NODELIST set)
 *     only the allocation's nodes, in the hostlist's order;
 *  2. otherwise one node from --topology (default "local").
 * --nproc-per-node N then gives every node N rank slots (CPU slots on a
 * node without GPUs, see p3d_cluster_set_slots), --slurm-topology is
 * applied, dp is resolved, the policy runs and is checked, and naive.lua
 * runs as the baseline. Returns 0 with *out filled (free with
 * p3d_plan_result_free), or -1 with a one-line message in *err: bad input,
 * exit 2. Error-level checks are NOT a failure here: the caller decides
 * (dry-run prints and exits 2, launch refuses). */
int p3d_place(const p3d_opts *o, p3d_plan_result *out, char **err);
/* The same from job resolution on, over a cluster built elsewhere (the
 * multi-node rendezvous gathers it from the agents); takes ownership of
 * cluster (freed with *out, also on failure). */
int p3d_place_cluster(const p3d_opts *o, p3d_cluster *cluster, p3d_plan_result *out, char **err);
void p3d_plan_result_free(p3d_plan_result *r);
/* --exclude and --spares on a loaded cluster, the same on every command:
 * the --exclude'd nodes become P3D_NODE_EXCLUDED (an unknown name is an
 * error naming the option and the node), then job->spares nodes become
 * P3D_NODE_SPARE, chosen by --policy's spares() hook or par3d.default_spares
 * (always the default under --policy auto). */
int p3d_place_roles(const p3d_opts *o, p3d_cluster *c, const p3d_job *job, char **err);
/* For the commands that place nothing (plan, cluster): keeps only c's
 * P3D_NODE_USE nodes, in order. */
int p3d_place_keep_usable(p3d_cluster *c, char **err);

/* One line (no newline) saying that another policy's estimate beats the
 * chosen one on this input and why, or "" when none does; into buf. A
 * faster policy whose placement has more warning-level checks than the
 * chosen one is named with them and not advised. */
void p3d_place_policy_note(const p3d_plan_result *r, char *buf, size_t cap);
/* The codes of a's warning-level checks, comma-separated, into buf. */
void p3d_place_warned(const p3d_analysis *a, char *buf, size_t cap);

/* The report input over a result (colour off). */
p3d_report_in p3d_plan_report_in(const p3d_plan_result *r);

/* ---- warnings.c ---------------------------------------------------------- */

/* Prints "par3drun: warning: CODE: message" for each warning-level check
 * of an (unless quiet); returns how many there are. */
struct p3d_analysis;
int p3d_launch_warnings(const struct p3d_analysis *an, int quiet);

/* ---- place_replace.c: placing again without lost nodes ------------------ */
/* A lost node (docs/launch.md, "When a node dies"): marks the cluster
 * nodes lost[0..nlost) P3D_NODE_LOST, then runs the job's policy again
 * with job.previous = the current placement and the spares available
 * (every rank not on a lost node keeps its GPU; bundled policies move each
 * lost node's ranks to the best spare) and checks the result. On success
 * r->pl / r->an hold the new placement (the spare that took ranks becomes a
 * used node); error-level checks are the caller's to refuse. -1 with *err
 * when no placement could be made (no spare left, the policy failed). */
int p3d_place_replace(const p3d_opts *o, p3d_plan_result *r, const int *lost, int nlost, int restart, char **err);
/* A lost node's replacement, the part every launcher shares (place_replace.c):
 * p3d_place_replace and its error-level checks; 1 with *msg when the lost
 * nodes ran no rank (marked lost, replace events written, nothing moves),
 * -1 with the reason in *msg, 0 with *was (malloc'd: rank r's node before).
 * p3d_replace_story then writes the replace events (events_fd, t0; -1 none)
 * and puts who took which ranks in *msg. */
int p3d_replace_place(const p3d_opts *o, p3d_plan_result *res, const int *lost, int nlost, int restart,
                      const char *reason, int events_fd, double t0, int **was, char **msg);
int p3d_replace_story(const p3d_plan_result *res, const int *was, const int *lost, int nlost, int restart,
                      const char *reason, int events_fd, double t0, char **msg);

/* ---- place_join.c: a node joining the running job ------------------------ */
/* par3drun --join (docs/multinode.md, "Adding a node to a running job"):
 * whether node n's kind fits the job on cluster c — the same GPUs (rank
 * slots) per node as the job's nodes running ranks, the same GPU model
 * when both are known, NVLink domains of the same sizes — 0, or -1 with
 * *why saying what differs (for the joiner's refusal). */
int p3d_join_fits(const p3d_cluster *c, const p3d_node *n, char **why);
/* Appends n (owned from then on, also on failure) to r->cluster as a
 * spare named name (copied) in rack (NULL: the job's only rack), sharing
 * a topology of the same hash: the next p3d_place_replace may put a lost
 * node's ranks on it. Its node index, or -1 with *err. */
int p3d_plan_add_spare(p3d_plan_result *r, p3d_node *n, const char *name, const char *rack, char **err);

/* ---- place_reshape.c: the running job at another width ------------------ */
/* docs/launch.md, "Elastic width". r->job stays at the full width, r->pl
 * holds the width the job runs at; error-level checks of a reshaped
 * placement refuse it. Each writes its events.jsonl record ("shrink",
 * "grow": docs/events.md) to events_fd (-1 none). */
/* The job's elastic figures (--min-dp and the batch); -1 with *err when
 * it is not elastic. */
int p3d_plan_elastic(const p3d_plan_result *r, p3d_elastic *e, char **err);
/* A loss no spare can take: whole replicas dropped (p3d_policy_shrink),
 * the lost nodes marked lost, the dropped replicas' surviving nodes made
 * spares. 0 with a story line in *msg; -1 with why in *msg (below
 * --min-dp: D, the replicas left and what was lost are named). */
int p3d_place_shrink(const p3d_opts *o, p3d_plan_result *r, const int *lost, int nlost, int restart, const char *reason,
                     int events_fd, double t0, char **msg);
/* How many more whole replicas the spares can hold now (0: none, or the
 * job runs at full width, or it is not elastic). */
int p3d_place_grow_room(const p3d_plan_result *r);
/* The grow (p3d_grow_plan): 0 with a story line in *msg, 1 nothing fits
 * (*msg says so), -1 with why. `when` (NULL: none) says what made it due
 * and ends the grow record's reason. */
int p3d_place_grow(const p3d_opts *o, p3d_plan_result *r, int restart, const char *when, int events_fd, double t0,
                   char **msg);
/* A lost node's replacement (p3d_replace_place) and, when no spare can
 * take its ranks and the job is elastic, the shrink: p3d_replace_place's
 * 1, 0 (*was set: then p3d_replace_story), -1; or 2 shrunk (*msg: its
 * story, *was NULL). */
int p3d_place_heal(const p3d_opts *o, p3d_plan_result *res, const int *lost, int nlost, int restart, const char *reason,
                   int events_fd, double t0, int **was, char **msg);

#endif
