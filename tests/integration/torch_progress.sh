#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The PyTorch progress snippet of docs/launch.md ("When a node is slow"),
# taken from the doc itself (the ```python block after "A PyTorch
# program"), run after every step of a small CPU training loop under
# par3drun --emulate (2 nodes, one rank each): the controller reads the
# lines it writes — RUN_DIR/status.txt (par3drun status) shows both nodes
# reporting, the last step and no warning about a malformed line; every
# rank's last line is step=STEPS busy=... ckpt=.... On CPU the snippet's
# time.perf_counter() branch runs; its torch.cuda.Event branch runs only
# on a GPU (not here). Skipped (77) when no python3 here imports torch
# (Debian: apt-get install python3-torch; scripts/setup.sh installs it).
. "$(dirname "$0")/lib/launch_common.sh"
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then PY=$(command -v "$p"); break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 here imports torch (apt-get install python3-torch)"; exit 77; }

# the block, exactly as the doc has it
awk '/A PyTorch program/ {want = 1} want && /^```python$/ {inb = 1; next} inb && /^```$/ {exit} inb {print}' \
  "$P3D_SRC/docs/launch.md" >"$T/snippet.py"
grep -q 'progress(step, busy, last_saved_step)' "$T/snippet.py" || { cat "$T/snippet.py"; fail "snippet not found in docs/launch.md"; }
grep -q 'torch.cuda.Event' "$T/snippet.py" || fail "the snippet lost its CUDA branch"

# a training loop around it: the snippet runs after every step with the
# loop's model, batch, step and last_saved_step (a "checkpoint" every 5
# steps); the sleep stands for the time spent waiting on peers
cat >"$T/train.py" <<'PY'
import os, sys, time, torch
torch.manual_seed(int(os.environ.get("RANK", "0")))
snippet = compile(open(sys.argv[1]).read(), sys.argv[1], "exec")
model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.GELU(), torch.nn.Linear(128, 128))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
last_saved_step = None
for step in range(1, int(sys.argv[2]) + 1):
    batch = torch.randn(32, 128)
    g = {"model": model, "batch": batch, "step": step, "last_saved_step": last_saved_step}
    exec(snippet, g)
    assert g["busy"] > 0, g["busy"]
    opt.step()
    opt.zero_grad()
    if step % 5 == 0:
        last_saved_step = step
    time.sleep(0.05)
print("last line:", open(os.environ["P3D_HEARTBEAT"]).read().strip())
PY
STEPS=30
RD=$T/rd
set +e
timeout 180 "$PAR3DRUN" --emulate --cluster "$CLUSTER" --nproc-per-node 1 --tp 1 --progress-interval 0.2 \
  --env OMP_NUM_THREADS=1 --run-dir "$RD" -- "$PY" "$T/train.py" "$T/snippet.py" "$STEPS" >"$T/out" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$T/out"; fail "exit $rc, want 0"; }
! grep -q 'progress file' "$T/out" || { cat "$T/out"; fail "the controller refused a progress line"; }
[ "$(grep -Ec "last line: step=$STEPS busy=0\.[0-9]{6} ckpt=$((STEPS - 5))\$" "$T/out")" = 2 ] ||
  { cat "$T/out"; fail "not both ranks' last line step=$STEPS busy=S ckpt=$((STEPS - 5)) (saved at step $STEPS after its line)"; }
"$PAR3DRUN" status "$RD" >"$T/status" 2>&1 || { cat "$T/status"; fail "par3drun status failed"; }
grep -q '2 reporting progress' "$T/status" || { cat "$T/status"; fail "not both nodes reporting progress"; }
grep -Eq "^steps: [0-9]+ to $STEPS\$" "$T/status" || { cat "$T/status"; fail "the controller did not see step $STEPS"; }
echo "torch_progress: ok ($PY, torch $("$PY" -c 'import torch; print(torch.__version__)'), CPU branch)" >&2
