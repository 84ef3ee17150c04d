/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * result.c — RUN_DIR/result.json: the job's verdict (result.h). Nothing
 * here decides; it says what the controller decided.
 */
#include "result.h"
#include "ranks.h"
#include "controller.h"
#include "rundir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CAUSE_PREFIX "par3drun: root cause: "

void p3d_result_cause(const char *summary, int code, char *buf, size_t cap)
{
    const char *s = summary ? summary : "";
    if (!strncmp(s, CAUSE_PREFIX, strlen(CAUSE_PREFIX)))
        s += strlen(CAUSE_PREFIX);
    size_t n = strcspn(s, "\n");
    if (n > 0)
        snprintf(buf, cap, "%.*s", (int)n, s);
    else if (code == 0)
        snprintf(buf, cap, "every rank ended with exit code 0");
    else
        snprintf(buf, cap, "the job ended with exit code %d", code);
}

/* n as JSON: null when negative (none seen) */
static const char *opt_int(int n, char *buf, size_t cap)
{
    if (n < 0)
        snprintf(buf, cap, "null");
    else
        snprintf(buf, cap, "%d", n);
    return buf;
}

char *p3d_result_json(const p3d_result *r)
{
    char cause[1024], jcause[2200], jid[600], jfault[32], step[16], ckpt[16];
    p3d_result_cause(r->summary, r->exit_code, cause, sizeof cause);
    p3d_json_str(jcause, sizeof jcause, cause);
    if (r->job_id)
        p3d_json_str(jid, sizeof jid, r->job_id);
    else
        snprintf(jid, sizeof jid, "null");
    p3d_json_str(jfault, sizeof jfault, r->fault ? r->fault : "unknown");
    char *out = NULL, width[160] = "";
    if (r->min_dp > 0)
        snprintf(width, sizeof width,
                 ", \"width\": {\"dp\": %d, \"full_dp\": %d, \"min_dp\": %d, \"shrinks\": %d, \"grows\": %d}", r->dp,
                 r->full_dp, r->min_dp, r->shrinks, r->grows);
    if (asprintf(&out,
                 "{\"version\": 1, \"job_id\": %s, \"exit_code\": %d, \"ok\": %s, \"cause\": %s, \"fault\": %s, "
                 "\"restarts\": %d, \"replaced\": %d, \"step\": %s, \"ckpt\": %s, \"started\": %.3f, "
                 "\"ended\": %.3f, \"seconds\": %.3f, \"preempted\": %s%s}\n",
                 jid, r->exit_code, r->exit_code == 0 ? "true" : "false", jcause, jfault, r->restarts, r->replaced,
                 opt_int(r->step, step, sizeof step), opt_int(r->ckpt, ckpt, sizeof ckpt), r->started, r->ended,
                 r->ended > r->started ? r->ended - r->started : 0.0, r->preempted ? "true" : "false", width) < 0)
        out = NULL;
    return out;
}

int p3d_result_write(const char *dir, const p3d_result *r, char **err)
{
    char *json = p3d_result_json(r);
    int rc = -1;
    if (!json)
        p3d_err(err, "%s/result.json: out of memory", dir);
    else
        rc = p3d_rundir_write(dir, "result.json", json, strlen(json), err);
    free(json);
    return rc;
}

void p3d_result_end(const p3d_launch *L, const p3d_ctl *c, int code)
{
    if (!L->run_dir)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wall = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    p3d_result r = {.job_id = L->job ? L->job->job_id : NULL,
                    .exit_code = code,
                    .summary = p3d_ctl_summary(c),
                    .fault = p3d_ctl_fault(c),
                    .restarts = p3d_ctl_restarts(c),
                    .replaced = p3d_ctl_replaced(c),
                    .started = L->t0 > 0 ? wall - (p3d_now() - L->t0) : wall,
                    .ended = wall};
    p3d_ctl_progress_max(c, &r.step, &r.ckpt);
    p3d_ctl_width(c, &r.dp, &r.full_dp, &r.min_dp);
    r.shrinks = p3d_ctl_shrinks(c);
    r.grows = p3d_ctl_grows(c);
    if (r.step < 0)
        r.step = p3d_ctl_fault_step(c); /* no summary came: the failure's own */
    int pc;
    if (code == P3D_EXIT_PREEMPTED && p3d_ctl_preempted(c, &pc)) {
        r.preempted = 1;
        r.ckpt = pc; /* the one the requeued job resumes from */
    }
    char *err = NULL;
    if (p3d_result_write(L->run_dir, &r, &err) < 0)
        fprintf(stderr, "par3drun: cannot write the verdict: %s\n", err ? err : "?");
    free(err);
}
