#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 44: no listening socket leaks into what a node forks. A 2-node job
# (failover on: every node holds a failover port) whose ranks look at
# /proc/PID/fd of themselves and of every ancestor up to the node's
# par3drun: a socket in LISTEN state (by its inode in /proc/net/tcp{,6}) is
# allowed only in the node's own par3drun process (its failover port: the
# test checks it is there, so it looks at the right thing), never in the
# forked agent ("par3drun [agent ...]") nor in a rank.
set -u
bin=${PAR3DRUN:?PAR3DRUN must name the par3drun binary}
here=$(cd "$(dirname "$0")" && pwd)
export P3D_DATA_DIR=${P3D_DATA_DIR:-$(cd "$here/../.." && pwd)}
export P3D_RDZV_TOKEN=fd-leak-test-token-0123456789
tmp=$(mktemp -d "${TMPDIR:-/tmp}/p3d-fdleak.XXXXXX")
leader=
trap '[ -n "$leader" ] && kill "$leader" 2>/dev/null; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/look.py" <<'PY'
import os, sys
def listening():
    inodes = set()
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in open(f).read().splitlines()[1:]:
                x = line.split()
                if x[3] == "0A":
                    inodes.add(x[9])
        except OSError:
            pass
    return inodes
def held(pid, lis):
    out = []
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if t.startswith("socket:[") and t[8:-1] in lis:
                out.append(fd)
    except OSError:
        pass
    return out
lis = listening()
pid, report = os.getpid(), []
for _ in range(8):
    cmd = open("/proc/%d/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
    fds = held(pid, lis)
    if cmd.startswith("par3drun [agent") or pid == os.getpid():
        kind = "agent" if cmd.startswith("par3drun [agent") else "rank"
    elif "par3drun" in cmd.split(" ")[0]:
        kind = "node"
    else:
        kind = "other"
    report.append("%s %d %s listening-fds=%s" % (kind, pid, cmd[:60].replace(" ", "_"), ",".join(fds) or "-"))
    if kind == "node":
        break
    pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
open(sys.argv[1] + ".%d" % os.getpid(), "w").write("\n".join(report) + "\n")
PY
"$bin" --rdzv "static:127.0.0.1:$port" --nnodes 2 --node-rank 0 --rdzv-timeout 30 --nproc-per-node 1 \
    -- python3 "$tmp/look.py" "$tmp/r0" >"$tmp/leader.log" 2>&1 &
leader=$!
"$bin" --rdzv "static:127.0.0.1:$port" --nnodes 2 --node-rank 1 --rdzv-timeout 30 --nproc-per-node 1 \
    -- python3 "$tmp/look.py" "$tmp/r1" >"$tmp/agent.log" 2>&1
arc=$?
wait "$leader"; lrc=$?
leader=
fail=0
[ $arc -eq 0 ] && [ $lrc -eq 0 ] || { echo "FAIL: the job: exit $lrc (leader), $arc (agent)"; cat "$tmp/leader.log" "$tmp/agent.log"; fail=1; }
n=$(ls "$tmp"/r[01].* 2>/dev/null | wc -l)
[ "$n" = 2 ] || { echo "FAIL: $n of 2 ranks reported"; fail=1; }
for f in "$tmp"/r[01].*; do
    [ -e "$f" ] || continue
    sed 's/^/  /' "$f"
    grep -qE '^(agent|rank) .* listening-fds=[0-9]' "$f" &&
        { echo "FAIL: a listening socket leaked into a forked process ($(basename "$f"))"; fail=1; }
    grep -qE '^node .* listening-fds=[0-9]' "$f" ||
        { echo "FAIL: the node's own failover port was not seen ($(basename "$f")): the test looks at the wrong processes"; fail=1; }
    grep -q '^agent ' "$f" || { echo "FAIL: no agent process among the rank's ancestors ($(basename "$f"))"; fail=1; }
done
exit $fail
