#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The measured pipeline bubble (time waiting in PP receives / step time)
# must follow the analytic (p-1)/(m+p-1) as m grows: pp=2, m=1 (0.5) against
# m=8 (0.11).  Loose on purpose: two shared cores are noisy.  The combined
# exchanges make the stages meet once per micro-batch, so each micro-batch
# must be long against a scheduler time slice (global batch 512): else
# waiting for a descheduled neighbour looks like bubble.
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
field() { grep -h '"summary":true' "$1"/rank-0.log | grep -o "\"$2\":[0-9.e+-]*" | cut -d: -f2; }
for m in 1 8; do
    p3dw_run "$dir/m$m" 1 2 1 -- "$P3D_WORKER" --backend cpu --json --layers 4 --hidden 128 \
        --global-batch 512 --micro-batches $m --steps 3 || { cat "$dir/m$m"/*.log; exit 1; }
    echo "m=$m measured $(field "$dir/m$m" bubble_measured) analytic $(field "$dir/m$m" bubble_analytic)"
done
b1=$(field "$dir/m1" bubble_measured) b8=$(field "$dir/m8" bubble_measured)
a1=$(field "$dir/m1" bubble_analytic) a8=$(field "$dir/m8" bubble_analytic)
awk -v b1="$b1" -v b8="$b8" -v a1="$a1" -v a8="$a8" 'BEGIN {
    if (a1 < 0.49 || a1 > 0.51 || a8 < 0.11 || a8 > 0.112) { print "FAIL: analytic bubble wrong"; exit 1 }
    if (!(b1 > b8 + 0.05)) { print "FAIL: measured bubble does not fall with m"; exit 1 }
    if (b1 < 0.2 || b1 > 0.8) { print "FAIL: measured bubble at m=1 far from 0.5"; exit 1 }
    print "ok: measured bubble falls from " b1 " to " b8 }'
