#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# P3DW_SOLO_COMM=1 (a test switch, used by scripts/gpu-check.sh on a
# one-GPU machine): train.c and moe.c call every collective even on groups
# of one.  On the CPU backend, tp=pp=dp=1 with experts: without the switch
# no collective runs (op counts 0); with it the TP/DP/EDP all-reduces, the
# self send/receive and the EP all-to-all all run (counts > 0), the losses
# are the same to the last digit and --verify passes.  P3DW_BREAK=router
# (the MoE router gradient dropped) must fail --verify.
set -u
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
args=(--backend cpu --json --layers 4 --hidden 64 --steps 3 --global-batch 16 --experts 4 --top-k 2
      --verify --timeout 30)
p3dw_run "$dir/off" 1 1 1 -- "$P3D_WORKER" "${args[@]}" || { echo "FAIL: plain run"; fail=1; }
P3DW_SOLO_COMM=1 p3dw_run "$dir/on" 1 1 1 -- "$P3D_WORKER" "${args[@]}" ||
    { echo "FAIL: P3DW_SOLO_COMM=1 run"; tail -3 "$dir/on/rank-0.log"; fail=1; }
ops() { # log field -> the ops count of that collective in the rank record
    grep -h '"rank":0,' "$1" | head -1 | grep -o "\"$2\":{\"ops\":[0-9]*" | grep -o '[0-9]*$'
}
for f in tp_allreduce pp_send pp_recv dp_allreduce ep_alltoall edp_allreduce; do
    a=$(ops "$dir/off/rank-0.log" $f) b=$(ops "$dir/on/rank-0.log" $f)
    [[ $a == 0 ]] || { echo "FAIL: $f ran ${a:-?} times on a group of one without the switch"; fail=1; }
    [[ -n $b && $b -gt 0 ]] || { echo "FAIL: $f ran ${b:-no} times with P3DW_SOLO_COMM=1"; fail=1; }
    echo "ok: $f: off ${a:-?}, on ${b:-?} ops"
done
la=$(grep -h '"step":' "$dir/off/rank-0.log") lb=$(grep -h '"step":' "$dir/on/rank-0.log")
[[ -n $la && $la == "$lb" ]] || { echo "FAIL: the losses differ with the switch"; fail=1; }
grep -q '"verify":"pass"' "$dir/on/rank-0.log" || { echo "FAIL: --verify with the switch"; fail=1; }
grep -q 'P3DW_SOLO_COMM=1: every collective runs' "$dir/on/rank-0.log" ||
    { echo "FAIL: the switch does not say it is on"; fail=1; }
P3DW_BREAK=router p3dw_run "$dir/router" 1 1 1 -- "$P3D_WORKER" "${args[@]}"
rc=$?
((rc == 1)) && grep -q -- '--verify FAILED' "$dir/router/rank-0.log" ||
    { echo "FAIL: P3DW_BREAK=router passed --verify (exit $rc)"; fail=1; }
P3DW_SOLO_COMM=yes p3dw_run "$dir/bad" 1 1 1 -- "$P3D_WORKER" --backend cpu --steps 1
rc=$?
((rc == 2)) && grep -q "P3DW_SOLO_COMM='yes': expected 0 or 1" "$dir/bad/rank-0.log" ||
    { echo "FAIL: a malformed P3DW_SOLO_COMM: exit $rc"; fail=1; }
((fail == 0)) && echo "ok: P3DW_SOLO_COMM runs every collective on groups of one; router break caught"
exit $fail
