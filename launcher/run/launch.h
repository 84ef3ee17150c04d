/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * launch.h — the run stage's one public header (docs/launch.md): what
 * cmd/ (and the tests) may use of launcher/run/, and what every file of
 * run/ shares. The rest of run/ is declared in headers only run/ includes
 * (the build gives no other stage their folder): controller.h and
 * controller_int.h (the job controller), hub.h (supervise.c's state),
 * mnode.h (the multi-node flow), place.h (placing again), prepare.h (the
 * launch preparation), rundir.h (the run directory).
 *
 * Process tree (why two levels: a supervisor must outlive a SIGKILLed
 * par3drun to kill the workers' grandchildren):
 *
 *   par3drun (launcher: places, writes the placement JSON, subreaper)
 *     └─ agent, one per node (node index + the placement, in memory after
 *        fork; subreaper; PR_SET_PDEATHSIG=SIGTERM so it tears down when
 *        the launcher dies)
 *          └─ worker, one per local rank (own process group,
 *             PR_SET_PDEATHSIG=SIGKILL)
 *
 * The agents report to one job controller (controller.c: a state machine
 * that knows no transport) through supervise.c's transports: a socket pair
 * per local agent, the rendezvous connection per remote agent (a relay,
 * relay.c, on every other node of a multi-node job). The messages are
 * defined once, in wire.h.
 *
 * Files: agent.c (an agent's loop), controller.c (the job's fate),
 * supervise.c (transports + the controller's event loop), relay.c (a
 * non-leader node), wire/agent_proto.c (the messages), output.c (rank output,
 * the terminal sink), spawn.c (starting a worker, ending process trees),
 * bind.c, rank_env.c; the multi-node flow in mnode.c and mnode_place.c.
 */
#ifndef P3D_LAUNCH_H
#define P3D_LAUNCH_H

#include <stdio.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
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
    int nccl_port;               /* > 0: NCCL_COMM_ID=master_addr:nccl_port */
    int gen0;                    /* the restart count agents start with */
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
typedef struct p3d_launch {
    const p3d_opts *o;
    const p3d_jobstate *job;     /* the placement of now */
    const char *run_dir;
    int run_dir_own;             /* made by par3drun: removed after a clean end
                                    (p3d_rundir_finish) */
    const char *placement_path;  /* the job's placement JSON */
    char **extra_env;            /* "K=V" from --env-file then --env */
    size_t nextra;
    int tag;                     /* prefix output lines */
    int emulate;
    const char *program;         /* resolved path of o->argv[0] */
    int events_fd;               /* RUN_DIR/events.jsonl, -1 none (events.c) */
    double t0;                   /* monotonic start of the job */
    struct p3d_store *store;     /* the agent store this process serves at
                                    MASTER_ADDR:MASTER_PORT (tcpstore.h;
                                    TORCHELASTIC_USE_AGENT_STORE=True), NULL:
                                    none, the ranks' rank 0 serves it */
    /* A lost node (docs/launch.md, "When a node dies"): places again
     * without the nodes lost[0..nlost) (cluster indices), keeps the old
     * placement file as placement.<restart>.json, writes the replace
     * event, and sets job->pl and job->gen0 for the agents forked next. Returns 0 with a
     * one-line story in *msg, 1 when the lost nodes ran no rank (nothing
     * moves, no restart), or -1 with the reason in *msg. NULL: this
     * job cannot replace nodes. */
    int (*replace)(void *ctx, const int *lost, int nlost, int restart, const char *reason, char **msg);
    void *replace_ctx;
    /* Multi-node (docs/multinode.md, "When a node dies"): a relay hands a
     * new placement frame's body to adopt, which makes it the node's
     * placement for restart gen (placement.json replaced, the previous one
     * kept); sent(ctx) says that every node now holds job->cplace (the
     * next difference's base). */
    void (*sent)(void *ctx);
    /* type: P3D_MSG_CPLACE or P3D_MSG_CDELTA */
    int (*adopt)(void *ctx, int type, const unsigned char *body, size_t len, int gen, char **err);
    void *adopt_ctx;
    /* Multi-node leader: unhealthy[i] set when node rank i failed its own
     * --health-check before the rendezvous (placed with no ranks, never
     * asked again); NULL: none. */
    const unsigned char *unhealthy;
    /* Leader failover (docs/multinode.md, "When the leader dies";
     * failover_mnode.c): failover on (no --no-failover, a TCP multi-node
     * job); this node's failover port; on a node that finds itself the
     * successor, takeover(ctx, leader, heard, why) runs the job's
     * controller from here on and returns the node's exit code. */
    int failover;
    struct p3d_fgate *gate;
    /* before[0..nbefore): the candidates ahead of this one in the
     * successor list that it could not reach (an election needs them gone) */
    int (*takeover)(void *ctx, int leader, double heard, const char *why, const int *before, int nbefore);
    void *takeover_ctx;
    /* Leadership held in the rendezvous backend (etcd's election; NULL
     * elect_news: none, the majority rule decides): the descriptor the
     * hub watches while this node leads or bids to, and its news
     * (P3D_RDZV_NEWS_*, msg: what it says). */
    int elect_fd;
    int (*elect_news)(void *ctx, char *msg, size_t cap);
    void *elect_ctx;
    /* what a rejoining node tells the successor about itself, and what
     * the successor checks against: the hash of the CPLACE body held
     * (adopt_ctx), this node's address and ports */
    uint64_t (*place_hash)(void *ctx);
    const char *self_addr;
    int self_master_port, self_nccl_port;
    int self_failover_port; /* 0: none */
    const char *bind_addr;  /* where this node's listeners bind (multi-node; NULL: a job on one host):
                             * the ranks get it as P3D_BIND_ADDR */
    /* the successor: a node rejoined (its address and ports, for the
     * placement's MASTER_ADDR when rank 0 lands there) */
    void (*rejoined)(void *ctx, int node, const char *addr, int master_port, int nccl_port, int failover_port);
    /* the job key (the token): what a failover dial proves (NULL on a
     * single node) */
    const char *key;
    /* the leader: the successor list (S, untagged), sent to each node once
     * it first speaks on the fate channel (it holds its placement then:
     * nothing else is read on its connection before) */
    const struct p3d_wbuf *successors;
} p3d_launch;

/* ---- place.c: the placement pipeline shared by `--dry-run` and launch ---- */

/* options -> cluster -> job -> policy -> checks, plus the naive baseline
 * that reports compare against. docs/dry-run.md describes what it reads. */
typedef struct p3d_plan_result {
    p3d_cluster *cluster;     /* owned */
    p3d_job job;              /* dp resolved */
    p3d_placement *pl;        /* the chosen policy's placement, owned */
    p3d_analysis *an;         /* its checks and link scores, owned */
    p3d_placement *base_pl;   /* naive.lua on the same input; NULL when the
                                 policy is naive itself or the baseline failed */
    p3d_analysis *base_an;
    char *base_err;           /* why there is no baseline (NULL when there is
                                 one or the policy is naive), owned */
    /* The other bundled policies (and --policy-candidates) on the same
     * input, when a model gives estimates: each one's step time and error
     * count. With --policy auto, pl/an are the placement that passes
     * every error-level check with the fewest warning-level ones, the
     * fastest estimate among those (a warning says the placement works
     * against the job, so it is not outweighed by a few percent of an
     * estimate), and alt[] holds the rest. */
    struct p3d_policy_alt {
        char name[64];
        double step_time;   /* seconds, 0 without an estimate */
        int nerrors, nwarnings;
        char warned[96];    /* its warning-level check codes, comma-separated */
        char why[160];      /* what the faster one saves, when it is faster */
    } alt[8];
    int nalt;
    int auto_chosen;          /* 1: --policy auto picked pl */
    /* The nodes the policy sees: those with role P3D_NODE_USE (plus, for a
     * replacement, the spares), borrowed from cluster; view_map[i] is view
     * node i's index in cluster. NULL when every node is used. */
    p3d_cluster *view;
    int *view_map;
    /* seconds per stage, for --verbose and bench/ */
    double t_cluster, t_policy, t_check, t_baseline;
} p3d_plan_result;

/* Where the nodes come from, in this order:
 *  1. --cluster FILE; inside a Slurm allocation (SLURM_JOB_NODELIST set)
 *     only the allocation's nodes, in the hostlist's order;
 *  2. otherwise one node from --topology (default "local").
 * --nproc-per-node N then gives every node N rank slots (CPU slots on a
 * node without GPUs, see p3d_cluster_set_slots), --slurm-topology is
 * applied, dp is resolved, the policy runs and is checked, and naive.lua
 * runs as the baseline. Returns 0 with *out filled (free with
 * p3d_plan_result_free), or -1 with a one-line message in *err: bad input,
 * exit 2. Error-level checks are NOT a failure here: the caller decides
 * (dry-run prints and exits 2, launch refuses). */
int p3d_place(const p3d_opts *o, p3d_plan_result *out, char **err);
/* The same from job resolution on, over a cluster built elsewhere (the
 * multi-node rendezvous gathers it from the agents); takes ownership of
 * cluster (freed with *out, also on failure). */
int p3d_place_cluster(const p3d_opts *o, p3d_cluster *cluster, p3d_plan_result *out, char **err);
void p3d_plan_result_free(p3d_plan_result *r);
/* --exclude and --spares on a loaded cluster, the same on every command:
 * the --exclude'd nodes become P3D_NODE_EXCLUDED (an unknown name is an
 * error naming the option and the node), then job->spares nodes become
 * P3D_NODE_SPARE, chosen by --policy's spares() hook or par3d.default_spares
 * (always the default under --policy auto). */
int p3d_place_roles(const p3d_opts *o, p3d_cluster *c, const p3d_job *job, char **err);
/* For the commands that place nothing (plan, cluster): keeps only c's
 * P3D_NODE_USE nodes, in order. */
int p3d_place_keep_usable(p3d_cluster *c, char **err);

/* One line (no newline) saying that another policy's estimate beats the
 * chosen one on this input and why, or "" when none does; into buf. A
 * faster policy whose placement has more warning-level checks than the
 * chosen one is named with them and not advised. */
void p3d_place_policy_note(const p3d_plan_result *r, char *buf, size_t cap);
/* The codes of a's warning-level checks, comma-separated, into buf. */
void p3d_place_warned(const p3d_analysis *a, char *buf, size_t cap);

/* The report input over a result (colour off). */
p3d_report_in p3d_plan_report_in(const p3d_plan_result *r);

/* ---- warnings.c ---------------------------------------------------------- */

/* Prints "par3drun: warning: CODE: message" for each warning-level check
 * of an (unless quiet); returns how many there are. */
struct p3d_analysis;
int p3d_launch_warnings(const struct p3d_analysis *an, int quiet);

/* ---- rank_env.c ---------------------------------------------------------- */

/* A growable NULL-terminated vector of malloc'd "K=V" strings. */
typedef struct p3d_envv {
    char **v;
    size_t n, cap;
} p3d_envv;

/* Sets K=V (replacing an existing K). Returns 0 or -1 (out of memory). */
int p3d_envv_set(p3d_envv *e, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Adds a "K=V" string (replacing an existing K); -1 when it has no '='. */
int p3d_envv_put(p3d_envv *e, const char *kv);
const char *p3d_envv_get(const p3d_envv *e, const char *key);
void p3d_envv_free(p3d_envv *e);

/* The whole environment of global rank r (base environment, then the
 * contract of docs/launch.md, then extra_env), restart count restart.
 * Caller frees *out with p3d_envv_free(). */
int p3d_rank_env(const p3d_launch *L, char *const *base, int r, int restart,
                 p3d_envv *out, char **err);

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

/* ---- peers.c: the nodes that do the same work ------------------------- */

#define P3D_PEER_WHAT 48

/* For agents i < n (agent i runs cluster node nodes[i]; ncluster nodes):
 * group[i], equal for nodes whose ranks hold the same (pp, tp, cp, ep)
 * coordinates, -1 for a node without ranks; what[i] "pp stage 3" or "pp
 * stages 0-1". 0, or -1 (out of memory). */
int p3d_peer_groups(const p3d_placement *pl, const int *nodes, int n, size_t ncluster, int *group,
                    char (*what)[P3D_PEER_WHAT]);

/* ---- agent.c ------------------------------------------------------------- */

/* Runs node `node`'s local ranks until the controller (on upstream, a
 * SOCK_SEQPACKET socket, wire.h) says the job is over; returns the
 * agent's exit code. Blocks SIGCHLD and the forwarded signals for its own
 * signalfd. */
int p3d_agent_run(const p3d_launch *L, int node, int upstream);

/* ---- supervise.c: the controller's transports ---------------------------- */

/* Forks the agent of node `node` on a new socket pair; the child closes
 * close_fds first (what belongs to the parent). 0, or -1 with errno. */
int p3d_agent_fork(const p3d_launch *L, int node, const int *close_fds, int nclose, pid_t *pid, int *sock);

/* Runs the job controller (controller.h) over nnodes agents: agent i is
 * node nodes[i]; remote (NULL: none) gives agent i's rendezvous
 * channel, or NULL for an agent forked here. Remote channels are taken
 * over (remote[i] set to NULL; the hub frees them). Prints the root cause once; returns the job's exit code. */
int p3d_hub_run(const p3d_launch *L, const int *nodes, int nnodes, struct p3d_chan **remote);

/* One node, or --emulate: every agent is forked here. */
int p3d_launcher_run(const p3d_launch *L, const int *nodes, int nnodes);

/* ---- launch_local.c, mnode.c: the two launch paths ----------------------- */

/* A job run from here (launch_local.c): node < 0: every node that holds
 * ranks or is a spare (one node, or --emulate); node >= 0: only that one
 * (`par3drun __agent --node-rank`). Prints what went wrong; returns the
 * job's exit code. */
int p3d_local_launch(const p3d_opts *o, int node);
/* A multi-node job when a rendezvous is asked for (mnode.c): the job's
 * exit code, or -1 when there is no rendezvous (p3d_local_launch then). */
int p3d_rdzv_launch(const p3d_opts *o);

/* Sends one agent_proto packet as a P3D_MSG_FATE frame on a node's
 * channel (wire.h, p3d_chan: tagged with its session key). 0 or -1. */
struct p3d_chan;
int p3d_fate_send(struct p3d_chan *ch, const char *pkt, size_t len);
/* Reads what a node's channel has (tags checked) and calls fn for each
 * well-formed agent_proto message (p3d_fate_take). -1 (with *err) when
 * the connection is gone or a frame failed its tag check (the caller
 * drops it). peer: the node's name. */
int p3d_fate_read(struct p3d_chan *ch, const char *peer, void (*fn)(void *ctx, const p3d_amsg *m), void *ctx,
                  char **err);
/* One frame of the fate channel from peer (a node name), read by the
 * leader (down = 0) or a relay (down = 1), its tag already checked by the
 * channel. 1: a FATE packet that travels this way is in *m (its text
 * points into body, which must have a writable byte past len); 2 (down
 * only): a CPLACE or CDELTA frame, for the caller; 0: dropped with one
 * line (p3d_fate_complain). */
int p3d_fate_take(const char *peer, int down, int type, unsigned char *body, size_t len, p3d_amsg *m);
/* Says, once per process and rate-limited, that a frame from peer failed
 * its tag check (why): the connection is ended by the caller. */
void p3d_fate_forged(const char *peer, int down, const char *why);

/* "its process was killed by signal 9 (KILL)" / "... ended with exit
 * code N" for a lost agent. */
void p3d_exit_how(int status, char *buf, size_t cap);

/* The signals the agent and controller loops take through a signalfd:
 * SIGCHLD, the four that stop a job, and Slurm's SIGUSR1/2 warnings. */
void p3d_launch_sigset(sigset_t *s);
/* Blocks them and returns a non-blocking signalfd for them, or -1. */
int p3d_signalfd(void);

/* ---- events.c: RUN_DIR/events.jsonl ------------------------------------- */

/* Opens (truncates) RUN_DIR/events.jsonl; -1 when it cannot. */
int p3d_events_open(const char *run_dir);
/* Appends {"ts": UNIX, "t": SECONDS-SINCE-t0, <fields>} as one line; fmt
 * gives the fields ("\"event\": \"start\", ..."). fd < 0: nothing. */
void p3d_event(int fd, double t0, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* s as a JSON string literal (quotes included), cut to fit cap. */
void p3d_json_str(char *buf, size_t cap, const char *s);

/* ---- relay.c ------------------------------------------------------------- */

/* A multi-node node other than the leader: forks its agent and relays
 * between it and the leader's controller on up (taken over). Returns the
 * node's exit code (the job's, as the leader decided it). */
int p3d_relay_run(const p3d_launch *L, int me, struct p3d_chan *up);

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
    unsigned timer;      /* the kill's timer; 0: none */
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
    double seconds;             /* from the start of the checks */
    char how[P3D_HEALTH_HOW];   /* "passed", or how it failed and the last
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
                                     const unsigned char *skip, p3d_health_res *res,
                                     void (*done)(void *ctx, int nbad), void *ctx);
int p3d_health_run_cmd(const p3d_health_cmd *hc, const char *const *names, int n, const unsigned char *skip,
                       p3d_health_res *res);
/* Ends the checks still running (SIGKILL to their groups, reaped) and frees
 * the job; done is not called. */
void p3d_health_cancel(p3d_health_job *j);
/* For a phase that has no loop of its own (a node's check before it
 * joins the rendezvous): the same on a loop of its own, until every check
 * ended. Returns how many failed. */
int p3d_health_run(const p3d_opts *o, const char *const *names, int n, const unsigned char *skip,
                   p3d_health_res *res);
/* Sets r->how from text received from elsewhere: printable ASCII only
 * ('?' for the rest), cut to P3D_HEALTH_HOW-1 bytes. */
void p3d_health_set_how(p3d_health_res *r, const char *text);
/* The events.jsonl "health" record of one node's result. */
void p3d_health_event(int events_fd, double t0, const char *node, const p3d_health_res *r);


/* --preflight and `par3drun preflight` (preflight.c, preflight_apply.c):
 * every node of the job runs p3d-worker --bench-node at once; a node more
 * than --slow-factor below the median, or whose benchmark fails or
 * outlasts --preflight-timeout, is excluded (docs/launch.md, "Preflight"). */
/* One node's figures (-1: none) and verdict. */
typedef struct p3d_preflight_node {
    const char *name;   /* the caller's */
    int ran;            /* the benchmark ended with its figures */
    int excluded;
    double gflops, mem_gbps, tcp_out_mbps, tcp_in_mbps;
    double p2p_gbps;    /* GPUs: the slowest peer link of the fastest class */
    int gpus;           /* GPUs benchmarked; 0: the CPU backend */
    int tcp_cleared;    /* both its ring links slow, explained by its slow
                         * neighbours: its TCP figure is not held against it */
    double seconds;
    const char *links;  /* what became of the NVLink links (static text) */
    char why[320];      /* excluded: why; "" otherwise */
} p3d_preflight_node;

typedef struct p3d_preflight {
    int n, nexcluded;
    p3d_preflight_node *nodes;
    double median_gflops, median_mem_gbps, median_tcp_mbps; /* -1: none */
    double median_p2p_gbps; /* over the nodes with GPU peer links; -1 none */
    int any_gpu;        /* some node benchmarked GPUs (the table's columns) */
    int tcp_judged;     /* 3 nodes or more: a slow link's end can be told */
    int judged;         /* compute and memory: 3 nodes or more gave them */
    int p2p_judged;     /* GPU peer links: 3 nodes or more gave them */
    double slow_factor, timeout, seconds;
    const char *tcp_note; /* no ring ran: why (static text), else NULL */
    int nrun_none;      /* nodes that ran no preflight (multi-node: started
                         * without --preflight): not judged */
} p3d_preflight;

/* Runs the benchmark on names[0..n) (all on this host: --emulate or one
 * node), judges it and fills *pf (freed with p3d_preflight_free, also
 * after a failure). Returns 0, or -1 with *err (the benchmark could not be
 * started at all: p3d-worker not found, no sockets). */
int p3d_preflight_run(const p3d_opts *o, const char *const *names, int n, p3d_preflight *pf, char **err);
void p3d_preflight_free(p3d_preflight *pf);
/* The table `par3drun preflight` prints: one row per node. */
void p3d_preflight_table(const p3d_preflight *pf, FILE *f);
/* The report's "preflight" object (docs/report-json.md), malloc'd; NULL
 * out of memory. */
char *p3d_preflight_json(const p3d_preflight *pf);
/* The nodes --preflight benchmarks: those that hold ranks in r's
 * placement and the spares, in cluster order, as cluster indices and names
 * (both malloc'd, the caller frees them, also after a failure). Returns how
 * many, or -1 with *err (exit 2: more than one node without --emulate). */
int p3d_preflight_nodes(const p3d_opts *o, const p3d_plan_result *r, int **nodes, const char ***names, char **err);
/* --preflight on a placed job (launch, dry run): runs it, writes its
 * events (events_fd < 0: none) and its table (table NULL: none), says
 * which nodes are excluded and moves their ranks to spares in r; *json
 * gets the report's "preflight" object (malloc'd, or NULL). Returns 0, or
 * the exit code with the message printed (2 bad input, 1 a node excluded
 * that no spare can replace, or the preflight could not run). */
int p3d_preflight_apply(const p3d_opts *o, p3d_plan_result *r, int events_fd, double t0, FILE *table, char **json);

#endif
