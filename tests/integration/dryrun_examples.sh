# SPDX-License-Identifier: BSD-3-Clause
# DOMAIN.md's worked examples as dry runs on examples/clusters/, checked on
# the JSON report rank by rank (not just the summary figures).
. "$(dirname "$0")/lib/dryrun_lib.sh"

# Helpers run inside pycheck: nodes/racks of every group.
common='
ranks = d["ranks"]
node = [r["node"] for r in ranks]
rack = [r["rack"] for r in ranks]
assert [r["rank"] for r in ranks] == list(range(d["world_size"]))
def spans(dim, key):
    return [len({key[x] for x in g}) for g in d["groups"][dim]]
errors = [c for c in d["checks"] if c["severity"] == "error"]
'

# 175B-style: tp=8 pp=16 dp=4 on 64 x DGX H100 in 4 racks of 16.
dry e175 0 --cluster examples/clusters/64x-dgx-h100-4racks.json --tp 8 --pp 16 --dp 4 --format json
pycheck e175 "$common"'
assert d["world_size"] == 512 and d["mesh"]["tp"] == 8 and d["mesh"]["pp"] == 16 and d["mesh"]["dp"] == 4
assert len(d["groups"]["tp"]) == 64 and set(spans("tp", node)) == {1}, "every TP group inside one node"
assert len(d["groups"]["pp"]) == 32 and set(spans("pp", rack)) == {1}, "every pipeline inside one rack"
assert not errors, errors
assert d["metrics"]["dims"]["tp"]["groups_by_link"] == {"NV": 64}
assert d["metrics"]["pipelines_crossing_racks"] == 0
assert ranks[0]["node"] == "node001" and ranks[0]["gpu"] == 0, "rank 0 on the first node"
b = d["metrics"]["baseline"]
assert b["policy"] == "naive" and b["pipelines_crossing_racks"] == 32, b
' "175B tp=8 pp=16 dp=4: TP in a node, pipelines in a rack, no errors, naive 32/32 cross racks"

# The same in text: the comparison line in numbers.
dry e175t 0 --cluster examples/clusters/64x-dgx-h100-4racks.json --tp 8 --pp 16 --dp 4
has e175t '^Compared with naive on the same input: naive: 32 of 32 pipelines cross racks; megatron: 0$'
has e175t '^Checks: 0 errors'

# 70B-style: tp=8 pp=2 on 2 x DGX H100, with the model. With selective
# recompute it does not fit for training by Megatron-LM's own arithmetic
# (88.4 GB > 85.5 GB; issue 45); with full recompute it does.
dry e70 2 --cluster examples/clusters/2x-dgx-h100.json --tp 8 --pp 2 --model llama2-70b --format json
pycheck e70 "$common"'
assert d["metrics"]["cost"]["memory"]["fits"] is False
assert abs(d["metrics"]["cost"]["memory"]["total"] / 1e9 - 88.4) < 0.05, d["metrics"]["cost"]["memory"]["total"]
assert "MODEL_DOES_NOT_FIT" in {e["code"] for e in errors}, errors
' "70B tp=8 pp=2, selective recompute: 88.4 GB, does not fit"
dry e70f 0 --cluster examples/clusters/2x-dgx-h100.json --tp 8 --pp 2 --model llama2-70b --recompute full \
    --format json
pycheck e70f "$common"'
assert d["mesh"]["dp"] == 1 and d["world_size"] == 16
assert set(spans("tp", node)) == {1}
assert node[0] != node[8] and set(node[:8]) == {node[0]} and set(node[8:]) == {node[8]}, "one stage per node"
assert not errors, errors
assert d["metrics"]["cost"]["memory"]["fits"] is True
' "70B tp=8 pp=2, full recompute: one stage per node, model fits"

# tp=8 x pp=4 x dp=16 = 512 GPUs.
dry e512 0 --cluster examples/clusters/64x-dgx-h100-4racks.json --tp 8 --pp 4 --dp 16 --format json
pycheck e512 "$common"'
assert d["world_size"] == 512 and len(d["groups"]["dp"]) == 32 and len(d["groups"]["dp"][0]) == 16
assert set(spans("tp", node)) == {1} and set(spans("pp", rack)) == {1} and set(spans("pp", node)) == {4}
assert not errors, errors
' "tp=8 pp=4 dp=16: TP in a node, each pipeline on 4 nodes of one rack"

# Interleaved racks (Slurm's alphabetical order): naive crosses, megatron not.
# With Megatron's tp-pp-dp mapping a pipeline's stages are consecutive
# ranks, so naive puts them on consecutive nodes, which alternate racks.
# (With the default order and dp=4 naive lands stage i on node dp+4i: same
# parity, same rack by luck; dp=3 breaks that luck, see il_text below.)
IL="--cluster examples/clusters/16x-dgx-a100-interleaved.json --tp 8 --pp 4"
dry il_naive 0 $IL --order tp-cp-ep-pp-dp --policy naive --format json
pycheck il_naive "$common"'
n = d["metrics"]["pipelines_crossing_racks"]
assert n == len(d["groups"]["pp"]) == 32 and n == sum(1 for s in spans("pp", rack) if s > 1), n
assert any(c["code"] == "PP_CROSSES_RACKS" for c in d["checks"])
assert d["metrics"]["baseline"] is None
' "naive on interleaved racks: all 32 pipelines cross racks"
dry il_meg 0 $IL --order tp-cp-ep-pp-dp --format json
pycheck il_meg "$common"'
assert d["metrics"]["pipelines_crossing_racks"] == 0 and set(spans("pp", rack)) == {1}
assert not any(c["code"] == "PP_CROSSES_RACKS" for c in d["checks"])
assert d["metrics"]["baseline"]["pipelines_crossing_racks"] == 32
' "megatron on interleaved racks: 0 pipelines cross racks"
dry il_text 0 $IL --order tp-cp-ep-pp-dp
has il_text 'naive: 32 of 32 pipelines cross racks; megatron: 0'
has il_text '^  pipelines crossing racks +32 of 32 +0 of 32$'
dry il_dp3 0 $IL --dp 3
has il_dp3 'naive: 24 of 24 pipelines cross racks; megatron: 0'
has il_dp3 'NODES_IDLE'

# GB200 NVL72: tp=8 spans two 4-GPU trays over multi-node NVLink, not the network.
dry nvl 0 --cluster examples/clusters/gb200-nvl72-2domains.json --tp 8 --pp 2 --format json
pycheck nvl "$common"'
assert d["metrics"]["dims"]["tp"]["worst_link"] in ("NV", "MNNVL"), d["metrics"]["dims"]["tp"]
assert not any(c["code"].startswith("TP_CROSSES") for c in d["checks"])
assert ranks[0]["nvlink_domain"] == "nvl72-a", ranks[0]
' "GB200: TP on (multi-node) NVLink, domain named in ranks[]"

# A GPU-less node with --nproc-per-node: synthesized CPU slots, no NVLink noise.
dry cpu 0 --topology examples/topologies/cpu-only.xml --nproc-per-node 4 --tp 2 --format json
pycheck cpu "$common"'
assert d["world_size"] == 4 and [r["gpu"] for r in ranks] == [0, 1, 2, 3]
assert [c["code"] for c in d["checks"] if c["severity"] != "info"] == [], d["checks"]
assert any(c["code"] == "CPU_SLOTS" for c in d["checks"])
assert d["inputs"]["topology"] == "examples/topologies/cpu-only.xml" and d["inputs"]["cluster"] is None
' "cpu-only node: 4 CPU slots, no warnings"
# the text report calls them slots, not GPUs (issue 27: "world 2 on 3 GPUs")
dry cpu_text 0 --topology examples/topologies/cpu-only.xml --nproc-per-node 1
has cpu_text '^mesh: tp=1 pp=1 dp=1, world 1 on 1 CPU slot \(no GPU\) of 1 node, 1 rack$'
has cpu_text '^Placement: rank and \(tp,pp,dp\) on each CPU slot$'
has cpu_text '^  node +rack +slot '
has cpu_text '1 CPU rank slot synthesized'
dry cpu_over 2 --topology examples/topologies/dgx-h100.xml --nproc-per-node 16 --tp 8
err_has cpu_over "--nproc-per-node 16: node"
exit $fail
