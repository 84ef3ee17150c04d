#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/launch.sh — launch latency of par3drun next to mpirun, a plain
# posix_spawn loop (the floor) and torchrun (when /usr/bin/python3 has
# torch): wall time of the whole command running N x /bin/true, median of
# RUNS runs, interleaved (par3drun cold, par3drun warm, mpirun, floor, ...
# in the same round) so that load on the machine hits them alike. Prints
# figures, never fails on time.
#
# par3drun is timed twice per round with its topology cache
# (docs/topology.md) in a private directory: "cold" with the entry removed
# first (live discovery + storing it: a first start), "warm" with the entry
# there (a restart, or any later start on the node). Then `par3drun topo`
# alone: live (--no-topo-cache), cold and warm, interleaved the same way.
#
#   bench/launch.sh [BUILD_DIR]        (default: build)
#   RUNS=11 NS="1 8 32" TOPO=local bench/launch.sh
#
# TOPO is what par3drun discovers (--topology): "local" (live hwloc, the
# default: topology discovery and the Lua policy are included in the
# figure) or a file such as examples/topologies/cpu-only.xml (no cache
# involved: cold and warm are then the same thing).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-11}
ns=${NS:-"1 8 32"}
topo=${TOPO:-local}
par3drun=$build/par3drun
[ -x "$par3drun" ] || { echo "bench: $par3drun not built (bash scripts/build.sh)"; exit 1; }
export P3D_DATA_DIR=${P3D_DATA_DIR:-$PWD}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/spawnloop" bench/spawnloop.c
have_mpirun=0; command -v mpirun >/dev/null && have_mpirun=1
have_torch=0; /usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export P3D_TOPO_CACHE_DIR=$tmp/topo-cache
unset P3D_TOPO_CACHE
cold() { rm -f "$P3D_TOPO_CACHE_DIR"/topo-*; "$@"; }

# seconds of wall time for one run of "$@" (output discarded)
wall() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || echo "bench: failed: $*" >&2
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f\n", b - a}'
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "launch latency, median of $runs runs (s), N x /bin/true; par3drun --topology $topo"
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%4s %10s %10s %10s %10s %10s %12s %12s\n" N cold warm mpirun floor torchrun "warm/mpirun" "warm/floor"
for n in $ns; do
  : >"$tmp/c"; : >"$tmp/p"; : >"$tmp/m"; : >"$tmp/f"; : >"$tmp/t"
  for ((i = 0; i < runs; i++)); do
    wall cold "$par3drun" --topology "$topo" --nproc-per-node "$n" -- /bin/true >>"$tmp/c"
    wall "$par3drun" --topology "$topo" --nproc-per-node "$n" -- /bin/true >>"$tmp/p"
    [ $have_mpirun = 1 ] && wall mpirun --allow-run-as-root --oversubscribe -n "$n" /bin/true >>"$tmp/m"
    wall "$tmp/spawnloop" "$n" /bin/true >>"$tmp/f"
    if [ $have_torch = 1 ] && [ $i -lt 3 ]; then
      wall /usr/bin/python3 -m torch.distributed.run --no_python --nproc_per_node "$n" --monitor_interval 0.1 \
        --redirects 1 --tee 1 /bin/true >>"$tmp/t"
    fi
  done
  c=$(median <"$tmp/c"); p=$(median <"$tmp/p"); f=$(median <"$tmp/f")
  m=-; [ $have_mpirun = 1 ] && m=$(median <"$tmp/m" | xargs printf %.4f)
  t=-; [ -s "$tmp/t" ] && t=$(median <"$tmp/t")
  ratio=-; [ "$m" != - ] && ratio=$(awk -v a="$p" -v b="$m" 'BEGIN {printf "%.2f", a / b}')
  floor=$(awk -v a="$p" -v b="$f" 'BEGIN {printf "%.1f", a / b}')
  printf "%4d %10.4f %10.4f %10s %10.4f %10s %12s %12s\n" "$n" "$c" "$p" "$m" "$f" "$t" "$ratio" "$floor"
done
echo "target: warm par3drun/mpirun <= 0.25 and <= 3x the floor at N = 8 (topology and the Lua policy included)"

if [ "$topo" = local ]; then
  : >"$tmp/tl"; : >"$tmp/tc"; : >"$tmp/tw"
  for ((i = 0; i < runs; i++)); do
    wall "$par3drun" topo --no-topo-cache >>"$tmp/tl"
    wall cold "$par3drun" topo >>"$tmp/tc"
    wall "$par3drun" topo >>"$tmp/tw"
  done
  printf "par3drun topo, median of %d runs (s): live %.4f  cold cache %.4f  warm cache %.4f\n" "$runs" \
    "$(median <"$tmp/tl")" "$(median <"$tmp/tc")" "$(median <"$tmp/tw")"
fi
