# SPDX-License-Identifier: BSD-3-Clause
# The EP checks (EP_CROSSES_NVLINK_DOMAIN, EP_CROSSES_RACKS) fire on the
# placements that deserve them and stay quiet on the others, and on DGX-1
# (hybrid cube-mesh) tp=8 the links table, the objective, the check and the
# policy notes agree that TP rings stay on NVLink (docs/checks.md).
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
command -v jq >/dev/null || { echo "skip: jq not installed"; exit 77; }
cd "$P3D_SRC" || exit 1
unset SLURM_JOB_NODELIST
fail=0
J=$(mktemp); trap 'rm -f "$J"' EXIT
check() { # check DESCRIPTION COMMAND...
    local what="$1"; shift
    if "$@" >/dev/null 2>&1; then echo "ok $what"; else echo "FAIL $what"; fail=1; fi
}
run() { # run ARGS... -> $J (exit status ignored: some cases have error checks)
    "$PAR3DRUN" --dry-run --format json "$@" > "$J" 2>/dev/null
    jq -e . "$J" >/dev/null 2>&1 || { echo "FAIL no JSON from: $*"; fail=1; echo '{}' > "$J"; }
}
has() { jq -e --arg c "$1" --arg s "$2" 'any(.checks[]; .code == $c and .severity == $s)' "$J"; }
hasnt() { jq -e --arg c "$1" 'all(.checks[]; .code != $c)' "$J"; }
H2=examples/clusters/2x-dgx-h100.json
H64=examples/clusters/64x-dgx-h100-4racks.json
NVL=examples/clusters/gb200-nvl72-2domains.json
D1=tests/fixtures/clusters/4x-dgx1-2racks.json

# 2 x DGX H100, ep after dp in the order: naive puts EP pairs on two nodes
# though every expert block of etp*ep = 4 GPUs fits a node (warning, names
# the group); megatron keeps them on NVLink (no EP check)
run --cluster $H2 --tp 2 --ep 2 --order tp-cp-dp-ep-pp --policy naive
check "naive: EP_CROSSES_NVLINK_DOMAIN warning" has EP_CROSSES_NVLINK_DOMAIN warning
check "naive: the message names the group, cause and fix" \
    jq -e 'any(.checks[]; .code == "EP_CROSSES_NVLINK_DOMAIN" and (.message | test("ranks 0,8 on dgx-h100-01/0, dgx-h100-02/0") and test("all-to-all") and test("--policy megatron")))' "$J"
check "naive: 8 of 8 EP groups counted" jq -e '.metrics.dims.ep.groups_by_link.RACK == 8' "$J"
run --cluster $H2 --tp 2 --ep 2 --order tp-cp-dp-ep-pp --policy megatron
check "megatron: no EP_CROSSES_NVLINK_DOMAIN" hasnt EP_CROSSES_NVLINK_DOMAIN
check "megatron: every EP group on NVLink" jq -e '.metrics.dims.ep.worst_link == "NV"' "$J"
# ep=16 cannot fit an 8-GPU node: info, saying the largest domain
run --cluster $H2 --tp 1 --ep 16
check "ep=16 on 8-GPU nodes: EP_CROSSES_NVLINK_DOMAIN info" has EP_CROSSES_NVLINK_DOMAIN info
check "ep=16: says the largest domain" jq -e 'any(.checks[]; .code == "EP_CROSSES_NVLINK_DOMAIN" and (.message | test("largest: 8 GPUs")))' "$J"
check "ep=16: no EP_CROSSES_RACKS in one rack" hasnt EP_CROSSES_RACKS

# 64 x DGX H100 in 4 racks of 128 GPUs: tp8 ep2 with ep outermost puts the
# EP pairs 256 ranks apart, two racks apart with naive; megatron keeps
# each block of 16 GPUs in a rack (on the network, but not the spine)
run --cluster $H64 --tp 8 --ep 2 --order tp-cp-dp-ep-pp --policy naive
check "naive 4 racks: EP_CROSSES_RACKS warning (block fits a rack)" \
    jq -e 'any(.checks[]; .code == "EP_CROSSES_RACKS" and .severity == "warning" and (.message | test("fits one rack")))' "$J"
run --cluster $H64 --tp 8 --ep 2 --order tp-cp-dp-ep-pp --policy megatron
check "megatron 4 racks: no EP_CROSSES_RACKS" hasnt EP_CROSSES_RACKS
# ep=256 (2 x 128-GPU racks): a block is bigger than a rack
run --cluster $H64 --tp 1 --ep 256 --pp 2
check "ep=256: EP_CROSSES_RACKS says lower ep" \
    jq -e 'any(.checks[]; .code == "EP_CROSSES_RACKS" and (.message | test("lower ep")))' "$J"
# a pipeline is tp*cp*pp GPUs: tp8 pp16 ep8 = 128 GPUs fits a rack, so the
# PP_CROSSES_RACKS fix must not claim a pipeline outgrows the rack
run --cluster $H64 --tp 8 --pp 16 --ep 8 --order tp-cp-dp-ep-pp --policy naive
check "pp arithmetic: no 'more GPUs than a rack' for tp8 pp16 ep8" \
    jq -e 'all(.checks[]; .code != "PP_CROSSES_RACKS" or (.message | test("more GPUs than a rack") | not))' "$J"

# GB200 NVL72: EP groups of 72 stay inside one multi-node NVLink domain
run --cluster $NVL --tp 1 --ep 72
check "NVL72 ep=72: no EP check" jq -e 'all(.checks[]; .code | startswith("EP_") | not)' "$J"
check "NVL72 ep=72: EP groups on MNNVL" jq -e '.metrics.dims.ep.worst_link == "MNNVL"' "$J"

# DGX-1: tp=8 rings over NVLink; links table, objective, check and notes agree
run --cluster $D1 --tp 8
check "DGX-1 tp=8: links table says NV for all 4 TP groups" jq -e '.metrics.dims.tp.groups_by_link.NV == 4 and .metrics.dims.tp.worst_link == "NV"' "$J"
check "DGX-1 tp=8: objective counts no TP group off NVLink" jq -e '.metrics.objective[0] == 0' "$J"
check "DGX-1 tp=8: NVLINK_RING_ONLY for 4 of 4 groups" \
    jq -e 'any(.checks[]; .code == "NVLINK_RING_ONLY" and (.message | test("^4 of 4 TP groups")))' "$J"
check "DGX-1 tp=8: no TP_CROSSES_NVLINK_DOMAIN" hasnt TP_CROSSES_NVLINK_DOMAIN
check "DGX-1 tp=8: no policy note says the TP traffic leaves NVLink" \
    jq -e 'all(.checks[]; .code != "POLICY_NOTE" or (.message | test("leave NVLink") | not))' "$J"
check "DGX-1 tp=8: the ring's hops are NV" jq -e '.metrics.dims.tp.hops_by_link.NV == 32 and (.metrics.dims.tp.hops_by_link.SYS // 0) == 0' "$J"
# tp=4 stays inside each clique: no ring note
run --cluster $D1 --tp 4
check "DGX-1 tp=4: no NVLINK_RING_ONLY" hasnt NVLINK_RING_ONLY
# EP's all-to-all pays the missing pairs: ep=8 over a DGX-1 is off NVLink
run --cluster $D1 --tp 1 --ep 8
check "DGX-1 ep=8: EP_CROSSES_NVLINK_DOMAIN (all-to-all is not a ring)" has EP_CROSSES_NVLINK_DOMAIN info
check "DGX-1 ep=8: no NVLINK_RING_ONLY (tp=1)" hasnt NVLINK_RING_ONLY

# text report: the mesh line shows the expert grid beside the dense one
out=$("$PAR3DRUN" --dry-run --cluster $H2 --tp 2 --pp 2 --ep 4 --etp 1 2>/dev/null | sed -n 3p)
check "mesh line shows ep, etp, edp" [ "$(echo "$out" | cut -d, -f1)" = "mesh: tp=2 pp=2 dp=4 ep=4 etp=1 edp=2" ]
# devicemesh: the init_device_mesh calls of its note form the report's groups
# (dense and expert grid, both Megatron orders, cp, etp != tp)
for a in "--tp 2 --pp 2 --ep 2" "--tp 2 --pp 2 --ep 4 --etp 1" "--tp 4 --cp 2" \
         "--tp 2 --ep 2 --order tp-cp-dp-ep-pp" "--tp 2 --cp 2 --ep 2 --pp 2 --order tp-cp-ep-pp-dp"; do
    run --cluster $H2 $a --policy devicemesh
    check "devicemesh note's meshes form the groups of $a" python3 tests/tools/devicemesh_groups.py "$J"
done
exit $fail
