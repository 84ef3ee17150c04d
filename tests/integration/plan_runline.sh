#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# plan's table, policy line and run line are one evaluation (issue 27):
# on every bundled example cluster and the plan fixtures, with dense and
# MoE models, the printed run line (a --dry-run line) is run as is; its
# step time must be row #1's, its checks must carry no warning plan did
# not name, and neither its warnings nor its note may advise a policy other
# than the one the run line uses (docs/plan.md, "Which policy").
set -u -o pipefail
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
cd "$P3D_SRC" || exit 1
unset SLURM_JOB_NODELIST
fail=0 n=0
bad() { echo "FAIL $*"; fail=1; }
flat() { sed ':a;N;$!ba;s/\n         / /g;s/\n   / /g'; }
cases=(
    "examples/clusters/64x-dgx-h100-4racks.json --model mixtral-8x22b --global-batch 1024"
    "examples/clusters/64x-dgx-h100-4racks.json --model gpt3-175b --global-batch 512"
    "examples/clusters/16x-dgx-a100-interleaved.json --model llama2-70b --global-batch 256"
    "examples/clusters/2x-dgx-h100.json --model llama3-8b --global-batch 64"
    "examples/clusters/8x-pcie-nvlink-pairs.json --model llama3-8b --global-batch 64"
    "examples/clusters/gb200-nvl72-2domains.json --model gpt3-175b --global-batch 1152"
    "tests/fixtures/clusters/4x-dgx1-2racks.json --model llama3-8b --global-batch 64 --recompute full"
    "tests/fixtures/clusters/abab-4x-dgx-h100.json --model llama2-70b --global-batch 64"
    "tests/fixtures/clusters/gb200-2domains-dgx-h100.json --model llama3-8b --global-batch 64"
    "tests/fixtures/clusters/plan-16x-dgx-h100-2racks.json --model mixtral-8x22b --global-batch 256"
    "tests/fixtures/clusters/plan-16x-dgx-h100-2racks.json --model llama2-70b --global-batch 128 --spares 2"
    "tests/fixtures/clusters/plan-256x-dgx-h100-8racks.json --model deepseek-v3 --global-batch 2048"
    "tests/fixtures/clusters/plan-16x-dgx-h100-2racks.json --model-config tests/fixtures/models/llama-3-70b.config.json --global-batch 128"
    "tests/fixtures/clusters/plan-16x-dgx-h100-2racks.json --model-config tests/fixtures/models/mixtral-8x22b.config.json --seq-length 4096 --global-batch 256"
    "examples/clusters/2x-dgx-h100.json --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --num-query-groups 8 --swiglu --untie-embeddings-and-output-weights --normalization RMSNorm --seq-length 8192 --padded-vocab-size 128256 --global-batch 64"
)
for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    txt=$("$PAR3DRUN" plan --cluster $c --top 3 2>/dev/null) || { bad "$c: plan exit $?"; continue; }
    ft=$(flat <<<"$txt")
    row1=$(awk '$1 == "1" && NF > 10 { print $(NF-1); exit }' <<<"$txt")
    run=$(sed -n 's/^run the best:  //p' <<<"$txt")
    pol=$(sed -n 's/.*--policy \([^ ]*\).*/\1/p' <<<"$run")
    pol=${pol:-megatron}
    [ -n "$row1" ] && [ -n "$run" ] || { bad "$c: no row #1 or no run line"; continue; }
    # Megatron-LM's and torchtitan's lines for the same layout, sequence
    # parallelism written out whenever tp > 1
    meg=$(sed -n 's/^Megatron-LM:   pretrain_gpt.py //p' <<<"$txt")
    tt=$(sed -n 's/^torchtitan:    //p' <<<"$txt")
    tp1=$(awk '$1 == "1" && NF > 10 { print $2; exit }' <<<"$txt")
    [ -n "$meg" ] && [ -n "$tt" ] || bad "$c: no Megatron-LM or torchtitan line"
    grep -q -- "--tensor-model-parallel-size $tp1 " <<<"$meg" || bad "$c: the Megatron-LM line's tp is not row #1's $tp1"
    grep -q -- "--parallelism.tensor_parallel_degree $tp1 " <<<"$tt" || bad "$c: the torchtitan line's tp is not $tp1"
    if [ "$tp1" -gt 1 ]; then
        grep -q -- "--sequence-parallel" <<<"$meg" || bad "$c: tp $tp1 but no --sequence-parallel in the Megatron-LM line"
    fi
    grep -q "^sequence parallelism: " <<<"$txt" || bad "$c: sequence parallelism not stated"
    # the line as printed, with our binary for par3drun
    out=$(eval "${run/par3drun/\"\$PAR3DRUN\"}" 2>&1)
    rc=$?
    [ $rc = 0 ] || { bad "$c: the run line exits $rc: $run"; continue; }
    step=$(awk '/^  step time/ { print $3; exit }' <<<"$out")
    [ "$step" = "$row1" ] || bad "$c: row #1 says $row1 s, its run line's dry run $step s"
    # every warning the dry run gives is one plan named for row #1
    warned=$(awk '$1 == "warning" { print $2 }' <<<"$out")
    for w in $warned; do
        grep -q "1 tp=.*Placed by $pol, which warns [A-Z_,]*$w" <<<"$ft" ||
            bad "$c: the run line's dry run warns $w, plan's row #1 does not say so"
        grep -q "^policy .*$pol [0-9.]* s (warns [A-Z_,]*$w" <<<"$ft" ||
            bad "$c: the policy line does not give $pol's warning $w"
    done
    # nothing in it advises another policy than the one the run line uses
    other=$(grep -oE -- "--policy [a-z]+" <<<"$out" | grep -v -- "--policy $pol\$" | sort -u)
    [ -z "$other" ] || bad "$c: the run line's dry run advises $(tr '\n' ' ' <<<"$other")(run line: $pol)"
    n=$((n + 1))
done
[ $n -ge 15 ] || bad "only $n of ${#cases[@]} cases ran"
[ $fail = 0 ] && echo "ok: $n plans: row #1 is its run line's dry run, with no advice against it"
exit $fail
