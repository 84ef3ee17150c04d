# SPDX-License-Identifier: BSD-3-Clause
# Golden text and JSON reports of the example clusters (tests/golden/dryrun_*).
# Each case runs twice and must be byte-identical (determinism), then must
# equal its golden. P3D_UPDATE_GOLDEN=1 bash tests/integration/dryrun_golden.sh
# (with PAR3DRUN, P3D_SRC set) rewrites them: review `git diff tests/golden`.
. "$(dirname "$0")/lib/dryrun_lib.sh"
E=examples/clusters

# 70B tp8 pp2 on 2 x H100 does not fit for training by Megatron-LM's own
# arithmetic (88.4 GB > 85.5 GB; issue 45): the dry run says so, exit 2
golden dryrun_2x-dgx-h100_70b.txt 2 --cluster $E/2x-dgx-h100.json --tp 8 --pp 2 --model llama2-70b \
    --micro-batches 8
golden dryrun_2x-dgx-h100_70b.json 2 --cluster $E/2x-dgx-h100.json --tp 8 --pp 2 --model llama2-70b \
    --micro-batches 8 --format json
golden dryrun_64x-dgx-h100_175b.txt 0 --cluster $E/64x-dgx-h100-4racks.json --tp 8 --pp 16 --dp 4
golden dryrun_64x-dgx-h100_175b.json 0 --cluster $E/64x-dgx-h100-4racks.json --tp 8 --pp 16 --dp 4 \
    --format json
golden dryrun_64x-dgx-h100_tp8pp4dp16.txt 0 --cluster $E/64x-dgx-h100-4racks.json --tp 8 --pp 4 --dp 16
golden dryrun_16x-dgx-a100-interleaved.txt 0 --cluster $E/16x-dgx-a100-interleaved.json --tp 8 --pp 4 \
    --order tp-cp-ep-pp-dp
golden dryrun_16x-dgx-a100-interleaved_naive.txt 0 --cluster $E/16x-dgx-a100-interleaved.json --tp 8 \
    --pp 4 --order tp-cp-ep-pp-dp --policy naive
golden dryrun_16x-dgx-a100-interleaved.json 0 --cluster $E/16x-dgx-a100-interleaved.json --tp 8 --pp 4 \
    --order tp-cp-ep-pp-dp --format json
golden dryrun_8x-pcie-nvlink-pairs.txt 0 --cluster $E/8x-pcie-nvlink-pairs.json --tp 2 --pp 4
golden dryrun_8x-pcie-nvlink-pairs_tp4.txt 0 --cluster $E/8x-pcie-nvlink-pairs.json --tp 4 --pp 2
golden dryrun_gb200-nvl72.txt 0 --cluster $E/gb200-nvl72-2domains.json --tp 8 --pp 2
golden dryrun_gb200-nvl72.json 0 --cluster $E/gb200-nvl72-2domains.json --tp 8 --pp 2 --format json
# devicemesh.lua and a DGX-1 (hybrid cube-mesh) cluster; these goldens were
# made by the build before par3d.result and the streamed report (issue 30):
# the placements and reports must stay byte-identical
golden dryrun_64x-dgx-h100_devicemesh.txt 0 --cluster $E/64x-dgx-h100-4racks.json --tp 8 --pp 4 \
    --policy devicemesh
golden dryrun_gb200-nvl72_devicemesh.json 0 --cluster $E/gb200-nvl72-2domains.json --tp 8 --pp 2 \
    --policy devicemesh --format json
golden dryrun_4x-dgx1-2racks_tp4.json 0 --cluster tests/fixtures/clusters/4x-dgx1-2racks.json --tp 4 --pp 2 \
    --format json
golden dryrun_64x-dgx-h100_spares.json 0 --cluster $E/64x-dgx-h100-4racks.json --tp 8 --pp 4 --spares 4 \
    --format json
exit $fail
