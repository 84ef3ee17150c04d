#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_health.sh — --health-check in a multi-node job over the static
# TCP rendezvous (separate par3drun agents on loopback, real sockets): 5
# agents, --spares 1, tp8 on 4 x 8 GPUs. Every node runs its OWN
# --health-check (each agent's command line has its own CMD here; nothing
# is sent over the wire but "check now" and the answer).
#  1. node rank 2's check fails before the start -> it is excluded at the
#     rendezvous, the spare (node rank 4) runs ranks from the start, node 2
#     runs nothing and ends cleanly, every node exits 0; events.jsonl has a
#     health record per node.
#  2. after a rank failure node rank 3's check starts failing (a file the
#     test creates) -> the leader asks every node, node 3 is excluded, its
#     ranks move to the spare, the job ends with exit 0. Node rank 1 has no
#     --health-check: it counts as healthy, the leader warns once.
#  2b. a node whose own check outlasts the leader's --health-check-timeout
#     + 2 s failed it (no answer): excluded, replaced, exit 0. Its relay
#     runs the check on its event loop, so it still obeys the retire order
#     while the check runs: it leaves like any excluded node (exit 0), not
#     dropped as a lost one.
#  2c. the compound fault: after a rank failure only the spare (node rank
#     4, running no rank) fails its check -> nothing moves for it, the
#     failed rank restarts in place (restart 1), every node exits 0.
#  3. two nodes fail before the start with one spare -> exit 1 before
#     anything runs, the message names the node and the check's output.
#  4. the leader's own node fails -> exit 1, the message names that limit.
. "$(dirname "$0")/lib/multinode_lib.sh"

OK='true'
SICK='echo "gpu 3 is missing (fixture)"; exit 1'

# waits until NAME's nodes printed N lines with gen=G
wait_lines() {
  local name=$1 n=$2 g=$3
  for _ in $(seq 400); do
    [ "$(cat "$T"/"$name".*.out 2>/dev/null | grep -c "gen=$g")" -ge "$n" ] && return 0
    sleep 0.05
  done
  bad "$name: $n ranks of generation $g did not start"; return 1
}

# ---- 1. a node fails its check before the start -> the spare runs --------
P=$(free_port)
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT node=$P3D_NODE"; exit 0'
for i in 0 1 2 3 4; do
  cmd=$OK; [ "$i" = 2 ] && cmd=$SICK
  agent pre $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 --health-check "$cmd" -- sh -c "$W"
done
codes=""
for i in 0 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0 0 0 0" ] || { bad "pre-start: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/pre.0.err"; sed 's/^/  2: /' "$T/pre.2.err"; }
[ "$(grep -c 'gen=0' "$T/pre.2.out")" = 0 ] || bad "pre-start: the node that failed its check ran ranks"
[ "$(grep -c 'gen=0' "$T/pre.4.out")" = 8 ] || bad "pre-start: the spare did not run 8 ranks from the start"
[ "$(cat "$T"/pre.*.out | grep -c 'gen=0')" = 32 ] || bad "pre-start: not all 32 ranks ran"
grep -q 'failed its --health-check before the start (its process ended with exit code 1: gpu 3 is missing (fixture))' "$T/pre.0.err" ||
  { bad "pre-start: the leader does not name the node's check output"; sed 's/^/  /' "$T/pre.0.err"; }
python3 - "$T/pre.rd0/placement.json" <<'PY' || bad "pre-start: placement.json does not exclude node 2"
import json, sys
p = json.load(open(sys.argv[1]))
ex = p.get("excluded") or []
assert len(ex) == 1 and ex[0].endswith(":2"), f"excluded {ex}"
assert not p.get("spares"), f"spares {p.get('spares')}"
assert not any(r["node"].endswith(":2") for r in p["ranks"]), "a rank on node 2"
assert sum(r["node"].endswith(":4") for r in p["ranks"]) == 8, "node 4 does not hold 8 ranks"
PY
ev=$T/pre.rd0/events.jsonl
[ "$(grep -c '"event": "health"' "$ev")" = 5 ] || { bad "pre-start: want 5 health events"; sed 's/^/  /' "$ev"; }
grep -q '"event": "health", "node": "[^"]*:2", "ok": false, "how": "its process ended with exit code 1: gpu 3 is missing (fixture)"' "$ev" ||
  bad "pre-start: no failed health event for node 2"
grep -q '"event": "health", "node": "[^"]*:4", "ok": true' "$ev" || bad "pre-start: no passed health event for node 4"
grep -q '"event": "end", "exit_code": 0' "$ev" || bad "pre-start: no end record with exit 0"

# ---- 2. a check fails after a rank failure -> excluded, spare takes over --
P=$(free_port)
W2='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] || exit 0
while [ ! -e "$T_FAIL" ]; do sleep 0.05; done; [ "$RANK" = 1 ] && exit 3; exec sleep 60'
for i in 0 1 2 3 4; do
  hc=(--health-check "$OK")
  [ "$i" = 3 ] && hc=(--health-check "test ! -e '$T/sick3' || { echo 'ECC errors on gpu 5 (fixture)'; exit 1; }")
  [ "$i" = 1 ] && hc=() # no check of its own: healthy, and the leader warns
  agent post $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 "${hc[@]}" \
    --env "T_FAIL=$T/post.fail" -- sh -c "$W2"
done
wait_lines post 32 0
touch "$T/sick3" "$T/post.fail"
codes=""
for i in 0 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0 0 0 0" ] || { bad "after failure: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/post.0.err"; sed 's/^/  3: /' "$T/post.3.err"; }
grep -q 'node [^ ]*:3 failed its --health-check after rank 1 failed (exit code 3)' "$T/post.0.err" ||
  { bad "after failure: the leader does not say node 3 failed its check"; sed 's/^/  /' "$T/post.0.err"; }
grep -q 'node [^ ]*:3 failed its --health-check (its process ended with exit code 1: ECC errors on gpu 5 (fixture))' "$T/post.0.err" ||
  bad "after failure: the check's output does not reach the leader"
grep -q 'warning: 1 of 5 nodes ran no --health-check' "$T/post.0.err" || bad "after failure: no warning before the start about node 1"
[ "$(grep -c 'warning: node [^ ]*:1 has no --health-check of its own' "$T/post.0.err")" = 1 ] ||
  bad "after failure: want one warning that node 1 has no check"
[ "$(grep -c 'gen=1' "$T/post.3.out")" = 0 ] || bad "after failure: node 3 ran ranks after it was excluded"
[ "$(grep -c 'gen=1' "$T/post.4.out")" = 8 ] || bad "after failure: the spare did not take 8 ranks"
[ "$(cat "$T"/post.*.out | grep -c 'gen=1')" = 32 ] || bad "after failure: not all 32 ranks ran again"
ev=$T/post.rd0/events.jsonl
grep -q '"event": "health", "node": "[^"]*:3", "ok": false' "$ev" || bad "after failure: no failed health event"
[ "$(grep -c '"event": "health", "node": "[^"]*", "ok": true' "$ev")" -ge 8 ] ||
  bad "after failure: want passed health events for every node before the start and the 4 others after"
grep -q '"event": "replace", "failed": "[^"]*:3", "spare": "[^"]*:4", "moved_ranks": \[24, 25, 26, 27, 28, 29, 30, 31\]' "$ev" ||
  { bad "after failure: replace record"; sed 's/^/  /' "$ev"; }
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || bad "after failure: end record"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "after failure: $(leftovers) workers left behind"

# ---- 2b. a node that does not answer in time failed its check ------------
# node rank 2's own check takes 6 s once the file exists (its own timeout
# allows it); the leader waits its --health-check-timeout (1 s) + 2 s
P=$(free_port)
rm -f "$T/post.fail"
for i in 0 1 2 3 4; do
  hc=(--health-check "$OK" --health-check-timeout 1)
  [ "$i" = 2 ] && hc=(--health-check "test ! -e '$T/slow2' || sleep 6" --health-check-timeout 30)
  agent slow $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 "${hc[@]}" \
    --env "T_FAIL=$T/slow.fail" -- sh -c "$W2"
done
wait_lines slow 32 0
touch "$T/slow2" "$T/slow.fail"
# node 2, still in its check, retires when told (its check does not hold
# its loop): excluded, not lost
codes=""
for i in 0 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0 0 0 0" ] || { bad "no answer: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/slow.0.err"; sed 's/^/  2: /' "$T/slow.2.err"; }
grep -q 'lost the connection to the rendezvous leader' "$T/slow.2.err" && bad "no answer: node 2 was dropped as lost while its check ran"
[ "$(grep -c 'gen=1' "$T/slow.2.out")" = 0 ] || bad "no answer: node 2 ran ranks after it was excluded"
grep -q 'node [^ ]*:2 failed its --health-check (no answer within 3 s)' "$T/slow.0.err" ||
  { bad "no answer: the leader does not say node 2 did not answer"; sed 's/^/  /' "$T/slow.0.err"; }
[ "$(grep -c 'gen=1' "$T/slow.4.out")" = 8 ] || bad "no answer: the spare did not take node 2's ranks"

# ---- 2c. only the spare fails the check after a rank failure -> in place --
P=$(free_port)
rm -f "$T/sick3"
for i in 0 1 2 3 4; do
  hc=(--health-check "$OK")
  [ "$i" = 4 ] && hc=(--health-check "test ! -e '$T/sick4' || { echo 'spare gpu 0 fell off the bus (fixture)'; exit 1; }")
  agent spare $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 "${hc[@]}" \
    --env "T_FAIL=$T/spare.fail" -- sh -c "$W2"
done
wait_lines spare 32 0
touch "$T/sick4" "$T/spare.fail"
codes=""
for i in 0 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0 0 0 0" ] || { bad "spare sick: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/spare.0.err"; }
grep -q 'node [^ ]*:4 failed its --health-check (its process ended with exit code 1: spare gpu 0 fell off the bus (fixture))' "$T/spare.0.err" ||
  { bad "spare sick: the leader does not say the spare failed"; sed 's/^/  /' "$T/spare.0.err"; }
grep -q 'rank 1 failed (exit code 3); restarting all ranks (restart 1 of 2)' "$T/spare.0.err" ||
  { bad "spare sick: the failed rank was not restarted in place"; sed 's/^/  /' "$T/spare.0.err"; }
[ "$(cat "$T"/spare.[0-3].out | grep -c 'gen=1')" = 32 ] || bad "spare sick: not all 32 ranks ran again on their nodes"
[ "$(grep -c 'gen=' "$T/spare.4.out")" = 0 ] || bad "spare sick: the spare ran ranks"
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 0' "$T/spare.rd0/events.jsonl" ||
  { bad "spare sick: end record"; sed 's/^/  /' "$T/spare.rd0/events.jsonl"; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "spare sick: $(leftovers) workers left behind"

# refused NAME SICK_RANKS MESSAGE_REGEX: 5 agents whose node ranks in
# SICK_RANKS fail their check before the start; the leader must exit 1 with
# MESSAGE_REGEX in its stderr, and no rank may run anywhere
refused() {
  local name=$1 sick=$2 want=$3 i cmd c0
  P=$(free_port)
  for i in 0 1 2 3 4; do
    cmd=$OK; case " $sick " in *" $i "*) cmd=$SICK ;; esac
    agent "$name" $i 5 "$P" --tp 8 --spares 1 --grace 1 --health-check "$cmd" -- sh -c "$W"
  done
  wait "${AG[0]}"; c0=$?
  codes=""
  for i in 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
  [ "$c0" = 1 ] || bad "$name: the leader exited $c0, want 1"
  # the job failed (a node's check), not the input: every node exits 1
  [ "$codes" = " 1 1 1 1" ] || bad "$name: the other nodes exited$codes, want 1 1 1 1"
  grep -q "refused node\[1\]: the job cannot start: " "$T/$name.1.err" || bad "$name: node 1 does not say why"
  grep -q "$want" "$T/$name.0.err" || { bad "$name: no message /$want/"; sed 's/^/  /' "$T/$name.0.err"; }
  [ "$(cat "$T"/"$name".*.out | grep -c 'gen=')" = 0 ] || bad "$name: ranks ran"
}

# ---- 3. more failed nodes than spares -> exit 1 before anything runs ------
refused none "1 3" 'the job cannot start: 2 nodes failed the --health-check before the start and no spare can take their place (--spares 1): [^ ]*:1 (its process ended with exit code 1: gpu 3 is missing (fixture)); [^ ]*:3 (its process ended with exit code 1: gpu 3 is missing (fixture)); nothing started'

# ---- 4. the leader's own node fails its check -> exit 1 -------------------
refused lead "0" "the leader's node [^ ]* failed its --health-check before the start (.*); the leader runs the job controller and cannot be replaced"

[ "$fail" = 0 ] && echo "PASS multinode_health"
exit "$fail"
