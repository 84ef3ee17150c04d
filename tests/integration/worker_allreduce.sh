#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The CPU backend's ring all-reduce over TCP, checked exactly: the worker's
# --bench-allreduce checks every size's first all-reduce against the exact
# sum and exits 1 on a mismatch.  3 ranks (segments of unequal length) and
# 4 ranks, sizes 4 bytes (segments of 0 elements) to 1 MiB, plus a second
# all-reduce per size right after a barrier (ranks run ahead of each other
# into the next collective).
set -u
if [[ -z ${P3D_WORKER:-} || ! -x ${P3D_WORKER:-} ]]; then
    echo "P3D_WORKER is not set or not executable: p3d-worker not built"
    exit 77
fi
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
for n in 3 4; do
    if ! p3dw_run "$dir/n$n" 1 1 "$n" -- "$P3D_WORKER" --bench-allreduce --bench-min 4 \
        --bench-max 1M --bench-iters 2 --timeout 30; then
        cat "$dir/n$n"/rank-*.log
        echo "FAIL: $n-rank all-reduce sweep failed"
        fail=1
        continue
    fi
    sizes=$(grep -c '"bench":"allreduce"' "$dir/n$n/rank-0.log")
    # 4 B .. 1 MiB doubling: 19 sizes.
    [[ $sizes == 19 ]] || { cat "$dir/n$n/rank-0.log"; echo "FAIL: $n ranks: $sizes sizes, expected 19"; fail=1; }
    echo "ok: $n-rank all-reduce exact for 4 B - 1 MiB"
done
exit $fail
