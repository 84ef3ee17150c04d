/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * agent.c — one node's agent: starts the node's ranks, watches them, tells
 * the job controller (wire.h) and does what it says.
 *
 * It runs on the event loop (loop.h): signals through its signalfd, the
 * ranks' output and the upstream connection as fd watchers, the ranks'
 * exits through the loop's child reaping, the grace period as the
 * stopper's timer (stopper.c), heartbeats, fencing and --hang-timeout as
 * deadlines its prepare hook names; the terminal is written without
 * waiting (output.c). Nothing blocks, so a stop order is always seen.
 * The agent is a table (p3d_agent_cell, agent.h; docs/agent.md): its
 * states and the events that move them, every change through agent_go.
 */
#include "controller.h"
#include "ranks.h"
#include "agent.h"
#include "termsafe.h"
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct agent agent;
typedef void (*agent_handler)(agent *a);

struct agent {
    const p3d_launch *L;
    int node, upstream, sfd;
    int nlocal;
    int *ranks; /* global ranks in local-rank order */
    pid_t *pid; /* 0 = not running */
    p3d_rank_out *out;
    p3d_binder *binder;
    p3d_outsink sink;
    p3d_tlogs tlogs;     /* torchrun's --log-dir layout (-r/-t) */
    p3d_hangwatch *hang; /* --hang-timeout, NULL when off */
    p3d_progwatch *prog; /* the ranks' progress lines (progress.c) */
    unsigned prog_timer; /* the next read of them */
    pid_t self;
    int gen;     /* restart count of the running group */
    int running; /* live workers */
    p3d_loop *loop;
    p3d_stopper stop; /* the stop signal sent, SIGKILL after the grace */
    int nwatched;     /* output fds watched, in watched[] */
    int *watched;
    /* the machine: its state, the outside event being handled (the cause
     * of every change it makes), the moves of the cell that runs */
    p3d_agent_state state;
    p3d_agent_event cause;
    unsigned cell_next;
    struct {               /* what the event brings, while its cell runs */
        const p3d_amsg *m; /* BEAT, RESTART, STOP, FORWARD */
        int sig;           /* SIGNAL, USR, PREEMPT */
        int i, status;     /* RANK_FAIL: the local rank, its wait status */
    } ev;
    /* the generation's first failure (HOLDING, and after it until the
     * next generation): no DONE is sent, its code is the agent's */
    struct {
        int failed;
        int code;
        unsigned hold; /* the other ranks run on until this timer
                               (--fault-window) or the controller's order,
                               so that their own failures are reported too
                               (the verdict counts ranks) */
    } fail;
    int restart_gen;  /* RESTARTING: the generation started next */
    int exit_code;    /* decided result */
    int final;        /* ENDING was reached: the job's end decided */
    int swept;        /* the generation's leftovers were swept */
    int preempted;    /* the ranks were sent the preempt signal */
    double next_beat; /* --node-timeout: the next heartbeat (B) */
    double heard_up;  /* when the upstream last sent anything */
    double up_to;     /* the upstream's timeout (its B says); 0 until
                               it beats: an upstream that never beats is
                               never judged */
};

static void agent_dispatch(agent *a, p3d_agent_event ev);

static void say(agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(agent *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = p3d_vfmt(fmt, ap);
    va_end(ap);
    /* the agent's lines quote node names and notes from outside: escaped
     * (newlines kept) on their way into the sink, as hub_say does */
    char *e = m && *m ? p3d_term_dup(m, strlen(m), strlen(m), P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB) : NULL;
    if (e)
        p3d_sink_write(&a->sink, 1, e, strlen(e));
    free(e);
    free(m);
}

static void agent_signal_all(agent *a, int sig)
{
    for (int i = 0; i < a->nlocal; i++)
        if (a->pid[i] > 0)
            killpg(a->pid[i], sig);
}

static void agent_kill_all(void *ctx)
{
    agent_signal_all(ctx, SIGKILL);
}

/* Starts the stop sequence: sig now, SIGKILL after the grace. */
static void agent_stop(agent *a, int sig)
{
    p3d_loop_cancel(a->loop, a->fail.hold); /* any stop ends the hold */
    a->fail.hold = 0;
    if (sig == SIGKILL) {
        p3d_stopper_begin(&a->stop, 0);
        return;
    }
    if (a->stop.stopping)
        return;
    p3d_stopper_begin(&a->stop, a->L->o->grace);
    agent_signal_all(a, sig);
}

/* The per-rank output state of a new generation; log files are kept. */
static int agent_outputs(agent *a, char **err)
{
    const p3d_launch *L = a->L;
    for (int i = 0; i < a->nlocal; i++) {
        p3d_rank_out *ro = &a->out[i];
        int log_fd = ro->log_fd;
        ro->log_fd = -1;
        p3d_rank_out_free(ro);
        p3d_rank_out_init(ro, a->ranks[i]);
        ro->log_fd = log_fd;
        if (L->tag)
            p3d_rank_tag(L->job->pl, a->ranks[i], ro->tag, sizeof ro->tag);
    }
    if (L->o->output_ranks) {
        unsigned char *sel = malloc((size_t)L->job->pl->world);
        if (!sel || p3d_rank_list_parse(L->o->output_ranks, L->job->pl->world, sel, err) < 0) {
            free(sel);
            return -1;
        }
        for (int i = 0; i < a->nlocal; i++)
            a->out[i].shown = sel[a->ranks[i]];
        free(sel);
    }
    int *local = malloc(sizeof *local * (size_t)(a->nlocal + 1));
    if (!local)
        return p3d_err(err, "out of memory");
    for (int i = 0; i < a->nlocal; i++) {
        int lr = local[i] = L->job->pl->ranks[a->ranks[i]].local_rank;
        /* --local-ranks-filter: by local rank, as torchrun */
        if (L->o->local_hidden && lr >= 0 && lr < P3D_MAX_LOCAL && L->o->local_hidden[lr])
            a->out[i].shown = 0;
    }
    int rc = L->o->local_std ? p3d_tlogs_attempt(&a->tlogs, L, a->gen, a->out, local, a->nlocal, err) : 0;
    free(local);
    if (!L->o->log_dir || L->o->local_std)
        return rc;
    int dfd = -1; /* rundir.c: the checked --log-dir; no symlink, FIFO or link is written through */
    for (int i = 0; i < a->nlocal; i++) {
        if (a->out[i].log_fd >= 0) {
            char mark[64];
            int n = snprintf(mark, sizeof mark, "--- par3drun: restart %d ---\n", a->gen);
            if (write(a->out[i].log_fd, mark, (size_t)n) < 0)
                (void)0;
            continue;
        }
        char name[32];
        snprintf(name, sizeof name, "rank-%d.log", a->ranks[i]);
        if ((dfd < 0 && (dfd = p3d_logdir_open(L->o->log_dir, err)) < 0) ||
            (a->out[i].log_fd = p3d_logfile_open(dfd, L->o->log_dir, name, err)) < 0) {
            if (dfd >= 0)
                close(dfd);
            return -1;
        }
    }
    if (dfd >= 0)
        close(dfd);
    return 0;
}

/* Local rank i's TORCHELASTIC_ERROR_FILE (malloc'd, NULL without memory):
 * in torchrun's layout (-r/-t) beside its logs, attempt_N/LOCAL/error.json
 * as torchrun's; else RUN_DIR/error-rank-R.json (rank_env.c sets that). */
static char *agent_errfile(const agent *a, int i)
{
    char *p = NULL;
    if (!a->L->o->local_std || !a->tlogs.path)
        return p3d_rootcause_path(a->L->run_dir, a->ranks[i]);
    if (asprintf(&p, "%s/attempt_%d/%d/error.json", a->tlogs.path, a->gen,
                 a->L->job->pl->ranks[a->ranks[i]].local_rank) < 0)
        p = NULL;
    return p;
}

static int agent_spawn_all(agent *a, char **err)
{
    const p3d_launch *L = a->L;
    p3d_stopper_clear(&a->stop);
    p3d_loop_cancel(a->loop, a->fail.hold);
    a->fail.hold = 0;
    a->fail.failed = 0;
    a->fail.code = 0;
    a->swept = 0;
    if (agent_outputs(a, err) < 0)
        return -1;
    p3d_hang_generation(a->hang);
    p3d_progress_generation(a->prog, a->gen);
    for (int i = 0; i < a->nlocal; i++) {
        p3d_envv env;
        if (p3d_rank_env(L, environ, a->ranks[i], a->gen, &env, err) < 0)
            return -1;
        /* one OpenMP thread per CPU the rank may use, not one per CPU of
         * the node on each of its ranks (torchrun sets 1) */
        if (!p3d_envv_get(&env, "OMP_NUM_THREADS") &&
            p3d_envv_set(&env, "OMP_NUM_THREADS", "%d", p3d_bind_ncpus(a->binder, i, a->nlocal)) < 0) {
            p3d_envv_free(&env);
            return p3d_err(err, "out of memory");
        }
        /* an error file of an earlier generation is not this one's cause */
        char *ef = agent_errfile(a, i);
        if (ef)
            unlink(ef);
        if (ef && L->o->local_std && p3d_envv_set(&env, "TORCHELASTIC_ERROR_FILE", "%s", ef) < 0) {
            free(ef);
            p3d_envv_free(&env);
            return p3d_err(err, "out of memory");
        }
        free(ef);
        p3d_spawn_req req = {
            .path = L->program,
            .argv = L->o->argv,
            .envp = env.v,
            .binder = a->binder,
            .local = i,
            .parent = a->self,
        };
        int fds[2];
        int s = p3d_spawn(&req, &a->pid[i], fds, err);
        p3d_envv_free(&env);
        if (s < 0)
            return -1;
        a->out[i].s[0].fd = fds[0];
        a->out[i].s[1].fd = fds[1];
        a->running++;
    }
    p3d_amsg up = {.type = P3D_AM_UP, .gen = a->gen, .nranks = a->nlocal};
    p3d_amsg_send(a->upstream, &up);
    return 0;
}

/* What torch's @record wrote for local rank i (errfile.c): *rc filled
 * (1), or nothing (0); with the summary's lines in *lines (a file that is
 * not torch's says so there). rc is freed by the caller when 1. */
static int agent_exception(const agent *a, int i, p3d_rootcause *rc, char **lines)
{
    char *err = NULL, *path = agent_errfile(a, i);
    int got = path ? p3d_rootcause_read(path, rc, &err) : 0;
    *lines = NULL;
    if (got > 0)
        *lines = p3d_rootcause_text(rc, "  ");
    else if (got < 0 && asprintf(lines, "  (its TORCHELASTIC_ERROR_FILE is unreadable: %s)\n", p3d_tesc(err)) < 0)
        *lines = NULL;
    free(err);
    free(path);
    return got > 0;
}

/* The root-cause text of local rank i: who, where, how, last stderr lines. */
static char *agent_summary(agent *a, int i, int status, const char *exc)
{
    const p3d_launch *L = a->L;
    int r = a->ranks[i];
    const p3d_rank *k = &L->job->pl->ranks[r];
    const p3d_cnode *cn = &L->job->cluster->nodes[a->node];
    const p3d_node *topo = cn->topo;
    char how[160];
    if (p3d_hang_is_hung(a->hang, i))
        snprintf(how, sizeof how, "was hung (no heartbeat or output for %g s): ended by signal %d (%s), exit code %d",
                 p3d_hang_timeout(a->hang), p3d_hang_signal(a->hang),
                 sigabbrev_np(p3d_hang_signal(a->hang)) ? sigabbrev_np(p3d_hang_signal(a->hang)) : "?",
                 p3d_code_of(status));
    else if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "was killed by signal %d (%s), exit code %d", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?", p3d_code_of(status));
    else
        snprintf(how, sizeof how, "exited with code %d", p3d_code_of(status));
    char gpu[80] = "no GPU";
    if (topo && k->gpu >= 0 && k->gpu < topo->ngpus && p3d_is_cpu_slot(topo, k->gpu))
        snprintf(gpu, sizeof gpu, "CPU slot %d (no GPU)", k->gpu);
    else if (topo && k->gpu >= 0 && k->gpu < topo->ngpus)
        snprintf(gpu, sizeof gpu, "GPU %d%s%s%s", k->gpu, topo->gpus[k->gpu].pci[0] ? " (" : "", topo->gpus[k->gpu].pci,
                 topo->gpus[k->gpu].pci[0] ? ")" : "");
    char *tail = p3d_rank_out_tail(&a->out[i], "    ");
    char *s = NULL;
    /* printed only for the failure that ends the job, which happens in
     * generation gen: gen restarts came before it */
    char after[48] = "";
    if (a->gen > 0)
        snprintf(after, sizeof after, ", after %d restart%s", a->gen, a->gen == 1 ? "" : "s");
    if (asprintf(&s,
                 "par3drun: root cause: rank %d (tp %d, pp %d, dp %d, cp %d, ep %d) on node %s, %s, "
                 "pid %d, %s%s\n%s%s%s",
                 r, k->coord[P3D_DIM_TP], k->coord[P3D_DIM_PP], k->coord[P3D_DIM_DP], k->coord[P3D_DIM_CP],
                 k->coord[P3D_DIM_EP], cn->name, gpu, (int)a->pid[i], how, after, exc ? exc : "",
                 tail && tail[0] ? "  last lines of its stderr:\n" : "  (nothing on its stderr)\n",
                 tail ? tail : "") < 0)
        s = NULL;
    free(tail);
    return s;
}

/* Local rank i failed with status: the F packet, with what the controller
 * classifies it by (the step of its last progress line, its error file's
 * exception and innermost frame), sent upstream. */
static void agent_report_fail(agent *a, int i, int status)
{
    p3d_rootcause rc;
    char *exc = NULL;
    int have = agent_exception(a, i, &rc, &exc);
    char *sum = agent_summary(a, i, status, exc);
    p3d_amsg f = {.type = P3D_AM_FAIL,
                  .gen = a->gen,
                  .code = p3d_code_of(status),
                  .rank = a->ranks[i],
                  .sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                  .text = sum ? sum : "",
                  .step = p3d_progress_step(a->prog, i),
                  .errts = -1};
    if (have) {
        f.err = rc.message;
        f.where = rc.file;
        f.errline = rc.line;
        f.errts = rc.timestamp >= 0 && rc.timestamp <= INT_MAX ? (int)rc.timestamp : -1;
    }
    p3d_amsg_send(a->upstream, &f);
    if (have)
        p3d_rootcause_free(&rc);
    free(exc);
    free(sum);
}

/* ---- the one transition ---------------------------------------------------- */

/* Every change of state: checked against the running cell's moves (a
 * move the table does not list is a bug, said), said with --verbose. */
static void agent_go(agent *a, p3d_agent_state to)
{
    if (to == a->state)
        return;
    const char *name = a->L->job->cluster->nodes[a->node].name;
    if (!(a->cell_next & P3D_NODE_TO(to)))
        say(a, "par3drun: node %s: agent: %s -> %s (%s) is not in the table\n", name, p3d_agent_state_name(a->state),
            p3d_agent_state_name(to), p3d_agent_event_name(a->cause));
    if (a->L->o->verbose)
        say(a, "par3drun: node %s: agent: state %s -> %s (%s)\n", name, p3d_agent_state_name(a->state),
            p3d_agent_state_name(to), p3d_agent_event_name(a->cause));
    if (to == P3D_AGENT_ENDING)
        a->final = 1;
    a->state = to;
}

/* ---- the handlers ------------------------------------------------------------ */

static void agent_hold_over(p3d_loop *l, void *ctx)
{
    agent *a = ctx;
    (void)l;
    a->fail.hold = 0;
    agent_dispatch(a, P3D_AGENT_EV_HOLD_OVER);
}

/* A rank's failure, reported; the generation's first starts the hold:
 * the node's other ranks run on for --fault-window (and the slack the
 * controller's order needs to arrive), so that a program's bug fails them
 * too, each reported, and the verdict compares ranks and replicas, not
 * only nodes. The controller's restart or stop ends the hold earlier; 0
 * stops them at once. Returns 1 when the hold runs. */
static int agent_note_fail(agent *a)
{
    int first = !a->fail.failed;
    if (first) {
        a->fail.failed = 1;
        a->fail.code = p3d_code_of(a->ev.status);
    }
    agent_report_fail(a, a->ev.i, a->ev.status);
    if (!first)
        return 1;
    /* the leader's window (every node holds its ranks as long), or this
     * node's own on one node */
    const p3d_jobstate *j = a->L->job;
    double w = j && j->fault_leader ? j->fault_window : a->L->o->fault_window;
    if (w <= 0 || a->running == 0 ||
        !(a->fail.hold = p3d_loop_at(a->loop, p3d_now() + w + P3D_CTL_SLACK, agent_hold_over, a))) {
        agent_stop(a, SIGTERM);
        return 0;
    }
    return 1;
}

/* RANK_FAIL while the ranks run: the generation's first failure. */
static void on_first_fail(agent *a)
{
    agent_go(a, agent_note_fail(a) ? P3D_AGENT_HOLDING : P3D_AGENT_STOPPING);
}

/* RANK_FAIL during the hold (one a rank), or once the job's end was
 * decided without stopping the ranks (a stop order without a signal). */
static void on_fail_report(agent *a)
{
    if (!a->stop.stopping)
        agent_note_fail(a);
}

/* HOLD_OVER: the controller said nothing: the other ranks end as they
 * would have at once before (the controller decides on what it got). */
static void on_hold_over(agent *a)
{
    if (a->running > 0) {
        agent_stop(a, SIGTERM);
        agent_go(a, P3D_AGENT_STOPPING);
    }
}

/* TICK: --hang-timeout: ranks whose time is up get the hang signal (their
 * failure follows when they are reaped); stopping anyway, the grace rules. */
static void on_tick(agent *a)
{
    int i;
    if (a->stop.stopping)
        return;
    while ((i = p3d_hang_check(a->hang, a->pid, p3d_now())) >= 0) {
        int sig = p3d_hang_signal(a->hang);
        say(a, "par3drun: rank %d on node %s is hung (no heartbeat or output for %g s): sending SIG%s\n", a->ranks[i],
            a->L->job->cluster->nodes[a->node].name, p3d_hang_timeout(a->hang),
            sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    }
}

/* The controller is gone (UP_LOST, FENCE): nobody can restart or report;
 * end now. */
static void on_orphaned(agent *a)
{
    if (a->upstream >= 0) {
        p3d_loop_unwatch(a->loop, a->upstream);
        close(a->upstream);
    }
    a->upstream = -1;
    if (!a->exit_code)
        a->exit_code = a->fail.failed ? a->fail.code : 128 + SIGKILL;
    agent_stop(a, SIGKILL);
    agent_go(a, P3D_AGENT_ENDING);
}

/* FENCE: an upstream (the hub, or the node's relay) silent for its
 * --node-timeout is frozen or cut off, and the leader replaces this node
 * once that time is past. Our ranks end now, by force: no rank may run
 * beside its replacement. */
static void on_fence(agent *a)
{
    say(a,
        "par3drun: node %s: nothing from its supervisor for %.1f s (--node-timeout %g): ending its ranks now "
        "(fenced: the leader replaces this node)\n",
        a->L->job->cluster->nodes[a->node].name, p3d_now() - a->heard_up, a->up_to);
    if (!a->exit_code)
        a->exit_code = P3D_EXIT_LOST;
    on_orphaned(a);
}

static void on_beat(agent *a)
{
    a->up_to = a->ev.m->ms / 1000.0;
}

/* RESTART: the ranks stop; the next generation starts once they are gone
 * (STARTING). */
static void on_restart(agent *a)
{
    a->restart_gen = a->ev.m->gen;
    agent_stop(a, SIGTERM);
    agent_go(a, P3D_AGENT_STARTING);
}

/* STOP: the job is over: the ranks stop (with the order's signal), the
 * agent exits once they are gone. */
static void on_stop(agent *a)
{
    if (!a->exit_code)
        a->exit_code = a->fail.failed ? a->fail.code : a->ev.m->code;
    if (a->ev.m->sig)
        agent_stop(a, a->ev.m->sig);
    agent_go(a, P3D_AGENT_ENDING);
}

static void on_forward(agent *a)
{
    int sig = a->ev.m->sig;
    if (p3d_preempts(a->L->o, sig)) {
        p3d_preempt_touch(a->L, sig); /* before the signal: a rank that looks finds it */
        a->preempted = 1;
    }
    agent_signal_all(a, sig);
}

/* SIGNAL (INT TERM HUP QUIT, and the parent-death SIGTERM): the job stops
 * everywhere, for the reason the controller names; asked twice, no more
 * grace. */
static void on_signal(agent *a)
{
    int sig = a->ev.sig;
    p3d_amsg s = {.type = P3D_AM_SIGNAL, .sig = sig};
    p3d_amsg_send(a->upstream, &s);
    if (!a->exit_code)
        a->exit_code = a->fail.failed ? a->fail.code : 128 + sig;
    if (a->stop.stopping && sig != SIGQUIT)
        agent_stop(a, SIGKILL);
    else
        agent_stop(a, sig);
    agent_go(a, P3D_AGENT_ENDING);
}

static void on_usr(agent *a)
{
    agent_signal_all(a, a->ev.sig);
}

/* PREEMPT: the scheduler's warning reached this node: the controller
 * tells every node's ranks (once, whoever heard it first). */
static void on_preempt(agent *a)
{
    p3d_amsg s = {.type = P3D_AM_SIGNAL, .sig = a->ev.sig};
    p3d_amsg_send(a->upstream, &s);
}

/* --progress-interval: the ranks' progress files read, the node's summary
 * sent upstream when a step was made (the controller judges slow nodes);
 * a timer of the loop, never more often. */
static void agent_progress(p3d_loop *l, void *ctx)
{
    agent *a = ctx;
    char *warn = NULL;
    p3d_amsg m;
    a->prog_timer = 0;
    if (a->running > 0 && !a->stop.stopping && p3d_progress_sample(a->prog, &m, &warn) > 0)
        p3d_amsg_send(a->upstream, &m);
    if (warn)
        p3d_sink_write(&a->sink, 1, warn, strlen(warn));
    free(warn);
    a->prog_timer = p3d_loop_at(l, p3d_now() + a->L->o->progress_interval, agent_progress, a);
}

/* The node's ranks in local-rank order; output and binding prepared. */
static int agent_setup(agent *a, char **err)
{
    const p3d_launch *L = a->L;
    char *note = NULL;
    for (int r = 0; r < L->job->pl->world; r++)
        if (L->job->pl->ranks[r].node == a->node)
            a->nlocal++;
    a->ranks = calloc((size_t)a->nlocal + 1, sizeof *a->ranks);
    a->pid = calloc((size_t)a->nlocal + 1, sizeof *a->pid);
    a->out = calloc((size_t)a->nlocal + 1, sizeof *a->out);
    if (!a->ranks || !a->pid || !a->out)
        return p3d_err(err, "out of memory");
    for (int r = 0, j = 0; r < L->job->pl->world; r++)
        if (L->job->pl->ranks[r].node == a->node)
            a->ranks[j++] = r;
    for (int i = 0; i < a->nlocal; i++)
        for (int j = i + 1; j < a->nlocal; j++)
            if (L->job->pl->ranks[a->ranks[j]].local_rank < L->job->pl->ranks[a->ranks[i]].local_rank) {
                int t = a->ranks[i];
                a->ranks[i] = a->ranks[j];
                a->ranks[j] = t;
            }
    for (int i = 0; i < a->nlocal; i++)
        p3d_rank_out_init(&a->out[i], a->ranks[i]);
    if (p3d_bind_prepare(L, a->node, a->ranks, a->nlocal, &a->binder, &note, err) < 0 ||
        p3d_hang_new(L, a->ranks, a->nlocal, &a->hang, err) < 0 ||
        (a->nlocal > 0 && p3d_progress_new(L, a->ranks, a->nlocal, &a->prog, err) < 0))
        return -1;
    p3d_preempt_clear(L);
    const char *name = L->job->cluster->nodes[a->node].name;
    if (L->o->report_bindings) {
        char *rep = p3d_bind_report(a->binder, L, a->node, a->ranks, a->nlocal);
        if (note)
            say(a, "par3drun: %s: %s\n", name, note);
        if (rep)
            say(a, "%s", rep);
        free(rep);
    } else if (note && L->o->verbose) {
        say(a, "par3drun: %s: %s\n", name, note);
    }
    free(note);
    return 0;
}

/* What every generation's end does first: the ranks' last output, and
 * what escaped swept (once per generation: the /proc scan is not for idle
 * wakeups). */
static void agent_gen_end(agent *a)
{
    for (int i = 0; i < a->nlocal; i++)
        p3d_rank_out_drain(&a->out[i], &a->sink);
    if (!a->swept) {
        a->swept = 1;
        if (p3d_kill_children(SIGKILL) > 0)
            p3d_loop_reap(a->loop);
    }
}

/* The program was checked before anything started (launch_prepare.c):
 * what fails here is par3drun's own doing (log file, fork). The ranks
 * started are killed, the controller told (F, rank -1). */
static void agent_spawn_failed(agent *a, char *err)
{
    say(a, "par3drun: %s\n", err ? err : "spawn failed");
    free(err);
    agent_stop(a, SIGKILL);
    a->fail.failed = 1;
    a->fail.code = P3D_EXIT_FAIL;
    p3d_amsg f = {.type = P3D_AM_FAIL, .gen = a->gen, .code = P3D_EXIT_FAIL, .rank = -1, .step = -1, .errts = -1};
    p3d_amsg_send(a->upstream, &f);
}

static void agent_exit(agent *a)
{
    agent_go(a, P3D_AGENT_EXITED);
    p3d_loop_stop(a->loop);
}

/* ALL_EXITED while starting (the agent's first round, or a restart order
 * once the ranks are gone): the next generation. */
static void on_start(agent *a)
{
    char *err = NULL;
    agent_gen_end(a);
    a->gen = a->restart_gen;
    if (agent_spawn_all(a, &err) < 0) {
        agent_spawn_failed(a, err);
        agent_go(a, P3D_AGENT_STOPPING);
        return;
    }
    agent_go(a, P3D_AGENT_RUNNING);
}

/* ALL_EXITED otherwise: the generation is over: DONE when it did not
 * fail (the controller decides what follows), the end when there is
 * nobody to tell. */
static void on_all_exited(agent *a)
{
    agent_gen_end(a);
    if (a->upstream < 0) {
        agent_exit(a);
        return;
    }
    if (!a->fail.failed) {
        /* preempted: the last progress lines first, since the checkpoint
         * the ranks wrote just before they ended is the one the job
         * resumes from (otherwise a summary this late only risks a slow
         * node's replacement as the job ends) */
        p3d_amsg pm;
        char *warn = NULL;
        if (a->preempted && p3d_progress_sample(a->prog, &pm, &warn) > 0)
            p3d_amsg_send(a->upstream, &pm);
        if (warn)
            p3d_sink_write(&a->sink, 1, warn, strlen(warn));
        free(warn);
        p3d_amsg d = {.type = P3D_AM_DONE, .gen = a->gen};
        p3d_amsg_send(a->upstream, &d);
    }
    agent_go(a, P3D_AGENT_IDLE);
}

/* ALL_EXITED once the job's end is decided: the agent exits. */
static void on_exit_now(agent *a)
{
    agent_gen_end(a);
    agent_exit(a);
}

/* ---- the table --------------------------------------------------------------- */

typedef struct agent_cell {
    agent_handler h;
    const char *name;
    unsigned next;
    unsigned char kind;
} agent_cell;

#define RUN(h, next)                                                                                                   \
    {                                                                                                                  \
        h, #h, (next), P3D_NODE_CELL_RUN                                                                               \
    }
#define IGNORED                                                                                                        \
    {                                                                                                                  \
        NULL, NULL, P3D_NODE_STAY, P3D_NODE_CELL_IGNORED                                                               \
    }
#define IMPOSSIBLE                                                                                                     \
    {                                                                                                                  \
        NULL, NULL, 0, P3D_NODE_CELL_IMPOSSIBLE                                                                        \
    }
#define STAY P3D_NODE_STAY
#define RUNNING P3D_NODE_TO(P3D_AGENT_RUNNING)
#define HOLDING P3D_NODE_TO(P3D_AGENT_HOLDING)
#define STOPPING P3D_NODE_TO(P3D_AGENT_STOPPING)
#define STARTING P3D_NODE_TO(P3D_AGENT_STARTING)
#define IDLE P3D_NODE_TO(P3D_AGENT_IDLE)
#define ENDING P3D_NODE_TO(P3D_AGENT_ENDING)
#define EXITED P3D_NODE_TO(P3D_AGENT_EXITED)

/* What the controller's packets and the signals do wherever the agent
 * still has a loop; the rows override where they differ. */
#define LIVE_ROW                                                                                                       \
    [P3D_AGENT_EV_RANK_FAIL] = IGNORED, [P3D_AGENT_EV_TICK] = IGNORED, [P3D_AGENT_EV_HOLD_OVER] = IMPOSSIBLE,          \
    [P3D_AGENT_EV_BEAT] = RUN(on_beat, STAY), [P3D_AGENT_EV_RESTART] = RUN(on_restart, STARTING),                      \
    [P3D_AGENT_EV_STOP] = RUN(on_stop, ENDING), [P3D_AGENT_EV_FORWARD] = RUN(on_forward, STAY),                        \
    [P3D_AGENT_EV_UP_LOST] = RUN(on_orphaned, ENDING), [P3D_AGENT_EV_FENCE] = RUN(on_fence, ENDING),                   \
    [P3D_AGENT_EV_SIGNAL] = RUN(on_signal, ENDING), [P3D_AGENT_EV_USR] = RUN(on_usr, STAY),                            \
    [P3D_AGENT_EV_PREEMPT] = RUN(on_preempt, STAY)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#ifdef __clang__
#pragma clang diagnostic ignored "-Winitializer-overrides"
#endif
static const agent_cell table[P3D_AGENT_NSTATES][P3D_AGENT_NEVENTS] = {
    [P3D_AGENT_RUNNING] =
        {LIVE_ROW, [P3D_AGENT_EV_RANK_FAIL] = RUN(on_first_fail, HOLDING | STOPPING),
         [P3D_AGENT_EV_ALL_EXITED] = RUN(on_all_exited, IDLE | EXITED), [P3D_AGENT_EV_TICK] = RUN(on_tick, STAY)},
    [P3D_AGENT_HOLDING] =
        {LIVE_ROW, [P3D_AGENT_EV_RANK_FAIL] = RUN(on_fail_report, STAY),
         [P3D_AGENT_EV_ALL_EXITED] = RUN(on_all_exited, IDLE | EXITED), [P3D_AGENT_EV_TICK] = RUN(on_tick, STAY),
         [P3D_AGENT_EV_HOLD_OVER] = RUN(on_hold_over, STAY | STOPPING)},
    [P3D_AGENT_STOPPING] = {LIVE_ROW, [P3D_AGENT_EV_ALL_EXITED] = RUN(on_all_exited, IDLE | EXITED)},
    [P3D_AGENT_STARTING] = {LIVE_ROW, [P3D_AGENT_EV_ALL_EXITED] = RUN(on_start, RUNNING | STOPPING),
                            [P3D_AGENT_EV_RESTART] = RUN(on_restart, STAY)},
    [P3D_AGENT_IDLE] = {LIVE_ROW, [P3D_AGENT_EV_RANK_FAIL] = IMPOSSIBLE, [P3D_AGENT_EV_ALL_EXITED] = IGNORED,
                        [P3D_AGENT_EV_HOLD_OVER] = IGNORED},
    [P3D_AGENT_ENDING] =
        {LIVE_ROW, [P3D_AGENT_EV_RANK_FAIL] = RUN(on_fail_report, STAY),
         [P3D_AGENT_EV_ALL_EXITED] = RUN(on_exit_now, EXITED), [P3D_AGENT_EV_TICK] = RUN(on_tick, STAY),
         [P3D_AGENT_EV_HOLD_OVER] = IGNORED, [P3D_AGENT_EV_RESTART] = IGNORED, [P3D_AGENT_EV_STOP] = RUN(on_stop, STAY),
         [P3D_AGENT_EV_UP_LOST] = RUN(on_orphaned, STAY), [P3D_AGENT_EV_FENCE] = RUN(on_fence, STAY),
         [P3D_AGENT_EV_SIGNAL] = RUN(on_signal, STAY)},
    [P3D_AGENT_EXITED] = {[P3D_AGENT_EV_RANK_FAIL] = IGNORED,
                          [P3D_AGENT_EV_ALL_EXITED] = IGNORED,
                          [P3D_AGENT_EV_TICK] = IGNORED,
                          [P3D_AGENT_EV_HOLD_OVER] = IGNORED,
                          [P3D_AGENT_EV_BEAT] = IGNORED,
                          [P3D_AGENT_EV_RESTART] = IGNORED,
                          [P3D_AGENT_EV_STOP] = IGNORED,
                          [P3D_AGENT_EV_FORWARD] = IGNORED,
                          [P3D_AGENT_EV_UP_LOST] = IGNORED,
                          [P3D_AGENT_EV_FENCE] = IGNORED,
                          [P3D_AGENT_EV_SIGNAL] = IGNORED,
                          [P3D_AGENT_EV_USR] = IGNORED,
                          [P3D_AGENT_EV_PREEMPT] = IGNORED},
};
#pragma GCC diagnostic pop

static const char *const state_names[P3D_AGENT_NSTATES] = {"starting", "running", "holding", "stopping",
                                                           "idle",     "ending",  "exited"};
static const char *const event_names[P3D_AGENT_NEVENTS] = {"rank-fail",     "all-exited", "tick",   "hold-over",
                                                           "beat",          "restart",    "stop",   "forward",
                                                           "upstream-lost", "fence",      "signal", "usr-signal",
                                                           "preempt"};

const char *p3d_agent_state_name(int s)
{
    return s >= 0 && s < P3D_AGENT_NSTATES ? state_names[s] : "?";
}

const char *p3d_agent_event_name(int e)
{
    return e >= 0 && e < P3D_AGENT_NEVENTS ? event_names[e] : "?";
}

int p3d_agent_cell(int s, int e, p3d_node_cell *out)
{
    memset(out, 0, sizeof *out);
    if (s < 0 || s >= P3D_AGENT_NSTATES || e < 0 || e >= P3D_AGENT_NEVENTS)
        return 0;
    const agent_cell *c = &table[s][e];
    *out = (p3d_node_cell){.kind = c->kind, .handler = c->name, .next = c->next};
    return 1;
}

/* One event through its cell (a cell that cannot happen is dropped:
 * test_node_tables keeps the table honest). */
static void agent_dispatch(agent *a, p3d_agent_event ev)
{
    const agent_cell *c = &table[a->state][ev];
    a->cause = ev;
    a->cell_next = c->next;
    if (c->kind == P3D_NODE_CELL_RUN)
        c->h(a);
}

/* ---- what raises the events ---------------------------------------------------- */

/* A child exited (the loop reaped it): a rank's failure is an event. */
static void agent_child(p3d_loop *l, pid_t p, int status, void *ctx)
{
    agent *a = ctx;
    (void)l;
    int i;
    for (i = 0; i < a->nlocal; i++)
        if (a->pid[i] == p)
            break;
    if (i == a->nlocal)
        return; /* a reparented descendant (we are its subreaper) */
    a->running--;
    /* kill what is left of its group (grandchildren) right away */
    killpg(p, SIGKILL);
    p3d_rank_out_drain(&a->out[i], &a->sink);
    if (p3d_code_of(status) != 0) {
        a->ev.i = i;
        a->ev.status = status;
        agent_dispatch(a, P3D_AGENT_EV_RANK_FAIL);
    }
    a->pid[i] = 0;
}

/* The controller's packets, each an event. */
static void agent_upstream(agent *a)
{
    char buf[P3D_AMSG_MAX + 1];
    while (a->upstream >= 0) {
        long n = p3d_amsg_recv(a->upstream, buf, sizeof buf);
        if (n == 0)
            return;
        if (n < 0) {
            agent_dispatch(a, P3D_AGENT_EV_UP_LOST);
            return;
        }
        a->heard_up = p3d_now();
        p3d_amsg m;
        if (p3d_amsg_decode(buf, (size_t)n, &m) < 0)
            continue;
        p3d_agent_event ev = m.type == P3D_AM_BEAT      ? P3D_AGENT_EV_BEAT
                             : m.type == P3D_AM_RESTART ? P3D_AGENT_EV_RESTART
                             : m.type == P3D_AM_STOP    ? P3D_AGENT_EV_STOP
                             : m.type == P3D_AM_FORWARD ? P3D_AGENT_EV_FORWARD
                                                        : P3D_AGENT_NEVENTS;
        if (ev == P3D_AGENT_NEVENTS)
            continue;
        a->ev.m = &m;
        agent_dispatch(a, ev);
        a->ev.m = NULL;
    }
}

/* --node-timeout: a heartbeat to our parent (the launcher's hub or a
 * node's relay) every p3d_beat_interval; a frozen agent sends none. The
 * next one's time (0: off). */
static double agent_beat(agent *a, double now)
{
    double iv = p3d_beat_interval(a->L->o->node_timeout);
    if (iv <= 0 || a->upstream < 0)
        return 0;
    if (now >= a->next_beat) {
        p3d_amsg b = {.type = P3D_AM_BEAT, .ms = (int)(a->L->o->node_timeout * 1000)};
        p3d_amsg_send(a->upstream, &b);
        a->next_beat = now + iv;
    }
    return a->next_beat;
}

/* Fencing (FENCE): judged after the round's reads, so that what came
 * while we were stopped ourselves counts first (read before the
 * judgement). The next time to look (0: not judged). */
static double agent_fence(agent *a, double now)
{
    if (a->up_to <= 0 || a->upstream < 0)
        return 0;
    if (now - a->heard_up > a->up_to)
        agent_upstream(a); /* what came while we were not running counts */
    if (a->upstream < 0)
        return 0;
    if (now - a->heard_up <= a->up_to)
        return a->heard_up + a->up_to + 0.01;
    agent_dispatch(a, P3D_AGENT_EV_FENCE);
    return 0;
}

static void agent_signal(p3d_loop *l, int sig, void *ctx)
{
    agent *a = ctx;
    (void)l;
    a->ev.sig = sig;
    if ((sig == SIGUSR1 || sig == SIGUSR2) && p3d_preempts(a->L->o, sig) && a->upstream >= 0)
        agent_dispatch(a, P3D_AGENT_EV_PREEMPT);
    else if (sig == SIGUSR1 || sig == SIGUSR2)
        agent_dispatch(a, P3D_AGENT_EV_USR);
    else
        agent_dispatch(a, P3D_AGENT_EV_SIGNAL);
}

static void agent_on_output(p3d_loop *l, int fd, int ev, void *ctx)
{
    agent *a = ctx;
    (void)ev;
    for (int i = 0; i < a->nlocal; i++)
        for (int w = 0; w < 2; w++)
            if (a->out[i].s[w].fd == fd) {
                p3d_amsg m;
                size_t got = a->out[i].s[w].got;
                p3d_rank_out_read(&a->out[i], w, &a->sink);
                p3d_hang_activity(a->hang, i, p3d_now());
                if (a->out[i].s[w].got > got && p3d_progress_sign(a->prog, &m))
                    p3d_amsg_send(a->upstream, &m); /* the generation's first output */
                return;
            }
    p3d_loop_unwatch(l, fd); /* closed meanwhile */
}

static void agent_on_upstream(p3d_loop *l, int fd, int ev, void *ctx)
{
    agent *a = ctx;
    (void)ev;
    agent_upstream(a);
    if (a->upstream != fd)
        p3d_loop_unwatch(l, fd);
}

static void agent_on_hang(p3d_loop *l, int fd, int ev, void *ctx)
{
    agent *a = ctx;
    (void)l;
    (void)fd;
    (void)ev;
    p3d_hang_events(a->hang, p3d_now());
}

/* A heartbeat file changed: the generation's first one is its first sign
 * of life (progress.c). */
static void agent_on_heartbeat(p3d_loop *l, int fd, int ev, void *ctx)
{
    agent *a = ctx;
    p3d_amsg m;
    (void)l;
    (void)fd;
    (void)ev;
    if (p3d_progress_events(a->prog, &m))
        p3d_amsg_send(a->upstream, &m);
}

/* The rank output fds of this moment are the ones watched (a generation
 * opens new ones, EOF closes them). */
static void agent_watch_outputs(agent *a)
{
    for (int k = 0; k < a->nwatched; k++)
        p3d_loop_unwatch(a->loop, a->watched[k]);
    a->nwatched = 0;
    for (int i = 0; i < a->nlocal; i++)
        for (int w = 0; w < 2; w++)
            if (a->out[i].s[w].fd >= 0 &&
                p3d_loop_watch(a->loop, a->out[i].s[w].fd, P3D_LOOP_IN, agent_on_output, a) == 0)
                a->watched[a->nwatched++] = a->out[i].s[w].fd;
}

/* Before each wait: a generation that is over moves on (or the agent
 * ends), --hang-timeout judged, heartbeats sent, fencing judged, the
 * watched set brought up to date. The earliest deadline among them. */
static double agent_prepare(p3d_loop *l, double now, void *ctx)
{
    agent *a = ctx;
    p3d_sink_flush(&a->sink);
    agent_dispatch(a, P3D_AGENT_EV_TICK);
    /* no rank runs: ALL_EXITED, taken again in the state it left (a
     * start without ranks, a spare's, is over at once: nothing else would
     * wake the loop to say so) */
    for (p3d_agent_state was = a->state; a->running == 0; was = a->state) {
        agent_dispatch(a, P3D_AGENT_EV_ALL_EXITED);
        if (p3d_loop_stopped(l))
            return 0;
        if (a->state == was)
            break;
    }
    agent_watch_outputs(a);
    double dl = p3d_hang_deadline(a->hang, a->pid);
    double bd = agent_beat(a, now), fd = agent_fence(a, p3d_now());
    if (bd > 0 && (!dl || bd < dl))
        dl = bd;
    if (fd > 0 && (!dl || fd < dl))
        dl = fd;
    double sd = p3d_sink_watch(&a->sink, l);
    if (sd > 0 && (!dl || sd < dl))
        dl = sd;
    return dl;
}

int p3d_agent_run(const p3d_launch *L, int node, int upstream)
{
    agent A = {.L = L,
               .node = node,
               .upstream = upstream,
               .sfd = -1,
               .gen = L->job->gen0,
               .state = P3D_AGENT_STARTING,
               .restart_gen = L->job->gen0,
               .tlogs = {.dfd = -1}};
    agent *a = &A;
    char *err = NULL;
    a->self = getpid();
    int lock_fd = p3d_output_lock_open(L);
    p3d_sink_init(&a->sink, 1, 2, lock_fd);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    a->loop = p3d_loop_new();
    p3d_stopper_init(&a->stop, a->loop, agent_kill_all, a);
    a->sfd = p3d_signalfd();
    if (a->sfd < 0 || !a->loop || p3d_loop_signals(a->loop, a->sfd, agent_signal, a) < 0) {
        p3d_err(&err, "cannot set up signal handling: %s", strerror(errno));
        goto out;
    }
    p3d_loop_child_default(a->loop, agent_child, a);
    agent_beat(a, p3d_now()); /* alive before a long setup */
    a->heard_up = p3d_now();
    if (agent_setup(a, &err) < 0)
        goto out;
    a->watched = calloc((size_t)a->nlocal * 2 + 1, sizeof *a->watched);
    if (!a->watched ||
        (a->upstream >= 0 && p3d_loop_watch(a->loop, a->upstream, P3D_LOOP_IN, agent_on_upstream, a) < 0) ||
        (p3d_hang_fd(a->hang) >= 0 &&
         p3d_loop_watch(a->loop, p3d_hang_fd(a->hang), P3D_LOOP_IN, agent_on_hang, a) < 0) ||
        (p3d_progress_fd(a->prog) >= 0 &&
         p3d_loop_watch(a->loop, p3d_progress_fd(a->prog), P3D_LOOP_IN, agent_on_heartbeat, a) < 0) ||
        p3d_loop_prepare(a->loop, agent_prepare, a) < 0 ||
        (a->prog && L->o->progress_interval > 0 &&
         !(a->prog_timer = p3d_loop_at(a->loop, p3d_now() + L->o->progress_interval, agent_progress, a)))) {
        p3d_err(&err, "out of memory");
        goto out;
    }
    /* the first generation starts in the loop's first round (STARTING) */
    if (p3d_loop_run(a->loop) < 0) {
        p3d_err(&err, "the event loop failed: %s", strerror(errno));
        agent_stop(a, SIGKILL);
    }
out:
    if (err)
        say(a, "par3drun: %s\n", err);
    /* leave nothing behind, whatever path got us here */
    for (int i = 0; a->pid && i < a->nlocal; i++)
        if (a->pid[i] > 0)
            killpg(a->pid[i], SIGKILL);
    p3d_sweep_children();
    for (int i = 0; a->out && i < a->nlocal; i++)
        p3d_rank_out_free(&a->out[i]);
    p3d_tlogs_free(&a->tlogs);
    p3d_binder_free(a->binder);
    p3d_hang_free(a->hang);
    p3d_progress_free(a->prog);
    p3d_sink_close(&a->sink);
    free(a->ranks);
    free(a->pid);
    free(a->out);
    free(a->watched);
    int rc = err || !a->final ? P3D_EXIT_FAIL : a->exit_code;
    free(err);
    if (a->loop)
        p3d_loop_free(a->loop); /* closes the signalfd */
    else if (a->sfd >= 0)
        close(a->sfd);
    if (lock_fd >= 0)
        close(lock_fd);
    return rc;
}
