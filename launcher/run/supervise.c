/*
 * supervise.c — the agent's and the launcher's event loops (launch.h has
 * the process tree and the message protocol between them).
 *
 * Each loop is one poll(): signals arrive as signalfd reads, the grace
 * period and --timeout are deadlines that bound poll's timeout, children
 * are reaped with waitpid(WNOHANG) until none is left. Nothing blocks
 * anywhere else, so a stop request is always seen.
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

double p3d_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Kills and reaps every remaining child (ours or reparented to us). */
static void sweep_children(void)
{
    for (int round = 0; round < 100 && p3d_kill_children(SIGKILL) > 0; round++)
        waitpid(-1, NULL, 0);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* Signals both loops take through their signalfd. */
void p3d_launch_sigset(sigset_t *s)
{
    sigemptyset(s);
    sigaddset(s, SIGCHLD);
    sigaddset(s, SIGINT);
    sigaddset(s, SIGTERM);
    sigaddset(s, SIGHUP);
    sigaddset(s, SIGQUIT);
    sigaddset(s, SIGUSR1);
    sigaddset(s, SIGUSR2);
}

static int sup_signalfd(void)
{
    sigset_t s;
    p3d_launch_sigset(&s);
    if (sigprocmask(SIG_BLOCK, &s, NULL) < 0)
        return -1;
    return signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
}

static int poll_ms(double deadline)
{
    if (deadline <= 0)
        return -1;
    double d = deadline - p3d_now();
    if (d <= 0)
        return 0;
    return d > 1e6 ? 1000000000 : (int)(d * 1000.0) + 1;
}

static int code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return P3D_EXIT_FAIL;
}

void p3d_failure_how(int code, int sig, char *buf, size_t cap)
{
    if (sig > 0)
        snprintf(buf, cap, "killed by signal %d (%s)", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
    else
        snprintf(buf, cap, "exit code %d", code);
}

static void sendmsg_str(int fd, const char *s, size_t len)
{
    if (fd < 0)
        return;
    while (send(fd, s, len, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static void say(const p3d_outsink *sink, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const p3d_outsink *sink, const char *fmt, ...)
{
    char *m = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&m, fmt, ap);
    va_end(ap);
    if (n > 0)
        p3d_sink_write(sink, sink->err_fd, m, (size_t)n);
    free(m);
}

/* ========================================================================= */
/* Agent                                                                     */
/* ========================================================================= */

typedef struct agent {
    const p3d_launch *L;
    int node, upstream, sfd;
    int nlocal;
    int *ranks;             /* global ranks in local-rank order */
    pid_t *pid;             /* 0 = not running */
    p3d_rank_out *out;
    p3d_binder *binder;
    p3d_outsink sink;
    pid_t self;
    int gen;                /* restart count of the running group */
    int running;            /* live workers */
    int stopping;           /* SIGTERM sent, waiting for the grace */
    double kill_at;         /* SIGKILL deadline while stopping */
    int killed;
    int failed;             /* this generation had a root-cause failure */
    int fail_code;
    int restart_to;         /* >= 0: start generation restart_to when empty */
    int exit_code;          /* decided result when not restarting */
    int final;              /* no restart will follow: exit when empty */
    int done_sent;
    double deadline;        /* --timeout (standalone only), 0 none */
} agent;

static void agent_signal_all(agent *a, int sig)
{
    for (int i = 0; i < a->nlocal; i++)
        if (a->pid[i] > 0)
            killpg(a->pid[i], sig);
}

/* Starts the stop sequence: sig now, SIGKILL after the grace. */
static void agent_stop(agent *a, int sig)
{
    if (sig == SIGKILL) {
        agent_signal_all(a, SIGKILL);
        a->stopping = a->killed = 1;
        return;
    }
    if (a->stopping)
        return;
    a->stopping = 1;
    a->killed = 0;
    a->kill_at = p3d_now() + a->L->o->grace;
    agent_signal_all(a, sig);
}

static int agent_spawn_all(agent *a, char **err)
{
    const p3d_launch *L = a->L;
    int rc = -1;
    a->stopping = a->killed = a->failed = 0;
    a->fail_code = 0;
    a->restart_to = -1;
    a->done_sent = 0;
    for (int i = 0; i < a->nlocal; i++) {
        p3d_rank_out *ro = &a->out[i];
        /* keep the log file across restarts; everything else is fresh */
        int log_fd = ro->log_fd;
        ro->log_fd = -1;
        p3d_rank_out_free(ro);
        p3d_rank_out_init(ro, a->ranks[i]);
        ro->log_fd = log_fd;
        if (L->tag)
            p3d_rank_tag(L->pl, a->ranks[i], ro->tag, sizeof ro->tag);
    }
    if (L->o->output_ranks) {
        unsigned char *sel = malloc((size_t)L->pl->world);
        if (!sel || p3d_rank_list_parse(L->o->output_ranks, L->pl->world, sel, err) < 0) {
            free(sel);
            goto out;
        }
        for (int i = 0; i < a->nlocal; i++)
            a->out[i].shown = sel[a->ranks[i]];
        free(sel);
    }
    if (L->o->log_dir) {
        for (int i = 0; i < a->nlocal; i++) {
            if (a->out[i].log_fd >= 0) {
                char mark[64];
                int n = snprintf(mark, sizeof mark, "--- par3drun: restart %d ---\n", a->gen);
                if (write(a->out[i].log_fd, mark, (size_t)n) < 0)
                    (void)0;
                continue;
            }
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/rank-%d.log", L->o->log_dir, a->ranks[i]);
            a->out[i].log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
            if (a->out[i].log_fd < 0) {
                p3d_err(err, "--log-dir: cannot create %s: %s", path, strerror(errno));
                goto out;
            }
        }
    }
    for (int i = 0; i < a->nlocal; i++) {
        p3d_envv env;
        if (p3d_rank_env(L, environ, a->ranks[i], a->gen, &env, err) < 0)
            goto out;
        p3d_spawn_req req = {
            .path = L->program, .argv = L->o->argv, .envp = env.v, .binder = a->binder,
            .local = i, .parent = a->self,
        };
        int fds[2];
        int s = p3d_spawn(&req, &a->pid[i], fds, err);
        p3d_envv_free(&env);
        if (s < 0)
            goto out;
        a->out[i].s[0].fd = fds[0];
        a->out[i].s[1].fd = fds[1];
        a->running++;
    }
    rc = 0;
out:
    return rc;
}

/* The root-cause text of local rank i: who, where, how, last stderr lines. */
static char *agent_summary(agent *a, int i, int status)
{
    const p3d_launch *L = a->L;
    int r = a->ranks[i];
    const p3d_rank *k = &L->pl->ranks[r];
    const p3d_cnode *cn = &L->cluster->nodes[a->node];
    const p3d_node *topo = cn->topo;
    char how[96];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "was killed by signal %d (%s), exit code %d", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?", code_of(status));
    else
        snprintf(how, sizeof how, "exited with code %d", code_of(status));
    char gpu[80] = "no GPU";
    if (topo && k->gpu >= 0 && k->gpu < topo->ngpus && p3d_is_cpu_slot(topo, k->gpu))
        snprintf(gpu, sizeof gpu, "CPU slot %d (no GPU)", k->gpu);
    else if (topo && k->gpu >= 0 && k->gpu < topo->ngpus)
        snprintf(gpu, sizeof gpu, "GPU %d%s%s%s", k->gpu, topo->gpus[k->gpu].pci[0] ? " (" : "",
                 topo->gpus[k->gpu].pci, topo->gpus[k->gpu].pci[0] ? ")" : "");
    char *tail = p3d_rank_out_tail(&a->out[i], "    ");
    char *s = NULL;
    /* printed only for the failure that ends the job, which happens in
     * generation gen: gen restarts came before it */
    char after[48] = "";
    if (a->gen > 0)
        snprintf(after, sizeof after, ", after %d restart%s", a->gen, a->gen == 1 ? "" : "s");
    if (asprintf(&s,
                 "par3drun: root cause: rank %d (tp %d, pp %d, dp %d, cp %d, ep %d) on node %s, %s, "
                 "pid %d, %s%s\n%s%s",
                 r, k->coord[P3D_DIM_TP], k->coord[P3D_DIM_PP], k->coord[P3D_DIM_DP], k->coord[P3D_DIM_CP],
                 k->coord[P3D_DIM_EP], cn->name, gpu, (int)a->pid[i], how, after,
                 tail && tail[0] ? "  last lines of its stderr:\n" : "  (nothing on its stderr)\n",
                 tail ? tail : "") < 0)
        s = NULL;
    free(tail);
    return s;
}

static void agent_reap(agent *a)
{
    int status;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
        int i;
        for (i = 0; i < a->nlocal; i++)
            if (a->pid[i] == p)
                break;
        if (i == a->nlocal)
            continue; /* a reparented descendant (we are its subreaper) */
        a->running--;
        /* kill what is left of its group (grandchildren) right away */
        killpg(p, SIGKILL);
        p3d_rank_out_drain(&a->out[i], &a->sink);
        int code = code_of(status);
        if (code != 0 && !a->stopping && !a->failed) {
            a->failed = 1;
            a->fail_code = code;
            char *sum = agent_summary(a, i, status);
            int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            if (a->upstream >= 0) {
                /* the 4th field (signal, 0 for an exit) is new; readers
                 * that scan three fields still work */
                char *msg = NULL;
                int n = asprintf(&msg, "F %d %d %d %d\n%s", a->gen, code, a->ranks[i], sig, sum ? sum : "");
                if (n > 0)
                    sendmsg_str(a->upstream, msg, (size_t)n);
                free(msg);
            } else if (a->gen < a->L->o->max_restarts) {
                /* not the root cause yet: one line, the summary comes
                 * with the failure that ends the job */
                char how[48];
                p3d_failure_how(code, sig, how, sizeof how);
                say(&a->sink, "par3drun: rank %d failed (%s); restarting all local ranks (restart %d of %d)\n",
                    a->ranks[i], how, a->gen + 1, a->L->o->max_restarts);
                a->restart_to = a->gen + 1;
            } else {
                if (sum)
                    p3d_sink_write(&a->sink, a->sink.err_fd, sum, strlen(sum));
                a->final = 1;
                a->exit_code = code;
            }
            free(sum);
            agent_stop(a, SIGTERM);
        }
        a->pid[i] = 0;
    }
}

/* Handles one packet from the launcher. */
static void agent_upstream(agent *a)
{
    char buf[256];
    ssize_t n = recv(a->upstream, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        /* the launcher is gone: nobody can restart or report; end now */
        close(a->upstream);
        a->upstream = -1;
        a->final = 1;
        if (!a->exit_code)
            a->exit_code = a->failed ? a->fail_code : 128 + SIGKILL;
        agent_stop(a, SIGKILL);
        return;
    }
    buf[n] = 0;
    int v = 0;
    if (sscanf(buf + 1, " %d", &v) != 1)
        return;
    switch (buf[0]) {
    case 'R':
        a->restart_to = v;
        agent_stop(a, SIGTERM);
        break;
    case 'T':
        a->final = 1;
        a->restart_to = -1;
        if (!a->exit_code)
            a->exit_code = a->failed ? a->fail_code : v ? 128 + v : 0;
        if (v)
            agent_stop(a, v);
        break;
    case 'U':
        agent_signal_all(a, v);
        break;
    }
}

static void agent_signal(agent *a, int sig)
{
    switch (sig) {
    case SIGCHLD:
        agent_reap(a);
        break;
    case SIGUSR1:
    case SIGUSR2:
        agent_signal_all(a, sig);
        break;
    default: /* INT TERM HUP QUIT, and the parent-death SIGTERM */
        a->final = 1;
        a->restart_to = -1;
        if (!a->exit_code)
            a->exit_code = a->failed ? a->fail_code : 128 + sig;
        if (a->stopping && sig != SIGQUIT)
            agent_stop(a, SIGKILL); /* asked twice: no more grace */
        else
            agent_stop(a, sig);
        break;
    }
}

int p3d_agent_run(const p3d_launch *L, int node, int upstream)
{
    agent A = {.L = L, .node = node, .upstream = upstream, .sfd = -1, .restart_to = -1};
    agent *a = &A;
    char *err = NULL, *note = NULL;
    struct pollfd *pfd = NULL;
    int rc = P3D_EXIT_FAIL;
    a->self = getpid();
    a->sink.out_fd = 1;
    a->sink.err_fd = 2;
    a->sink.lock_fd = -1;
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    a->sfd = sup_signalfd();
    if (a->sfd < 0) {
        p3d_err(&err, "cannot set up signal handling: %s", strerror(errno));
        goto out;
    }
    if (L->emulate && L->run_dir) {
        /* several agents share the terminal: one lock so lines stay whole */
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/output.lock", L->run_dir);
        a->sink.lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    }
    for (int r = 0; r < L->pl->world; r++)
        if (L->pl->ranks[r].node == node)
            a->nlocal++;
    a->ranks = calloc((size_t)a->nlocal + 1, sizeof *a->ranks);
    a->pid = calloc((size_t)a->nlocal + 1, sizeof *a->pid);
    a->out = calloc((size_t)a->nlocal + 1, sizeof *a->out);
    pfd = calloc((size_t)a->nlocal * 2 + 2, sizeof *pfd);
    if (!a->ranks || !a->pid || !a->out || !pfd) {
        p3d_err(&err, "out of memory");
        goto out;
    }
    for (int r = 0, j = 0; r < L->pl->world; r++)
        if (L->pl->ranks[r].node == node)
            a->ranks[j++] = r;
    /* local-rank order (the placement's local_rank) */
    for (int i = 0; i < a->nlocal; i++)
        for (int j = i + 1; j < a->nlocal; j++)
            if (L->pl->ranks[a->ranks[j]].local_rank < L->pl->ranks[a->ranks[i]].local_rank) {
                int t = a->ranks[i];
                a->ranks[i] = a->ranks[j];
                a->ranks[j] = t;
            }
    for (int i = 0; i < a->nlocal; i++)
        p3d_rank_out_init(&a->out[i], a->ranks[i]);
    if (p3d_bind_prepare(L, node, a->ranks, a->nlocal, &a->binder, &note, &err) < 0)
        goto out;
    if (L->o->report_bindings) {
        char *rep = p3d_bind_report(a->binder, L, node, a->ranks, a->nlocal);
        if (note)
            say(&a->sink, "par3drun: %s: %s\n", L->cluster->nodes[node].name, note);
        if (rep)
            p3d_sink_write(&a->sink, 2, rep, strlen(rep));
        free(rep);
    } else if (note && L->o->verbose) {
        say(&a->sink, "par3drun: %s: %s\n", L->cluster->nodes[node].name, note);
    }
    if (upstream < 0 && L->o->timeout > 0)
        a->deadline = p3d_now() + L->o->timeout;
    /* the program was checked before anything started (cmd_launch.c):
     * what fails here is par3drun's own doing (log file, fork) */
    if (agent_spawn_all(a, &err) < 0) {
        rc = P3D_EXIT_FAIL;
        a->final = 1;
        a->exit_code = rc;
        agent_stop(a, SIGKILL);
        say(&a->sink, "par3drun: %s\n", err ? err : "spawn failed");
        P3D_FREE(&err);
        if (upstream >= 0) {
            char msg[64];
            int n = snprintf(msg, sizeof msg, "F %d %d -1\n", a->gen, rc);
            sendmsg_str(upstream, msg, (size_t)n);
        }
    }

    for (;;) {
        if (a->running == 0) {
            /* a generation is over: sweep what escaped, then decide */
            for (int i = 0; i < a->nlocal; i++)
                p3d_rank_out_drain(&a->out[i], &a->sink);
            if (p3d_kill_children(SIGKILL) > 0)
                agent_reap(a);
            if (a->restart_to >= 0 && !a->final) {
                a->gen = a->restart_to;
                if (agent_spawn_all(a, &err) < 0) {
                    say(&a->sink, "par3drun: %s\n", err ? err : "restart failed");
                    P3D_FREE(&err);
                    rc = P3D_EXIT_FAIL;
                    agent_stop(a, SIGKILL);
                    a->final = 1;
                    a->exit_code = rc;
                }
                continue;
            }
            if (a->final || a->upstream < 0) {
                rc = a->final ? a->exit_code : 0;
                break;
            }
            if (!a->failed && !a->done_sent) {
                char msg[32];
                int n = snprintf(msg, sizeof msg, "D %d\n", a->gen);
                sendmsg_str(a->upstream, msg, (size_t)n);
                a->done_sent = 1;
            }
        }
        int np = 0;
        pfd[np++] = (struct pollfd){.fd = a->sfd, .events = POLLIN};
        if (a->upstream >= 0)
            pfd[np++] = (struct pollfd){.fd = a->upstream, .events = POLLIN};
        for (int i = 0; i < a->nlocal; i++)
            for (int w = 0; w < 2; w++)
                if (a->out[i].s[w].fd >= 0)
                    pfd[np++] = (struct pollfd){.fd = a->out[i].s[w].fd, .events = POLLIN};
        double dl = a->stopping && !a->killed ? a->kill_at : a->deadline;
        if (a->stopping && !a->killed && a->deadline > 0 && a->deadline < dl)
            dl = a->deadline;
        int pr = poll(pfd, (nfds_t)np, poll_ms(dl));
        if (pr < 0 && errno != EINTR) {
            p3d_err(&err, "poll: %s", strerror(errno));
            agent_stop(a, SIGKILL);
        }
        if (a->stopping && !a->killed && p3d_now() >= a->kill_at)
            agent_stop(a, SIGKILL);
        if (a->deadline > 0 && p3d_now() >= a->deadline && !a->final) {
            say(&a->sink, "par3drun: --timeout %g s reached; stopping the job\n", L->o->timeout);
            a->final = 1;
            a->restart_to = -1;
            a->exit_code = a->failed ? a->fail_code : P3D_EXIT_TIMEOUT;
            a->deadline = 0;
            agent_stop(a, SIGTERM);
        }
        if (pr <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            if (!pfd[k].revents)
                continue;
            if (pfd[k].fd == a->sfd) {
                struct signalfd_siginfo si;
                while (read(a->sfd, &si, sizeof si) == (ssize_t)sizeof si)
                    agent_signal(a, (int)si.ssi_signo);
            } else if (pfd[k].fd == a->upstream) {
                agent_upstream(a);
            } else {
                for (int i = 0; i < a->nlocal; i++)
                    for (int w = 0; w < 2; w++)
                        if (a->out[i].s[w].fd == pfd[k].fd)
                            p3d_rank_out_read(&a->out[i], w, &a->sink);
            }
        }
    }
out:
    if (err)
        say(&a->sink, "par3drun: %s\n", err);
    /* leave nothing behind, whatever path got us here */
    for (int i = 0; a->pid && i < a->nlocal; i++)
        if (a->pid[i] > 0)
            killpg(a->pid[i], SIGKILL);
    sweep_children();
    for (int i = 0; a->out && i < a->nlocal; i++)
        p3d_rank_out_free(&a->out[i]);
    p3d_binder_free(a->binder);
    free(a->ranks);
    free(a->pid);
    free(a->out);
    free(pfd);
    free(err);
    free(note);
    if (a->sfd >= 0)
        close(a->sfd);
    if (a->sink.lock_fd >= 0)
        close(a->sink.lock_fd);
    return rc;
}

/* ========================================================================= */
/* Launcher                                                                  */
/* ========================================================================= */

typedef struct lagent {
    int node;
    pid_t pid;      /* 0 once reaped */
    int sock;       /* -1 once closed */
    int done_gen;   /* last generation it reported done, -1 none */
    int status;
} lagent;

typedef struct launcher {
    const p3d_launch *L;
    lagent *ag;
    int n, alive, sfd;
    p3d_outsink sink;
    int gen;
    int stopping;
    int code;       /* the job's exit code once decided, -1 undecided */
    char *summary;  /* root cause, printed once */
    double deadline;
} launcher;

static void l_send_all(launcher *l, const char *msg)
{
    for (int i = 0; i < l->n; i++)
        if (l->ag[i].sock >= 0)
            sendmsg_str(l->ag[i].sock, msg, strlen(msg));
}

static void l_stop(launcher *l, int sig, int code)
{
    char msg[32];
    if (l->code < 0)
        l->code = code;
    if (l->stopping && sig != SIGKILL && sig != SIGQUIT)
        sig = SIGKILL; /* second request: no more grace */
    l->stopping = 1;
    snprintf(msg, sizeof msg, "T %d\n", sig);
    l_send_all(l, msg);
}

static void l_message(launcher *l, int i)
{
    char buf[65536];
    ssize_t n = recv(l->ag[i].sock, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close(l->ag[i].sock);
        l->ag[i].sock = -1;
        return;
    }
    buf[n] = 0;
    int g = 0, code = 0, rank = 0, sig = 0;
    if (buf[0] == 'D' && sscanf(buf + 1, " %d", &g) == 1) {
        if (g == l->gen)
            l->ag[i].done_gen = g;
        int all = 1;
        for (int k = 0; k < l->n; k++)
            if (l->ag[k].pid > 0 && l->ag[k].done_gen != l->gen)
                all = 0;
        if (all && !l->stopping) {
            l->stopping = 1;
            if (l->code < 0)
                l->code = 0;
            l_send_all(l, "T 0\n");
        }
        return;
    }
    int nf = buf[0] == 'F' ? sscanf(buf + 1, " %d %d %d %d", &g, &code, &rank, &sig) : 0;
    if (nf < 3)
        return;
    if (g != l->gen || l->stopping)
        return; /* a consequence of a failure already being handled */
    const char *sum = strchr(buf, '\n');
    sum = sum ? sum + 1 : "";
    if (l->gen < l->L->o->max_restarts) {
        /* not the root cause yet: one line; the summary is printed once,
         * for the failure that ends the job */
        char how[48];
        p3d_failure_how(code, nf == 4 ? sig : 0, how, sizeof how);
        l->gen++;
        if (rank >= 0)
            say(&l->sink, "par3drun: rank %d failed (%s); restarting all ranks (restart %d of %d)\n", rank, how,
                l->gen, l->L->o->max_restarts);
        else
            say(&l->sink, "par3drun: node %s could not start its ranks (%s); restarting all ranks (restart %d of %d)\n",
                l->L->cluster->nodes[l->ag[i].node].name, how, l->gen, l->L->o->max_restarts);
        char msg[32];
        snprintf(msg, sizeof msg, "R %d\n", l->gen);
        for (int k = 0; k < l->n; k++)
            l->ag[k].done_gen = -1;
        l_send_all(l, msg);
        return;
    }
    free(l->summary);
    l->summary = strdup(sum);
    l_stop(l, SIGTERM, code);
}

static void l_reap(launcher *l)
{
    int status;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < l->n; i++) {
            if (l->ag[i].pid != p)
                continue;
            l->ag[i].pid = 0;
            l->ag[i].status = status;
            l->alive--;
            /* drain its last packets (a failure report may be in flight) */
            while (l->ag[i].sock >= 0)
                l_message(l, i);
            if (!l->stopping) {
                /* an agent that ends before the job does died unexpectedly */
                char *s = NULL;
                if (asprintf(&s, "par3drun: root cause: the agent of node %s ended unexpectedly (%s %d)\n",
                             l->L->cluster->nodes[l->ag[i].node].name,
                             WIFSIGNALED(status) ? "signal" : "exit code",
                             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)) < 0)
                    s = NULL;
                free(l->summary);
                l->summary = s;
                l_stop(l, SIGTERM, code_of(status) ? code_of(status) : P3D_EXIT_FAIL);
            }
        }
    }
}

int p3d_launcher_run(const p3d_launch *L, const int *nodes, int nnodes)
{
    launcher Lr = {.L = L, .n = nnodes, .sfd = -1, .code = -1};
    launcher *l = &Lr;
    struct pollfd *pfd = NULL;
    l->sink = (p3d_outsink){.out_fd = 1, .err_fd = 2, .lock_fd = -1};
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    l->sfd = sup_signalfd();
    l->ag = calloc((size_t)nnodes, sizeof *l->ag);
    pfd = calloc((size_t)nnodes + 1, sizeof *pfd);
    if (l->sfd < 0 || !l->ag || !pfd) {
        fprintf(stderr, "par3drun: cannot set up the supervisor: %s\n", strerror(errno));
        l->code = P3D_EXIT_FAIL;
        goto out;
    }
    if (L->emulate && L->run_dir) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/output.lock", L->run_dir);
        l->sink.lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    }
    if (L->o->timeout > 0)
        l->deadline = p3d_now() + L->o->timeout;
    pid_t me = getpid();
    fflush(NULL);
    for (int i = 0; i < nnodes; i++) {
        int sv[2];
        l->ag[i].node = nodes[i];
        l->ag[i].sock = -1;
        l->ag[i].done_gen = -1;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
            fprintf(stderr, "par3drun: socketpair: %s\n", strerror(errno));
            l_stop(l, SIGKILL, P3D_EXIT_FAIL);
            break;
        }
        pid_t c = fork();
        if (c < 0) {
            fprintf(stderr, "par3drun: cannot fork an agent: %s\n", strerror(errno));
            close(sv[0]);
            close(sv[1]);
            l_stop(l, SIGKILL, P3D_EXIT_FAIL);
            break;
        }
        if (c == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != me)
                _exit(P3D_EXIT_FAIL);
            setpgid(0, 0);
            close(sv[0]);
            close(l->sfd);
            for (int k = 0; k < i; k++)
                if (l->ag[k].sock >= 0)
                    close(l->ag[k].sock);
            if (l->sink.lock_fd >= 0)
                close(l->sink.lock_fd);
            int rc = p3d_agent_run(L, nodes[i], sv[1]);
            fflush(NULL);
            _exit(rc);
        }
        setpgid(c, c);
        close(sv[1]);
        l->ag[i].pid = c;
        l->ag[i].sock = sv[0];
        l->alive++;
    }

    while (l->alive > 0) {
        int np = 0;
        pfd[np++] = (struct pollfd){.fd = l->sfd, .events = POLLIN};
        for (int i = 0; i < l->n; i++)
            if (l->ag[i].sock >= 0)
                pfd[np++] = (struct pollfd){.fd = l->ag[i].sock, .events = POLLIN};
        int pr = poll(pfd, (nfds_t)np, l->stopping ? -1 : poll_ms(l->deadline));
        if (!l->stopping && l->deadline > 0 && p3d_now() >= l->deadline) {
            say(&l->sink, "par3drun: --timeout %g s reached; stopping the job\n", L->o->timeout);
            l_stop(l, SIGTERM, P3D_EXIT_TIMEOUT);
        }
        if (pr <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            if (!pfd[k].revents)
                continue;
            if (pfd[k].fd == l->sfd) {
                struct signalfd_siginfo si;
                while (read(l->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                    int sig = (int)si.ssi_signo;
                    if (sig == SIGCHLD) {
                        l_reap(l);
                    } else if (sig == SIGUSR1 || sig == SIGUSR2) {
                        char msg[32];
                        snprintf(msg, sizeof msg, "U %d\n", sig);
                        l_send_all(l, msg);
                    } else {
                        l_stop(l, sig, 128 + sig);
                    }
                }
            } else {
                for (int i = 0; i < l->n; i++)
                    if (l->ag[i].sock == pfd[k].fd)
                        l_message(l, i);
            }
        }
    }
out:
    /* subreaper sweep: anything reparented to us dies with the job */
    sweep_children();
    if (l->summary && l->summary[0])
        p3d_sink_write(&l->sink, 2, l->summary, strlen(l->summary));
    int code = l->code < 0 ? 0 : l->code;
    for (int i = 0; l->ag && i < l->n; i++)
        if (l->ag[i].sock >= 0)
            close(l->ag[i].sock);
    free(l->ag);
    free(l->summary);
    free(pfd);
    if (l->sfd >= 0)
        close(l->sfd);
    if (l->sink.lock_fd >= 0)
        close(l->sink.lock_fd);
    return code;
}
