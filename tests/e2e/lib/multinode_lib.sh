# SPDX-License-Identifier: BSD-3-Clause
# lib/multinode_lib.sh — sourced by tests/e2e/multinode_*.sh: a scratch
# dir, a job token, four fixture topologies (one per node rank), a free
# loopback port, and cleanup of every process the test started (by PID:
# the agents we started, and any worker still carrying our marker).
set -u
: "${PAR3DRUN:?run through ctest (PAR3DRUN unset)}"
: "${P3D_SRC:?}"
export P3D_DATA_DIR=${P3D_DATA_DIR:-$P3D_SRC}
unset SLURM_JOB_ID SLURM_JOB_NODELIST PMIX_NAMESPACE PMIX_RANK
T=$(mktemp -d /tmp/p3d-mn-test.XXXXXX)
MARK="p3dmn$$x$RANDOM"
export P3D_TEST_MARK=$MARK
FX=$P3D_SRC/tests/fixtures/realdata/topo
TOPOS=("$FX/dgx-a100_12nic.txt" "$FX/dgx1-v100_4nic.txt"
       "$FX/a6000x8_nvlink-bridge-pairs_pytorch79299.txt"
       "$FX/rtx4090x8_pcie-only_2nic_go-gpuallocator17.txt")
head -c 24 /dev/urandom | base64 >"$T/token"
chmod 600 "$T/token"
PIDS=()
fail=0

cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  # workers are found by the marker in their environment, killed by PID
  for d in /proc/[0-9]*; do
    if grep -qs "P3D_TEST_MARK=$MARK" "$d/environ" 2>/dev/null; then
      kill -KILL "${d#/proc/}" 2>/dev/null
    fi
  done
  [ -n "${P3D_KEEP:-}" ] && echo "kept $T" >&2 || rm -rf "$T"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((30000 + RANDOM % 20000))
}

# Workers still alive that carry our marker (leftovers).
leftovers() {
  local n=0
  for d in /proc/[0-9]*; do
    grep -qs "P3D_TEST_MARK=$MARK" "$d/environ" 2>/dev/null && n=$((n + 1))
  done
  echo $n
}

bad() { echo "FAIL: $*"; fail=1; }

# agent NAME I N PORT [extra args...] -- PROGRAM... : starts node rank I in
# the background; its stdout/stderr go to $T/NAME.I.{out,err}; PID in
# AG[I].
declare -A AG
agent() {
  local name=$1 i=$2 n=$3 port=$4; shift 4
  "$PAR3DRUN" --nnodes "$n" --node-rank "$i" --rdzv "static:127.0.0.1:$port" \
    --rdzv-token-file "$T/token" --topology "${TOPOS[$((i % 4))]}" \
    --run-dir "$T/$name.rd$i" "$@" >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
}

# ms since the epoch
now_ms() { date +%s%3N; }

# slurm_up: the real Slurm of tests/services/slurm.sh in $T/slurm (slurmctld
# + slurmd fake nodes n1..n4; the caller's environment, e.g.
# P3D_SLURM_TASK_PLUGIN, reaches it), stopped by PID at exit; its clients'
# environment sourced. Exits 77 (skip) when Slurm is not installed.
slurm_up() {
  SVC=$P3D_SRC/tests/services/slurm.sh
  command -v slurmctld >/dev/null && command -v srun >/dev/null || { echo "skip: slurm-wlm not installed"; exit 77; }
  S=$T/slurm
  trap '"$SVC" stop "$S"; cleanup' EXIT
  local rc=0
  "$SVC" start "$S" >"$T/svc.out" 2>&1 || rc=$?
  [ "$rc" = 77 ] && { echo "skip: $(cat "$T/svc.out")"; exit 77; }
  [ "$rc" = 0 ] || { echo "FAIL: slurm did not start"; cat "$T/svc.out"; exit 1; }
  . "$S/env"
}

# wait_job ID SECONDS: waits until every record scontrol has of the job (one
# per component of a heterogeneous job) is in an end state, at most SECONDS;
# prints one "STATE EXITCODE" line per record (accounting is off). scontrol,
# not squeue: an squeue that fails or answers nothing under load must not
# end the wait early, and COMPLETING is not an end.
wait_job() {
  local id=$1 end=$(($(date +%s) + $2)) recs
  while :; do
    recs=$(scontrol show job -o "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\) .*ExitCode=\([0-9:]*\).*/\1 \2/p')
    [ -n "$recs" ] && ! printf '%s\n' "$recs" |
      grep -Evq '^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) ' && break
    [ "$(date +%s)" -lt "$end" ] || break
    sleep 0.2
  done
  printf '%s\n' "$recs"
}

# pmix_leaks_suppressed: under the sanitizer build, libpmix (srun
# --mpi=pmix) keeps allocations past PMIx_Finalize; those are its own, not
# par3drun's (as in multinode_pmix.sh).
pmix_leaks_suppressed() {
  printf 'leak:libpmix\nleak:libevent\nleak:libhwloc\nleak:libmca\n' >"$T/lsan.supp"
  export LSAN_OPTIONS="suppressions=$T/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
}

# etcd_up: a real etcd of tests/services/etcd.sh on 127.0.0.1 in $T/etcd,
# stopped at exit, its client URL in URL. It runs without our marker, so
# that it is not counted among the processes the test left behind. Exits
# 77 (skip) without the etcd plugin or etcd.
etcd_up() {
  SVC=$P3D_SRC/tests/services/etcd.sh
  [ -f "${P3D_PLUGIN_DIR:-$P3D_BUILD/plugins}/p3d_rdzv_etcd.so" ] || { echo "skip: p3d_rdzv_etcd.so not built (libcurl missing)"; exit 77; }
  command -v etcd >/dev/null || { echo "skip: etcd not installed (apt-get install etcd-server)"; exit 77; }
  E=$T/etcd
  trap '"$SVC" stop "$E"; cleanup' EXIT
  local rc=0
  URL=$(env -u P3D_TEST_MARK "$SVC" start "$E") || rc=$?
  [ "$rc" = 77 ] && exit 77
  [ "$rc" = 0 ] || { echo "FAIL: etcd did not start"; exit 1; }
  # etcd holds no secret: every agent brings the job key
  export P3D_RDZV_TOKEN=etcd-job-key-$$-$RANDOM
}

# nkeys: how many keys etcd_up's etcd holds under /par3drun/ (range_end
# "/par3drun0": '0' follows '/')
nkeys() {
  curl -s -m 2 "$URL/v3/kv/range" \
    -d "{\"key\":\"$(printf /par3drun/ | base64)\",\"range_end\":\"$(printf /par3drun0 | base64)\",\"count_only\":true}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("count","0"))'
}

# etcd_get KEY: the value etcd_up's etcd holds for KEY ("" when absent)
etcd_get() {
  curl -s -m 2 "$URL/v3/kv/range" -d "{\"key\":\"$(printf %s "$1" | base64 -w0)\"}" |
    python3 -c 'import base64,json,sys; k=json.load(sys.stdin).get("kvs",[]); print(base64.b64decode(k[0]["value"]).decode() if k else "")'
}

# ---- freezing (multinode_frozen.sh, multinode_fence.sh) ----------------
# Stopped PIDs are remembered and SIGKILLed by thaw_kill (call it from the
# EXIT trap: trap 'thaw_kill; cleanup' EXIT).
STOPPED=()
# every process of the tree rooted at $1, parents first
tree() {
  local p=$1 c
  echo "$p"
  for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do tree "$c"; done
}
freeze() { # PIDs... : SIGSTOP each (parents first), remembered for the cleanup
  local p
  for p in "$@"; do kill -STOP "$p" 2>/dev/null && STOPPED+=("$p"); done
}
# freezes the tree of $1; t0 = the time of the freeze (ms)
freeze_tree() {
  local pids
  pids=$(tree "$1")
  t0=$(now_ms)
  freeze $pids
}
thaw_kill() {
  local p
  for p in "${STOPPED[@]}"; do kill -KILL "$p" 2>/dev/null; done
  STOPPED=()
}

# ---- leader failover (multinode_failover.sh, multinode_etcd_failover.sh) ----
# wait_list NAME GEN FIRST WHAT NODES...: each of the NODES of run NAME
# says (under --verbose) it holds the successor list of restart GEN, with
# node rank FIRST first (FIRST "": any). A node without one when its leader
# dies can only stop, so a leader is killed only after this (a fixed sleep
# lost that race under load).
wait_list() {
  local name=$1 gen=$2 first=$3 what=$4 pat i k; shift 4
  pat="the successor list of restart $gen: [0-9]* candidates?, node rank ${first:-[0-9]*} first"
  for _ in $(seq 400); do
    k=0
    for i in "$@"; do grep -Eq "$pat" "$T/$name.$i.err" 2>/dev/null && k=$((k + 1)); done
    [ "$k" = $# ] && return 0
    sleep 0.05
  done
  bad "$what: $k of nodes $* hold the successor list of restart $gen${first:+ (node rank $first first)}"
  grep -H 'successor list' "$T"/"$name".*.err | sed 's/^/  /'
}
# thaw_node NAME I WHAT BEFORE: SIGCONT the frozen node I (PID AG[I]); it must exit 1
# and run no rank again (BEFORE: its count of rank lines when frozen)
thaw_node() {
  local name=$1 i=$2 what=$3 before=$4 p rc=timeout
  for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null; done
  STOPPED=()
  for _ in $(seq 200); do
    if ! kill -0 "${AG[$i]}" 2>/dev/null; then wait "${AG[$i]}"; rc=$?; break; fi
    sleep 0.05
  done
  [ "$rc" = 1 ] || { bad "$what: the frozen node $i exited '$rc' after SIGCONT, want 1"; sed "s/^/  $i: /" "$T/$name.$i.err"; }
  [ "$(grep -c 'gen=' "$T/$name.$i.out")" = "$before" ] || bad "$what: node $i ran ranks after SIGCONT"
}

# one_node_moved NAME N REF SKIP [RANK]: after one node of run NAME (N
# agents) was replaced: placement.json of every agent but SKIP is the same
# as agent REF's, and from REF's placement.1.json to its placement.json
# exactly the 8 ranks of the one lost node moved (with RANK: the node that
# ran that rank), all to one node, GPU for GPU, the rank set unchanged.
one_node_moved() {
  local name=$1 n=$2 ref=$3 skip=$4 rank=${5:-} i sum
  sum=$(sha256sum <"$T/$name.rd$ref/placement.json")
  for ((i = 0; i < n; i++)); do
    [ "$i" = "$skip" ] && continue
    [ "$(sha256sum <"$T/$name.rd$i/placement.json")" = "$sum" ] ||
      bad "$name: placement.json of agent $i differs from agent $ref's"
  done
  python3 - "$T/$name.rd$ref/placement.1.json" "$T/$name.rd$ref/placement.json" "$rank" <<'PY' ||
import json, sys
old = {r["rank"]: r for r in json.load(open(sys.argv[1]))["ranks"]}
doc = json.load(open(sys.argv[2]))
new = {r["rank"]: r for r in doc["ranks"]}
assert old.keys() == new.keys(), "rank sets differ"
lost = doc["lost"]
assert len(lost) == 1, lost
if sys.argv[3]:
    assert lost == [old[int(sys.argv[3])]["node"]], (lost, old[int(sys.argv[3])]["node"])
moved = sorted(r for r in old if (old[r]["node"], old[r]["gpu"]) != (new[r]["node"], new[r]["gpu"]))
want = sorted(r for r in old if old[r]["node"] == lost[0])
assert moved == want and len(want) == 8, (moved, want)
assert len({new[r]["node"] for r in moved}) == 1, "the lost node's ranks went to several nodes"
assert all(new[r]["gpu"] == old[r]["gpu"] for r in moved), "a moved rank changed GPU index"
PY
    bad "$name: the moved ranks are wrong"
}
