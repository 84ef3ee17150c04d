#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# plan-scale.sh — how `par3drun plan` grows with the cluster (docs/limits.md,
# "plan"): wall time and peak RSS for synthetic DGX H100 clusters of
# 1,024 .. 8,192 nodes (racks of 32), and the refusal past the bound
# (1,048,576 nodes: refused, in how long). Prints figures; never fails on
# time.
#   bench/plan-scale.sh [PAR3DRUN] [MODEL]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$here/../build/par3drun}
model=${2:-llama3-8b}
T=$(mktemp -d "${TMPDIR:-/tmp}/p3d-plan-scale.XXXXXX")
trap 'rm -rf "$T"' EXIT
topo=$here/../examples/topologies/dgx-h100.xml
printf '%10s %10s %12s %s\n' nodes seconds peak_MiB result
for n in 1024 2048 4096 8192 1048576; do
    python3 "$here/gen-cluster.py" -n "$n" --rack-size $((n > 8192 ? n : 32)) --topology "$topo" -o "$T/c.json"
    /usr/bin/time -f '%e %M' -o "$T/time" "$bin" plan --cluster "$T/c.json" --model "$model" \
        --global-batch $((n * 8)) >/dev/null 2>"$T/err"
    rc=$?
    read -r secs kb < <(tail -n 1 "$T/time" 2>/dev/null) || { secs=?; kb=0; }
    case $rc in 0) res=planned ;; 2) res="refused: $(grep -o 'the limit is [0-9]*' "$T/err" | head -1)" ;; *) res="exit $rc" ;; esac
    printf '%10d %10s %12d %s\n' "$n" "$secs" $((kb / 1024)) "$res"
done
