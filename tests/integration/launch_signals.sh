#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# SIGTERM to par3drun is forwarded to every rank and the grace is honoured;
# SIGUSR1, when it is not the --preempt-signal, is forwarded as is; SIGKILL of par3drun leaves no process behind,
# a worker's grandchild included.
. "$(dirname "$0")/lib/launch_common.sh"
cat >"$T/w.sh" <<'SH'
#!/bin/bash
trap 'echo "$RANK" >>"$T_DIR/usr1"' USR1
trap 'echo "$RANK got TERM"; sleep 1; echo "$RANK" >>"$T_DIR/term"; exit 0' TERM
sleep 1000 &          # a grandchild, in our process group
touch "$T_DIR/up-$RANK"
while :; do sleep 0.05; done
SH
chmod +x "$T/w.sh"
wait_up() { # N
  for _ in $(seq 200); do [ "$(ls "$T" | grep -c '^up-')" -ge "$1" ] && return 0; sleep 0.05; done
  fail "ranks did not start"
}
# 1. SIGUSR1 forwarded as is (the preempt signal is USR2 here: USR1, the
#    default, would preempt — launch_preempt.sh), then SIGTERM forwarded
#    with the grace honoured
T_DIR=$T "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 5 --preempt-signal USR2 -- "$T/w.sh" \
  >"$T/out" 2>&1 &
pid=$!
wait_up 16
kill -USR1 $pid
for _ in $(seq 100); do [ "$(wc -l <"$T/usr1" 2>/dev/null || echo 0)" -ge 16 ] && break; sleep 0.05; done
[ "$(sort -u "$T/usr1" | wc -l)" = 16 ] || fail "SIGUSR1 reached $(sort -u "$T/usr1" | wc -l) of 16 ranks"
kill -TERM $pid
set +e; wait $pid; rc=$?; set -e
[ $rc = 143 ] || { cat "$T/out"; fail "exit code $rc after SIGTERM, want 143"; }
# every rank ran its 1 s TERM handler to the end: the grace (5 s) was honoured
[ "$(sort -u "$T/term" | wc -l)" = 16 ] || { cat "$T/out"; fail "only $(wc -l <"$T/term") ranks finished their TERM handler"; }
[ -z "$(marked_pids)" ] || fail "processes left after SIGTERM: $(marked_pids)"
echo "ok: SIGUSR1 and SIGTERM forwarded, grace honoured"

# 2. SIGKILL of par3drun: nothing survives (workers, grandchildren, agents)
rm -f "$T"/up-*
T_DIR=$T "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 30 -- "$T/w.sh" >"$T/out2" 2>&1 &
pid=$!
wait_up 16
n=$(marked_pids | wc -l)
[ "$n" -ge 35 ] || fail "expected >= 35 marked processes (launcher, 2 agents, 16 workers, 16 grandchildren), saw $n"
kill -KILL $pid
wait $pid 2>/dev/null || true
for _ in $(seq 100); do [ -z "$(marked_pids)" ] && break; sleep 0.05; done
left=$(marked_pids)
[ -z "$left" ] || { ps -o pid,ppid,pgid,args -p $left; fail "left behind after SIGKILL: $left"; }
echo "ok: SIGKILL of par3drun left nothing behind ($n processes gone)"
