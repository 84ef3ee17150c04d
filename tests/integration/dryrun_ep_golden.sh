# SPDX-License-Identifier: BSD-3-Clause
# MoE placements on the example clusters, rank by rank (JSON report:
# every rank's node and GPU, the groups, the policy's notes), against
# goldens written by the build before par3d.place_ep's per-rank work moved
# from Lua into C block operations (res:place_ep, res:tp_split,
# par3d.ep_blocks, par3d.unit_tiers): the move changed no placement and
# no note. Blocks inside an NVLink domain, inside a node, across nodes;
# TP groups split across domains (PCIe pairs); devicemesh.lua too.
. "$(dirname "$0")/lib/dryrun_lib.sh"

golden dryrun_ep_16x-dgx-a100_tp8ep4.json 0 --cluster examples/clusters/16x-dgx-a100-interleaved.json \
    --tp 8 --ep 4 --format json
golden dryrun_ep_64x-dgx-h100_tp4ep2pp2.json 0 --cluster examples/clusters/64x-dgx-h100-4racks.json \
    --tp 4 --ep 2 --pp 2 --format json
golden dryrun_ep_8x-pcie-nvlink-pairs_tp4ep2.json 0 --cluster examples/clusters/8x-pcie-nvlink-pairs.json \
    --tp 4 --ep 2 --pp 2 --format json
golden dryrun_ep_gb200_tp2ep8etp1.json 0 --cluster examples/clusters/gb200-nvl72-2domains.json \
    --tp 2 --ep 8 --etp 1 --format json
golden dryrun_ep_4x-dgx1-2racks_devicemesh.json 0 --cluster tests/fixtures/clusters/4x-dgx1-2racks.json \
    --tp 8 --ep 2 --policy devicemesh --format json
exit $fail
