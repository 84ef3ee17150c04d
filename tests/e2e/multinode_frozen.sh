#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_frozen.sh — --node-timeout: a FROZEN node (its par3drun and
# everything under it SIGSTOPped: the kernel still ACKs, the connection never
# drops) is found by the missing heartbeat, over the static TCP rendezvous
# (separate par3drun agents on loopback) and with --emulate.
#  1. 5 agents, --spares 1, the leader with --node-timeout 3 (the others keep
#     the default 30: they must take the leader's): node rank 2 frozen ->
#     the leader declares it lost within 3 s + slack ("no heartbeat"), the
#     spare takes exactly its ranks, the survivors exit 0.
#  2. only node rank 2's agent frozen (its relay runs): the relay ends the
#     agent, the node counts as lost, the spare takes over, exit 0.
#  3. no spare: a frozen node stops the job (exit 1), named as the root cause.
#  4. the leader frozen: every other node stops its ranks and exits 1 within
#     the timeout + slack, saying the leader sent no heartbeat.
#  5. --emulate, 3 nodes + 1 spare: one agent process frozen -> lost, its
#     ranks on the spare, exit 0.
# Every stopped process is SIGKILLed by PID afterwards (no leftovers).
. "$(dirname "$0")/lib/multinode_lib.sh"

trap 'thaw_kill; cleanup' EXIT

W='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'

wait_up() { # NAME NRANKS
  for _ in $(seq 400); do
    [ "$(cat "$T"/"$1".*.out 2>/dev/null | grep -c 'gen=0')" -ge "$2" ] && return 0
    sleep 0.05
  done
  bad "$1: the $2 ranks did not start"; return 1
}

# waits (up to $3 s) until file $1 contains $2; prints the ms it took from $4
wait_for() {
  local end=$(($(now_ms) + $3 * 1000))
  while [ "$(now_ms)" -lt "$end" ]; do
    grep -q "$2" "$1" 2>/dev/null && { echo $(($(now_ms) - $4)); return 0; }
    sleep 0.05
  done
  echo -1; return 1
}

# the spare (node rank 4) ran exactly ranks 16-23 after the restart
spare_took_2() {
  local name=$1 r
  for r in 16 17 18 19 20 21 22 23; do
    grep -q "rank=$r gen=1" "$T/$name.4.out" || bad "$name: rank $r did not run on the spare"
  done
  [ "$(cat "$T"/"$name".[0134].out | grep -c 'gen=1')" = 32 ] || bad "$name: not all 32 ranks ran after the restart"
}

# ---- 1. a frozen node: lost by its silence, replaced -------------------------
P=$(free_port)
agent fz 0 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 3 -- sh -c "$W"
for i in 1 2 3 4; do
  agent fz $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 -- sh -c "$W"
done
wait_up fz 32
sleep 4 # longer than the timeout: nobody healthy is declared lost
grep -q 'no heartbeat' "$T"/fz.*.err && bad "frozen: a healthy node was declared silent: $(grep -h 'no heartbeat' "$T"/fz.*.err)"
freeze_tree "${AG[2]}"
ms=$(wait_for "$T/fz.0.err" 'lost the agent of node [^ ]*:2 (node rank 2): no heartbeat for' 15 "$t0") ||
  { bad "frozen: the leader did not declare node 2 lost"; sed 's/^/  /' "$T/fz.0.err"; }
echo "frozen: node rank 2 declared lost $ms ms after SIGSTOP (--node-timeout 3)"
# silent for 3 s counts from the last heartbeat (every 0.75 s) before the stop
[ "$ms" -ge 2200 ] || bad "frozen: declared lost after $ms ms, before the 3 s timeout"
[ "$ms" -le 6000 ] || bad "frozen: declared lost after $ms ms, want at most 3 s + 3 s slack"
codes=""
for i in 0 1 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0 0 0" ] || { bad "frozen: exit codes$codes, want 0 0 0 0"; sed 's/^/  /' "$T/fz.0.err"; }
spare_took_2 fz
grep -q '"event": "failure", "node": "[^"]*:2", "rank": -1, "cause": "node lost", "how": "no heartbeat for' \
  "$T/fz.rd0/events.jsonl" || { bad "frozen: no node-lost failure with the heartbeat cause"; sed 's/^/  /' "$T/fz.rd0/events.jsonl"; }
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$T/fz.rd0/events.jsonl" || bad "frozen: end record"
thaw_kill
{ wait "${AG[2]}"; } 2>/dev/null
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "frozen: $(leftovers) workers left behind"

# ---- 2. only a node's agent frozen: its relay ends it ------------------------
P=$(free_port)
for i in 0 1 2 3 4; do
  agent ag $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 3 -- sh -c "$W"
done
wait_up ag 32
agent_pid=$(ps -o pid= --ppid "${AG[2]}" | head -1)
freeze_tree "$agent_pid"
ms=$(wait_for "$T/ag.2.err" 'its agent sent no heartbeat for' 15 "$t0") ||
  { bad "agent frozen: node 2's relay did not notice"; sed 's/^/  /' "$T/ag.2.err"; }
echo "agent frozen: node rank 2's relay ended its agent $ms ms after SIGSTOP"
codes=""
for i in 0 1 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[2]}"
c2=$?
[ "$codes" = " 0 0 0 0" ] || { bad "agent frozen: exit codes$codes, want 0 0 0 0"; sed 's/^/  /' "$T/ag.0.err"; }
[ "$c2" = 1 ] || bad "agent frozen: node 2 exited $c2, want 1"
spare_took_2 ag
thaw_kill
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "agent frozen: $(leftovers) workers left behind"

# ---- 3. no spare: a frozen node stops the job, exit 1 ------------------------
P=$(free_port)
for i in 0 1 2; do
  agent ns $i 3 "$P" --tp 8 --grace 1 --node-timeout 3 -- sh -c "$W"
done
wait_up ns 24
freeze_tree "${AG[2]}"
codes=""
for i in 0 1; do wait "${AG[$i]}"; codes="$codes $?"; done
echo "no spare: the job ended $(($(now_ms) - t0)) ms after node rank 2 was frozen"
[ "$codes" = " 1 1" ] || bad "no spare: exit codes$codes, want 1 1"
grep -q 'root cause: lost the agent of node [^ ]*:2 (node rank 2): no heartbeat for [0-9.]* s (frozen or cut off' \
  "$T/ns.0.err" || { bad "no spare: the leader did not name the frozen node"; sed 's/^/  /' "$T/ns.0.err"; }
thaw_kill
{ wait "${AG[2]}"; } 2>/dev/null
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "no spare: $(leftovers) workers left behind"

# ---- 4. the leader frozen: the others stop, exit 1 ---------------------------
P=$(free_port)
for i in 0 1 2; do
  agent ld $i 3 "$P" --tp 8 --grace 1 --node-timeout 3 -- sh -c "$W"
done
wait_up ld 24
freeze_tree "${AG[0]}"
codes=""
for i in 1 2; do wait "${AG[$i]}"; codes="$codes $?"; done
ms=$(($(now_ms) - t0))
echo "leader frozen: the other nodes exited $ms ms after SIGSTOP (--node-timeout 3)"
[ "$codes" = " 1 1" ] || bad "leader frozen: exit codes$codes, want 1 1"
[ "$ms" -le 9000 ] || bad "leader frozen: the nodes took $ms ms, want at most 3 s + grace + slack"
for i in 1 2; do
  grep -q 'no heartbeat from the rendezvous leader ([^)]*) for [0-9.]* s (frozen or cut off' "$T/ld.$i.err" ||
    { bad "leader frozen: node $i did not say why"; sed 's/^/  /' "$T/ld.$i.err"; }
done
thaw_kill
{ wait "${AG[0]}"; } 2>/dev/null
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "leader frozen: $(leftovers) workers left behind"

# ---- 5. --emulate: a frozen agent process ------------------------------------
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml
printf '{"nodes": [{"name": "e[1-4]", "topology": "%s"}]}\n' "$TOPO" >"$T/four.json"
# every start: rank node agent-pid restart
EW='echo "$RANK $P3D_NODE $PPID $P3D_RESTART_COUNT" >>"$T_DIR/starts"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
export T_DIR=$T/em
mkdir -p "$T_DIR"
"$PAR3DRUN" --cluster "$T/four.json" --emulate --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 2 \
  --run-dir "$T/em.rd" -- sh -c "$EW" >"$T/em.out" 2>"$T/em.err" &
EM=$!
PIDS+=("$EM")
for _ in $(seq 400); do [ "$(cat "$T_DIR/starts" 2>/dev/null | wc -l)" -ge 24 ] && break; sleep 0.05; done
victim=$(awk '$4 == 0 {print $2}' "$T_DIR/starts" | sort -u | sed -n 2p)
apid=$(awk -v n="$victim" '$2 == n && $4 == 0 {print $3; exit}' "$T_DIR/starts")
if [ -z "$apid" ]; then
  bad "emulate: the ranks did not start"; sed 's/^/  /' "$T/em.err"
else
  freeze_tree "$apid"
  wait "$EM"
  rc=$?
  echo "emulate: the job ended $(($(now_ms) - t0)) ms after node $victim's agent was frozen"
  [ "$rc" = 0 ] || { bad "emulate: exit $rc, want 0"; sed 's/^/  /' "$T/em.err"; }
  grep -q "lost the agent of node $victim (node rank [0-9]*): no heartbeat for" "$T/em.err" ||
    { bad "emulate: no heartbeat root cause"; sed 's/^/  /' "$T/em.err"; }
  moved=$(awk -v n="$victim" '$2 == n && $4 == 0 {print $1}' "$T_DIR/starts" | sort -n | tr '\n' ' ')
  spare=$(awk '$4 == 1 {print $1, $2}' "$T_DIR/starts" | sort -n | awk -v m=" $moved" 'index(m, " " $1 " ") {print $2}' | sort -u)
  [ -n "$moved" ] && [ "$(echo "$spare" | wc -l)" = 1 ] && [ "$spare" != "$victim" ] ||
    bad "emulate: ranks $moved of $victim did not move to one spare (got: $spare)"
  [ "$(awk '$4 == 1' "$T_DIR/starts" | wc -l)" = 24 ] || bad "emulate: not all 24 ranks ran after the restart"
fi
thaw_kill
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "emulate: $(leftovers) workers left behind"

[ "$fail" = 0 ] && echo "PASS multinode_frozen"
exit "$fail"
