#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_failover.sh — leader failover over the static TCP rendezvous
# (docs/multinode.md, "When the leader dies"): 5 separate par3drun agents
# on loopback, --spares 1 (node rank 4 kept spare), tp8 on 4 x 8 GPUs,
# --node-timeout 3.
#  1. the leader's par3drun SIGKILLed mid-run: node rank 1 (the lowest live
#     node) takes over once a majority rejoined it; the leader's ranks 0-7
#     run on the spare, GPU for GPU, no other rank moves; every surviving
#     par3drun exits 0; events.jsonl on the new leader has the takeover.
#  2. the leader frozen (SIGSTOP, its agent and ranks too): the others take
#     over as in 1 and end 0; after SIGCONT the old leader stops (exit 1)
#     without running a rank again, and none of its old ranks is left.
#  3. --no-failover: the leader SIGKILLed ends the job, exit 1 everywhere.
#  4. two successive leader losses: 6 agents, --spares 2 (node ranks 4 and
#     5); the leader killed -> node rank 1 takes over (ranks 0-7 to a
#     spare); then node rank 1 killed -> node rank 2 takes over (ranks 8-15
#     to the other spare); the survivors 2-5 exit 0.
#  5. the leader and its successor killed at once: the successor cannot be
#     reached, the nodes try the next one: node rank 2 takes over with 4 of
#     the 6 nodes, both lost nodes' ranks go to the spares.
#  6. the successor list follows a replacement: 6 agents, --spares 2; node
#     rank 1 (the first candidate) frozen -> lost after --node-timeout,
#     replaced by a spare; then the leader killed -> node rank 2 takes over
#     at once: no node tries the frozen node 1 (it is not on the list the
#     leader sent with the restart); node 1, continued, exits 1 without
#     running a rank again.
#  7. a successor's own list: 6 agents, --spares 2; the leader killed ->
#     node rank 1 takes over and sends its own list (node rank 2 first);
#     then node 1 frozen -> node rank 2 takes over at once, no node waits on
#     the frozen node 1; node 1, continued, exits 1.
#  8. a spare lost: nothing restarts, yet every node gets a successor list
#     without it (3 candidates instead of 4): a frozen spare left on the
#     list would hold each node that loses the leader for --node-timeout +
#     4 s; then the ranks end and every survivor exits 0.
. "$(dirname "$0")/lib/multinode_lib.sh"

trap 'thaw_kill; cleanup' EXIT

# generation 0 runs until ended; after a restart every rank ends at once
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES master=$MASTER_ADDR:$MASTER_PORT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'

# wait_gen NAME GEN [WHAT]: until NAME's nodes printed 32 lines of
# generation GEN; else bad WHAT (none when WHAT is empty: a later check says it)
wait_gen() {
  local name=$1 gen=$2 what=${3:-}
  for _ in $(seq 400); do
    [ "$(cat "$T"/"$name".*.out 2>/dev/null | grep -c "gen=$gen")" -ge 32 ] && return 0
    sleep 0.05
  done
  [ -z "$what" ] || bad "$what"
  return 1
}
wait_up() { wait_gen "$1" 0 "$1: the 32 ranks did not start"; }

# start_run NAME N WHAT PROG: N agents (5: --spares 1 --max-restarts 2; 6:
# --spares 2 --max-restarts 3) on a fresh port, tp 8, --node-timeout 3,
# --verbose, running sh -c PROG; returns once the 32 ranks of generation 0
# run and every node but the leader holds the successor list of restart 0
# with node rank 1 first (else bad WHAT)
start_run() {
  local name=$1 n=$2 what=$3 prog=$4 i others=()
  local more=(--spares 1 --max-restarts 2)
  [ "$n" = 6 ] && more=(--spares 2 --max-restarts 3)
  P=$(free_port)
  for ((i = 0; i < n; i++)); do
    agent "$name" $i "$n" "$P" --verbose --tp 8 "${more[@]}" --grace 1 --node-timeout 3 -- sh -c "$prog"
  done
  for ((i = 1; i < n; i++)); do others+=("$i"); done
  wait_up "$name"
  wait_list "$name" 0 1 "$what" "${others[@]}"
}

# the checks of a completed takeover in run $1: node 0's ranks on the spare
# (node rank 4), nothing else moved, every rank ran again, the story told
check_takeover() {
  local name=$1
  for i in 2 3 4; do
    cmp -s "$T/$name.rd1/placement.json" "$T/$name.rd$i/placement.json" ||
      bad "$name: placement.json of node $i differs from the new leader's"
  done
  python3 - "$T/$name.rd1/placement.1.json" "$T/$name.rd1/placement.json" <<'PY' || bad "$name: the moved ranks are wrong"
import json, sys
old = {r["rank"]: r for r in json.load(open(sys.argv[1]))["ranks"]}
new = {r["rank"]: r for r in json.load(open(sys.argv[2]))["ranks"]}
assert old.keys() == new.keys(), "rank sets differ"
lost = old[0]["node"]
moved = sorted(r for r in old if old[r]["node"] != new[r]["node"] or old[r]["gpu"] != new[r]["gpu"])
want = sorted(r for r in old if old[r]["node"] == lost)
if moved != want or len(want) != 8:
    sys.exit(f"moved {moved}, want the ranks of the old leader {lost}: {want}")
spare = {new[r]["node"] for r in moved}
if len(spare) != 1 or not spare.pop().endswith(":4"):
    sys.exit(f"the leader's ranks went to {sorted({new[r]['node'] for r in moved})}, want the spare (node rank 4)")
bad = [r for r in moved if new[r]["gpu"] != old[r]["gpu"]]
if bad:
    sys.exit(f"ranks {bad} changed GPU index on the spare")
PY
  local n1
  n1=$(cat "$T"/"$name".[1234].out | grep -c 'gen=1')
  [ "$n1" = 32 ] || bad "$name: $n1 ranks ran after the takeover, want 32"
  for r in 0 1 2 3 4 5 6 7; do
    grep -q "rank=$r gen=1 " "$T/$name.4.out" || bad "$name: rank $r did not run on the spare"
  done
  # MASTER_ADDR follows rank 0: the spare's address and port for everyone
  [ "$(grep 'gen=1' "$T"/"$name".[1234].out | sed 's/.*master=//' | sort -u | wc -l)" = 1 ] ||
    bad "$name: the ranks of generation 1 disagree on MASTER_ADDR:MASTER_PORT"
  local ev=$T/$name.rd1/events.jsonl
  grep -q '"event": "leader_lost", "leader": "[^"]*:0", "successor": "[^"]*:1"' "$ev" ||
    { bad "$name: events: no leader_lost record"; sed 's/^/  /' "$ev" 2>/dev/null; }
  grep -q '"event": "takeover", "old_leader": "[^"]*:0", "new_leader": "[^"]*:1", "reason": "[^"]*", "restart": 1, "heartbeat_to_running_s": [0-9.]*' "$ev" ||
    { bad "$name: events: no takeover record"; sed 's/^/  /' "$ev" 2>/dev/null; }
  grep -q '"event": "replace", "failed": "[^"]*:0", "spare": "[^"]*:4", "moved_ranks": \[0, 1, 2, 3, 4, 5, 6, 7\], "restart": 1' "$ev" ||
    bad "$name: events: no replace record for the old leader"
  grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || bad "$name: events: end record"
  grep -o '"heartbeat_to_running_s": [0-9.]*' "$ev" | sed "s/^/$name: /"
}

# ---- 1. the leader SIGKILLed -------------------------------------------------
start_run fo 5 kill "$W"
t0=$(now_ms)
kill -KILL "${AG[0]}"
codes=""
for i in 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
t1=$(now_ms)
wait "${AG[0]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "kill: exit codes$codes, want 0 0 0 0"; for i in 1 2 3 4; do sed "s/^/  $i: /" "$T/fo.$i.err"; done; }
echo "kill: the job ended $((t1 - t0)) ms after the leader was killed"
grep -q 'this node is its successor: taking over' "$T/fo.1.err" || bad "kill: node 1 did not say it takes over"
check_takeover fo
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "kill: $(leftovers) workers left behind"

# ---- 2. the leader frozen, then continued ------------------------------------
STOPPED=()
start_run fz 5 frozen "$W"
freeze_tree "${AG[0]}"
codes=""
for i in 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
t1=$(now_ms)
[ "$codes" = " 0 0 0 0" ] || { bad "frozen: exit codes$codes, want 0 0 0 0"; for i in 1 2 3 4; do sed "s/^/  $i: /" "$T/fz.$i.err"; done; }
echo "frozen: the others ended $((t1 - t0)) ms after the leader was frozen (--node-timeout 3)"
check_takeover fz
before=$(grep -c 'gen=' "$T/fz.0.out")
for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null; done
STOPPED=()
rc0=timeout
for _ in $(seq 200); do
  if ! kill -0 "${AG[0]}" 2>/dev/null; then wait "${AG[0]}"; rc0=$?; break; fi
  sleep 0.05
done
[ "$rc0" = 1 ] || { bad "frozen: the old leader exited '$rc0' after SIGCONT, want 1"; sed 's/^/  0: /' "$T/fz.0.err"; }
[ "$(grep -c 'gen=' "$T/fz.0.out")" = "$before" ] || bad "frozen: the old leader ran ranks after SIGCONT"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "frozen: $(leftovers) workers left behind (the old leader's ranks?)"

# ---- 3. --no-failover: the leader lost ends the job --------------------------
P=$(free_port)
for i in 0 1 2 3 4; do
  agent nf $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 3 --no-failover -- sh -c "$W"
done
wait_up nf
kill -KILL "${AG[0]}"
codes=""
for i in 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" 2>/dev/null
[ "$codes" = " 1 1 1 1" ] || bad "--no-failover: exit codes$codes, want 1 1 1 1"
grep -q 'taking over' "$T"/nf.*.err && bad "--no-failover: a node took over"
[ "$(cat "$T"/nf.*.out | grep -c 'gen=1')" = 0 ] || bad "--no-failover: ranks ran again"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "--no-failover: $(leftovers) workers left behind"

# ---- 4. two leaders lost one after the other ----------------------------------
W2='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" -ge 2 ] && exit 0; exec sleep 60'
start_run tw 6 two "$W2"
kill -KILL "${AG[0]}"
wait_gen tw 1 "two: the first takeover did not run 32 ranks"
wait_list tw 1 2 two 2 3 4 5 # node 1's own list
kill -KILL "${AG[1]}"
codes=""
for i in 2 3 4 5; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" "${AG[1]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "two: exit codes$codes, want 0 0 0 0"; for i in 2 3; do sed "s/^/  $i: /" "$T/tw.$i.err"; done; }
ev=$T/tw.rd2/events.jsonl
grep -q '"event": "takeover", "old_leader": "[^"]*:1", "new_leader": "[^"]*:2", "reason": "[^"]*", "restart": 2' "$ev" ||
  { bad "two: no second takeover on node 2"; sed 's/^/  /' "$ev" 2>/dev/null; }
grep -q '"event": "takeover", "old_leader": "[^"]*:0", "new_leader": "[^"]*:1"' "$T/tw.rd1/events.jsonl" ||
  bad "two: no first takeover on node 1"
python3 - "$T/tw.rd2/placement.1.json" "$T/tw.rd2/placement.2.json" "$T/tw.rd2/placement.json" <<'PY' || bad "two: the moved ranks are wrong"
import json, sys
p0, p1, p2 = ({r["rank"]: r for r in json.load(open(f))["ranks"]} for f in sys.argv[1:4])
n = lambda p, q: p[q]["node"].rsplit(":", 1)[1]
first = sorted(q for q in p0 if n(p0, q) == "0")
second = sorted(q for q in p1 if n(p1, q) == "1")
if len(first) != 8 or len(second) != 8:
    sys.exit(f"the leaders held {first} and {second}")
if {n(p1, q) for q in first} != {n(p2, q) for q in first} or len({n(p1, q) for q in first}) != 1 or n(p1, first[0]) not in "45":
    sys.exit("the first leader's ranks did not go to one spare and stay there")
if len({n(p2, q) for q in second}) != 1 or n(p2, second[0]) not in "45" or n(p2, second[0]) == n(p2, first[0]):
    sys.exit("the second leader's ranks did not go to the other spare")
for q in p0:
    if q not in first and q not in second and (p0[q]["node"], p0[q]["gpu"]) != (p2[q]["node"], p2[q]["gpu"]):
        sys.exit(f"rank {q} moved")
print("two: ranks 0-7 and 8-15 on the two spares; nothing else moved")
PY
[ "$(cat "$T"/tw.[2345].out | grep -c 'gen=2')" = 32 ] || bad "two: not 32 ranks ran after the second takeover"
grep -o '"heartbeat_to_running_s": [0-9.]*' "$ev" | sed 's/^/two: /'
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "two: $(leftovers) workers left behind"

# ---- 5. the successor unreachable too: the next one ---------------------------
start_run un 6 unreachable "$W"
kill -KILL "${AG[0]}" "${AG[1]}"
codes=""
for i in 2 3 4 5; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" "${AG[1]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "unreachable: exit codes$codes, want 0 0 0 0"; for i in 2 3; do sed "s/^/  $i: /" "$T/un.$i.err"; done; }
ev=$T/un.rd2/events.jsonl
# the old leader is node rank 0, or 1 when node 1's gate took a node in the
# moment before its own SIGKILL landed (that node then lost node 1 as its
# leader): either way node 2 leads and both nodes' ranks move
grep -q '"event": "takeover", "old_leader": "[^"]*:[01]", "new_leader": "[^"]*:2", "reason": "[^"]*", "restart": 1' "$ev" ||
  { bad "unreachable: node 2 did not take over"; sed 's/^/  /' "$ev" 2>/dev/null; }
python3 - "$T/un.rd2/placement.1.json" "$T/un.rd2/placement.json" <<'PY' || bad "unreachable: the moved ranks are wrong"
import json, sys
p0, p1 = ({r["rank"]: r for r in json.load(open(f))["ranks"]} for f in sys.argv[1:3])
n = lambda p, q: p[q]["node"].rsplit(":", 1)[1]
lost = sorted(q for q in p0 if n(p0, q) in "01")
moved = sorted(q for q in p0 if (p0[q]["node"], p0[q]["gpu"]) != (p1[q]["node"], p1[q]["gpu"]))
if lost != moved or len(lost) != 16 or {n(p1, q) for q in lost} != {"4", "5"}:
    sys.exit(f"moved {moved}, want the 16 ranks of nodes 0 and 1 on the spares 4 and 5")
print("unreachable: node 2 took over; the ranks of nodes 0 and 1 are on the spares")
PY
grep -Eq 'the successor node rank 1 did not take this node|rejoined its successor, node rank 1' "$T/un.3.err" ||
  bad "unreachable: node 3 did not say it passed node 1 over (or that node 1 took it before it died)"
grep -o '"heartbeat_to_running_s": [0-9.]*' "$ev" | sed 's/^/unreachable: /'
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "unreachable: $(leftovers) workers left behind"

# ---- 6. the successor list again after a replacement ---------------------------
STOPPED=()
start_run sl 6 list "$W2"
freeze_tree "${AG[1]}"
wait_gen sl 1 "list: node 1 frozen, its ranks did not run on a spare"
wait_list sl 1 2 list 2 3 4 5 # the list of restart 1 reached every node
t0=$(now_ms)
kill -KILL "${AG[0]}"
wait_gen sl 2 # "not 32 ranks ran after the takeover" below says it
t1=$(now_ms)
codes=""
for i in 2 3 4 5; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "list: exit codes$codes, want 0 0 0 0"; for i in 2 3; do sed "s/^/  $i: /" "$T/sl.$i.err"; done; }
echo "list: the leader killed -> 32 ranks of generation 2 running after $((t1 - t0)) ms (--node-timeout 3)"
grep -q 'this node is its successor: taking over' "$T/sl.2.err" || bad "list: node 2 did not take over"
if grep -l 'successor node rank 1\b' "$T"/sl.[2345].err >/dev/null 2>&1; then
  bad "list: a node tried the frozen node 1 (lost before) as the successor"
  grep -H 'successor node rank 1' "$T"/sl.[2345].err | sed 's/^/  /'
fi
grep -q '"event": "takeover", "old_leader": "[^"]*:0", "new_leader": "[^"]*:2", "reason": "[^"]*", "restart": 2' "$T/sl.rd2/events.jsonl" ||
  { bad "list: no takeover by node 2 at restart 2"; sed 's/^/  /' "$T/sl.rd2/events.jsonl" 2>/dev/null; }
[ "$(cat "$T"/sl.[2345].out | grep -c 'gen=2')" = 32 ] || bad "list: not 32 ranks ran after the takeover"
thaw_node sl 1 list "$(grep -c 'gen=' "$T/sl.1.out")"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "list: $(leftovers) workers left behind"

# ---- 7. a successor's own successor list -----------------------------------------
STOPPED=()
start_run ow 6 own "$W2"
kill -KILL "${AG[0]}"
wait_gen ow 1 "own: the first takeover did not run 32 ranks"
wait_list ow 1 2 own 2 3 4 5 # node 1's own list, sent with the takeover's restart
freeze_tree "${AG[1]}"
codes=""
for i in 2 3 4 5; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "own: exit codes$codes, want 0 0 0 0"; for i in 2 3; do sed "s/^/  $i: /" "$T/ow.$i.err"; done; }
grep -q '"event": "takeover", "old_leader": "[^"]*:1", "new_leader": "[^"]*:2", "reason": "[^"]*", "restart": 2' "$T/ow.rd2/events.jsonl" ||
  { bad "own: no takeover of node 1 by node 2"; sed 's/^/  /' "$T/ow.rd2/events.jsonl" 2>/dev/null; }
# after the first takeover nobody may try node 1 again
if sed -n '/successor list of restart 1/,$p' "$T"/ow.[2345].err | grep -q 'successor node rank 1 '; then
  bad "own: a node tried the frozen node 1 after it had sent its own list"
  grep -H 'successor node rank' "$T"/ow.[2345].err | sed 's/^/  /'
fi
[ "$(cat "$T"/ow.[2345].out | grep -c 'gen=2')" = 32 ] || bad "own: not 32 ranks ran after the second takeover"
thaw_node ow 1 own "$(grep -c 'gen=' "$T/ow.1.out")"
grep -o '"heartbeat_to_running_s": [0-9.]*' "$T/ow.rd2/events.jsonl" | sed 's/^/own: /'
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "own: $(leftovers) workers left behind"

# ---- 8. a spare lost: a new successor list without a restart -------------------
export GO=$T/go8
W8='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; for i in $(seq 300); do [ -e "$GO" ] && exit 0; sleep 0.1; done; exit 0'
start_run sp 5 spare "$W8"
grep -q 'the successor list of restart 0: 4 candidates, node rank 1 first' "$T/sp.1.err" ||
  bad "spare: the first list does not hold 4 candidates"
kill -KILL "${AG[4]}"
for _ in $(seq 200); do
  k=0
  for i in 1 2 3; do grep -q 'the successor list of restart 0: 3 candidates' "$T/sp.$i.err" && k=$((k + 1)); done
  [ "$k" = 3 ] && break
  sleep 0.05
done
[ "$k" = 3 ] || { bad "spare: $k of nodes 1-3 got a list without the lost spare"; grep -H 'successor list' "$T"/sp.*.err | sed 's/^/  /'; }
touch "$GO"
codes=""
for i in 0 1 2 3; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[4]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "spare: exit codes$codes, want 0 0 0 0"; sed 's/^/  0: /' "$T/sp.0.err"; }
[ "$(cat "$T"/sp.*.out | grep -c 'gen=1')" = 0 ] || bad "spare: a restart after losing only the spare"
echo "spare: the spare lost, nodes 1-3 hold a list of 3 candidates; no restart"

exit $fail
