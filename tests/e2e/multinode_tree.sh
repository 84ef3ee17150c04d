#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_tree.sh — issue 16: 40 par3drun agents on loopback meet through
# the static rendezvous with --rdzv-fanout 4, a distribution tree of depth 3
# (0 -> 1..4 -> 5..20 -> 21..39): the records go up and the compact
# placement comes down the tree, and every node writes a placement.json with
# the same sha256; a wrong token is refused by an interior agent (not only
# by the leader); a SIGKILLed interior agent ends the rendezvous on every
# node with a message naming it.
. "$(dirname "$0")/lib/multinode_lib.sh"
N=40
K=4

# tagent NAME I PORT [extra...] -- PROGRAM: one agent of the tree job
tagent() {
  local name=$1 i=$2 port=$3; shift 3
  agent "$name" "$i" "$N" "$port" --rdzv-fanout "$K" --nproc-per-node 2 --rdzv-timeout 60 "$@"
}

wait_for() { # FILE PATTERN: up to 60 s
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# ---- 1. depth 3: the same placement.json everywhere ---------------------------
P=$(free_port)
for i in $(seq 0 $((N - 1))); do
  v=(); [ "$i" = 0 ] && v=(--verbose)
  tagent ok "$i" "$P" "${v[@]}" --tp 2 -- sh -c 'echo "rank=$RANK node=$NODE_RANK"'
done
for i in $(seq 0 $((N - 1))); do
  wait "${AG[$i]}"; rc=$?
  [ "$rc" = 0 ] || { bad "tree: node $i exit $rc"; sed 's/^/  /' "$T/ok.$i.err" | head -5; }
done
sum0=$(sha256sum <"$T/ok.rd0/placement.json")
nsame=0
for i in $(seq 0 $((N - 1))); do
  [ "$(sha256sum <"$T/ok.rd$i/placement.json" 2>/dev/null)" = "$sum0" ] && nsame=$((nsame + 1))
done
[ "$nsame" = "$N" ] || bad "tree: placement.json identical on $nsame of $N nodes"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["world_size"]==80 and len(d["ranks"])==80' \
  "$T/ok.rd0/placement.json" || bad "tree: placement.json is not an 80-rank report"
grep -q 'sent to 4 tree children' "$T/ok.0.err" || { bad "tree: the leader did not send to its 4 children only"; sed 's/^/  /' "$T/ok.0.err"; }
[ "$(cat "$T"/ok.*.out | grep -o 'rank=[0-9]*' | sort -u | wc -l)" = 80 ] || bad "tree: not 80 distinct ranks ran"
echo "tree: $N nodes, fan-out $K: placement.json $(wc -c <"$T/ok.rd0/placement.json") bytes, same sha256 on $nsame nodes"
grep -o 'the leader sent [0-9]* bytes' "$T/ok.0.err"

# ---- 2. a wrong token is refused by an interior agent -------------------------
# node 39's parent is node 9 (depth 2); without node 39, node 9 keeps
# listening for its children, and an impostor tries it with a bad token
P=$(free_port)
for i in $(seq 0 $((N - 2))); do
  v=(); [ "$i" = 9 ] && v=(--verbose)
  tagent tok "$i" "$P" "${v[@]}" --tp 2 -- true
done
wait_for "$T/tok.9.err" 'node\[9\] listening for its' || bad "token: node 9 never listened for its children"
ep=$(grep -o 'node\[9\] listening for its [0-9]* tree children on [^ ]*' "$T/tok.9.err" | awk '{print $NF}')
proto=$(sed -n 's/^#define P3D_WIRE_PROTO \([0-9]*\).*/\1/p' "$P3D_SRC/launcher/wire/wire.h")
[ -n "$proto" ] || bad "no P3D_WIRE_PROTO in launcher/wire/wire.h"
reply=$(python3 - "${ep%:*}" "${ep##*:}" "$proto" <<'PY'
# a stranger without the job key: the challenge (this build's wire
# protocol, a tree link), then a proof it cannot compute
import os, socket, struct, sys
def frame(t, body): return struct.pack(">I", len(body) + 1) + bytes([t]) + body
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.sendall(frame(ord("A"), struct.pack(">II", int(sys.argv[3]), 2) + os.urandom(32)))
def one():
    h = b""
    while len(h) < 4:
        x = c.recv(4 - len(h))
        if not x: return None, b""
        h += x
    n = struct.unpack(">I", h)[0]
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x: break
        b += x
    return b[:1], b[1:]
t, body = one()
if t != b"B" or len(body) != 64:
    print("no handshake answer: %r" % (t,)); sys.exit(0)
c.sendall(frame(ord("E"), os.urandom(32)))
try:
    t, body = one()
except OSError:
    t, body = None, b""
print((body[4:] if t == b"N" else b"no refusal").decode(errors="replace"))
PY
)
case "$reply" in *"wrong job token"*) ;; *) bad "token: the interior agent answered: $reply" ;; esac
grep -q 'refused .*wrong job token' "$T/tok.9.err" || bad "token: node 9 did not log the refusal"
tagent tok 39 "$P" --tp 2 -- true
codes=""
for i in $(seq 0 $((N - 1))); do wait "${AG[$i]}"; rc=$?; [ "$rc" = 0 ] || codes="$codes $i:$rc"; done
[ -z "$codes" ] || bad "token: after the refusal the job did not run everywhere:$codes"

# ---- 3. a killed interior agent: every node ends, naming it --------------------
P=$(free_port)
for i in $(seq 0 $((N - 2))); do
  v=(); [ "$i" = 9 ] && v=(--verbose)
  tagent kill "$i" "$P" "${v[@]}" --tp 2 -- true
done
# node 9 dies once its children 37 and 38 hang below it (39 never comes)
wait_for "$T/kill.9.err" 'attached its tree child node\[37\]' || bad "kill: node 37 never attached to node 9"
wait_for "$T/kill.9.err" 'attached its tree child node\[38\]' || bad "kill: node 38 never attached to node 9"
kill -KILL "${AG[9]}"
t0=$(now_ms)
codes=""
for i in $(seq 0 $((N - 2))); do
  [ "$i" = 9 ] && continue
  wait "${AG[$i]}"; rc=$?; [ "$rc" != 0 ] || codes="$codes $i"
done
t1=$(now_ms)
wait "${AG[9]}" 2>/dev/null
[ -z "$codes" ] || bad "kill: nodes exited 0 without their interior agent:$codes"
echo "kill: every node ended $((t1 - t0)) ms after node 9 was killed"
grep -q 'node\[9\] .*was lost before the placement was sent.*interior agent' "$T/kill.0.err" ||
  { bad "kill: the leader did not name the lost interior agent"; sed 's/^/  /' "$T/kill.0.err"; }
for c in 37 38 1 20; do
  grep -q 'node\[9\]' "$T/kill.$c.err" || { bad "kill: node $c was not told about node 9"; sed 's/^/  /' "$T/kill.$c.err"; }
done
[ "$(leftovers)" = 0 ] || bad "kill: $(leftovers) workers left behind"

[ "$fail" = 0 ] && echo "PASS multinode_tree"
exit "$fail"
