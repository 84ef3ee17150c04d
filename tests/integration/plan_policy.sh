#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# plan places its best layout with every bundled policy (the dry run's own
# code) and says up front when the default's estimate loses, and why; the
# run line then names the faster policy, and the pasted dry run agrees.
# GPT-3 175B on 64 x 8 H100 in 4 racks: megatron keeps pipelines inside a
# rack, which puts the DP all-reduce across racks; naive's rack-crossing
# pipelines leave DP inside a rack and its estimate is faster. Llama 2 70B
# on the same cluster: megatron's is not beaten.
set -u -o pipefail
: "${PAR3DRUN:?}" "${P3D_SRC:?}"
C=$P3D_SRC/examples/clusters/64x-dgx-h100-4racks.json
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# continuation lines (9 spaces) joined, so a wrapped sentence greps whole
flat() { sed ':a;N;$!ba;s/\n         / /g'; }
txt=$("$PAR3DRUN" plan --cluster "$C" --model gpt3-175b --global-batch 512 --top 2 2>&1 | flat) || bad "plan exit $?"
grep -q "^policy   layout #1 placed by each bundled policy: policy naive's estimate is .* faster than megatron's" \
    <<<"$txt" || bad "no up-front policy line naming naive: $(grep -A2 '^policy' <<<"$txt")"
grep -q "instead of .*XRACK" <<<"$txt" || bad "the policy line gives no reason (the DP link)"
run=$(sed -n 's/^run the best:  //p' <<<"$txt")
grep -q -- "--policy naive" <<<"$run" || bad "the run line does not name naive: $run"
# the pasted command: no other policy is faster there
out=$(eval "${run/par3drun/\"\$PAR3DRUN\"}" 2>&1 >/dev/null)
grep -q "estimate is .* faster than naive's" <<<"$out" && bad "the pasted dry run says another policy beats naive"
json=$("$PAR3DRUN" plan --cluster "$C" --model gpt3-175b --global-batch 512 --top 2 --format json 2>/dev/null)
[ "$(jq -r .policy.best <<<"$json")" = naive ] || bad "JSON policy.best is not naive"
jq -e '.policy.note | test("faster than megatron")' <<<"$json" >/dev/null || bad "JSON policy.note lacks the reason"
txt=$("$PAR3DRUN" plan --cluster "$C" --model llama2-70b --global-batch 512 --top 2 2>&1 | flat) || bad "plan 70b exit $?"
grep -q "^policy   layout #1 placed by each bundled policy: megatron's dry-run estimate [0-9.]* s is not beaten" \
    <<<"$txt" || bad "70b: $(grep -A1 '^policy' <<<"$txt")"
grep -q -- "--policy" <<<"$(sed -n 's/^run the best:  //p' <<<"$txt")" && bad "70b: the run line names a policy"
[ $fail = 0 ] && echo "ok: plan compares the bundled policies on its best layout"
exit $fail
