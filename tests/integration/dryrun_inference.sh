# SPDX-License-Identifier: BSD-3-Clause
# par3drun --dry-run --inference (issue 45): the dry run places a serving
# layout and reports its serving figures (weights + KV cache, TTFT, TPOT,
# tokens/s per GPU) with plan --inference's functions: the textbook 70B at
# tp8 pp2 on 2 x 8 H100 does not fit for training (exit 2) but serves
# (exit 0); the figures equal plan --inference's for the same replica; a
# replica too small for the weights is SERVING_DOES_NOT_FIT; a prompt longer
# than the context is refused (exit 2).
. "$(dirname "$0")/lib/estimate_lib.sh"
M=(--cluster $C --model llama2-70b)
train=$("$PAR3DRUN" --dry-run "${M[@]}" --tp 8 --pp 2 2>&1) && bad "70B tp8 pp2 fits for training?"
grep -q 'MODEL_DOES_NOT_FIT' <<<"$train" || bad "training: no MODEL_DOES_NOT_FIT"
grep -q '^Serving estimate' <<<"$train" && bad "a serving section without --inference"
txt=$("$PAR3DRUN" --dry-run --inference "${M[@]}" --tp 8 --pp 2 2>&1) || bad "70B serving tp8 pp2: exit $?"
grep -q '^Serving estimate for llama2-70b' <<<"$txt" || bad "no serving section"
grep -q 'one replica = tp 8 x pp 2 GPUs, 1 replica; 32 sequences in flight per replica, context 4096 tokens (prompt 2048)' \
    <<<"$txt" || bad "replica line: $(grep 'one replica' <<<"$txt")"
grep -q 'MODEL_DOES_NOT_FIT' <<<"$txt" && bad "training's memory check judged a serving layout"
# KV cache per GPU: 2 (K, V) x 2 B x 80 layers x 8 KV heads x 128 = 327,680 B a token,
# x 4096 tokens x 32 sequences / tp 8 / pp 2 = 2,684,354,560 B
j=$("$PAR3DRUN" --dry-run --inference "${M[@]}" --tp 8 --pp 2 --format json) || bad "JSON: exit $?"
jq -e '.metrics.inference | .kv_bytes_per_token == 327680 and .kv_cache == 2684354560 and .tp == 8 and .pp == 2
       and .replicas == 1 and .fits and .total == .weights + .kv_cache' <<<"$j" >/dev/null ||
    bad "JSON: $(jq -c .metrics.inference <<<"$j")"
# the same functions as plan --inference: its tp=4 row equals the dry run at tp4 (dp 4)
d=$("$PAR3DRUN" --dry-run --inference "${M[@]}" --tp 4 --pp 1 --context-len 8192 --prompt-len 1000 --serve-batch 16 \
    --format json | jq -c '.metrics.inference | [.replicas, .weights, .kv_cache, .ttft_seconds, .tpot_seconds,
    .tokens_per_second_per_gpu]')
p=$("$PAR3DRUN" plan --inference "${M[@]}" --context-len 8192 --prompt-len 1000 --serve-batch 16 --format json |
    jq -c '.layouts[] | select(.tp == 4 and .pp == 1) | [.replicas, .weights, .kv_cache, .ttft_seconds,
    .tpot_seconds, .tokens_per_second_per_gpu]')
[ -n "$d" ] && [ "$d" = "$p" ] || bad "dry run $d != plan $p"
# two GPUs cannot hold 138 GB of weights: error, exit 2, the figures still shown
out=$("$PAR3DRUN" --dry-run --inference "${M[@]}" --tp 2 --pp 1 2>&1)
rc=$?
[ $rc = 2 ] || bad "tp2: exit $rc, expected 2"
grep -q 'SERVING_DOES_NOT_FIT' <<<"$out" || bad "tp2: no SERVING_DOES_NOT_FIT"
grep -q 'the serving layout does NOT fit' <<<"$out" || bad "tp2: no note under the table"
out=$("$PAR3DRUN" --dry-run --inference "${M[@]}" --tp 8 --pp 2 --context-len 100 --prompt-len 200 2>&1)
rc=$?
[ $rc = 2 ] || bad "prompt > context: exit $rc, expected 2"
grep -q 'SERVING_UNAVAILABLE' <<<"$out" && grep -q 'prompt-len 200 is longer than --context-len 100' <<<"$out" ||
    bad "prompt > context: $(grep -i prompt <<<"$out" | head -2)"
exit $fail
