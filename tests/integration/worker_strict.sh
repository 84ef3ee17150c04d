#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# 1F1B is deadlock-free under NCCL's rule "a send may wait until the
# matching receive is posted": p3d-worker --p2p strict makes every CPU send
# wait for the receiver's clear-to-send, so a schedule that relies on a send
# being buffered hangs here and fails at --timeout.  Every pp in 2..4 with
# every micro-batch count 1..8 must finish and pass --verify; then the two
# runs of issue 17 under par3drun --emulate (tp2 pp2 dp2, 4 micro-batches,
# hidden 512; pp4 with 8 micro-batches).
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
check() { # name outdir-or-file
    if ! grep -q '"verify":"pass"' "$2"; then
        echo "FAIL: $1"; grep -h 'p3d-worker\|par3drun' "$2" | tail -5; fail=1
    fi
}
for pp in 2 3 4; do
    ok=""
    for m in 1 2 3 4 5 6 7 8; do
        out="$dir/pp$pp-m$m"
        p3dw_run "$out" 1 "$pp" 1 -- "$P3D_WORKER" --backend cpu --p2p strict --verify --json \
            --layers 4 --hidden 16 --global-batch 840 --micro-batches "$m" --steps 2 \
            --timeout 20 --verify-tol 1e-5 || { echo "FAIL: pp=$pp m=$m exited non-zero"; fail=1; }
        grep -q '"verify":"pass"' "$out/rank-0.log" && ok+=" $m" || check "pp=$pp m=$m" "$out/rank-0.log"
    done
    echo "ok: --p2p strict pp=$pp m=$ok"
done
# dp and tp beside pp: the DP and TP all-reduces run under strict sends too.
p3dw_run "$dir/mix" 2 2 2 -- "$P3D_WORKER" --backend cpu --p2p strict --verify --json \
    --global-batch 32 --micro-batches 4 --steps 2 --timeout 20 || fail=1
check "tp2 pp2 dp2 m4 (harness)" "$dir/mix/rank-0.log"

cluster=${P3D_SRC:?}/examples/clusters/2x-dgx-h100.json
[[ -x ${PAR3DRUN:-} ]] || { echo "FAIL: PAR3DRUN unset"; exit 1; }
run() { # name mesh... -- worker args
    local name=$1
    shift
    timeout 600 "$PAR3DRUN" --emulate --cluster "$cluster" "$@" >"$dir/$name.log" 2>&1 ||
        { echo "FAIL: $name: par3drun exited $?"; tail -5 "$dir/$name.log"; fail=1; return; }
    check "$name" "$dir/$name.log"
    grep -h '"summary":true' "$dir/$name.log" | grep -o '"mesh":{[^}]*}\|"verify":"[a-z]*","max_rel_diff":[0-9.e+-]*' |
        tr '\n' ' ' | sed "s/^/ok: $name under par3drun --emulate: /"
    echo
}
run tp2-pp2-dp2-m4-h512 --tp 2 --pp 2 --dp 2 -- "$P3D_WORKER" --backend cpu --p2p strict --verify \
    --json --hidden 512 --global-batch 32 --micro-batches 4 --steps 3 --timeout 60
run pp4-m8 --tp 1 --pp 4 --dp 1 -- "$P3D_WORKER" --backend cpu --p2p strict --verify --json \
    --global-batch 32 --micro-batches 8 --steps 3 --timeout 60
exit $fail
