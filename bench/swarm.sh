#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# swarm.sh — the multi-node rendezvous at 1,024 / 4,096 / 16,384 simulated
# nodes x 8 GPUs (tp8 pp16) on this machine (issue 16): build/bench/swarm
# plays the agents against a real leader (a forked child running the
# launcher's tree code) over loopback TCP and prints one JSON line per size:
# join / placement / send / total seconds, JSON and compact placement
# bytes, bytes the leader sent (and the bound 4 x JSON + 64 KiB x fan-out),
# the busiest agent's bytes, the leader's peak RSS. Figures, not pass/fail.
#
#   bench/swarm.sh [SIZES...]        (FANOUT=32; SWARM=path/to/swarm)
#
# SWARM_REPLACE=1: one spare a rack (--spares N/32), and after the placement
# the leader loses node N/2 and places again as mnode.c does: prints (stderr)
# the time, the whole new placement's size and the difference from the old
# one that is sent instead (mnode_delta.c, checked by applying it).
#
# SWARM_DETECT=1: instead, the slow-node detection's cost at the leader
# (build/bench/swarm detect N: every node's progress summary once per
# interval, the leader's CPU time per interval; docs/multinode.md).
#
# File descriptors: the leader needs N + 256; the agents ~3N, dealt to
# several player processes when the hard limit (ulimit -Hn) is smaller.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${SWARM:-$here/build/bench/swarm}
[ -x "$bin" ] || { echo "swarm.sh: no $bin (cmake --build build --target swarm)" >&2; exit 2; }
export P3D_DATA_DIR=${P3D_DATA_DIR:-$here}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1024 4096 16384)
echo "# ulimit -n $(ulimit -n), -Hn $(ulimit -Hn); $(nproc) cores"
for n in "${sizes[@]}"; do
  if [ "${SWARM_DETECT:-0}" = 1 ]; then
    "$bin" detect "$n" 10
  else
    "$bin" "$n" "${FANOUT:-32}" 8 16
  fi
done
