#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/topo.sh — how long `par3drun topo` takes: on this machine (live
# hwloc discovery) and on the largest real fixture (the XML path includes
# the pre-scan and the child-process probe). Prints figures; never fails on
# time. Usage: bench/topo.sh [PAR3DRUN] [RUNS]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-${PAR3DRUN:-$here/build/par3drun}}
runs=${2:-20}
[ -x "$bin" ] || { echo "no par3drun at $bin (build first, or pass its path)" >&2; exit 2; }
largest=$(ls -S "$here"/tests/fixtures/realdata/hwloc/*.xml | head -1)
cases=("local" "$largest" "$here/examples/topologies/dgx-h100.xml")
if command -v hyperfine >/dev/null 2>&1; then
  for c in "${cases[@]}"; do
    [ "$c" = local ] || [ -f "$c" ] || continue
    hyperfine -N -w 3 -r "$runs" "$bin topo --topology $c --format json"
  done
  exit 0
fi
printf '%-60s %8s %8s %8s\n' "source ($runs runs)" "min ms" "median" "max ms"
for c in "${cases[@]}"; do
  [ "$c" = local ] || [ -f "$c" ] || continue
  "$bin" topo --topology "$c" --format json >/dev/null  # warm the page cache
  t=()
  for _ in $(seq "$runs"); do
    s=$(date +%s%N)
    "$bin" topo --topology "$c" --format json >/dev/null
    e=$(date +%s%N)
    t+=($(( (e - s) / 1000 )))
  done
  sorted=($(printf '%s\n' "${t[@]}" | sort -n))
  n=${#sorted[@]}
  awk -v name="${c#$here/}" -v a="${sorted[0]}" -v m="${sorted[$((n / 2))]}" \
      -v z="${sorted[$((n - 1))]}" \
      'BEGIN { printf "%-60s %8.2f %8.2f %8.2f\n", name, a / 1000, m / 1000, z / 1000 }'
done
