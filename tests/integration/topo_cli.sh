#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# topo_cli.sh — `par3drun topo` end to end: every real hwloc fixture in text
# and JSON (JSON parsed, facts from INDEX.md), --output, and bad input
# (exit 2 with one line naming the file). Env from ctest: PAR3DRUN,
# P3D_FIXTURES.
set -u
# the system interpreter: a pyenv shim costs seconds per call
PY=$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 )
fail() { echo "FAIL: $*" >&2; exit 1; }
: "${PAR3DRUN:?}" "${P3D_FIXTURES:?}"
H=$P3D_FIXTURES/realdata/hwloc
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# JSON facts: "file|ngpus|nnics|numa per GPU|nearest NIC per GPU|domains"
while IFS='|' read -r f ng nn numa nics doms; do
  "$PAR3DRUN" topo --topology "$H/$f" --format json >"$tmp/o.json" 2>"$tmp/e" ||
    fail "$f: exit $? ($(cat "$tmp/e"))"
  got=$("$PY" - "$tmp/o.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["gpus"]
print("%d|%d|%s|%s|%s" % (len(g), len(d["nics"]),
      ",".join(str(x["numa"]) for x in g),
      ",".join(str(x["nearest_nic"]) for x in g),
      ";".join(",".join(map(str, m)) for m in d["domains"])))
PY
) || fail "$f: JSON does not parse"
  [ "$got" = "$ng|$nn|$numa|$nics|$doms" ] || fail "$f: got $got, expected $ng|$nn|$numa|$nics|$doms"
  "$PAR3DRUN" topo --topology "$H/$f" >"$tmp/o.txt" || fail "$f: text exit $?"
done <<'EOF2'
hwloc-tests-nvidiaDGX2.xml|16|0|0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1|None,None,None,None,None,None,None,None,None,None,None,None,None,None,None,None|0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
hwloc-tests-power8gpudistances.xml|4|0|0,0,1,1|None,None,None,None|0,1;2,3
mpibind-coral-lassen.xml|4|4|0,0,8,8|mlx5_0,mlx5_1,mlx5_2,mlx5_3|0;1;2;3
mpibind-g4dnmetal.xml|8|1|0,0,0,0,1,1,1,1|rdmap197s0,rdmap197s0,rdmap197s0,rdmap197s0,rdmap197s0,rdmap197s0,rdmap197s0,rdmap197s0|0;1;2;3;4;5;6;7
psmgmt-topo.jwb0004.xml|4|4|3,1,7,5|mlx5_0,mlx5_1,mlx5_2,mlx5_3|0;1;2;3
mpibind-eas-tioga.xml|0|5||||
EOF2

# text: nvidia-smi notation, 100 columns for 8 GPUs (the Source line aside)
"$PAR3DRUN" topo --topology "$H/mpibind-g4dnmetal.xml" --output "$tmp/g4.txt" || fail "--output exit $?"
grep -q '^GPU0   X     PHB   NODE  NODE  SYS' "$tmp/g4.txt" || fail "g4dn matrix row"
grep -q 'GPU0   rdmap197s0   SYS  no NIC on its NUMA node 0' "$tmp/g4.txt" || fail "g4dn NIC note"
awk '!/^Source: / && length > 100 { bad = 1; print "long: " $0 } END { exit bad }' "$tmp/g4.txt" ||
  fail "lines over 100 columns"
grep -q 'domain 0: GPU 0-15  (16 GPUs, all-to-all, 150 GB/s' < <("$PAR3DRUN" topo --topology "$H/hwloc-tests-nvidiaDGX2.xml") ||
  fail "DGX-2 domain line"

# the default source is this machine
"$PAR3DRUN" topo >"$tmp/local.txt" || fail "local exit $?"
grep -q 'Source: local (local)' "$tmp/local.txt" || fail "local header"
"$PAR3DRUN" topo --topology "synthetic:pack:2 numa:1 core:2 pu:1" --format json |
  "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert d["cpu"]["cores"]==4 and d["gpus"]==[]' ||
  fail "synthetic"

# bad input: exit 2, one line, naming the file
expect2() { # $1 = expected text, rest = args
  local want=$1; shift
  "$PAR3DRUN" topo "$@" >"$tmp/o" 2>"$tmp/e"; local rc=$?
  [ $rc -eq 2 ] || fail "topo $*: exit $rc, expected 2"
  [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "topo $*: stderr not one line: $(cat "$tmp/e")"
  grep -qF -- "$want" "$tmp/e" || fail "topo $*: '$want' not in: $(cat "$tmp/e")"
}
expect2 "$tmp/missing.xml: no such file" --topology "$tmp/missing.xml"
printf '<topology version="2.0">\n<object type="Machine" cpuset="0x1">\n</object>\n</topology>\n' >"$tmp/nocomplete.xml"
expect2 "nocomplete.xml: line 2: <object type=\"Machine\"> has no complete_cpuset" --topology "$tmp/nocomplete.xml"
printf '<topology version="2.0"><object' >"$tmp/trunc.xml"
expect2 "trunc.xml:1: not well-formed XML: Couldn't find end of Start Tag object line 1 (truncated file?)" --topology "$tmp/trunc.xml"
printf 'just words\n' >"$tmp/words.txt"
expect2 "words.txt: neither an hwloc XML" --topology "$tmp/words.txt"
expect2 "synthetic:bogus: not a valid hwloc synthetic" --topology synthetic:bogus
expect2 "--format svg: topo writes text or json" --format svg
expect2 "--output $tmp/no/dir/x: cannot write" --topology "$H/mpibind-g4dnmetal.xml" --output "$tmp/no/dir/x"
echo "topo_cli: ok"
