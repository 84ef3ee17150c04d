#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# preflight_ring_auth.sh — the --preflight TCP ring proves the job key
# (issue #44): two p3d-worker --bench-node --bench-tcp-only form a ring of
# two on loopback, the key handed over through an inherited pipe
# (--bench-tcp-key-fd) as par3drun does. Before either starts, a stranger
# opens two idle connections to node A's ring port (the issue's "two idle
# connections zero a healthy node's links"):
#  1. both nodes' links are measured (non-zero in and out), A says it
#     dropped the connections that did not prove the key;
#  2. a node with the wrong key gets nothing from its next node: its
#     outgoing link is 0 MB/s and the next node drops it;
#  3. the key is on no command line and in no environment of the workers.
set -u
: "${P3D_WORKER:?run through ctest (P3D_WORKER unset)}"
T=$(mktemp -d /tmp/p3d-ring-auth.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ring KEY_A KEY_B IDLE: runs the two-node ring; prints A's line, then B's
# (figures or "rc=N"), their stderr to $T/a.err, $T/b.err
ring() {
  python3 - "$P3D_WORKER" "$T" "$1" "$2" "$3" <<'PY'
import os, socket, subprocess, sys
worker, t, ka, kb, idle = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
la, lb = socket.socket(), socket.socket()
for l in (la, lb):
    l.bind(("127.0.0.1", 0)); l.listen(8); l.set_inheritable(True)
pa, pb = la.getsockname()[1], lb.getsockname()[1]
strangers = [socket.create_connection(("127.0.0.1", pa)) for _ in range(idle)]
def start(name, lfd, key, peer):
    r, w = os.pipe(); os.write(w, key.encode()); os.close(w); os.set_inheritable(r, True)
    p = subprocess.Popen([worker, "--bench-node", "--bench-tcp-only", "--bench-seconds", "0.2",
                          "--connect-timeout", "20", "--bench-tcp-fd", str(lfd), "--bench-tcp-key-fd", str(r),
                          "--bench-tcp-peer", "127.0.0.1:%d" % peer],
                         pass_fds=(lfd, r), stdout=subprocess.PIPE, stderr=open(os.path.join(t, name + ".err"), "w"))
    os.close(r)
    # what the worker was given: its command line and environment. Popen
    # returns once the exec closed its error pipe, which is before the
    # kernel has set the new image's arguments up: /proc/PID/cmdline can
    # still read empty then (seen once under the sanitizer), so read until
    # it holds something (2 s at most)
    import time
    seen = {}
    for _ in range(200):
        for what in ("cmdline", "environ"):
            try:
                seen[what] = open("/proc/%d/%s" % (p.pid, what), "rb").read()
            except OSError:
                seen[what] = b""
        if seen["cmdline"]:
            break
        time.sleep(0.01)
    with open(os.path.join(t, name + ".seen"), "wb") as f:
        f.write(seen["cmdline"] + seen["environ"])
    return p
a = start("a", la.fileno(), ka, pb)
b = start("b", lb.fileno(), kb, pa)
for p in (a, b):
    out, _ = p.communicate(timeout=60)
    line = out.decode().strip()
    print(line if p.returncode == 0 else "rc=%d" % p.returncode)
for s in strangers:
    s.close()
PY
}
. "$(dirname "$0")/lib/ring_lib.sh"

# ---- 1. two idle connections do not zero node A's links -------------------
KEY=ring-key-$$-$RANDOM
mapfile -t L < <(ring "$KEY" "$KEY" 2)
echo "node A: ${L[0]:-none}"
echo "node B: ${L[1]:-none}"
both_measured "case 1 (idle connections zeroed it)" "${L[0]:-}" "${L[1]:-}"
[ "$(grep -c 'dropped a connection to the ring' "$T/a.err")" = 2 ] ||
  { bad "case 1: node A did not drop both idle connections"; sed 's/^/  /' "$T/a.err"; }
# ---- 3. the key on no command line, in no environment ---------------------
for n in a b; do grep -qaF "$KEY" "$T/$n.seen" && bad "case 3: node $n's command line or environment holds the key"; done
[ -s "$T/a.seen" ] || bad "case 3: node A's command line was not read"

# ---- 2. the wrong key: no stream, dropped --------------------------------
mapfile -t L < <(ring "$KEY" "not-$KEY" 0)
echo "wrong key: node A: ${L[0]:-none}; node B: ${L[1]:-none}"
v=$(num tcp_out_mbps "${L[1]:-}")
[ "$v" = 0 ] || bad "case 2: node B (wrong key) tcp_out_mbps=${v:-none}, want 0"
grep -q 'dropped a connection to the ring' "$T/a.err" || { bad "case 2: node A did not drop node B"; sed 's/^/  /' "$T/a.err"; }
v=$(num tcp_out_mbps "${L[0]:-}")
[ "$v" = 0 ] || bad "case 2: node A streamed to a node without the key (tcp_out_mbps=${v:-none})"

[ "$fail" = 0 ] && echo "PASS preflight_ring_auth"
exit "$fail"
