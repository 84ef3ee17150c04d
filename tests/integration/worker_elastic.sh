#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The bundled worker across data-parallel widths (issue 42): under
# par3drun --emulate with --global-batch 24 --micro-batch 2 --min-dp 3, a
# run at dp 4 (3 micro-batches per replica) to step 3, resumed at dp 3 (4
# micro-batches, from the checkpoint written at dp 4) to step 5, then at
# dp 4 again to step 8, has the same loss at every step as the run that
# stayed at dp 4, and its --verify against the one-process reference
# passes over all 8 steps. The worker takes the batch from P3D_GLOBAL_BATCH
# and P3D_MICRO_BATCHES (no batch option of its own here).
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
cluster=${P3D_SRC:?}/examples/clusters/2x-dgx-h100.json
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
wargs=(--backend cpu --verify --layers 4 --hidden 16 --lr 1 --timeout 30 --checkpoint-every 1 --checkpoint-keep 0)
run() { # NAME DP STEPS CKDIR -> exit code; output in $dir/NAME.out
    timeout 300 "$PAR3DRUN" --emulate --cluster "$cluster" --tp 2 --pp 2 --dp "$2" --min-dp 3 --global-batch 24 \
        --micro-batch 2 --grace 2 -- "$P3D_WORKER" "${wargs[@]}" --steps "$3" --checkpoint-dir "$4" \
        >"$dir/$1.out" 2>&1
}
losses() { cat "$@" | grep -o 'step [0-9]*/[0-9]* loss [0-9.e+-]*' | sed 's|/[0-9]*||' | sort -u -k2,2n; }

run ref 4 8 "$dir/ck-ref" || { bad "uninterrupted dp 4 run (exit $?)"; tail -20 "$dir/ref.out"; exit 1; }
grep -q 'verify: pass' "$dir/ref.out" || bad "the dp 4 run does not verify"
grep -q '3 micro-batches' "$dir/ref.out" || bad "dp 4: not 3 micro-batches (P3D_MICRO_BATCHES)"

run w4 4 3 "$dir/ck" || bad "dp 4 to step 3 (exit $?)"
run w3 3 5 "$dir/ck" || { bad "dp 3 from step 3 (exit $?)"; tail -20 "$dir/w3.out"; }
grep -q 'checkpoint step 3 was written at dp 4; resuming at dp 3' "$dir/w3.out" || bad "dp 3 did not resume at step 3"
grep -q '4 micro-batches' "$dir/w3.out" || bad "dp 3: not 4 micro-batches"
run w4b 4 8 "$dir/ck" || { bad "dp 4 from step 5 (exit $?)"; tail -20 "$dir/w4b.out"; }
grep -q 'checkpoint step 5 was written at dp 3; resuming at dp 4' "$dir/w4b.out" || bad "dp 4 did not resume at step 5"
grep -q 'verify: pass' "$dir/w4b.out" || bad "the 4 -> 3 -> 4 run does not verify over its 8 steps"

losses "$dir/ref.out" >"$dir/ref.loss"
losses "$dir/w4.out" "$dir/w3.out" "$dir/w4b.out" >"$dir/el.loss"
paste "$dir/ref.loss" "$dir/el.loss"
python3 - "$dir/ref.loss" "$dir/el.loss" <<'PY' || bad "losses differ across widths"
import sys
ref = [l.split() for l in open(sys.argv[1])]
el = [l.split() for l in open(sys.argv[2])]
assert len(ref) == len(el) == 8, (len(ref), len(el))
for a, b in zip(ref, el):
    assert a[1] == b[1], (a, b)
    x, y = float(a[3]), float(b[3])
    # fp32 sums in another order (4 or 3 replicas, 3 or 4 micro-batches): equal to 1e-5
    assert abs(x - y) <= 1e-5 * abs(x), f"step {a[1]}: {x} at dp 4, {y} across widths"
PY
((fail == 0)) && echo ok
exit $fail
