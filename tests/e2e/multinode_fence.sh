#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_fence.sh — fencing by generation over the static TCP rendezvous
# (separate par3drun processes on loopback), 5 nodes, --spares 1, tp8,
# --node-timeout 3 on the leader (the others take it from its heartbeat).
# The workers follow docs/launch.md's "Fencing" recipe: every shard is
# named by its P3D_GENERATION, a step is committed by a marker naming the
# generation, and nobody writes into a step a newer generation committed.
# Each replacement rank, when it starts, looks whether its old copy (the
# PID its generation-0 self recorded) still runs: that would be a rank
# running twice at once (a stopped copy, state T, runs nothing: case 2
# checks that it is gone soon after SIGCONT).
#  1. only node rank 2's par3drun process is SIGSTOPped (its agent and
#     ranks run on): the leader replaces it; the node's agent hears
#     nothing from it and ends its ranks by itself; the leader starts the
#     replacement only after that deadline: no old copy runs when its
#     replacement starts; the survivors exit 0.
#  2. node rank 2's par3drun, agent and ranks are all SIGSTOPped: the
#     leader replaces it and the job ends 0; after SIGCONT every old rank
#     of node 2 is gone within 2 s, node 2 exits 1, and every file of a
#     step committed by generation 1 is byte-identical before and after.
. "$(dirname "$0")/lib/multinode_lib.sh"

trap 'thaw_kill; cleanup' EXIT

# the worker: generation 0 runs until ended; generation 1 runs 6 steps,
# rank 0 commits step 3 (the marker holds the generation)
cat >"$T/w.sh" <<'SH'
#!/bin/sh
G=$P3D_GENERATION
D=$T_RUN
echo "rank=$RANK gen=$G pid=$$ node=$P3D_NODE"
if [ "$G" = 0 ]; then
  echo $$ >"$D/pid.$RANK"
else
  old=$(cat "$D/pid.$RANK" 2>/dev/null)
  st=$(awk '{print $3}' "/proc/$old/stat" 2>/dev/null)
  # a zombie or a stopped (T) process runs nothing
  if [ -n "$old" ] && [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != T ]; then
    echo "rank $RANK: its generation-0 copy $old still runs ($st) as generation $G starts" >>"$D/twice"
  fi
fi
step=0
while :; do
  sleep 0.1
  step=$((step + 1))
  s="$D/ck/step-$step"
  mkdir -p "$s"
  # never write into a step that a newer generation committed
  if [ -e "$s/COMMITTED" ] && [ "$(cat "$s/COMMITTED")" -gt "$G" ]; then continue; fi
  echo "rank $RANK step $step generation $G" >"$s/.rank-$RANK.gen-$G.tmp" && mv "$s/.rank-$RANK.gen-$G.tmp" "$s/rank-$RANK.gen-$G"
  if [ "$G" != 0 ]; then
    [ "$RANK" = 0 ] && [ "$step" = 3 ] && { echo "$G" >"$s/.COMMITTED.tmp"; mv "$s/.COMMITTED.tmp" "$s/COMMITTED"; }
    [ "$step" -ge 6 ] && exit 0
  fi
done
SH
chmod +x "$T/w.sh"

run() { # NAME: the 5 nodes on a fresh port, T_RUN=$T/NAME
  local name=$1 i
  P=$(free_port)
  mkdir -p "$T/$name/ck"
  for i in 0 1 2 3 4; do
    local to=()
    [ "$i" = 0 ] && to=(--node-timeout 3)
    agent "$name" $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 "${to[@]}" --env "T_RUN=$T/$name" \
      -- "$T/w.sh"
  done
  for _ in $(seq 400); do
    [ "$(cat "$T/$name".*.out 2>/dev/null | grep -c 'gen=0')" -ge 32 ] && return 0
    sleep 0.05
  done
  bad "$name: the 32 ranks did not start"
}
# the generation-0 PIDs of node 2's ranks (16-23)
old_pids() { grep -ho 'gen=0 pid=[0-9]*' "$T/$1.2.out" | sed 's/.*pid=//'; }
# how many of those still run (a zombie does not)
old_alive() {
  local p st n=0
  for p in $(old_pids "$1"); do
    st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ] && n=$((n + 1))
  done
  echo $n
}
survivors() { # sets codes: the exit codes of nodes 0 1 3 4
  local i
  codes=""
  for i in 0 1 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
}
committed() { # NAME: checksums of every file of a step generation 1 committed
  local s
  for s in "$T/$1"/ck/step-*; do
    [ "$(cat "$s/COMMITTED" 2>/dev/null)" = 1 ] || continue
    (cd "$s" && sha256sum COMMITTED rank-*.gen-1 | sed "s|^|$(basename "$s") |")
  done
}

# ---- 1. only the par3drun process frozen: its ranks run on --------------------
run relay
[ "$(old_alive relay)" = 8 ] || bad "relay: node 2's 8 ranks are not running"
kill -STOP "${AG[2]}" && STOPPED+=("${AG[2]}")
t0=$(now_ms)
survivors
echo "relay frozen: the job ended $(($(now_ms) - t0)) ms after node rank 2's par3drun was stopped"
[ "$codes" = " 0 0 0 0" ] || { bad "relay: exit codes$codes, want 0 0 0 0"; sed 's/^/  0: /' "$T/relay.0.err"; }
grep -q 'lost the agent of node [^ ]*:2 (node rank 2): no heartbeat for' "$T/relay.0.err" ||
  { bad "relay: the leader did not declare node 2 lost"; sed 's/^/  /' "$T/relay.0.err"; }
grep -q "node [^ ]*:2: nothing from its supervisor for [0-9.]* s (--node-timeout 3): ending its ranks now" "$T/relay.2.err" ||
  { bad "relay: node 2's agent did not fence itself"; sed 's/^/  /' "$T/relay.2.err"; }
[ "$(cat "$T"/relay.4.out | grep -c 'gen=1')" = 8 ] || bad "relay: the spare did not take node 2's 8 ranks"
[ ! -e "$T/relay/twice" ] || { bad "relay: a rank ran twice at once:"; sed 's/^/  /' "$T/relay/twice"; }
[ "$(old_alive relay)" = 0 ] || bad "relay: $(old_alive relay) old ranks of node 2 still run"
kill -CONT "${AG[2]}"
wait "${AG[2]}"
c2=$?
[ "$c2" = 1 ] || bad "relay: node 2 exited $c2 after SIGCONT, want 1"
STOPPED=()

# ---- 2. the whole node frozen, then SIGCONT ---------------------------------
run node
pids=$(tree "${AG[2]}")
for p in $pids; do kill -STOP "$p" 2>/dev/null && STOPPED+=("$p"); done
t0=$(now_ms)
survivors
echo "node frozen: the job ended $(($(now_ms) - t0)) ms after node rank 2 was stopped"
[ "$codes" = " 0 0 0 0" ] || { bad "node: exit codes$codes, want 0 0 0 0"; sed 's/^/  0: /' "$T/node.0.err"; }
[ "$(cat "$T"/node.4.out | grep -c 'gen=1')" = 8 ] || bad "node: the spare did not take node 2's 8 ranks"
before=$(committed node)
[ -n "$before" ] || bad "node: generation 1 committed no step"
[ "$(old_alive node)" = 8 ] || bad "node: node 2's old ranks are not there (stopped) before SIGCONT"
t1=$(now_ms)
for p in $pids; do kill -CONT "$p" 2>/dev/null; done
gone_ms=-1
for _ in $(seq 40); do
  [ "$(old_alive node)" = 0 ] && { gone_ms=$(($(now_ms) - t1)); break; }
  sleep 0.05
done
echo "node frozen: after SIGCONT node 2's old ranks were gone in $gone_ms ms"
[ "$gone_ms" -ge 0 ] || bad "node: $(old_alive node) old ranks of node 2 still run 2 s after SIGCONT"
wait "${AG[2]}"
c2=$?
STOPPED=()
[ "$c2" = 1 ] || { bad "node: node 2 exited $c2 after SIGCONT, want 1"; sed 's/^/  2: /' "$T/node.2.err"; }
sleep 0.5
after=$(committed node)
[ "$before" = "$after" ] || { bad "node: a committed step changed after SIGCONT"; diff <(echo "$before") <(echo "$after") | sed 's/^/  /'; }
[ ! -e "$T/node/twice" ] || { bad "node: a rank ran twice at once:"; sed 's/^/  /' "$T/node/twice"; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) workers left behind"

[ "$fail" = 0 ] && echo "PASS multinode_fence"
exit "$fail"
