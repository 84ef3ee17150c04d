/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * spawn.c — starting one worker, and the subreaper's sweeps (ending a
 * whole process tree, reaping without waiting); the signals every
 * long-lived process takes through its signalfd, and the words for how a
 * process ended.
 *
 * Our own clone/fork+exec rather than posix_spawn because the child needs
 * steps posix_spawn cannot express: PR_SET_PDEATHSIG (and the getppid check that
 * closes the race where the parent dies between fork and prctl), hwloc
 * binding, its own process group.
 */
#include "ranks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Why candidate `path` cannot be run, or NULL when it can: a regular file
 * we may execute. */
static const char *not_runnable(const char *path, int *exists)
{
    struct stat st;
    *exists = 0;
    if (stat(path, &st) < 0)
        return errno == ENOENT || errno == ENOTDIR ? "not found" : strerror(errno);
    *exists = 1;
    if (S_ISDIR(st.st_mode))
        return "is a directory, not a program";
    if (!S_ISREG(st.st_mode))
        return "is not a regular file, not a program";
    if (access(path, X_OK) < 0)
        return errno == EACCES ? "is not executable (chmod +x?)" : strerror(errno);
    return NULL;
}

/* dir(/proc/self/exe)/prog, malloc'd, or NULL. */
static char *own_dir_candidate(const char *prog)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    char *cand = NULL;
    if (!slash || asprintf(&cand, "%.*s/%s", (int)(slash - exe), exe, prog) < 0)
        return NULL;
    return cand;
}

char *p3d_resolve_program(const char *prog, char **err)
{
    if (!*prog) {
        p3d_err(err, "no program to launch: the program name is empty");
        return NULL;
    }
    if (strchr(prog, '/')) {
        int exists;
        const char *why = not_runnable(prog, &exists);
        if (!why)
            return strdup(prog);
        if (exists)
            p3d_err(err, "%s %s", prog, why);
        else
            p3d_err(err, "cannot run %s: %s", prog, why);
        return NULL;
    }
    /* execvp's search: the first runnable candidate wins; when none is,
     * the first one that exists (a directory, a file without x) is the
     * one to explain */
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char *seen = NULL;
    const char *seen_why = NULL;
    const char *p = path;
    while (*p) {
        const char *c = strchr(p, ':');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        char *cand = NULL;
        if (asprintf(&cand, "%.*s/%s", (int)l, l ? p : ".", prog) < 0)
            break;
        int exists;
        const char *why = not_runnable(cand, &exists);
        if (!why) {
            free(seen);
            return cand;
        }
        if (exists && !seen) {
            seen = cand;
            seen_why = why;
        } else {
            free(cand);
        }
        p += l + (c ? 1 : 0);
        if (!c)
            break;
    }
    if (!seen) {
        /* Then next to par3drun itself: an installed or unpacked tree runs
         * `-- p3d-worker` without its bin/ on PATH. */
        char *own = own_dir_candidate(prog);
        int exists;
        if (own && !not_runnable(own, &exists))
            return own;
        free(own);
    }
    if (seen)
        p3d_err(err, "cannot run %s: %s (found in PATH) %s", prog, seen, seen_why);
    else
        p3d_err(err, "cannot run %s: not found in PATH (%s) nor next to par3drun", prog, path);
    free(seen);
    return NULL;
}

/* Only async-signal-safe calls between fork and exec. */
static void child_fail(const char *what, const char *path)
{
    const char *e = strerror(errno);
    const char *parts[] = {"par3drun: ", what, " '", path, "': ", e, "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        ssize_t w = write(2, parts[i], strlen(parts[i]));
        (void)w;
    }
    _exit(P3D_EXIT_NOEXEC);
}

typedef struct child_ctx {
    const p3d_spawn_req *req;
    int out_w, err_w; /* write ends of the pipes */
} child_ctx;

/* The child between clone and exec. Under CLONE_VM it runs on the parent's
 * memory: no malloc, no stdio, nothing but system calls. */
static int child_main(void *arg)
{
    const child_ctx *c = arg;
    const p3d_spawn_req *req = c->req;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != req->parent) /* the agent died before prctl */
        _exit(P3D_EXIT_NOEXEC);
    setpgid(0, 0);
    /* What posix_spawn's SETSIGDEF + SETSIGMASK do: exec keeps ignored
     * signals and the mask, and par3drun may itself have been started with
     * SIGINT/SIGQUIT ignored (`cmd &` in a non-interactive shell) — a
     * worker must still die of, or catch, the SIGINT we forward. The agent
     * also ignores SIGPIPE and blocks what its signalfd reads. sigaction
     * and sigprocmask are system calls: safe under CLONE_VM (the child has
     * its own handler table: no CLONE_SIGHAND). glibc's reserved signals
     * fail with EINVAL, which is fine. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int nul = open("/dev/null", O_RDONLY);
    if (nul >= 0 && nul != 0) {
        dup2(nul, 0);
        close(nul);
    }
    /* dup2 clears O_CLOEXEC on the copies */
    if (dup2(c->out_w, 1) < 0 || dup2(c->err_w, 2) < 0)
        _exit(P3D_EXIT_NOEXEC);
    if (req->binder && p3d_bind_apply(req->binder, req->local) < 0)
        child_fail("cannot bind", req->path);
    execve(req->path, req->argv, req->envp);
    child_fail("cannot execute", req->path);
    return P3D_EXIT_NOEXEC;
}

#if defined(__SANITIZE_ADDRESS__)
#define P3D_SPAWN_VFORK 0 /* ASan cannot follow a child on a foreign stack */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define P3D_SPAWN_VFORK 0
#endif
#endif
#ifndef P3D_SPAWN_VFORK
#define P3D_SPAWN_VFORK 1
#endif

int p3d_spawn(const p3d_spawn_req *req, pid_t *pid, int out_fd[2], char **err)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, rc = -1;
    char *stack = NULL;
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
        p3d_err(err, "cannot create output pipes: %s", strerror(errno));
        goto out;
    }
    child_ctx ctx = {.req = req, .out_w = po[1], .err_w = pe[1]};
    pid_t c;
    size_t stack_sz = 64 * 1024;
    if (P3D_SPAWN_VFORK && !p3d_bind_needs_fork(req->binder) && !(stack = malloc(stack_sz))) {
        p3d_err(err, "out of memory");
        goto out;
    }
    /* as posix_spawn: no signal handler may run in the child before it has
     * reset the dispositions (under CLONE_VM it would run on our memory);
     * the child inherits this full mask and clears it itself */
    sigset_t all, saved;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &saved);
    /* Like posix_spawn: share the memory until exec (CLONE_VM|CLONE_VFORK),
     * so starting a rank does not copy the launcher's page tables. A
     * binding that goes through a loaded hwloc topology may allocate:
     * that one forks. */
    if (P3D_SPAWN_VFORK && !p3d_bind_needs_fork(req->binder)) {
        c = clone(child_main, stack + stack_sz, CLONE_VM | CLONE_VFORK | SIGCHLD, &ctx);
    } else {
        c = fork();
        if (c == 0)
            _exit(child_main(&ctx));
    }
    {
        int e = errno;
        sigprocmask(SIG_SETMASK, &saved, NULL);
        errno = e;
    }
    if (c < 0) {
        p3d_err(err, "cannot start a process: %s", strerror(errno));
        goto out;
    }
    /* both sides set the group so that a signal sent right after the
     * start already reaches it */
    setpgid(c, c);
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    out_fd[0] = po[0];
    out_fd[1] = pe[0];
    po[0] = pe[0] = -1;
    *pid = c;
    rc = 0;
out:
    free(stack);
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    return rc;
}

/* One pass over /proc: calls fn for every live process but us with its
 * pid, parent, process group and session. */
static void proc_each(void (*fn)(void *ctx, pid_t pid, pid_t ppid, pid_t pgrp, pid_t sid), void *ctx)
{
    pid_t self = getpid();
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == self)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t l = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (l <= 0)
            continue;
        buf[l] = 0;
        /* "pid (comm) S ppid pgrp ...": comm may hold spaces and parentheses */
        char *rp = strrchr(buf, ')');
        char st;
        long ppid, pgrp, sid;
        if (!rp || sscanf(rp + 1, " %c %ld %ld %ld", &st, &ppid, &pgrp, &sid) != 4 || st == 'Z')
            continue;
        fn(ctx, (pid_t)pid, (pid_t)ppid, (pid_t)pgrp, (pid_t)sid);
    }
    closedir(d);
}

typedef struct kill_ctx {
    int sig, n;
    pid_t self;
} kill_ctx;

static void kill_if_child(void *ctx, pid_t pid, pid_t ppid, pid_t pgrp, pid_t sid)
{
    kill_ctx *k = ctx;
    (void)pgrp;
    (void)sid;
    if (ppid == k->self && kill(pid, k->sig) == 0)
        k->n++;
}

int p3d_kill_children(int sig)
{
    kill_ctx k = {.sig = sig, .self = getpid()};
    proc_each(kill_if_child, &k);
    return k.n;
}

static void kill_if_session(void *ctx, pid_t pid, pid_t ppid, pid_t pgrp, pid_t sid)
{
    kill_ctx *k = ctx;
    (void)ppid;
    (void)pgrp;
    if (sid == k->self && kill(pid, SIGKILL) == 0)
        k->n++;
}

int p3d_kill_session(pid_t sid)
{
    int total = 0;
    if (sid <= 1)
        return 0;
    /* a process forking while the pass runs: its child appears in the next
     * pass; a killed one runs no more code, even before it is a zombie */
    for (int pass = 0; pass < 8; pass++) {
        kill_ctx k = {.self = sid};
        proc_each(kill_if_session, &k);
        total += k.n;
        if (!k.n)
            break;
    }
    return total;
}

typedef struct tree_ctx {
    pid_t *pid, *ppid, *pgrp;
    size_t n, cap;
    int oom;
} tree_ctx;

static void tree_add(void *ctx, pid_t pid, pid_t ppid, pid_t pgrp, pid_t sid)
{
    tree_ctx *t = ctx;
    (void)sid;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        pid_t *a = realloc(t->pid, nc * sizeof *a), *b = a ? realloc(t->ppid, nc * sizeof *b) : NULL,
              *c = b ? realloc(t->pgrp, nc * sizeof *c) : NULL;
        if (a)
            t->pid = a;
        if (b)
            t->ppid = b;
        if (c)
            t->pgrp = c;
        if (!c) {
            t->oom = 1;
            return;
        }
        t->cap = nc;
    }
    t->pid[t->n] = pid;
    t->ppid[t->n] = ppid;
    t->pgrp[t->n] = pgrp;
    t->n++;
}

int p3d_kill_tree(pid_t root, int sig)
{
    tree_ctx t = {0};
    proc_each(tree_add, &t);
    unsigned char *in = calloc(t.n + 1, 1);
    int n = 0;
    if (in) {
        /* mark descendants until nothing changes (depth passes) */
        for (int changed = 1; changed;) {
            changed = 0;
            for (size_t i = 0; i < t.n; i++) {
                if (in[i] || t.pid[i] == root)
                    continue;
                int up = t.ppid[i] == root;
                for (size_t j = 0; j < t.n && !up; j++)
                    up = in[j] && t.pid[j] == t.ppid[i];
                if (up)
                    in[i] = changed = 1;
            }
        }
    }
    if (kill(root, sig) == 0)
        n++;
    killpg(root, sig);
    for (size_t i = 0; in && i < t.n; i++)
        if (in[i]) {
            n += kill(t.pid[i], sig) == 0;
            if (t.pgrp[i] == t.pid[i])
                killpg(t.pid[i], sig); /* a worker's group: its own children too */
        }
    free(in);
    free(t.pid);
    free(t.ppid);
    free(t.pgrp);
    return n;
}

int p3d_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return P3D_EXIT_FAIL;
}

void p3d_sweep_children(void)
{
    /* SIGKILL cannot be ignored, but a process in uninterruptible sleep
     * takes its time to die: bounded, never a blocking waitpid */
    double end = p3d_now() + 2.0;
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (p3d_kill_children(SIGKILL) == 0 || p3d_now() >= end)
            break;
        p3d_wait_fd(-1, 0, p3d_now() + 0.005); /* nothing to watch: time only */
    }
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

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

int p3d_signalfd(void)
{
    sigset_t s;
    p3d_launch_sigset(&s);
    if (sigprocmask(SIG_BLOCK, &s, NULL) < 0)
        return -1;
    return signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
}

void p3d_exit_how(int status, char *buf, size_t cap)
{
    if (WIFSIGNALED(status))
        snprintf(buf, cap, "its process was killed by signal %d (%s)", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
    else
        snprintf(buf, cap, "its process ended with exit code %d", p3d_code_of(status));
}
