#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --report-bindings on this (GPU-less) host: CPU slots report the same NUMA
# node with --bind numa and --bind core (the node their binding gives, "-"
# when unknown), never -1, and say "CPU slot" rather than a GPU.
. "$(dirname "$0")/lib/launch_common.sh"
for m in numa core none; do
  "$PAR3DRUN" --nproc-per-node 2 --bind $m --report-bindings -- true >"$T/$m" 2>&1 ||
    { cat "$T/$m"; fail "--bind $m failed"; }
  [ "$(grep -c '^bind: .* -> CPU slot [01] (no GPU) -> NIC ' "$T/$m")" = 2 ] ||
    { cat "$T/$m"; fail "--bind $m: expected 2 CPU slot lines"; }
  ! grep -q 'NUMA -1' "$T/$m" || { cat "$T/$m"; fail "--bind $m reports NUMA -1"; }
done
numa_of() { sed -n 's/^bind: .* -> NUMA \([-0-9]*\) -> .*/\1/p' "$T/$1"; }
[ "$(numa_of numa)" = "$(numa_of core)" ] ||
  { cat "$T/numa" "$T/core"; fail "--bind numa and --bind core report other NUMA nodes"; }
[ "$(numa_of none | sort -u)" = "-" ] || { cat "$T/none"; fail "--bind none: a CPU slot has no NUMA node ('-')"; }
echo "ok: $(numa_of numa | tr '\n' ' ')"
