#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p3d-worker, CPU backend, every mesh of issue 6 with m in {1,4}: each run
# must pass --verify (distributed losses == single-process reference within
# 1e-5).  Ranks are started by worker_harness.sh (the launcher's env, Megatron
# order); worker_par3drun.sh runs the same set under par3drun --emulate.
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
for mesh in 1x1x1 2x1x1 1x2x1 1x1x2 2x2x2 4x2x1 2x2x4; do
    IFS=x read -r tp pp dp <<<"$mesh"
    for m in 1 4; do
        out="$dir/$mesh-m$m"
        if ! p3dw_run "$out" "$tp" "$pp" "$dp" -- "$P3D_WORKER" --backend cpu --verify --json \
            --layers 4 --hidden 16 --global-batch 32 --micro-batches "$m" --steps 3; then
            echo "FAIL: mesh $mesh m=$m exited non-zero"; cat "$out"/rank-*.log; fail=1; continue
        fi
        sum=$(grep -h '"summary":true' "$out"/rank-0.log)
        if [[ $sum != *'"verify":"pass"'* ]]; then
            echo "FAIL: mesh $mesh m=$m: no verify pass: $sum"; fail=1; continue
        fi
        n=$(cat "$out"/rank-*.log | grep -c '^{"rank":')
        if ((n != tp * pp * dp)); then
            echo "FAIL: mesh $mesh m=$m: $n per-rank JSON lines, expected $((tp * pp * dp))"; fail=1
        fi
        echo "ok: mesh $mesh m=$m $(grep -o '"max_rel_diff":[^}]*' <<<"$sum")"
    done
done
exit $fail
