# SPDX-License-Identifier: BSD-3-Clause
# DOMAIN.md's second worked example: a 70B model in bf16 does not fit one
# GPU. On 2 x DGX H100 Megatron-LM's own arithmetic says training with
# selective recompute does not fit either: tp=8 pp=2 needs 77.6 GB of
# weights and optimizer (18 B/param on the first stage, with the
# embedding) plus 10.7 GB of activations = 88.4 GB > 85.5 GB. With full
# recompute it fits (tp and pp inside and across the two nodes).
. "$(dirname "$0")/lib/plan_lib.sh"
c=$(cluster_file 2x-dgx-h100.json)
golden plan_70b_2nodes.txt 2 --cluster "$c" --model llama2-70b --global-batch 64
[ "${P3D_UPDATE_GOLDEN:-0}" = 1 ] || {
    expect plan_70b_2nodes.txt '^closest misfit: tp=8 pp=2 dp=1 b=1 ZeRO-0 needs 88.4 GB per GPU'
    expect plan_70b_2nodes.txt 'FP16/BF16 weights alone are 138.0 GB > .* does not fit one GPU'
    expect plan_70b_2nodes.txt '18 B/param'
}
golden plan_70b_2nodes_full.txt 0 --cluster "$c" --model llama2-70b --global-batch 64 --recompute full
golden plan_70b_2nodes.json 0 --cluster "$c" --model llama2-70b --global-batch 64 --recompute full --format json
[ "${P3D_UPDATE_GOLDEN:-0}" = 1 ] || expect plan_70b_2nodes_full.txt '^ 1   [48]   1   [24] '
# Without the second node nothing fits: exit 2 and the closest misfit.
golden plan_70b_1node.txt 2 --topology examples/topologies/dgx-h100.xml --model llama2-70b \
    --global-batch 64
[ "${P3D_UPDATE_GOLDEN:-0}" = 1 ] || expect plan_70b_1node.txt '^closest misfit: tp=8 pp=1'
same_as_example 2x-dgx-h100.json plan_70b_2nodes_full.txt --model llama2-70b --global-batch 64 --recompute full
exit $fail
