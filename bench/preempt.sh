#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/preempt.sh — what a preemption costs (docs/launch.md, "Preemption"),
# for an emulated 2-node job of the bundled worker on the CPU (tp2 pp2 dp2,
# 8 ranks, --checkpoint-dir):
#   warning -> exit: SIGUSR1 to par3drun until it exited 75 (the ranks
#     agree on the step, write its checkpoint, report it, end), wall clock
#     from the shell; and warning -> checkpoint reported, from the leader's
#     events.jsonl (preempt -> preempted);
#   the per-step agreement: the same 2000-step run with the preempt signal
#     armed (default) and with --preempt-signal none (no all-reduce of the
#     flag), wall seconds of the whole job.
# Median of RUNS runs. Prints figures, never fails on time.
#
#   bench/preempt.sh [BUILD_DIR]          (default: build)
#   RUNS=5 bench/preempt.sh build
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-5}
par3drun=$build/par3drun
worker=$build/p3d-worker
[ -x "$worker" ] || { echo "p3d-worker not built in $build"; exit 1; }
T=$(mktemp -d /tmp/p3d-preempt-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
job=(--emulate --cluster examples/clusters/2x-dgx-h100.json --tp 2 --pp 2 --dp 2 --grace 20
     --progress-interval 0.2)
wargs=(--backend cpu --layers 4 --hidden 16 --global-batch 16 --micro-batches 2 --lr 1 --timeout 120
       --checkpoint-every 1000000)
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
now() { date +%s.%N; }

: >"$T/exit"
: >"$T/ckpt"
for i in $(seq "$runs"); do
  rm -rf "$T/ck" "$T/rd"
  "$par3drun" "${job[@]}" --run-dir "$T/rd" -- "$worker" "${wargs[@]}" --checkpoint-dir "$T/ck" --steps 1000000 \
    >"$T/out" 2>&1 &
  pid=$!
  for _ in $(seq 400); do grep -qs 'step=[1-9][0-9]' "$T/rd/heartbeat/rank-0" && break; sleep 0.05; done
  t0=$(now)
  kill -USR1 "$pid"
  rc=0
  wait "$pid" || rc=$?
  t1=$(now)
  [ "$rc" = 75 ] || { echo "run $i: exit $rc, want 75"; tail -5 "$T/out"; exit 1; }
  echo "$t1 $t0" | awk '{printf "%.3f\n", $1 - $2}' >>"$T/exit"
  python3 - "$T/rd/events.jsonl" >>"$T/ckpt" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
a = next(e["t"] for e in ev if e["event"] == "preempt")
b = next(e["t"] for e in ev if e["event"] == "preempted")
print(f"{b - a:.3f}")
PY
done
echo "preemption, 8 CPU ranks on 2 emulated nodes, median of $runs:"
echo "  SIGUSR1 -> par3drun exited 75:             $(median <"$T/exit") s"
echo "  warning -> every node's checkpoint (events): $(median <"$T/ckpt") s"

for mode in armed none; do
  : >"$T/t.$mode"
  extra=()
  [ "$mode" = none ] && extra=(--preempt-signal none)
  for i in $(seq "$runs"); do
    rm -rf "$T/ck"
    t0=$(now)
    "$par3drun" "${job[@]}" ${extra[@]+"${extra[@]}"} -- "$worker" "${wargs[@]}" --checkpoint-dir "$T/ck" \
      --steps 2000 >"$T/out" 2>&1 || { echo "$mode run $i failed"; tail -5 "$T/out"; exit 1; }
    t1=$(now)
    echo "$t1 $t0" | awk '{printf "%.3f\n", $1 - $2}' >>"$T/t.$mode"
  done
done
echo "2000 steps, the same job, median of $runs (the agreement: one all-reduce of a flag per group a step):"
echo "  preempt signal armed (default): $(median <"$T/t.armed") s"
echo "  --preempt-signal none:          $(median <"$T/t.none") s"
