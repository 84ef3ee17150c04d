# SPDX-License-Identifier: BSD-3-Clause
# Per-hop costs, headroom, --gpu-mem and plan pins (issue 15). 4 x DGX H100
# with racks listed A B A B, tp8 pp4 dp1: megatron orders the nodes so each
# pipeline crosses racks once, naive three times; the JSON must show fewer
# cross-rack PP hops and a smaller PP time for megatron, for the policy and
# for the baseline alike.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
command -v jq >/dev/null || { echo "skip: jq not installed"; exit 77; }
cd "$P3D_SRC" || exit 1
C=tests/fixtures/clusters/abab-4x-dgx-h100.json
fail=0
check() { # check DESCRIPTION COMMAND...
    local what="$1"; shift
    if "$@" >/dev/null 2>&1; then echo "ok $what"; else echo "FAIL $what"; fail=1; fi
}
J=$(mktemp); trap 'rm -f "$J"' EXIT
"$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --format json > "$J" ||
    { echo "FAIL dry run exit $?"; exit 1; }
mx=$(jq '.metrics.dims.pp.hops_by_link.XRACK // 0' "$J")
nx=$(jq '.metrics.baseline.dims.pp.hops_by_link.XRACK // 0' "$J")
mr=$(jq '.metrics.dims.pp.hops_by_link.RACK // 0' "$J")
mt=$(jq '.metrics.cost.dims.pp.seconds' "$J")
nt=$(jq '.metrics.baseline.cost.dims.pp.seconds' "$J")
echo "megatron: $mx cross-rack + $mr rack PP hops, PP $mt s; naive: $nx cross-rack, PP $nt s"
check "megatron crosses racks on 8 of 24 PP hops" [ "$mx-$mr" = 8-16 ]
check "naive crosses racks on all 24 PP hops" [ "$nx" = 24 ]
check "megatron's PP time is smaller than naive's" jq -e '.metrics.cost.dims.pp.seconds < .metrics.baseline.cost.dims.pp.seconds' "$J"
check "collectives report their ring's hops" jq -e '.metrics.dims.tp.hops_by_link.NV == 32' "$J"

# headroom: the default reserve is max(5%, 3 GB); --mem-reserve changes it
"$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --format json > "$J"
check "default reserve is 5% of the GPU, at least 3 GB" \
    jq -e '.metrics.cost.memory.reserve >= 3e9 and .metrics.cost.memory.reserve_source == "default"' "$J"
"$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --mem-reserve 7 --format json > "$J"
check "--mem-reserve sets the reserve" jq -e '.metrics.cost.memory.reserve == 7e9' "$J"

# --gpu-mem wins over the topology's figure (DGX H100 XML knows its memory)
"$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --gpu-mem 40 --format json > "$J" 2>/dev/null
check "--gpu-mem wins over the topology" \
    jq -e '.metrics.cost.memory.gpu == 40e9 and .metrics.cost.memory.gpu_source == "--gpu-mem"' "$J"

# plan: a layout at 98% of the GPU is dropped for headroom and said so
out=$("$PAR3DRUN" plan --cluster $C --model llama2-70b --global-batch 64 --tp 4 --format json)
check "plan --tp 4 pins tp" jq -e '[.layouts[].tp] | all(. == 4)' <<<"$out"
check "plan reports the pins" jq -e '.pins.tp == 4' <<<"$out"
out=$("$PAR3DRUN" plan --cluster $C --model llama2-70b --global-batch 64 --pp 2 --micro-batch 1 --virtual-stages 2 --format json)
check "plan pins pp, micro-batch and virtual stages" \
    jq -e '[.layouts[] | .pp == 2 and .micro_batch == 1 and .virtual_stages == 2] | all' <<<"$out"
out=$("$PAR3DRUN" plan --cluster $C --model llama2-70b --global-batch 64 --format json)
check "plan searches virtual stages when not pinned" jq -e '.searched_dims.virtual_stages == true' <<<"$out"
check "plan leaves cp at 1 for a 4k sequence" jq -e '.searched_dims.cp == false and ([.layouts[].cp] | all(. == 1))' <<<"$out"
out=$("$PAR3DRUN" plan --cluster $C --model llama2-70b --seq-len 32768 --global-batch 64 --format json 2>/dev/null)
check "plan searches cp for a 32k sequence" jq -e '.searched_dims.cp == true' <<<"$out"
txt=$("$PAR3DRUN" plan --cluster $C --model llama2-70b --global-batch 64 --cp 2)
check "plan text names what it pinned" grep -q 'Pinned: cp=2' <<<"$txt"

# policy choice: the chosen policy's estimate loses to another bundled one
err=$("$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --policy naive 2>&1 >/dev/null)
check "the dry run says up front that megatron beats naive, and why" \
    grep -q "note: policy megatron's estimate is .* faster than naive's.*8 cross-rack stage hops instead of 24" <<<"$err"
txt=$("$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --policy naive 2>/dev/null)
check "the text report starts with the note" grep -q "^note: policy megatron" <<<"$(head -1 <<<"$txt")"
out=$("$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --policy auto --format json 2>"$J")
check "--policy auto keeps the best estimate (not naive)" jq -e '.policy != "naive"' <<<"$out"
check "--policy auto names the runner-up" grep -q "policy auto chose .* runner-up" "$J"
"$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --policy auto >/dev/null 2>&1
check "--policy auto without a model is bad input (exit 2)" [ $? = 2 ]
err=$("$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 2>&1 >/dev/null)
check "no note when the chosen policy (megatron) has the best estimate" bash -c '! grep -q "note:" <<<"$1"' _ "$err"
"$PAR3DRUN" --dry-run --cluster $C --tp 8 --pp 4 --model llama2-70b --global-batch 64 --policy-candidates "" \
    >/dev/null 2>"$J"
check "an empty --policy-candidates is bad input (exit 2)" [ $? = 2 ]
check "... and says so" grep -q "^par3drun: --policy-candidates: '' is not a policy" "$J"
exit $fail
