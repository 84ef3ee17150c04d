# SPDX-License-Identifier: BSD-3-Clause
# lib/launch_common.sh — sourced by tests/integration/launch_*.sh: a 2-node
# cluster of DGX H100s for --emulate, a scratch dir, and cleanup of every
# process the test started (found by a unique marker in the environment,
# killed by PID).
set -euo pipefail
: "${PAR3DRUN:?run through ctest (PAR3DRUN unset)}"
: "${P3D_SRC:?}"
export P3D_DATA_DIR=${P3D_DATA_DIR:-$P3D_SRC}
T=$(mktemp -d /tmp/p3d-launch-test.XXXXXX)
MARK="p3dtest$$x$RANDOM"
export P3D_TEST_MARK=$MARK
CLUSTER=$P3D_SRC/examples/clusters/2x-dgx-h100.json
if [ ! -f "$CLUSTER" ]; then
  CLUSTER=$T/cluster.json
  printf '{ "nodes": [ { "name": "node[001-002]", "topology": "%s" } ] }\n' \
    "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$CLUSTER"
fi

# PIDs of live processes whose environment holds our marker.
marked_pids() {
  local f p
  for f in $(grep -lzx "P3D_TEST_MARK=$MARK" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    [ "$p" = $$ ] && continue
    [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] || echo "$p"
  done
  return 0
}
cleanup() {
  local left
  left=$(marked_pids || true)
  [ -n "$left" ] && kill -9 $left 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
