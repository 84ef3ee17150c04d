# DOMAIN.md's first worked example: GPT-3 175B on 64 x 8 H100 in 4 racks.
# Plan must keep TP at 8 inside the nodes' NVLink and put PP and DP across
# nodes. The batch is GPT-3's own (1536 sequences of 2048 tokens).
. "$(dirname "$0")/lib/plan_lib.sh"
c=$(cluster_file 64x-dgx-h100-4racks.json)
golden plan_175b_64nodes.txt 0 --cluster "$c" --model gpt3-175b --global-batch 1536
golden plan_175b_64nodes.json 0 --cluster "$c" --model gpt3-175b --global-batch 1536 --format json
if [ "${P3D_UPDATE_GOLDEN:-0}" != 1 ]; then
    expect plan_175b_64nodes.txt '^ 1   8 +[0-9]+ +[0-9]+ .* NV +RACK +XRACK'
    expect plan_175b_64nodes.txt 'weights alone are 350.0 GB'
    expect plan_175b_64nodes.json '"layouts":\[\{"rank":1,"tp":8,'
fi
# DOMAIN.md's exact layout (tp=8 pp=16 dp=4) wins at a smaller batch, where
# the bubble matters more.
golden plan_175b_64nodes_b512.txt 0 --cluster "$c" --model gpt3-175b --global-batch 512 --top 3
[ "${P3D_UPDATE_GOLDEN:-0}" = 1 ] || expect plan_175b_64nodes_b512.txt '^ 1   8  16    4 '
same_as_example 64x-dgx-h100-4racks.json plan_175b_64nodes.txt --model gpt3-175b --global-batch 1536
exit $fail
