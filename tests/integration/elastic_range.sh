#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The elastic range from the command line (issue 42): --min-dp, torchrun's
# --nnodes MIN:MAX, --global-batch/--micro-batch/--batch-tolerance.
#  - --dry-run --min-dp lists every width with its micro-batches, batch and
#    estimated step time, in the text and the JSON report;
#  - a range without a valid width, or figures that disagree, is refused
#    before anything starts (exit 2, the field named);
#  - launched (--emulate), every rank gets P3D_GLOBAL_BATCH,
#    P3D_MICRO_BATCH and P3D_MICRO_BATCHES from the first start on;
#  - --nnodes MIN:MAX with static agents on loopback: MAX agents run the
#    job, MIN becomes D = floor(MIN x dp / N), and --min-dp with a range is
#    refused on every node.
. "$(dirname "$0")/lib/launch_common.sh"
command -v jq >/dev/null || { echo "skip: jq missing"; exit 77; }
unset SLURM_JOB_NODELIST SLURM_JOB_ID PMIX_NAMESPACE

# expect RC PATTERN ARGS...: par3drun exits RC and stderr matches PATTERN
expect() {
  local want=$1 pat=$2 rc=0; shift 2
  "$PAR3DRUN" "$@" >"$T/out" 2>"$T/err" || rc=$?
  [ "$rc" = "$want" ] || { cat "$T/err"; fail "$*: exit $rc, want $want"; }
  grep -q -- "$pat" "$T/err" || { cat "$T/err"; fail "$*: stderr lacks '$pat'"; }
}

M=(--cluster "$CLUSTER" --tp 2 --pp 2)   # 16 GPUs: dp 4

# --- the dry run's widths ----------------------------------------------------
"$PAR3DRUN" --dry-run "${M[@]}" --min-dp 2 --global-batch 16 --model llama3-8b >"$T/text" 2>"$T/err" \
  || { cat "$T/err"; fail "dry run --min-dp 2 failed"; }
grep -q '^Elastic widths (--min-dp 2 of dp 4; global batch 16, micro-batch 1, tolerance 0%):' "$T/text" \
  || { cat "$T/text"; fail "no widths table"; }
# dp 3 does not divide 16: listed, refused, saying why
grep -Eq '^ +3 +12 +- +- +- +dp 3 x micro-batch 1 does not divide 16' "$T/text" || { cat "$T/text"; fail "dp 3 row"; }
grep -Eq '^ +2 +8 +8 +16 +[0-9.]+ s$' "$T/text" || { cat "$T/text"; fail "dp 2 row: m 8, batch 16, a step time"; }

"$PAR3DRUN" --dry-run "${M[@]}" --min-dp 2 --global-batch 16 --batch-tolerance 10 --model llama3-8b --format json \
  >"$T/json" 2>"$T/err" || { cat "$T/err"; fail "dry run json failed"; }
jq -e '.elastic | .full_dp == 4 and .min_dp == 2 and .global_batch == 16 and .batch_tolerance == 10
       and ([.widths[].dp] == [4,3,2])' "$T/json" >/dev/null || { jq .elastic "$T/json"; fail "elastic object"; }
# within 10 %: dp 3 runs m 5 (batch 15) and says so
jq -e '.elastic.widths[1] | .valid and (.exact | not) and .micro_batches == 5 and .batch == 15
       and (.note | test("within --batch-tolerance"))' "$T/json" >/dev/null || { jq .elastic "$T/json"; fail "dp 3"; }
# fewer replicas, same batch: every step takes longer at a smaller width
jq -e '.elastic.widths | .[0].step_time < .[1].step_time and .[1].step_time < .[2].step_time' "$T/json" \
  >/dev/null || { jq .elastic "$T/json"; fail "step times do not grow as the width shrinks"; }
# without --min-dp the report has no elastic member
"$PAR3DRUN" --dry-run "${M[@]}" --format json >"$T/json2" 2>/dev/null || fail "plain dry run"
jq -e 'has("elastic") | not' "$T/json2" >/dev/null || fail "elastic member without --min-dp"

# --- refusals, before anything starts ---------------------------------------
expect 2 "--min-dp 5 is larger than the job's data-parallel size 4" --dry-run "${M[@]}" --min-dp 5
expect 2 "--global-batch 10 at the full width dp 4" --dry-run "${M[@]}" --min-dp 2 --global-batch 10
expect 2 "could never shrink" --dry-run "${M[@]}" --min-dp 3 --global-batch 8
expect 2 "--micro-batches 3 disagrees" --dry-run "${M[@]}" --min-dp 2 --global-batch 16 --micro-batch 2 \
  --micro-batches 3
expect 2 "--batch-tolerance: 101 is out of range" --dry-run "${M[@]}" --batch-tolerance 101
expect 2 "--global-batch 10 at the full width" --emulate "${M[@]}" --min-dp 2 --global-batch 10 -- /bin/true
expect 2 "MIN is larger than MAX" --nnodes 4:2 -- /bin/true
# a range parses (MAX agents meet); it needs a rendezvous like any --nnodes
expect 2 "need --rdzv" --nnodes 2:4 -- /bin/true

# --- what the ranks get -----------------------------------------------------
dump='echo "batch $RANK $P3D_DP_SIZE ${P3D_GLOBAL_BATCH-unset} ${P3D_MICRO_BATCH-unset} ${P3D_MICRO_BATCHES-unset}"'
"$PAR3DRUN" --emulate "${M[@]}" --min-dp 2 --global-batch 24 --micro-batch 2 -- sh -c "$dump" >"$T/ranks" 2>&1 \
  || { cat "$T/ranks"; fail "emulated launch with --min-dp failed"; }
[ "$(grep -c 'batch [0-9]* 4 24 2 3$' "$T/ranks")" = 16 ] || { cat "$T/ranks"; fail "not 16 ranks with B 24 b 2 m 3"; }
# only --micro-batches: that figure alone, no global batch
"$PAR3DRUN" --emulate "${M[@]}" --micro-batches 5 -- sh -c "$dump" >"$T/ranks" 2>&1 || fail "plain launch"
[ "$(grep -c 'batch [0-9]* 4 unset unset 5$' "$T/ranks")" = 16 ] || { cat "$T/ranks"; fail "--micro-batches 5 alone"; }
# --- torchrun's --nnodes MIN:MAX, agents on loopback --------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
head -c 24 /dev/urandom | base64 >"$T/token"; chmod 600 "$T/token"
agents() { # N PREFIX ARGS...: N agents of one job; exit codes in $T/PREFIX.rc<i>
  local n=$1 pre=$2 port i; shift 2
  port=$(free_port)
  for ((i = 0; i < n; i++)); do
    ( set +e; timeout 120 "$PAR3DRUN" --node-rank $i --rdzv "static:127.0.0.1:$port" --rdzv-token-file "$T/token" \
        --topology "$P3D_SRC/examples/topologies/dgx-h100.xml" "$@" >"$T/$pre.out$i" 2>&1; echo $? >"$T/$pre.rc$i" ) &
  done
  wait
}
# 2 nodes of 8 GPUs, tp 2 pp 2: dp 4, MAX agents meet, the batch is the job's
agents 2 nn --nnodes 1:2 --tp 2 --pp 2 --global-batch 16 --micro-batch 1 -- sh -c "$dump"
for i in 0 1; do
  [ "$(cat "$T/nn.rc$i")" = 0 ] || { cat "$T/nn.out$i"; fail "--nnodes 1:2: node $i exit $(cat "$T/nn.rc$i")"; }
done
[ "$(cat "$T"/nn.out* | grep -c 'batch [0-9]* 4 16 1 4$')" = 16 ] || { cat "$T"/nn.out*; fail "--nnodes 1:2: not 16 ranks with m 4"; }
# 3 nodes, tp 8: dp 3; MIN 2 is D = floor(2 x 3 / 3) = 2, and B 3 has no width 2
agents 3 nn3 --nnodes 2:3 --tp 8 --global-batch 3 -- /bin/true
for i in 0 1 2; do
  [ "$(cat "$T/nn3.rc$i")" = 2 ] || { cat "$T/nn3.out$i"; fail "--nnodes 2:3, B 3: node $i exit $(cat "$T/nn3.rc$i"), want 2"; }
done
grep -q -- '--min-dp 2: no width from 2 to 2 has a valid batch' "$T/nn3.out0" || { cat "$T/nn3.out0"; fail "--nnodes 2:3 is not D 2"; }
# both spellings at once: refused on every node
agents 2 both --nnodes 1:2 --min-dp 2 --tp 2 --pp 2 -- /bin/true
for i in 0 1; do
  [ "$(cat "$T/both.rc$i")" = 2 ] || { cat "$T/both.out$i"; fail "--min-dp with --nnodes 1:2: node $i exit $(cat "$T/both.rc$i")"; }
  grep -q 'both set the elastic range' "$T/both.out$i" || { cat "$T/both.out$i"; fail "node $i: no message"; }
done
echo "ok"
