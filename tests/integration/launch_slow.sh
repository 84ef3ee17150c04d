#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Slow nodes (docs/launch.md, "When a node is slow"; docs/events.md):
# emulated 5 DGX H100 nodes, 4 used + 1 spare, tp2 pp2 dp8, whose ranks
# write progress lines to $P3D_HEARTBEAT (the shell worker below: a
# synchronous step every 0.2 s, busy 60 ms +-20%, 3x on $SLOW_NODE).
#  1. --slow-node report: n3 is named within --slow-windows intervals,
#     once, with its peers; nothing moves; exit 0; `par3drun status`
#     shows it first among the slowest nodes;
#  2. --slow-node replace: after the ranks' next checkpoint n3's ranks move
#     to the spare n5 on the same GPUs, no other rank moves, they resume
#     from that checkpoint, exit 0, events.jsonl tells it;
#  3. no slow node (+-20% noise per rank, nodes 10% apart): none reported;
#  4. a rank writing garbage: one warning for it, then ignored;
#  5. a bad --slow-node value, a bad `par3drun status` directory: exit 2;
#  6. the bundled worker writes the progress line after every step, with
#     its newest checkpoint;
#  7. the bundled worker with one slow node (P3DW_STALL, a test switch: 10
#     ms of own work per step, 30 ms on n3): n3 is named, and the others'
#     busy time leaves out the time they wait for n3 in collectives.
. "$(dirname "$0")/lib/launch_common.sh"
C5=$T/five.json
printf '{"nodes": [{"name": "n[1-5]", "topology": "%s", "rack": "r1"}]}\n' \
  "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$C5"

cat >"$T/w.sh" <<'SH'
#!/bin/sh
ck="$T_DIR/ck/rank-$RANK"
step=$(cat "$ck" 2>/dev/null || echo 0)
echo "$RANK $P3D_NODE $P3D_GPU $P3D_RESTART_COUNT $step" >>"$T_DIR/starts"
base=60
[ "$P3D_NODE" = "$SLOW_NODE" ] && base=$((60 * ${SLOW_X:-3}))
case "$P3D_NODE" in "$FAST_NODE") base=$((base * 90 / 100)) ;; "$SLUG_NODE") base=$((base * 110 / 100)) ;; esac
ckpt=$step
while [ "$step" -lt "$STEPS" ]; do
  sleep 0.2
  step=$((step + 1))
  if [ $((step % ${CKPT_EVERY:-100000})) = 0 ]; then echo "$step" >"$ck.tmp" && mv "$ck.tmp" "$ck"; ckpt=$step; fi
  noise=$(( (step * 7919 + RANK * 104729) % 41 - 20 ))
  ms=$(( base * (100 + noise) / 100 ))
  if [ "$RANK" = "${GARBAGE_RANK:--1}" ]; then
    echo "step=$step busy=fast" >"$P3D_HEARTBEAT.tmp"
  else
    printf 'step=%d busy=%d.%03d ckpt=%d\n' "$step" $((ms / 1000)) $((ms % 1000)) "$ckpt" >"$P3D_HEARTBEAT.tmp"
  fi
  mv "$P3D_HEARTBEAT.tmp" "$P3D_HEARTBEAT"
done
SH
chmod +x "$T/w.sh"

fresh() { T_DIR=$T/$1; rm -rf "$T_DIR"; mkdir -p "$T_DIR/ck"; export T_DIR; }
JOB=(--emulate --cluster "$C5" --tp 2 --pp 2 --dp 8 --spares 1 --grace 2 --progress-interval 0.2)
run() { # args...; output in $T_DIR/out, exit code in $T_DIR/rc
  set +e
  timeout 120 "$PAR3DRUN" "$@" >"$T_DIR/out" 2>&1
  echo $? >"$T_DIR/rc"
  set -e
}

# ---- 1. report ---------------------------------------------------------------
echo "== 1. --slow-node report names the slow node" >&2
fresh report
STEPS=20 SLOW_NODE=n3 run "${JOB[@]}" --run-dir "$T_DIR/rd" -- "$T/w.sh"
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc"), want 0"; }
grep -Eq '^par3drun: node n3 is [2-4]\.[0-9]{2}x slower than its 3 peers \(busy 0\.[0-9]{2} s vs 0\.0[5-7] s per step, pp stages 0-1\) for 0\.6 s$' \
  "$T_DIR/out" || { cat "$T_DIR/out"; fail "no slow-node line for n3"; }
[ "$(grep -c 'slower than' "$T_DIR/out")" = 1 ] || { cat "$T_DIR/out"; fail "want exactly one slow-node line"; }
python3 - "$T_DIR" <<'PY' || { cat "$T_DIR/out"; fail "events check failed"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1] + "/rd/events.jsonl")]
s = [e for e in ev if e["event"] == "slow"]
assert len(s) == 1, s
s = s[0]
assert s["node"] == "n3" and s["peers"] == 3 and s["windows"] == 3 and s["action"] == "report", s
assert 2.0 <= s["ratio"] <= 4.0 and s["work"] == "pp stages 0-1", s
# within --slow-windows intervals (windows, seconds) of the first steps (a
# step every 0.2 s; slack for the first read and a loaded machine)
assert s["seconds"] == 0.6 and s["step"] <= 8, s
assert not [e for e in ev if e["event"] in ("replace", "restart")], ev
assert ev[-1]["event"] == "end" and ev[-1]["exit_code"] == 0
PY
[ -z "$(awk '$4 > 0' "$T_DIR/starts")" ] || fail "report only, yet ranks restarted"
# the status view: n3 first among the slowest, marked slow
"$PAR3DRUN" status "$T_DIR/rd" >"$T_DIR/status" || fail "par3drun status exit $?"
grep -q '^job [0-9a-f]*: generation 0 (0 restarts), state done' "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: no job line"; }
grep -q '^nodes: 5, 4 reporting progress, 1 spare left, 0 lost$' "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: nodes"; }
grep -q '^slow nodes this generation: 1 (n3)$' "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: slow nodes"; }
awk '/^  node /{getline; print $1, $NF; exit}' "$T_DIR/status" | grep -qx 'n3 (slow)' ||
  { cat "$T_DIR/status"; fail "status: n3 is not first among the slowest"; }

# ---- 2. replace at the next checkpoint ------------------------------------------
echo "== 2. --slow-node replace moves the slow node's ranks to the spare" >&2
fresh replace
STEPS=25 CKPT_EVERY=5 SLOW_NODE=n3 run "${JOB[@]}" --slow-node replace --run-dir "$T_DIR/rd" -- "$T/w.sh"
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc"), want 0"; }
grep -Eq '^par3drun: node n3: its ranks move to a spare after their next checkpoint \(newer than step (0|5|10)\)' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no 'move at the next checkpoint' line"; }
grep -Eq "replaced after its ranks' checkpoint of step (5|10|15); ranks 8-11,24-27 of n3 moved to spare n5" "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no replacement at the checkpoint"; }
python3 - "$T_DIR" <<'PY' || { cat "$T_DIR/out"; fail "placement / events check failed"; }
import json, sys
d = sys.argv[1]
old = {r["rank"]: r for r in json.load(open(d + "/rd/placement.1.json"))["ranks"]}
new = {r["rank"]: r for r in json.load(open(d + "/rd/placement.json"))["ranks"]}
moved = sorted(r for r in new if old[r]["node"] != new[r]["node"])
want = sorted(r for r in old if old[r]["node"] == "n3")
assert moved == want and len(want) == 8, (moved, want)
for r in new:
    if r in moved:
        assert new[r]["node"] == "n5" and new[r]["gpu"] == old[r]["gpu"], r
    else:
        assert (new[r]["node"], new[r]["gpu"]) == (old[r]["node"], old[r]["gpu"]), r
ev = [json.loads(l) for l in open(d + "/rd/events.jsonl")]
kinds = [e["event"] for e in ev]
i = kinds.index("slow")
j = kinds.index("replace")
assert i < j and ev[i]["node"] == "n3" and ev[i]["action"] == "replace", ev[i]
rep = ev[j]
assert rep["failed"] == "n3" and rep["spare"] == "n5" and rep["moved_ranks"] == want, rep
assert "checkpoint of step %d" % (ev[i]["ckpt"] + 5) in rep["reason"], (ev[i], rep)
assert kinds.count("slow") == 1 and kinds.count("replace") == 1, kinds
assert ev[-1]["event"] == "end" and ev[-1]["exit_code"] == 0 and ev[-1]["replaced"] == 1, ev[-1]
PY
# the moved ranks resumed from the checkpoint on n5; n3 ran nothing after
[ "$(awk '$4 == 1 && $2 == "n5" && $5 >= 5' "$T_DIR/starts" | wc -l)" = 8 ] ||
  { cat "$T_DIR/starts"; fail "the moved ranks did not resume from a checkpoint on n5"; }
[ -z "$(awk '$4 == 1 && $2 == "n3"' "$T_DIR/starts")" ] || fail "the slow node ran ranks again"
for r in $(seq 0 31); do [ "$(cat "$T_DIR/ck/rank-$r" 2>/dev/null)" = 25 ] || fail "rank $r did not finish"; done
"$PAR3DRUN" status "$T_DIR/rd" >"$T_DIR/status" || fail "par3drun status exit $?"
grep -q '^job [0-9a-f]*: generation 1 (1 restart), state done' "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: generation"; }
grep -q '^nodes: 5, 4 reporting progress, 0 spares left, 1 lost (n3)$' "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: nodes"; }
grep -Eq '^steps: 2[0-5] to 2[0-5]$' "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: steps"; }
grep -Eq '^slowest recovery: respawn [0-9.]+ s, training resumed [0-9.]+ s \(after the failure was seen\)$' \
  "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: the recovery's two figures"; }

# ---- 3. no slow node -------------------------------------------------------------
echo "== 3. +-20% noise, nodes 10% apart: no slow node" >&2
fresh none
STEPS=20 FAST_NODE=n2 SLUG_NODE=n4 run "${JOB[@]}" --slow-node replace --run-dir "$T_DIR/rd" -- "$T/w.sh"
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc"), want 0"; }
grep -q 'slower than' "$T_DIR/out" && { cat "$T_DIR/out"; fail "a false positive"; }
grep -q '"event": "slow"' "$T_DIR/rd/events.jsonl" && fail "a slow event without a slow node"
[ -z "$(awk '$4 > 0' "$T_DIR/starts")" ] || fail "ranks restarted without a slow node"

# ---- 4. garbage in a progress file ----------------------------------------------
echo "== 4. a rank writing garbage is warned once, then ignored" >&2
fresh garbage
STEPS=10 GARBAGE_RANK=5 run "${JOB[@]}" --run-dir "$T_DIR/rd" -- "$T/w.sh"
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc"), want 0"; }
[ "$(grep -c '^par3drun: warning: rank 5: its progress file ' "$T_DIR/out")" = 1 ] ||
  { cat "$T_DIR/out"; fail "want one warning for rank 5"; }
grep -q "holds 'step=[0-9]* busy=fast?'; expected one line 'step=N busy=SECONDS\[ ckpt=STEP\]'" "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "the warning does not say what was found and what is expected"; }
[ "$(grep -c 'warning: rank' "$T_DIR/out")" = 1 ] || fail "warnings for other ranks"

# ---- 5. bad option value -----------------------------------------------------------
echo "== 5. --slow-node with a bad value" >&2
fresh badopt
run "${JOB[@]}" --slow-node move -- "$T/w.sh"
[ "$(cat "$T_DIR/rc")" = 2 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc") for --slow-node move, want 2"; }
grep -q -- "--slow-node: expected report or replace, got 'move'" "$T_DIR/out" || { cat "$T_DIR/out"; fail "no message"; }
# par3drun status: a directory that is none, or holds no view: exit 2, saying what is expected
run status "$T_DIR/nonexistent"
[ "$(cat "$T_DIR/rc")" = 2 ] && grep -q "status: $T_DIR/nonexistent: No such file or directory; expected a job's run directory" \
  "$T_DIR/out" || { cat "$T_DIR/out"; fail "status of a missing directory"; }
run status "$T_DIR"
[ "$(cat "$T_DIR/rc")" = 2 ] && grep -q "status: $T_DIR/status.txt: No such file or directory; the job writes it once its ranks report progress" \
  "$T_DIR/out" || { cat "$T_DIR/out"; fail "status of a directory without a view"; }
run status
[ "$(cat "$T_DIR/rc")" = 2 ] && grep -q 'status: expected a run directory: par3drun status RUN_DIR' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "status without a directory"; }

# ---- 6. the bundled worker's progress lines ------------------------------------------
echo "== 6. p3d-worker writes its progress line" >&2
[ -n "${P3D_WORKER:-}" ] || fail "P3D_WORKER is unset"
fresh worker
# the heartbeat files go with the job: KEEP_LAST runs the worker and then
# copies each rank's last line to $T_DIR/last
KEEP_LAST=(sh -c '"$@"; rc=$?; cp "$P3D_HEARTBEAT" "$LAST/rank-$RANK"; exit $rc' sh)
mkdir -p "$T_DIR/last"
run "${JOB[@]}" --run-dir "$T_DIR/rd" --env "LAST=$T_DIR/last" -- "${KEEP_LAST[@]}" "$P3D_WORKER" --backend cpu \
  --layers 4 --hidden 16 --global-batch 16 --micro-batches 2 --steps 12 --checkpoint-dir "$T_DIR/wck" \
  --checkpoint-every 5
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "the worker exit $(cat "$T_DIR/rc"), want 0"; }
for r in $(seq 0 31); do
  grep -Eqx 'step=12 busy=[0-9]+\.[0-9]{6} ckpt=12' "$T_DIR/last/rank-$r" ||
    fail "rank $r's progress line: '$(cat "$T_DIR/last/rank-$r" 2>&1)'"
done
[ ! -e "$T_DIR/rd/heartbeat" ] || fail "the heartbeat files outlived the job: $(ls "$T_DIR/rd/heartbeat")"
grep -q 'warning: rank' "$T_DIR/out" && { cat "$T_DIR/out"; fail "the worker's lines were refused"; }

# ---- 7. the bundled worker with a slow node ---------------------------------------------
echo "== 7. p3d-worker with one slow node" >&2
fresh worker_slow
mkdir -p "$T_DIR/last"
P3DW_STALL=10:n3:30 run "${JOB[@]}" --run-dir "$T_DIR/rd" --env "LAST=$T_DIR/last" -- "${KEEP_LAST[@]}" "$P3D_WORKER" \
  --backend cpu --layers 4 --hidden 16 --global-batch 16 --micro-batches 2 --steps 60
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "the worker exit $(cat "$T_DIR/rc"), want 0"; }
grep -Eq '^par3drun: node n3 is (1\.[5-9][0-9]|[2-4]\.[0-9]{2})x slower than its 3 peers' "$T_DIR/out" || { cat "$T_DIR/out"; fail "n3 not named"; }
[ "$(grep -c 'slower than' "$T_DIR/out")" = 1 ] || { cat "$T_DIR/out"; fail "want only n3 named"; }
# rank 0 (n1) waited for n3 every step, yet its busy time is its own 10 ms
python3 - "$T_DIR/last/rank-0" "$T_DIR/last/rank-8" <<'PY' || fail "busy times do not leave out the waits"
import re, sys
b = [float(re.fullmatch(r"step=60 busy=([0-9.]+)\n", open(f).read()).group(1)) for f in sys.argv[1:]]
assert 0.009 < b[0] < 0.02 and 0.029 < b[1] < 0.05, b
PY
echo ok
