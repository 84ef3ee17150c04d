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
    {"min-dp", T_INT, OFF(min_dp), 0, 1, 1 << 24, C_PLACE, "D",
     "elastic range: the job may run with D up to --dp whole data-parallel replicas: a loss no spare can "
     "take drops whole replicas and the job goes on (--emulate and multi-node), below D it stops (exit 1); "
     "it grows back when spares hold whole replicas again (--grow-wait); the global batch is kept by "
     "gradient accumulation (P3D_MICRO_BATCHES); docs/launch.md \"Elastic width\"; dry run: the widths "
     "and their step times"},
    {"cp", T_INT, OFF(cp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "context-parallel size (default 1; plan: pin it, else searched for long sequences)"},
    {"ep", T_INT, OFF(ep), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "expert-parallel size (default 1; plan: pin it): carved out of the data-parallel ranks as Megatron does"},
    {"expert-model-parallel-size", T_INT, OFF(ep), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N", "Megatron's name for --ep"},
    {"etp", T_INT, OFF(etp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "expert tensor-parallel size (default: --tp; plan: pin it)"},
    {"expert-tensor-parallel-size", T_INT, OFF(etp), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N", "Megatron's name for --etp"},
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
    {"global-batch", T_INT, OFF(global_batch), 0, 1, 1 << 30, C_PLACE | C_PLAN, "N",
     "global batch size (samples; kept at every width: micro-batches = B / (dp x micro-batch); ranks get "
     "P3D_GLOBAL_BATCH, P3D_MICRO_BATCH, P3D_MICRO_BATCHES)"},
    {"batch-tolerance", T_DOUBLE, OFF(batch_tolerance), 0, 0, 100, C_PLACE, "PCT",
     "a width whose batch is off --global-batch by at most PCT percent is taken when none divides it "
     "(default 0: exact)"},
    {"decoder-first-pipeline-num-layers", T_INT, OFF(first_stage_layers), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "layers of the first pipeline stage (Megatron's; the other stages share the rest evenly)"},
    {"decoder-last-pipeline-num-layers", T_INT, OFF(last_stage_layers), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N",
     "layers of the last pipeline stage (Megatron's; the other stages share the rest evenly)"},
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
    /* the model in Megatron-LM's own argument names (and a config.json) */
    {"model-config", T_STR, OFF(model_config), 0, NOB, C_PLACE | C_PLAN, "FILE",
     "the model from a HuggingFace config.json (Llama, Mistral/Mixtral, Qwen2(-MoE), DeepSeek-V2/V3 keys)"},
    {"num-layers", T_INT, OFF(layers), 0, 1, 1 << 20, C_PLACE | C_PLAN, "L", "Megatron's name for --layers"},
    {"hidden-size", T_INT, OFF(hidden), 0, 1, 1 << 24, C_PLACE | C_PLAN, "H", "Megatron's name for --hidden"},
    {"num-attention-heads", T_INT, OFF(heads), 0, 1, 1 << 20, C_PLACE | C_PLAN, "A", "Megatron's name for --heads"},
    {"seq-length", T_INT, OFF(seq_len), 0, 1, 1 << 26, C_PLACE | C_PLAN, "S", "Megatron's name for --seq-len"},
    {"padded-vocab-size", T_INT, OFF(vocab), 0, 1, 1 << 26, C_PLACE | C_PLAN, "V", "Megatron's name for --vocab"},
    {"vocab-size", T_INT, OFF(vocab), 0, 1, 1 << 26, C_PLACE | C_PLAN, "V", "the same (not padded further)"},
    {"ffn-hidden-size", T_INT, OFF(ffn), 0, 1, 1 << 26, C_PLACE | C_PLAN, "F",
     "MLP hidden size (default 4h; 8h/3 rounded down to 64 with --swiglu)"},
    {"num-query-groups", T_INT, OFF(query_groups), 0, 1, 1 << 20, C_PLACE | C_PLAN, "G",
     "key/value heads (grouped-query attention; default: --heads)"},
    {"group-query-attention", T_FLAG, OFF(group_query_attention), 0, NOB, C_PLACE | C_PLAN, NULL,
     "accepted as Megatron takes it (--num-query-groups says how many)"},
    {"kv-channels", T_INT, OFF(kv_channels), 0, 1, 1 << 20, C_PLACE | C_PLAN, "N", "size of a head (default h/heads)"},
    {"swiglu", T_FLAG, OFF(swiglu), 0, NOB, C_PLACE | C_PLAN, NULL, "gated MLP (three matrices)"},
    {"untie-embeddings-and-output-weights", T_FLAG, OFF(untie), 0, NOB, C_PLACE | C_PLAN, NULL,
     "a separate output layer (on the last stage; with pp 1 on the same GPUs as the embedding)"},
    {"normalization", T_STR, OFF(normalization), 0, NOB, C_PLACE | C_PLAN, "NAME", "LayerNorm (default) or RMSNorm"},
    {"max-position-embeddings", T_INT, OFF(max_pos), 0, 1, 1 << 26, C_PLACE | C_PLAN, "N",
     "accepted so a Megatron line can be pasted; not counted (Megatron's estimator leaves it out)"},
    {"num-experts", T_INT, OFF(experts), 0, 1, 1 << 16, C_PLACE | C_PLAN, "E", "routed experts (mixture of experts)"},
    {"moe-router-topk", T_INT, OFF(topk), 0, 1, 1 << 16, C_PLACE | C_PLAN, "K", "experts per token (default 2)"},
    {"moe-ffn-hidden-size", T_INT, OFF(moe_ffn), 0, 1, 1 << 26, C_PLACE | C_PLAN, "F",
     "FFN size of one expert (default --ffn-hidden-size)"},
    {"moe-shared-expert-intermediate-size", T_INT, OFF(moe_shared_ffn), 0, 1, 1 << 26, C_PLACE | C_PLAN, "F",
     "FFN size of the shared experts together"},
    {"no-sequence-parallel", T_FLAG, OFF(no_seq_parallel), 0, NOB, C_PLACE | C_PLAN, NULL,
     "estimate without sequence parallelism (default: on with tp > 1, as Megatron's --sequence-parallel)"},
    {"sequence-parallel", T_NOFLAG, OFF(no_seq_parallel), 0, NOB, C_PLACE | C_PLAN, NULL,
     "sequence parallelism with tp > 1 (the default)"},
    {"grad-reduce-in-bf16", T_FLAG, OFF(grad_bf16), 0, NOB, C_PLACE | C_PLAN, NULL,
     "main gradients in bf16 (2 bytes, not Megatron's default fp32 4)"},
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
    {"inference", T_FLAG, OFF(inference), 0, NOB, C_PLAN | C_DRY, NULL,
     "plan, dry run: serve the model (weights + KV cache, TTFT, TPOT, tokens/s per GPU), not train it"},
    {"context-len", T_INT, OFF(context_len), 0, 1, 1 << 24, C_PLAN | C_DRY, "N",
     "--inference: tokens per sequence, prompt and output (default: --seq-len)"},
    {"prompt-len", T_INT, OFF(prompt_len), 0, 1, 1 << 24, C_PLAN | C_DRY, "N",
     "--inference: prompt tokens (default half the context)"},
    {"serve-batch", T_INT, OFF(serve_batch), 0, 1, 1 << 20, C_PLAN | C_DRY, "N",
     "--inference: sequences in flight per replica (default 32)"},
    {"search-zero", T_FLAG, OFF(search_zero), 0, NOB, C_PLAN, NULL, "plan: also search ZeRO stages 0-3"},
    /* launch */
    {"nproc-per-node", T_INT, OFF(nproc_per_node), 0, 1, P3D_MAX_LOCAL, C_PLACE, "N|gpu|cpu|auto",
     "ranks per node (default and gpu: the node's GPU count, required without GPUs; cpu: its CPU count; "
     "auto: gpu on a host with NVIDIA GPUs, else cpu)"},
    {"env", T_STRV, OFF(env), OFF(nenv), NOB, C_LAUNCH, "K=V", "add to every rank's environment (repeatable)"},
    {"env-file", T_STRV, OFF(env_files), OFF(nenv_files), NOB, C_LAUNCH, "FILE",
     "add K=V lines of FILE to every rank's environment (repeatable)"},
    {"bind", T_STR, OFF(bind), 0, NOB, C_LAUNCH, "MODE", "numa (default), core or none"},
    {"report-bindings", T_FLAG, OFF(report_bindings), 0, NOB, C_LAUNCH, NULL,
     "print rank -> cpuset -> NUMA -> GPU -> NIC before starting"},
    {"tag-output", T_FLAG, OFF(tag_output), 0, NOB, C_LAUNCH, NULL,
     "prefix each output line with [rR tpT ppP dpD] (default with more than one rank)"},
    {"no-tag-output", T_NOFLAG, OFF(tag_output), 0, NOB, C_LAUNCH, NULL, "never prefix output lines"},
    {"log-dir", T_STR, OFF(log_dir), 0, NOB, C_LAUNCH, "DIR",
     "also write each rank's output to DIR/rank-N.log (with -r/-t: torchrun's layout)"},
    {"output-ranks", T_STR, OFF(output_ranks), 0, NOB, C_LAUNCH, "LIST",
     "show output of these ranks only (e.g. 0,8-15); the others still go to --log-dir"},
    {"grace", T_DOUBLE, OFF(grace), 0, 0, 86400, C_LAUNCH, "SECONDS",
     "SIGTERM -> SIGKILL grace; also the longest wait for the ranks' checkpoint on a preemption (default 10)"},
    {"max-restarts", T_INT, OFF(max_restarts), 0, 0, 1000, C_LAUNCH, "N",
     "restart the job up to N times (in place, or on a spare after a node loss; every restart counts)"},
    {"max-no-progress", T_INT, OFF(max_no_progress), 0, 0, 1000, C_LAUNCH, "K",
     "stop after K restarts in a row without a later step or a newer checkpoint in the progress lines "
     "(default 3; 0: off)"},
    {"no-progress-exit-code", T_INT, OFF(no_progress_exit_code), 0, 1, 255, C_LAUNCH, "N",
     "exit code of a job stopped by --max-no-progress: do not requeue (default 93)"},
    {"max-job-restarts", T_INT, OFF(max_job_restarts), 0, 0, 1000, C_LAUNCH, "N",
     "restart a job-scoped fault (the same failure on two nodes or more, in most data-parallel replicas of a "
     "one-node job, or at the same step after a restart) "
     "in place at most N times, never on a spare, then stop with the program's exit code (default 3; every "
     "restart also counts against --max-restarts)"},
    {"fault-window", T_DOUBLE, OFF(fault_window), 0, 0, 3600, C_LAUNCH, "SECONDS",
     "collect the other ranks' failures this long before a failure's verdict (job, node or unknown); a node's "
     "other ranks run on meanwhile (default 2; 0: decide on the first failure and stop them at once)"},
    {"spares", T_INT, OFF(spares), 0, 0, 1 << 20, C_PLACE | C_PLAN, "K",
     "keep K nodes as hot spares (the policy's spares() or one per rack, from the end); a lost node's ranks "
     "move to one (plan: plan on the rest); without --max-restarts it implies --max-restarts K"},
    {"exclude", T_STR, OFF(exclude), 0, NOB, C_PLACE | C_PLAN | C_CLUSTER, "HOSTLIST",
     "never use these nodes (Slurm hostlist)"},
    {"health-check", T_STR, OFF(health_check), 0, NOB, C_LAUNCH, "CMD",
     "run CMD (sh -c) for every node before the start and after every failure but a job-scoped one "
     "(multi-node: each node its own); non-zero excludes the node"},
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
    {"grow-wait", T_DOUBLE, OFF(grow_wait), 0, 0, 1e9, C_LAUNCH, "SECONDS",
     "an elastic job below its full width grows back at the ranks' next checkpoint once spares hold a whole "
     "replica, or this long after that when no newer checkpoint is reported (default 600: a restart without "
     "one loses the work since the last checkpoint, so waiting up to a usual checkpoint interval costs less)"},
    {"preflight", T_FLAG, OFF(preflight), 0, NOB, C_LAUNCH | C_DRY, NULL,
     "benchmark every node before the placement (compute, memory, GPU peer links on GPU nodes, TCP on a ring; "
     "par3drun preflight): a node "
     "--slow-factor below the median, failing or timing out is excluded like a failed --health-check (multi-node: "
     "give it to every node; each measures itself before it joins, the TCP ring runs during the rendezvous)"},
    {"preflight-timeout", T_DOUBLE, OFF(preflight_timeout), 0, 1, 3600, C_PLACE, "SECONDS",
     "the whole preflight's bound: a node not done by then failed it (default 30)"},
    {"hang-signal", T_STR, OFF(hang_signal), 0, NOB, C_LAUNCH, "SIG", "signal for a hung rank (default ABRT)"},
    {"preempt-signal", T_STR, OFF(preempt_signal), 0, NOB, C_LAUNCH, "SIG",
     "the scheduler's preemption warning (USR1, USR2 or none; default USR1): reaching par3drun or any node, every "
     "rank gets it, the job waits up to --grace for their checkpoints, then stops with exit 75"},
    {"preempt-on-term", T_FLAG, OFF(preempt_on_term), 0, NOB, C_LAUNCH, NULL,
     "SIGTERM preempts like --preempt-signal (checkpoint, then exit 75) instead of stopping at once"},
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
    {"nnodes", T_INT, OFF(nnodes), 0, 1, 1 << 20, C_LAUNCH, "N",
     "number of agents (nodes); torchrun's MIN:MAX: start on MAX, MIN nodes' worth of data-parallel "
     "replicas as the elastic range (as --min-dp: the running job shrinks down to it and grows back)"},
    {"node-rank", T_INT, OFF(node_rank), 0, 0, 1 << 20, C_LAUNCH, "I", "this agent's node rank"},
    {"join", T_FLAG, OFF(join), 0, NOB, C_LAUNCH, NULL,
     "join the RUNNING job as a spare node, through --rdzv static:HOST:PORT (the leader, or after a failover "
     "its successor at the same port) or --rdzv etcd:URL --job-id ID (the job's current leader), with the "
     "job's token: no --node-rank, --nnodes or mesh options (the job has them); its own --topology, "
     "--nproc-per-node and program (docs/multinode.md \"Adding a node to a running job\")"},
    {"rdzv", T_STR, OFF(rdzv), 0, NOB, C_LAUNCH, "SPEC",
     "auto (default), pmix, slurm, static:HOST:PORT, k8s[:[HOST:]PORT], etcd:URL"},
    {"rdzv-timeout", T_DOUBLE, OFF(rdzv_timeout), 0, 0.1, 1e6, C_LAUNCH, "SECONDS",
     "give up waiting for agents (default 60 + 0.1 per node)"},
    {"rdzv-token-file", T_STR, OFF(rdzv_token_file), 0, NOB, C_LAUNCH, "FILE",
     "shared secret agents present (a file only you can read)"},
    {"rdzv-fanout", T_INT, OFF(rdzv_fanout), 0, 1, 1024, C_LAUNCH, "K",
     "children per agent in the distribution tree (default 32, or P3D_RDZV_FANOUT; the leader's counts)"},
    {"bind-addr", T_STR, OFF(bind_addr), 0, NOB, C_LAUNCH, "ADDR",
     "the address this node's ports listen on and are reached at (default: the rendezvous' own; "
     "or P3D_BIND_ADDR; for multi-homed nodes)"},
    /* torchrun's options (docs/torchrun.md, one row each); every option is
     * also accepted with _ for - (--nproc_per_node) */
    {"rdzv-endpoint", T_STR, OFF(rdzv_endpoint), 0, NOB, C_LAUNCH, "HOST:PORT",
     "the same as --rdzv static:HOST:PORT (or etcd with --rdzv-backend etcd)"},
    {"rdzv-backend", T_STR, OFF(rdzv_backend), 0, NOB, C_LAUNCH, "NAME",
     "c10d or static (a TCP rendezvous at --rdzv-endpoint), etcd or etcd-v2"},
    {"rdzv-id", T_STR, OFF(rdzv_id), 0, NOB, C_LAUNCH, "ID", "the job id (--job-id; TORCHELASTIC_RUN_ID)"},
    {"rdzv-conf", T_STR, OFF(rdzv_conf), 0, NOB, C_LAUNCH, "K=V,...",
     "join_timeout (or timeout) is --rdzv-timeout; torchrun's other keys are accepted without effect"},
    {"no-agent-store", T_FLAG, OFF(no_agent_store), 0, NOB, C_LAUNCH, NULL,
     "the ranks' rank 0 serves torch's store, not par3drun (TORCHELASTIC_USE_AGENT_STORE=False)"},
    {"standalone", T_FLAG, OFF(standalone), 0, NOB, C_LAUNCH, NULL, "one node, no rendezvous (the default)"},
    {"module", T_FLAG, OFF(module), 0, NOB, C_LAUNCH, NULL, "-m: run PROGRAM as python -m PROGRAM"},
    {"no-python", T_FLAG, OFF(no_python), 0, NOB, C_LAUNCH, NULL, "run PROGRAM itself, even a .py script"},
    {"run-path", T_FLAG, OFF(run_path), 0, NOB, C_LAUNCH, NULL,
     "run PROGRAM (a .py script) with the interpreter, also after --"},
    {"python", T_STR, OFF(python), 0, NOB, C_LAUNCH, "PATH",
     "the interpreter for a .py PROGRAM and -m (default: PAR3D_PYTHON, else python3 on PATH)"},
    {"role", T_STR, OFF(role), 0, NOB, C_LAUNCH, "NAME", "ROLE_NAME of every rank (default 'default')"},
    {"monitor-interval", T_DOUBLE, OFF(monitor_interval), 0, 0, 86400, C_LAUNCH, "SECONDS",
     "accepted without effect: par3drun learns of a rank's exit at once"},
    {"start-method", T_STR, OFF(start_method), 0, NOB, C_LAUNCH, "spawn|fork|forkserver",
     "checked, without effect: a program is always a new process"},
    {"redirects", T_STR, OFF(redirects), 0, NOB, C_LAUNCH, "STD",
     "-r: 0-3 or LOCAL:N,... (1 stdout, 2 stderr, 3 both) only to files (torchrun's --log-dir layout)"},
    {"tee", T_STR, OFF(tee), 0, NOB, C_LAUNCH, "STD",
     "-t: 0-3 or LOCAL:N,...: these streams to files (torchrun's --log-dir layout) and the terminal"},
    {"local-ranks-filter", T_STR, OFF(local_ranks_filter), 0, NOB, C_LAUNCH, "LIST",
     "show the output of these local ranks only (e.g. 0,1); --log-dir still gets all"},
    {"event-log-handler", T_STR, OFF(event_log_handler), 0, NOB, C_LAUNCH, "null",
     "only null: par3drun's events go to RUN_DIR/events.jsonl"},
    {"numa-binding", T_STR, OFF(numa_binding), 0, NOB, C_LAUNCH, "node|exclusive",
     "node is --bind numa, exclusive is --bind core (socket, core-complex: refused)"},
    {"signals-to-handle", T_STR, OFF(signals_to_handle), 0, NOB, C_LAUNCH, "SIG,...",
     "accepted when within SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2 (all always handled)"},
    {"logs-specs", T_STR, OFF(logs_specs), 0, NOB, C_LAUNCH, "NAME",
     "refused: a Python entry point (use --log-dir, --output-ranks)"},
    {"local-addr", T_STR, OFF(local_addr), 0, NOB, C_LAUNCH, "ADDR",
     "refused: an agent's address is the one it reached the rendezvous from"},
};
const size_t p3d_cli_nrows = sizeof p3d_cli_rows / sizeof p3d_cli_rows[0];
_Static_assert(sizeof p3d_cli_rows / sizeof p3d_cli_rows[0] <= P3D_CLI_MAX_ROWS, "raise P3D_CLI_MAX_ROWS");

/* one group a line, in the order --help shows them (scripts/format.sh) */
/* clang-format off */
const cli_group p3d_cli_groups[] = {
    {"help", "General"},
    {"topology", "Inputs"},
    {"tp", "Mesh and policy"},
    {"micro-batches", "Training shape and model (cost model)"},
    {"nproc-per-node", "Launch"},
    {"prune", "Run directories (par3drun runs)"},
    {"nnodes", "Multi-node"},
    {"rdzv-endpoint", "torchrun's options (docs/torchrun.md)"},
};
/* clang-format on */
const size_t p3d_cli_ngroups = sizeof p3d_cli_groups / sizeof p3d_cli_groups[0];
