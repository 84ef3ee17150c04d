#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# par3drun sets NCCL_COMM_ID for the bundled worker only: run directly or
# through a wrapper that execs it (p3d-worker among the wrapper's
# arguments, as scripts/gpu-check.sh runs every check); never for another
# program.  The wrapper here prints the variable instead of exec'ing.
set -u
cluster=${P3D_SRC:?}/examples/clusters/2x-dgx-h100.json
[[ -f $cluster ]] || { echo "FAIL: $cluster is missing"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '#!/bin/sh\necho "rank $RANK NCCL_COMM_ID=${NCCL_COMM_ID:-unset}"\n' >"$dir/wrap.sh"
chmod +x "$dir/wrap.sh"
mkdir -p "$dir/bin" && ln -s /bin/true "$dir/bin/p3d-worker"
fail=0
run() { timeout 120 "$PAR3DRUN" --emulate --cluster "$cluster" --tp 2 --pp 1 --dp 1 -- "$@" 2>&1; }
out=$(run "$dir/wrap.sh" "$dir/bin/p3d-worker" --steps 1)
n=$(grep -c 'NCCL_COMM_ID=[0-9.]*:[0-9]\+$' <<<"$out")
((n == 2)) || { echo "FAIL: a wrapper of p3d-worker: $n of 2 ranks got NCCL_COMM_ID"; echo "$out" | tail -4; fail=1; }
ids=$(grep -o 'NCCL_COMM_ID=.*' <<<"$out" | sort -u | wc -l)
((ids == 1)) || { echo "FAIL: the ranks got $ids different NCCL_COMM_IDs"; fail=1; }
out=$(run "$dir/wrap.sh" /bin/true)
n=$(grep -c 'NCCL_COMM_ID=unset' <<<"$out")
((n == 2)) || { echo "FAIL: another program got NCCL_COMM_ID ($n of 2 unset)"; echo "$out" | tail -4; fail=1; }
((fail == 0)) && echo "ok: NCCL_COMM_ID for p3d-worker behind a wrapper, not for other programs"
exit $fail
