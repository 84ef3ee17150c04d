#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_fault.sh — fault classification over the static TCP rendezvous
# (separate par3drun agents on loopback, real sockets, real signals): three
# agents, two running 2 ranks each and node rank 2 kept spare.
#   1. a program that exits 1 at step 3 on every rank: a job fault — no
#      spare used, no --health-check asked (one that would fail for the
#      wrong reason, a "full disk"), restarts in place within
#      --max-job-restarts, then every node exits 1 (the program's code);
#      "fault": "job" in events.jsonl and result.json; the other node says
#      that the leader stops the job.
#   2. node rank 1 dies (its ranks and its agent SIGKILLed): a node fault,
#      its ranks healed on the spare as before; "fault": "node".
#   3. only node rank 1's ranks SIGKILLed (its agent lives): the window sees
#      node 0's ranks run on: a node fault, restarted in place (no check).
#   4. a PyTorch gloo program raising in one rank under @record, two nodes:
#      the root cause in the leader's summary and events.jsonl names the
#      exception and its line (skipped when no python3 imports torch).
#   5. the leader's --fault-window holds on every node: node rank 1 is
#      given --fault-window 0, the leader its default (2 s); when rank 2
#      (node 1) fails, node 1 keeps rank 3 running (its agent HOLDING, as
#      the placement frame says), the leader's window closes on a node
#      verdict, restart in place, both nodes exit 0.
. "$(dirname "$0")/lib/multinode_lib.sh"

ev_has() { grep -q "$2" "$1" || { bad "$3"; sed 's/^/  /' "$1"; }; }

# ---- 1. the program's own bug: the same failure on every rank ------------------
# each rank writes progress lines (step=N) and exits 1 at step 3, every run;
# it also fills the "disk" that --health-check looks at: a check that
# passes at the start and fails after it (ENOSPC read as a bad node) must
# not be asked, or a spare would go for nothing
W='touch "$T_FULL"; for s in 1 2 3; do echo "step=$s busy=0.01" >"$P3D_HEARTBEAT"; done
echo "rank $RANK fails at step 3" >&2; exit 1'
P=$(free_port)
for i in 0 1 2; do
  agent job $i 3 "$P" --tp 2 --nproc-per-node 2 --spares 1 --max-restarts 5 --max-job-restarts 2 --grace 1 \
    --env "T_FULL=$T/job.full" --health-check "test ! -e $T/job.full" -- sh -c "$W"
done
codes=""
for i in 0 1 2; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 1 1 1" ] || { bad "job fault: exit codes$codes, want the program's 1 1 1"; sed 's/^/  /' "$T/job.0.err"; }
ev=$T/job.rd0/events.jsonl
[ "$(grep -c '"event": "fault", "fault": "job"' "$ev")" = 3 ] || { bad "job fault: want 3 job verdicts"; sed 's/^/  /' "$ev"; }
ev_has "$ev" '"event": "fault", "fault": "job", "why": "the ranks of 2 nodes failed the same way (exit code 1, at step 3)' \
  "job fault: the verdict's evidence"
ev_has "$ev" '"event": "failure", "node": "[^"]*", "rank": [0-9]*, "cause": "rank failed", "exit_code": 1, "signal": 0, "fault": "job", "step": 3' \
  "job fault: a failure record with fault and step"
ev_has "$ev" '"remedy": "restart in place, no spare used and no node excluded (job restart 2 of 2)"' "job fault: 2nd restart"
ev_has "$ev" '"remedy": "stop with the program.s exit code: no job restart left (--max-job-restarts 2)"' "job fault: the stop"
grep -q '"event": "replace"' "$ev" && bad "job fault: a replace record (a spare was spent)"
grep -q '"kind": "replacement"' "$ev" && bad "job fault: a replacement restart"
[ "$(grep -c '"event": "health"' "$ev")" = 3 ] || bad "job fault: a health check after the start (want the 3 before it)"
R=$T/job.rd0/result.json
grep -q '"exit_code": 1, "ok": false, .*"fault": "job", "restarts": 2, "replaced": 0' "$R" ||
  bad "job fault: result.json $(cat "$R" 2>/dev/null)"
grep -q '^par3drun: fault: job: the ranks of 2 nodes failed the same way.*no job restart left' "$T/job.0.err" ||
  { bad "job fault: the end summary does not say it"; sed 's/^/  /' "$T/job.0.err"; }
[ "$(grep -c 'rank 0 fails at step 3' "$T/job.0.err")" -ge 1 ] || bad "job fault: no stderr of the ranks"
# the node whose rank failed says why it ends: the job-restart budget
# (not --max-restarts, 5 here) stopped the job after its failure
grep -q '^par3drun: node [^ ]*:1: rank [23] failed (exit code 1); the leader stops the job$' "$T/job.1.err" ||
  { bad "job fault: node 1 did not say that the leader stops the job"; sed 's/^/  /' "$T/job.1.err"; }
[ -s "$T/job.2.out" ] && grep -q . "$T/job.2.out" && bad "job fault: the spare ran ranks: $(head -2 "$T/job.2.out")"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "job fault: $(leftovers) workers left behind"

# ---- 2. node rank 1 dies: a node fault, healed on the spare ----------------------
W2='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
# starts test NAME's three agents running W2, waits until its 4 ranks ran
# (generation 0), and prints the PIDs of node rank 1's ranks (found by our
# marker and NAME's run directory in their environment)
start_find() {
  local name=$1 port
  port=$(free_port)
  for i in 0 1 2; do
    agent "$name" $i 3 "$port" --tp 2 --nproc-per-node 2 --spares 1 --max-restarts 2 --grace 1 -- sh -c "$W2"
  done
  for _ in $(seq 400); do
    [ "$(cat "$T"/"$name".*.out 2>/dev/null | grep -c 'gen=0')" -ge 4 ] && break
    sleep 0.05
  done
  for d in /proc/[0-9]*; do
    grep -qs "P3D_TEST_MARK=$MARK" "$d/environ" && tr '\0' '\n' <"$d/environ" 2>/dev/null |
      grep -qx "NODE_RANK=1" && grep -qs "$T/$name.rd" "$d/environ" && echo "${d#/proc/}"
  done
}
# AG[] is set by agent() in start_find: not in a subshell
start_find node >"$T/pids"
pids=$(cat "$T/pids")
[ -n "$pids" ] || bad "node fault: node 1's ranks not found"
# shellcheck disable=SC2086
kill -KILL $pids "${AG[1]}"
codes=""
for i in 0 2; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[1]}" 2>/dev/null
[ "$codes" = " 0 0" ] || { bad "node fault: exit codes$codes, want 0 0"; sed 's/^/  /' "$T/node.0.err"; }
ev=$T/node.rd0/events.jsonl
ev_has "$ev" '"event": "failure", "node": "[^"]*:1", "rank": -1, "cause": "node lost", "how": "[^"]*", "fault": "node"' \
  "node fault: the lost node's failure record"
ev_has "$ev" '"event": "replace", "failed": "[^"]*:1", "spare": "[^"]*:2"' "node fault: not replaced on the spare"
grep -q '"fault": "job"' "$ev" && bad "node fault: read as a job fault"
grep -q '"fault": "node"' "$T/node.rd0/result.json" || bad "node fault: result.json $(cat "$T/node.rd0/result.json")"
grep -q 'rank=[23] gen=1' "$T/node.2.out" || bad "node fault: node 1's ranks did not run on the spare"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "node fault: $(leftovers) workers left behind"

# ---- 3. only node rank 1's ranks killed: a node fault from the window ----------
start_find ranks >"$T/pids"
pids=$(cat "$T/pids")
[ -n "$pids" ] || bad "ranks killed: node 1's ranks not found"
# shellcheck disable=SC2086
kill -KILL $pids
codes=""
for i in 0 1 2; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0 0" ] || { bad "ranks killed: exit codes$codes, want 0 0 0"; sed 's/^/  /' "$T/ranks.0.err"; }
ev=$T/ranks.rd0/events.jsonl
ev_has "$ev" '"event": "fault", "fault": "node", "why": "only node [^ ]*:1.s ranks failed (rank [23], killed by signal 9 (KILL)) while the ranks of 1 other node ran on"' \
  "ranks killed: the node verdict"
ev_has "$ev" '"remedy": "restart in place"' "ranks killed: the remedy"
ev_has "$ev" '"event": "restart", "restart": 1, "kind": "in-place"' "ranks killed: no restart in place"
grep -q '"event": "replace"' "$ev" && bad "ranks killed: a replacement without a lost node"
grep -q '^par3drun: fault: node: only node' "$T/ranks.0.err" || bad "ranks killed: the verdict was not said"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "ranks killed: $(leftovers) workers left behind"

# ---- 4. a PyTorch program's exception named across nodes -----------------------
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch.distributed' 2>/dev/null; then PY=$(command -v "$p"); break; fi
done
if [ -z "$PY" ]; then
  echo "note: no python3 here imports torch: part 4 skipped"
else
  cat >"$T/crash.py" <<'PY'
import time, torch, torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

def bad_batch(rank):
    raise ValueError(f"rank {rank}: batch 7 holds a NaN")

@record
def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1)
    dist.all_reduce(t)
    if rank == 1:
        bad_batch(rank)
    # the others reach the barrier later, so that rank 1's failure is the
    # first to reach the leader: with --max-restarts 0 the first failure
    # decides alone (no window), and a peer's "connection closed" at the
    # barrier raced it once under load
    time.sleep(1)
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
PY
  line=$(grep -n 'raise ValueError' "$T/crash.py" | cut -d: -f1)
  P=$(free_port)
  for i in 0 1; do
    agent torch $i 2 "$P" --nproc-per-node 2 --max-restarts 0 --grace 2 --env "OMP_NUM_THREADS=1" -- "$PY" "$T/crash.py"
  done
  codes=""
  for i in 0 1; do wait "${AG[$i]}"; codes="$codes $?"; done
  [ "$codes" = " 1 1" ] || { bad "torch: exit codes$codes, want 1 1"; sed 's/^/  /' "$T/torch.0.err"; }
  grep -q "exception (its TORCHELASTIC_ERROR_FILE, [^)]*): ValueError: rank 1: batch 7 holds a NaN" "$T/torch.0.err" ||
    { bad "torch: the summary does not name the exception"; sed 's/^/  /' "$T/torch.0.err"; }
  grep -q "crash.py:$line in bad_batch" "$T/torch.0.err" || bad "torch: the summary does not name line $line"
  ev_has "$T/torch.rd0/events.jsonl" \
    "\"rank\": 1, .*\"root_cause\": {\"exception\": \"ValueError: rank 1: batch 7 holds a NaN\", \"file\": \"[^\"]*crash.py\", \"line\": $line, \"time\": [0-9]*}" \
    "torch: events.jsonl lacks the root cause"
  sleep 0.3
  [ "$(leftovers)" = 0 ] || bad "torch: $(leftovers) workers left behind"
fi

# ---- 5. the leader's --fault-window on every node ---------------------------------
W5='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" != 0 ] && exit 0
[ "$RANK" = 2 ] && { sleep 0.3; exit 5; }; exec sleep 60'
P=$(free_port)
agent win 0 2 "$P" --tp 2 --nproc-per-node 2 --max-restarts 1 --grace 1 --verbose -- sh -c "$W5"
agent win 1 2 "$P" --tp 2 --nproc-per-node 2 --max-restarts 1 --grace 1 --verbose --fault-window 0 -- sh -c "$W5"
codes=""
for i in 0 1; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0" ] || { bad "window: exit codes$codes, want 0 0"; sed 's/^/  0: /' "$T/win.0.err"; }
grep -q 'agent: state running -> holding (rank-fail)' "$T/win.1.err" ||
  { bad "window: node 1 (given --fault-window 0) did not hold its ranks for the leader's window"; grep 'agent:' "$T/win.1.err" | sed 's/^/  1: /'; }
grep -q 'agent: state running -> stopping (rank-fail)' "$T/win.1.err" && bad "window: node 1 stopped its ranks at once (its own --fault-window 0)"
ev=$T/win.rd0/events.jsonl
ev_has "$ev" '"event": "fault", "fault": "node", .*"ranks": \[2\], .*"remedy": "restart in place"' "window: the node verdict on rank 2"
grep -q 'rank=[0-3] gen=1' "$T/win.1.out" || bad "window: no restart in place"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "window: $(leftovers) workers left behind"

[ "$fail" = 0 ] && echo "PASS multinode_fault"
exit "$fail"
