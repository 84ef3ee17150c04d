#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/multinode.sh — time from start to "every node placed and its
# workers ran" for N par3drun agents on loopback with the static
# rendezvous (emulated nodes: each agent is a real process with its own
# topology record). Prints figures; never fails on time.
#   bench/multinode.sh [BUILD_DIR] [N...|slurm]  (default: 4 64 256 slurm)
# "slurm": starts a real Slurm with four fake nodes (tests/services/
# slurm.sh; needs root and slurm-wlm) and times start -> all 32 workers
# running for par3drun under `srun -N4 --ntasks-per-node=1` (8 ranks per
# node) against plain `srun -N4 --ntasks-per-node=8` of the same worker:
# each worker writes its start time; the figure is the last start minus
# the moment srun was started, median of P3D_BENCH_RUNS (5) alternating
# runs. Target: par3drun's overhead < 0.1 s.
set -u
B=${1:-build}; shift || true
NS=${*:-4 64 256 slurm}
PAR3DRUN=$B/par3drun
SRC=$(cd "$(dirname "$0")/.." && pwd)
export P3D_DATA_DIR=$SRC
T=$(mktemp -d /tmp/p3d-bench-mn.XXXXXX)
PIDS=()
SLURM_UP=""
trap 'for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; [ -n "$SLURM_UP" ] && "$SRC/tests/services/slurm.sh" stop "$T/slurm"; rm -rf "$T"' EXIT
head -c 24 /dev/urandom | base64 >"$T/token"; chmod 600 "$T/token"
TOPO=$SRC/tests/fixtures/realdata/topo/dgx-a100_12nic.txt

# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# slurm_run KIND I: one srun; prints seconds from start to the last worker
slurm_run() {
  local d=$T/ts.$1.$2 t0 last
  mkdir -p "$d"
  t0=$(date +%s%N)
  if [ "$1" = par3drun ]; then
    TMPDIR=$d srun -N4 --ntasks-per-node=1 "$PAR3DRUN" --topology "$TOPO" --tp 8 -- "$T/stamp.sh" "$d" \
      >/dev/null 2>"$d.err" || { echo "par3drun run $2 failed: $(tail -2 "$d.err")" >&2; echo nan; return; }
  else
    srun -N4 --ntasks-per-node=8 -O "$T/stamp.sh" "$d" >/dev/null 2>"$d.err" ||
      { echo "srun run $2 failed: $(tail -2 "$d.err")" >&2; echo nan; return; }
  fi
  n=$(ls "$d" | grep -c '^w')
  [ "$n" = 32 ] || { echo "$1 run $2: $n of 32 workers" >&2; echo nan; return; }
  last=$(cat "$d"/w* | sort -n | tail -1)
  echo "($last - $t0) / 1000000000" | bc -l
}

bench_slurm() {
  if ! command -v slurmctld >/dev/null || [ "$(id -u)" != 0 ]; then
    echo "slurm: skipped (needs slurm-wlm and root)"; return
  fi
  "$SRC/tests/services/slurm.sh" start "$T/slurm" >/dev/null || { echo "slurm: the fake cluster did not start"; return; }
  SLURM_UP=1
  . "$T/slurm/env"
  printf '#!/bin/sh\ndate +%%s%%N >"$1/w${RANK:-$SLURM_PROCID}"\n' >"$T/stamp.sh"
  chmod +x "$T/stamp.sh"
  local runs=${P3D_BENCH_RUNS:-5} i
  slurm_run srun warm >/dev/null; slurm_run par3drun warm >/dev/null
  : >"$T/srun.s"; : >"$T/p3d.s"
  for i in $(seq "$runs"); do
    slurm_run srun "$i" >>"$T/srun.s"
    slurm_run par3drun "$i" >>"$T/p3d.s"
  done
  local a b
  a=$(median <"$T/srun.s"); b=$(median <"$T/p3d.s")
  printf 'slurm, 4 fake nodes x 8 workers, start -> all 32 running, median of %d:\n' "$runs"
  printf '  plain srun -N4 --ntasks-per-node=8:            %6.3f s  (runs: %s)\n' "$a" "$(tr '\n' ' ' <"$T/srun.s" | xargs printf '%.3f ')"
  printf '  srun -N4 --ntasks-per-node=1 par3drun --tp 8: %6.3f s  (runs: %s)\n' "$b" "$(tr '\n' ' ' <"$T/p3d.s" | xargs printf '%.3f ')"
  printf '  par3drun overhead: %+.3f s (target < 0.1 s)\n' "$(echo "$b - $a" | bc -l)"
}

for n in $NS; do
  if [ "$n" = slurm ]; then bench_slurm; continue; fi
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
