#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A worker whose P3D_*_GROUP list differs from the split of the mesh
# coordinates stops the whole job with both lists printed; a rank that dies
# makes its peers exit non-zero with a message naming it (never a hang).
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
if P3DW_BAD_GROUP="3:tp:2,4" p3dw_run "$dir/bad" 2 2 1 -- "$P3D_WORKER" --backend cpu --steps 1; then
    echo "FAIL: wrong P3D_TP_GROUP accepted"; fail=1
fi
grep -q 'tp group mismatch: P3D_TP_GROUP=2,4 but the split of the mesh coordinates gives 2,3' \
    "$dir/bad/rank-3.log" || { echo "FAIL: no clear mismatch message"; cat "$dir"/bad/*.log; fail=1; }
for r in 0 1 2; do
    grep -q 'group mismatch' "$dir/bad/rank-$r.log" && continue
    grep -q 'found a group mismatch\|connection to rank' "$dir/bad/rank-$r.log" || [[ $r != 0 ]] ||
        { echo "FAIL: rank 0 did not report the mismatch"; fail=1; }
done
echo "ok: wrong group list rejected: $(grep -h mismatch "$dir/bad/rank-3.log")"

# Rank 2 (the loss printer) is killed once training runs; the others must
# fail within --timeout with a message, not hang.
start=$SECONDS
mkdir -p "$dir/kill"
LOG="$dir/kill/rank-2.log" p3dw_run "$dir/kill" 2 2 1 -- bash -c '
    if [ "$RANK" = 2 ]; then
        "$0" "$@" & pid=$!
        for i in $(seq 600); do grep -q "step 3/" "$LOG" && break; sleep 0.1; done
        kill -9 $pid; exit 9
    fi
    exec "$0" "$@"' "$P3D_WORKER" --backend cpu --steps 100000 --timeout 10
rc=$?
((rc != 0)) || { echo "FAIL: job with a dead rank exited 0"; fail=1; }
# the time is a figure, not a bound (ctest's TIMEOUT catches a hang)
echo "dead-rank job ended in $((SECONDS - start)) s"
for r in 0 1 3; do
    grep -q 'did rank [0-9]* exit or crash\|within 10 s' "$dir/kill/rank-$r.log" ||
        { echo "FAIL: rank $r gave no clear message"; cat "$dir/kill/rank-$r.log"; fail=1; }
done
grep -h 'p3d-worker: rank' "$dir"/kill/rank-*.log | sed 's/^/  /'
exit $fail
