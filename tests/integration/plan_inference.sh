# SPDX-License-Identifier: BSD-3-Clause
# par3drun plan --inference (issue 45): the textbook 70B on 2 x 8 H100, which
# does not fit for training with selective recompute (plan_70b_2nodes.sh),
# serves from tp=4 replicas inside the nodes (weights 138 GB + a 43 GB KV
# cache per replica); 405B needs pp across the two nodes, and one node
# cannot hold it (exit 2). Figures are estimates; the test pins the
# placement and the memory arithmetic, not the milliseconds.
. "$(dirname "$0")/lib/estimate_lib.sh"
txt=$("$PAR3DRUN" plan --inference --cluster $C --model llama2-70b 2>&1) || bad "70B: exit $?"
grep -q '^serving  32 sequences in flight per replica, context 4096 tokens (prompt 2048); bf16 weights 138.0 GB, KV cache 328 KB per token = 42.9 GB per replica' <<<"$txt" ||
    bad "70B: serving line: $(grep '^serving' <<<"$txt")"
grep -q '^ 1   4   1         4 ' <<<"$txt" || bad "70B: row 1 is not tp=4 x 4 replicas: $(grep '^ 1 ' <<<"$txt")"
grep -q '^best     tp=4 pp=1 x 4 replicas: tp inside one NVLink domain, no pp' <<<"$txt" || bad "70B: best line"
grep -q 'for latency tp=8 pp=1 gives' <<<"$txt" || bad "70B: no latency alternative"
j=$("$PAR3DRUN" plan --inference --cluster $C --model llama2-70b --format json)
# KV cache per token: 2 (K, V) x 2 B x 80 layers x 8 KV heads x 128 = 327,680 B;
# per GPU at tp=4: 327680 x 4096 x 32 / 4 = 10,737,418,240 B; weights 2P/4
jq -e '.kv_bytes_per_token == 327680 and .layouts[0].kv_cache == 10737418240 and .layouts[0].tp == 4' <<<"$j" \
    >/dev/null || bad "70B JSON: $(jq -c '.layouts[0]' <<<"$j")"
jq -e '.layouts[0].ttft_seconds > 0 and .layouts[0].tpot_seconds > 0 and .layouts[0].tokens_per_second_per_gpu > 0' \
    <<<"$j" >/dev/null || bad "70B JSON: no latency figures"
# a longer context and a bigger batch need more memory per replica
j2=$("$PAR3DRUN" plan --inference --cluster $C --model llama2-70b --context-len 32768 --serve-batch 64 --format json)
jq -e '.layouts[0].tp * .layouts[0].pp > 4' <<<"$j2" >/dev/null || bad "70B at 32K x 64: replica not larger"
# 405B: one node cannot hold a replica, two nodes with pp across them
txt=$("$PAR3DRUN" plan --inference --cluster $C --model llama3-405b 2>&1) || bad "405B on 2 nodes: exit $?"
grep -q '^best     tp=8 pp=2 x 1 replica: pp=2 across nodes because' <<<"$txt" || bad "405B: $(grep '^best' <<<"$txt")"
"$PAR3DRUN" plan --inference --topology examples/topologies/dgx-h100.xml --model llama3-405b >/dev/null 2>&1
[ $? = 2 ] || bad "405B on one node: want exit 2"
# bad input
out=$("$PAR3DRUN" plan --inference --cluster $C --model llama2-70b --context-len 100 --prompt-len 200 2>&1)
[ $? = 2 ] && grep -q -- "--prompt-len 200 is longer than --context-len 100" <<<"$out" || bad "prompt > context: $out"
[ $fail = 0 ] && echo "ok: plan --inference"
exit $fail
