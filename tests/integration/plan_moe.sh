# SPDX-License-Identifier: BSD-3-Clause
# par3drun plan for mixture-of-experts models (issue 12): ep (dividing the
# experts) and etp are searched, EP blocks land on NVLink when they fit,
# pinned large-EP layouts say why their all-to-alls leave NVLink, the
# printed run line reproduces the plan, and dense plans keep their schema.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
command -v jq >/dev/null || { echo "skip: jq not installed"; exit 77; }
cd "$P3D_SRC" || exit 1
unset SLURM_JOB_NODELIST
fail=0
J=$(mktemp); T=$(mktemp); trap 'rm -f "$J" "$T"' EXIT
check() { # check DESCRIPTION COMMAND...
    local what="$1"; shift
    if "$@" >/dev/null 2>&1; then echo "ok $what"; else echo "FAIL $what"; fail=1; fi
}
C256=tests/fixtures/clusters/plan-256x-dgx-h100-8racks.json
C16=tests/fixtures/clusters/plan-16x-dgx-h100-2racks.json

# DeepSeek-V3 on 256 x 8 H100: every shown layout has ep > 1 or says ep=1,
# ep divides 256, and the best keeps every EP block inside a node's NVLink
"$PAR3DRUN" plan --cluster $C256 --model deepseek-v3 --global-batch 15360 --format json > "$J" ||
    { echo "FAIL deepseek-v3 plan exit $?"; exit 1; }
check "deepseek-v3: the best layout uses expert parallelism" jq -e '.layouts[0].ep > 1' "$J"
check "deepseek-v3: every layout's ep divides the 256 experts" jq -e 'all(.layouts[]; 256 % .ep == 0)' "$J"
check "deepseek-v3: expert grid etp*ep*edp = tp*dp" jq -e 'all(.layouts[]; .etp * .ep * .edp == .tp * .cp * .dp)' "$J"
check "deepseek-v3: the best's EP all-to-all on NVLink" jq -e '.layouts[0].cost.dims.ep.link == "NV"' "$J"
check "deepseek-v3: ep searched, model's expert figures in the JSON" \
    jq -e '.searched_dims.ep == true and .model.experts == 256 and .model.top_k == 8' "$J"
check "deepseek-v3: MoE cost figures present" \
    jq -e '.layouts[0].cost.moe.params_active > 3.7e10 and .layouts[0].cost.moe.params_active < 3.8e10 and .layouts[0].cost.dims.ep.bytes_per_step > 0' "$J"
"$PAR3DRUN" plan --cluster $C256 --model deepseek-v3 --global-batch 15360 > "$T"
flat() { tr '\n' ' ' < "$T" | tr -s ' '; } # wrapped lines joined
check "deepseek-v3 text: says every expert block is inside one NVLink domain" \
    grep -q "every expert block of etp\*ep = [0-9]* GPUs inside one NVLink domain" <<<"$(flat)"
# the run line reproduces the layout: a dry run of it places EP on NVLink
run=$(sed -n 's/^run the best:  par3drun //p' "$T")
check "deepseek-v3: the run line names --ep" grep -q -- "--ep [0-9]" <<<"$run"
# shellcheck disable=SC2086
"$PAR3DRUN" $run --format json > "$J" 2>/dev/null
check "deepseek-v3: the run line's dry run passes every check" jq -e '[.checks[] | select(.severity == "error")] | length == 0' "$J"
check "deepseek-v3: the run line's dry run keeps EP on NVLink" jq -e '.metrics.dims.ep.worst_link == "NV"' "$J"

# DeepSeek-V3's published layout (tp1 pp16 ep64): 64-GPU EP groups span 8
# nodes; the plan says so (and needs full recompute to fit the estimate)
"$PAR3DRUN" plan --cluster $C256 --model deepseek-v3 --global-batch 15360 --tp 1 --pp 16 --ep 64 \
    --recompute full --top 1 > "$T"
check "pinned ep=64: the all-to-alls leave NVLink, said in words" \
    grep -q "expert blocks of etp\*ep = 64 GPUs do not fit one NVLink domain, so the all-to-alls run on RACK" <<<"$(flat)"
check "pinned ep=64: pinned dimensions listed" grep -q "Pinned: tp=1, pp=16, ep=64" <<<"$(flat)"

# Mixtral 8x22B on 16 x 8 H100 (NeMo's recipe size)
"$PAR3DRUN" plan --cluster $C16 --model mixtral-8x22b --global-batch 512 --format json > "$J"
check "mixtral: best uses ep > 1 dividing 8" jq -e '.layouts[0].ep > 1 and 8 % .layouts[0].ep == 0' "$J"
check "mixtral: etp is tp or 1" jq -e 'all(.layouts[]; .etp == .tp or .etp == 1)' "$J"
"$PAR3DRUN" plan --cluster $C16 --model mixtral-8x22b --global-batch 512 --ep 8 --etp 1 --format json > "$J"
check "mixtral: --ep 8 --etp 1 pinned" jq -e 'all(.layouts[]; .ep == 8 and .etp == 1) and .pins.ep == 8 and .pins.etp == 1' "$J"

# dense models: no expert fields (schema of the dense goldens unchanged)
"$PAR3DRUN" plan --cluster tests/fixtures/clusters/plan-2x-dgx-h100.json --model llama2-70b --global-batch 64 --format json > "$J"
check "dense plan: no ep fields, no moe cost" \
    jq -e '(.layouts[0] | has("ep") | not) and (.layouts[0].cost | has("moe") | not) and (.model | has("experts") | not)' "$J"
exit $fail
