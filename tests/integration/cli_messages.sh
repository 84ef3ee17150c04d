#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cli_messages.sh — option handling that used to be silent or vague: an
# --order leaving out a dim of size > 1, repeated options, --topology with
# --cluster, bad --format values, CPU-only cluster files, per-command help,
# nvidia-smi text counts, the allocation note in the header. Env from ctest:
# PAR3DRUN, P3D_SRC, P3D_FIXTURES.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
: "${PAR3DRUN:?}" "${P3D_SRC:?}" "${P3D_FIXTURES:?}"
E=$P3D_SRC/examples/clusters
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# expect RC MESSAGE ARGS...: exit code RC and MESSAGE on stderr
expect() {
  local want=$1 msg=$2 rc; shift 2
  "$PAR3DRUN" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?
  [ "$rc" = "$want" ] || fail "$*: exit $rc, expected $want ($(cat "$tmp/err"))"
  grep -qF -- "$msg" "$tmp/err" || fail "$*: stderr lacks '$msg': $(cat "$tmp/err")"
}

# 1. --order must list every dim of size > 1 (Megatron's RankGenerator)
expect 2 "--order tp-pp leaves out dp (size 8): Megatron requires every dimension of size > 1" \
  --dry-run --cluster "$E/2x-dgx-h100.json" --tp 2 --order tp-pp
expect 2 "--order tp-pp-dp leaves out cp (size 2)" \
  --dry-run --cluster "$E/2x-dgx-h100.json" --tp 2 --cp 2 --order tp-pp-dp
"$PAR3DRUN" --dry-run --cluster "$E/2x-dgx-h100.json" --tp 8 --pp 2 --order tp-pp >"$tmp/out" ||
  fail "--order tp-pp with dp=1: exit $?"
head -1 "$tmp/out" | grep -q ", order tp-pp$" || fail "order string not kept: $(head -1 "$tmp/out")"

# 3. repeated single-value options; --topology with --cluster
expect 2 "--tp given twice" --dry-run --tp 2 --tp 4
expect 2 "--format given twice" topo --format json --format=text
# (the report's warnings say it: --topology does name the nodes' topology
# for kubectl/AWS sources, docs/kubernetes.md)
"$PAR3DRUN" --dry-run --cluster "$E/2x-dgx-h100.json" --topology synthetic:pack:1 --tp 8 >"$tmp/out" 2>&1 ||
  fail "--topology with a cluster file: exit $?"
grep -qF -- "--topology synthetic:pack:1 is ignored: the cluster file names each node's topology" "$tmp/out" ||
  fail "--topology with a cluster file: no warning"

# 4. messages
expect 2 "--format: expected text, json, svg or html, got 'pdf'" --dry-run --format pdf
cat >"$tmp/cpu.json" <<'EOF'
{"nodes": [{"name": "c[1-2]", "topology": "synthetic:pack:1 numa:1 core:2 pu:1"}]}
EOF
expect 2 "$tmp/cpu.json: the cluster has no GPUs: give --nproc-per-node N" --dry-run --cluster "$tmp/cpu.json"
printf '{"nodes": [{"name": "a", "topology": "nosuch.xml"}]}\n' >"$tmp/bad.json"
expect 2 "bundled: " --dry-run --cluster "$tmp/bad.json"
grep -q "README" "$tmp/err" && fail "bundled list names a README: $(cat "$tmp/err")"
grep -q "dgx-h100.xml" "$tmp/err" || fail "bundled list lacks dgx-h100.xml: $(cat "$tmp/err")"

# 5. help lists only what applies, no empty group
for cmd in topo plan; do
  "$PAR3DRUN" $cmd --help >"$tmp/h" || fail "$cmd --help: exit $?"
  grep -q -- "--dry-run" "$tmp/h" && fail "$cmd --help lists --dry-run"
  grep -q "svg" "$tmp/h" && fail "$cmd --help offers svg"
  awk '/:$/ { if (hdr) exit 1; hdr = 1; next } /^  --/ { hdr = 0 } END { exit hdr }' "$tmp/h" ||
    fail "$cmd --help has an empty group"
done
"$PAR3DRUN" topo --help | grep -q "Mesh and policy" && fail "topo --help shows Mesh and policy"
"$PAR3DRUN" --help | grep -q -- "--dry-run" || fail "--help lacks --dry-run"
# the usage at the top names every subcommand (cluster too) and --version
"$PAR3DRUN" --help | head -12 >"$tmp/top"
for w in "par3drun topo" "par3drun plan" "par3drun cluster" "par3drun status" "--version"; do
  grep -q -- "$w" "$tmp/top" || fail "the first lines of --help lack '$w': $(cat "$tmp/top")"
done
# an example policy's own usage line runs (it once named a missing cluster file)
(cd "$P3D_SRC" && "$PAR3DRUN" --dry-run --cluster examples/clusters/64x-dgx-h100-4racks.json --tp 8 --pp 4 \
  --policy examples/policies/rack_per_replica.lua >"$tmp/rpr" 2>&1) || fail "rack_per_replica.lua's usage: $(tail -3 "$tmp/rpr")"
grep -q '^par3drun dry run: policy rack_per_replica' "$tmp/rpr" || fail "rack_per_replica.lua did not place"

# 2. nvidia-smi text: no CPU inventory -> unknown / null; a node name
T=$P3D_FIXTURES/realdata/topo/dgx-a100_12nic.txt
"$PAR3DRUN" topo --topology "$T" >"$tmp/t" || fail "topo $T: exit $?"
grep -q "^Node dgx-a100_12nic " "$tmp/t" || fail "node name: $(head -1 "$tmp/t")"
grep -q "unknown packages, unknown NUMA nodes, unknown cores, unknown PUs" "$tmp/t" ||
  fail "counts: $(sed -n 3p "$tmp/t")"
"$PAR3DRUN" topo --topology "$T" --format json | grep -qF '"cpu": {"packages": null, "numa_nodes": null, "cores": null, "pus": null}' ||
  fail "JSON cpu counts are not null"

# 6. the megatron note counts blocks, and says so
"$PAR3DRUN" --dry-run --cluster "$E/gb200-nvl72-2domains.json" --tp 8 --pp 2 >"$tmp/g" || fail "gb200: exit $?"
tr -s ' \n' ' ' <"$tmp/g" | grep -q "1 of 9 pipeline blocks (tp x pp ranks each) span racks" ||
  fail "megatron note wording"

# 7. the allocation is named in the header
SLURM_JOB_NODELIST=dgx-h100-02 "$PAR3DRUN" --dry-run --cluster "$E/2x-dgx-h100.json" --tp 8 >"$tmp/s" ||
  fail "SLURM_JOB_NODELIST: exit $?"
grep -q "^inputs: cluster .*2x-dgx-h100.json (allocation SLURM_JOB_NODELIST: 1 of its 2 nodes)" "$tmp/s" ||
  fail "header: $(sed -n 2p "$tmp/s")"
echo "ok"
