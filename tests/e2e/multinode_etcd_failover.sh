#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_etcd_failover.sh — the leader lost when the agents met through a
# real etcd (tests/services/etcd.sh on 127.0.0.1), where etcd's election
# decides who leads next (docs/multinode.md "When the leader dies"). etcd
# hands out node ranks in arrival order, so the test reads who is who from
# what the ranks print.
#
# 1. Five agents, --spares 1, tp 8 on 4 x 8 GPUs, --node-timeout 3. The
#    leader's par3drun (node rank 0) is SIGKILLed mid-run -> once its lease
#    lapses, etcd elects node rank 1: it takes over, every survivor exits 0,
#    exactly the old leader's ranks moved, all to the spare, GPU for GPU,
#    placement.json identical on the survivors; while the new generation
#    runs, etcd's leadership key names node rank 1 and the job state it
#    keeps names restart 1 and the lost node; the new leader's events.jsonl
#    has "elected" and the takeover "decided_by": "election"; nothing is
#    left running and etcd holds no key of the job once the killed agent's
#    lease has lapsed.
# 2. Half of the nodes lost at once: six agents, --spares 3 (3 x 8 ranks),
#    the leader and two of the three spares SIGKILLed together. Three of six
#    nodes are left: under the majority rule (no etcd) that side would stop;
#    here etcd's election decides, node rank 1 takes over and the leader's
#    ranks run on the last spare; every survivor exits 0.
# 3. The leader frozen (SIGSTOP, its agent and ranks too), five agents:
#    once its lease lapses etcd elects node rank 1, which takes over; the
#    survivors exit 0. Continued (SIGCONT), the old leader finds its lease
#    gone (or its nodes gone) and exits 1 without running a rank again.
# 4. A squatter: a plain put of the leader key (no lease) while the leader
#    lives, then the leader SIGKILLed: the election still works (the
#    unleased key is ignored, reported and deleted).
. "$(dirname "$0")/lib/multinode_lib.sh"
etcd_up
trap 'thaw_kill; "$SVC" stop "$E"; cleanup' EXIT

# etcd_agents NAME N JOB SPARES PROGRAM: N agents meet through etcd as job
# JOB (--spares SPARES, tp 8, --node-timeout 3, --verbose), agent i with
# topology i % 4, its output in $T/NAME.i.{out,err}, its PID in AG[i]; then
# waits for the ranks of generation 0 (8 a node that is not a spare) and
# sets LEADER (the agent whose ranks say NODE_RANK 0) and SPARES (those
# that ran nothing), and waits until every other node holds its successor
# list (a node without one when the leader dies can only stop).
etcd_agents() {
  local name=$1 n=$2 job=$3 spares=$4 prog=$5 i others=()
  AG=()
  for ((i = 0; i < n; i++)); do
    "$PAR3DRUN" --nnodes "$n" --rdzv "etcd:$URL" --job-id "$job" --topology "${TOPOS[$((i % 4))]}" \
      --run-dir "$T/$name.rd$i" --tp 8 --spares "$spares" --max-restarts 2 --grace 1 --node-timeout 3 --verbose \
      -- sh -c "$prog" >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
    AG[$i]=$!
    PIDS+=($!)
  done
  local want=$((8 * (n - spares)))
  for _ in $(seq 600); do
    [ "$(cat "$T"/"$name".*.out 2>/dev/null | grep -c 'gen=0')" -ge "$want" ] && break
    sleep 0.05
  done
  [ "$(cat "$T"/"$name".*.out | grep -c 'gen=0')" -ge "$want" ] ||
    { bad "$name: the $want ranks did not start"; sed 's/^/  /' "$T"/"$name".*.err; exit 1; }
  LEADER=-1 SPARES=()
  for ((i = 0; i < n; i++)); do
    if grep -q 'node=0 gen=0' "$T/$name.$i.out"; then LEADER=$i
    elif ! grep -q 'gen=0' "$T/$name.$i.out"; then SPARES+=("$i")
    fi
  done
  [ "$LEADER" -ge 0 ] && [ "${#SPARES[@]}" = "$spares" ] ||
    { bad "$name: cannot tell the leader ($LEADER) and the spares (${SPARES[*]}) apart"; exit 1; }
  for ((i = 0; i < n; i++)); do [ "$i" != "$LEADER" ] && others+=("$i"); done
  wait_list "$name" 0 "" "$name" "${others[@]}"
}

# survivors NAME N SKIP...: waits for every agent but SKIP; all must exit
# 0 (else their stderr is printed); SUCC gets the one that took over
survivors() {
  local name=$1 n=$2 i codes="" want=""; shift 2
  SUCC=-1
  for ((i = 0; i < n; i++)); do
    case " $* " in *" $i "*) continue ;; esac
    wait "${AG[$i]}"; codes="$codes $?"; want="$want 0"
    grep -q 'this node is its successor: taking over' "$T/$name.$i.err" && SUCC=$i
  done
  [ "$codes" = "$want" ] || { bad "$name: exit codes$codes, want$want"; for ((i = 0; i < n; i++)); do sed "s/^/  $i: /" "$T/$name.$i.err"; done; }
  [ "$SUCC" -ge 0 ] || { bad "$name: no node said it takes over"; exit 1; }
}

# ---- 1. the leader killed -------------------------------------------------
# generation 0 runs until ended; after the takeover every rank runs until
# $T/go exists (the test reads etcd meanwhile), at most 20 s
W='echo "rank=$RANK node=$NODE_RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES master=$MASTER_ADDR:$MASTER_PORT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; for i in $(seq 200); do [ -e "$GO" ] && exit 0; sleep 0.1; done; exit 0'
export GO=$T/go
etcd_agents fo 5 "fo-$$" 1 "$W"
leader=$LEADER spare=${SPARES[0]}
t0=$(now_ms)
kill -KILL "${AG[$leader]}"
# the new generation runs: etcd names its leader and keeps its state
for _ in $(seq 400); do
  [ "$(cat "$T"/fo.*.out | grep -c 'gen=1')" -ge 32 ] && break
  sleep 0.05
done
P=/par3drun/fo-$$/
lv=$(etcd_get "${P}leader") st=$(etcd_get "${P}state")
echo "etcd while restart 1 runs: leader \"${lv%% *} ... ${lv#* * * }\", state \"$st\""
# signed with the job key (64 hex digits), no token in it
case "$lv" in *" restart 0 node 1 join "[1-9]*" sig="????????????????????????????????????????????????????????????????) ;; *) bad "etcd's leadership key is \"$lv\", want it held by node rank 1 with its join port (\"restart 0 node 1 join PORT sig=HEX\")" ;; esac
case "$lv" in *"$P3D_RDZV_TOKEN"*) bad "etcd's leadership key holds the job key" ;; esac
case "$st" in "restart 1 hash "*" lost 0 excluded - spares -") ;; *) bad "etcd's job state is \"$st\", want restart 1 with node rank 0 lost and no spare left" ;; esac
touch "$GO"
survivors fo 5 "$leader"
t1=$(now_ms)
wait "${AG[$leader]}" 2>/dev/null
succ=$SUCC
echo "the job ended $((t1 - t0)) ms after the leader (agent $leader) was killed"
# the old leader (the node of rank 0) lost, its ranks on the spare
one_node_moved fo 5 "$succ" "$leader" 0
n1=$(cat "$T"/fo.*.out | grep -c 'gen=1')
[ "$n1" = 32 ] || bad "$n1 ranks ran after the takeover, want 32"
[ "$(grep -c 'gen=1' "$T/fo.$spare.out")" = 8 ] || bad "the spare ran $(grep -c 'gen=1' "$T/fo.$spare.out") ranks, want 8"
grep -q 'rank=0 node=[0-9]* gen=1 ' "$T/fo.$spare.out" || bad "rank 0 did not move to the spare"
# MASTER_ADDR follows rank 0: one address and port for every rank
[ "$(grep -h 'gen=1' "$T"/fo.*.out | sed 's/.*master=//' | sort -u | wc -l)" = 1 ] ||
  bad "the ranks of generation 1 disagree on MASTER_ADDR:MASTER_PORT"
ev=$T/fo.rd$succ/events.jsonl
grep -q '"event": "leader_lost", "leader": "[^"]*:0", "successor": "[^"]*:1"' "$ev" ||
  { bad "events: no leader_lost record"; sed 's/^/  /' "$ev" 2>/dev/null; }
grep -q '"event": "elected", "node": "[^"]*:1", "why": "elected by etcd' "$ev" ||
  { bad "events: no elected record"; sed 's/^/  /' "$ev" 2>/dev/null; }
grep -q '"event": "takeover", "old_leader": "[^"]*:0", "new_leader": "[^"]*:1", "reason": "[^"]*", "restart": 1, "heartbeat_to_running_s": [0-9.]*, "decided_by": "election"' "$ev" ||
  { bad "events: no takeover record"; sed 's/^/  /' "$ev" 2>/dev/null; }
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || { bad "events: end record"; sed 's/^/  /' "$ev"; }
grep -o '"heartbeat_to_running_s": [0-9.]*' "$ev"
sleep 0.3
if [ "$(leftovers)" != 0 ]; then
  bad "$(leftovers) processes left behind:"
  for d in /proc/[0-9]*; do
    grep -qs "P3D_TEST_MARK=$MARK" "$d/environ" && echo "  ${d#/proc/}: $(tr '\0' ' ' <"$d/cmdline")"
  done
fi
# the survivors revoke their leases at the end; the killed leader's keys go
# with its lease's TTL (--node-timeout: 3 s)
for _ in $(seq 40); do [ "$(nkeys)" = 0 ] && break; sleep 0.5; done
[ "$(nkeys)" = 0 ] || bad "$(nkeys) keys of the job outlived the killed leader's lease (3 s)"
echo "case 1: leader agent $leader, successor agent $succ, spare agent $spare"

# ---- 2. half of the nodes lost at once --------------------------------
rm -f "$GO"
W2='echo "rank=$RANK node=$NODE_RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
etcd_agents h 6 "half-$$" 3 "$W2"
# the leader and two spares go (node rank 1 stays: it succeeds)
killed="$LEADER"
for s in "${SPARES[@]}"; do
  grep -q ':1: the successor list' "$T/h.$s.err" && continue
  [ "$(echo "$killed" | wc -w)" -lt 3 ] && killed="$killed $s"
done
[ "$(echo "$killed" | wc -w)" = 3 ] || bad "case 2: cannot pick the leader and two spares ($killed)"
for i in $killed; do kill -KILL "${AG[$i]}"; done
# shellcheck disable=SC2086
survivors h 6 $killed
for i in $killed; do wait "${AG[$i]}" 2>/dev/null; done
hs=$SUCC
n1=$(cat "$T"/h.*.out | grep -c 'gen=1')
[ "$n1" = 24 ] || bad "case 2: $n1 ranks ran after the takeover, want 24"
hev=$T/h.rd$hs/events.jsonl
grep -q '"event": "takeover", .*"decided_by": "election"' "$hev" || { bad "case 2: events: no takeover decided by the election"; sed 's/^/  /' "$hev"; }
grep -q '"event": "end", "exit_code": 0' "$hev" || { bad "case 2: events: end record"; sed 's/^/  /' "$hev"; }
python3 - "$T/h.rd$hs/placement.json" <<'PY' || bad "case 2: the placement after the takeover is wrong"
import json, sys
doc = json.load(open(sys.argv[1]))
assert len(doc["lost"]) == 3, doc["lost"]
PY
grep -o '"heartbeat_to_running_s": [0-9.]*' "$hev"
echo "case 2: killed agents $killed at once (3 of 6 nodes), agent $hs took over"

# ---- 3. the leader frozen, then continued -----------------------------
etcd_agents fz 5 "fz-$$" 1 "$W2"
fl=$LEADER
freeze_tree "${AG[$fl]}"
survivors fz 5 "$fl"
t1=$(now_ms)
fs=$SUCC
echo "case 3: the others ended $((t1 - t0)) ms after the leader (agent $fl) was frozen (--node-timeout 3)"
grep -q '"event": "takeover", .*"decided_by": "election"' "$T/fz.rd$fs/events.jsonl" ||
  { bad "case 3: no takeover decided by the election"; sed 's/^/  /' "$T/fz.rd$fs/events.jsonl"; }
grep -o '"heartbeat_to_running_s": [0-9.]*' "$T/fz.rd$fs/events.jsonl"
thaw_node fz "$fl" "case 3" "$(grep -c 'gen=' "$T/fz.$fl.out")"
grep 'root cause' "$T/fz.$fl.err" | sed 's/^/  old leader: /'
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "case 3: $(leftovers) workers left behind (the old leader's ranks?)"
# ---- 4. a squatter on the leadership key --------------------------------
# While the leader lives, a plain put (no lease) overwrites its leader key:
# that key would never go away and block every election. The leader is
# then SIGKILLed: the campaign ignores the unleased key, says so, deletes
# it, and node rank 1 takes over; every survivor exits 0.
etcd_agents sq 5 "sq-$$" 1 "$W2"
sl=$LEADER
SQ=/par3drun/sq-$$/leader
curl -s -m 2 "$URL/v3/kv/put" -d "{\"key\":\"$(printf %s "$SQ" | base64 -w0)\",\"value\":\"$(printf '1 10.9.9.9 stolen' | base64 -w0)\"}" >/dev/null ||
  bad "case 4: cannot put the squatter's key"
[ "$(etcd_get "$SQ")" = "1 10.9.9.9 stolen" ] || bad "case 4: the squatter's key is not there"
kill -KILL "${AG[$sl]}"
survivors sq 5 "$sl"
wait "${AG[$sl]}" 2>/dev/null
# the live leader checks its own key each keepalive period and may put
# its value back before it dies: then the successor has nothing to drop
grep -q "leader is held by no lease .*ignored and deleted" "$T/sq.$SUCC.err" ||
  grep -q "leader holds another value or lease while this node leads .*put back" "$T/sq.$sl.err" ||
  { bad "case 4: neither the successor nor the leader reported the squatter"; sed 's/^/  /' "$T/sq.$SUCC.err"; }
grep -q '"event": "takeover", .*"decided_by": "election"' "$T/sq.rd$SUCC/events.jsonl" ||
  { bad "case 4: no takeover decided by the election"; sed 's/^/  /' "$T/sq.rd$SUCC/events.jsonl"; }
echo "case 4: a squatter's leader key: $(grep -hm1 'held by no lease\|put back' "$T/sq.$SUCC.err" "$T/sq.$sl.err" | cut -c1-140)"
touch "$GO"
for _ in $(seq 40); do [ "$(nkeys)" = 0 ] && break; sleep 0.5; done
[ "$(nkeys)" = 0 ] || bad "$(nkeys) keys of the jobs outlived the killed agents' leases"
[ "$fail" = 0 ] && echo "PASS multinode_etcd_failover"
exit "$fail"
