#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The supervisor never waits on anyone (issue 13/14):
# 1. a job whose stdout is a pipe nobody reads: a failing rank still ends
#    the job — par3drun exits while the reader has not read a byte; the
#    terminal copy says how much it dropped, --log-dir keeps everything;
# 2. an emulated node's agent stopped with SIGSTOP: a rank failure on the
#    other node still ends the job, and the stopped agent's workers die
#    with it (no SIGCONT);
# 3. one node, its agent stopped, two SIGINTs to par3drun: exit 130, nothing
#    left; the first signal prints one line saying what it stops and the grace;
# 4. an agent that gets SIGINT itself is reported as stopped by SIGINT.
. "$(dirname "$0")/lib/launch_common.sh"

# ---- 1. a pipe nobody reads ------------------------------------------------
cat >"$T/w1.sh" <<'SH'
#!/bin/sh
if [ "$RANK" = 1 ]; then
  # 20 MB of lines: far more than a pipe and the terminal queue hold
  yes 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' |
    head -n 200000
  touch "$T_DIR/wrote"
  exec sleep 100
fi
while [ ! -f "$T_DIR/wrote" ]; do sleep 0.05; done
exit 3
SH
chmod +x "$T/w1.sh"
# The reader reads nothing until par3drun has exited (rc file written): if
# par3drun waited for it, neither would ever go on; the reader gives up
# after a minute so that such a failure ends the test.
reader() {
  for _ in $(seq 600); do [ -f "$T/rc1" ] && break; sleep 0.1; done
  [ -f "$T/rc1" ] || echo "reader gave up: par3drun never exited" >"$T/reader_gave_up"
  cat >/dev/null
}
{ rc=0; T_DIR=$T "$PAR3DRUN" --nproc-per-node 2 --grace 1 --log-dir "$T/logs" -- "$T/w1.sh" 2>"$T/err1" || rc=$?
  echo $rc >"$T/rc1"; } | reader
[ ! -f "$T/reader_gave_up" ] || { cat "$T/err1"; fail "par3drun waited for the reader of its stdout"; }
[ "$(cat "$T/rc1")" = 3 ] || { cat "$T/err1"; fail "exit code $(cat "$T/rc1"), want 3"; }
grep -q 'bytes of output not shown: the reader was too slow' "$T/err1" ||
  { cat "$T/err1"; fail "no note on the dropped terminal output"; }
[ "$(grep -c . "$T/logs/rank-1.log")" = 200000 ] || fail "--log-dir lost lines: $(grep -c . "$T/logs/rank-1.log")"
grep -q 'root cause: rank 0 ' "$T/err1" || { cat "$T/err1"; fail "no root cause"; }
echo "ok 1: a pipe nobody reads does not hold the job"

# ---- 2. an emulated agent stopped with SIGSTOP -------------------------------
cat >"$T/w2.sh" <<'SH'
#!/bin/sh
touch "$T_DIR/up-$RANK"
if [ "$RANK" = 0 ]; then
  while [ ! -f "$T_DIR/go" ]; do sleep 0.05; done
  exit 5
fi
exec sleep 100
SH
chmod +x "$T/w2.sh"
wait_up() { # N
  for _ in $(seq 400); do [ "$(ls "$T" | grep -c '^up-')" -ge "$1" ] && return 0; sleep 0.05; done
  fail "ranks did not start"
}
# the agent of the node that holds RANK (its worker's parent)
agent_of() {
  local w
  w=$(grep -lzx "RANK=$1" $(grep -lzx "P3D_TEST_MARK=$MARK" /proc/[0-9]*/environ 2>/dev/null) 2>/dev/null | head -1)
  w=${w#/proc/}; w=${w%/environ}
  awk '{print $4}' "/proc/$w/stat"
}
T_DIR=$T "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 1 -- "$T/w2.sh" >"$T/out2" 2>&1 &
pid=$!
wait_up 16
a15=$(agent_of 15)
[ -n "$a15" ] && [ "$a15" != "$pid" ] || fail "cannot find the agent of rank 15"
kill -STOP "$a15"
touch "$T/go"
set +e; wait $pid; rc=$?; set -e
[ $rc = 5 ] || { cat "$T/out2"; fail "exit code $rc with a stopped agent, want 5"; }
for _ in $(seq 100); do [ -z "$(marked_pids)" ] && break; sleep 0.05; done
left=$(marked_pids)
[ -z "$left" ] || { ps -o pid,ppid,stat,args -p $left; fail "left behind with a stopped agent: $left"; }
echo "ok 2: a stopped agent does not hold the job; its workers are gone"

# ---- 3. one node, agent stopped, two SIGINTs ---------------------------------
rm -f "$T"/up-* "$T/go"
T_DIR=$T "$PAR3DRUN" --nproc-per-node 2 --grace 30 -- sh -c 'touch "$T_DIR/up-$RANK"; exec sleep 100' >"$T/out3" 2>&1 &
pid=$!
wait_up 2
a0=$(agent_of 0)
kill -STOP "$a0"
kill -INT $pid
for _ in $(seq 100); do grep -q 'SIGINT: stopping' "$T/out3" && break; sleep 0.05; done
kill -INT $pid
set +e; wait $pid; rc=$?; set -e
[ $rc = 130 ] || { cat "$T/out3"; fail "exit code $rc after two SIGINTs, want 130"; }
for _ in $(seq 100); do [ -z "$(marked_pids)" ] && break; sleep 0.05; done
left=$(marked_pids)
[ -z "$left" ] || { ps -o pid,ppid,stat,args -p $left; fail "left behind after two SIGINTs: $left"; }
grep -q '^par3drun: SIGINT: stopping 2 ranks on 1 node (SIGINT to every rank, SIGKILL after the 30 s grace; a second signal skips it)$' \
  "$T/out3" || { cat "$T/out3"; fail "the SIGINT line"; }
[ "$(grep -c 'SIGINT: stopping' "$T/out3")" = 1 ] || { cat "$T/out3"; fail "the SIGINT line more than once"; }
echo "ok 3: two SIGINTs end a job whose agent is stopped"

# ---- 4. an agent that gets SIGINT itself ------------------------------------
rm -f "$T"/up-*
T_DIR=$T "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 1 \
  -- sh -c 'touch "$T_DIR/up-$RANK"; exec sleep 100' >"$T/out4" 2>&1 &
pid=$!
wait_up 16
kill -INT "$(agent_of 15)"
set +e; wait $pid; rc=$?; set -e
[ $rc = 130 ] || { cat "$T/out4"; fail "exit code $rc, want 130"; }
grep -q '^par3drun: node [^ ]* (node rank 1) was stopped by SIGINT; stopping the job (grace 1 s)$' "$T/out4" ||
  { cat "$T/out4"; fail "the stopped-by-SIGINT line"; }
! grep -q 'unexpected\|lost the agent' "$T/out4" || { cat "$T/out4"; fail "reported as lost"; }
echo "ok 4: an agent stopped by SIGINT is reported so"
