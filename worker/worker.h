/* SPDX-License-Identifier: BSD-3-Clause */
/* worker.h - private interfaces of p3d-worker, the bundled 3D-parallel
 * training worker.  Nothing here is public: the worker is a program, not a
 * library.  The pieces:
 *
 *   env.c        the launcher's rank environment (RANK, P3D_TP_GROUP, ...)
 *   tcp_boot.c   TCP communicator: bootstrap, connections, splits
 *   tcp_xchg.c   its progress engine: framed messages, sends+receives, strict
 *   tcp_allreduce.c  its ring all-reduce and all-to-all
 *   groups.c     derive TP/PP/DP (and EP/ETP/EDP) groups by splits and check
 *                them against env
 *   train.c      the model and the 1F1B schedule, written once against
 *                struct p3d_ops so the CPU and CUDA backends share it
 *   moe.c        the optional MoE layer: routing, EP all-to-all dispatch and
 *                combine, experts sharded over EP x ETP
 *   ckpt.c       --checkpoint-dir: atomic per-rank shards, resume, fencing
 *   ckpt_fs.c    the checkpoint directory on disk (marker, safe opens, writes)
 *   cpu_ops.c    the fp32 C backend (collectives over tcp_comm)
 *   cuda/         the CUDA/NCCL backend (built when CUDA and NCCL are found)
 *   report.c     per-rank JSON lines and the rank-0 summary
 *   bench.c      --bench-allreduce and --bench-memcpy
 *   bench_node.c --bench-node (par3drun --preflight)
 *   main.c       options, backend choice, --verify
 */
#ifndef P3D_WORKER_H
#define P3D_WORKER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options -------------------------------------------------------- */

typedef struct p3dw_opts {
    int layers, hidden, global_batch, micro_batches, steps;
    int seq_len; /* tokens per sample; each is one row of h values */
    double lr;
    uint64_t seed;
    int verify, json, check_grad;
    double verify_tol;      /* 0: the backend's default */
    const char *backend;    /* "cpu", "cuda" or "auto" */
    const char *p2p;        /* "buffered" or "strict" (CPU backend) */
    double timeout;         /* seconds for one communication op */
    double connect_timeout; /* seconds for bootstrap and connections */
    int bench_allreduce, bench_memcpy;
    size_t bench_min, bench_max; /* bytes */
    int bench_iters;
    int bench_node;             /* --bench-node (bench_node.c) */
    int bench_tcp_fd;           /*   the listening socket par3drun handed over */
    int bench_tcp_key_fd;       /*   -1, or where the job key is read from: the
                                 *   ring's connections then prove it */
    const char *bench_tcp_peer; /*   HOST:PORT of the ring's next node; NULL: no TCP */
    const char *bench_tcp_slot; /*   I:N:T: stream in slot I of N from T (one host) */
    int bench_tcp_only;         /*   the TCP figures alone (a multi-node ring) */
    int bench_serial;           /*   compute and memory in slots too (one host) */
    double bench_seconds;       /*   about this long per figure */
    const char *checkpoint_dir; /* NULL: no checkpoints */
    int checkpoint_every;       /* steps between checkpoints (0: only with --checkpoint-dir, 1) */
    int checkpoint_keep;        /* complete checkpoints kept (0: all) */
    int experts, top_k;         /* --experts 0: no MoE layers */
} p3dw_opts;

/* Rows of h values one step trains on: every sample is seq_len tokens,
 * each token one row (the MLP sees no sequence). */
static inline long p3dw_rows(const p3dw_opts *o)
{
    return (long)o->global_batch * (o->seq_len > 0 ? o->seq_len : 1);
}

/* ---- rank environment (env.c) ---------------------------------------- */

/* The dense grid tp x pp x dp (P3DW_NDIM dims, the groups train.c always
 * has), then the expert grid's own dims (Megatron's: etp x ep x edp x pp,
 * EP carved out of the dense DP ranks), read from P3D_EP_*, P3D_ETP_*,
 * P3D_EDP_* (defaults ep 1, etp tp, edp dp when unset). */
enum { P3DW_TP, P3DW_PP, P3DW_DP, P3DW_NDIM, P3DW_EP = P3DW_NDIM, P3DW_ETP, P3DW_EDP, P3DW_NALL };
extern const char *const p3dw_dim_name[P3DW_NALL]; /* "tp", "pp", "dp", "ep", "etp", "edp" */

typedef struct p3dw_env {
    int rank, world, local_rank, local_world, node_rank;
    char master_addr[256];
    int master_port;
    char job_id[128];
    char node[64];   /* P3D_NODE (the cluster's node name), else the host name */
    long generation; /* P3D_GENERATION (0 when unset): the fencing token */
    int coord[P3DW_NALL], size[P3DW_NALL];
    int *group[P3DW_NALL]; /* launcher's P3D_*_GROUP lists (owned; NULL if unset) */
    int ngroup[P3DW_NALL];
} p3dw_env;

/* Reads the environment.  Returns 0, or -1 after printing which variable is
 * missing or malformed.  Free with p3dw_env_free(). */
int p3dw_env_read(p3dw_env *e, int need_mesh);
void p3dw_env_free(p3dw_env *e);
/* par3drun's batch (P3D_GLOBAL_BATCH, P3D_MICRO_BATCHES; docs/launch.md
 * "Elastic width") as the defaults of --global-batch and --micro-batches,
 * which the command line then overrides: a job that changes its width
 * accumulates what the launcher says.  0, or -1 after printing which
 * variable is malformed. */
int p3dw_env_batch(p3dw_opts *o);
/* Parses "r0,r1,..." into a malloc'd array; returns the count or -1. */
int p3dw_parse_list(const char *s, int **out);

/* ---- TCP communicator (tcp_boot.c, tcp_xchg.c, tcp_allreduce.c) ---------------------------------- */

typedef struct tcp_world tcp_world; /* one per process */
typedef struct tcp_comm {
    tcp_world *w;
    uint32_t tag;   /* distinguishes this communicator's messages */
    int size, rank; /* my index in members */
    int *members;   /* world ranks, ordered by key (owned) */
    int colour;     /* of the split that made it (the CUDA backend splits alike) */
} tcp_comm;

/* Rank 0 binds master_port (SO_REUSEADDR); the others connect with retries
 * until connect_timeout.  Returns NULL after printing why. */
tcp_world *tcp_world_init(const p3dw_env *e, double connect_timeout, double op_timeout);
void tcp_world_free(tcp_world *w);
int tcp_world_rank(const tcp_world *w);
int tcp_world_size(const tcp_world *w);
/* --p2p strict: from now on a send completes only once the receiver has
 * posted the matching receive (NCCL's rule), so a schedule that relies on
 * buffering deadlocks here too (and fails at --timeout with a message). */
void tcp_world_set_strict(tcp_world *w, int strict);
/* Star collectives through rank 0 (used at start and end only). */
int tcp_world_allgather(tcp_world *w, const void *mine, void *all, size_t each);
int tcp_world_barrier(tcp_world *w);
/* Plain world point-to-point (any pair; direct connections made on demand
 * are not needed: rank 0 is connected to everyone from the bootstrap). */
int tcp_world_send(tcp_world *w, int to, const void *buf, size_t len);
int tcp_world_recv(tcp_world *w, int from, void *buf, size_t len);
/* Collective over the world: members with the same colour form one
 * communicator, ordered by (key, world rank).  Fills *c (free with
 * tcp_comm_free).  Connections to ring neighbours are made later by
 * tcp_world_connect(), once every communicator of the process exists. */
int tcp_comm_split(tcp_world *w, int colour, int key, tcp_comm *c);
void tcp_comm_free(tcp_comm *c);
/* Collective over the world: opens the direct connections every split
 * communicator needs (ring neighbours).  Returns 0 or -1. */
int tcp_world_connect(tcp_world *w);

typedef enum { TCP_F32, TCP_F64 } tcp_dtype;
int tcp_allreduce(tcp_comm *c, void *buf, size_t count, tcp_dtype t);
/* Sends slen bytes to member `to` while receiving rlen bytes from member
 * `from` (-1: that side off), both progressing together: the CPU form of a
 * grouped ncclSend + ncclRecv. */
int tcp_sendrecv(tcp_comm *c, int to, const void *sbuf, size_t slen, int from, void *rbuf, size_t rlen);
/* All-to-all with per-member byte counts: segment j of sbuf (sbytes[j],
 * segments back to back in member order) goes to member j, segment j of
 * rbuf comes from member j.  n-1 pairwise exchanges (send to rank+s while
 * receiving from rank-s), each progressing both directions, so it cannot
 * deadlock under --p2p strict.  Members need direct connections to every
 * other member: call tcp_comm_connect_all() before tcp_world_connect(). */
int tcp_alltoallv(tcp_comm *c, const void *sbuf, const size_t *sbytes, void *rbuf, const size_t *rbytes);
/* Marks every member of c as needing a direct connection (all-to-all). */
void tcp_comm_connect_all(tcp_comm *c);
/* What the comm is used for, for error messages ("TP all-reduce"). */
void tcp_set_activity(tcp_world *w, const char *what);

/* ---- groups (groups.c) ------------------------------------------------ */

/* Derives the TP/PP/DP communicators and the expert grid's EP/ETP/EDP ones
 * by splits over coordinates allgathered from every rank, checks the mesh
 * and compares each group with the launcher's lists.  The EP members get
 * all-to-all connections when moe is set.  Returns 0, or -1 after printing
 * both lists. */
int p3dw_groups_make(tcp_world *w, const p3dw_env *e, tcp_comm comm[P3DW_NALL], int moe);
/* Compares a derived group with the launcher's; 0 if equal, else -1 with a
 * message naming both.  Exposed for tests through the worker's output. */
int p3dw_group_compare(int rank, const char *dim, const int *mine, int nmine, const int *env, int nenv);

/* ---- backend operations (cpu_ops.c, cuda/) ---------------------------- */

/* A group as train.c sees it: size/rank, plus the backend's handle. */
typedef struct p3dw_group {
    int size, rank;
    const char *name; /* "TP", "PP" or "DP", for messages */
    void *impl;       /* tcp_comm * (cpu) or the CUDA backend's communicator */
} p3dw_group;

/* Buffers are opaque "device" pointers of floats.  Compute calls may be
 * asynchronous; collectives and sync() return only when done.  Collective
 * calls return 0 or -1 (message printed); compute failures are fatal inside
 * the backend (they mean a broken device, not a peer). */
typedef struct p3d_ops {
    const char *name;
    void *(*alloc)(size_t n);
    void (*release)(void *p);
    void (*upload)(void *dst, const float *src, size_t n);
    void (*download)(float *dst, const void *src, size_t n);
    void (*zero)(void *dst, size_t n);
    void (*copy)(void *dst, const void *src, size_t n);
    /* Row-major C[M x N] = op(A)·op(B) + beta·C; ta/tb: 0 plain, 1 transposed. */
    void (*gemm)(int ta, int tb, int M, int N, int K, const void *A, const void *B, void *C, float beta);
    void (*gelu_fwd)(const void *Z, void *G, size_t n);
    void (*gelu_bwd)(const void *Z, const void *dG, void *dZ, size_t n);
    /* Returns sum((Y-T)^2) and writes dY = scale·(Y-T). */
    double (*mse)(const void *Y, const void *T, void *dY, size_t n, float scale);
    void (*sgd)(void *W, const void *G, size_t n, float lr);
    /* Y += a·X */
    void (*axpy)(void *Y, const void *X, size_t n, float a);
    int (*allreduce)(p3dw_group *g, void *buf, size_t n);
    int (*allreduce_host_f64)(p3dw_group *g, double *buf, size_t n);
    /* Sends sn floats to member sto while receiving rn floats from member
     * rfrom (-1 leaves that side out), as ONE operation: both progress
     * together (NCCL: one ncclGroupStart/End), so a pair of stages that
     * send to each other cannot deadlock even when a send waits for its
     * receive.  The pipeline's only point-to-point primitive. */
    int (*sendrecv)(p3dw_group *g, int sto, const void *sbuf, size_t sn, int rfrom, void *rbuf, size_t rn);
    /* All-to-all in bytes (MoE dispatch/combine over the EP group):
     * segment j of sbuf (sbytes[j], back to back) to member j, segment j of
     * rbuf from member j.  NCCL: ncclSend/ncclRecv per peer, grouped. */
    int (*alltoallv)(p3dw_group *g, const void *sbuf, const size_t *sbytes, void *rbuf, const size_t *rbytes);
    void (*sync)(void);
} p3d_ops;

extern const p3d_ops p3dw_cpu_ops;

/* ---- training (train.c) ------------------------------------------------ */

typedef struct p3dw_stats {
    double steps, step_time; /* sum over steps */
    double tp_ops, tp_bytes, tp_bus_bytes, tp_time;
    double pp_send_ops, pp_send_bytes, pp_send_time;
    double pp_recv_ops, pp_recv_bytes, pp_recv_time; /* recv time = idle */
    double dp_ops, dp_bytes, dp_bus_bytes, dp_time;
    double ep_ops, ep_bytes, ep_time; /* all-to-all: bytes sent to other members */
    double edp_ops, edp_bytes, edp_bus_bytes, edp_time;
} p3dw_stats;

/* ---- checkpoints (ckpt.c) --------------------------------------------- */

typedef struct p3dw_ckpt {
    const char *dir;
    int every, keep;
    tcp_world *w;
    const p3dw_env *e;
    const p3dw_opts *o;
    int dfd; /* the checked directory (p3dw_ckpt_open); -1 when closed */
} p3dw_ckpt;
/* Creates the directory (mode 0700) and opens it once, refusing one that is
 * not ours or that others may write.  0 or -1 (message printed: exit 2).
 * Close with p3dw_ckpt_close(). */
int p3dw_ckpt_open(p3dw_ckpt *c);
void p3dw_ckpt_close(p3dw_ckpt *c);
/* Collective: every rank loads the newest step whose checkpoint every rank
 * completed and whose shard (of the marker's generation) is good on every
 * rank, into params (nparam floats, this rank's shard) and losses (o->steps
 * doubles).  Returns the step (0: none, params untouched), -1 on a failure,
 * -2 when a marker or shard belongs to another mesh or model (exit code 2),
 * -3 when that step is at or past --steps (exit code 3); messages printed. */
int p3dw_ckpt_load(const p3dw_ckpt *c, float *params, size_t nparam, double *losses);
/* Collective: writes this rank's shard of `step` atomically, then rank 0
 * the completion marker once every rank's shard is durable; refuses (-1)
 * to write into a step a newer generation of this job committed.  0 or -1. */
int p3dw_ckpt_save(const p3dw_ckpt *c, int step, const float *params, size_t nparam, const double *losses);

typedef struct p3dw_run {
    const p3d_ops *ops;
    p3dw_group g[P3DW_NALL]; /* ETP is the TP group (the MoE layer needs etp == tp) */
    int micro_batches;
    int print_loss; /* this rank prints the loss of each step */
    int json;
    int quiet;             /* reference run: no printing */
    const p3dw_ckpt *ckpt; /* NULL: no checkpoints (the --verify reference) */
    int die_at_step;       /* P3DW_DIE (tests only): SIGKILL myself before this step */
    double stall_s;        /* P3DW_STALL (tests only): extra own work per step */
    /* P3DW_SOLO_COMM (tests only): run every collective even on a group of
     * one (all-reduce, a self send/receive on the last stage's output, the
     * all-to-all's self segment), so one GPU runs each NCCL data call. */
    int solo_comm;
    int break_router; /* P3DW_BREAK=router: the MoE router gradient dropped */
    /* preemption (preempt.c): the ranks agree after every step whether
     * one was told to stop (armed: P3D_PREEMPT_SIGNAL and --checkpoint-dir);
     * preempted: the step whose checkpoint they wrote before ending, 0 none */
    int preempt_sig;
    int preempted;
} p3dw_run;

/* Trains opts->steps steps.  losses[steps] receives the global mean loss of
 * each step on the last stage's ranks (other ranks: 0).  Returns 0, -1, or
 * -2 when the checkpoint to resume from belongs to another mesh/model, -3
 * when it is at or past --steps (p3dw_ckpt_load). */
int p3dw_train(const p3dw_opts *o, p3dw_run *r, double *losses, p3dw_stats *st);

/* Preemption (preempt.c): installs the handler of $P3D_PREEMPT_SIGNAL
 * (SIGUSR1 or SIGUSR2); the signal, or 0 when unset or another one.
 * agreed: collective over the world (every rank calls it after the same
 * step): 1 when any rank was told to stop (the signal, or $P3D_PREEMPT
 * exists), 0 when none, -1 when the exchange failed. */
int p3dw_preempt_arm(void);
int p3dw_preempt_agreed(p3dw_run *r);

/* After a step: "step=N busy=SECONDS[ ckpt=STEP]" to $P3D_HEARTBEAT (ckpt
 * -1: none; no P3D_HEARTBEAT: nothing). heartbeat.c. */
void p3dw_heartbeat(int step, double busy, int ckpt);
/* Checks the model shape against the mesh; prints and returns -1 if bad. */
int p3dw_check_shape(const p3dw_opts *o, int tp, int pp, int dp, int m);
/* The same for --experts/--top-k against ep and etp. */
int p3dw_check_moe(const p3dw_opts *o, int tp, int ep, int etp);

/* A TP all-reduce of n floats, timed into st (train.c; no-op for tp 1). */
int p3dw_tp_allreduce(p3dw_run *r, p3dw_stats *st, float *buf, size_t n);

/* ---- MoE layer (moe.c) ------------------------------------------------ */
typedef struct p3dw_moe p3dw_moe;
/* Buffers for b tokens per micro-batch and nslot MoE layers on this stage.
 * NULL when out of memory (printed). */
p3dw_moe *p3dw_moe_new(const p3dw_opts *o, p3dw_run *r, p3dw_stats *st, int b, int nslot);
void p3dw_moe_free(p3dw_moe *M);
size_t p3dw_moe_router_size(const p3dw_moe *M); /* floats: h x E */
size_t p3dw_moe_expert_size(const p3dw_moe *M); /* floats: this rank's expert shards */
/* Initialises global layer `layer`'s router and expert shards (host: a
 * staging buffer of at least max(h·E, 2·h·fe) floats). */
void p3dw_moe_init(p3dw_moe *M, int layer, float *router, float *experts, float *host);
/* Forward of micro-batch k through MoE layer `slot` (0.. on this stage):
 * X -> Y (b x h).  Collective over EP and TP.  0 or -1. */
int p3dw_moe_forward(p3dw_moe *M, int k, int slot, const float *router, const float *experts, const float *X, float *Y);
/* Backward: dy -> dx (dx != dy), accumulating the router's and experts'
 * gradients.  0 or -1. */
int p3dw_moe_backward(p3dw_moe *M, int k, int slot, const float *router, const float *experts, float *drouter,
                      float *dexperts, const float *X, const float *dy, float *dx);

/* Deterministic value in [-1, 1) from a seed and three indices. */
float p3dw_hash_uniform(uint64_t seed, uint64_t kind, uint64_t a, uint64_t b);

/* ---- gradient check (gradcheck.c) ----------------------------------- */
/* Finite-difference check of one layer's gradients with the given ops;
 * prints a verdict line.  Returns 0 when every sampled entry agrees within
 * tol (relative). */
int p3dw_check_grad(const p3dw_opts *o, const p3d_ops *ops, double tol, int verbose);

/* ---- report (report.c) ---------------------------------------------- */

typedef struct p3dw_rank_record {
    double rank, node_rank, coord[P3DW_NALL];
    p3dw_stats st;
    char node[64]; /* the rank's p3dw_env.node, NUL-terminated */
} p3dw_rank_record;

/* Per-rank JSON: on stdout with --json, in P3D_LOG_DIR when set. */
void p3dw_report_rank(const p3dw_env *e, const char *backend, int m, const p3dw_rank_record *rec, int json);
/* Rank 0: a human table (default) or the JSON summary (--json), and the
 * JSON summary in P3D_LOG_DIR when set. */
void p3dw_report_summary(const p3dw_env *e, const char *backend, const p3dw_opts *o, const p3dw_rank_record *all, int n,
                         const char *verify, double max_rel, double drop);
double p3dw_analytic_bubble(int pp, int m);

/* ---- benchmarks (bench.c) --------------------------------------------- */
int p3dw_bench_memcpy(const p3dw_opts *o);
int p3dw_bench_allreduce(const p3dw_opts *o, tcp_world *w);
/* --bench-node: the preflight's figures of this node, one line on stdout
 * (bench_node.c). 0, or -1 with a message. */
int p3dw_bench_node(const p3dw_opts *o);

/* ---- CUDA backend (cuda/, a module loaded with dlopen) ---------------
 * The CUDA libraries (cudart, cuBLAS, NCCL) take about a second to load;
 * CPU runs must not pay for that, and the worker must start where they are
 * missing.  So the backend is p3d-worker-cuda.so next to the executable (or
 * $P3D_WORKER_CUDA_LIB), exporting one descriptor, ABI number first. */
/* --bench-node's figures on the GPUs (cuda_bench.cu): the node's are its
 * slowest GPU's and its slowest peer link's. */
typedef struct p3dw_gpu_figs {
    int ngpus;
    double gflops; /* SGEMM GFLOP/s of the slowest GPU (gflops_gpu) */
    int gflops_gpu;
    double mem_gbps; /* device-to-device copy GB/s of the slowest (mem_gpu) */
    int mem_gpu;
    double gemm_maxrel; /* the SGEMMs against the CPU reference, worst */
    double p2p_gbps;    /* the slowest peer link of the fastest class, one
                         * way (p2p_a -> p2p_b); -1: no peer-capable pair */
    int p2p_a, p2p_b;
    int npairs; /* ordered pairs measured */
} p3dw_gpu_figs;

#define P3DW_CUDA_ABI 4
typedef struct p3dw_cuda_api {
    int abi;
    /* Number of usable GPUs; 0 when none, with *why a static explanation. */
    int (*probe)(const char **why);
    /* Selects the GPU for local_rank, makes the NCCL world communicator (id
     * from rank 0 through the TCP world) and the TP/PP/DP/EP/EDP
     * communicators by ncclCommSplit with groups.c's colours (ETP shares
     * TP's).  Fills g[]. Returns 0 or -1. */
    int (*setup)(tcp_world *w, const p3dw_env *e, const tcp_comm comm[P3DW_NALL], p3dw_group g[P3DW_NALL],
                 double op_timeout);
    /* Frees what setup made; failed != 0 after any failure: communicators
     * are then aborted, not finalized (peers may be gone). */
    void (*teardown)(p3dw_group g[P3DW_NALL], int failed);
    const p3d_ops *ops;
    /* --bench-node on every visible GPU (ABI 4): each timed piece of work
     * done f times (the test knob), about seconds per figure and GPU.
     * 0, or -1 with why (a CUDA/cuBLAS error, or a GPU whose SGEMM
     * disagrees with the CPU reference). */
    int (*bench_node)(double seconds, int f, p3dw_gpu_figs *out, char *why, size_t cap);
} p3dw_cuda_api;
int p3dw_cuda_bench_node(double seconds, int f, p3dw_gpu_figs *out, char *why, size_t cap);
/* Loads the module (cuda_loader.c); NULL with *why set when it cannot. */
const p3dw_cuda_api *p3dw_cuda_load(const char **why);
/* The module when backend ("cpu", "cuda", "auto") may use a GPU and one
 * is usable; NULL with *why (static text) otherwise. "auto" on a machine
 * without the NVIDIA driver's files does not even load the module. */
const p3dw_cuda_api *p3dw_cuda_pick(const char *backend, const char **why);

#ifdef __cplusplus
}
#endif
#endif
