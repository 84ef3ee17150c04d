#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/swarm detect at a small size (the 16,384-node figures are in
# docs/multinode.md): simulated nodes send their progress summaries as
# sealed FATE frames to a forked leader running the real controller; one
# node is 3x slower. The detection names it and only it, the leader's CPU
# time per interval is measured, a summary costs its 57-byte frame.
set -euo pipefail
: "${P3D_BUILD:?run through ctest}"
bin=$P3D_BUILD/bench/swarm
[ -x "$bin" ] || { echo "SKIP: no $bin (cmake --build build --target swarm)"; exit 77; }
out=$(timeout 120 "$bin" detect 256 6)
echo "$out"
python3 - "$out" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
assert d["nodes"] == 256 and d["intervals"] == 6 and d["running"], d
assert d["slow_reports"] == 1 and d["slow_node_named"], d
assert d["line"].startswith("par3drun: node n00128 is ") and "slower than its 15 peers" in d["line"], d
assert d["packet_bytes"] > 0 and d["frame_bytes"] == 57, d
assert 0 < d["leader_cpu_s_per_interval"]["median"] < 1, d
assert 0 <= d["judgement_cpu_s_per_interval"]["median"] <= d["leader_cpu_s_per_interval"]["median"], d
PY
echo "swarm_detect: ok" >&2
