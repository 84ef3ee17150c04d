#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_join_failover.sh — par3drun --join over the static rendezvous
# after the leader failed over, on loopback with real sockets and a real
# SIGKILL: three agents (DGX A100s, tp 8, --spares 1); the leader is
# SIGKILLed, node rank 1 takes over (the leader's ranks on the spare) and
# opens its join port on the job's rendezvous port at its own address
# (here the same 127.0.0.1:PORT the job met on) and says so; a
# `par3drun --join --rdzv static:127.0.0.1:PORT` then joins the job at the
# successor (its events.jsonl has the "join" record) and every node ends
# 0. Once the job ended, a join is told that the leader is gone and how a
# failed-over job is joined (exit 1).
. "$(dirname "$0")/lib/multinode_lib.sh"
trap 'thaw_kill; cleanup' EXIT

A100=${TOPOS[0]}
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; for i in $(seq 200); do [ -e "$GO" ] && exit 0; sleep 0.1; done; exit 0'
export GO=$T/go
P=$(free_port)
for i in 0 1 2; do
  "$PAR3DRUN" --nnodes 3 --node-rank "$i" --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
    --topology "$A100" --run-dir "$T/s.rd$i" --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 3 \
    --verbose -- sh -c "$W" >"$T/s.$i.out" 2>"$T/s.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
done
for _ in $(seq 400); do
  [ "$(cat "$T"/s.*.out 2>/dev/null | grep -c 'gen=0')" -ge 16 ] && break
  sleep 0.05
done
[ "$(cat "$T"/s.*.out | grep -c 'gen=0')" = 16 ] || { bad "the 16 ranks did not start"; sed 's/^/  /' "$T/s.0.err"; exit 1; }
wait_list s 0 1 s 1 2
kill -KILL "${AG[0]}"
for _ in $(seq 400); do
  [ "$(cat "$T"/s.*.out | grep -c 'gen=1')" -ge 16 ] && break
  sleep 0.05
done
[ "$(cat "$T"/s.*.out | grep -c 'gen=1')" = 16 ] || { bad "the ranks of restart 1 did not run"; sed 's/^/  /' "$T/s.1.err"; }
grep -q "node\[1\] leads the job now: nodes join it at 127.0.0.1:$P (par3drun --join --rdzv static:127.0.0.1:$P, the job's rendezvous port)" "$T/s.1.err" ||
  { bad "the successor does not take joiners on the job's rendezvous port"; sed 's/^/  /' "$T/s.1.err"; }
sev=$T/s.rd1/events.jsonl
"$PAR3DRUN" --join --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" --topology "$A100" \
  --run-dir "$T/s.rd3" -- sh -c "$W" >"$T/s.3.out" 2>"$T/s.3.err" &
AG[3]=$!
PIDS+=($!)
for _ in $(seq 400); do grep -q '"event": "join"' "$sev" 2>/dev/null && break; kill -0 "${AG[3]}" 2>/dev/null || break; sleep 0.05; done
grep -q '"event": "join", "node": "[^"]*", "addr": "127.0.0.1", "gpus": 8, "agent": 3, "state": "running", "generation": 1' "$sev" ||
  { bad "events: the successor has no join record"; sed 's/^/  /' "$sev"; sed 's/^/  joiner: /' "$T/s.3.err"; }
touch "$GO"
codes=""
for i in 1 2 3; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" 2>/dev/null
[ "$codes" = " 0 0 0" ] || { bad "exit codes$codes, want 0 0 0"; for i in 1 2 3; do sed "s/^/  $i: /" "$T/s.$i.err"; done; }
grep -q '"event": "end", "exit_code": 0, .*"joined": 1' "$sev" || { bad "the successor's end record does not count the join"; sed 's/^/  /' "$sev"; }
# nobody listens any more: the joiner is told where a failed-over job takes joiners
rc=0
"$PAR3DRUN" --join --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" --topology "$A100" --rdzv-timeout 1 \
  --run-dir "$T/late.rd" -- true >"$T/late.out" 2>"$T/late.err" || rc=$?
[ "$rc" = 1 ] || { bad "a join after the end: exit $rc, want 1"; sed 's/^/  /' "$T/late.err"; }
grep -q "the leader at 127.0.0.1:$P is gone; if the job failed over, join through its successor.*static:SUCCESSOR:$P" "$T/late.err" ||
  { bad "a join after the end: no word of the successor"; sed 's/^/  /' "$T/late.err"; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) processes left behind"
[ "$fail" = 0 ] && echo "PASS multinode_join_failover"
exit "$fail"
