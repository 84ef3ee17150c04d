#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Self-healing jobs (docs/launch.md, "When a node dies"; docs/events.md):
# emulated 6 DGX H100 nodes in 2 racks, 4 used + 2 spares (one per rack).
#  1. the agent of a rack-2 node is SIGKILLed mid-run: the job ends 0, the
#     rack-2 spare took exactly its ranks on the same GPUs, no other rank
#     moved, pipelines stay rack-local, the worker resumed from its own
#     checkpoint, events.jsonl and the summary tell it;
#  2. two failures in a row, the second during the recovery from the first;
#  3. a --health-check failing on one node before the start excludes it,
#     and one failing after a rank failure excludes that node;
#  4. a rank stopped with SIGSTOP is found by --hang-timeout: restart in
#     place (every node healthy);
#  5. spares exhausted: a clear message, exit 1 (never a silent shrink);
#  6. with the bundled worker's --checkpoint-dir (when it has one):
#     tp2 pp2 --verify across a node loss.
# The worker here is a shell script that checkpoints its step in a file.
. "$(dirname "$0")/lib/launch_common.sh"
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml
C6=$T/six.json
printf '{"nodes": [{"name": "a[1-3]", "topology": "%s", "rack": "r1"},
                   {"name": "b[1-3]", "topology": "%s", "rack": "r2"}]}\n' "$TOPO" "$TOPO" >"$C6"

# w.sh: one line per start in $T_DIR/starts (rank node gpu restart agent-pid
# first-step), a step every 0.2 s saved to a checkpoint file, STEPS steps.
# SLOW_TERM=1: SIGTERM takes 1 s to end it (a slow shutdown).
cat >"$T/w.sh" <<'SH'
#!/bin/sh
ck="$T_DIR/ck/rank-$RANK"
step=$(cat "$ck" 2>/dev/null || echo 0)
[ -n "$SLOW_TERM" ] && trap 'sleep 1; exit 143' TERM
echo "$RANK $P3D_NODE $P3D_GPU $P3D_RESTART_COUNT $PPID $step" >>"$T_DIR/starts"
if [ -n "$FAIL_RANK" ] && [ "$RANK" = "$FAIL_RANK" ] && [ "$P3D_RESTART_COUNT" = 0 ]; then
  sleep 0.5; touch "$T_DIR/sick"; exit 3
fi
if [ -n "$HANG_RANK" ] && [ "$RANK" = "$HANG_RANK" ] && [ "$P3D_RESTART_COUNT" = 0 ]; then
  touch "$P3D_HEARTBEAT"; kill -STOP $$
fi
while [ "$step" -lt "$STEPS" ]; do
  sleep 0.2
  step=$((step + 1))
  echo "$step" >"$ck.tmp" && mv "$ck.tmp" "$ck"
done
SH
chmod +x "$T/w.sh"

# the agent PID of node $1 in generation $2 (from the workers' PPID)
agent_of() { awk -v n="$1" -v g="$2" '$2 == n && $4 == g {print $5; exit}' "$T_DIR/starts"; }
# waits until $1 lines of generation $2 are in starts
wait_starts() {
  local i
  for i in $(seq 1 600); do
    [ "$(awk -v g="$2" '$4 == g' "$T_DIR/starts" 2>/dev/null | wc -l)" -ge "$1" ] && return 0
    sleep 0.05
  done
  fail "only $(awk -v g="$2" '$4 == g' "$T_DIR/starts" | wc -l) of $1 ranks started generation $2"
}
fresh() { T_DIR=$T/$1; rm -rf "$T_DIR"; mkdir -p "$T_DIR/ck"; export T_DIR; }
run_bg() { # args... ; output in $T_DIR/out, exit code in $T_DIR/rc
  ( set +e; "$PAR3DRUN" "$@" >"$T_DIR/out" 2>&1; echo $? >"$T_DIR/rc" ) &
}
wait_rc() {
  local i
  for i in $(seq 1 3600); do [ -s "$T_DIR/rc" ] && { cat "$T_DIR/rc"; return 0; }; sleep 0.05; done
  cat "$T_DIR/out"; fail "the job did not end"
}
JOB=(--emulate --cluster "$C6" --tp 2 --pp 2 --dp 8 --spares 2 --grace 3)

# ---- 1. a rack-2 node lost mid-run ---------------------------------------
echo "== 1. a rack-2 node lost mid-run" >&2
fresh kill
STEPS=15 run_bg "${JOB[@]}" --max-restarts 2 --run-dir "$T_DIR/rd" -- "$T/w.sh"
wait_starts 32 0
sleep 0.5
kill -9 "$(agent_of b2 0)"
rc=$(wait_rc)
[ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "exit $rc after a node loss with spares left, want 0"; }
grep -q 'ranks 12-15,28-31 of b2 moved to spare b3 (same rack r2)' "$T_DIR/out" || { cat "$T_DIR/out"; fail "no replacement line"; }
grep -q '^par3drun: what happened: 1 node replaced, 1 restart, slowest recovery [0-9.]* s' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no summary"; }
python3 - "$T_DIR" <<'PY' || fail "placement / events check failed"
import json, sys
d = sys.argv[1]
old = {r["rank"]: r for r in json.load(open(d + "/rd/placement.1.json"))["ranks"]}
new_doc = json.load(open(d + "/rd/placement.json"))
new = {r["rank"]: r for r in new_doc["ranks"]}
moved = sorted(r for r in new if old[r]["node"] != new[r]["node"])
want = sorted(r for r in old if old[r]["node"] == "b2")
assert moved == want and len(want) == 8, (moved, want)
for r in moved:
    assert new[r]["node"] == "b3" and new[r]["gpu"] == old[r]["gpu"], (r, old[r], new[r])
for r in new:
    if r not in moved:
        assert (new[r]["node"], new[r]["gpu"]) == (old[r]["node"], old[r]["gpu"]), r
# pipelines still rack-local
for g in new_doc["groups"]["pp"]:
    racks = {new[r]["rack"] for r in g}
    assert len(racks) == 1, (g, racks)
assert new_doc["lost"] == ["b2"] and new_doc["spares"] == ["a3"], (new_doc.get("lost"), new_doc.get("spares"))
ev = [json.loads(l) for l in open(d + "/rd/events.jsonl")]
kinds = [e["event"] for e in ev]
assert kinds[0] == "start" and kinds[-1] == "end" and ev[-1]["exit_code"] == 0, kinds
f = [e for e in ev if e["event"] == "failure"]
assert f and f[0]["node"] == "b2" and f[0]["cause"] == "node lost", f
rep = [e for e in ev if e["event"] == "replace"]
assert len(rep) == 1 and rep[0]["failed"] == "b2" and rep[0]["spare"] == "b3" and rep[0]["moved_ranks"] == want, rep
run = [e for e in ev if e["event"] == "running" and e["restart"] == 1]
assert run and run[0]["recovery_s"] > 0, ev
assert all("ts" in e and "t" in e for e in ev)
PY
# every rank finished its steps; the moved ranks resumed from a checkpoint
for r in $(seq 0 31); do [ "$(cat "$T_DIR/ck/rank-$r")" = 15 ] || fail "rank $r ended at step $(cat "$T_DIR/ck/rank-$r")"; done
[ -n "$(awk '$4 == 1 && $2 == "b3" && $6 > 0' "$T_DIR/starts")" ] || fail "no moved rank resumed from its checkpoint"
[ -n "$(awk '$4 == 1 && $2 == "b2"' "$T_DIR/starts")" ] && fail "the lost node ran ranks again"

# ---- 2. two failures in a row, the second during the recovery -------------
echo "== 2. two failures in a row, the second during the recovery" >&2
fresh twice
STEPS=15 SLOW_TERM=1 run_bg "${JOB[@]}" --max-restarts 3 --run-dir "$T_DIR/rd" -- "$T/w.sh"
wait_starts 32 0
sleep 0.3
A1=$(agent_of a1 0)
kill -9 "$(agent_of b2 0)"
sleep 0.4 # the other agents are retiring (their workers take 1 s on SIGTERM)
kill -9 "$A1"
rc=$(wait_rc)
[ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "exit $rc after two losses with two spares, want 0"; }
grep -q 'what happened: 2 nodes replaced, 2 restarts' "$T_DIR/out" || { cat "$T_DIR/out"; fail "want 2 nodes replaced"; }
python3 - "$T_DIR" <<'PY' || { cat "$T_DIR/out"; fail "two-failure check failed"; }
import json, sys
d = sys.argv[1]
ev = [json.loads(l) for l in open(d + "/rd/events.jsonl")]
rep = {e["failed"]: e["spare"] for e in ev if e["event"] == "replace"}
assert rep == {"b2": "b3", "a1": "a3"}, rep
new = json.load(open(d + "/rd/placement.json"))
assert sorted(new["lost"]) == ["a1", "b2"] and "spares" not in new, new.get("spares")
assert {r["node"] for r in new["ranks"]} == {"a2", "a3", "b1", "b3"}
PY
[ -z "$(awk '$4 >= 1 && ($2 == "a1" || $2 == "b2")' "$T_DIR/starts")" ] || fail "a lost node ran ranks again"

# ---- 3. health checks ---------------------------------------------------
echo "== 3. health checks" >&2
fresh health
STEPS=3 run_bg "${JOB[@]}" --run-dir "$T_DIR/rd" --health-check 'test "$P3D_NODE" != b1' -- "$T/w.sh"
rc=$(wait_rc)
[ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "exit $rc with a failed health check and a spare, want 0"; }
grep -q '^par3drun: node b1 failed its --health-check (its process ended with exit code 1)$' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no health-check line"; }
[ -n "$(awk '$2 == "b1"' "$T_DIR/starts")" ] && fail "ranks ran on the node that failed its health check"
[ "$(awk '$2 == "b3"' "$T_DIR/starts" | wc -l)" = 8 ] || fail "b3 did not take b1's 8 ranks"
grep -q '"event": "health", "node": "b1", "ok": false' "$T_DIR/rd/events.jsonl" || fail "no health event"
# after a rank failure: rank 0 fails on a1 and a2 turns sick -> a2 excluded
fresh health2
STEPS=5 FAIL_RANK=0 run_bg "${JOB[@]}" --max-restarts 1 --run-dir "$T_DIR/rd" \
  --health-check 'test "$P3D_NODE" != a2 || test ! -e "$T_DIR/sick"' -- "$T/w.sh"
rc=$(wait_rc)
[ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "exit $rc, want 0 (a2 replaced after the failure)"; }
grep -q 'node a2 failed its --health-check after rank 0 failed (exit code 3)' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "the replacement does not name the health check"; }
[ "$(awk '$4 == 1 && $2 == "a3"' "$T_DIR/starts" | wc -l)" = 8 ] || fail "a3 did not take a2's ranks"

# the compound fault: rank 0 fails with a restart left and the check after
# it fails only on a spare (a3, running no rank): nothing moves for the
# spare, rank 0 is restarted in place and the job ends 0 (it used to hang)
fresh health_spare
STEPS=5 FAIL_RANK=0 run_bg "${JOB[@]}" --max-restarts 1 --run-dir "$T_DIR/rd" \
  --health-check 'test "$P3D_NODE" != a3 || test ! -e "$T_DIR/sick"' -- "$T/w.sh"
rc=$(wait_rc)
[ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "exit $rc, want 0 (only a spare failed its check: restart in place)"; }
grep -q '^par3drun: node a3 failed its --health-check' "$T_DIR/out" || { cat "$T_DIR/out"; fail "no a3 check line"; }
grep -q 'rank 0 failed (exit code 3); restarting all ranks (restart 1 of 1)' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "the failed rank was not restarted in place"; }
[ "$(awk '$4 == 1' "$T_DIR/starts" | wc -l)" = 32 ] || fail "not every rank ran again after the restart"
[ -z "$(awk '$2 == "a3"' "$T_DIR/starts")" ] || fail "the sick spare ran ranks"
grep -q '"from": "checking", "to": "restarting", "cause": "health-result"' "$T_DIR/rd/events.jsonl" ||
  { cat "$T_DIR/rd/events.jsonl"; fail "no checking -> restarting record"; }

# without spares a failed health check stops the job before anything runs
fresh health3
set +e
"$PAR3DRUN" --emulate --cluster "$C6" --tp 2 --pp 2 --dp 8 --grace 1 --health-check 'test "$P3D_NODE" != a2' \
  -- "$T/w.sh" >"$T_DIR/out" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$T_DIR/out"; fail "exit $rc with a failed health check and no spare, want 1"; }
grep -q 'root cause: node a2 failed its --health-check before the start; cannot replace it: no spare' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no message for a failed health check without spares"; }
[ ! -e "$T_DIR/starts" ] || fail "ranks started although a node failed its health check"

# ---- 4. a hung rank restarts in place -------------------------------------
echo "== 4. a hung rank restarts in place" >&2
fresh hang
STEPS=3 HANG_RANK=5 run_bg "${JOB[@]}" --max-restarts 1 --hang-timeout 0.7 --run-dir "$T_DIR/rd" -- "$T/w.sh"
rc=$(wait_rc)
[ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "exit $rc after a hang with a restart left, want 0"; }
grep -q '^par3drun: rank 5 on node a2 is hung' "$T_DIR/out" || { cat "$T_DIR/out"; fail "no hang line"; }
grep -q 'rank 5 failed (killed by signal 6 (ABRT)); restarting all ranks (restart 1 of 1)' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no in-place restart"; }
# (compared with the placement: a slow rank may not have started before the restart)
[ ! -e "$T_DIR/rd/placement.1.json" ] || fail "an in-place restart replaced the placement"
diff <(python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["ranks"]: print(r["rank"], r["node"], r["gpu"])' "$T_DIR/rd/placement.json") \
  <(awk '$4 == 1 {print $1, $2, $3}' "$T_DIR/starts" | sort -n) || fail "an in-place restart moved ranks"
grep -q '"kind": "in-place"' "$T_DIR/rd/events.jsonl" || fail "no in-place restart event"

# ---- 5. spares exhausted ----------------------------------------------------
echo "== 5. spares exhausted" >&2
fresh exhausted
STEPS=100 run_bg --emulate --cluster "$C6" --tp 2 --pp 2 --dp 8 --spares 1 --grace 2 --max-restarts 5 \
  --exclude a3 --run-dir "$T_DIR/rd" -- "$T/w.sh"
wait_starts 32 0
kill -9 "$(agent_of b1 0)"
wait_starts 32 1
kill -9 "$(agent_of a1 1)"
rc=$(wait_rc)
[ "$rc" = 1 ] || { cat "$T_DIR/out"; fail "exit $rc with no spare left, want 1"; }
grep -q 'root cause: lost the agent of node a1 .*; cannot replace it: no spare node left to take the ranks of a1' \
  "$T_DIR/out" || { cat "$T_DIR/out"; fail "the message does not say no spare is left"; }

# ---- 6. the bundled worker resumes bit-identically (--verify) after a node loss ------------
echo "== 6. the bundled worker resumes bit-identically (--verify) after a node loss" >&2
# the help text whole first: grep -q would end the pipe early, and under
# pipefail the worker's SIGPIPE would read as "no such option"
help=$("${P3D_WORKER:-/nonexistent}" --help 2>&1 || true)
if [ -z "${P3D_WORKER:-}" ] || ! grep -q -- --checkpoint-dir <<<"$help"; then
  fail "p3d-worker (P3D_WORKER=${P3D_WORKER:-unset}) is missing or has no --checkpoint-dir"
else
  fresh verify
  run_bg "${JOB[@]}" --max-restarts 2 --run-dir "$T_DIR/rd" -- "$P3D_WORKER" --backend cpu --layers 4 \
    --hidden 16 --global-batch 16 --micro-batches 2 --steps 200 --verify --checkpoint-dir "$T_DIR/wck" \
    --checkpoint-every 5
  for i in $(seq 1 1200); do [ -f "$T_DIR/wck/step-00000005/complete" ] && break; sleep 0.05; done
  [ -f "$T_DIR/wck/step-00000005/complete" ] || { cat "$T_DIR/out"; fail "no checkpoint of step 5"; }
  # the agent of b2: the parent of a p3d-worker of this job on b2 (the
  # run dir in its environment names the job)
  A=$(for p in $(pgrep -x p3d-worker || true); do
    grep -qzx "P3D_NODE=b2" "/proc/$p/environ" 2>/dev/null &&
      grep -qz "^P3D_PLACEMENT=$T_DIR/rd/" "/proc/$p/environ" 2>/dev/null && awk '{print $4}' "/proc/$p/stat"
  done | sort -u | head -1 || true) # set -e/pipefail: a non-matching last process is no error
  [ -n "$A" ] || fail "no worker of b2 found"
  kill -9 "$A"
  rc=$(wait_rc)
  [ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "the worker with --verify exit $rc after a node loss, want 0"; }
  grep -q 'moved to spare b3 (same rack r2)' "$T_DIR/out" || { cat "$T_DIR/out"; fail "no replacement"; }
  grep -q 'resuming from checkpoint step' "$T_DIR/out" || { cat "$T_DIR/out"; fail "the worker did not resume"; }
fi
echo ok
