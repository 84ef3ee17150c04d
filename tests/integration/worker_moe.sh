#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p3d-worker's MoE layer (--experts/--top-k, issue 12) under par3drun
# --emulate with Megatron's expert grid (--ep carved out of dp): token
# dispatch/combine by all-to-all over the EP group, expert gradients summed
# over EDP; --verify against the one-process CPU reference must pass, and
# fail when the EDP all-reduce is broken (P3DW_BREAK, a test-only switch).
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
cluster=${P3D_SRC:?}/examples/clusters/2x-dgx-h100.json
[[ -f $cluster ]] || { echo "FAIL: $cluster is missing"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
moe=(--backend cpu --verify --json --experts 8 --top-k 2 --layers 4 --hidden 16 --steps 5 --timeout 30)
run() { # NAME par3drun-mesh... -- worker-args... -> exit code; output in $dir/NAME.out
    local name=$1
    shift
    timeout 300 "$PAR3DRUN" --emulate --cluster "$cluster" --grace 2 "$@" >"$dir/$name.out" 2>&1
}
verified() { grep -q '"summary":true.*"verify":"pass"' "$dir/$1.out"; }

# 1. Issue 12's mesh: tp 2 x ep 4 (dense dp 4, edp 1) on 2 emulated nodes of 4 ranks.
run tp2ep4 --nnodes 2 --nproc-per-node 4 --tp 2 --ep 4 --dp 4 -- "$P3D_WORKER" "${moe[@]}" \
    --global-batch 32 || { echo "FAIL: tp2 ep4 exited $?"; tail -20 "$dir/tp2ep4.out"; fail=1; }
verified tp2ep4 || { echo "FAIL: tp2 ep4 does not verify"; grep -E 'verify|error' "$dir/tp2ep4.out" | head; fail=1; }
grep -q '"mesh":{"tp":2,"pp":1,"dp":4,"ep":4,"etp":2,"edp":1}' "$dir/tp2ep4.out" ||
    { echo "FAIL: summary mesh"; grep summary "$dir/tp2ep4.out"; fail=1; }
# every rank moved tokens to other EP members, and the EP groups span both nodes
n=$(grep -c '"ep_alltoall":{"ops":[1-9][0-9]*,"bytes":[1-9]' "$dir/tp2ep4.out")
((n == 8)) || { echo "FAIL: $n of 8 ranks report EP all-to-all traffic"; fail=1; }
grep -q '"ep_a2a_bw_gbps":[0-9.e-]*[1-9]' "$dir/tp2ep4.out" || { echo "FAIL: no EP bandwidth in the summary"; fail=1; }
nodes=$(grep -o '"node_rank":[01],"tp":0,"pp":0,"dp":[0-9],"ep":[0-3]' "$dir/tp2ep4.out" | cut -d, -f1 | sort -u | wc -l)
((nodes == 2)) || { echo "FAIL: the tp-0 EP group is on $nodes node(s), want 2"; fail=1; }
((fail)) || echo "ok: tp2 ep4 on 2 nodes verifies; all ranks report EP all-to-all traffic"

# 2. pp 2 x ep 2 (edp 2), 2 micro-batches, --p2p strict: expert gradients
#    go through the EDP all-reduce; breaking it fails --verify.
small=(--tp 1 --pp 2 --ep 2 --dp 4 -- "$P3D_WORKER" "${moe[@]}" --experts 4 --global-batch 32
       --micro-batches 2)
run pp2ep2 "${small[@]}" --p2p strict || { echo "FAIL: pp2 ep2 exited $?"; tail -20 "$dir/pp2ep2.out"; fail=1; }
verified pp2ep2 || { echo "FAIL: pp2 ep2 does not verify"; fail=1; }
grep -q '"edp_allreduce":{"ops":5,' "$dir/pp2ep2.out" || { echo "FAIL: no EDP all-reduce per step"; fail=1; }
P3DW_BREAK=edp-allreduce run broken "${small[@]}"
rc=$?
((rc == 1)) && grep -q -- '--verify FAILED' "$dir/broken.out" ||
    { echo "FAIL: a skipped EDP all-reduce was not caught (exit $rc)"; fail=1; }
((fail)) || echo "ok: pp2 ep2 edp2 verifies under --p2p strict; a skipped EDP all-reduce fails --verify"

# 3. Checkpoints hold the expert shards: killed before step 4, resumed, same losses.
ck=(--nnodes 2 --nproc-per-node 4 --tp 2 --ep 4 --dp 4 -- "$P3D_WORKER" "${moe[@]}" --global-batch 32
    --checkpoint-every 2)
run ckref "${ck[@]}" --checkpoint-dir "$dir/ck-ref" || { echo "FAIL: MoE checkpoint reference run"; fail=1; }
P3DW_DIE=6:4 run ckdie "${ck[@]}" --checkpoint-dir "$dir/ck" && { echo "FAIL: killed MoE job exited 0"; fail=1; }
run ckres "${ck[@]}" --checkpoint-dir "$dir/ck" || { echo "FAIL: MoE resume exited $?"; fail=1; }
grep -q 'resuming from checkpoint step 2' "$dir/ckres.out" || { echo "FAIL: MoE run did not resume at 2"; fail=1; }
steps() { grep -o '"step":[3-5],"loss":[0-9.e+-]*' "$dir/$1.out"; }
[[ $(steps ckres | wc -l) == 3 ]] && diff <(steps ckref) <(steps ckres) >/dev/null ||
    { echo "FAIL: MoE losses after resume differ"; diff <(steps ckref) <(steps ckres); fail=1; }
# the weights of a shard: the generation the step's marker names, without
# the 200-byte header (which holds the generation; docs/worker.md)
weights() { # CKDIR STEP RANK
    local s g
    s="$1/$(printf step-%08d "$2")"
    g=$(sed -n 's/^generation //p' "$s/complete")
    tail -c +201 "$s/$(printf rank-%05d.gen-%s.bin "$3" "$g")"
}
cmp -s <(weights "$dir/ck-ref" 5 6) <(weights "$dir/ck" 5 6) && [ -n "$(weights "$dir/ck" 5 6 | head -c 1)" ] ||
    { echo "FAIL: MoE final shard of rank 6 differs"; fail=1; }
((fail)) || echo "ok: MoE run killed before step 4 resumes at 2 with identical losses and weights"

# 4. Refusals, exit 2: experts not divisible by ep; etp != tp.
run badexp --tp 1 --ep 4 --dp 4 -- "$P3D_WORKER" "${moe[@]}" --experts 6 --global-batch 16
rc=$?
((rc == 2)) && grep -q -- '--experts 6: must be divisible by the expert-parallel size ep=4' "$dir/badexp.out" ||
    { echo "FAIL: --experts 6 with ep 4: exit $rc"; tail -3 "$dir/badexp.out"; fail=1; }
run badetp --tp 2 --etp 1 --ep 4 --dp 2 -- "$P3D_WORKER" "${moe[@]}" --global-batch 16
rc=$?
((rc == 2)) && grep -q 'needs etp = tp' "$dir/badetp.out" ||
    { echo "FAIL: etp 1 with tp 2: exit $rc"; tail -3 "$dir/badetp.out"; fail=1; }
((fail)) || echo "ok: --experts 6 with ep 4 and etp != tp are refused (exit 2)"
exit $fail
