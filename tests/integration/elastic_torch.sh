#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# examples/elastic/ddp_accum.py (DDP, gloo, CPU) under par3drun keeps its
# global batch across widths: 24 samples a step, micro-batch 2, so 3
# micro-batches per replica at dp 4 and 4 at dp 3. A run that goes
# 4 -> 3 -> 4 replicas (stopped after steps 2 and 4, resumed from its
# checkpoint at the other width) has, step by step, the loss of the run
# that never stopped (float64: equal to 1e-9, only the sum's order differs).
. "$(dirname "$0")/lib/launch_common.sh"
. "$(dirname "$0")/lib/torch_py.sh"
PROG=$P3D_SRC/examples/elastic/ddp_accum.py
run() { # run WIDTH STEPS CKPT LOG
  (cd "$T" && "$PAR3DRUN" --nproc-per-node "$1" --global-batch 24 --micro-batch 2 --no-tag-output \
    "$PROG" --steps "$2" --ckpt "$3" --log "$4") >"$T/out" 2>&1 || { cat "$T/out"; fail "width $1 to step $2 failed"; }
}
run 4 6 "$T/ref.pt" "$T/ref.txt"
run 4 2 "$T/el.pt" "$T/el.txt"
run 3 4 "$T/el.pt" "$T/el.txt"
run 4 6 "$T/el.pt" "$T/el.txt"
cat "$T/el.txt"
[ "$(awk '{print $4}' "$T/el.txt" | tr '\n' ' ')" = "4 4 3 3 4 4 " ] || fail "widths were not 4 4 3 3 4 4"
"$PY" - "$T/ref.txt" "$T/el.txt" <<'PY' || fail "losses differ across widths"
import sys
ref = [l.split() for l in open(sys.argv[1])]
el = [l.split() for l in open(sys.argv[2])]
assert len(ref) == len(el) == 6, (len(ref), len(el))
for a, b in zip(ref, el):
    assert a[1] == b[1], (a, b)
    x, y = float(a[5]), float(b[5])
    assert abs(x - y) <= 1e-9 * abs(x), f"step {a[1]}: {x} uninterrupted, {y} across widths"
print("6 steps, 4 -> 3 -> 4 replicas: the same loss as the uninterrupted run")
PY
echo ok
