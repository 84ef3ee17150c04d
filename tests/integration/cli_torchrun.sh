#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# torchrun habits (docs/launch.md, "Coming from torchrun"): torchrun's
# option spellings work; a launch says its warning-level checks (and
# --quiet hides them); OMP_NUM_THREADS is set per rank unless the user set
# it; a two-node job started with torchrun's rendezvous options runs, and
# one started with torchrun's static form (--master_addr/--master_port);
# --nproc-per-node cpu|auto count CPUs (docs/torchrun.md; the torch
# program under both launchers: cli_torchrun_torch.sh).
. "$(dirname "$0")/lib/launch_common.sh"
PCIE=$P3D_SRC/examples/clusters/8x-pcie-nvlink-pairs.json

# underscore spellings: the same job as with dashes
"$PAR3DRUN" --nproc_per_node 2 --max_restarts 1 --topology "synthetic:pack:2 pu:2" -- sh -c 'echo "r=$RANK n=$LOCAL_WORLD_SIZE"' \
  >"$T/u.out" 2>"$T/u.err" || { cat "$T/u.err"; fail "underscore spellings refused"; }
[ "$(grep -c 'n=2' "$T/u.out")" = 2 ] || { cat "$T/u.out"; fail "--nproc_per_node 2 did not start 2 ranks"; }

# a policy's error(msg, 0) is its message, without a Lua traceback; a
# fault in a policy keeps the traceback that locates it
set +e
"$PAR3DRUN" --dry-run --cluster "$CLUSTER" --policy "$P3D_SRC/tests/bad/files/policy_error_level0.lua" >"$T/p.out" 2>&1
set -e
grep -q '^par3drun: this cluster has no rack B (fixture)$' "$T/p.out" || { cat "$T/p.out"; fail "no policy message"; }
grep -q 'stack traceback' "$T/p.out" && { cat "$T/p.out"; fail "error(msg, 0) printed a traceback"; }
printf 'function place(cluster, job)\n  local x = nil; return x.y\nend\n' >"$T/fault.lua"
set +e
"$PAR3DRUN" --dry-run --cluster "$CLUSTER" --policy "$T/fault.lua" >"$T/p2.out" 2>&1
set -e
grep -q 'fault.lua:2: attempt to index a nil value' "$T/p2.out" && grep -q 'stack traceback' "$T/p2.out" ||
  { cat "$T/p2.out"; fail "a policy fault lost its position or traceback"; }

# a rendezvous error quotes the spec escaped, never a raw ESC
set +e
"$PAR3DRUN" --rdzv $'zz\033[31mx' -- true >"$T/e.out" 2>&1
set -e
grep -q 'unknown backend' "$T/e.out" || { cat "$T/e.out"; fail "no rendezvous error"; }
LC_ALL=C grep -q $'\033' "$T/e.out" && { cat -A "$T/e.out"; fail "a raw ESC from --rdzv reached stderr"; }

# TORCH_NCCL_ASYNC_ERROR_HANDLING: torchrun's 1 unless the environment or --env says
a=$(TORCH_NCCL_ASYNC_ERROR_HANDLING=3 "$PAR3DRUN" --nproc-per-node 1 --topology "synthetic:pack:2 pu:2" -- \
  sh -c 'echo "a=$TORCH_NCCL_ASYNC_ERROR_HANDLING"' 2>/dev/null)
[ "$a" = "a=3" ] || fail "the user's TORCH_NCCL_ASYNC_ERROR_HANDLING=3 was replaced: $a"
a=$(env -u TORCH_NCCL_ASYNC_ERROR_HANDLING "$PAR3DRUN" --nproc-per-node 1 --env TORCH_NCCL_ASYNC_ERROR_HANDLING=2 \
  --topology "synthetic:pack:2 pu:2" -- sh -c 'echo "a=$TORCH_NCCL_ASYNC_ERROR_HANDLING"' 2>/dev/null)
[ "$a" = "a=2" ] || fail "--env TORCH_NCCL_ASYNC_ERROR_HANDLING=2 was replaced: $a"

# CPU-only nodes: slots, not GPUs
"$PAR3DRUN" --dry-run --nproc-per-node 2 --topology "synthetic:pack:2 pu:2" >"$T/c.out" 2>&1 || fail "CPU dry run failed"
grep -q 'world 2 on 2 CPU slots (no GPU) of 1 node, 1 rack' "$T/c.out" || { cat "$T/c.out"; fail "CPU slots called GPUs"; }

# warnings at launch, one line each, before the ranks; --quiet hides them
"$PAR3DRUN" --emulate --cluster "$PCIE" --tp 8 -- /bin/true >"$T/w.out" 2>"$T/w.err" || fail "tp8 launch failed"
grep -q '^par3drun: warning: TP_CROSSES_NVLINK_DOMAIN: ' "$T/w.err" || { cat "$T/w.err"; fail "no warning at launch"; }
"$PAR3DRUN" --dry-run --cluster "$PCIE" --tp 8 >"$T/d.out" 2>&1 || true
for code in $(grep -o '^par3drun: warning: [A-Z_]*' "$T/w.err" | awk '{print $3}'); do
  grep -q "${code%:}" "$T/d.out" || fail "the launch warns ${code%:}, the dry run does not"
done
"$PAR3DRUN" --emulate --quiet --cluster "$PCIE" --tp 8 -- /bin/true >"$T/q.out" 2>"$T/q.err" || fail "--quiet launch failed"
grep -q 'warning' "$T/q.err" && { cat "$T/q.err"; fail "--quiet still printed a warning"; }

# a refused launch says why (the check), and nothing untrue after it
set +e
"$PAR3DRUN" --emulate --cluster "$CLUSTER" --model gpt3-175b --tp 1 -- /bin/true >"$T/r.out" 2>"$T/r.err"
rc=$?
set -e
[ "$rc" = 2 ] || { cat "$T/r.err"; fail "a placement failing MODEL_DOES_NOT_FIT exited $rc, want 2"; }
grep -q 'MODEL_DOES_NOT_FIT' "$T/r.err" || { cat "$T/r.err"; fail "the refusal does not name the check"; }
grep -q 'out of memory' "$T/r.err" && { cat "$T/r.err"; fail "a refused launch claims to be out of memory"; }

# --spares without --max-restarts: one restart per spare, so a loss heals
# (a rank failing once is restarted: the implied restart is there)
"$PAR3DRUN" --emulate --cluster "$CLUSTER" --spares 1 --tp 8 -- sh -c '[ "$P3D_RESTART_COUNT" = 1 ] || exit 3' \
  >"$T/s.out" 2>&1 || { cat "$T/s.out"; fail "--spares 1 without --max-restarts did not restart"; }
grep -q 'restart 1 of 1' "$T/s.out" || { cat "$T/s.out"; fail "no 'restart 1 of 1' line"; }

# OMP_NUM_THREADS: the user's value wins; otherwise a positive count
OMP_NUM_THREADS=3 "$PAR3DRUN" --nproc-per-node 2 --topology "synthetic:pack:2 pu:2" -- sh -c 'echo "omp=$OMP_NUM_THREADS"' \
  >"$T/o.out" 2>&1 || fail "OMP launch failed"
[ "$(grep -c '^.*omp=3$' "$T/o.out")" = 2 ] || { cat "$T/o.out"; fail "the user's OMP_NUM_THREADS=3 was not kept"; }
"$PAR3DRUN" --nproc-per-node 2 --env OMP_NUM_THREADS=5 --topology "synthetic:pack:2 pu:2" -- sh -c 'echo "omp=$OMP_NUM_THREADS"' \
  >"$T/o2.out" 2>&1 || fail "OMP --env launch failed"
[ "$(grep -c 'omp=5$' "$T/o2.out")" = 2 ] || { cat "$T/o2.out"; fail "--env OMP_NUM_THREADS=5 was not kept"; }
env -u OMP_NUM_THREADS "$PAR3DRUN" --nproc-per-node 2 --topology "synthetic:pack:2 pu:2" -- \
  sh -c 'echo "omp=$OMP_NUM_THREADS cpus=$(nproc)"' >"$T/o3.out" 2>&1 || fail "OMP default launch failed"
while read -r line; do
  omp=$(echo "$line" | sed -n 's/.*omp=\([0-9]*\) cpus=\([0-9]*\).*/\1/p')
  cpus=$(echo "$line" | sed -n 's/.*omp=\([0-9]*\) cpus=\([0-9]*\).*/\2/p')
  [ -n "$omp" ] && [ "$omp" -ge 1 ] && [ "$omp" -le "$cpus" ] || fail "OMP_NUM_THREADS=$omp for a rank on $cpus CPUs: $line"
done < <(grep 'omp=' "$T/o3.out")
[ "$(grep -c 'omp=' "$T/o3.out")" = 2 ] || { cat "$T/o3.out"; fail "not 2 ranks"; }
[ "$(grep -c 'OMP_NUM_THREADS is not set: each rank gets the number of CPUs it is bound to' "$T/o3.out")" = 1 ] ||
  { cat "$T/o3.out"; fail "the OMP_NUM_THREADS line is not said once"; }
grep -q 'OMP_NUM_THREADS is not set' "$T/o.out" && fail "the OMP line was said although the user set it"

# the start and end lines, and the run directory rule
TMPDIR=$T "$PAR3DRUN" --nproc-per-node 2 --topology "synthetic:pack:2 pu:2" -- /bin/true >"$T/l.out" 2>"$T/l.err" ||
  fail "plain launch failed"
id=$(sed -n 's/^par3drun: job \([0-9a-f]*\): 2 ranks (tp1 pp1 dp2) on 1 node; run dir .*/\1/p' "$T/l.err")
[ -n "$id" ] || { cat "$T/l.err"; fail "no start line"; }
grep -q "^par3drun: job $id ended: exit 0 after [0-9.]* s; run dir $T/par3drun-$id removed$" "$T/l.err" ||
  { cat "$T/l.err"; fail "no end line"; }
[ ! -e "$T/par3drun-$id" ] || fail "the run dir of a clean job was not removed"
set +e
TMPDIR=$T "$PAR3DRUN" --nproc-per-node 2 --topology "synthetic:pack:2 pu:2" -- /bin/false >"$T/f.out" 2>"$T/f.err"
set -e
id=$(sed -n 's/^par3drun: job \([0-9a-f]*\):.*/\1/p' "$T/f.err" | head -1)
[ -e "$T/par3drun-$id/events.jsonl" ] || { cat "$T/f.err"; fail "the run dir of a failed job was not kept"; }
grep -q "ended: exit 1 .*run dir $T/par3drun-$id kept" "$T/f.err" || { cat "$T/f.err"; fail "the end line does not say kept"; }
TMPDIR=$T P3D_KEEP_RUN_DIR=1 "$PAR3DRUN" --nproc-per-node 2 --topology "synthetic:pack:2 pu:2" -- /bin/true >"$T/k.out" 2>"$T/k.err"
id=$(sed -n 's/^par3drun: job \([0-9a-f]*\):.*/\1/p' "$T/k.err" | head -1)
[ -e "$T/par3drun-$id/placement.json" ] || { cat "$T/k.err"; fail "P3D_KEEP_RUN_DIR=1 did not keep the run dir"; }

# two nodes met with torchrun's own rendezvous options
head -c 24 /dev/urandom | base64 >"$T/token"
chmod 600 "$T/token"
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 0 1; do
  "$PAR3DRUN" --nnodes 2 --node_rank $i --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$P" --nproc_per_node 2 \
    --rdzv-token-file "$T/token" --topology "synthetic:pack:2 pu:2" --run-dir "$T/rd$i" \
    -- sh -c 'echo "rank=$RANK world=$WORLD_SIZE groups=$GROUP_WORLD_SIZE role=$ROLE_NAME"' >"$T/n$i.out" 2>"$T/n$i.err" &
  eval "N$i=\$!"
done
wait "$N0" || { cat "$T/n0.err"; fail "node 0 of the torchrun-style job failed"; }
wait "$N1" || { cat "$T/n1.err"; fail "node 1 of the torchrun-style job failed"; }
[ "$(cat "$T"/n0.out "$T"/n1.out | grep -c 'world=4 groups=2 role=default')" = 4 ] ||
  { cat "$T"/n*.out "$T"/n*.err; fail "the torchrun-style job did not run 4 ranks in 2 groups"; }

# torchrun's static form: --nnodes 2 with --master_addr/--master_port and no
# endpoint: the agents meet at MASTER_ADDR:MASTER_PORT, the ranks' store
# gets a port of its own (that one is the rendezvous')
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 0 1; do
  env -u SLURM_JOB_ID -u PMIX_NAMESPACE "$PAR3DRUN" --nnodes 2 --node_rank $i --master_addr 127.0.0.1 --master_port "$P" \
    --nproc_per_node 2 --rdzv-token-file "$T/token" --topology "synthetic:pack:2 pu:2" \
    -- sh -c 'echo "rank=$RANK world=$WORLD_SIZE port=$MASTER_PORT addr=$MASTER_ADDR"' >"$T/s$i.out" 2>"$T/s$i.err" &
  eval "N$i=\$!"
done
wait "$N0" || { cat "$T/s0.err"; fail "node 0 of torchrun's static form failed"; }
wait "$N1" || { cat "$T/s1.err"; fail "node 1 of torchrun's static form failed"; }
[ "$(cat "$T"/s0.out "$T"/s1.out | grep -c 'world=4 port=[0-9]')" = 4 ] ||
  { cat "$T"/s*.out "$T"/s*.err; fail "torchrun's static form did not run 4 ranks"; }
grep -q "port=$P " "$T"/s0.out "$T"/s1.out && fail "the ranks' store was given the rendezvous port $P"
[ "$(cat "$T"/s0.out "$T"/s1.out | sed -n 's/.*port=\([0-9]*\).*/\1/p' | sort -u | wc -l)" = 1 ] ||
  fail "the ranks disagree on MASTER_PORT"

# --nproc-per-node cpu: one rank per online CPU; auto on a host without an
# NVIDIA device is the same
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  for w in cpu auto; do
    "$PAR3DRUN" --dry-run --nproc_per_node $w --topology "synthetic:pack:2 pu:2" --format json >"$T/np.json" 2>/dev/null ||
      fail "--nproc-per-node $w refused"
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["world_size"])' "$T/np.json")" = "$(getconf _NPROCESSORS_ONLN)" ] ||
      fail "--nproc-per-node $w is not this host's $(getconf _NPROCESSORS_ONLN) CPUs"
  done
fi

# a refused two-node launch: exit 2 on both nodes, the check named, no
# untrue "out of memory"
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 0 1; do
  ( set +e; "$PAR3DRUN" --nnodes 2 --node-rank $i --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
      --topology "$P3D_SRC/examples/topologies/dgx-h100.xml" --model llama3-405b --tp 8 -- /bin/true \
      >"$T/x$i.out" 2>"$T/x$i.err"; echo $? >"$T/x$i.rc" ) &
done
wait
for i in 0 1; do
  [ "$(cat "$T/x$i.rc")" = 2 ] || { cat "$T/x$i.err"; fail "refused two-node launch: node $i exit $(cat "$T/x$i.rc"), want 2"; }
  grep -q 'MODEL_DOES_NOT_FIT' "$T/x$i.err" || { cat "$T/x$i.err"; fail "refused two-node launch: node $i does not name the check"; }
  grep -q 'out of memory' "$T/x$i.err" && { cat "$T/x$i.err"; fail "refused two-node launch: node $i says out of memory"; }
done

# the run dir rule is the same whatever the backend: a directory par3drun
# made is removed after exit 0, on every node of a multi-node job and
# under --emulate (the single-node case is above)
mkdir -p "$T/md" "$T/me"
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 0 1; do
  TMPDIR=$T/md "$PAR3DRUN" --nnodes 2 --node-rank $i --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
    --nproc-per-node 1 --topology "synthetic:pack:2 pu:2" -- /bin/true >"$T/m$i.out" 2>"$T/m$i.err" &
  eval "N$i=\$!"
done
wait "$N0" || { cat "$T/m0.err"; fail "node 0 of the run-dir job failed"; }
wait "$N1" || { cat "$T/m1.err"; fail "node 1 of the run-dir job failed"; }
grep -q "ended: exit 0 .*run dir $T/md/par3drun-[0-9a-f]*\.0 removed$" "$T/m0.err" ||
  { cat "$T/m0.err"; fail "multi-node: the end line does not say the run dir was removed"; }
[ -z "$(ls -A "$T/md")" ] || { ls -la "$T/md"; fail "multi-node: a clean job left its run dirs: $(ls "$T/md")"; }
TMPDIR=$T/me "$PAR3DRUN" --emulate --cluster "$CLUSTER" --nproc-per-node 1 -- /bin/true >"$T/e.out" 2>"$T/e.err" ||
  { cat "$T/e.err"; fail "--emulate run-dir job failed"; }
grep -q "ended: exit 0 .*run dir $T/me/par3drun-[0-9a-f]* removed$" "$T/e.err" || { cat "$T/e.err"; fail "--emulate: not removed"; }
[ -z "$(ls -A "$T/me")" ] || fail "--emulate: a clean job left its run dir: $(ls "$T/me")"
echo "ok"
