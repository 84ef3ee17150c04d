/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * result.h — RUN_DIR/result.json (docs/events.md, "The job's verdict"):
 * the job's verdict, written once by the leader at the end, so that a
 * job script (and through it the scheduler) sees what par3drun decided
 * rather than what srun made of its tasks' exit statuses.
 */
#ifndef P3D_RESULT_H
#define P3D_RESULT_H

#include <stddef.h>

typedef struct p3d_result {
    const char *job_id; /* borrowed; NULL: null */
    int exit_code;
    const char *summary; /* the controller's root-cause lines, "" none */
    const char *fault;   /* "job", "node" or "unknown" */
    int restarts;
    int replaced;   /* nodes replaced by spares */
    int step, ckpt; /* the latest step and checkpoint seen, -1 none;
                             preempted: the checkpoint every node holds */
    int preempted;  /* ended by a preemption (P3D_EXIT_PREEMPTED) */
    /* an elastic job (min_dp > 0; else no "width" object): the width it
     * ended at, its full width and floor, the shrinks and grows */
    int dp, full_dp, min_dp, shrinks, grows;
    double started; /* wall clock, Unix seconds */
    double ended;
} p3d_result;

/* The cause in plain words, one line: the summary's first line without
 * its "par3drun: root cause: " prefix; without a summary, what the exit
 * code says. */
void p3d_result_cause(const char *summary, int code, char *buf, size_t cap);
/* The JSON object (one line and a newline); malloc'd, NULL when out of
 * memory. */
char *p3d_result_json(const p3d_result *r);
/* Writes dir/result.json atomically (temporary file, then rename): a
 * reader sees the whole verdict or none. 0, or -1 with *err (malloc'd). */
int p3d_result_write(const char *dir, const p3d_result *r, char **err);

/* The leader's end (supervise.c): the verdict of controller c, whose job
 * ended with code, into L's run directory; a failure is said on stderr
 * (the job's code stands). Nothing without a run directory. */
struct p3d_launch;
struct p3d_ctl;
void p3d_result_end(const struct p3d_launch *L, const struct p3d_ctl *c, int code);

#endif
