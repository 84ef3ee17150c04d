#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# No progress, no loop (--max-no-progress, --no-progress-exit-code;
# docs/launch.md, "No progress, no loop"):
#  1. a program that crashes at the same step every time, resuming from
#     the same checkpoint: with --max-no-progress 2 the job stops after 2
#     restarts without a later step, exit 93 (the default code), said in
#     the root cause, events.jsonl (no_progress) and result.json, although
#     --max-restarts had 8 left;
#  2. the same with --no-progress-exit-code 77;
#  3. a program that gets further on each restart is never stopped for it
#     (--max-no-progress 1): it ends 0 after 4 restarts (crashes at steps 3, 5, 7, 9);
#  4. --max-no-progress 0: the rule is off, --max-restarts decides (exit 3).
. "$(dirname "$0")/lib/launch_common.sh"
# w.sh: resumes from its checkpoint file; a step every 0.1 s with a
# progress line, a checkpoint every 2 steps; at step CRASH (+ GAIN per
# restart) it waits for a progress summary to carry the line, then exits 3;
# at step 10 it is done.
cat >"$T/w.sh" <<'SH'
#!/bin/sh
ck="$T_DIR/ck-$RANK"
step=$(cat "$ck" 2>/dev/null || echo 0)
crash=$((CRASH + GAIN * P3D_RESTART_COUNT))
while [ "$step" -lt 10 ]; do
  sleep 0.1
  step=$((step + 1))
  c=$((step / 2 * 2))
  echo "$c" >"$ck.tmp" && mv "$ck.tmp" "$ck"
  printf 'step=%d busy=0.05 ckpt=%d\n' "$step" "$c" >"$P3D_HEARTBEAT.tmp" && mv "$P3D_HEARTBEAT.tmp" "$P3D_HEARTBEAT"
  if [ "$step" -eq "$crash" ]; then sleep 0.6; exit 3; fi
done
SH
chmod +x "$T/w.sh"
fresh() { T_DIR=$T/$1; mkdir -p "$T_DIR"; export T_DIR; }
JOB=(--emulate --cluster "$CLUSTER" --tp 2 --dp 1 --grace 1 --progress-interval 0.1)
run() { # expected-code args... ; output in $T_DIR/out
  local want=$1 rc=0
  shift
  "$PAR3DRUN" "${JOB[@]}" --run-dir "$T_DIR/rd" "$@" -- "$T/w.sh" >"$T_DIR/out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat "$T_DIR/out"; fail "exit $rc, want $want"; }
}

echo "== 1. the same crash every time: stop after 2 restarts, exit 93" >&2
fresh same
CRASH=3 GAIN=0 run 93 --max-restarts 10 --max-no-progress 2
grep -q '^par3drun: root cause: no progress: 2 restarts in a row reached no later step than 3 and no newer checkpoint than 2 (--max-no-progress 2), then rank [01] failed (exit code 3); exit 93: do not requeue$' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no root cause line"; }
grep -q '"event": "no_progress", "restarts": 2, "step": 3, "ckpt": 2, "exit_code": 93, "then": "rank [01] failed (exit code 3)"' "$T_DIR/rd/events.jsonl" ||
  { cat "$T_DIR/rd/events.jsonl"; fail "no no_progress event"; }
grep -q '"event": "end", "exit_code": 93, "restarts": 2,' "$T_DIR/rd/events.jsonl" || fail "end event: not 93 after 2 restarts"
grep -q '"exit_code": 93, "ok": false, "cause": "no progress: 2 restarts in a row' "$T_DIR/rd/result.json" ||
  fail "result.json: $(cat "$T_DIR/rd/result.json")"
grep -q '"step": 3, "ckpt": 2,' "$T_DIR/rd/result.json" || fail "result.json figures: $(cat "$T_DIR/rd/result.json")"

echo "== 2. --no-progress-exit-code 77" >&2
fresh code
CRASH=3 GAIN=0 run 77 --max-restarts 10 --max-no-progress 1 --no-progress-exit-code 77
grep -q 'no progress: 1 restart in a row .*; exit 77: do not requeue$' "$T_DIR/out" || { cat "$T_DIR/out"; fail "no root cause"; }

echo "== 3. further on each restart: never stopped for it" >&2
fresh gain
CRASH=3 GAIN=2 run 0 --max-restarts 10 --max-no-progress 1
grep -q '"event": "end", "exit_code": 0, "restarts": 4,' "$T_DIR/rd/events.jsonl" ||
  { cat "$T_DIR/rd/events.jsonl"; fail "not 4 restarts then 0"; }
if grep -q no_progress "$T_DIR/rd/events.jsonl"; then fail "a no_progress event for a job that progressed"; fi

echo "== 4. --max-no-progress 0: off" >&2
fresh off
CRASH=3 GAIN=0 run 3 --max-no-progress 0 --max-restarts 3
grep -q '"event": "end", "exit_code": 3, "restarts": 3,' "$T_DIR/rd/events.jsonl" || fail "not 3 restarts then the rank's 3"
echo "launch_no_progress: ok" >&2
