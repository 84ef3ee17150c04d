/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * opts.h — what the user asked for: the subcommand and every option, as
 * parsed from the command line (launcher/cmd/cli.c fills it; one table
 * there lists each option's help, type and bounds). Below every launcher
 * stage: the rendezvous, the job control and the commands all read it,
 * none of them needs the parser.
 */
#ifndef P3D_OPTS_H
#define P3D_OPTS_H

#include <stddef.h>

#include "p3d/p3d.h"

typedef enum p3d_cmd {
    P3D_CMD_LAUNCH = 0, /* par3drun [options] -- PROGRAM [ARGS...] */
    P3D_CMD_DRYRUN,     /* par3drun --dry-run [options] */
    P3D_CMD_TOPO,       /* par3drun topo [options] */
    P3D_CMD_PLAN,       /* par3drun plan [options] */
    P3D_CMD_AGENT,      /* internal: one emulated node's agent */
    P3D_CMD_CLUSTER,    /* par3drun cluster [options] */
    P3D_CMD_STATUS,     /* par3drun status RUN_DIR */
    P3D_CMD_PREFLIGHT,  /* par3drun preflight [options] */
    P3D_CMD_RUNS,       /* par3drun runs [--prune] [DIR] */
} p3d_cmd;

typedef struct p3d_opts {
    p3d_cmd cmd;
    int help, version, verbose;

    /* inputs */
    const char *topology;       /* --topology SRC (default "local") */
    const char *cluster;        /* --cluster FILE */
    const char *slurm_topology; /* --slurm-topology FILE */
    const char *format;         /* --format (default "text") */
    const char *output;         /* --output FILE */
    int no_topo_cache;          /* --no-topo-cache or P3D_TOPO_CACHE=0 */

    /* mesh and policy */
    int tp, pp, dp, cp, ep, etp; /* 0 = not given (etp: same as tp) */
    int min_dp;                  /* --min-dp D: the elastic range's floor, 0 = not elastic */
    const char *order;           /* --order */
    const char *policy;          /* --policy (default "megatron") */
    const char *policy_sha256;
    const char **policy_candidates; /* --policy-candidates, repeatable (--policy auto) */
    size_t npolicy_candidates;

    /* training shape and model (cost model) */
    int micro_batches, micro_batch, global_batch, virtual_stages;
    double batch_tolerance;                    /* --batch-tolerance PCT, -1 = not given (0) */
    int first_stage_layers, last_stage_layers; /* --decoder-first/last-pipeline-num-layers */
    const char *model;                         /* preset name */
    double params;
    int layers, hidden, heads, seq_len, vocab;
    /* the model in Megatron-LM's argument names (docs/cost-model.md) */
    const char *model_config; /* --model-config: a HuggingFace config.json */
    int ffn, query_groups, kv_channels, swiglu, untie, experts, topk, moe_ffn, moe_shared_ffn;
    int max_pos;                              /* --max-position-embeddings (accepted, not counted) */
    int group_query_attention;                /* --group-query-attention (implied by --num-query-groups) */
    const char *normalization;                /* RMSNorm|LayerNorm */
    int no_seq_parallel;                      /* --no-sequence-parallel */
    int grad_bf16;                            /* --grad-reduce-in-bf16 */
    int inference;                            /* plan --inference */
    int context_len, prompt_len, serve_batch; /* --context-len, --prompt-len, --serve-batch */
    const char *dtype;                        /* bf16|fp16|fp32 */
    int zero;                                 /* -1 = not given */
    const char *recompute;                    /* none|selective|full */
    double gpu_mem_gb;
    double mem_reserve_gb; /* --mem-reserve, -1 = not given */
    double tflops;         /* sustained TFLOP/s per GPU */
    int top;               /* plan: how many layouts to print */
    int search_zero;       /* plan: also search ZeRO stages */

    /* launch */
    int nproc_per_node;
    const char **env; /* --env K=V, repeatable */
    size_t nenv;
    const char **env_files; /* --env-file FILE, repeatable */
    size_t nenv_files;
    const char *bind; /* numa|core|none */
    int report_bindings;
    int tag_output; /* -1 auto, 0 off, 1 on */
    const char *log_dir;
    const char *output_ranks; /* --output-ranks LIST: only these ranks shown */
    double grace;             /* seconds */
    int max_restarts;
    int max_no_progress;       /* --max-no-progress K (0: off) */
    int no_progress_exit_code; /* --no-progress-exit-code N */
    int max_job_restarts;      /* --max-job-restarts N (job-scoped faults) */
    double fault_window;       /* --fault-window SECONDS (0: the first failure decides) */
    int spares;                /* --spares K: hot spare nodes */
    const char *exclude;       /* --exclude HOSTLIST */
    const char *health_check;  /* --health-check CMD */
    double health_check_timeout;
    double timeout;             /* whole job, 0 = none */
    double hang_timeout;        /* --hang-timeout: 0 = off */
    const char *hang_signal;    /* --hang-signal NAME|N (default ABRT) */
    const char *preempt_signal; /* --preempt-signal USR1|USR2|none (NULL: USR1) */
    int preempt_on_term;        /* --preempt-on-term: SIGTERM preempts too */
    double node_timeout;        /* --node-timeout: silent node lost, 0 = off */
    int no_failover;            /* --no-failover: a lost leader ends the job */
    double progress_interval;   /* --progress-interval: agents read progress */
    double slow_factor;         /* --slow-factor: slower than peers by this */
    int slow_windows;           /* --slow-windows: for this many intervals */
    const char *slow_node;      /* --slow-node report|replace */
    double slow_wait;           /* --slow-wait: replace without a checkpoint */
    double grow_wait;           /* --grow-wait: grow without a checkpoint */
    int preflight;              /* --preflight: benchmark every node first */
    double preflight_timeout;   /* --preflight-timeout SECONDS */
    const char *master_addr;
    int master_port;
    int emulate;
    const char *job_id;
    const char *run_dir;         /* --run-dir DIR: per-job files */
    const char *status_dir;      /* par3drun status RUN_DIR */
    const char *runs_dir;        /* par3drun runs [DIR] (default $TMPDIR) */
    const char *runs_older_than; /* runs --prune --older-than DURATION */
    int runs_keep;               /* runs --prune --keep N */
    int runs_prune, runs_dry;    /* runs --prune [--dry-run] */
    int strict;                  /* --strict: warning-level checks are errors */

    /* multi-node */
    int nnodes, node_rank; /* 0 / -1 = not given */
    int join;              /* --join: this node joins the running job
                                   as a spare (docs/multinode.md) */
    int nnodes_min;        /* torchrun's --nnodes MIN:MAX with MIN < MAX: MIN, else 0 */
    const char *rdzv;      /* auto|pmix|slurm|static:HOST:PORT|etcd:URL|none */
    double rdzv_timeout;
    const char *rdzv_token_file;
    const char *rdzv_endpoint; /* torchrun's --rdzv-endpoint HOST:PORT */
    const char *rdzv_backend;  /* torchrun's --rdzv-backend */
    int standalone;            /* torchrun's --standalone */
    int no_agent_store;        /* --no-agent-store: the ranks' rank 0 serves the store */
    int quiet;                 /* --quiet: no warning lines at launch */
    int keep_run_dir;          /* --keep-run-dir or P3D_KEEP_RUN_DIR=1 */
    char *rdzv_owned;          /* the --rdzv built from them (freed) */
    int rdzv_fanout;           /* --rdzv-fanout K, 0 = not given */
    const char *bind_addr;     /* --bind-addr ADDR or P3D_BIND_ADDR: where this node's ports listen */

    /* torchrun's options (docs/torchrun.md; cmd/cli_torchrun.c) */
    const char *rdzv_id;            /* --rdzv-id: the job id (TORCHELASTIC_RUN_ID) */
    const char *rdzv_conf;          /* --rdzv-conf K=V,...: join_timeout is --rdzv-timeout */
    double monitor_interval;        /* accepted: par3drun learns of an exit at once */
    const char *start_method;       /* spawn|fork|forkserver: checked, no effect on a program */
    const char *event_log_handler;  /* only "null": events go to RUN_DIR/events.jsonl */
    const char *role;               /* --role: ROLE_NAME (default "default") */
    int module;                     /* -m/--module: python -m PROGRAM */
    int no_python;                  /* --no-python: run PROGRAM itself */
    int run_path;                   /* --run-path: python SCRIPT */
    const char *python;             /* --python PATH (else PAR3D_PYTHON, else python3) */
    const char *redirects;          /* -r/--redirects STD */
    const char *tee;                /* -t/--tee STD */
    const char *local_ranks_filter; /* --local-ranks-filter LIST */
    const char *logs_specs, *local_addr, *numa_binding, *signals_to_handle;
    unsigned char *local_hidden; /* [P3D_MAX_LOCAL]: local ranks not shown (--local-ranks-filter); owned */
    unsigned char *local_std;    /* [P3D_MAX_LOCAL], -r/-t with --log-dir (torchrun's layout), else NULL;
                                   per local rank: 1 stdout and 2 stderr to a file, 4 stdout and 8
                                   stderr not on the terminal (redirected, not teed); owned */
    int positional;              /* the program came without "--" (torchrun's form) */
    char **argv_owned;           /* the python command line built for it (owned) */
    char *python_owned;          /* the interpreter's resolved path (owned) */

    /* the program after "--" */
    char **argv;
    int argc;
} p3d_opts;

/* The most ranks per node (--nproc-per-node's bound; --local-ranks-filter). */
#define P3D_MAX_LOCAL 4096

/* Fills a job description from the options (mesh sizes, order, model...);
 * 0, or -1 with *err (opts_job.c). */
int p3d_opts_job(const p3d_opts *o, p3d_job *job, char **err);

#endif
