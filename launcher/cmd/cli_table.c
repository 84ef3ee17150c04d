/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cli_table.c — every option of par3drun: its name, type, bounds, the
 * commands it applies to and its --help line, grouped as --help shows
 * them (cli.c parses with it).
 */
#include "cli_table.h"

/* Grouped as --help shows them. Keep the group headers' order in help_groups. */
const opt_row p3d_cli_rows[] = {
    /* general */
    {"help", T_FLAG, OFF(help), 0, NOB, C_ALL | C_STATUS | C_RUNS, NULL, "show this help and exit"},
    {"version", T_FLAG, OFF(version), 0, NOB, C_ALL, NULL, "print the version and exit"},
    {"verbose", T_FLAG, OFF(verbose), 0, NOB, C_ALL, NULL, "say more on stderr (progress, decisions)"},
    {"quiet", T_FLAG, OFF(quiet), 0, NOB, C_LAUNCH | C_DRY | C_PF, NULL,
     "print nothing on stderr but errors (and, launching, the ranks' output): no warnings, notes or progress"},
    {"strict", T_FLAG, OFF(strict), 0, NOB, C_PLACE, NULL,
     "every warning-level check is an error: the dry run or launch stops, exit 2 (docs/checks.md)"},
    {"dry-run", T_FLAG, 0, 0, NOB, C_LAUNCH | C_DRY | C_RUNS, NULL,
     "place, check and report; start nothing (runs --prune: only list what would go)"},
    /* inputs */
    {"topology", T_STR, OFF(topology), 0, NOB, C_ALL, "SRC",
     "this node's topology: local, an hwloc XML, an nvidia-smi topo -m text, or synthetic:STRING"},
    {"cluster", T_STR, OFF(cluster), 0, NOB, C_PLACE | C_PLAN | C_CLUSTER, "FILE",
     "cluster description: a cluster file, kubectl get nodes -o json, or aws ec2 describe-instance-topology"},
    {"slurm-topology", T_STR, OFF(slurm_topology), 0, NOB, C_PLACE | C_PLAN | C_CLUSTER, "FILE",
     "Slurm topology.conf or topology.yaml: leaf switch = rack, block = multi-node NVLink domain"},
    {"no-topo-cache", T_FLAG, OFF(no_topo_cache), 0, NOB, C_ALL, NULL,
     "discover this node's topology live, neither reading nor writing the topology cache "
     "(or P3D_TOPO_CACHE=0; docs/topology.md)"},
    {"format", T_STR, OFF(format), 0, NOB, C_ALL, "FMT", "report format: text, json, svg, html"},
    {"output", T_STR, OFF(output), 0, NOB, C_ALL, "FILE", "write the report to FILE instead of stdout"},
    /* mesh and policy */
    {"tp", T_INT, OFF(tp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N", "tensor-parallel size (plan: pin it)"},
    {"pp", T_INT, OFF(pp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N", "pipeline-parallel size (plan: pin it)"},
    {"dp", T_INT, OFF(dp), 0, 1, 1 << 24, C_PLACE, "N", "data-parallel size (default: what is left of the world)"},
    {"cp", T_INT, OFF(cp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "context-parallel size (default 1; plan: pin it, else searched for long sequences)"},
    {"ep", T_INT, OFF(ep), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "expert-parallel size (default 1; plan: pin it): carved out of the data-parallel ranks as Megatron does"},
    {"expert-model-parallel-size", T_INT, OFF(ep), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N", "Megatron's name for --ep"},
    {"etp", T_INT, OFF(etp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N", "expert tensor-parallel size (default: --tp; plan: pin it)"},
    {"expert-tensor-parallel-size", T_INT, OFF(etp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "Megatron's name for --etp"},
    {"order", T_STR, OFF(order), 0, NOB, C_PLACE, "STR",
     "rank order, fastest first (default tp-cp-ep-dp-pp, Megatron's)"},
    {"policy", T_STR, OFF(policy), 0, NOB, C_PLACE, "NAME|PATH|URL",
     "placement policy (default megatron; bundled: megatron, devicemesh, naive; auto: the best estimate)"},
    {"policy-candidates", T_STRV, OFF(policy_candidates), OFF(npolicy_candidates), NOB, C_PLACE, "NAME|PATH",
     "also compare this policy's estimate (repeatable; needs a model); --policy auto may choose it"},
    {"policy-sha256", T_STR, OFF(policy_sha256), 0, NOB, C_PLACE, "HEX", "refuse a policy whose SHA-256 differs"},
    /* training shape and model */
    {"micro-batches", T_INT, OFF(micro_batches), 0, 1, 1 << 20, C_PLACE | C_PLAN, "M", "micro-batches per step"},
    {"micro-batch", T_INT, OFF(micro_batch), 0, 1, 1 << 20, C_PLACE | C_PLAN, "B", "micro-batch size (samples)"},
    {"global-batch", T_INT, OFF(global_batch), 0, 1, 1 << 30, C_PLACE | C_PLAN, "N", "global batch size (samples)"},
    {"virtual-stages", T_INT, OFF(virtual_stages), 0, 1, 1024, C_PLACE | C_PLAN, "V",
     "interleaved 1F1B: model chunks per pipeline stage"},
    {"model", T_STR, OFF(model), 0, NOB, C_PLACE | C_PLAN, "NAME",
     "model preset: gpt3-175b, llama2-70b, llama3-8b, deepseek-v3 (MoE), ... (see docs/cost-model.md)"},
    {"params", T_DOUBLE, OFF(params), 0, 1, 1e15, C_PLACE | C_PLAN, "N", "parameter count (e.g. 175e9)"},
    {"layers", T_INT, OFF(layers), 0, 1, 1 << 20, C_PLACE | C_PLAN, "L", "transformer layers"},
    {"hidden", T_INT, OFF(hidden), 0, 1, 1 << 24, C_PLACE | C_PLAN, "H", "hidden size"},
    {"heads", T_INT, OFF(heads), 0, 1, 1 << 20, C_PLACE | C_PLAN, "A", "attention heads"},
    {"seq-len", T_INT, OFF(seq_len), 0, 1, 1 << 26, C_PLACE | C_PLAN, "S", "sequence length"},
    {"vocab", T_INT, OFF(vocab), 0, 1, 1 << 26, C_PLACE | C_PLAN, "V", "vocabulary size"},
    {"dtype", T_STR, OFF(dtype), 0, NOB, C_PLACE | C_PLAN, "T", "bf16 (default), fp16 or fp32"},
    {"zero", T_INT, OFF(zero), 0, 0, 3, C_PLACE | C_PLAN, "0-3", "ZeRO stage (default 0, or 1 with --dp > 1 in plan)"},
    {"recompute", T_STR, OFF(recompute), 0, NOB, C_PLACE | C_PLAN, "MODE", "none, selective (default) or full"},
    {"gpu-mem", T_DOUBLE, OFF(gpu_mem_gb), 0, 0.001, 1e6, C_PLACE | C_PLAN, "GB",
     "GPU memory per GPU (wins over the topology's figure)"},
    {"mem-reserve", T_DOUBLE, OFF(mem_reserve_gb), 0, 0, 1e6, C_PLACE | C_PLAN, "GB",
     "memory kept free per GPU (default: 5% of it, at least 3 GB)"},
    {"tflops", T_DOUBLE, OFF(tflops), 0, 0.001, 1e6, C_PLACE | C_PLAN, "N",
     "sustained TFLOP/s per GPU for time estimates"},
    {"top", T_INT, OFF(top), 0, 1, 1000, C_PLAN, "N", "plan: how many layouts to show (default 5)"},
    {"search-zero", T_FLAG, OFF(search_zero), 0, NOB, C_PLAN, NULL, "plan: also search ZeRO stages 0-3"},
    /* launch */
    {"nproc-per-node", T_INT, OFF(nproc_per_node), 0, 1, 4096, C_PLACE, "N",
     "ranks per node (default: the node's GPU count; required without GPUs)"},
    {"env", T_STRV, OFF(env), OFF(nenv), NOB, C_LAUNCH, "K=V", "add to every rank's environment (repeatable)"},
    {"env-file", T_STRV, OFF(env_files), OFF(nenv_files), NOB, C_LAUNCH, "FILE",
     "add K=V lines of FILE to every rank's environment (repeatable)"},
    {"bind", T_STR, OFF(bind), 0, NOB, C_LAUNCH, "MODE", "numa (default), core or none"},
    {"report-bindings", T_FLAG, OFF(report_bindings), 0, NOB, C_LAUNCH, NULL,
     "print rank -> cpuset -> NUMA -> GPU -> NIC before starting"},
    {"tag-output", T_FLAG, OFF(tag_output), 0, NOB, C_LAUNCH, NULL,
     "prefix each output line with [rR tpT ppP dpD] (default with more than one rank)"},
    {"no-tag-output", T_NOFLAG, OFF(tag_output), 0, NOB, C_LAUNCH, NULL, "never prefix output lines"},
    {"log-dir", T_STR, OFF(log_dir), 0, NOB, C_LAUNCH, "DIR", "also write each rank's output to DIR/rank-N.log"},
    {"output-ranks", T_STR, OFF(output_ranks), 0, NOB, C_LAUNCH, "LIST",
     "show output of these ranks only (e.g. 0,8-15); the others still go to --log-dir"},
    {"grace", T_DOUBLE, OFF(grace), 0, 0, 86400, C_LAUNCH, "SECONDS", "SIGTERM -> SIGKILL grace (default 10)"},
    {"max-restarts", T_INT, OFF(max_restarts), 0, 0, 1000, C_LAUNCH, "N",
     "restart the job up to N times (in place, or on a spare after a node loss; every restart counts)"},
    {"max-no-progress", T_INT, OFF(max_no_progress), 0, 0, 1000, C_LAUNCH, "K",
     "stop after K restarts in a row without a later step or a newer checkpoint in the progress lines "
     "(default 3; 0: off)"},
    {"no-progress-exit-code", T_INT, OFF(no_progress_exit_code), 0, 1, 255, C_LAUNCH, "N",
     "exit code of a job stopped by --max-no-progress: do not requeue (default 93)"},
    {"spares", T_INT, OFF(spares), 0, 0, 1 << 20, C_PLACE | C_PLAN, "K",
     "keep K nodes as hot spares (the policy's spares() or one per rack, from the end); a lost node's ranks "
     "move to one (plan: plan on the rest); without --max-restarts it implies --max-restarts K"},
    {"exclude", T_STR, OFF(exclude), 0, NOB, C_PLACE | C_PLAN | C_CLUSTER, "HOSTLIST",
     "never use these nodes (Slurm hostlist)"},
    {"health-check", T_STR, OFF(health_check), 0, NOB, C_LAUNCH, "CMD",
     "run CMD (sh -c) for every node before the start and after every failure (multi-node: each node its own); non-zero excludes the node"},
    {"health-check-timeout", T_DOUBLE, OFF(health_check_timeout), 0, 0.1, 86400, C_LAUNCH, "SECONDS",
     "a --health-check that runs longer fails (default 30)"},
    {"timeout", T_DOUBLE, OFF(timeout), 0, 0, 1e9, C_LAUNCH, "SECONDS", "stop the whole job after this long"},
    {"hang-timeout", T_DOUBLE, OFF(hang_timeout), 0, 0.01, 1e9, C_LAUNCH, "SECONDS",
     "a rank that touched $P3D_HEARTBEAT and then neither touches it nor prints for this long is hung: "
     "--hang-signal, then a failure"},
    {"node-timeout", T_DOUBLE, OFF(node_timeout), 0, 0, 86400, C_LAUNCH, "SECONDS",
     "a node (or local agent) silent this long is lost, like a dropped one: frozen, hung, cut off "
     "(default 30, 0 off, else at least 1; heartbeats every min(5, SECONDS/4) s; the leader's counts; "
     "under --rdzv etcd also the TTL of each agent's lease, which holds the leadership)"},
    {"no-failover", T_FLAG, OFF(no_failover), 0, NOB, C_LAUNCH, NULL,
     "multi-node: a lost leader ends the job (exit 1 on every node) instead of the "
     "lowest live node taking over once more than half of the nodes rejoined it"},
    {"progress-interval", T_DOUBLE, OFF(progress_interval), 0, 0.05, 86400, C_LAUNCH, "SECONDS",
     "agents read the ranks' progress lines ($P3D_HEARTBEAT: step=N busy=S[ ckpt=C]) at most this often "
     "(default 5)"},
    {"slow-factor", T_DOUBLE, OFF(slow_factor), 0, 1.01, 1000, C_PLACE, "X",
     "a node whose median busy time per step is more than X times its peers' is slow (default 1.3); "
     "--preflight: a node this much below the median on any figure"},
    {"slow-windows", T_INT, OFF(slow_windows), 0, 1, 100000, C_LAUNCH, "N",
     "... for N progress intervals in a row (default 3)"},
    {"slow-node", T_STR, OFF(slow_node), 0, NOB, C_LAUNCH, "ACTION",
     "report (default): say it and record it; replace: move its ranks to a spare at the next checkpoint"},
    {"slow-wait", T_DOUBLE, OFF(slow_wait), 0, 0, 1e9, C_LAUNCH, "SECONDS",
     "--slow-node replace: replace a slow node this long after the detection when no newer checkpoint is "
     "reported (default 600)"},
    {"preflight", T_FLAG, OFF(preflight), 0, NOB, C_LAUNCH | C_DRY, NULL,
     "benchmark every node before the placement (compute, memory, GPU peer links on GPU nodes, TCP on a ring; "
     "par3drun preflight): a node "
     "--slow-factor below the median, failing or timing out is excluded like a failed --health-check (multi-node: "
     "give it to every node; each measures itself before it joins, the TCP ring runs during the rendezvous)"},
    {"preflight-timeout", T_DOUBLE, OFF(preflight_timeout), 0, 1, 3600, C_PLACE, "SECONDS",
     "the whole preflight's bound: a node not done by then failed it (default 30)"},
    {"hang-signal", T_STR, OFF(hang_signal), 0, NOB, C_LAUNCH, "SIG", "signal for a hung rank (default ABRT)"},
    {"master-addr", T_STR, OFF(master_addr), 0, NOB, C_LAUNCH, "HOST", "MASTER_ADDR (default: rank 0's node)"},
    {"master-port", T_INT, OFF(master_port), 0, 1, 65535, C_LAUNCH, "PORT", "MASTER_PORT (default: a free port)"},
    {"emulate", T_FLAG, OFF(emulate), 0, NOB, C_PLACE, NULL,
     "run every node of --cluster as its own agent on this host (dry run, preflight: the --preflight's "
     "benchmarks)"},
    {"job-id", T_STR, OFF(job_id), 0, NOB, C_LAUNCH, "ID", "job id (default: SLURM_JOB_ID or a random one)"},
    {"run-dir", T_STR, OFF(run_dir), 0, NOB, C_LAUNCH, "DIR",
     "where the job's placement JSON and events.jsonl go (given: always kept)"},
    {"keep-run-dir", T_FLAG, OFF(keep_run_dir), 0, NOB, C_LAUNCH, NULL,
     "keep the run directory par3drun made after a clean end too (it is kept after a failure; "
     "or P3D_KEEP_RUN_DIR=1)"},
    {"prune", T_FLAG, OFF(runs_prune), 0, NOB, C_RUNS, NULL,
     "runs: remove ended run directories (never a running job's; see --older-than, --keep, --dry-run)"},
    {"older-than", T_STR, OFF(runs_older_than), 0, NOB, C_RUNS, "DURATION",
     "runs --prune: only those last written longer ago than this (90s, 30m, 12h, 7d, 2w)"},
    {"keep", T_INT, OFF(runs_keep), 0, 0, 1 << 20, C_RUNS, "N", "runs --prune: keep the N newest"},
    /* multi-node */
    {"nnodes", T_INT, OFF(nnodes), 0, 1, 1 << 20, C_LAUNCH, "N", "number of agents (nodes)"},
    {"node-rank", T_INT, OFF(node_rank), 0, 0, 1 << 20, C_LAUNCH, "I", "this agent's node rank"},
    {"rdzv", T_STR, OFF(rdzv), 0, NOB, C_LAUNCH, "SPEC", "auto (default), pmix, slurm, static:HOST:PORT, k8s[:[HOST:]PORT], etcd:URL"},
    {"rdzv-timeout", T_DOUBLE, OFF(rdzv_timeout), 0, 0.1, 1e6, C_LAUNCH, "SECONDS",
     "give up waiting for agents (default 60 + 0.1 per node)"},
    {"rdzv-token-file", T_STR, OFF(rdzv_token_file), 0, NOB, C_LAUNCH, "FILE", "shared secret agents present (a file only you can read)"},
    {"rdzv-fanout", T_INT, OFF(rdzv_fanout), 0, 1, 1024, C_LAUNCH, "K",
     "children per agent in the distribution tree (default 32, or P3D_RDZV_FANOUT; the leader's counts)"},
    /* torchrun's spellings (docs/launch.md, "Coming from torchrun"); every
     * option is also accepted with _ for - (--nproc_per_node) */
    {"rdzv-endpoint", T_STR, OFF(rdzv_endpoint), 0, NOB, C_LAUNCH, "HOST:PORT",
     "torchrun's: the same as --rdzv static:HOST:PORT (or etcd with --rdzv-backend etcd)"},
    {"rdzv-backend", T_STR, OFF(rdzv_backend), 0, NOB, C_LAUNCH, "NAME",
     "torchrun's: c10d or static (a TCP rendezvous at --rdzv-endpoint), etcd or etcd-v2"},
    {"standalone", T_FLAG, OFF(standalone), 0, NOB, C_LAUNCH, NULL,
     "torchrun's: one node, no rendezvous (what par3drun does without --nnodes)"},
};
const size_t p3d_cli_nrows = sizeof p3d_cli_rows / sizeof p3d_cli_rows[0];
_Static_assert(sizeof p3d_cli_rows / sizeof p3d_cli_rows[0] <= P3D_CLI_MAX_ROWS, "raise P3D_CLI_MAX_ROWS");

const cli_group p3d_cli_groups[] = {
    {"help", "General"},
    {"topology", "Inputs"},
    {"tp", "Mesh and policy"},
    {"micro-batches", "Training shape and model (cost model)"},
    {"nproc-per-node", "Launch"},
    {"prune", "Run directories (par3drun runs)"},
    {"nnodes", "Multi-node"},
    {"rdzv-endpoint", "torchrun spellings"},
};
const size_t p3d_cli_ngroups = sizeof p3d_cli_groups / sizeof p3d_cli_groups[0];
