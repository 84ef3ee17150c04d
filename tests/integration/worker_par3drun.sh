#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p3d-worker under the real launcher: par3drun --emulate starts every node of
# the 16-GPU cluster as its own agent on this host and the workers train on
# the CPU backend.  Every mesh of issue 6 with m in {1,4} must pass --verify,
# and the groups the launcher promised must be the ones the worker derives
# (the worker exits 2 otherwise).
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
cluster=${P3D_SRC:?}/examples/clusters/2x-dgx-h100.json
# a tracked fixture that is missing, or an --emulate that cannot launch,
# is a broken build: fail, never skip
[[ -f $cluster ]] || { echo "FAIL: $cluster is missing"; exit 1; }
if ! out=$("$PAR3DRUN" --emulate --cluster "$cluster" --tp 1 --pp 1 --dp 1 -- /bin/true 2>&1); then
    echo "FAIL: par3drun --emulate cannot launch: $out" | head -3
    exit 1
fi
fail=0
for mesh in 1x1x1 2x1x1 1x2x1 1x1x2 2x2x2 4x2x1 2x2x4; do
    IFS=x read -r tp pp dp <<<"$mesh"
    for m in 1 4; do
        out=$(timeout 300 "$PAR3DRUN" --emulate --cluster "$cluster" --tp "$tp" --pp "$pp" --dp "$dp" \
            -- "$P3D_WORKER" --backend cpu --verify --json --layers 4 --hidden 16 --global-batch 32 \
            --micro-batches "$m" --steps 3 2>&1)
        rc=$?
        if ((rc != 0)) || ! grep -q '"summary":true.*"verify":"pass"' <<<"$out"; then
            echo "FAIL: mesh $mesh m=$m (exit $rc)"; echo "$out" | tail -20; fail=1; continue
        fi
        n=$(grep -c '{"rank":' <<<"$out")
        ((n == tp * pp * dp)) || { echo "FAIL: mesh $mesh m=$m: $n rank lines"; fail=1; }
        echo "ok: mesh $mesh m=$m under par3drun --emulate"
    done
done
exit $fail
