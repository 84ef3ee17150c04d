#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/recovery.sh — how long the one job controller takes to recover from
# a failed rank (in-place restart, --max-restarts): from the failure report
# to every agent reporting its ranks running again, as the controller
# measures it (--verbose), for an emulated 2-node job (16 ranks) and a
# single node (8 ranks), with the default --grace; and from a node killed
# (its agent SIGKILLed) to every rank running again on a spare, for 4+1
# emulated nodes (--spares 1, 4 CPU ranks per node: the controller's own
# cost, not a worker's start time), emulated and with 5 separate agents
# over the static TCP rendezvous on loopback; and from a node killed with
# no spare left to every rank running at the smaller width (an elastic
# job, --min-dp: the shrink); and from a node that joins the shrunk job
# to every rank running at the full width again (the grow). Median of RUNS
# runs.
# Two columns: respawn (failure seen -> every rank running again) and
# resumed (failure seen -> the first output line of a restarted rank: the
# restarted ranks here print one line at once and end, so the difference
# is the ranks' own start: fork, exec, the shell; across nodes resumed can
# be the smaller figure: one node's first rank prints before the last node
# has reported its ranks up). Both from the leader's
# events.jsonl (running/recovery_s, resumed/resumed_s; docs/events.md).
# And from the leader killed to every rank running under its successor
# (leader failover): over the static rendezvous (the successor acts on a
# majority) and, where etcd and the etcd plugin are there, through a real
# etcd of tests/services/etcd.sh (the successor acts once etcd elected it).
# Prints figures, never fails on time.
#
#   bench/recovery.sh [BUILD_DIR]          (default: build)
#   RUNS=9 bench/recovery.sh build
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-9}
par3drun=$build/par3drun
cluster=examples/clusters/2x-dgx-h100.json
T=$(mktemp -d /tmp/p3d-recovery.XXXXXX)
ETCD_DIR=
trap '[ -n "$ETCD_DIR" ] && tests/services/etcd.sh stop "$ETCD_DIR"; rm -rf "$T"' EXIT
cat >"$T/w.sh" <<'SH'
#!/bin/sh
# rank 3 fails once the others are up; the restarted ranks print one
# line (training resumed) and end
if [ "$P3D_RESTART_COUNT" = 0 ]; then
  touch "$T_DIR/up-$RANK"
  if [ "$RANK" = 3 ]; then
    while [ "$(ls "$T_DIR" | grep -c '^up-')" -lt "$WORLD_SIZE" ]; do sleep 0.01; done
    exit 3
  fi
  exec sleep 100
fi
echo "rank $RANK resumed"
exit 0
SH
chmod +x "$T/w.sh"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# the figures of restart 1 in events file $1: one line to $T/times (respawn)
# and one to $T/resumed (training resumed; "-" when none was seen)
figures() {
  local r s
  r=$(sed -n 's/.*"event": "running", "restart": 1, "recovery_s": \([0-9.]*\).*/\1/p' "$1")
  s=$(sed -n 's/.*"event": "resumed", "restart": 1, .*"resumed_s": \([0-9.]*\).*/\1/p' "$1")
  echo "$r" >>"$T/times"
  echo "${s:--}" >>"$T/resumed"
}
# one result line: label, what the respawn figure is
report() {
  printf '%-34s respawn median %s s, resumed median %s s over %d runs (%s)\n' "$1" "$(median <"$T/times")" \
    "$(grep -v '^-$' "$T/resumed" | median)" "$runs" "$2"
}
run() { # label, par3drun args...
  local label=$1; shift
  : >"$T/times"
  : >"$T/resumed"
  for _ in $(seq "$runs"); do
    rm -f "$T"/up-*
    rm -rf "$T/rd"
    T_DIR=$T "$par3drun" --max-restarts 1 --run-dir "$T/rd" "$@" -- "$T/w.sh" >"$T/out" 2>&1 || { cat "$T/out"; exit 1; }
    figures "$T/rd/events.jsonl"
  done
  report "$label" "failure seen -> all ranks running again / -> a restarted rank's first line"
}
run "emulated 2 nodes x 8 ranks" --emulate --cluster "$cluster" --tp 2 --pp 2 --dp 4
run "one node, 8 CPU ranks" --topology examples/topologies/cpu-only.xml --nproc-per-node 8

# ---- a node killed -> its ranks running again on the spare ----------------
cat >"$T/k.sh" <<'SH'
#!/bin/sh
# generation 0: note the agent's PID per node, wait; later: end at once
if [ "$P3D_RESTART_COUNT" = 0 ]; then
  echo "$PPID" >"$T_DIR/agent-$P3D_NODE"
  touch "$T_DIR/up-$RANK"
  exec sleep 100
fi
echo "rank $RANK resumed"
exit 0
SH
chmod +x "$T/k.sh"
printf '{"nodes": [{"name": "k[1-3]", "topology": "%s", "rack": "r1"}, {"name": "k[4-5]", "topology": "%s", "rack": "r2"}]}\n' \
  "$PWD/examples/topologies/cpu-only.xml" "$PWD/examples/topologies/cpu-only.xml" >"$T/five.json"
: >"$T/times"
: >"$T/resumed"
for _ in $(seq "$runs"); do
  rm -f "$T"/up-* "$T"/agent-*
  rm -rf "$T/rd"
  ( T_DIR=$T "$par3drun" --emulate --cluster "$T/five.json" --nproc-per-node 4 --tp 2 --pp 2 --spares 1 \
      --max-restarts 1 --run-dir "$T/rd" -- "$T/k.sh" >"$T/out" 2>&1; echo $? >"$T/rc" ) &
  for _ in $(seq 600); do [ "$(ls "$T" | grep -c '^up-')" -ge 16 ] && break; sleep 0.01; done
  kill -9 "$(cat "$T/agent-k4")"
  wait
  [ "$(cat "$T/rc")" = 0 ] || { cat "$T/out"; exit 1; }
  figures "$T/rd/events.jsonl"
done
report "emulated 4+1 nodes x 4 ranks" "node killed -> all ranks running again on the spare / -> a first line"
# ---- a node killed, no spare, --min-dp: the job shrinks -------------------
# (docs/launch.md, "Elastic width") 4 emulated nodes, one data-parallel
# replica each (tp2 pp2 on 4 CPU ranks), no spare, --min-dp 2: k4's agent
# SIGKILLed; the figure is failure seen -> every rank running at dp 3 (the
# shrink's restart 1, events.jsonl running/recovery_s)
printf '{"nodes": [{"name": "k[1-4]", "topology": "%s", "rack": "r1"}]}\n' \
  "$PWD/examples/topologies/cpu-only.xml" >"$T/four.json"
: >"$T/times"
: >"$T/resumed"
for _ in $(seq "$runs"); do
  rm -f "$T"/up-* "$T"/agent-*
  rm -rf "$T/rd"
  ( T_DIR=$T "$par3drun" --emulate --cluster "$T/four.json" --nproc-per-node 4 --tp 2 --pp 2 --min-dp 2 \
      --max-restarts 1 --run-dir "$T/rd" -- "$T/k.sh" >"$T/out" 2>&1; echo $? >"$T/rc" ) &
  for _ in $(seq 600); do [ "$(ls "$T" | grep -c '^up-')" -ge 16 ] && break; sleep 0.01; done
  kill -9 "$(cat "$T/agent-k4")"
  wait
  [ "$(cat "$T/rc")" = 0 ] && grep -q '"event": "shrink"' "$T/rd/events.jsonl" || { cat "$T/out"; exit 1; }
  figures "$T/rd/events.jsonl"
done
report "shrink: emulated 4 nodes -> dp 3" "node killed, no spare -> all ranks running at the smaller width / -> a first line"
# ---- the same over the static TCP rendezvous: 5 separate agents -----------
# (4 used + 1 spare, 4 CPU ranks each) on loopback; node rank 2's agent
# SIGKILLed; the leader's events.jsonl holds the recovery time
cat >"$T/s.sh" <<'SH'
#!/bin/sh
if [ "$P3D_RESTART_COUNT" = 0 ]; then
  touch "$T_DIR/up-$RANK"
  exec sleep 100
fi
echo "rank $RANK resumed"
exit 0
SH
chmod +x "$T/s.sh"
head -c 24 /dev/urandom | base64 >"$T/token"
chmod 600 "$T/token"
: >"$T/times"
: >"$T/resumed"
for _ in $(seq "$runs"); do
  rm -f "$T"/up-*
  rm -rf "$T"/srd*
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pids=()
  for i in 0 1 2 3 4; do
    T_DIR=$T "$par3drun" --nnodes 5 --node-rank "$i" --rdzv "static:127.0.0.1:$port" --rdzv-token-file "$T/token" \
      --topology examples/topologies/cpu-only.xml --nproc-per-node 4 --tp 2 --pp 2 --spares 1 --max-restarts 1 \
      --run-dir "$T/srd$i" -- "$T/s.sh" >"$T/sout$i" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1000); do [ "$(ls "$T" | grep -c '^up-')" -ge 16 ] && break; sleep 0.01; done
  kill -9 "${pids[2]}"
  for i in 0 1 3 4; do wait "${pids[$i]}" 2>/dev/null || { cat "$T/sout0"; exit 1; }; done
  wait "${pids[2]}" 2>/dev/null || true
  figures "$T/srd0/events.jsonl"
done
report "static TCP 4+1 agents x 4 ranks" "node killed -> all ranks running again on the spare / -> a first line"
# ---- a node joins a shrunk job -> it grows back --------------------------------
# (docs/launch.md, "A running job shrinks and grows") 3 static agents on
# loopback, one replica each (tp2 on 2 rank slots of a DGX H100 topology:
# a grow places whole TP groups on one NVLink domain), no spare, --min-dp
# 1, --grow-wait 0 (these ranks report no checkpoint: the grow comes at the
# controller's next look at the spares, at most 1 s); node rank 2's agent
# SIGKILLed -> dp 2; then a par3drun --join: figures from the leader's
# events.jsonl: the join record to every rank running at dp 3 again (the
# wait for the next look included), and the grow's own respawn (grow_s:
# the grow decided -> every rank running at the wider placement)
cat >"$T/g.sh" <<'SH'
#!/bin/sh
[ "$P3D_RESTART_COUNT" = 2 ] && exit 0
touch "$T_DIR/up-$P3D_RESTART_COUNT-$RANK"
exec sleep 100
SH
chmod +x "$T/g.sh"
: >"$T/times"
: >"$T/resumed"
for _ in $(seq "$runs"); do
  rm -f "$T"/up-*
  rm -rf "$T"/grd*
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  pids=()
  for i in 0 1 2; do
    T_DIR=$T "$par3drun" --nnodes 3 --node-rank "$i" --rdzv "static:127.0.0.1:$port" --rdzv-token-file "$T/token" \
      --topology examples/topologies/dgx-h100.xml --nproc-per-node 2 --tp 2 --min-dp 1 --grow-wait 0 \
      --max-restarts 2 --run-dir "$T/grd$i" -- "$T/g.sh" >"$T/gout$i" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1000); do [ "$(ls "$T" | grep -c '^up-0-')" -ge 6 ] && break; sleep 0.01; done
  kill -9 "${pids[2]}"
  wait "${pids[2]}" 2>/dev/null || true
  for _ in $(seq 1000); do [ "$(ls "$T" | grep -c '^up-1-')" -ge 4 ] && break; sleep 0.01; done
  T_DIR=$T "$par3drun" --join --rdzv "static:127.0.0.1:$port" --rdzv-token-file "$T/token" \
    --topology examples/topologies/dgx-h100.xml --nproc-per-node 2 --run-dir "$T/grd3" -- "$T/g.sh" >"$T/gout3" 2>&1 &
  pids+=($!)
  for i in 0 1 3; do wait "${pids[$i]}" 2>/dev/null || { cat "$T/gout0"; exit 1; }; done
  python3 - "$T/grd0/events.jsonl" >>"$T/times" 2>>"$T/resumed" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
j = next(e for e in ev if e["event"] == "join")
g = next(e for e in ev if e["event"] == "grow")
r = next(e for e in ev if e["event"] == "running" and e.get("restart") == g["restart"])
assert (g["old_dp"], g["new_dp"]) == (2, 3), g
print("%.3f" % (r["t"] - j["t"]))
print("%.3f" % r["grow_s"], file=sys.stderr)
PY
done
printf '%-34s join -> grown median %s s, the grow'"'"'s respawn median %s s over %d runs (%s)\n' \
  "join -> grown: static 2+1 agents" "$(median <"$T/times")" "$(median <"$T/resumed")" "$runs" \
  "join record -> all ranks running at dp 3 / grow decided -> all ranks running"
# ---- the leader killed -> a successor takes over ----------------------------
# (docs/multinode.md, "When the leader dies") the same 5 agents, --node-timeout
# 3; node rank 0's par3drun SIGKILLed: node rank 1 takes over once it may
# (static: a majority rejoined it; etcd: etcd elected it, the old leader's
# lease TTL being --node-timeout too) and the old leader's fence passed (its
# last heartbeat + --node-timeout + 1 s); its events.jsonl holds the time
# from the last heartbeat to every rank running (target: --node-timeout +
# 2 s + the start).
# leader_lost LABEL WHAT DECIDED RDZV: RUNS runs; RDZV K sets RZ, the --rdzv
# arguments of run K; DECIDED: the takeover record's decided_by; WHAT: what
# the figure measures, for the result line
leader_lost() {
  local label=$1 what=$2 decided=$3 rdzv=$4 k i
  : >"$T/times"
  for k in $(seq "$runs"); do
    rm -f "$T"/up-*
    rm -rf "$T"/srd*
    "$rdzv" "$k"
    pids=()
    for i in 0 1 2 3 4; do
      T_DIR=$T P3D_PLUGIN_DIR=$build/plugins "$par3drun" --nnodes 5 --node-rank "$i" "${RZ[@]}" \
        --topology examples/topologies/cpu-only.xml --nproc-per-node 4 --tp 2 --pp 2 --spares 1 --max-restarts 1 \
        --node-timeout 3 --verbose --run-dir "$T/srd$i" -- "$T/s.sh" >"$T/sout$i" 2>&1 &
      pids+=($!)
    done
    for _ in $(seq 1000); do [ "$(ls "$T" | grep -c '^up-')" -ge 16 ] && break; sleep 0.01; done
    # every other node holds the successor list (it says so under --verbose)
    for _ in $(seq 1000); do
      [ "$(grep -l 'the successor list of restart 0' "$T"/sout[1234] 2>/dev/null | wc -l)" = 4 ] && break
      sleep 0.01
    done
    kill -9 "${pids[0]}"
    for i in 1 2 3 4; do wait "${pids[$i]}" 2>/dev/null || { cat "$T/sout1"; exit 1; }; done
    wait "${pids[0]}" 2>/dev/null || true
    sed -n "s/.*\"event\": \"takeover\".*\"heartbeat_to_running_s\": \([0-9.]*\).*\"decided_by\": \"$decided\".*/\1/p" \
      "$T/srd1/events.jsonl" >>"$T/times"
  done
  printf '%-34s median %s s over %d runs (%s; --node-timeout 3)\n' "$label" "$(median <"$T/times")" "$runs" "$what"
}
rdzv_static() {
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  RZ=(--rdzv "static:127.0.0.1:$port" --rdzv-token-file "$T/token")
}
# etcd holds no secret: the job key comes from each node (P3D_RDZV_TOKEN)
rdzv_etcd() { export P3D_RDZV_TOKEN=bench-key-$$; RZ=(--rdzv "etcd:$url" --job-id "bench-$$-$1"); }
leader_lost "static TCP leader lost, 4+1 agents" "leader killed -> all ranks running under its successor" majority \
  rdzv_static
# the same through a real etcd (node ranks by --node-rank), where there is one
if [ -f "$build/plugins/p3d_rdzv_etcd.so" ] && command -v etcd >/dev/null; then
  ETCD_DIR=$T/etcd
  url=$(tests/services/etcd.sh start "$ETCD_DIR")
  leader_lost "etcd leader lost, 4+1 agents" "leader killed -> elected by etcd -> all ranks running" election rdzv_etcd
else
  echo "etcd leader lost: skipped (no etcd, or the etcd plugin is not built)"
fi
