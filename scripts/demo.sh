#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Quick start (1): install what is needed, build, then run a 16-rank
# 3D-parallel job (tp 2 x pp 2 x dp 4) on two emulated DGX H100 nodes on
# this host: par3drun places the ranks, starts one agent per node, and the
# bundled worker (CPU backend) trains a small model with real TP/PP/DP and
# checks its losses against a single-process run (--verify). Without the
# worker, each rank checks its own environment against the placement
# instead (tests/tools/envcheck.py).
#   scripts/demo.sh [extra par3drun options]
# It builds into its own directory, build-demo/ (or $P3D_DEMO_BUILD), as a
# user's plain build: no -Werror, and never a reconfiguration of build/,
# which may be yours with options of your own.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
dir=${P3D_DEMO_BUILD:-build-demo}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j"$(nproc)" --target par3drun p3d-worker
export P3D_DATA_DIR=$PWD
cluster=examples/clusters/2x-dgx-h100.json
echo
echo "== this machine (par3drun topo) =="
"$dir/par3drun" topo
echo
echo "== a bundled DGX H100 node (par3drun topo --topology dgx-h100.xml) =="
"$dir/par3drun" topo --topology examples/topologies/dgx-h100.xml
echo
echo "== placement (par3drun --dry-run) =="
"$dir/par3drun" --dry-run --cluster "$cluster" --tp 2 --pp 2 --dp 4
echo
echo "== launch: 2 emulated nodes x 8 ranks =="
if [ -x "$dir/p3d-worker" ]; then
  set -x
  "$dir/par3drun" --emulate --cluster "$cluster" --tp 2 --pp 2 --dp 4 "$@" \
    -- "$dir/p3d-worker" --backend cpu --steps 3 --verify
else
  set -x
  "$dir/par3drun" --emulate --cluster "$cluster" --tp 2 --pp 2 --dp 4 "$@" \
    -- python3 tests/tools/envcheck.py
fi
