#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 44: --emulate fences like separate agents. Each rank here starts a
# grandchild (a `sleep` in the background of its shell) and waits. The
# agent of node a2 is SIGKILLed: its ranks die with it (PR_SET_PDEATHSIG),
# but their children used to be adopted by par3drun and keep running
# beside the restarted copies on the spare. Now a local agent is a session
# of its own, and once it is reaped every process left in that session
# is killed before anything else happens: when the replacement's ranks
# run, no process of the lost node's generation 0 is alive.
. "$(dirname "$0")/lib/launch_common.sh"
C3=$T/three.json
printf '{"nodes": [{"name": "a[1-3]", "topology": "%s"}]}\n' "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$C3"
D=$T/d
mkdir -p "$D"
export D
cat >"$T/w.sh" <<'SH'
#!/bin/sh
# the grandchild: a process the rank's own death does not take along
sleep 300 &
echo "$!" >"$D/gc.$P3D_RESTART_COUNT.$P3D_NODE.$RANK"
echo "$$" >"$D/rank.$P3D_RESTART_COUNT.$P3D_NODE.$RANK"
echo "$PPID" >"$D/agent.$P3D_RESTART_COUNT.$P3D_NODE"
while [ ! -e "$D/done" ]; do sleep 0.1; done
kill "$!" 2>/dev/null
exit 0
SH
chmod +x "$T/w.sh"
( set +e; "$PAR3DRUN" --emulate --cluster "$C3" --tp 1 --pp 1 --dp 4 --nproc-per-node 2 --spares 1 --grace 2 \
    --max-restarts 2 -- "$T/w.sh" >"$T/out" 2>&1; echo $? >"$T/rc" ) &
waitfor() { # GLOB COUNT
  local i
  for i in $(seq 1 600); do
    [ "$(ls $1 2>/dev/null | wc -l)" -ge "$2" ] && return 0
    [ -s "$T/rc" ] && break
    sleep 0.05
  done
  cat "$T/out"; fail "waited for $2 files $1"
}
waitfor "$D/gc.0.*" 4
waitfor "$D/agent.0.a2" 1
old=$(cat "$D"/gc.0.a2.* "$D"/rank.0.a2.*)
kill -9 "$(cat "$D/agent.0.a2")"
# the replacement generation runs (its ranks wrote their files)
waitfor "$D/gc.1.*" 4
left=""
for p in $old; do
  # alive, not a zombie waiting to be reaped
  st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)
  [ -n "$st" ] && [ "$st" != Z ] && left="$left $p"
done
touch "$D/done"
for i in $(seq 1 600); do [ -s "$T/rc" ] && break; sleep 0.05; done
[ -n "$left" ] && { ps -o pid,ppid,pgid,sid,stat,args -p "${left# }" || true; cat "$T/out";
  fail "processes of the lost node's generation 0 still run beside the replacement:$left"; }
[ "$(cat "$T/rc" 2>/dev/null)" = 0 ] || { cat "$T/out"; fail "exit $(cat "$T/rc" 2>/dev/null), want 0"; }
grep -q 'moved to spare a3' "$T/out" || { cat "$T/out"; fail "no replacement on the spare"; }
echo "ok: a lost emulated agent's whole process tree is gone before its replacement runs"
