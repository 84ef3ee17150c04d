#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A recovery has two figures (docs/events.md, "resumed"; docs/launch.md):
# the respawn (failure seen -> every rank running again) and training
# resumed (failure seen -> the first heartbeat or output line of a
# restarted rank). The restarted ranks here show life only DELAY seconds
# after they start, so resumed >= DELAY > respawn, in events.jsonl, the
# end event and the end line, for:
#  1. one node, in-place restart, the sign an output line;
#  2. --emulate 2 nodes, in-place restart, the sign a heartbeat touch;
#  3. --emulate 2+1 nodes, a node's agent SIGKILLed: replaced by the spare
#     (one rank a node: the story says "rank 1 of k2", singular);
#  4. 2 separate agents over the static TCP rendezvous (the V packet
#     travels through the node's relay and the leader's connection), and 3
#     (2 + a spare) with a node's par3drun SIGKILLed: replaced;
#  5. restarted ranks that never beat nor print: no resumed figure, said so.
. "$(dirname "$0")/lib/launch_common.sh"
DELAY=1.0
CPU=$P3D_SRC/examples/topologies/cpu-only.xml

# w.sh: generation 0 notes its agent, rank $FAIL_RANK fails once the
# others run; later generations wait DELAY, then show life ($SIGN: out,
# beat or none), then end.
cat >"$T/w.sh" <<'SH'
#!/bin/sh
if [ "$P3D_RESTART_COUNT" = 0 ]; then
  echo "$PPID" >"$T_DIR/agent-$P3D_NODE"
  touch "$T_DIR/up-$RANK"
  if [ "$RANK" = "$FAIL_RANK" ]; then
    while [ "$(ls "$T_DIR" | grep -c '^up-')" -lt "$WORLD_SIZE" ]; do sleep 0.02; done
    exit 3
  fi
  exec sleep 100
fi
sleep "$DELAY"
case "$SIGN" in
  out) echo "rank $RANK resumed" ;;
  beat) touch "$P3D_HEARTBEAT" ;;
esac
sleep 0.3
exit 0
SH
chmod +x "$T/w.sh"

fresh() { T_DIR=$T/$1; rm -rf "$T_DIR"; mkdir -p "$T_DIR"; export T_DIR; }
# the figures of events file $1: "respawn resumed" from the end event
figures() {
  python3 - "$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
end = [e for e in ev if e["event"] == "end"][-1]
res = [e for e in ev if e["event"] == "resumed"]
run = [e for e in ev if e["event"] == "running" and "recovery_s" in e]
assert len(res) <= 1, "more than one resumed event for one restart: %r" % res
if res:
    assert res[0]["resumed_s"] == end["resumed_max_s"], (res, end)
    assert res[0]["restart"] == 1 and res[0]["node"], res
assert run and run[0]["recovery_s"] == end["recovery_max_s"], (run, end)
print(end["recovery_max_s"], end["resumed_max_s"] if end["resumed_max_s"] is not None else "null")
PY
}
# checks the figures of $T_DIR/rd and the end line in $T_DIR/out
check() { # what
  local f respawn resumed
  f=$(figures "$T_DIR/rd/events.jsonl") || { cat "$T_DIR/rd/events.jsonl"; fail "$1: events.jsonl"; }
  read -r respawn resumed <<<"$f"
  [ "$resumed" != null ] || { cat "$T_DIR/out" "$T_DIR/rd/events.jsonl"; fail "$1: no resumed figure"; }
  awk -v s="$resumed" -v p="$respawn" -v d="$DELAY" 'BEGIN {exit !(s >= d && s > p)}' ||
    { cat "$T_DIR/rd/events.jsonl"; fail "$1: resumed $resumed s, respawn $respawn s: want resumed >= $DELAY > respawn"; }
  grep -q "ended: exit 0 after [0-9.]* s, 1 restart (slowest: respawn [0-9.]* s, training resumed [0-9.]* s after the failure)" \
    "$T_DIR/out" || { cat "$T_DIR/out"; fail "$1: the end line lacks both figures"; }
  echo "$1: respawn $respawn s, training resumed $resumed s" >&2
}

# ---- 1. one node, an output line ------------------------------------------
fresh one
T_DIR=$T_DIR FAIL_RANK=1 SIGN=out DELAY=$DELAY "$PAR3DRUN" --topology "$CPU" --nproc-per-node 3 --max-restarts 1 \
  --grace 2 --verbose --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1 || { cat "$T_DIR/out"; fail "one node: exit $?"; }
check "one node"
grep -q '^par3drun: restart 1: training resumed [0-9.]* s after the failure was seen (first heartbeat or output, node ' \
  "$T_DIR/out" || { cat "$T_DIR/out"; fail "one node: --verbose does not say when training resumed"; }
# one summary: the end line's (--verbose once printed another before it)
[ "$(grep -c 'slowest' "$T_DIR/out")" = 1 ] || { cat "$T_DIR/out"; fail "one node: the recovery summary is not said once"; }

# ---- 2. --emulate, 2 nodes, a heartbeat -------------------------------------
fresh emu
FAIL_RANK=9 SIGN=beat DELAY=$DELAY "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --max-restarts 1 \
  --grace 2 --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1 || { cat "$T_DIR/out"; fail "emulate: exit $?"; }
check "emulated 2 nodes"

# ---- 3. --emulate, a node lost, its ranks on the spare ----------------------
fresh heal
printf '{"nodes": [{"name": "k[1-3]", "topology": "%s", "rack": "r1"}]}\n' "$CPU" >"$T_DIR/three.json"
( set +e; FAIL_RANK=-1 SIGN=beat DELAY=$DELAY "$PAR3DRUN" --emulate --cluster "$T_DIR/three.json" --nproc-per-node 1 \
    --spares 1 --max-restarts 1 --grace 2 --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1
  echo $? >"$T_DIR/rc" ) &
for _ in $(seq 600); do [ "$(ls "$T_DIR" | grep -c '^up-')" -ge 2 ] && break; sleep 0.02; done
[ -s "$T_DIR/agent-k2" ] || fail "heal: node k2's ranks did not start"
kill -9 "$(cat "$T_DIR/agent-k2")"
wait
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "heal: exit $(cat "$T_DIR/rc")"; }
grep -q '; rank 1 of k2 moved to spare k3 (same rack r1); restarting all ranks' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "heal: no replacement, or not 'rank 1' (singular)"; }
check "emulated node replaced"
grep -q '^par3drun: what happened: 1 node replaced, 1 restart, slowest recovery [0-9.]* s to respawn .*, [0-9.]* s to training resumed' \
  "$T_DIR/out" || { cat "$T_DIR/out"; fail "heal: the summary lacks both figures"; }
grep -q 'training resumed (restart 1: first heartbeat or output, node k[13]), [0-9.]* s after the failure was seen' \
  "$T_DIR/out" || { cat "$T_DIR/out"; fail "heal: the story lacks training resumed"; }

# ---- 4. two separate agents over the static TCP rendezvous -----------------
fresh tcp
head -c 24 /dev/urandom | base64 >"$T/token"
chmod 600 "$T/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 0 1; do
  FAIL_RANK=3 SIGN=out DELAY=$DELAY "$PAR3DRUN" --nnodes 2 --node-rank $i --rdzv "static:127.0.0.1:$port" \
    --rdzv-token-file "$T/token" --topology "$CPU" --nproc-per-node 2 --max-restarts 1 --grace 2 \
    --run-dir "$T_DIR/rd$i" -- "$T/w.sh" >"$T_DIR/out$i" 2>&1 &
  eval "N$i=\$!"
done
wait "$N0" || { cat "$T_DIR/out0" "$T_DIR/out1"; fail "tcp: the leader failed"; }
wait "$N1" || { cat "$T_DIR/out1"; fail "tcp: node 1 failed"; }
mv "$T_DIR/rd0" "$T_DIR/rd"
cp "$T_DIR/out0" "$T_DIR/out"
check "separate agents"
grep -q '"event": "resumed", "restart": 1, "node": "[^"]*", "resumed_s"' "$T_DIR/rd/events.jsonl" ||
  fail "tcp: no resumed event"

# ---- 4b. separate agents, a node lost, its ranks on the spare ---------------
fresh tcpheal
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 0 1 2; do
  FAIL_RANK=-1 SIGN=out DELAY=$DELAY "$PAR3DRUN" --nnodes 3 --node-rank $i --rdzv "static:127.0.0.1:$port" \
    --rdzv-token-file "$T/token" --topology "$CPU" --nproc-per-node 2 --spares 1 --max-restarts 1 --grace 2 \
    --run-dir "$T_DIR/rd$i" -- "$T/w.sh" >"$T_DIR/out$i" 2>&1 &
  eval "N$i=\$!"
done
for _ in $(seq 600); do [ "$(ls "$T_DIR" | grep -c '^up-')" -ge 4 ] && break; sleep 0.02; done
[ "$(ls "$T_DIR" | grep -c '^up-')" -ge 4 ] || fail "tcp heal: the ranks did not start"
kill -9 "$N1" # node rank 1 runs ranks; node rank 2 is the spare
wait "$N0" || { cat "$T_DIR/out0"; fail "tcp heal: the leader failed"; }
wait "$N2" || { cat "$T_DIR/out2"; fail "tcp heal: the spare failed"; }
wait "$N1" 2>/dev/null || true
grep -q 'moved to spare' "$T_DIR/out0" || { cat "$T_DIR/out0"; fail "tcp heal: no replacement"; }
mv "$T_DIR/rd0" "$T_DIR/rd"
cp "$T_DIR/out0" "$T_DIR/out"
check "separate agents, node replaced"

# ---- 5. no sign of life after the restart ----------------------------------
fresh none
FAIL_RANK=1 SIGN=none DELAY=0.2 "$PAR3DRUN" --topology "$CPU" --nproc-per-node 2 --max-restarts 1 --grace 2 \
  --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1 || { cat "$T_DIR/out"; fail "none: exit $?"; }
f=$(figures "$T_DIR/rd/events.jsonl") || fail "none: events.jsonl"
[ "${f#* }" = null ] || { cat "$T_DIR/rd/events.jsonl"; fail "none: a resumed figure ($f) without any sign of life"; }
grep -q "1 restart (slowest: respawn [0-9.]* s after the failure; training resumed not seen (no heartbeat or output since))" "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "none: the end line does not say training resumed was not seen"; }
echo "ok"
