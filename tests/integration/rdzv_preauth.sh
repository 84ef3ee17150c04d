#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 13: outsiders cannot starve the rendezvous leader. 31 idle TCP
# connections (more than the leader's pre-HELLO slots) and one peer
# announcing a 48 MiB first frame, then a real agent: it must join; the
# leader names the refused peer and, at --verbose, the evicted ones.
set -u
bin=${PAR3DRUN:?PAR3DRUN must name the par3drun binary}
export P3D_DATA_DIR=${P3D_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
export P3D_RDZV_TOKEN=preauth-test-token-0123456789
tmp=$(mktemp -d "${TMPDIR:-/tmp}/p3d-preauth.XXXXXX")
trap 'kill $pyp 2>/dev/null; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" --verbose --rdzv "static:127.0.0.1:$port" --nnodes 2 --node-rank 0 --rdzv-timeout 60 \
    --nproc-per-node 1 -- /bin/true >"$tmp/leader.log" 2>&1 &
leader=$!
python3 - "$port" "$tmp/ready" <<'PY' &
import socket, struct, sys, time
port, ready = int(sys.argv[1]), sys.argv[2]
for _ in range(300):
    try:
        socks = [socket.create_connection(("127.0.0.1", port))]
        break
    except OSError:
        time.sleep(0.1)
for _ in range(30):
    socks.append(socket.create_connection(("127.0.0.1", port)))
big = socket.create_connection(("127.0.0.1", port))
try:
    big.sendall(struct.pack(">I", 48 << 20) + b"\1" * (1 << 20))
except OSError:
    pass
open(ready, "w").close()
time.sleep(60)
PY
pyp=$!
for _ in $(seq 600); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
[ -e "$tmp/ready" ] || { echo "FAIL: the idle connections were never made"; cat "$tmp/leader.log"; exit 1; }
"$bin" --rdzv "static:127.0.0.1:$port" --nnodes 2 --node-rank 1 --rdzv-timeout 60 --nproc-per-node 1 \
    -- /bin/true >"$tmp/agent.log" 2>&1
arc=$?
wait $leader
lrc=$?
fail=0
[ $arc -eq 0 ] || { echo "FAIL: agent exit $arc"; fail=1; }
[ $lrc -eq 0 ] || { echo "FAIL: leader exit $lrc"; fail=1; }
grep -q 'a frame over [0-9]* bytes before its handshake' "$tmp/leader.log" || { echo "FAIL: the 48 MiB frame was not refused"; fail=1; }
grep -q 'evicted for a newer connection' "$tmp/leader.log" || { echo "FAIL: no eviction logged at --verbose"; fail=1; }
if [ $fail -ne 0 ]; then
    echo "--- leader"; cat "$tmp/leader.log"; echo "--- agent"; cat "$tmp/agent.log"
    exit 1
fi
echo "rdzv_preauth: agent joined past 31 idle peers and a 48 MiB frame"
