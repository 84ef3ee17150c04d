#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# plan places its best layouts with every bundled policy (the dry run's own
# code) and keeps, as --policy auto does, the placement without an
# error-level check with the fewest warning-level ones, then the fastest
# (docs/plan.md, "Which policy"). GPT-3 175B on 64 x 8 H100 in 4 racks:
# naive's estimate is a little faster (its rack-crossing pipelines leave
# DP inside a rack) but its own dry run warns PP_CROSSES_RACKS and advises
# megatron; so the policy line names naive's figure and its warning, the
# run line keeps megatron, and the pasted dry run says the same.
set -u -o pipefail
: "${PAR3DRUN:?}" "${P3D_SRC:?}"
C=$P3D_SRC/examples/clusters/64x-dgx-h100-4racks.json
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# continuation lines (9 spaces) joined, so a wrapped sentence greps whole
flat() { sed ':a;N;$!ba;s/\n         / /g'; }
txt=$("$PAR3DRUN" plan --cluster "$C" --model gpt3-175b --global-batch 512 --top 2 2>&1 | flat) || bad "plan exit $?"
pol=$(grep '^policy' <<<"$txt")
grep -Eq "naive [0-9.]+ s \(warns PP_CROSSES_RACKS\)" <<<"$pol" || bad "the policy line lacks naive's warning: $pol"
grep -q "The run line uses megatron .*naive's [0-9.]* s warns PP_CROSSES_RACKS, so it is not advised" <<<"$pol" ||
    bad "the policy line does not say why naive is not advised: $pol"
run=$(sed -n 's/^run the best:  //p' <<<"$txt")
grep -q -- "--policy" <<<"$run" && bad "the run line names a policy: $run"
row1=$(awk '$1 == "1" && NF > 10 { print $(NF-1); exit }' <<<"$txt")
# the pasted command: its step time is row #1's, no warning, and its note
# does not advise naive
out=$(eval "${run/par3drun/\"\$PAR3DRUN\"}" 2>&1)
step=$(awk '/^  step time/ { print $3; exit }' <<<"$out")
[ "$step" = "$row1" ] || bad "row #1 says $row1 s, its run line's dry run $step s"
grep -q "^Checks: 0 errors, 0 warnings" <<<"$out" || bad "the pasted dry run warns: $(grep '^Checks' <<<"$out")"
grep -q "or --policy auto uses it" <<<"$out" && bad "the pasted dry run advises another policy"
grep -q "but its placement warns PP_CROSSES_RACKS; megatron is kept" <<<"$out" ||
    bad "the pasted dry run does not say why naive is not used"
# --policy auto keeps megatron too (the same rule)
auto=$(eval "${run/par3drun/\"\$PAR3DRUN\"} --policy auto" 2>&1)
grep -q "policy auto chose megatron" <<<"$auto" || bad "--policy auto: $(grep 'policy auto' <<<"$auto")"
json=$("$PAR3DRUN" plan --cluster "$C" --model gpt3-175b --global-batch 512 --top 2 --format json 2>/dev/null)
[ "$(jq -r .policy.best <<<"$json")" = megatron ] || bad "JSON policy.best is not megatron"
jq -e '.policy.note | test("naive.*warns PP_CROSSES_RACKS")' <<<"$json" >/dev/null || bad "JSON policy.note lacks the warning"
jq -e '.layouts[0] | .placed and .policy == "megatron" and .warnings == [] and .errors == 0' <<<"$json" >/dev/null ||
    bad "JSON layouts[0] does not say who placed it: $(jq -c '.layouts[0] | {placed,policy,warnings}' <<<"$json")"
txt=$("$PAR3DRUN" plan --cluster "$C" --model llama2-70b --global-batch 512 --top 2 2>&1 | flat) || bad "plan 70b exit $?"
grep -q "^policy   layout #1 placed by each bundled policy: megatron [0-9.]* s, .*The run line uses megatron" \
    <<<"$txt" || bad "70b: $(grep -A1 '^policy' <<<"$txt")"
grep -q -- "--policy" <<<"$(sed -n 's/^run the best:  //p' <<<"$txt")" && bad "70b: the run line names a policy"
[ $fail = 0 ] && echo "ok: plan places its layouts with the bundled policies and advises the unwarned one"
exit $fail
