#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A running job shrinks past its last spare (docs/launch.md, "Elastic
# width"; issue 42): the bundled worker with checkpoints and --verify under
# --emulate on 4 nodes of 4 GPUs, tp2 pp2 dp4 (one replica a node), no
# spare, --min-dp 2, --global-batch 24 --micro-batch 2.
#  1. node n3's agent SIGKILLed mid-run: the job drops n3's replica and
#     goes on at dp 3 (4 micro-batches a replica instead of 3, the batch
#     kept), resumes from its checkpoint, ends 0 and --verify passes over
#     every step; events.jsonl has the shrink, the summary the width.
#  2. the same with --min-dp 4: a loss below D stops the job, exit 1, and
#     the message names D, the replicas left and what was lost.
. "$(dirname "$0")/lib/launch_common.sh"
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
C4=$T/four.json
printf '{"nodes": [{"name": "n[1-4]", "topology": "%s", "rack": "r1"}]}\n' \
  "$P3D_SRC/examples/topologies/pcie4.xml" >"$C4"
JOB=(--emulate --cluster "$C4" --tp 2 --pp 2 --dp 4 --global-batch 24 --micro-batch 2 --grace 3 --max-restarts 2
     --progress-interval 0.2)
# steps enough that the job is still running when the first checkpoint
# is there (the loss comes then); the ranks resume from the newest one
W=(--backend cpu --verify --layers 4 --hidden 16 --lr 1 --timeout 60 --steps 3000 --checkpoint-every 25
   --checkpoint-keep 2)

fresh() { T_DIR=$T/$1; rm -rf "$T_DIR"; mkdir -p "$T_DIR"; export T_DIR; }
run_bg() { # args... ; output in $T_DIR/out, exit code in $T_DIR/rc
  ( set +e; "$PAR3DRUN" "$@" >"$T_DIR/out" 2>&1; echo $? >"$T_DIR/rc" ) &
}
wait_rc() {
  local i
  for i in $(seq 1 6000); do [ -s "$T_DIR/rc" ] && { cat "$T_DIR/rc"; return 0; }; sleep 0.05; done
  cat "$T_DIR/out"; fail "the job did not end"
}
# the agent of node $1: the parent of a rank that runs there (its environment)
agent_of() {
  local f p
  for f in $(grep -lzx "P3D_NODE=$1" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; p=${p%/environ}
    grep -qzx "P3D_TEST_MARK=$MARK" "$f" 2>/dev/null || continue
    grep -qzx "RANK=[0-9]*" "$f" 2>/dev/null || continue
    awk '{print $4}' "/proc/$p/stat" 2>/dev/null && return 0
  done
  return 1
}
# waits for the first complete checkpoint in $1
wait_ckpt() {
  local i
  for i in $(seq 1 1200); do
    compgen -G "$1/step-*" >/dev/null && return 0
    [ -s "$T_DIR/rc" ] && { cat "$T_DIR/out"; fail "the job ended before its first checkpoint"; }
    sleep 0.05
  done
  fail "no checkpoint in $1"
}

# ---- 1. a loss past the last spare: the job shrinks to dp 3 -----------------
echo "== 1. a node lost, no spare: dp 4 -> 3" >&2
fresh shrink
run_bg "${JOB[@]}" --min-dp 2 --run-dir "$T_DIR/rd" -- "$P3D_WORKER" "${W[@]}" --checkpoint-dir "$T_DIR/ck"
wait_ckpt "$T_DIR/ck"
a=$(agent_of n3) || fail "no agent of n3 found"
kill -9 "$a"
rc=$(wait_rc)
[ "$rc" = 0 ] || { tail -40 "$T_DIR/out"; fail "exit $rc after a shrink, want 0"; }
grep -q 'verify: pass' "$T_DIR/out" || { tail -40 "$T_DIR/out"; fail "--verify did not pass across the shrink"; }
# the ranks' own lines (they may be dropped under load, which par3drun says)
if ! grep -q 'bytes of output dropped here' "$T_DIR/out"; then
  grep -q 'resuming at dp 3' "$T_DIR/out" || { grep -i resum "$T_DIR/out"; fail "the ranks did not resume at dp 3"; }
  grep -q '4 micro-batches' "$T_DIR/out" || fail "dp 3: not 4 micro-batches a replica"
fi
grep -q '^par3drun: .*no spare left: dropped replica 2: dp 4 -> 3 (world 16 -> 12), batch 24 kept' "$T_DIR/out" ||
  { grep '^par3drun' "$T_DIR/out"; fail "no shrink line"; }
grep -q '^par3drun: width: dp 4 -> 3 (node n3 lost)' "$T_DIR/out" || { grep '^par3drun' "$T_DIR/out"; fail "no width history"; }
python3 - "$T_DIR" <<'PY' || fail "placement / events check failed"
import json, sys
d = sys.argv[1]
ev = [json.loads(l) for l in open(d + "/rd/events.jsonl")]
kinds = [e["event"] for e in ev]
assert kinds[-1] == "end" and ev[-1]["exit_code"] == 0, kinds
s = [e for e in ev if e["event"] == "shrink"]
assert len(s) == 1, kinds
s = s[0]
assert (s["old_dp"], s["new_dp"], s["old_world"], s["new_world"]) == (4, 3, 16, 12), s
assert s["replicas_dropped"] == 1 and s["dropped"] == [2], s
assert (s["global_batch"], s["micro_batch"], s["micro_batches"], s["exact"]) == (24, 2, 4, True), s
st = [(e["from"], e["to"]) for e in ev if e["event"] == "state"]
assert ("running", "shrinking") in st and ("shrinking", "restarting") in st, st
run = [e for e in ev if e["event"] == "running" and e.get("restart") == 1]
assert run and run[0]["recovery_s"] > 0, ev
pl = json.load(open(d + "/rd/placement.json"))
assert pl["world_size"] == 12 and pl["mesh"]["dp"] == 3, (pl["world_size"], pl["mesh"])
assert "n3" not in {r["node"] for r in pl["ranks"]}
old = {r["rank"]: r for r in json.load(open(d + "/rd/placement.1.json"))["ranks"]}
# survivors keep their GPU and (tp, pp); only the dp index renumbers
for r in pl["ranks"]:
    o = [x for x in old.values() if (x["node"], x["gpu"]) == (r["node"], r["gpu"])]
    assert o and (o[0]["tp"], o[0]["pp"]) == (r["tp"], r["pp"]), (r, o)
res = json.load(open(d + "/rd/result.json"))
assert res["width"] == {"dp": 3, "full_dp": 4, "min_dp": 2, "shrinks": 1, "grows": 0}, res.get("width")
PY

# par3drun status: the width where the job ended, full and minimum
"$PAR3DRUN" status "$T_DIR/rd" >"$T_DIR/status" 2>&1 || { cat "$T_DIR/status"; fail "par3drun status failed"; }
grep -q '^width: dp 3 of 4 (--min-dp 2); dp 4 -> 3 (node n3 lost)$' "$T_DIR/status" ||
  { cat "$T_DIR/status"; fail "par3drun status does not show the width"; }

# ---- 2. below --min-dp: the job stops ---------------------------------------
echo "== 2. a loss below --min-dp stops the job" >&2
fresh below
run_bg "${JOB[@]}" --min-dp 4 --run-dir "$T_DIR/rd" -- "$P3D_WORKER" "${W[@]}" --checkpoint-dir "$T_DIR/ck"
wait_ckpt "$T_DIR/ck"
a=$(agent_of n2) || fail "no agent of n2 found"
kill -9 "$a"
rc=$(wait_rc)
[ "$rc" = 1 ] || { tail -30 "$T_DIR/out"; fail "exit $rc for a loss below --min-dp, want 1"; }
grep -q 'root cause: lost the agent of node n2.*cannot shrink:.*--min-dp is 4' "$T_DIR/out" ||
  { grep '^par3drun' "$T_DIR/out"; fail "the stop does not name D"; }
echo ok
