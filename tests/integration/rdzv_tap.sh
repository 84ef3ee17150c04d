#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 44: no secret on the wire, and nothing captured is worth anything.
# A tap on loopback between an agent and the leader records a whole
# 2-node job (lib/tap_proxy.py):
#   1. the job token's bytes appear nowhere in either direction (the
#      handshake proves the key without sending it);
#   2. the agent's captured bytes replayed to a new leader of the same job
#      (same token) are refused: the captured proof answers another nonce;
#      a real agent then joins and the job runs;
#   3. a captured frame sent again on its own connection (the JOIN twice)
#      is refused by its sequence number: the leader names the replay and
#      the job does not start; nothing crashes.
set -u
bin=${PAR3DRUN:?PAR3DRUN must name the par3drun binary}
here=$(cd "$(dirname "$0")" && pwd)
export P3D_DATA_DIR=${P3D_DATA_DIR:-$(cd "$here/../.." && pwd)}
token=tap-test-token-$$-$RANDOM-0123456789
export P3D_RDZV_TOKEN=$token
tmp=$(mktemp -d "${TMPDIR:-/tmp}/p3d-tap.XXXXXX")
leader=; proxy=
cleanup() {
    [ -n "$leader" ] && kill "$leader" 2>/dev/null
    [ -n "$proxy" ] && kill "$proxy" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
. "$here/lib/rdzv_proxy_lib.sh"
fail=0

# ---- 1. a whole job through the tap ------------------------------------------
ports=$(free_ports2); lp=${ports% *}; pp=${ports#* }
"$bin" --rdzv "static:127.0.0.1:$lp" --nnodes 2 --node-rank 0 --rdzv-timeout 30 --nproc-per-node 1 \
    -- /bin/true >"$tmp/leader1.log" 2>&1 &
leader=$!
python3 "$here/lib/tap_proxy.py" tap "$lp" "$pp" "$tmp/cap" 2>"$tmp/proxy1.log" &
proxy=$!
"$bin" --rdzv "static:127.0.0.1:$pp" --nnodes 2 --node-rank 1 --rdzv-timeout 30 --nproc-per-node 1 \
    -- /bin/true >"$tmp/agent1.log" 2>&1
arc=$?
wait "$leader"; lrc=$?
leader=
wait "$proxy" 2>/dev/null; proxy=
[ $arc -eq 0 ] && [ $lrc -eq 0 ] || { echo "FAIL: the job through the tap: agent $arc, leader $lrc"; cat "$tmp/agent1.log" "$tmp/leader1.log"; fail=1; }
up=$(stat -c %s "$tmp/cap.up" 2>/dev/null || echo 0)
down=$(stat -c %s "$tmp/cap.down" 2>/dev/null || echo 0)
[ "$up" -gt 100 ] && [ "$down" -gt 100 ] || { echo "FAIL: the tap saw too little ($up up, $down down)"; fail=1; }
if python3 - "$tmp/cap.up" "$tmp/cap.down" "$token" <<'PY'
import sys
tok = sys.argv[3].encode()
sys.exit(0 if any(tok in open(p, "rb").read() for p in sys.argv[1:3]) else 1)
PY
then
    echo "FAIL: the token's bytes crossed the socket"; fail=1
fi
echo "rdzv_tap: $up bytes up, $down bytes down, no token in them"

# ---- 2. the capture replayed to a new leader of the same job ----------------------
ports=$(free_ports2); lp=${ports% *}
"$bin" --rdzv "static:127.0.0.1:$lp" --nnodes 2 --node-rank 0 --rdzv-timeout 30 --nproc-per-node 1 \
    -- /bin/true >"$tmp/leader2.log" 2>&1 &
leader=$!
reply=$(python3 - "$lp" "$tmp/cap.up" <<'PY'
import socket, sys, time
for _ in range(300):
    try:
        c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
        break
    except OSError:
        time.sleep(0.1)
c.sendall(open(sys.argv[2], "rb").read())
got = b""
try:
    while True:
        x = c.recv(65536)
        if not x: break
        got += x
except OSError:
    pass
# the leader's handshake answer (PROVE) is all it may send: never a tree
# position, which would mean the replayed JOIN was taken
print("joined" if b"W" in got[69:70] else "refused")
PY
)
[ "$reply" = refused ] || { echo "FAIL: the replayed capture got further than the handshake"; fail=1; }
"$bin" --rdzv "static:127.0.0.1:$lp" --nnodes 2 --node-rank 1 --rdzv-timeout 30 --nproc-per-node 1 \
    -- /bin/true >"$tmp/agent2.log" 2>&1
arc=$?
wait "$leader"; lrc=$?
leader=
[ $arc -eq 0 ] && [ $lrc -eq 0 ] || { echo "FAIL: after the replay: agent $arc, leader $lrc"; cat "$tmp/leader2.log"; fail=1; }
grep -q "refused .*wrong job token" "$tmp/leader2.log" ||
    { echo "FAIL: the leader did not name the replayed handshake"; cat "$tmp/leader2.log" "$tmp/agent2.log"; fail=1; }
echo "rdzv_tap: replayed handshake: $(grep -m1 'refused' "$tmp/leader2.log" | cut -c1-160)"

# ---- 3. a frame sent twice on its own connection ---------------------------------
ports=$(free_ports2); lp=${ports% *}; pp=${ports#* }
"$bin" --rdzv "static:127.0.0.1:$lp" --nnodes 2 --node-rank 0 --rdzv-timeout 10 --nproc-per-node 1 \
    -- /bin/true >"$tmp/leader3.log" 2>&1 &
leader=$!
python3 "$here/lib/tap_proxy.py" dup "$lp" "$pp" "$tmp/cap3" 2>"$tmp/proxy3.log" &
proxy=$!
timeout -s KILL 60 "$bin" --rdzv "static:127.0.0.1:$pp" --nnodes 2 --node-rank 1 --rdzv-timeout 10 \
    --nproc-per-node 1 -- /bin/true >"$tmp/agent3.log" 2>&1
arc=$?
wait "$leader"; lrc=$?
leader=
kill "$proxy" 2>/dev/null; wait "$proxy" 2>/dev/null; proxy=
[ $arc -ne 0 ] && [ $lrc -ne 0 ] || { echo "FAIL: a replayed JOIN: agent $arc, leader $lrc (the job must not start)"; fail=1; }
grep -q 'replayed' "$tmp/leader3.log" || { echo "FAIL: the leader did not name the replay"; cat "$tmp/leader3.log"; fail=1; }
for f in "$tmp"/leader*.log "$tmp"/agent*.log; do
    crashed "$f" && { echo "FAIL: a crash in $f"; cat "$f"; fail=1; }
done
echo "rdzv_tap: replayed JOIN: $(grep -m1 'replayed' "$tmp/leader3.log" | cut -c1-160)"
exit $fail
