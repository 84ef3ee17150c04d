#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdzv_bind_addr.sh — every listening socket of a multi-node job binds the
# address the rendezvous uses, never every interface (issue #44,
# "listeners where the job lives"). All of 127/8 is this host's loopback.
#
# A. Three static agents with --preflight (the TCP ring) meet at
#    127.0.0.2. The leader's ports follow its rendezvous address,
#    127.0.0.2. A node's route to 127.0.0.2 leaves from 127.0.0.1, so node 1
#    is given P3D_BIND_ADDR=127.0.0.3 and node 2 --bind-addr 127.0.0.4 (the
#    option for multi-homed nodes). They start one after the other, each
#    once the watcher saw the previous one's ports: with the ring on, the
#    leader holds every node in the rendezvous until all joined, so the
#    leader's rendezvous, failover and ring ports and node 1's tree,
#    failover and ring ports are all open then (no race with the sampling).
#    For every listening socket of the three process trees:
#     1. none is on 0.0.0.0 or [::];
#     2. each is on its node's address (at least 3 for the leader and for
#        node 1, 1 for node 2);
#     3. a connection to it through 127.0.0.1 is refused.
# B. The bundled worker's TCP bootstrap (3 ranks, MASTER_ADDR=127.0.0.2),
#    each rank started once the previous one listens: rank 0 on
#    127.0.0.2:MASTER_PORT, rank 1 on its P3D_BIND_ADDR 127.0.0.3, rank 2
#    on its route to MASTER_ADDR (127.0.0.1); none on every interface.
# C. The option's bad values: exit 2, the value and what was expected
#    named (a name, a wildcard, brackets, an address not of this node).
set -u
: "${PAR3DRUN:?run through ctest (PAR3DRUN unset)}"
: "${P3D_WORKER:?run through ctest (P3D_WORKER unset)}"
T=$(mktemp -d /tmp/p3d-bind.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
python3 -c 'import socket; [socket.socket().bind(("127.0.0.%d" % i, 0)) for i in (2, 3, 4)]' 2>/dev/null ||
  { echo "SKIP: 127.0.0.2-4 cannot be bound here"; exit 77; }
export P3D_RDZV_TOKEN=bind-addr-test-token-$$-$RANDOM
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2",0)); print(s.getsockname()[1])')
MARK="static:127.0.0.2:$port"
cat >"$T/watch.py" <<'PY'
# watch.py STOPFILE OUT MARK: every listening socket held by a process
# whose command line (or an ancestor's) holds MARK, one line each:
# "NODE ADDR PORT refused|open" (NODE: the --node-rank of that command
# line; with MARK worker:JOB, the RANK of a p3d-worker whose P3D_JOB_ID is
# JOB), the last field what a connect to 127.0.0.1:PORT did
import os, socket, sys, time
stop, out, mark = sys.argv[1], sys.argv[2], sys.argv[3]
worker = mark[7:] if mark.startswith("worker:") else None
def parse(hexaddr):
    a, p = hexaddr.split(":")
    if len(a) == 8:
        return socket.inet_ntop(socket.AF_INET, bytes.fromhex(a)[::-1]), int(p, 16)
    b = bytes.fromhex(a)
    return socket.inet_ntop(socket.AF_INET6, b"".join(b[i:i + 4][::-1] for i in range(0, 16, 4))), int(p, 16)
def listening():
    got = {}
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(f).read().splitlines()[1:]:
            x = line.split()
            if x[3] == "0A":
                got[x[9]] = parse(x[1])
    return got
def node_of(pid):
    """the node (or rank) of pid's tree, or None when it is not ours"""
    for _ in range(64):
        try:
            cmd = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
            env = open("/proc/%d/environ" % pid, "rb").read().split(b"\0") if worker else []
            ppid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if worker:
            if cmd and cmd[0].endswith(b"p3d-worker") and ("P3D_JOB_ID=" + worker).encode() in env:
                for e in env:
                    if e.startswith(b"RANK="):
                        return int(e[5:])
            return None
        if mark.encode() in cmd:
            return int(cmd[cmd.index(b"--node-rank") + 1])
        pid = ppid
    return None
seen = {}
with open(out, "w") as o:
    while not os.path.exists(stop):
        new = {i: a for i, a in listening().items() if i not in seen}
        for inode in new:  # another test's socket is looked at once
            seen[inode] = 1
        if new:
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    fds = [os.readlink("/proc/%s/fd/%s" % (d, f)) for f in os.listdir("/proc/%s/fd" % d)]
                except OSError:
                    continue
                mine = [t[8:-1] for t in fds if t.startswith("socket:[") and t[8:-1] in new]
                node = node_of(int(d)) if mine else None
                for inode in mine:
                    if node is None or inode not in new:
                        continue
                    addr, p = new.pop(inode)
                    try:
                        socket.create_connection(("127.0.0.1", p), timeout=1).close()
                        via = "open"
                    except OSError:
                        via = "refused"
                    o.write("%d %s %d %s\n" % (node, addr, p, via))
                    o.flush()
        time.sleep(0.02)
PY
# wait_seen FILE NODE N: until FILE has N lines of NODE (60 s at most)
wait_seen() {
  local i
  for ((i = 0; i < 3000; i++)); do
    [ "$(grep -c "^$2 " "$1")" -ge "$3" ] && return 0
    sleep 0.02
  done
  return 1
}

# ---- A. three agents -------------------------------------------------------------
: >"$T/seen"
python3 "$T/watch.py" "$T/stop" "$T/seen" "$MARK" &
pids+=($!)
# the preflight's verdict is not this test's (nodes sharing a busy host)
JOB=(--rdzv "$MARK" --nnodes 3 --rdzv-timeout 60 --nproc-per-node 1 --preflight --slow-factor 1000)
"$PAR3DRUN" "${JOB[@]}" --node-rank 0 -- true >"$T/n0.log" 2>&1 &
n0=$!
pids+=("$n0")
wait_seen "$T/seen" 0 3 || bad "case A: the leader's rendezvous, failover and ring ports not seen in 60 s"
P3D_BIND_ADDR=127.0.0.3 "$PAR3DRUN" "${JOB[@]}" --node-rank 1 -- true >"$T/n1.log" 2>&1 &
n1=$!
pids+=("$n1")
wait_seen "$T/seen" 1 3 || bad "case A: node 1's tree, failover and ring ports not seen in 60 s"
"$PAR3DRUN" "${JOB[@]}" --node-rank 2 --bind-addr 127.0.0.4 -- true >"$T/n2.log" 2>&1 &
n2=$!
pids+=("$n2")
rc=0
for p in $n0 $n1 $n2; do wait "$p" || rc=$?; done
touch "$T/stop"
wait
[ "$rc" = 0 ] || { bad "case A: the job: exit $rc"; for n in 0 1 2; do sed "s/^/  node $n: /" "$T/n$n.log"; done; }
sed 's/^/  seen: /' "$T/seen"
grep -E '^[0-9]+ (0\.0\.0\.0|::) ' "$T/seen" && bad "case A.1: a listening socket on every interface"
grep -vE '^0 127\.0\.0\.2 |^1 127\.0\.0\.3 |^2 127\.0\.0\.4 ' "$T/seen" && bad "case A.2: a port on another address"
[ "$(grep -c '^2 ' "$T/seen")" -ge 1 ] || bad "case A.2: none of node 2's ports seen"
grep ' open$' "$T/seen" && bad "case A.3: a port answered on 127.0.0.1"

# ---- B. the bundled worker's bootstrap ------------------------------------------
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2",0)); print(s.getsockname()[1])')
: >"$T/wseen"
rm -f "$T/stop"
python3 "$T/watch.py" "$T/stop" "$T/wseen" "worker:bind-$mport" &
pids+=($!)
wpids=()
for r in 0 1 2; do
  bind=; [ "$r" = 1 ] && bind=127.0.0.3
  env RANK=$r WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NODE_RANK=$r MASTER_ADDR=127.0.0.2 MASTER_PORT="$mport" \
    P3D_JOB_ID="bind-$mport" P3D_BIND_ADDR="$bind" P3D_TP_RANK=0 P3D_TP_SIZE=1 P3D_TP_GROUP=$r P3D_PP_RANK=0 \
    P3D_PP_SIZE=1 P3D_PP_GROUP=$r P3D_DP_RANK=$r P3D_DP_SIZE=3 P3D_DP_GROUP=0,1,2 \
    timeout 120 "$P3D_WORKER" --backend cpu --layers 2 --hidden 16 --global-batch 6 --steps 2 >"$T/w$r.log" 2>&1 &
  wpids+=($!)
  pids+=($!)
  # the next rank once this one listens (rank 0 waits for the others,
  # rank 1 for rank 0's table)
  [ "$r" = 2 ] || wait_seen "$T/wseen" "$r" 1 || bad "case B: rank $r's listening socket not seen in 60 s"
done
rc=0
for p in "${wpids[@]}"; do wait "$p" || rc=$?; done
touch "$T/stop"
wait
[ "$rc" = 0 ] || { bad "case B: the ranks: exit $rc"; for r in 0 1 2; do sed "s/^/  rank $r: /" "$T/w$r.log"; done; }
sed 's/^/  rank seen: /' "$T/wseen"
grep -q "^0 127\.0\.0\.2 $mport refused" "$T/wseen" || bad "case B: rank 0 not on MASTER_ADDR:MASTER_PORT 127.0.0.2:$mport"
grep -q '^1 127\.0\.0\.3 [0-9]* refused' "$T/wseen" || bad "case B: rank 1 not on its P3D_BIND_ADDR 127.0.0.3"
grep -E '^[0-9]+ (0\.0\.0\.0|::) ' "$T/wseen" && bad "case B: a rank listening on every interface"

# ---- C. the option's bad values ---------------------------------------------------
for v in node001 0.0.0.0 :: 192.0.2.77 "[::1]"; do
  rc=0
  "$PAR3DRUN" --bind-addr "$v" --rdzv "$MARK" --nnodes 2 --node-rank 1 -- true >"$T/o" 2>"$T/e" || rc=$?
  [ "$rc" = 2 ] || bad "case C: --bind-addr '$v': exit $rc, want 2"
  grep -qF -- "--bind-addr '$v'" "$T/e" || { bad "case C: --bind-addr '$v': the message does not name the value"; cat "$T/e"; }
done
grep -q 'not an address of this node' <("$PAR3DRUN" --bind-addr 192.0.2.77 --nnodes 2 --node-rank 1 --rdzv "$MARK" \
  -- true 2>&1) || bad "case C: --bind-addr 192.0.2.77: not said to be foreign"
rc=0
P3D_BIND_ADDR=bogus "$PAR3DRUN" --rdzv "$MARK" --nnodes 2 --node-rank 1 -- true >"$T/o" 2>"$T/e" || rc=$?
[ "$rc" = 2 ] && grep -q "P3D_BIND_ADDR 'bogus'" "$T/e" || { bad "case C: P3D_BIND_ADDR=bogus: exit $rc"; cat "$T/e"; }

[ "$fail" = 0 ] && echo "PASS rdzv_bind_addr"
exit "$fail"
