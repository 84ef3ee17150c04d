/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ranks.h — the public header of launcher/run/ranks/: a node's rank
 * processes and what an agent needs to run them. It owns what every
 * process of a job shares (p3d_launch, filled once by the launch path;
 * p3d_jobstate, the placement of now), the ranks' environment
 * (rank_env.c), starting and ending process trees and the signals taken
 * through a signalfd (spawn.c), the CPU and memory binding (bind.c), their
 * output (output.c, output_tlogs.c), the --hang-timeout watch (hang.c,
 * hbdir.c), their progress lines (progress.c), torch's error file
 * (errfile.c), stop-then-kill (stopper.c), what ps shows (proctitle.c)
 * and --health-check (health.c). It knows nothing of the controller, the
 * hub or other nodes.
 */
#ifndef P3D_RANKS_H
#define P3D_RANKS_H

#include <signal.h>
#include <stdio.h>
#include <stddef.h>
#include <sys/types.h>

#include "wire.h"
#include "opts.h"
#include "loop.h"
#include "p3d/p3d.h"

/* Exit code of a job stopped by --timeout (as timeout(1)). */
#define P3D_EXIT_TIMEOUT 124
/* Exit code when the program cannot be started (as a shell). */
#define P3D_EXIT_NOEXEC 127

/* Lines of a rank's stderr kept for the root-cause summary. */
#define P3D_TAIL_LINES 10

/* ---- errfile.c: a rank's TORCHELASTIC_ERROR_FILE (torch's @record) ---- */
#define P3D_ERRFILE_MAX (1 << 20) /* bytes read at most */
#define P3D_ERRFILE_FRAMES 3      /* frames kept, innermost last */
/* What torch's ErrorHandler wrote for a rank, every string escaped for a
 * terminal and bounded. Owned; p3d_rootcause_free frees the strings. */
typedef struct p3d_rootcause {
    char *message;       /* "ValueError: bad batch" */
    char *type;          /* "ValueError"; "" when the message names none */
    char *file;          /* the innermost frame's file; "" unknown */
    int line;            /* its line; 0 unknown */
    char *frames;        /* "FILE:LINE in FUNC\n" per frame, innermost last */
    long long timestamp; /* seconds since the epoch; -1 unknown */
} p3d_rootcause;
/* Reads the error file at path: 1 filled, 0 no such file (rc empty), -1
 * with *err for a file that is not torch's (too large, not JSON, a link). */
int p3d_rootcause_read(const char *path, p3d_rootcause *rc, char **err);
void p3d_rootcause_free(p3d_rootcause *rc);
/* The summary's lines for rc, each after indent (caller frees; NULL: OOM). */
char *p3d_rootcause_text(const p3d_rootcause *rc, const char *indent);
/* The error file par3drun gives rank r (caller frees; NULL: OOM). */
char *p3d_rootcause_path(const char *run_dir, int r);

/* What a replacement changes while the job runs: the placement and what
 * comes with it. Owned and written by the launcher (launch_local.c's state,
 * mnode.c's), read through p3d_launch.job by everything else. */
typedef struct p3d_jobstate {
    const p3d_cluster *cluster;
    const p3d_placement *pl;
    const char *job_id;
    const char *master_addr;
    int master_port;
    int nccl_port;    /* > 0: NCCL_COMM_ID=master_addr:nccl_port */
    int gen0;         /* the restart count agents start with */
    int full_dp;      /* the job's full data-parallel width when pl
                                    runs below it (a shrink), 0: pl's own dp;
                                    the batch figures of the ranks follow */
    int min_dp;       /* --min-dp D (0: not elastic): what a
                                    successor needs to go on shrinking */
    int batch_leader; /* 1: the ranks' batch figures are batch's,
                                    the leader's (a joined node, given none
                                    of its own); 0: the node's options' */
    p3d_wbatch batch;
    int fault_leader;    /* 1: fault_window is the leader's (a multi-node
                                    job's placement frame), 0: this node's
                                    --fault-window applies */
    double fault_window; /* seconds */
    /* multi-node leader: the placement's CPLACE frame (wire.h) that
     * supervise.c sends to every remote node after a replacement, and the
     * same as the difference from the one every node holds (a CDELTA,
     * wire/wire_cdelta.c), sent instead when set */
    const struct p3d_wbuf *cplace;
    const struct p3d_wbuf *cdelta;
} p3d_jobstate;

/* Everything an agent needs; filled by the launcher before the first
 * start and never written again (what changes is in *job). Pointers are
 * borrowed from the launcher, which outlives its agents. */
struct p3d_joiner; /* rdzv.h: a node joining the running job */
typedef struct p3d_launch {
    const p3d_opts *o;
    const p3d_jobstate *job; /* the placement of now */
    const char *run_dir;
    int run_dir_own;            /* made by par3drun: removed after a clean end
                                    (p3d_rundir_finish) */
    const char *placement_path; /* the job's placement JSON */
    char **extra_env;           /* "K=V" from --env-file then --env */
    size_t nextra;
    int tag; /* prefix output lines */
    int emulate;
    const char *program;     /* resolved path of o->argv[0] */
    int events_fd;           /* RUN_DIR/events.jsonl, -1 none (events.c) */
    double t0;               /* monotonic start of the job */
    struct p3d_store *store; /* the agent store this process serves at
                                    MASTER_ADDR:MASTER_PORT (tcpstore.h;
                                    TORCHELASTIC_USE_AGENT_STORE=True), NULL:
                                    none, the ranks' rank 0 serves it */
    /* A lost node (docs/launch.md, "When a node dies"): places again
     * without the nodes lost[0..nlost) (cluster indices), keeps the old
     * placement file as placement.<restart>.json, writes the replace
     * event, and sets job->pl and job->gen0 for the agents forked next. Returns 0 with a
     * one-line story in *msg, 1 when the lost nodes ran no rank (nothing
     * moves, no restart), or -1 with the reason in *msg. NULL: this
     * job cannot replace nodes. An elastic job (--min-dp) whose lost
     * ranks no spare can take is placed on fewer whole replicas instead:
     * 2, with job->full_dp set (docs/launch.md, "Elastic width"). */
    int (*replace)(void *ctx, const int *lost, int nlost, int restart, const char *reason, char **msg);
    void *replace_ctx;
    /* An elastic job below its full width (replace_ctx; NULL: it never
     * grows): how many more whole replicas the spares hold now, and the
     * grow for restart `restart` (job->pl wider, job->gen0 set; 0 with a
     * story in *msg, 1 nothing fits, -1 with why). */
    int (*grow_room)(void *ctx);
    int (*grow)(void *ctx, int restart, const char *when, char **msg);
    const char *bind_addr; /* where this node's listeners bind (multi-node; NULL: a job on one host):
                             * the ranks get it as P3D_BIND_ADDR */
    /* A multi-node job's own hooks: the new placement a relay adopts,
     * leader failover, the election, the successor list (agent.h,
     * p3d_mnode_hooks; filled by mnode.c). NULL on one node and under
     * --emulate: nothing there fails over or rejoins. */
    const struct p3d_mnode_hooks *mn;
} p3d_launch;

/* ---- rank_env.c ---------------------------------------------------------- */

/* A growable NULL-terminated vector of malloc'd "K=V" strings. */
typedef struct p3d_envv {
    char **v;
    size_t n, cap;
} p3d_envv;

/* Sets K=V (replacing an existing K). Returns 0 or -1 (out of memory). */
int p3d_envv_set(p3d_envv *e, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Adds a "K=V" string (replacing an existing K); -1 when it has no '='. */
int p3d_envv_put(p3d_envv *e, const char *kv);
const char *p3d_envv_get(const p3d_envv *e, const char *key);
void p3d_envv_free(p3d_envv *e);

/* The whole environment of global rank r (base environment, then the
 * contract of docs/launch.md, then extra_env), restart count restart.
 * Caller frees *out with p3d_envv_free(). */
int p3d_rank_env(const p3d_launch *L, char *const *base, int r, int restart, p3d_envv *out, char **err);

/* 1 when GPU index gpu of topo is a synthesized CPU slot (no device). */
int p3d_is_cpu_slot(const p3d_node *topo, int gpu);

/* CUDA_VISIBLE_DEVICES value for node: the GPUs of its ranks in local-rank
 * order, so device LOCAL_RANK is the placed GPU. "" when the node has no
 * GPU-backed ranks. Caller frees. */
char *p3d_cuda_visible(const p3d_launch *L, int node);

/* Reads K=V lines of an --env-file (blank lines and # comments skipped,
 * optional "export "); appends to *e. Messages name file:line. */
int p3d_env_file_read(const char *path, p3d_envv *e, char **err);

/* A free TCP port on the loopback/any address (0 on failure). */
int p3d_free_port(void);


/* ---- spawn.c (the rest of spawn.c, bind.c, output.c, hang.c, progress.c:
 * ranks.h, run/ internal) ---------------------------------------------- */

/* Resolves prog like execvp would (PATH search when it has no '/'); a bare
 * name not in PATH is then looked for next to par3drun's own executable
 * (an installed tree's p3d-worker). Returns a malloc'd path, or NULL with *err naming what was tried. */
char *p3d_resolve_program(const char *prog, char **err);


/* "its process was killed by signal 9 (KILL)" / "... ended with exit
 * code N" for a lost agent. */
void p3d_exit_how(int status, char *buf, size_t cap);

/* The signals the agent and controller loops take through a signalfd:
 * SIGCHLD, the four that stop a job, and Slurm's SIGUSR1/2 warnings. */
void p3d_launch_sigset(sigset_t *s);
/* Blocks them and returns a non-blocking signalfd for them, or -1. */
int p3d_signalfd(void);

/* ---- proctitle.c: what ps shows ------------------------------------------ */

/* From main(), first: returns a copy of argv to parse (the original's
 * memory becomes the title's room). */
char **p3d_proctitle_init(int argc, char **argv);
/* From main(), last, after the options are freed: frees that copy. */
void p3d_proctitle_done(void);
/* In a forked child: the command line ps shows (cut to the room there is)
 * and the thread name comm (ps -o comm, top; 15 bytes kept). */
void p3d_proctitle_set(const char *comm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- stopper.c: stop with grace, then kill ----------------------------- */

typedef struct p3d_stopper {
    p3d_loop *loop;
    unsigned timer; /* the kill's timer; 0: none */
    int stopping, killed;
    double kill_at;
    void (*kill)(void *ctx);
    void *ctx;
} p3d_stopper;

void p3d_stopper_init(p3d_stopper *s, p3d_loop *l, void (*kill)(void *ctx), void *ctx);
/* The stop begins, or its end moves closer: kill(ctx) runs from the loop
 * grace seconds from now (now, from this call, when grace <= 0), once.
 * Returns 1 when this call began the stop. */
int p3d_stopper_begin(p3d_stopper *s, double grace);
/* Over (a new generation starts): no stop, no kill pending. */
void p3d_stopper_clear(p3d_stopper *s);


/* ---- health.c: --health-check ------------------------------------------- */

/* A reason is at most this long (NUL included), also on the wire. */
#define P3D_HEALTH_HOW 200
/* The answer of a node that has no --health-check of its own (ok). */
#define P3D_HEALTH_NONE "no --health-check on this node"

typedef struct p3d_health_res {
    int ok;
    double seconds;           /* from the start of the checks */
    char how[P3D_HEALTH_HOW]; /* "passed", or how it failed and the last
                                   line of its output */
} p3d_health_res;

/* Starts o->health_check for every names[i] (skip[i] set: not; skip may
 * be NULL), all at once, watched on loop l (health.c has the rules): its
 * output through fd watchers, its exit through a child watcher, its time
 * bound through a timer; the loop must take SIGCHLD (p3d_loop_signals).
 * When every check has ended, res[i] is filled and done(ctx, nfailed)
 * runs from the loop; the job is freed after done returns. NULL when
 * nothing could start (out of memory: res says so, done is not called). */
typedef struct p3d_health_job p3d_health_job;
p3d_health_job *p3d_health_start(p3d_loop *l, const p3d_opts *o, const char *const *names, int n,
                                 const unsigned char *skip, p3d_health_res *res, void (*done)(void *ctx, int nbad),
                                 void *ctx);
/* The same for another command than --health-check (the preflight's
 * benchmarks, preflight.c): cmds[i] for node i (or cmd for all) through
 * sh -c, bounded by timeout; what names it in messages. With outs, the
 * output of each node that passed is not copied to stderr but kept:
 * outs[i] gets a malloc'd copy of its first 8 KiB (NULL out of memory),
 * which the caller frees. */
typedef struct p3d_health_cmd {
    const char *cmd;
    const char *const *cmds;
    double timeout;
    const char *what;
    char **outs;
    /* fds[i * nfds .. +nfds-1]: descriptors only command i may inherit
     * (the others close them before they run); NULL: none */
    const int *fds;
    int nfds;
} p3d_health_cmd;
p3d_health_job *p3d_health_start_cmd(p3d_loop *l, const p3d_health_cmd *hc, const char *const *names, int n,
                                     const unsigned char *skip, p3d_health_res *res, void (*done)(void *ctx, int nbad),
                                     void *ctx);
int p3d_health_run_cmd(const p3d_health_cmd *hc, const char *const *names, int n, const unsigned char *skip,
                       p3d_health_res *res);
/* Ends the checks still running (SIGKILL to their groups, reaped) and frees
 * the job; done is not called. */
void p3d_health_cancel(p3d_health_job *j);
/* For a phase that has no loop of its own (a node's check before it
 * joins the rendezvous): the same on a loop of its own, until every check
 * ended. Returns how many failed. */
int p3d_health_run(const p3d_opts *o, const char *const *names, int n, const unsigned char *skip, p3d_health_res *res);
/* Sets r->how from text received from elsewhere: printable ASCII only
 * ('?' for the rest), cut to P3D_HEALTH_HOW-1 bytes. */
void p3d_health_set_how(p3d_health_res *r, const char *text);
/* The events.jsonl "health" record of one node's result. */
void p3d_health_event(int events_fd, double t0, const char *node, const p3d_health_res *r);


#include <stdint.h>

/* ---- bind.c -------------------------------------------------------------- */

typedef struct p3d_binder p3d_binder;

/* Prepares the CPU+memory binding of the local ranks (ranks[i], i in
 * local-rank order) of node `node`. Sets *note (malloc'd) when binding is
 * skipped as a whole (mode none, topology from a file, --emulate). Caller
 * frees *out with p3d_binder_free(). */
int p3d_bind_prepare(const p3d_launch *L, int node, const int *ranks, int nlocal, p3d_binder **out, char **note,
                     char **err);
/* In the forked child, before exec: binds the process. 0 or -1 (errno). */
int p3d_bind_apply(const p3d_binder *b, int local);
/* The CPUs local rank `local` of nlocal is bound to; unbound: this
 * process's CPUs shared out among the nlocal ranks (at least 1). What
 * OMP_NUM_THREADS is set to when the user did not set it. */
int p3d_bind_ncpus(const p3d_binder *b, int local, int nlocal);
/* 1 when p3d_bind_apply may allocate (binds through a loaded hwloc
 * topology), so the child must be a real fork. */
int p3d_bind_needs_fork(const p3d_binder *b);
/* One line per local rank: rank -> cpuset -> NUMA -> GPU -> NIC. Caller
 * frees. */
char *p3d_bind_report(const p3d_binder *b, const p3d_launch *L, int node, const int *ranks, int nlocal);
void p3d_binder_free(p3d_binder *b);
/* One rank's CPUs (list `own`, its NUMA node `numa`) cut to the `allowed`
 * list and topped up to `want` CPUs from the NUMA nodes nearest by the
 * distances under sysfs_root (/sys/devices/system/node layout); *why
 * (malloc'd) says where CPUs came from when not all are its own. The
 * resulting list (malloc'd), or NULL. What binding does per rank (bind.c). */
char *p3d_bind_nearest(const char *own, int numa, const char *allowed, int want, const char *sysfs_root, char **why);

/* ---- output.c ------------------------------------------------------------ */

typedef struct p3d_ostream {
    int fd;    /* read end of the rank's pipe, -1 at EOF */
    char *buf; /* bytes of an unfinished line */
    size_t len, cap;
    size_t got; /* bytes read in all (a first output is a sign of life) */
} p3d_ostream;

typedef struct p3d_rank_out {
    int rank;
    char tag[96];               /* "[r3 tp1 pp0 dp0] " or "" */
    int shown;                  /* passes --output-ranks */
    int log_fd;                 /* --log-dir DIR/rank-N.log (both streams) or -1 */
    int file_fd[2];             /* torchrun's layout: stdout.log, stderr.log or -1 */
    int quiet[2];               /* the stream is not shown (-r without -t) */
    p3d_ostream s[2];           /* 0 stdout, 1 stderr */
    char *tail[P3D_TAIL_LINES]; /* last stderr lines (ring) */
    int tail_next, tail_count;
} p3d_rank_out;

/* Bytes one terminal stream may hold for a slow reader before whole
 * batches are dropped (and counted). */
#define P3D_OUT_PENDING ((size_t)8 << 20)

typedef struct p3d_outq {
    int fd;      /* non-blocking when it could be reopened so */
    int own;     /* fd is ours to close */
    int regular; /* a regular file: never waits */
    char *buf;   /* bytes the stream did not take yet */
    size_t len, cap;
    size_t dropped; /* bytes dropped since the last note */
    int mid;        /* the last byte written ended no line */
} p3d_outq;

/* Where lines go (output.c): the agent's (or launcher's) stdout/stderr,
 * never waited for. lock_fd (>= 0 when several agents share them) is
 * flock()ed without waiting around each write so that no line is torn by
 * another agent's. */
typedef struct p3d_outsink {
    p3d_outq q[2]; /* 0 stdout, 1 stderr */
    int same;      /* both are one file (2>&1): q[0] only */
    int lock_fd;
    int held;      /* we hold lock_fd */
    int lock_busy; /* the last flush found the lock taken */
} p3d_outsink;

/* --emulate: the lock file the agents sharing the terminal take around
 * their writes (RUN_DIR/output.lock); -1 otherwise. */
int p3d_output_lock_open(const p3d_launch *L);
/* Sets sink up on out_fd/err_fd (not taken over). */
void p3d_sink_init(p3d_outsink *sink, int out_fd, int err_fd, int lock_fd);
/* Queues a whole message (already tagged lines) for stream which (0/1)
 * and writes what the stream takes now. */
void p3d_sink_write(p3d_outsink *sink, int which, const char *buf, size_t len);
/* Writes queued bytes the streams take now. */
void p3d_sink_flush(p3d_outsink *sink);
/* Watches (on l) the streams that hold unwritten output until they can
 * take it; unwatches the others. A deadline to look again (another
 * agent holds the terminal's lock), or 0. Called before each wait. */
double p3d_sink_watch(p3d_outsink *sink, p3d_loop *l);
/* Last flush without waiting; what is left is counted in one note on
 * stderr; closes what the sink opened. */
void p3d_sink_close(p3d_outsink *sink);

/* Parses an --output-ranks list ("0,8-15"); sets sel[r]=1 for r < world. */
int p3d_rank_list_parse(const char *s, int world, unsigned char *sel, char **err);
/* Launch options checked before any rank starts (exit 2 on failure):
 * --output-ranks must parse and name ranks inside the world
 * (launch_prepare.c; --log-dir: p3d_check_log_dir, rundir.h). */
int p3d_check_output_ranks(const p3d_opts *o, int world, char **err);
/* The tag of rank r: "[r3 tp1 pp0 dp0] " (cp/ep shown when > 1). */
void p3d_rank_tag(const p3d_placement *pl, int r, char *buf, size_t cap);

/* torchrun's --log-dir layout (-r/-t given with --log-dir, o->local_std):
 * DIR/RUNID_XXXXXXXX/attempt_GEN/LOCAL_RANK/{stdout,stderr}.log, one
 * RUNID_XXXXXXXX per agent (a new random name, as torchrun's mkdtemp). */
typedef struct p3d_tlogs {
    int dfd;    /* DIR/RUNID_XXXXXXXX, -1 before the first attempt
                            (start as {.dfd = -1}) */
    char *path; /* its path (owned) */
} p3d_tlogs;

/* Makes attempt_GEN and a directory per local rank in it, and opens the
 * files of the streams o->local_std names into out[i].file_fd (out[i] is
 * local rank local[i]), and sets out[i].quiet. 0, or -1 with *err. */
int p3d_tlogs_attempt(p3d_tlogs *t, const p3d_launch *L, int gen, p3d_rank_out *out, const int *local, int n,
                      char **err);
void p3d_tlogs_free(p3d_tlogs *t);

/* Initialises r for rank `rank` (fds -1). */
void p3d_rank_out_init(p3d_rank_out *r, int rank);
/* Reads what is available on stream which (0/1) and writes every complete
 * line, tagged, to the sink (and log). Returns 1 at EOF (fd closed, partial
 * line flushed with a newline), 0 otherwise, -1 on a read error. */
int p3d_rank_out_read(p3d_rank_out *r, int which, p3d_outsink *sink);
/* Reads until EAGAIN/EOF on both streams (after the process exited). */
void p3d_rank_out_drain(p3d_rank_out *r, p3d_outsink *sink);
/* The last stderr lines, oldest first, each indented by `indent`; caller
 * frees. "" when none. */
char *p3d_rank_out_tail(const p3d_rank_out *r, const char *indent);
/* Closes fds, frees buffers and the tail. */
void p3d_rank_out_free(p3d_rank_out *r);

/* ---- spawn.c ------------------------------------------------------------- */

typedef struct p3d_spawn_req {
    const char *path; /* resolved program */
    char *const *argv;
    char *const *envp;
    const p3d_binder *binder; /* may be NULL */
    int local;                /* index for the binder */
    pid_t parent;             /* getpid() of the spawning agent */
} p3d_spawn_req;

/* Starts one worker: own process group, parent-death signal SIGKILL (and
 * exits at once if the parent is already gone), stdin /dev/null, stdout and
 * stderr to fresh pipes whose non-blocking read ends go to out_fd[0..1],
 * default signal dispositions and an empty mask, bound by the binder, then
 * exec. An exec failure is reported on the worker's stderr and exits 127.
 * Returns 0 or -1 with *err. */
int p3d_spawn(const p3d_spawn_req *req, pid_t *pid, int out_fd[2], char **err);

/* Sends sig to every process in *this process's* children (ppid == self),
 * found through /proc: the subreaper's sweep for reparented descendants.
 * Returns how many were signalled. */
int p3d_kill_children(int sig);
/* Sends sig to root and every descendant of it (one /proc pass), and to
 * the process group of each that leads one (workers and their children):
 * ends an agent that does not answer. Returns how many were signalled. */
int p3d_kill_tree(pid_t root, int sig);
/* SIGKILLs every process of session sid (a local agent is one, agent_link.c)
 * until a pass over /proc finds none alive, at most 8 passes: what a lost
 * agent leaves behind (its ranks' children, adopted by us once it died)
 * is gone before its replacement starts. Returns how many were killed. */
int p3d_kill_session(pid_t sid);
/* SIGKILLs and reaps our children until none is left, bounded (2 s), never
 * with a blocking waitpid. */
void p3d_sweep_children(void);
/* A wait status as an exit code: the code, or 128 + the signal. */
int p3d_code_of(int status);

/* ---- hang.c: --hang-timeout ---------------------------------------------- */

/* RUN_DIR/heartbeat through one descriptor (hbdir.c): made (0700) and
 * opened O_DIRECTORY|O_NOFOLLOW, ours: the fd, or -1 with *err. */
int p3d_hbdir_open(const char *dir, char **err);
/* inotify_add_watch on the directory dfd is (not on its path). */
int p3d_hbdir_watch(int ifd, int dfd, uint32_t mask);
/* Removes dfd's rank-R (unlinkat: never through a link). */
void p3d_hbdir_unlink_rank(int dfd, int rank);
/* rmdir(dir) when dir is still the directory dfd is. */
void p3d_hbdir_remove(int dfd, const char *dir);

/* Preemption (preempt.c): --preempt-signal as a number (0: none, the
 * default USR1 when unset); -1 with *err naming the option. */
int p3d_preempt_signal(const p3d_opts *o, int *sig, char **err);
/* sig is the scheduler's warning: --preempt-signal, or SIGTERM with
 * --preempt-on-term (a relay reports it to the leader instead of
 * stopping; an agent does so for the preempt signal only: its SIGTERM
 * may be its parent's death). */
int p3d_preempts(const p3d_opts *o, int sig);
/* RUN_DIR/preempt ($P3D_PREEMPT) written (the signal and the time), said
 * on stderr when it cannot be; cleared when the node's ranks first start. */
void p3d_preempt_touch(const p3d_launch *L, int sig);
void p3d_preempt_clear(const p3d_launch *L);

typedef struct p3d_hangwatch p3d_hangwatch;

/* "ABRT", "SIGABRT" or "6" -> 6; -1 with *err naming --hang-signal. */
int p3d_signal_parse(const char *s, int *sig, char **err);
/* Watches the heartbeat files of the local ranks (ranks borrowed, local
 * order). *out stays NULL when --hang-timeout is off. 0 or -1 with *err. */
int p3d_hang_new(const p3d_launch *L, const int *ranks, int nlocal, p3d_hangwatch **out, char **err);
void p3d_hang_free(p3d_hangwatch *w);
/* The inotify fd to poll (-1 when off). */
int p3d_hang_fd(const p3d_hangwatch *w);
/* A generation starts: the files are removed, no rank is watched yet. */
void p3d_hang_generation(p3d_hangwatch *w);
/* Reads the touches that arrived. */
void p3d_hang_events(p3d_hangwatch *w, double now);
/* Local rank i printed something. */
void p3d_hang_activity(p3d_hangwatch *w, int i, double now);
/* When p3d_hang_check must run next (0: never). pid: local ranks (0 ended). */
double p3d_hang_deadline(const p3d_hangwatch *w, const pid_t *pid);
/* Signals ranks whose time is up (the hang signal and SIGCONT; SIGKILL a
 * grace later). Returns a newly hung local rank, -1 when none: call again
 * until -1. */
int p3d_hang_check(p3d_hangwatch *w, const pid_t *pid, double now);
int p3d_hang_is_hung(const p3d_hangwatch *w, int i);
int p3d_hang_signal(const p3d_hangwatch *w);
double p3d_hang_timeout(const p3d_hangwatch *w);

/* ---- progress.c: the ranks' progress lines ------------------------------ */

/* The most a progress file may hold (one line). */
#define P3D_PROGRESS_MAX 127

typedef struct p3d_progress {
    int step;    /* steps completed */
    double busy; /* seconds of the rank's own work in the last step */
    int ckpt;    /* newest durable checkpoint step, -1 none */
} p3d_progress;

/* Parses "step=N busy=SECONDS[ ckpt=STEP]" (one optional newline):
 * 1 with *p set, 0 for an empty file (a plain heartbeat), -1 otherwise. */
int p3d_progress_parse(const char *s, size_t len, p3d_progress *p);

typedef struct p3d_progwatch p3d_progwatch;

/* Reads the progress files of the local ranks (ranks borrowed, local
 * order); makes RUN_DIR/heartbeat. Free with p3d_progress_free(). 0 or -1
 * with *err. */
int p3d_progress_new(const p3d_launch *L, const int *ranks, int nlocal, p3d_progwatch **out, char **err);
void p3d_progress_free(p3d_progwatch *w);
/* Generation gen starts: the old files are removed, nothing reported. */
void p3d_progress_generation(p3d_progwatch *w, int gen);
/* Reads every file once: 1 with the node's summary in *m (a P message)
 * when some rank's step advanced since the last one, else 0. A rank's
 * first bad file appends one warning line to *warn (malloc'd; the caller
 * frees it). */
int p3d_progress_sample(p3d_progwatch *w, p3d_amsg *m, char **warn);
/* The step of local rank i's last progress line in this generation (read
 * now: a rank that just failed wrote its last one), -1 none. Fault
 * classification (the F packet) compares it across restarts. */
int p3d_progress_step(p3d_progwatch *w, int i);
/* The first sign of life of the ranks of the generation now (a touched
 * heartbeat file or an output line; docs/events.md, "resumed"): the
 * inotify fd to watch (readable when a heartbeat file changed; -1 when w
 * is NULL); p3d_progress_events drains it and p3d_progress_sign takes an
 * output line. Both return 1 and the V packet in *m the first time only
 * in a generation, 0 otherwise. */
int p3d_progress_fd(const p3d_progwatch *w);
int p3d_progress_events(p3d_progwatch *w, p3d_amsg *m);
int p3d_progress_sign(p3d_progwatch *w, p3d_amsg *m);

#endif
