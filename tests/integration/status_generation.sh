#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `par3drun status` during a node replacement (issue 46): RUN_DIR/status.txt
# is rewritten when the job's state or generation changes, not only when the
# ranks' progress is judged (which happens while running only). Emulated 3
# nodes, 2 used + 1 spare; the ranks write progress lines; n2's agent is
# killed, and n1's rank takes its time to stop (it holds SIGTERM until a stop
# file appears, under a long --grace): while the job waits for it the view
# must say the job is no longer running and n2 is lost (the old view, "state
# running, 0 lost", looked as if nothing had happened); then generation 1.
. "$(dirname "$0")/lib/launch_common.sh"
C3=$T/three.json
printf '{"nodes": [{"name": "n[1-3]", "topology": "%s", "rack": "r1"}]}\n' \
  "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$C3"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
echo "$RANK $P3D_NODE $P3D_RESTART_COUNT $PPID" >>"$T_DIR/starts"
trap 'until [ -e "$T_DIR/stop" ]; do sleep 0.1; done; exit 143' TERM
step=0
while [ ! -e "$T_DIR/stop" ]; do
  sleep 0.1
  if [ "$P3D_RESTART_COUNT" = 0 ]; then
    step=$((step + 1))
    echo "step=$step busy=0.050" >"$P3D_HEARTBEAT.tmp" && mv "$P3D_HEARTBEAT.tmp" "$P3D_HEARTBEAT"
  fi
done
SH
chmod +x "$T/w.sh"
T_DIR=$T/job; mkdir -p "$T_DIR"; export T_DIR
( set +e; timeout 300 "$PAR3DRUN" --emulate --cluster "$C3" --nproc-per-node 1 --tp 1 --pp 1 --spares 1 --grace 300 \
    --progress-interval 0.2 --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1; echo $? >"$T_DIR/rc" ) &
# waits (bounded, never timed) until $1 succeeds
# (once the job has ended, the condition gets one last look: the end can
# land between the look and the check for it)
until_ok() { local i; for i in $(seq 1 1200); do eval "$1" && return 0; [ -s "$T_DIR/rc" ] && break; sleep 0.05; done
  eval "$1" && return 0
  cat "$T_DIR/out"; cat "$T_DIR/rd/status.txt" 2>/dev/null; fail "$2"; }
until_ok '[ -s "$T_DIR/rd/status.txt" ] && grep -q "^job .*: generation 0" "$T_DIR/rd/status.txt" && grep -q "2 reporting progress" "$T_DIR/rd/status.txt"' \
  "no status view of generation 0"
victim=$(awk '$2 == "n2" && $3 == 0 {print $4; exit}' "$T_DIR/starts")
[ -n "$victim" ] || fail "no agent of n2 in: $(cat "$T_DIR/starts")"
kill -9 "$victim"
until_ok '"$PAR3DRUN" status "$T_DIR/rd" >"$T_DIR/status" && grep -q "^nodes: 3, .* 1 lost (n2)$" "$T_DIR/status"' \
  "the status view does not show n2 lost while the job replaces it"
grep -Eq '^job [0-9a-f]*: generation [01] \([01] restarts?\), state (restarting|replacing|stopping|checking)' "$T_DIR/status" ||
  { cat "$T_DIR/status"; fail "status: the state while n1's rank stops"; }
[ ! -s "$T_DIR/rc" ] || fail "the job ended before the check: $(cat "$T_DIR/out")"
touch "$T_DIR/stop"
until_ok '[ -s "$T_DIR/rc" ]' "the job did not end"
"$PAR3DRUN" status "$T_DIR/rd" >"$T_DIR/status" || fail "par3drun status: exit $?"
grep -q '^job [0-9a-f]*: generation 1 (1 restart), state done' "$T_DIR/status" || { cat "$T_DIR/status"; fail "status: the end"; }
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc"), want 0"; }
echo "ok: par3drun status shows the lost node and the recovery's state while the job replaces it"
