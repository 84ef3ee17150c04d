#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The fault verdict at rank level on ONE node (docs/launch.md, "The job's
# fault or a node's"): with no other node to compare with, the ranks and
# their data-parallel replicas are compared.
#  1. every rank (tp 2 x dp 2) exits 7 at step 3, every run, --max-restarts
#     3 --max-job-restarts 2: a job fault from the replicas (4 ranks of 2 of
#     the 2 replicas), restarted in place twice, then the program's code 7;
#     result.json "fault": "job", "step": 3 (from the failures: no progress
#     summary came, --progress-interval is 60 s);
#  2. only rank 0 fails, once, on a dp=2 job: one replica of 2: not a job
#     fault ("unknown"), restarted, then the job ends 0;
#  3. ranks 0 and 1 fail the same way (tp 2 x dp 2): both of replica 0, one
#     of 2: "unknown", not most of them;
#  4. --fault-window 0: every rank fails, the first failure decides alone
#     (one rank in the verdict, no wait).
. "$(dirname "$0")/lib/launch_common.sh"
C1=$T/one.json
printf '{ "nodes": [ { "name": "n1", "topology": "%s" } ] }\n' "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$C1"
# w.sh: a step every 0.1 s with a progress line; at step 3 the ranks in
# FAIL (all when unset) exit 7 on the runs before ONCE (every run unset)
cat >"$T/w.sh" <<'SH'
#!/bin/sh
step=0
while [ "$step" -lt 6 ]; do
  sleep 0.1
  step=$((step + 1))
  printf 'step=%d busy=0.05\n' "$step" >"$P3D_HEARTBEAT.tmp" && mv "$P3D_HEARTBEAT.tmp" "$P3D_HEARTBEAT"
  if [ "$step" -eq 3 ] && { [ -z "$ONCE" ] || [ "$P3D_RESTART_COUNT" -lt "$ONCE" ]; }; then
    case " ${FAIL:-$RANK} " in *" $RANK "*) echo "rank $RANK: bad batch" >&2; exit 7 ;; esac
  fi
done
SH
chmod +x "$T/w.sh"
run() { # name expected-code args... ; output in $T/name.out, run dir $T/name.rd
  local name=$1 want=$2 rc=0
  shift 2
  "$PAR3DRUN" --emulate --cluster "$C1" --grace 1 --progress-interval 60 --run-dir "$T/$name.rd" "$@" -- "$T/w.sh" \
    >"$T/$name.out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat "$T/$name.out"; fail "$name: exit $rc, want $want"; }
}
# the first fault record of a run
first_fault() { grep -m1 '"event": "fault"' "$T/$1.rd/events.jsonl" || fail "$1: no fault record"; }

echo "== 1. every rank of every replica fails the same way: the job's" >&2
run all 7 --tp 2 --dp 2 --max-restarts 3 --max-job-restarts 2
f=$(first_fault all)
grep -q '"fault": "job", "why": "4 ranks of 2 of the 2 data-parallel replicas failed the same way (exit code 7, at step 3): the program.s own fault", "nodes": \["n1"\], "ranks": \[[0-3], [0-3], [0-3], [0-3]\], "replicas": \[[01], [01]\], "exit_code": 7' <<<"$f" ||
  fail "all: the first verdict: $f"
grep -q '^par3drun: fault: job: 4 ranks of 2 of the 2 data-parallel replicas failed the same way (exit code 7, at step 3): the program.s own fault; restart in place, no spare used and no node excluded (job restart 1 of 2)$' "$T/all.out" ||
  { cat "$T/all.out"; fail "all: the verdict line"; }
grep -q '"remedy": "stop with the program.s exit code: no job restart left (--max-job-restarts 2)"' "$T/all.rd/events.jsonl" ||
  fail "all: no stop for the job-restart budget"
grep -q '"exit_code": 7, "ok": false, .*"fault": "job", "restarts": 2, "replaced": 0, "step": 3, ' "$T/all.rd/result.json" ||
  fail "all: result.json $(cat "$T/all.rd/result.json")"
[ "$(grep -c '"event": "failure", "node": "n1", "rank": [0-3], "cause": "rank failed", "exit_code": 7, "signal": 0, "fault": "job", "step": 3' "$T/all.rd/events.jsonl")" -ge 4 ] ||
  fail "all: want a failure record for each of the 4 ranks"

echo "== 2. only rank 0 fails, once: one replica of 2, not the job's" >&2
FAIL=0 ONCE=1 run one 0 --tp 1 --dp 2 --max-restarts 3
f=$(first_fault one)
grep -q '"fault": "unknown", "why": "rank 0 failed (exit code 7, at step 3) and no other rank failed to compare it with", "nodes": \["n1"\], "ranks": \[0\], "replicas": \[0\]' <<<"$f" ||
  fail "one: the verdict: $f"
grep -q '"fault": "job"' "$T/one.rd/events.jsonl" && fail "one: read as a job fault"
grep -q '"exit_code": 0, "ok": true, .*"fault": "unknown", "restarts": 1, ' "$T/one.rd/result.json" ||
  fail "one: result.json $(cat "$T/one.rd/result.json")"

echo "== 3. two ranks of one replica: not most replicas" >&2
FAIL="0 1" ONCE=1 run replica 0 --tp 2 --dp 2 --max-restarts 3
f=$(first_fault replica)
grep -q '"fault": "unknown", "why": "2 ranks of node n1 failed the same way (exit code 7, at step 3), in 1 of the 2 data-parallel replicas: not most of them", "nodes": \["n1"\], "ranks": \[[01], [01]\], "replicas": \[0\]' <<<"$f" ||
  fail "replica: the verdict: $f"

echo "== 4. --fault-window 0: the first failure decides" >&2
ONCE=1 run zero 0 --tp 2 --dp 2 --max-restarts 3 --fault-window 0
f=$(first_fault zero)
grep -q '"fault": "unknown", .*"ranks": \[[0-3]\], "replicas": \[[01]\], .*"window_s": 0.000' <<<"$f" ||
  fail "zero: the verdict: $f"
echo "ok"
