#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# cluster_sources.sh — --cluster from `kubectl get nodes -o json` and from
# `aws ec2 describe-instance-topology` (fixtures written from the formats'
# documentation): 16 H100 nodes in two topograph blocks place exactly like
# the equivalent cluster file; which label wins for racks and NVLink
# domains; the instance-type and product tables; --topology overriding
# them; bad documents rejected with one line and exit 2.
set -u
: "${PAR3DRUN:?run through ctest (PAR3DRUN unset)}"
: "${P3D_SRC:?}"
export P3D_DATA_DIR=${P3D_DATA_DIR:-$P3D_SRC}
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
unset SLURM_JOB_NODELIST SLURM_STEP_GPUS SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES
T=$(mktemp -d /tmp/p3d-cluster-src.XXXXXX)
trap 'rm -rf "$T"' EXIT
FX=$P3D_SRC/tests/fixtures
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ranks as "rank node gpu rack domain" lines, from a dry run's JSON
ranks() {
  python3 -c 'import json,sys
d=json.load(sys.stdin)
for r in d["ranks"]: print(r["rank"], r["node"], r["gpu"], r["rack"], r["nvlink_domain"])'
}

# ---- 1. kubectl, 16 H100 in 2 topograph blocks == the cluster file ----------
for tp_pp in "8 2" "4 4" "8 8"; do
  set -- $tp_pp
  "$PAR3DRUN" --dry-run --cluster "$FX/k8s/nodes-16x-h100-topograph.json" --tp "$1" --pp "$2" --format json \
    >"$T/k8s.json" 2>"$T/k8s.err" || { bad "kubectl tp $1 pp $2: exit $?"; cat "$T/k8s.err"; }
  "$PAR3DRUN" --dry-run --cluster "$FX/k8s/cluster-16x-h100-2racks.json" --tp "$1" --pp "$2" --format json \
    >"$T/cf.json" 2>"$T/cf.err" || { bad "cluster file tp $1 pp $2: exit $?"; cat "$T/cf.err"; }
  ranks <"$T/k8s.json" >"$T/k8s.ranks"
  ranks <"$T/cf.json" >"$T/cf.ranks"
  [ "$(wc -l <"$T/k8s.ranks")" = 128 ] || bad "kubectl tp $1 pp $2: not 128 ranks"
  cmp -s "$T/k8s.ranks" "$T/cf.ranks" || { bad "kubectl tp $1 pp $2: placement differs from the cluster file's";
    diff "$T/k8s.ranks" "$T/cf.ranks" | head -5; }
done
"$PAR3DRUN" --dry-run --cluster "$FX/k8s/nodes-16x-h100-topograph.json" --tp 8 >"$T/k8s.txt" 2>&1
tr -s " \n" "  " <"$T/k8s.txt" | grep -q "1 node without GPUs left out (cp-0)" || bad "control-plane node not reported"
# every pipeline (pp group) stays in one block: the racks came through
python3 - "$T/k8s.json" <<'PY' || bad "kubectl: a pipeline crosses blocks"
import json, sys
d = json.load(open(sys.argv[1]))
by = {}
for r in d["ranks"]:
    by.setdefault((r["tp"], r["dp"]), set()).add(r["rack"])
sys.exit(0 if all(len(v) == 1 for v in by.values()) else 1)
PY

# ---- 2. which label wins ------------------------------------------------------
"$PAR3DRUN" --dry-run --cluster "$FX/k8s/nodes-mixed-labels.json" --tp 4 --pp 2 --format json >"$T/mix.json" 2>"$T/mix.err" ||
  { bad "mixed labels: exit $?"; cat "$T/mix.err"; }
ranks <"$T/mix.json" | awk '{print $2, $4, $5}' | sort -u >"$T/mix.nodes"
grep -q '^gke-a3-2 sb-1 ' "$T/mix.nodes" || bad "GKE: the subblock is not the rack: $(grep gke-a3-2 "$T/mix.nodes")"
grep -q '^ip-10-0-1-11.ec2.internal nn-331 ' "$T/mix.nodes" || bad "EKS: layer 3 is not the rack"
grep -q '^gb200-3 blk-gb 7b2e4c1a-0f3d-4e6b-9a51-3c8d2f1e0a77.1$' "$T/mix.nodes" ||
  bad "GB200: gpu.clique is not the NVLink domain: $(grep gb200-3 "$T/mix.nodes")"

# ---- 3. AWS describe-instance-topology: the last NetworkNodes entry is the rack --
"$PAR3DRUN" --dry-run --cluster "$FX/aws/instance-topology-4x-p5.json" --tp 8 --pp 2 --format json >"$T/aws.json" 2>"$T/aws.err" ||
  { bad "aws: exit $?"; cat "$T/aws.err"; }
[ "$(ranks <"$T/aws.json" | awk '{print $4}' | sort -u | tr '\n' ' ')" = "nn-3333333333333330 nn-3333333333333331 " ] ||
  bad "aws: racks are not the layer-3 nodes"

# ---- 4. --topology overrides the tables; unknown products are named ------------
python3 - "$FX/k8s/nodes-16x-h100-topograph.json" "$T/pcie.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for it in d["items"]:
    l = it["metadata"]["labels"]
    if "nvidia.com/gpu.product" in l:
        l["nvidia.com/gpu.product"] = "NVIDIA-H100-PCIe"
        l["nvidia.com/gpu.count"] = "4"
json.dump(d, open(sys.argv[2], "w"))
PY
"$PAR3DRUN" --dry-run --cluster "$T/pcie.json" --tp 4 >"$T/o" 2>"$T/e"; rc=$?
[ "$rc" = 2 ] || bad "unknown product: exit $rc, want 2"
grep -q "node gpu-01: 4 x 'NVIDIA-H100-PCIe' has no bundled topology.*give --topology FILE" "$T/e" || bad "unknown product message: $(cat "$T/e")"
"$PAR3DRUN" --dry-run --cluster "$T/pcie.json" --topology "$P3D_SRC/examples/topologies/pcie4.xml" --tp 4 >"$T/o" 2>"$T/e" ||
  bad "--topology override: exit $? $(cat "$T/e")"
grep -q "world 64 on 64 GPUs of 16 nodes, 2 racks" "$T/o" || bad "--topology override: $(grep mesh "$T/o")"

# ---- 5. bad documents ------------------------------------------------------------
printf '{"items": 3}' >"$T/b1.json"
printf '{"items": [{"kind": "Pod", "metadata": {"name": "x"}}]}' >"$T/b2.json"
printf '{"items": [{"kind": "Node", "metadata": {"name": "x", "labels": {"nvidia.com/gpu.count": "eight"}}}]}' >"$T/b3.json"
printf '{"items": [{"kind": "Node", "metadata": {"name": "x"}}]}' >"$T/b4.json"
printf '{"Instances": []}' >"$T/b5.json"
printf '{"Instances": [{"InstanceId": "i-1", "InstanceType": "m5.large", "NetworkNodes": ["a"]}]}' >"$T/b6.json"
printf '{"Instances": [{"InstanceId": "i-1", "InstanceType": "p5.48xlarge", "NetworkNodes": "a"}]}' >"$T/b7.json"
want=("\"items\" must be an array" "items\\[0\\] (x): kind 'Pod', expected Node" "node x: nvidia.com/gpu.count" \
      "no node with NVIDIA GPUs" "\"Instances\" must be a non-empty array" "instance type 'm5.large' has no bundled topology" \
      "\"NetworkNodes\" must be an array of strings")
for i in 1 2 3 4 5 6 7; do
  "$PAR3DRUN" --dry-run --cluster "$T/b$i.json" --tp 8 >"$T/o" 2>"$T/e"; rc=$?
  [ "$rc" = 2 ] || bad "b$i: exit $rc, want 2"
  [ "$(wc -l <"$T/e")" = 1 ] || bad "b$i: not one line: $(cat "$T/e")"
  grep -q "b$i.json.*${want[$((i - 1))]}" "$T/e" || bad "b$i: message '$(cat "$T/e")' lacks '${want[$((i - 1))]}'"
done

[ "$fail" = 0 ] && echo "PASS cluster_sources"
exit "$fail"
