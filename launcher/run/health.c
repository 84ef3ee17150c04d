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
 * the check failed. Its output (stdout and stderr) goes to a temporary file
 * that is copied to our stderr afterwards, so the last line can name what
 * went wrong in the one-line reason that travels to the leader.
 */
#include "launch.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The last non-empty line of the check's output (at most cap-1 bytes, its
 * end kept), printable ASCII only; "" when there was none. The whole
 * output is copied to stderr. */
static void output_tail(FILE *f, char *out, size_t cap)
{
    char buf[4096], line[P3D_HEALTH_HOW];
    size_t n, ll = 0;
    out[0] = 0;
    if (!f)
        return;
    rewind(f);
    fflush(stderr);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (fwrite(buf, 1, n, stderr) != n)
            clearerr(stderr);
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)buf[i];
            if (ch == '\n') {
                if (ll) {
                    memcpy(out, line, ll);
                    out[ll] = 0;
                }
                ll = 0;
            } else if (ll + 1 < sizeof line && ll + 1 < cap) {
                line[ll++] = ch >= 32 && ch < 127 ? (char)ch : '?';
            }
        }
    }
    if (ll) {
        memcpy(out, line, ll);
        out[ll] = 0;
    }
    fflush(stderr);
}

int p3d_health_run(const p3d_opts *o, const char *const *names, int n, const unsigned char *skip,
                   p3d_health_res *res, void (*tick)(void *), void *tick_ctx)
{
    pid_t *pid = calloc((size_t)n + 1, sizeof *pid);
    int *st = calloc((size_t)n + 1, sizeof *st);
    FILE **out = calloc((size_t)n + 1, sizeof *out);
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
    double t = p3d_now(), until = t + o->health_check_timeout;
    for (int i = 0; i < n; i++) {
        if (skip && skip[i])
            continue;
        out[i] = tmpfile();
        fflush(NULL);
        pid_t c = fork();
        if (c == 0) {
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            setpgid(0, 0);
            if (out[i]) {
                dup2(fileno(out[i]), 1);
                dup2(fileno(out[i]), 2);
            }
            setenv("P3D_NODE", names[i], 1);
            execl("/bin/sh", "sh", "-c", o->health_check, (char *)NULL);
            _exit(127);
        }
        if (c > 0)
            setpgid(c, c);
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
            usleep(5000);
        }
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
        output_tail(out[i], tail, sizeof tail - sizeof how - 2);
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
        if (out[i])
            fclose(out[i]);
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
