/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preempt.c — what a node does for a preemption (docs/launch.md,
 * "Preemption"), beside the controller's PREEMPTING state: which signal
 * it is (--preempt-signal), and RUN_DIR/preempt, the file a rank that
 * polls rather than handles signals looks for ($P3D_PREEMPT).
 */
#include "ranks.h"
#include "rundir.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int p3d_preempt_signal(const p3d_opts *o, int *sig, char **err)
{
    const char *s = o->preempt_signal ? o->preempt_signal : "USR1";
    *sig = 0;
    if (!strcmp(s, "none"))
        return 0;
    int k = 0;
    char *why = NULL;
    /* USR1, USR2: the signals every par3drun process takes through its
     * signalfd that mean nothing else to it (TERM, INT, HUP stop) */
    if (p3d_signal_parse(s, &k, &why) < 0 || (k != SIGUSR1 && k != SIGUSR2)) {
        free(why);
        return p3d_err(err, "--preempt-signal '%s': expected USR1, USR2 (with or without SIG, or the number) or none",
                       s);
    }
    *sig = k;
    return 0;
}

int p3d_preempts(const p3d_opts *o, int sig)
{
    int k = 0;
    if (sig == SIGTERM)
        return o->preempt_on_term;
    return sig > 0 && p3d_preempt_signal(o, &k, NULL) == 0 && k == sig;
}

void p3d_preempt_touch(const p3d_launch *L, int sig)
{
    char line[64];
    if (!L->run_dir)
        return;
    int n =
        snprintf(line, sizeof line, "SIG%s %lld\n", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", (long long)time(NULL));
    char *err = NULL;
    if (p3d_rundir_write(L->run_dir, "preempt", line, (size_t)n, &err) < 0)
        fprintf(stderr, "par3drun: cannot write %s/preempt for the ranks that poll it: %s\n", L->run_dir,
                err ? err : "?");
    free(err);
}

void p3d_preempt_clear(const p3d_launch *L)
{
    char path[4096];
    if (L->run_dir && snprintf(path, sizeof path, "%s/preempt", L->run_dir) < (int)sizeof path)
        unlink(path); /* a requeued job's run directory: not preempted yet */
}
