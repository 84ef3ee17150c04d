# SPDX-License-Identifier: BSD-3-Clause
# DOMAIN.md's second worked example: a 70B model in FP16 does not fit one
# GPU; on 2 x DGX H100 the plan is tp=8 per node, pp=2 across the two.
. "$(dirname "$0")/lib/plan_lib.sh"
c=$(cluster_file 2x-dgx-h100.json)
golden plan_70b_2nodes.txt 0 --cluster "$c" --model llama2-70b --global-batch 64
golden plan_70b_2nodes.json 0 --cluster "$c" --model llama2-70b --global-batch 64 --format json
if [ "${P3D_UPDATE_GOLDEN:-0}" != 1 ]; then
    expect plan_70b_2nodes.txt '^ 1   8   1   2    1 '
    expect plan_70b_2nodes.txt 'FP16/BF16 weights alone are 138.0 GB > .* does not fit one GPU'
fi
# Without the second node nothing fits: exit 2 and the closest misfit.
golden plan_70b_1node.txt 2 --topology examples/topologies/dgx-h100.xml --model llama2-70b \
    --global-batch 64
[ "${P3D_UPDATE_GOLDEN:-0}" = 1 ] || expect plan_70b_1node.txt '^closest misfit: tp=8 pp=1'
same_as_example 2x-dgx-h100.json plan_70b_2nodes.txt --model llama2-70b --global-batch 64
exit $fail
