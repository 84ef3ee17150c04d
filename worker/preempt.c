/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preempt.c — the worker's side of a preemption (docs/worker.md,
 * "Preemption"): par3drun sends every rank $P3D_PREEMPT_SIGNAL and
 * touches $P3D_PREEMPT when the scheduler warns that it takes the nodes
 * back. The handler only raises a flag; at the next step boundary every
 * rank agrees (one all-reduce of the flag per group: a rank the signal
 * reached a step later must not train on alone into a collective nobody
 * joins), writes the checkpoint of that step, reports it (ckpt= in its
 * progress line) and ends with 0.
 */
#include "worker.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t asked;

static void on_preempt(int sig)
{
    (void)sig;
    asked = 1;
}

/* "SIGUSR1", "USR1" or a number; 0 when it names nothing usable. */
static int signal_of(const char *s)
{
    const char *name = !strncmp(s, "SIG", 3) ? s + 3 : s;
    char *end;
    long v = strtol(s, &end, 10);
    if (end != s && !*end)
        return v == SIGUSR1 || v == SIGUSR2 ? (int)v : 0;
    if (!strcmp(name, "USR1"))
        return SIGUSR1;
    if (!strcmp(name, "USR2"))
        return SIGUSR2;
    return 0;
}

int p3dw_preempt_arm(void)
{
    const char *s = getenv("P3D_PREEMPT_SIGNAL");
    int sig = s && *s ? signal_of(s) : 0;
    if (!sig)
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_preempt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return sigaction(sig, &sa, NULL) == 0 ? sig : 0;
}

/* The signal came, or P3D_PREEMPT exists (a rank started after the
 * signal went out still sees the file). */
static int asked_here(void)
{
    if (asked)
        return 1;
    const char *f = getenv("P3D_PREEMPT");
    return f && *f && access(f, F_OK) == 0;
}

int p3dw_preempt_agreed(p3dw_run *r)
{
    double f = asked_here();
    /* the dense grid tp x pp x dp is the world: a sum over each of its
     * groups in turn is a sum over every rank */
    for (int d = 0; d < P3DW_NDIM; d++) {
        p3dw_group *g = &r->g[d];
        if ((g->size > 1 || r->solo_comm) && r->ops->allreduce_host_f64(g, &f, 1))
            return -1;
    }
    return f > 0;
}
