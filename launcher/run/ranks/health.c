/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * health.c — --health-check CMD: the one place that runs it (issue 11).
 * The single-node and --emulate controller (supervise.c) runs it for its
 * local nodes; a multi-node node runs its own before it joins the
 * rendezvous and whenever the leader asks (relay.c, wire.h's C/H).
 *
 * CMD runs through sh -c, once per node, all at once, each with
 * P3D_NODE=<node name> and no blocked signals, in its own process group.
 * It is bounded by --health-check-timeout: then the group is SIGKILLed and
 * the check failed. Its output (stdout and stderr) goes through a pipe that
 * is read while it runs into a bounded capture, the way policy output is
 * capped: the first HEALTH_HEAD and the last HEALTH_TAIL bytes are kept
 * (cut at line ends), what lies between is dropped and counted. The capture
 * is copied to our stderr afterwards, escaped (termsafe.h), and its last
 * line names what went wrong in the one-line reason that travels to the
 * leader. A check that prints 20 MB costs 16 KiB, never a temp file; one
 * that leaves a daemon holding the pipe is not waited for past its exit.
 */
#include "ranks.h"

#include "strbuf.h"
#include "termsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEALTH_HEAD (8 * 1024)
#define HEALTH_TAIL (8 * 1024)

/* One check's output: head[0..nhead) as it came, then a ring of the last
 * HEALTH_TAIL bytes; total counts everything read. */
typedef struct capture {
    int fd;
    int watched; /* the fd number the loop watches for it, -1 */
    size_t nhead, total;
    char head[HEALTH_HEAD], tail[HEALTH_TAIL];
} capture;

static void cap_add(capture *c, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++, c->total++) {
        if (c->nhead < HEALTH_HEAD)
            c->head[c->nhead++] = p[i];
        else
            c->tail[(c->total - HEALTH_HEAD) % HEALTH_TAIL] = p[i];
    }
}

/* Reads what is there now (the fd is non-blocking); closes it at EOF. */
static void cap_drain(capture *c)
{
    char buf[4096];
    while (c->fd >= 0) {
        ssize_t r = read(c->fd, buf, sizeof buf);
        if (r > 0) {
            cap_add(c, buf, (size_t)r);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            close(c->fd);
            c->fd = -1;
        }
        break;
    }
}

/* The tail's bytes in order, into out (HEALTH_TAIL bytes); returns how many. */
static size_t cap_tail(const capture *c, char *out)
{
    size_t n = c->total - c->nhead;
    if (n > HEALTH_TAIL)
        n = HEALTH_TAIL;
    for (size_t i = 0; i < n; i++)
        out[i] = c->tail[(c->total - n + i - HEALTH_HEAD) % HEALTH_TAIL];
    return n;
}

/* The capture as it goes to stderr: the head up to its last line end, a
 * line that says how many bytes were dropped, the tail from its first line
 * start; everything escaped, lines kept. The last non-empty line (at most
 * cap-1 bytes, its end kept behind "..." when cut, printable ASCII only)
 * goes to last. */
static void cap_show(const capture *c, const char *what, int show, char *last, size_t cap)
{
    char tl[HEALTH_TAIL];
    size_t nt = cap_tail(c, tl), nh = c->nhead, from = 0;
    if (c->total > c->nhead + nt) { /* something dropped: cut at line ends */
        while (nh > 0 && c->head[nh - 1] != '\n')
            nh--;
        while (from < nt && tl[from] != '\n')
            from++;
        from = from < nt ? from + 1 : 0;
        if (!nh)
            nh = c->nhead;
    }
    size_t dropped = c->total - nh - (nt - from);
    p3d_sb b = {0};
    p3d_term_put(&b, c->head, nh, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB);
    if (dropped) {
        if (b.len && b.p[b.len - 1] != '\n')
            p3d_sb_putc(&b, '\n');
        p3d_sb_printf(&b, "... (%s output: %zu bytes dropped; the first %zu and the last %zu shown) ...\n", what,
                      dropped, nh, nt - from);
    }
    p3d_term_put(&b, tl + from, nt - from, P3D_TERM_KEEP_NL | P3D_TERM_KEEP_TAB);
    /* the last non-empty line, from the tail or else the head */
    const char *s = nt ? tl : c->head;
    size_t n = nt ? nt : c->nhead, e = n;
    while (e > 0 && (s[e - 1] == '\n' || s[e - 1] == '\r'))
        e--;
    size_t st = e;
    while (st > 0 && s[st - 1] != '\n')
        st--;
    size_t k = 0;
    if (e - st >= cap && cap > 8) { /* its end kept, the cut said */
        st = e - (cap - 4);
        memcpy(last, "...", 3);
        k = 3;
    } else if (e - st >= cap) {
        st = e - (cap - 1);
    }
    for (size_t i = st; i < e && k + 1 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        last[k++] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    last[k] = 0;
    /* b.len, not a NUL: an empty buffer may hold none */
    if (show && !b.oom && b.len) {
        fflush(stderr);
        if (fwrite(b.p, 1, b.len, stderr) != b.len)
            clearerr(stderr);
        fflush(stderr);
    }
    p3d_sb_free(&b);
}

struct p3d_health_job {
    p3d_loop *loop;
    p3d_health_cmd hc;
    int n, left, nbad;
    const unsigned char *skip;
    p3d_health_res *res;
    pid_t *pid;
    int *st; /* wait status; -1 running, -2 timed out (then reaped) */
    capture *out;
    unsigned timer;
    double t;
    void (*done)(void *ctx, int nbad);
    void *ctx;
};

/* The output fd of check i no longer watched (before it is closed, or
 * right after cap_drain closed it: nothing opened meanwhile). */
static void job_unwatch(p3d_health_job *j, int i)
{
    if (j->out[i].watched >= 0)
        p3d_loop_unwatch(j->loop, j->out[i].watched);
    j->out[i].watched = -1;
}

static void job_free(p3d_health_job *j)
{
    for (int i = 0; i < j->n; i++) {
        job_unwatch(j, i);
        if (j->out[i].fd >= 0)
            close(j->out[i].fd);
    }
    p3d_loop_cancel(j->loop, j->timer);
    free(j->pid);
    free(j->st);
    free(j->out);
    free(j);
}

/* Every check ended: the results, the output, done. */
static void job_finish(p3d_health_job *j)
{
    for (int i = 0; i < j->n; i++) {
        if (j->skip && j->skip[i])
            continue;
        p3d_health_res *r = &j->res[i];
        char how[96], tail[P3D_HEALTH_HOW];
        r->ok = j->pid[i] > 0 && j->st[i] >= 0 && WIFEXITED(j->st[i]) && WEXITSTATUS(j->st[i]) == 0;
        r->seconds = p3d_now() - j->t;
        if (j->pid[i] <= 0)
            snprintf(how, sizeof how, "cannot start it: %s", strerror(-j->pid[i]));
        else if (j->st[i] == -2)
            snprintf(how, sizeof how, "timed out after %g s", j->hc.timeout);
        else
            p3d_exit_how(j->st[i], how, sizeof how);
        capture *c = &j->out[i];
        if (c->fd >= 0) { /* what it wrote before it ended; a daemon it left is not waited for */
            cap_drain(c);
            job_unwatch(j, i);
            if (c->fd >= 0)
                close(c->fd);
            c->fd = -1;
        }
        job_unwatch(j, i);
        cap_show(c, j->hc.what, !r->ok || !j->hc.outs, tail, sizeof tail - sizeof how - 2);
        if (j->hc.outs) /* its output as it came (the head: HEALTH_HEAD bytes at most) */
            j->hc.outs[i] = strndup(c->head, c->nhead);
        if (r->ok)
            snprintf(r->how, sizeof r->how, "passed");
        else {
            /* how (< 96 bytes), ": " and the tail (< 102) fit */
            size_t hl = strlen(how), tl = strlen(tail);
            memcpy(r->how, how, hl);
            if (tl) {
                memcpy(r->how + hl, ": ", 2);
                memcpy(r->how + hl + 2, tail, tl);
                hl += 2 + tl;
            }
            r->how[hl] = 0;
        }
        j->nbad += !r->ok;
    }
    void (*done)(void *, int) = j->done;
    void *ctx = j->ctx;
    int nbad = j->nbad;
    job_free(j);
    if (done)
        done(ctx, nbad);
}

static void job_finish_timer(p3d_loop *l, void *ctx)
{
    (void)l;
    p3d_health_job *j = ctx;
    j->timer = 0;
    job_finish(j);
}

static void job_output(p3d_loop *l, int fd, int ev, void *ctx)
{
    p3d_health_job *j = ctx;
    (void)ev;
    for (int i = 0; i < j->n; i++)
        if (j->out[i].watched == fd) {
            cap_drain(&j->out[i]);
            if (j->out[i].fd < 0)
                job_unwatch(j, i); /* closed at EOF */
            return;
        }
    p3d_loop_unwatch(l, fd);
}

static void job_child(p3d_loop *l, pid_t pid, int status, void *ctx)
{
    p3d_health_job *j = ctx;
    (void)l;
    for (int i = 0; i < j->n; i++)
        if (j->pid[i] == pid && j->st[i] < 0) {
            if (j->st[i] == -1)
                j->st[i] = status;
            j->left--;
        }
    if (j->left == 0)
        job_finish(j);
}

/* --health-check-timeout: the groups still running are SIGKILLed; their
 * exits (at once) finish the job. */
static void job_timeout(p3d_loop *l, void *ctx)
{
    p3d_health_job *j = ctx;
    (void)l;
    j->timer = 0;
    for (int i = 0; i < j->n; i++)
        if (j->pid[i] > 0 && j->st[i] == -1) {
            j->st[i] = -2;
            kill(-j->pid[i], SIGKILL);
        }
}

p3d_health_job *p3d_health_start(p3d_loop *l, const p3d_opts *o, const char *const *names, int n,
                                 const unsigned char *skip, p3d_health_res *res, void (*done)(void *ctx, int nbad),
                                 void *ctx)
{
    p3d_health_cmd hc = {.cmd = o->health_check, .timeout = o->health_check_timeout, .what = "--health-check"};
    return p3d_health_start_cmd(l, &hc, names, n, skip, res, done, ctx);
}

p3d_health_job *p3d_health_start_cmd(p3d_loop *l, const p3d_health_cmd *hc, const char *const *names, int n,
                                     const unsigned char *skip, p3d_health_res *res, void (*done)(void *ctx, int nbad),
                                     void *ctx)
{
    p3d_health_job *j = calloc(1, sizeof *j);
    if (j) {
        *j = (p3d_health_job){.loop = l, .hc = *hc, .n = n, .skip = skip, .res = res, .done = done, .ctx = ctx};
        j->pid = calloc((size_t)n + 1, sizeof *j->pid);
        j->st = calloc((size_t)n + 1, sizeof *j->st);
        j->out = calloc((size_t)n + 1, sizeof *j->out);
    }
    if (!j || !j->pid || !j->st || !j->out) {
        for (int i = 0; i < n; i++)
            if (!skip || !skip[i]) {
                res[i].ok = 0;
                snprintf(res[i].how, sizeof res[i].how, "cannot run it: out of memory");
            }
        if (j) {
            free(j->pid);
            free(j->st);
            free(j->out);
        }
        free(j);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        j->out[i].fd = j->out[i].watched = -1;
    j->t = p3d_now();
    for (int i = 0; i < n; i++) {
        if (skip && skip[i])
            continue;
        int pp[2] = {-1, -1};
        if (pipe2(pp, O_CLOEXEC) < 0)
            pp[0] = pp[1] = -1;
        j->out[i].fd = pp[0];
        if (pp[0] >= 0)
            fcntl(pp[0], F_SETFL, fcntl(pp[0], F_GETFL) | O_NONBLOCK);
        fflush(NULL);
        pid_t c = fork();
        if (c == 0) {
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            setpgid(0, 0);
            if (pp[1] >= 0) {
                dup2(pp[1], 1);
                dup2(pp[1], 2);
            }
            for (int k = 0; j->hc.fds && k < n * j->hc.nfds; k++)
                if (k / j->hc.nfds != i && j->hc.fds[k] >= 0)
                    close(j->hc.fds[k]);
            setenv("P3D_NODE", names[i], 1);
            execl("/bin/sh", "sh", "-c", j->hc.cmds ? j->hc.cmds[i] : j->hc.cmd, (char *)NULL);
            _exit(127);
        }
        if (pp[1] >= 0)
            close(pp[1]);
        if (c < 0 || p3d_loop_child(l, c, job_child, j) < 0) {
            int e = errno;
            if (c > 0) {
                kill(-c, SIGKILL);
                kill(c, SIGKILL);
            }
            j->pid[i] = -(e ? e : ENOMEM);
            j->st[i] = -3; /* never ran: not waited for */
            continue;
        }
        setpgid(c, c);
        j->pid[i] = c;
        j->st[i] = -1;
        j->left++;
        if (pp[0] >= 0 && p3d_loop_watch(l, pp[0], P3D_LOOP_IN, job_output, j) < 0) {
            close(pp[0]);
            j->out[i].fd = -1;
        } else if (pp[0] >= 0) {
            j->out[i].watched = pp[0];
        }
    }
    if (j->left == 0) {
        /* nothing runs: the answer is known now, given from the loop */
        j->timer = p3d_loop_at(l, p3d_now(), job_finish_timer, j);
        return j;
    }
    j->timer = p3d_loop_at(l, j->t + j->hc.timeout, job_timeout, j);
    return j;
}

void p3d_health_cancel(p3d_health_job *j)
{
    if (!j)
        return;
    for (int i = 0; i < j->n; i++)
        if (j->pid[i] > 0 && j->st[i] < 0) {
            kill(-j->pid[i], SIGKILL);
            p3d_loop_child_forget(j->loop, j->pid[i]);
            waitpid(j->pid[i], NULL, 0); /* SIGKILLed: at once */
        }
    job_free(j);
}

static void run_done(void *ctx, int nbad)
{
    int *d = ctx;
    d[0] = 1;
    d[1] = nbad;
}

int p3d_health_run(const p3d_opts *o, const char *const *names, int n, const unsigned char *skip, p3d_health_res *res)
{
    p3d_health_cmd hc = {.cmd = o->health_check, .timeout = o->health_check_timeout, .what = "--health-check"};
    return p3d_health_run_cmd(&hc, names, n, skip, res);
}

int p3d_health_run_cmd(const p3d_health_cmd *hc, const char *const *names, int n, const unsigned char *skip,
                       p3d_health_res *res)
{
    /* a loop of our own: SIGCHLD through a signalfd while the checks run */
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, SIGCHLD);
    sigprocmask(SIG_BLOCK, &s, &old);
    int sfd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
    p3d_loop *l = p3d_loop_new();
    int d[2] = {0, 0};
    p3d_health_job *j = NULL;
    if (l && sfd >= 0 && p3d_loop_signals(l, sfd, NULL, NULL) == 0) {
        sfd = -1; /* the loop's now */
        j = p3d_health_start_cmd(l, hc, names, n, skip, res, run_done, d);
    }
    if (!j) {
        for (int i = 0; i < n; i++)
            if (!skip || !skip[i]) {
                res[i].ok = 0;
                snprintf(res[i].how, sizeof res[i].how, "cannot run it: %s", strerror(errno ? errno : ENOMEM));
                d[1]++;
            }
        d[0] = 1;
    }
    while (!d[0])
        if (p3d_loop_once(l, 0) < 0) {
            p3d_health_cancel(j);
            break;
        }
    if (sfd >= 0)
        close(sfd);
    p3d_loop_free(l);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return d[1];
}

void p3d_health_set_how(p3d_health_res *r, const char *text)
{
    size_t k = 0;
    for (; text && text[k] && k + 1 < sizeof r->how; k++) {
        unsigned char ch = (unsigned char)text[k];
        r->how[k] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    r->how[k] = 0;
}

void p3d_health_event(int events_fd, double t0, const char *node, const p3d_health_res *r)
{
    char jn[160], jh[P3D_HEALTH_HOW + 64];
    p3d_json_str(jn, sizeof jn, node);
    p3d_json_str(jh, sizeof jh, r->ok ? "passed" : r->how);
    p3d_event(events_fd, t0, "\"event\": \"health\", \"node\": %s, \"ok\": %s, \"how\": %s, \"seconds\": %.3f", jn,
              r->ok ? "true" : "false", jh, r->seconds);
}
