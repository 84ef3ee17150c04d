#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# preflight_ring_replay.sh — a proof of the job key captured on the
# --preflight TCP ring is worth nothing on another connection (issue #44:
# "the ring's HMAC proof can be replayed to the same port by a faster
# host"). Two p3d-worker --bench-node --bench-tcp-only, A and B, form a
# ring with the same key; B reaches A through a relay that a stranger
# controls (B's next node is 127.0.0.2:PORT, the relay, forwarding to A's
# 127.0.0.1:PORT: the same port, so B's proof is made for A's port). The
# relay keeps B's first 64 bytes (its proof), opens its own connection to
# A, sends them there, and only then forwards them on B's connection:
#  1. A refuses the replayed proof: the stranger's connection never gets
#     A's answer and "go", A says it dropped it as a proof for another
#     connection;
#  2. the honest ring still works through the relay (both nodes' links
#     measured, non-zero);
#  3. the loopback ring of an --emulate --preflight is keyed too: every
#     benchmark gets --bench-tcp-key-fd, and holds its own ring port only.
set -u
: "${P3D_WORKER:?run through ctest (P3D_WORKER unset)}"
: "${PAR3DRUN:?run through ctest (PAR3DRUN unset)}"
T=$(mktemp -d /tmp/p3d-ring-replay.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

KEY=ring-key-$$-$RANDOM
python3 - "$P3D_WORKER" "$T" "$KEY" >"$T/out" <<'PY'
import os, select, socket, subprocess, sys, threading
worker, t, key = sys.argv[1], sys.argv[2], sys.argv[3]
la, lb = socket.socket(), socket.socket()
for l in (la, lb):
    l.bind(("127.0.0.1", 0)); l.listen(8); l.set_inheritable(True)
pa, pb = la.getsockname()[1], lb.getsockname()[1]
relay = socket.socket()
relay.bind(("127.0.0.2", pa)); relay.listen(1)   # all of 127/8 is this host
replay = {"got": b"", "done": False}

def pump():
    b, _ = relay.accept()
    x1 = socket.create_connection(("127.0.0.1", pa))
    held, up = b"", {b: x1, x1: b}
    socks = [b, x1]
    while socks:
        r, _, _ = select.select(socks, [], [], 30)
        if not r:
            break
        for s in r:
            d = s.recv(65536)
            if not d:
                socks.remove(s)
                try:
                    up[s].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            if s is b and not replay["done"]:
                held += d
                if len(held) < 64:
                    continue
                # the stranger's own connection to A's port, B's proof on it
                x2 = socket.create_connection(("127.0.0.1", pa))
                x2.sendall(held[:64])
                x2.settimeout(10)
                try:
                    while True:
                        g = x2.recv(4096)
                        if not g:
                            break
                        replay["got"] += g
                except OSError:
                    pass
                x2.close()
                replay["done"] = True
                d, held = held, b""
            up[s].sendall(d)

th = threading.Thread(target=pump, daemon=True)
th.start()
def start(name, lfd, peer):
    r, w = os.pipe(); os.write(w, key.encode()); os.close(w); os.set_inheritable(r, True)
    p = subprocess.Popen([worker, "--bench-node", "--bench-tcp-only", "--bench-seconds", "0.2",
                          "--connect-timeout", "20", "--bench-tcp-fd", str(lfd), "--bench-tcp-key-fd", str(r),
                          "--bench-tcp-peer", peer],
                         pass_fds=(lfd, r), stdout=subprocess.PIPE, stderr=open(os.path.join(t, name + ".err"), "w"))
    os.close(r)
    return p
a = start("a", la.fileno(), "127.0.0.1:%d" % pb)
b = start("b", lb.fileno(), "127.0.0.2:%d" % pa)
for p in (a, b):
    out, _ = p.communicate(timeout=60)
    print(out.decode().strip() if p.returncode == 0 else "rc=%d" % p.returncode)
th.join(5)
g = replay["got"]
print("replay: done=%d got=%d answered=%d" % (replay["done"], len(g), len(g) >= 33 and g[-1:] == b"g"))
PY
mapfile -t L <"$T/out"
printf '%s\n' "${L[@]}"
. "$(dirname "$0")/lib/ring_lib.sh"

# ---- 1. the replayed proof is refused ------------------------------------
[[ "${L[2]:-}" == "replay: done=1 "* ]] || bad "case 1: the relay never saw B's proof (${L[2]:-no line})"
[[ "${L[2]:-}" == *"answered=0" ]] || bad "case 1: A answered a replayed proof (${L[2]:-no line})"
grep -q "dropped a connection to the ring's port: it did not prove the job key (a wrong key, or a proof made for another connection)" "$T/a.err" ||
  { bad "case 1: A did not say it refused the replayed proof"; sed 's/^/  /' "$T/a.err"; }

# ---- 2. the honest ring through the relay ---------------------------------
both_measured "case 2" "${L[0]:-}" "${L[1]:-}"

# ---- 3. the --emulate ring is keyed ---------------------------------------
# the benchmarks' command lines and the listening sockets each holds (its
# own ring port only: a neighbour's port held open would not refuse when
# that neighbour died), read while par3drun runs them
C3=$T/three.json
printf '{"nodes": [{"name": "n[1-3]", "topology": "%s", "rack": "r1"}]}\n' \
  "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$C3"
timeout 120 "$PAR3DRUN" --emulate --cluster "$C3" --tp 8 --pp 1 --dp 3 --preflight -- true >"$T/emu.out" 2>&1 &
pid=$!
python3 - "$pid" >"$T/cmds" <<'PY'
import os, sys, time
root, seen = int(sys.argv[1]), {}
def ours(pid):  # a descendant of this test's par3drun (others run tests too)
    for _ in range(16):
        try:
            pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == root:
            return True
    return False
def listening():
    s = set()
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(f).read().splitlines()[1:]:
            x = line.split()
            if x[3] == "0A":
                s.add(x[9])
    return s
while os.path.exists("/proc/%d" % root):
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in seen:
            continue
        try:
            cmd = open("/proc/%s/cmdline" % d, "rb").read().replace(b"\0", b" ").decode(errors="replace")
            if "--bench-tcp-peer" not in cmd or not cmd.startswith(("/", "p3d")) or not ours(int(d)):
                continue
            lis = listening()
            n = sum(1 for fd in os.listdir("/proc/%s/fd" % d)
                    if os.readlink("/proc/%s/fd/%s" % (d, fd))[8:-1] in lis)
        except OSError:
            continue
        seen[int(d)] = 1
        if cmd not in seen:
            seen[cmd] = 1
            print("listening=%d %s" % (n, cmd), flush=True)
    time.sleep(0.02)
PY
# its verdict is not this case's (on a busy host a node may come out slow
# and be excluded): only what the benchmarks were given counts here
wait "$pid" || { echo "note: the --emulate --preflight job ended $?:"; tail -5 "$T/emu.out" | sed 's/^/  /'; }
n=$(grep -c -- '--bench-tcp-fd' "$T/cmds")
k=$(grep -c -- '--bench-tcp-key-fd [0-9]' "$T/cmds")
echo "emulate: $n benchmark command lines seen, $k keyed"
[ "$n" -ge 1 ] || bad "case 3: no benchmark of the --emulate ring was seen"
[ "$n" = "$k" ] || { bad "case 3: the --emulate ring is unkeyed"; sed 's/^/  /' "$T/cmds"; }
grep -q "$KEY" "$T/cmds" && bad "case 3: a key on a command line"
grep -v '^listening=1 ' "$T/cmds" && bad "case 3: a benchmark holds another node's ring port (or none)"

[ "$fail" = 0 ] && echo "PASS preflight_ring_replay"
exit "$fail"
