#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# NCCL topology XML (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE) as a topology
# source through the binary: `par3drun topo` on the four real files of
# tests/fixtures/realdata/nccl (text and JSON), a cluster file naming two of
# them (relative to the cluster file), a dry run with --topology, and the
# note an Azure file (no <nvlink>) must carry into the dry-run report.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
cd "$P3D_SRC" || exit 1
unset SLURM_JOB_NODELIST
N=tests/fixtures/realdata/nccl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check NAME COMMAND...: the command must succeed
    local name=$1; shift
    if "$@"; then echo "ok $name"; else echo "FAIL $name"; fail=1; fi
}
has() { grep -qF -- "$1" "$tmp/out"; }

topo() { "$PAR3DRUN" topo --topology "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; return 1; }; }
check "ndv4 loads" topo $N/azure-ndv4-topo.xml
check "ndv4: 8 GPUs, 8 NICs, 4 NUMA nodes" has "8 GPUs, 8 NICs, unknown packages, 4 NUMA nodes"
check "ndv4: the no-<nvlink> note" has "this NCCL topology file has no <nvlink> elements"
check "ndv4: GPU0 is on NUMA 1 with CPUs 24-47" grep -qE '^GPU0 .* 1 +24-47$' "$tmp/out"
check "ndv5 loads" topo $N/azure-ndv5-topo.xml
check "ndv5: each GPU's own NIC is PIX" grep -qE '^  GPU3 +0104:00:00.0 PIX +same NUMA node \(0\)' "$tmp/out"
check "A100 dump loads" topo $N/simai-topo_8A100_4CX6.xml
check "A100 dump: one NVLink domain of 8 through NVSwitch" has "domain 0: GPU 0-7  (8 GPUs, all-to-all, 300 GB/s per pair)"
check "A100 dump: GPU7's nearest NIC is mlx5_bond_4" grep -qE '^  GPU7 +mlx5_bond_4 +PXB' "$tmp/out"
check "RTX 3090 dump loads" topo $N/panlichen-nccl-tests-topo_8xRTX3090_1IB.xml
check "RTX 3090 dump: GPU0 reaches the one NIC across sockets" grep -qE '^  GPU0 +mlx5_0 +SYS' "$tmp/out"
check "A100 dump as JSON" topo $N/simai-topo_8A100_4CX6.xml --format json
check "JSON: source_kind nccl-xml, 1 domain, 5 NICs" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["source_kind"] == "nccl-xml", d["source_kind"]
assert d["domains"] == [list(range(8))], d["domains"]
assert [n["name"] for n in d["nics"]] == ["mlx5_bond_%d" % i for i in range(5)]
assert d["nvlink"][0][1] == 300, d["nvlink"][0]
' "$tmp/out"

# a cluster file naming NCCL files relative to itself
cp $N/simai-topo_8A100_4CX6.xml $N/azure-ndv5-topo.xml "$tmp/"
cat >"$tmp/cluster.json" <<'JSON'
{ "nodes": [ { "name": "a[1-2]", "topology": "simai-topo_8A100_4CX6.xml", "rack": "r1" },
             { "name": "b[1-2]", "topology": "azure-ndv5-topo.xml", "rack": "r2" } ] }
JSON
dry() { "$PAR3DRUN" --dry-run "$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; return 1; }; }
check "dry run on a cluster of NCCL files" dry --cluster "$tmp/cluster.json" --tp 8 --format json
check "JSON: a1's GPUs share one domain, b1's are eight" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
dom = {}
for r in d["ranks"]:
    dom.setdefault(r["node"], set()).add(r["nvlink_domain"])
assert len(dom["a1"]) == 1 and len(dom["b1"]) == 8, dom
notes = [c["message"] for c in d["checks"] if c["code"] == "TOPOLOGY_NOTE"]
assert any("node b1" in m and "no <nvlink> elements" in m for m in notes), notes
' "$tmp/out"
check "dry run with --topology an NCCL file" dry --topology $N/simai-topo_8A100_4CX6.xml --tp 8
check "tp=8 inside NVLink: no TP check" bash -c "! grep -q TP_CROSSES $tmp/out"
exit $fail
