#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_etcd_join.sh — par3drun --join through a real etcd
# (tests/services/etcd.sh on 127.0.0.1): the joiner reads the job's
# current leader from its signed leader key.
#
# 1. Refused, exit 2, saying why: a leader key held by a lease but not
#    signed with the job key (a forged one, under a job of its own), and a
#    job etcd holds no leader for.
# 2. Two agents run tp 8 on 2 DGX A100s, no spare; a third par3drun joins
#    through etcd -> the leader's events.jsonl has a "join" record, no
#    rank restarted; the node that is not the leader is SIGKILLed -> its
#    ranks move to the joined node, every node left exits 0. A join once
#    the job ended -> exit 2, "holds no leader".
# 3. After a failover: three agents, --spares 1; the leader SIGKILLed, etcd
#    elects node rank 1, which takes over (the leader's ranks on the
#    spare), puts its join port in the leader key; a join through etcd
#    lands there (the successor's events.jsonl has the "join" record).
. "$(dirname "$0")/lib/multinode_lib.sh"
etcd_up
trap 'thaw_kill; "$SVC" stop "$E"; cleanup' EXIT

A100=${TOPOS[0]}
# generation 0 runs until killed; after the restart every rank runs until
# $GO exists (at most 20 s)
W='echo "rank=$RANK node=$NODE_RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; for i in $(seq 200); do [ -e "$GO" ] && exit 0; sleep 0.1; done; exit 0'
export GO=$T/go

# joiner NAME JOB [options]: a par3drun --join through etcd, waited for
joiner() {
  local name=$1 job=$2; shift 2
  "$PAR3DRUN" --join --rdzv "etcd:$URL" --job-id "$job" --topology "$A100" --run-dir "$T/$name.rd" "$@" \
    -- sh -c "$W" >"$T/$name.out" 2>"$T/$name.err"
}
# agents NAME N JOB SPARES: N agents through etcd (A100s, tp 8), waited
# for until their ranks run; LEADER: the one whose ranks say NODE_RANK 0
agents() {
  local name=$1 n=$2 job=$3 spares=$4 i
  AG=()
  for ((i = 0; i < n; i++)); do
    "$PAR3DRUN" --nnodes "$n" --rdzv "etcd:$URL" --job-id "$job" --topology "$A100" --run-dir "$T/$name.rd$i" \
      --tp 8 --spares "$spares" --max-restarts 2 --grace 1 --node-timeout 3 --verbose -- sh -c "$W" \
      >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
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
  LEADER=-1
  for ((i = 0; i < n; i++)); do grep -q 'node=0 gen=0' "$T/$name.$i.out" && LEADER=$i; done
  [ "$LEADER" -ge 0 ] || { bad "$name: no leader"; exit 1; }
}

# ---- 1. refusals ---------------------------------------------------------------
FJ=forged-$$
lease=$(curl -s -m 2 "$URL/v3/lease/grant" -d '{"TTL":60}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["ID"])')
SPORT=$(free_port)
for v in "$SPORT 127.0.0.1" "$SPORT 127.0.0.1 sig=$(printf '%064d' 0)"; do
  curl -s -m 2 "$URL/v3/kv/put" -d "{\"key\":\"$(printf /par3drun/%s/leader "$FJ" | base64 -w0)\",\"value\":\"$(printf %s "$v" | base64 -w0)\",\"lease\":\"$lease\"}" >/dev/null
  rc=0; joiner forged "$FJ" --rdzv-timeout 5 || rc=$?
  [ "$rc" = 2 ] || { bad "a forged leader key ($v): exit $rc, want 2"; sed 's/^/  /' "$T/forged.err"; }
  grep -q "leader is not signed with this job's key: refused" "$T/forged.err" ||
    { bad "a forged leader key: message"; sed 's/^/  /' "$T/forged.err"; }
done
rc=0; joiner none "none-$$" --rdzv-timeout 5 || rc=$?
[ "$rc" = 2 ] || { bad "no such job: exit $rc, want 2"; sed 's/^/  /' "$T/none.err"; }
grep -q "holds no leader for this job (no key /par3drun/none-$$/leader)" "$T/none.err" ||
  { bad "no such job: message"; sed 's/^/  /' "$T/none.err"; }

# ---- 2. a node joins through etcd; a node lost moves to it ---------------------
J=join-$$
agents j 2 "$J" 0
leader=$LEADER other=$((1 - LEADER))
ev=$T/j.rd$leader/events.jsonl
joiner j.2 "$J" --verbose &
AG[2]=$!
PIDS+=($!)
for _ in $(seq 400); do grep -q '"event": "join"' "$ev" 2>/dev/null && break; sleep 0.05; done
grep -q '"event": "join", "node": "[^"]*", "addr": "127.0.0.1", "gpus": 8, "agent": 2, "state": "running", "generation": 0' "$ev" ||
  { bad "events: no join record"; sed 's/^/  /' "$ev"; sed 's/^/  joiner: /' "$T/j.2.err"; }
grep -q '"event": "restart"' "$ev" && bad "a join restarted ranks"
[ -s "$T/j.2.out" ] && bad "the joined spare ran ranks: $(head -3 "$T/j.2.out")"
touch "$GO"
kill -KILL "${AG[$other]}"
codes=""
for i in "$leader" 2; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[$other]}" 2>/dev/null
[ "$codes" = " 0 0" ] || { bad "exit codes$codes, want 0 0"; sed 's/^/  leader: /' "$T/j.$leader.err"; sed 's/^/  joiner: /' "$T/j.2.err"; }
lost=$(grep -o 'node=[0-9]*' "$T/j.$other.out" | head -1 | cut -d= -f2)
moved=$(grep -c 'gen=1' "$T/j.2.out")
[ "$moved" = 8 ] || bad "the joined node ran $moved ranks after the loss, want 8"
grep -q '"event": "replace", "failed": "[^"]*", "spare": "[^"]*", "moved_ranks": \[\(8, 9, 10, 11, 12, 13, 14, 15\|0, 1, 2, 3, 4, 5, 6, 7\)\], "restart": 1' "$ev" ||
  { bad "events: replace record (node rank $lost lost)"; sed 's/^/  /' "$ev"; }
grep -q '"event": "end", "exit_code": 0, .*"joined": 1' "$ev" || bad "events: the end record does not count the join"
rm -f "$GO"
# the job ended: its leader revoked its lease, the key went with it
rc=0; joiner late "$J" --rdzv-timeout 5 || rc=$?
[ "$rc" = 2 ] || { bad "a join after the end: exit $rc, want 2"; sed 's/^/  /' "$T/late.err"; }
grep -q "holds no leader for this job" "$T/late.err" || { bad "a join after the end: message"; sed 's/^/  /' "$T/late.err"; }

# ---- 3. a join after a leader failover lands at the successor ------------------
F=fo-$$
agents f 3 "$F" 1
others=()
for i in 0 1 2; do [ "$i" != "$LEADER" ] && others+=("$i"); done
wait_list f 0 "" f "${others[@]}"
kill -KILL "${AG[$LEADER]}"
for _ in $(seq 400); do
  [ "$(cat "$T"/f.*.out | grep -c 'gen=1')" -ge 16 ] && break
  sleep 0.05
done
[ "$(cat "$T"/f.*.out | grep -c 'gen=1')" -ge 16 ] || { bad "failover: the ranks of restart 1 did not run"; sed 's/^/  /' "$T"/f.*.err; }
succ=-1
for i in "${others[@]}"; do grep -q 'this node is its successor: taking over' "$T/f.$i.err" && succ=$i; done
[ "$succ" -ge 0 ] || { bad "failover: no node took over"; exit 1; }
lv=$(etcd_get "/par3drun/$F/leader")
case "$lv" in *" node 1 join "[1-9]*" sig="*) ;; *) bad "the successor's leader key names no join port: \"$lv\"" ;; esac
jp=$(sed -n 's/.* join \([0-9]*\) sig=.*/\1/p' <<<"$lv")
grep -q "nodes join it at 127.0.0.1:$jp" "$T/f.$succ.err" || { bad "the successor does not say where it takes joiners"; sed 's/^/  /' "$T/f.$succ.err"; }
sev=$T/f.rd$succ/events.jsonl
# the successor takes joiners once the takeover is over (before: retry)
for _ in $(seq 100); do
  rc=0; joiner f.3 "$F" --verbose &
  AG[3]=$!
  PIDS+=($!)
  for _ in $(seq 200); do grep -q '"event": "join"' "$sev" 2>/dev/null && break; kill -0 "${AG[3]}" 2>/dev/null || break; sleep 0.05; done
  grep -q '"event": "join"' "$sev" && break
  wait "${AG[3]}" 2>/dev/null
  grep -q 'retry' "$T/f.3.err" || break
  sleep 0.2
done
grep -q '"event": "join", "node": "[^"]*", "addr": "127.0.0.1", "gpus": 8, "agent": 3, "state": "running", "generation": 1' "$sev" ||
  { bad "events: the successor has no join record"; sed 's/^/  /' "$sev"; sed 's/^/  joiner: /' "$T/f.3.err"; }
touch "$GO"
codes="" want=""
for i in "${others[@]}" 3; do wait "${AG[$i]}"; codes="$codes $?"; want="$want 0"; done
wait "${AG[$LEADER]}" 2>/dev/null
[ "$codes" = "$want" ] || { bad "failover: exit codes$codes, want$want"; for i in "${others[@]}" 3; do sed "s/^/  $i: /" "$T/f.$i.err"; done; }
grep -q '"event": "end", "exit_code": 0, .*"joined": 1' "$sev" || { bad "the successor's end record does not count the join"; sed 's/^/  /' "$sev"; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) processes left behind"
[ "$fail" = 0 ] && echo "PASS multinode_etcd_join"
exit "$fail"
