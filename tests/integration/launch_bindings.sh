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
# the mesh coordinates: each rank's, as its output tag says, all distinct
"$PAR3DRUN" --emulate --cluster "$P3D_SRC/examples/clusters/2x-dgx-h100.json" --tp 2 --pp 2 --report-bindings --quiet \
  -- sh -c 'echo here' >"$T/mesh" 2>&1 || { cat "$T/mesh"; fail "the emulated job failed"; }
sed -n 's/^bind: [^ ]* rank \([0-9]*\) (local [0-9]*; tp \([0-9]*\) pp \([0-9]*\) dp \([0-9]*\)) .*/r\1 tp\2 pp\3 dp\4/p' \
  "$T/mesh" | sort >"$T/from_bind"
sed -n 's/^\[\(r[0-9]* tp[0-9]* pp[0-9]* dp[0-9]*\)\] here$/\1/p' "$T/mesh" | sort >"$T/from_tags"
[ "$(wc -l <"$T/from_bind")" = 16 ] || { cat "$T/mesh"; fail "want 16 bind lines with mesh coordinates"; }
cmp -s "$T/from_bind" "$T/from_tags" || { diff "$T/from_bind" "$T/from_tags"; fail "bind coordinates differ from the tags"; }
[ "$(cut -d' ' -f2- "$T/from_bind" | sort -u | wc -l)" = 16 ] || fail "two ranks at the same coordinates"
echo "ok: $(numa_of numa | tr '\n' ' ')"
