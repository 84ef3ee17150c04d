/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * health.c — --health-check CMD: the one place that runs it (issue 11).
 * The single-node and --emulate controller (supervise.c) runs it for its
 * local nodes; a multi-node node runs its own before it joins the
 * rendezvous and whenever the leader asks (relay.c, agent_proto.h's C/H).
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
#include "launch.h"

#include "strbuf.h"
#include "termsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEALTH_HEAD (8 * 1024)
#define HEALTH_TAIL (8 * 1024)

/* One check's output: head[0..nhead) as it came, then a ring of the last
 * HEALTH_TAIL bytes; total counts everything read. */
typedef struct capture {
    int fd;
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
 * cap-1 bytes, its end kept, printable ASCII only) goes to last. */
static void cap_show(const capture *c, char *last, size_t cap)
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
        p3d_sb_printf(&b, "... (--health-check output: %zu bytes dropped; the first %zu and the last %zu shown) ...\n",
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
    if (e - st >= cap)
        st = e - (cap - 1);
    size_t k = 0;
    for (size_t i = st; i < e && k + 1 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        last[k++] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    last[k] = 0;
    /* b.len, not a NUL: an empty buffer may hold none */
    if (!b.oom && b.len) {
        fflush(stderr);
        if (fwrite(b.p, 1, b.len, stderr) != b.len)
            clearerr(stderr);
        fflush(stderr);
    }
    p3d_sb_free(&b);
}

int p3d_health_run(const p3d_opts *o, const char *const *names, int n, const unsigned char *skip,
                   p3d_health_res *res, void (*tick)(void *), void *tick_ctx)
{
    pid_t *pid = calloc((size_t)n + 1, sizeof *pid);
    int *st = calloc((size_t)n + 1, sizeof *st);
    capture *out = calloc((size_t)n + 1, sizeof *out);
    int nbad = 0;
    if (!pid || !st || !out) {
        for (int i = 0; i < n; i++)
            if (!skip || !skip[i]) {
                res[i].ok = 0;
                snprintf(res[i].how, sizeof res[i].how, "cannot run it: out of memory");
                nbad++;
            }
        free(pid);
        free(st);
        free(out);
        return nbad;
    }
    for (int i = 0; i < n; i++)
        out[i].fd = -1;
    double t = p3d_now(), until = t + o->health_check_timeout;
    for (int i = 0; i < n; i++) {
        if (skip && skip[i])
            continue;
        int pp[2] = {-1, -1};
        if (pipe2(pp, O_CLOEXEC) < 0)
            pp[0] = pp[1] = -1;
        out[i].fd = pp[0];
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
            setenv("P3D_NODE", names[i], 1);
            execl("/bin/sh", "sh", "-c", o->health_check, (char *)NULL);
            _exit(127);
        }
        if (c > 0)
            setpgid(c, c);
        if (pp[1] >= 0)
            close(pp[1]);
        pid[i] = c;
        st[i] = -1;
    }
    int left;
    do {
        left = 0;
        for (int i = 0; i < n; i++)
            if (pid[i] > 0 && st[i] == -1) {
                int w;
                if (waitpid(pid[i], &w, WNOHANG) == pid[i])
                    st[i] = w;
                else
                    left++;
            }
        if (left && p3d_now() >= until) {
            for (int i = 0; i < n; i++)
                if (pid[i] > 0 && st[i] == -1) {
                    kill(-pid[i], SIGKILL);
                    waitpid(pid[i], &st[i], 0);
                    st[i] = -2;
                }
            left = 0;
        }
        if (left) {
            if (tick)
                tick(tick_ctx);
            /* wait for output or 5 ms, whichever first, and take it in */
            struct pollfd *pf = calloc((size_t)n + 1, sizeof *pf);
            int np = 0;
            for (int i = 0; pf && i < n; i++)
                if (out[i].fd >= 0)
                    pf[np++] = (struct pollfd){.fd = out[i].fd, .events = POLLIN};
            if (np)
                poll(pf, (nfds_t)np, 5);
            else
                usleep(5000);
            free(pf);
        }
        for (int i = 0; i < n; i++)
            if (out[i].fd >= 0)
                cap_drain(&out[i]);
    } while (left);
    for (int i = 0; i < n; i++) {
        if (skip && skip[i])
            continue;
        char how[96], tail[P3D_HEALTH_HOW];
        res[i].ok = pid[i] > 0 && st[i] >= 0 && WIFEXITED(st[i]) && WEXITSTATUS(st[i]) == 0;
        res[i].seconds = p3d_now() - t;
        if (pid[i] <= 0)
            snprintf(how, sizeof how, "cannot start it: %s", strerror(errno));
        else if (st[i] == -2)
            snprintf(how, sizeof how, "timed out after %g s", o->health_check_timeout);
        else
            p3d_exit_how(st[i], how, sizeof how);
        if (out[i].fd >= 0) { /* what it wrote before it ended; a daemon it left is not waited for */
            cap_drain(&out[i]);
            if (out[i].fd >= 0)
                close(out[i].fd);
            out[i].fd = -1;
        }
        cap_show(&out[i], tail, sizeof tail - sizeof how - 2);
        if (res[i].ok)
            snprintf(res[i].how, sizeof res[i].how, "passed");
        else {
            /* how (< 96 bytes), ": " and the tail (< 102) fit */
            size_t hl = strlen(how), tl = strlen(tail);
            memcpy(res[i].how, how, hl);
            if (tl) {
                memcpy(res[i].how + hl, ": ", 2);
                memcpy(res[i].how + hl + 2, tail, tl);
                hl += 2 + tl;
            }
            res[i].how[hl] = 0;
        }
        nbad += !res[i].ok;
    }
    free(pid);
    free(st);
    free(out);
    return nbad;
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
