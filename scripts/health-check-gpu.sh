#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# health-check-gpu.sh — an example for `par3drun --health-check` (docs/launch.md,
# "When a node dies"): exits 0 when this node's GPUs answer, non-zero otherwise.
#
#   par3drun --health-check 'scripts/health-check-gpu.sh 8' ... -- train.py
#
# Argument: the GPU count the node must show (default: do not check the count).
# Checks, in order:
#   1. nvidia-smi -q answers (the driver and every GPU respond);
#   2. the number of GPUs it lists is the expected count;
#   3. no GPU reports a pending retired page or a remapping failure.
# A node without nvidia-smi (a CPU test node) passes, with a note on stderr:
# there is nothing to check there. P3D_NODE names the node par3drun checks.
set -u
want=${1:-}
node=${P3D_NODE:-$(hostname)}
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "health-check-gpu: $node: no nvidia-smi, no GPU to check (passed)" >&2
  exit 0
fi
q=$(nvidia-smi -q 2>&1) || { echo "health-check-gpu: $node: nvidia-smi -q failed: $q" | head -5 >&2; exit 1; }
n=$(printf '%s\n' "$q" | sed -n 's/^Attached GPUs *: *\([0-9]*\).*/\1/p' | head -1)
if [ -n "$want" ] && [ "${n:-0}" != "$want" ]; then
  echo "health-check-gpu: $node: $n GPUs attached, want $want" >&2
  exit 1
fi
if printf '%s\n' "$q" | grep -Eq 'Pending Page Blacklist *: *Yes|Pending *: *Yes|Remapping Failure Occurred *: *Yes'; then
  echo "health-check-gpu: $node: a GPU has pending retired pages or a row-remapping failure" >&2
  exit 1
fi
exit 0
