#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The table p3d-worker prints at the end (issue 27), under the real
# launcher (par3drun --emulate, both nodes of the 2-node cluster on this
# host): each row names its node as the cluster does (P3D_NODE), not by
# node rank; a throughput line gives samples/s and tokens/s from the
# worker's --global-batch and --seq-len and the slowest rank's step; a
# group of one has "-" for its bandwidth, never "0.000 GB/s".
set -u -o pipefail
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
: "${PAR3DRUN:?}" "${P3D_SRC:?}"
cluster=$P3D_SRC/examples/clusters/2x-dgx-h100.json
[[ -f $cluster ]] || { echo "FAIL: $cluster is missing"; exit 1; }
unset SLURM_JOB_NODELIST
fail=0
bad() { echo "FAIL: $*"; fail=1; }
strip() { sed 's/^\[r[0-9]* [^]]*\] //'; } # the launcher's rank prefix
run() { timeout 300 "$PAR3DRUN" --emulate --cluster "$cluster" "$@" 2>&1 | strip; }

# 1. 16 ranks over both nodes: tp 2 x pp 2 x dp 4, 4 tokens per sample
out=$(run --tp 2 --pp 2 --dp 4 -- "$P3D_WORKER" --backend cpu --layers 4 --hidden 16 \
    --global-batch 32 --seq-len 4 --micro-batches 2 --steps 2) || bad "16 ranks: exit $?"
rows=$(awk 'f && /^ *[0-9]+ / { print } /^ rank +node/ { f = 1 } /^throughput/ { f = 0 }' <<<"$out")
[ "$(wc -l <<<"$rows")" = 16 ] || bad "16 ranks: $(wc -l <<<"$rows") table rows: $out"
nodes=$(awk '{ print $2 }' <<<"$rows" | sort -u | tr '\n' ' ')
[ "$nodes" = "dgx-h100-01 dgx-h100-02 " ] || bad "16 ranks: node column is '$nodes', not the cluster's names"
# megatron's order: pp outermost, each stage's tp x dp = 8 ranks fill one
# node, and dp 2-3 of a stage are on the second node (rank 4 is dp 2)
[ "$(awk '$1 == 4 { print $2 }' <<<"$rows")" = dgx-h100-02 ] || bad "rank 4 is not on dgx-h100-02: $rows"
grep -q "GB/s\|MB/s\|kB/s" <<<"$rows" || bad "16 ranks: no bandwidth in the rows"
grep -q " - " <<<"$rows" && bad "16 ranks: a '-' bandwidth where every group has 2 or more ranks"
tl=$(grep '^throughput:' <<<"$out") || bad "16 ranks: no throughput line"
read -r sps tps ms < <(sed -E 's/^throughput: ([0-9.]+) samples\/s, ([0-9.]+) tokens\/s .*step ([0-9.]+) ms\)$/\1 \2 \3/' <<<"$tl")
slow=$(awk 'BEGIN { m = 0 } $6 > m { m = $6 } END { print m }' <<<"$rows")
awk -v s="$sps" -v t="$tps" -v ms="$ms" -v slow="$slow" 'BEGIN {
    ok = (ms == slow) && (s > 0) && (t / s > 3.99 && t / s < 4.01) && (s * ms / 1000 > 31.5 && s * ms / 1000 < 32.5)
    exit !ok }' || bad "16 ranks: throughput '$tl' is not 32 samples x 4 tokens over the slowest step ($slow ms)"

# 2. groups of one: tp 1, pp 1, dp 2: tp and pp bandwidths are "-", dp's a figure
out=$(run --tp 1 --pp 1 --dp 2 -- "$P3D_WORKER" --backend cpu --layers 4 --hidden 16 \
    --global-batch 32 --steps 2) || bad "dp 2: exit $?"
rows=$(awk 'f && /^ *[0-9]+ / { print } /^ rank +node/ { f = 1 } /^throughput/ { f = 0 }' <<<"$out")
[ "$(wc -l <<<"$rows")" = 2 ] || bad "dp 2: not 2 rows: $out"
awk '!($7 == "-" && $8 == "-" && $9 ~ /^[0-9.]+$/ && $10 ~ /^[kMG]B\/s$/) { exit 1 }' <<<"$rows" ||
    bad "dp 2: tp/pp not '-' or dp without a figure: $rows"
grep -q "0\.000 GB/s" <<<"$out" && bad "dp 2: a 0.000 GB/s cell"
grep -q '^throughput: [0-9.]* samples/s, [0-9.]* tokens/s (global batch 32 of 1 token each' <<<"$out" ||
    bad "dp 2: throughput line: $(grep throughput <<<"$out")"

# 3. the JSON: each rank's node, the summary's throughput
out=$(run --tp 2 --pp 1 --dp 1 -- "$P3D_WORKER" --backend cpu --layers 4 --hidden 16 \
    --global-batch 8 --seq-len 16 --steps 2 --json) || bad "json: exit $?"
grep -q '{"rank":1,"node_rank":0,.*"node":"dgx-h100-01","backend"' <<<"$out" || bad "json: rank 1 without its node"
grep '"summary":true' <<<"$out" | jq -e '.seq_len == 16 and .samples_per_s > 0 and
    (.tokens_per_s / .samples_per_s | . > 15.9 and . < 16.1)' >/dev/null ||
    bad "json summary: $(grep '"summary"' <<<"$out")"

# 4. without par3drun's P3D_NODE the host's own name
h=$(hostname)
out=$(env -u P3D_NODE RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NODE_RANK=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + RANDOM % 20000)) \
    "$P3D_WORKER" --backend cpu --layers 2 --hidden 8 --global-batch 4 --steps 1 2>&1)
grep -Eq "^ +0  $h " <<<"$out" || bad "no P3D_NODE: the row does not name $h: $out"
# 5. bad input: exit 2 naming the option and what is expected
err=$("$P3D_WORKER" --seq-len 0 2>&1); rc=$?
[ $rc = 2 ] && grep -q -- "--seq-len '0': expected a number in \[1, 65536\]" <<<"$err" || bad "--seq-len 0: exit $rc: $err"
err=$(RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NODE_RANK=0 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$((20000 + RANDOM % 20000)) "$P3D_WORKER" --backend cpu --global-batch 16777216 --seq-len 2 \
    --steps 1 2>&1); rc=$?
[ $rc = 2 ] && grep -q -- "--global-batch 16777216 x --seq-len 2 = 33554432 rows per step: at most 16777216" <<<"$err" ||
    bad "rows over 2^24: exit $rc: $err"
[ $fail = 0 ] && echo "ok: the worker's table names hosts, gives samples/s and tokens/s, '-' for a group of one"
exit $fail
