#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Preemption (docs/launch.md, "Preemption"): two par3drun nodes on loopback
# (the static rendezvous: real processes, real sockets), 2 ranks each.
#  1. SIGUSR1 to the leader's par3drun: every rank on both nodes gets
#     SIGUSR1 once and finds $P3D_PREEMPT; the ranks end; both nodes exit
#     75; result.json says preempted.
#     The same with SIGUSR1 to both nodes' par3drun (as srun signals every
#     task): still once per rank.
#  2. The bundled worker (--checkpoint-dir), SIGTERM to the leader with
#     --preempt-on-term: the worker writes the checkpoint of the step it is
#     at, both nodes exit 75 within the grace, result.json names that
#     step; the same command again, in the same run directories, resumes
#     from it (the next loss line is of the step after it) and ends 0.
#  3. Ranks that take the signal and never checkpoint: the --grace runs
#     out, they are stopped (SIGTERM), exit 75, the root cause says so.
#  4. A second SIGTERM during the wait stops at once (SIGKILL), exit 75.
#  5. --preempt-signal none: SIGUSR1 only goes to the ranks, the job goes
#     on; a bad --preempt-signal is refused (exit 2) naming the option.
#  6. The warning while the leader collects a failure (--fault-window 30):
#     rank 0 exits 3, the others run on; SIGUSR1 to the leader cuts the
#     window short: the failure gets its verdict (node 0's alone: "node")
#     with the remedy "none: a preemption warning came ...", nothing
#     restarts; with a rank gone no complete checkpoint can come, so the
#     job ends at once (no --grace wait), exit 75 75, the root cause names
#     the failed rank.
. "$P3D_SRC/tests/e2e/lib/multinode_lib.sh"

# both nodes, node 0 the leader: NAME PORT [par3drun args...] -- PROGRAM...
job() {
  local name=$1 port=$2 i
  shift 2
  for i in 0 1; do
    agent "$name" "$i" 2 "$port" --nproc-per-node 2 --pp 2 --dp 2 --progress-interval 0.2 "$@"
  done
}
# waits until FILE exists (or holds a line matching RE), at most 30 s
wait_for() {
  local i
  for i in $(seq 600); do
    if [ -n "${2:-}" ]; then grep -qs -- "$2" "$1" && return 0; else [ -e "$1" ] && return 0; fi
    sleep 0.05
  done
  return 1
}
# rank programs: r1 records the signal and the file, then ends; r3 takes
# the signal and keeps running (no checkpoint); r4 ignores USR1 and TERM;
# r5 records, and runs until told
cat >"$T/r1" <<SH
#!/bin/sh
trap '[ -f "\$P3D_PREEMPT" ] && f=file || f=nofile; echo "\$RANK \$P3D_PREEMPT_SIGNAL \$f" >>"$T/usr1"; exit 0' USR1
touch "$T/up.\$RANK"; while :; do sleep 0.05; done
SH
cat >"$T/r3" <<SH
#!/bin/sh
trap 'echo \$RANK >>"$T/told"' USR1
touch "$T/gup.\$RANK"; while :; do sleep 0.05; done
SH
cat >"$T/r4" <<SH
#!/bin/sh
trap '' USR1 TERM
touch "$T/tup.\$RANK"; while :; do sleep 0.05; done
SH
cat >"$T/r5" <<SH
#!/bin/sh
trap 'echo \$RANK >>"$T/usr1n"' USR1
env | grep -q '^P3D_PREEMPT' && touch "$T/envset"
touch "$T/nup.\$RANK"; while [ ! -e "$T/stop" ]; do sleep 0.05; done
SH
cat >"$T/r6" <<SH
#!/bin/sh
touch "$T/cup.\$RANK"
if [ "\$RANK" = 0 ]; then while [ ! -e "$T/cgo" ]; do sleep 0.05; done; exit 3; fi
while :; do sleep 0.05; done
SH
chmod +x "$T"/r[13456]
# both nodes' exit codes into codes (not in a subshell: wait needs our children)
codes_of() { local i; codes=""; for i in 0 1; do wait "${AG[$i]}"; codes="$codes $?"; done; }
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

# ---- 1. SIGUSR1 to the leader: every rank gets it once, finds the file ------
P=$(free_port)
job sig "$P" --grace 10 -- "$T/r1"
for r in 0 1 2 3; do wait_for "$T/up.$r" || bad "1: rank $r did not start"; done
kill -USR1 "${AG[0]}"
codes_of
[ "$codes" = " 75 75" ] || { bad "1: exit codes$codes, want 75 75"; sed 's/^/  /' "$T/sig.0.err"; }
[ "$(sort -u "$T/usr1" 2>/dev/null | wc -l)" = 4 ] && [ "$(wc -l <"$T/usr1")" = 4 ] ||
  bad "1: the ranks that got SIGUSR1 (once each, 4 wanted): $(tr '\n' ';' <"$T/usr1" 2>/dev/null)"
[ "$(grep -c 'SIGUSR1 file$' "$T/usr1" 2>/dev/null)" = 4 ] || bad "1: a rank lacked \$P3D_PREEMPT or its signal: $(cat "$T/usr1")"
grep -q 'preempted (SIGUSR1 to par3drun): SIGUSR1 to every rank' "$T/sig.0.err" || bad "1: no preemption line"
[ "$(field "$T/sig.rd0/result.json" preempted)" = True ] && [ "$(field "$T/sig.rd0/result.json" exit_code)" = 75 ] ||
  bad "1: result.json: $(cat "$T/sig.rd0/result.json")"
grep -q '"event": "preempt", "signal": 10' "$T/sig.rd0/events.jsonl" || bad "1: no preempt record"
grep -q '"from": "running", "to": "preempting"' "$T/sig.rd0/events.jsonl" || bad "1: no state record"
[ "$fail" = 0 ] && echo "ok 1: SIGUSR1 to the leader reached the 4 ranks on 2 nodes once each, with \$P3D_PREEMPT; exit 75 75"

# ---- 1b. the warning at every node (srun signals every task): still once ----
P=$(free_port)
rm -f "$T"/up.* "$T/usr1"
job every "$P" --grace 10 -- "$T/r1"
for r in 0 1 2 3; do wait_for "$T/up.$r" || bad "1b: rank $r did not start"; done
kill -USR1 "${AG[1]}" "${AG[0]}"
codes_of
[ "$codes" = " 75 75" ] || { bad "1b: exit codes$codes, want 75 75"; sed 's/^/  /' "$T/every.0.err"; }
[ "$(sort -u "$T/usr1" 2>/dev/null | wc -l)" = 4 ] && [ "$(wc -l <"$T/usr1")" = 4 ] ||
  bad "1b: the ranks that got SIGUSR1 (once each, 4 wanted): $(tr '\n' ';' <"$T/usr1" 2>/dev/null)"
grep -Eq 'preempted \(SIGUSR1 to (par3drun|node [^)]*)\)' "$T/every.0.err" || bad "1b: no preemption line"
[ "$fail" = 0 ] && echo "ok 1b: SIGUSR1 to both nodes' par3drun: every rank got it once; exit 75 75"

# ---- 2. the bundled worker checkpoints on SIGTERM, the next run resumes -----
if [ -x "${P3D_WORKER:-}" ]; then
  WARGS=(--backend cpu --layers 4 --hidden 16 --global-batch 16 --micro-batches 2 --lr 1 --timeout 60
         --checkpoint-every 1000000 --checkpoint-dir "$T/ck")
  P=$(free_port)
  export P3DW_STALL=20 # 20 ms a step: the job is still running when the signal comes
  job ck "$P" --grace 20 --preempt-on-term -- "$P3D_WORKER" "${WARGS[@]}" --steps 100000
  wait_for "$T/ck.rd0/heartbeat/rank-0" 'step=[1-9][0-9]' || bad "2: no progress line of step 10 or later"
  t0=$(now_ms)
  kill -TERM "${AG[0]}"
  codes_of
  t1=$(now_ms)
  [ "$codes" = " 75 75" ] || { bad "2: exit codes$codes, want 75 75"; sed 's/^/  /' "$T/ck.0.err" | tail -20; }
  echo "2: SIGTERM -> the job ended $((t1 - t0)) ms later (grace 20 s)"
  n=$(field "$T/ck.rd0/result.json" ckpt)
  [ -n "$n" ] && [ "$n" != None ] && [ -f "$T/ck/$(printf step-%08d "$n")/complete" ] ||
    bad "2: result.json's checkpoint '$n' is not a complete one: $(ls "$T/ck" 2>&1)"
  grep -q "p3d-worker: preempted (SIGUSR1): checkpoint of step $n written" "$T/ck.0.err" ||
    bad "2: the worker did not say it checkpointed step $n"
  grep -q "root cause: preempted (SIGTERM to par3drun): every node reported its checkpoint; checkpoint at step $n; exit 75" \
    "$T/ck.0.err" || { bad "2: root cause"; grep 'root cause' "$T/ck.0.err"; }
  grep -q '"event": "preempted", "ckpt": '"$n" "$T/ck.rd0/events.jsonl" || bad "2: no preempted record of step $n"
  # again, in the same run directories (their old preempt file must not
  # stop the new run): resumes at n, runs steps n+1..n+3, ends 0
  P=$(free_port)
  unset P3DW_STALL
  job ck "$P" --grace 20 --preempt-on-term -- "$P3D_WORKER" "${WARGS[@]}" --steps $((n + 3))
  codes_of
  [ "$codes" = " 0 0" ] || { bad "2: the resumed run's exit codes$codes, want 0 0"; sed 's/^/  /' "$T/ck.0.err" | tail; }
  grep -q "resuming from checkpoint step $n in" "$T/ck.0.err" "$T/ck.1.err" ||
    { bad "2: the second run did not resume at step $n"; grep p3d-worker "$T"/ck.[01].err | head; }
  first=$(cat "$T"/ck.[01].out | grep -o 'step [0-9]*/[0-9]* loss' | head -1)
  [ "$first" = "step $((n + 1))/$((n + 3)) loss" ] || bad "2: the resumed run's first step: '$first', want step $((n + 1))"
  [ "$fail" = 0 ] && echo "ok 2: SIGTERM (--preempt-on-term) -> checkpoint of step $n, exit 75 75; the same command resumed at step $((n + 1)) and ended 0"
else
  echo "2: skipped (p3d-worker not built)"
fi

# ---- 3. ranks that never checkpoint: the grace runs out ---------------------
P=$(free_port)
job grace "$P" --grace 1 -- "$T/r3"
for r in 0 1 2 3; do wait_for "$T/gup.$r" || bad "3: rank $r did not start"; done
kill -USR1 "${AG[0]}"
codes_of
[ "$codes" = " 75 75" ] || bad "3: exit codes$codes, want 75 75"
grep -q 'root cause: preempted (SIGUSR1 to par3drun): the 1 s --grace ran out before 2 nodes' "$T/grace.0.err" ||
  { bad "3: root cause"; grep 'par3drun:' "$T/grace.0.err"; }
[ "$(field "$T/grace.rd0/result.json" ckpt)" = None ] || bad "3: a checkpoint in result.json: $(cat "$T/grace.rd0/result.json")"
[ "$(sort -u "$T/told" 2>/dev/null | wc -l)" = 4 ] || bad "3: $(sort -u "$T/told" 2>/dev/null | wc -l) of 4 ranks were told"
[ "$fail" = 0 ] && echo "ok 3: no checkpoint within --grace 1: stopped, exit 75 75, the root cause says so"

# ---- 4. a second SIGTERM during the wait stops at once ------------------------
P=$(free_port)
job twice "$P" --grace 30 --preempt-on-term -- "$T/r4"
for r in 0 1 2 3; do wait_for "$T/tup.$r" || bad "4: rank $r did not start"; done
kill -TERM "${AG[0]}"
wait_for "$T/twice.0.err" 'waiting up to 30 s' || bad "4: no preemption line"
t0=$(now_ms)
kill -TERM "${AG[0]}"
codes_of
t1=$(now_ms)
[ "$codes" = " 75 75" ] || bad "4: exit codes$codes, want 75 75"
grep -q 'SIGTERM again: SIGKILL to every rank now' "$T/twice.0.err" || bad "4: no 'again' line"
echo "4: the second SIGTERM ended the job $((t1 - t0)) ms later (the grace was 30 s)"
[ "$fail" = 0 ] && echo "ok 4: a second SIGTERM stops at once (SIGKILL), exit 75 75"

# ---- 5. --preempt-signal none; a bad one -----------------------------------
P=$(free_port)
: >"$T/usr1n"
job none "$P" --grace 1 --preempt-signal none -- "$T/r5"
for r in 0 1 2 3; do wait_for "$T/nup.$r" || bad "5: rank $r did not start"; done
kill -USR1 "${AG[0]}"
for _ in $(seq 200); do [ "$(wc -l <"$T/usr1n")" -ge 4 ] && break; sleep 0.05; done
touch "$T/stop"
codes_of
[ "$codes" = " 0 0" ] || bad "5: --preempt-signal none: exit codes$codes, want 0 0 (the job goes on)"
[ "$(sort -u "$T/usr1n" | wc -l)" = 4 ] || bad "5: SIGUSR1 forwarded to $(sort -u "$T/usr1n" | wc -l) of 4 ranks"
[ -e "$T/envset" ] && bad "5: P3D_PREEMPT set with --preempt-signal none"
out=$("$PAR3DRUN" --nproc-per-node 1 --preempt-signal TERM -- true 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "^par3drun: --preempt-signal 'TERM': expected USR1, USR2" <<<"$out" ||
  bad "5: --preempt-signal TERM: exit $rc: $out"
[ "$fail" = 0 ] && echo "ok 5: --preempt-signal none forwards SIGUSR1 as before; TERM is refused (exit 2)"

# ---- 6. the warning while a failure's window collects -------------------------
P=$(free_port)
job cut "$P" --grace 60 --fault-window 30 --max-restarts 3 -- "$T/r6"
for r in 0 1 2 3; do wait_for "$T/cup.$r" || bad "6: rank $r did not start"; done
touch "$T/cgo"
wait_for "$T/cut.rd0/events.jsonl" '"to": "collecting"' || bad "6: the leader never collected the failure"
kill -USR1 "${AG[0]}"
codes_of
[ "$codes" = " 75 75" ] || { bad "6: exit codes$codes, want 75 75"; sed 's/^/  /' "$T/cut.0.err"; }
python3 - "$T/cut.rd0/events.jsonl" "$T/cut.rd0/result.json" <<'PY' || bad "6: events.jsonl or result.json"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
fa = [e for e in ev if e["event"] == "failure" and e.get("rank") == 0]
assert len(fa) == 1 and fa[0]["exit_code"] == 3 and fa[0]["fault"] == "node", fa
ft = [e for e in ev if e["event"] == "fault"]
assert len(ft) == 1, ft
f = ft[0]
assert f["fault"] == "node" and f["ranks"] == [0] and f["exit_code"] == 3, f
assert f["remedy"].startswith("none: a preemption warning came ") and "the job ends (nothing restarts)" in f["remedy"], f["remedy"]
assert f["window_s"] < 30, f
kinds = [e["event"] for e in ev]
assert kinds.index("fault") < kinds.index("preempted"), kinds
assert not any(e["event"] == "restart" for e in ev), kinds
r = json.load(open(sys.argv[2]))
assert r["exit_code"] == 75 and r["preempted"] is True and r["fault"] == "node", r
print("6: verdict:", f["why"])
PY
grep -q 'par3drun: fault: node: .*; none: a preemption warning came' "$T/cut.0.err" || { bad "6: no fault line"; grep par3drun: "$T/cut.0.err"; }
grep -q 'root cause: preempted (SIGUSR1 to par3drun): rank 0 on node [^ ]* failed (exit code 3) before the warning: no complete checkpoint can be written; no checkpoint reported; exit 75' "$T/cut.0.err" ||
  { bad "6: root cause"; grep 'par3drun:' "$T/cut.0.err"; }
[ "$fail" = 0 ] && echo "ok 6: a warning during the fault window: the failure's verdict (node), no restart, exit 75 75"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) processes left behind"
exit $fail
