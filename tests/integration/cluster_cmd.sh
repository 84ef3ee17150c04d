#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cluster_cmd.sh — `par3drun cluster`: the resolved cluster from any source
# (kubectl JSON, AWS topology, this node with its allocation and
# SLURM_TOPOLOGY_ADDR), and --format json writing a cluster file that
# places exactly like its source.
set -u
: "${PAR3DRUN:?run through ctest (PAR3DRUN unset)}"
: "${P3D_SRC:?}"
export P3D_DATA_DIR=${P3D_DATA_DIR:-$P3D_SRC}
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
unset SLURM_JOB_NODELIST SLURM_STEP_GPUS SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES SLURM_TOPOLOGY_ADDR SLURM_TOPOLOGY_ADDR_PATTERN
T=$(mktemp -d /tmp/p3d-cluster-cmd.XXXXXX)
trap 'rm -rf "$T"' EXIT
FX=$P3D_SRC/tests/fixtures
fail=0
bad() { echo "FAIL: $*"; fail=1; }
ranks() { python3 -c 'import json,sys
for r in json.load(sys.stdin)["ranks"]: print(r["rank"], r["node"], r["gpu"], r["rack"], r["nvlink_domain"])'; }

K=$FX/k8s/nodes-16x-h100-topograph.json
"$PAR3DRUN" cluster --cluster "$K" >"$T/txt" 2>&1 || bad "text: exit $?"
grep -q '^cluster: 16 nodes, 128 GPUs, 2 racks' "$T/txt" || bad "text: summary: $(head -1 "$T/txt")"
grep -q '^gpu-\[09-16\] *8  block2' "$T/txt" || bad "text: no gpu-[09-16] group in block2"
"$PAR3DRUN" cluster --cluster "$FX/k8s/nodes-mixed-labels.json" >"$T/mix" 2>&1 || bad "mixed: exit $?"
grep -q '2 multi-node NVLink domains' "$T/mix" || bad "mixed: NVLink domains: $(head -1 "$T/mix")"

# round trip: the written cluster file places like the kubectl JSON
"$PAR3DRUN" cluster --cluster "$K" --format json --output "$T/c.json" || bad "json: exit $?"
for src in "$K" "$T/c.json"; do
  "$PAR3DRUN" --dry-run --cluster "$src" --tp 8 --pp 4 --format json 2>/dev/null | ranks >"$T/$(basename "$src").ranks" ||
    bad "dry run of $src failed"
done
cmp -s "$T/$(basename "$K").ranks" "$T/c.json.ranks" || bad "the written cluster file places differently"
[ "$(wc -l <"$T/c.json.ranks")" = 128 ] || bad "round trip: not 128 ranks"
"$PAR3DRUN" cluster --cluster "$FX/aws/instance-topology-4x-p5.json" --format json | grep -q '"rack": "nn-3333333333333331"' ||
  bad "aws: no layer-3 rack in the written file"

# this node: the allocation and the leaf switch Slurm gives it
SLURM_TOPOLOGY_ADDR=spine1.leaf9.n1 SLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node SLURM_STEP_GPUS=2,3 \
  "$PAR3DRUN" cluster --topology "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$T/me" 2>&1 || bad "this node: exit $?"
grep -q ' 2  leaf9 ' "$T/me" || bad "this node: not 2 GPUs in leaf9: $(sed -n 4p "$T/me")"
grep -q 'GPUs 0-1,4-7 of 8 excluded, not in SLURM_STEP_GPUS=2,3' "$T/me" || bad "this node: exclusion not shown"
# a live-discovered node cannot be written as a cluster file: one line, exit 2
"$PAR3DRUN" cluster --format json >"$T/o" 2>"$T/e"; rc=$?
[ "$rc" = 2 ] && grep -q 'discovered live' "$T/e" || bad "local json: exit $rc, $(cat "$T/e")"
"$PAR3DRUN" cluster --format svg >"$T/o" 2>"$T/e"; rc=$?
[ "$rc" = 2 ] || bad "--format svg: exit $rc"
[ "$fail" = 0 ] && echo "PASS cluster_cmd"
exit "$fail"
