# SPDX-License-Identifier: BSD-3-Clause
# plan says why its micro-batch size wins (the same layout at half and twice
# the micro-batch: step time, GEMM efficiency, bubble, activations) and,
# when the output layer makes the last stage the slowest, which
# --decoder-last-pipeline-num-layers evens the stages (issue 45).
. "$(dirname "$0")/lib/estimate_lib.sh"
# Llama 3 8B, pp pinned to 4 without interleaving: 8 layers a stage, and a
# 128K-vocabulary output layer worth ~1.6 layers on the last one. With
# Megatron's uneven split (the other stages share L-N layers: N = 2 or 5)
# N = 5 gives stages of 9, 9, 9 and 5 + 1.6 layers; F = N = 7 (7, 9, 9, 7 +
# 1.6) as fast, and the first stage, which holds the embedding and 4
# micro-batches, one layer lighter.
txt=$("$PAR3DRUN" plan --cluster $C --model llama3-8b --global-batch 64 --pp 4 --virtual-stages 1 2>&1) ||
    bad "plan exit $?"
flat=$(sed ':a;N;$!ba;s/\n         / /g' <<<"$txt")
grep -q '^batch    micro-batch b=1 (m=32) wins for this layout; b=2: [0-9.]* s (+[0-9.]*%): GEMMs at' <<<"$flat" ||
    bad "no micro-batch reason naming b=2's time and GEMM efficiency: $(grep '^batch' <<<"$txt")"
grep -q 'bubble [0-9.]*% vs [0-9.]*%, activations [0-9.]* vs [0-9.]* GB' <<<"$flat" || bad "no bubble/activation comparison"
# Megatron's split: 7 9 9 7 is as fast as 9 9 9 5 (the middle stages set the
# pace either way) and lighter on the first stage, which holds the embedding
grep -q -- "Megatron's --decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 saves about 0.2[0-9] s per step ([0-9.]*%); the fullest stage needs 27.4 GB per GPU instead of 30.9" <<<"$flat" ||
    bad "no uneven-stage advice: $(grep -A4 '^batch' <<<"$txt")"
j=$("$PAR3DRUN" plan --cluster $C --model llama3-8b --global-batch 64 --pp 4 --virtual-stages 1 --format json)
jq -e '.uneven_stages | .decoder_first_pipeline_num_layers == 7 and .decoder_last_pipeline_num_layers == 7 and
       .saves_seconds > 0 and .memory_after < .memory_before' <<<"$j" >/dev/null ||
    bad "JSON uneven_stages: $(jq -c .uneven_stages <<<"$j")"
# the dry run with the advised flags: the same memory, a shorter step
D=(--dry-run --cluster $C --model llama3-8b --tp 2 --pp 4 --micro-batch 1 --global-batch 64 --zero 1 --format json)
even=$("$PAR3DRUN" "${D[@]}" | jq -c '.metrics.cost | [.memory.total, .step_seconds]')
split=$("$PAR3DRUN" "${D[@]}" --decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 |
    jq -c '.metrics.cost | [.memory.total, .step_seconds, .memory.stage_layers]')
jq -e --argjson e "$even" '.[0] == 27412700000 and .[1] < $e[1] and .[2] == [7, 9, 7]' <<<"$split" >/dev/null ||
    bad "dry run with the split: $split (even $even)"
# plan with the split: the Megatron line carries it; a split Megatron refuses is refused
j=$("$PAR3DRUN" plan --cluster $C --model llama3-8b --global-batch 64 --pp 4 --virtual-stages 1 \
    --decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 --format json)
jq -e '.run_lines.megatron | contains("--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7")' \
    <<<"$j" >/dev/null || bad "plan with the split: $(jq -c .run_lines.megatron <<<"$j")"
out=$("$PAR3DRUN" plan --cluster $C --model llama3-8b --global-batch 64 --pp 4 --decoder-last-pipeline-num-layers 7 2>&1)
rc=$?
[ $rc = 2 ] && grep -q 'remaining 25 of 32 layers' <<<"$out" || bad "plan, bad split: exit $rc: $out"
out=$("$PAR3DRUN" "${D[@]}" --decoder-last-pipeline-num-layers 7 2>&1)
rc=$?
[ $rc = 2 ] && grep -q 'UNEVEN_STAGES' <<<"$out" || bad "dry run, bad split: exit $rc"
jq -e '.micro_batch_note | startswith("micro-batch b=1 (m=32) wins")' <<<"$j" >/dev/null || bad "JSON micro_batch_note"
jq -e '.run_lines.megatron | contains("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4")' <<<"$j" \
    >/dev/null || bad "JSON run_lines.megatron: $(jq -c .run_lines.megatron <<<"$j")"
# Interleaved (the default search): no uneven advice (Megatron's uneven
# split and interleaving are not estimated together), still a reason for b
txt=$("$PAR3DRUN" plan --cluster $C --model llama2-70b --global-batch 64 --recompute full 2>&1)
grep -q '^batch    micro-batch b=' <<<"$txt" || bad "70B: no micro-batch line"
grep -q 'decoder-last-pipeline' <<<"$txt" && bad "70B interleaved: uneven advice given"
# --micro-batch pinned: said so
txt=$("$PAR3DRUN" plan --cluster $C --model llama3-8b --global-batch 64 --micro-batch 2 2>&1)
grep -q '^batch    micro-batch b=2 (--micro-batch)' <<<"$txt" || bad "pinned micro-batch not said"
[ $fail = 0 ] && echo "ok: micro-batch reasons and uneven-stage advice"
exit $fail
