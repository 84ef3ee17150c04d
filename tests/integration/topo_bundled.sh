#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# topo_bundled.sh — the DESIGN.md promise on the bundled DGX H100 topology:
# `par3drun topo --topology examples/topologies/dgx-h100.xml --format json`
# prints 8 GPUs in one NVLink domain, each with its own nearest NIC (PIX).
# Also checks the bundled-name lookup (`--topology dgx-h100.xml` from any
# directory). The files come from examples/topologies/ (their own tests
# check the rest of their facts).
set -u
# the system interpreter: a pyenv shim costs seconds per call
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 )
fail() { echo "FAIL: $*" >&2; exit 1; }
: "${PAR3DRUN:?}" "${P3D_SRC:?}"
f=$P3D_SRC/examples/topologies/dgx-h100.xml
[ -f "$f" ] || fail "$f is missing (a tracked fixture)"
for src in "$f" dgx-h100.xml; do
  (cd / && "$PAR3DRUN" topo --topology "$src" --format json) | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
g = d["gpus"]
assert len(g) == 8, len(g)
assert d["domains"] == [list(range(8))], d["domains"]
nics = [x["nearest_nic"] for x in g]
assert None not in nics and len(set(nics)) == 8, nics
assert all(x["nearest_nic_class"] == "PIX" and x["nic_same_numa"] for x in g)
assert all(d["nvlink"][i][j] > 0 for i in range(8) for j in range(8) if i != j)
' || fail "$src: JSON facts"
done
echo "topo_bundled: ok"
