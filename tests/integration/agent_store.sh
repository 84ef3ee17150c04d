#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The agent store through the real binary, without torch (docs/torchrun.md,
# "The agent store"): each rank, a plain Python program, finds
# MASTER_ADDR:MASTER_PORT open as soon as it starts and speaks torch 1.x's
# TCPStore protocol to it (a SET by rank 0, a WAIT then GET by rank 1);
# a connection that sends garbage is closed and the store serves the next
# one; TORCHELASTIC_USE_AGENT_STORE is True, False with --no-agent-store;
# a busy --master-port is refused with a message that names it; a
# program that is not Python (here a shell script) gets no store and
# TORCHELASTIC_USE_AGENT_STORE=False (its rank 0 may listen on the port).
. "$(dirname "$0")/lib/launch_common.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }

cat >"$T/client.py" <<'PY'
import os, socket, struct, sys
addr, port, rank = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), int(os.environ["RANK"])
def s(b): return struct.pack("=Q", len(b)) + b
def recv(c, n):
    out = b""
    while len(out) < n:
        got = c.recv(n - len(out))
        if not got:
            sys.exit("store closed the connection")
        out += got
    return out
c = socket.create_connection((addr, port), timeout=60)  # no retry: the port must be open now
if rank == 0:
    g = socket.create_connection((addr, port), timeout=60)
    g.sendall(b"\xfe" * 64)  # no such query: the store closes this one
    print("GARBAGE closed" if g.recv(1) == b"" else "GARBAGE answered", flush=True)
    c.sendall(b"\x00" + s(b"key") + s(b"from rank 0"))  # SET
    c.sendall(b"\x06")  # GETNUMKEYS
    print("NUMKEYS %d" % struct.unpack("=q", recv(c, 8)), flush=True)
else:
    c.sendall(b"\x05" + struct.pack("=Q", 1) + s(b"key"))  # WAIT
    assert recv(c, 1) == b"\x00"  # STOP_WAITING
    c.sendall(b"\x02" + s(b"key"))  # GET
    n = struct.unpack("=Q", recv(c, 8))[0]
    print("GOT %s" % recv(c, n).decode(), flush=True)
print("STORE", os.environ["TORCHELASTIC_USE_AGENT_STORE"], flush=True)
PY

(cd "$T" && "$PAR3DRUN" --nproc-per-node 2 --no-tag-output -- python3 client.py) >"$T/a.out" 2>"$T/a.err" ||
  { cat "$T/a.out" "$T/a.err"; fail "two ranks talking to the agent store failed"; }
for want in "GARBAGE closed" "NUMKEYS 1" "GOT from rank 0"; do
  grep -qx "$want" "$T/a.out" || { cat "$T/a.out" "$T/a.err"; fail "want the line '$want'"; }
done
[ "$(grep -cx 'STORE True' "$T/a.out")" = 2 ] || { cat "$T/a.out"; fail "want TORCHELASTIC_USE_AGENT_STORE=True"; }

printf 'import os\nprint("STORE", os.environ["TORCHELASTIC_USE_AGENT_STORE"])\n' >"$T/env.py"
(cd "$T" && "$PAR3DRUN" --nproc-per-node 2 --no-tag-output --no-agent-store -- python3 env.py) >"$T/n.out" 2>&1 ||
  { cat "$T/n.out"; fail "--no-agent-store failed"; }
[ "$(grep -cx 'STORE False' "$T/n.out")" = 2 ] || { cat "$T/n.out"; fail "--no-agent-store: want False"; }

printf '#!/bin/sh\necho "STORE $TORCHELASTIC_USE_AGENT_STORE"\n' >"$T/env.sh"
chmod +x "$T/env.sh"
(cd "$T" && "$PAR3DRUN" --nproc-per-node 2 --no-tag-output -- ./env.sh) >"$T/s.out" 2>&1 || { cat "$T/s.out"; fail "env.sh failed"; }
[ "$(grep -cx 'STORE False' "$T/s.out")" = 2 ] || { cat "$T/s.out"; fail "not Python: want False"; }
(cd "$T" && "$PAR3DRUN" --nproc-per-node 1 --no-tag-output -- timeout 60 python3 env.py) >"$T/w.out" 2>&1 ||
  { cat "$T/w.out"; fail "timeout python3 failed"; }
grep -qx 'STORE True' "$T/w.out" || { cat "$T/w.out"; fail "python3 through timeout: want True"; }

# a busy --master-port: exit 1, named
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' \
  >"$T/busy" &
busy=$!
for _ in $(seq 100); do [ -s "$T/busy" ] && break; sleep 0.1; done
port=$(cat "$T/busy")
set +e
"$PAR3DRUN" --nproc-per-node 1 --master-port "$port" -- python3 -c pass >"$T/b.out" 2>&1
rc=$?
set -e
kill "$busy"
wait "$busy" 2>/dev/null || true
[ "$rc" = 1 ] || { cat "$T/b.out"; fail "a busy --master-port: exit $rc, want 1"; }
grep -q "cannot listen on MASTER_ADDR:MASTER_PORT 127.0.0.1:$port: Address already in use (give another --master-port" \
  "$T/b.out" || { cat "$T/b.out"; fail "a busy --master-port is not named"; }
echo "ok"
