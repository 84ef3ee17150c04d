#!/usr/bin/env bash
# bench/multinode.sh — time from start to "every node placed and its
# workers ran" for N par3drun agents on loopback with the static
# rendezvous (emulated nodes: each agent is a real process with its own
# topology record). Prints figures; never fails on time.
#   bench/multinode.sh [BUILD_DIR] [N...]      (default N: 4 64 256)
# Fake-Slurm comparison (par3drun under srun vs plain srun): not measured
# here yet — see docs/multinode.md "Status".
set -u
B=${1:-build}; shift || true
NS=${*:-4 64 256}
PAR3DRUN=$B/par3drun
SRC=$(cd "$(dirname "$0")/.." && pwd)
export P3D_DATA_DIR=$SRC
T=$(mktemp -d /tmp/p3d-bench-mn.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
head -c 24 /dev/urandom | base64 >"$T/token"; chmod 600 "$T/token"
TOPO=$SRC/tests/fixtures/realdata/topo/dgx-a100_12nic.txt
for n in $NS; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  PIDS=()
  t0=$(date +%s%N)
  for i in $(seq 0 $((n - 1))); do
    "$PAR3DRUN" --nnodes "$n" --node-rank "$i" --rdzv "static:127.0.0.1:$port" --rdzv-token-file "$T/token" \
      --rdzv-timeout 120 --topology "$TOPO" --nproc-per-node 1 --run-dir "$T/r$n.$i" --verbose -- true \
      >/dev/null 2>"$T/e$n.$i" &
    PIDS+=($!)
  done
  rc=0
  for p in "${PIDS[@]}"; do wait "$p" || rc=$?; done
  t1=$(date +%s%N)
  joined=$(grep -h 'nodes joined in' "$T/e$n.0" | sed 's/.*joined in //')
  placed=$(grep -h 'placed' "$T/e$n.0" | sed 's/.*(cluster/(cluster/')
  printf '%4d agents: whole job %6.3f s (rc %d); leader: all joined %s after it listened; place %s\n' \
    "$n" "$(echo "($t1 - $t0) / 1000000000" | bc -l)" "$rc" "${joined:-?}" "${placed:-?}"
done
