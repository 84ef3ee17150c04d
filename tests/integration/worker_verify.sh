#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --verify and --check-grad can fail.  The reference of --verify is the
# one-process CPU path and the training must move the loss (>= 10% over the
# verified steps), so a broken operation of the backend under test shows:
# P3DW_BREAK (a test-only switch) doubles the backend's GeLU forward or
# skips its DP gradient all-reduce.  --check-grad compares one layer's
# gradients with finite differences, so the GeLU bug fails it too even
# though forward and backward would agree with a reference sharing the bug.
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
args=(--backend cpu --json --verify --check-grad --steps 5 --micro-batches 2 --global-batch 16 --timeout 20)

# Clean: both pass, and the loss moved enough for verify to mean something.
if ! p3dw_run "$dir/ok" 2 2 2 -- "$P3D_WORKER" "${args[@]}"; then
    echo "FAIL: the clean run failed"; cat "$dir"/ok/rank-0.log; fail=1
fi
grep -q '"verify":"pass"' "$dir/ok/rank-0.log" || { echo "FAIL: clean run: no verify pass"; fail=1; }
grep -q 'check-grad: pass' "$dir/ok/rank-0.log" || { echo "FAIL: clean run: check-grad did not pass"; fail=1; }
drop=$(grep -o 'reference loss fell by [0-9.]*%' "$dir/ok/rank-0.log" | grep -o '[0-9.]*')
awk -v d="${drop:-0}" 'BEGIN { exit !(d >= 10) }' ||
    { echo "FAIL: the reference loss fell by only ${drop:-?}% (verify would be weak)"; fail=1; }
echo "ok: clean run verifies, check-grad passes, loss fell by $drop%"

# Broken GeLU: verify and check-grad fail, exit 1.
P3DW_BREAK=gelu p3dw_run "$dir/gelu" 2 2 2 -- "$P3D_WORKER" "${args[@]}"
rc=$?
((rc == 1)) || { echo "FAIL: broken GeLU: exit $rc, expected 1"; fail=1; }
grep -q '\-\-verify FAILED' "$dir/gelu/rank-0.log" || { echo "FAIL: broken GeLU passed --verify"; fail=1; }
grep -q '\-\-check-grad FAILED' "$dir/gelu/rank-0.log" || { echo "FAIL: broken GeLU passed --check-grad"; fail=1; }
echo "ok: broken GeLU: $(grep -h -- '--verify FAILED' "$dir/gelu/rank-0.log" | cut -c1-90)..."

# Broken DP all-reduce (a communication bug, not an op bug): verify fails.
P3DW_BREAK=dp-allreduce p3dw_run "$dir/dp" 1 1 2 -- "$P3D_WORKER" "${args[@]}"
rc=$?
((rc == 1)) || { echo "FAIL: broken DP all-reduce: exit $rc, expected 1"; fail=1; }
grep -q '\-\-verify FAILED' "$dir/dp/rank-0.log" || { echo "FAIL: broken DP all-reduce passed --verify"; fail=1; }
echo "ok: broken DP all-reduce: $(grep -h -- '--verify FAILED' "$dir/dp/rank-0.log" | cut -c1-90)..."

# Default output (issue 14): loss lines and one human table, no JSON; the
# JSON report goes to P3D_LOG_DIR (par3drun --log-dir) when it is set.
mkdir -p "$dir/logs"
P3D_LOG_DIR=$dir/logs p3dw_run "$dir/plain" 1 2 1 -- "$P3D_WORKER" --backend cpu --verify \
    --micro-batches 2 --steps 2 || { echo "FAIL: plain run"; fail=1; }
if cat "$dir"/plain/rank-*.log | grep -q '^{'; then
    echo "FAIL: JSON on stdout without --json"; fail=1
fi
grep -q '^ rank  node  tp  pp  dp' "$dir/plain/rank-0.log" || { echo "FAIL: no summary table"; fail=1; }
grep -q 'step 2/2 loss' "$dir/plain/rank-1.log" || { echo "FAIL: no loss lines"; fail=1; }
for f in worker-rank-0.json worker-rank-1.json worker-summary.json; do
    grep -q '^{"' "$dir/logs/$f" 2>/dev/null || { echo "FAIL: no $f in P3D_LOG_DIR"; fail=1; }
done
echo "ok: default output is loss lines + a table; JSON in P3D_LOG_DIR"

# An unknown switch value is refused (exit 2), never ignored.
P3DW_BREAK=nonsense p3dw_run "$dir/bad" 1 1 1 -- "$P3D_WORKER" --backend cpu --steps 1
rc=$?
((rc == 2)) && grep -q "P3DW_BREAK='nonsense': expected" "$dir/bad/rank-0.log" ||
    { echo "FAIL: P3DW_BREAK=nonsense: exit $rc"; cat "$dir/bad/rank-0.log"; fail=1; }
exit $fail
