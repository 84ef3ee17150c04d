#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_static.sh — four par3drun agents on loopback meet through the
# static TCP rendezvous (real processes, real sockets): one placement JSON
# byte for byte on every node; a rank crash on node 2 of 4 ends all four
# within grace + 5 s with one exit code; SIGKILL of one agent ends the
# job; a node that never joins times out naming it; a wrong token is
# refused.
. "$(dirname "$0")/lib/multinode_lib.sh"

# ---- 1. happy path: same bytes everywhere, every rank runs once ----------
P=$(free_port)
for i in 0 1 2 3; do
  agent ok $i 4 "$P" --tp 8 -- sh -c 'echo "rank=$RANK node=$NODE_RANK local=$LOCAL_RANK world=$WORLD_SIZE"'
done
for i in 0 1 2 3; do
  wait "${AG[$i]}"; rc=$?
  [ "$rc" = 0 ] || { bad "happy path: node $i exit $rc"; sed 's/^/  /' "$T/ok.$i.err"; }
done
sum0=$(md5sum <"$T/ok.rd0/placement.json")
for i in 1 2 3; do
  [ "$(md5sum <"$T/ok.rd$i/placement.json")" = "$sum0" ] || bad "placement.json of node $i differs from node 0's"
done
grep -q '"ranks"' "$T/ok.rd0/placement.json" || bad "placement.json has no ranks"
nr=$(cat "$T"/ok.*.out | grep -c 'rank=')
[ "$nr" = 32 ] || bad "expected 32 rank lines, got $nr"
[ "$(cat "$T"/ok.*.out | grep -o 'rank=[0-9]*' | sort -u | wc -l)" = 32 ] || bad "ranks not unique"
grep -q 'rank=17 node=2 ' "$T/ok.2.out" || bad "rank 17 not on node 2: $(head -2 "$T/ok.2.out")"
grep -q 'world=32' "$T/ok.3.out" || bad "WORLD_SIZE wrong on node 3"

# ---- 2. a rank crash on node 2 of 4 ends all four with one code ------------
P=$(free_port)
t0=$(now_ms)
for i in 0 1 2 3; do
  agent crash $i 4 "$P" --tp 8 --grace 1 -- \
    sh -c 'if [ "$RANK" = 21 ]; then sleep 0.5; echo "rank 21 fails on purpose" >&2; exit 3; fi; exec sleep 60'
done
codes=""
for i in 0 1 2 3; do wait "${AG[$i]}"; codes="$codes $?"; done
t1=$(now_ms)
[ "$codes" = " 3 3 3 3" ] || bad "crash: exit codes$codes, want 3 3 3 3"
echo "crash: the job ended $((t1 - t0)) ms after the start (grace 1 s)"
grep -q 'root cause: rank 21' "$T/crash.0.err" || { bad "crash: the leader printed no root cause"; sed 's/^/  /' "$T/crash.0.err"; }
grep -q 'rank 21 fails on purpose' "$T/crash.0.err" || bad "crash: root cause lacks the rank's stderr"
n=$(cat "$T"/crash.*.err | grep -c 'root cause:')
[ "$n" = 1 ] || bad "crash: root cause printed $n times, want once"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "crash: $(leftovers) workers left behind"

# ---- 3. SIGKILL of one agent ends the job ----------------------------------
P=$(free_port)
for i in 0 1 2 3; do
  agent kill $i 4 "$P" --tp 8 --grace 1 -- sh -c 'exec sleep 60'
done
for _ in $(seq 100); do [ -f "$T/kill.rd3/placement.json" ] && [ -f "$T/kill.rd2/placement.json" ] && break; sleep 0.05; done
sleep 0.5
t0=$(now_ms)
kill -KILL "${AG[2]}"
codes=""
for i in 0 1 3; do wait "${AG[$i]}"; codes="$codes $?"; done
t1=$(now_ms)
wait "${AG[2]}" 2>/dev/null
[ "$codes" = " 1 1 1" ] || bad "sigkill: exit codes$codes, want 1 1 1"
echo "sigkill: the job ended $((t1 - t0)) ms after the agent was killed"
grep -q 'lost the agent of node .*node rank 2' "$T/kill.0.err" || { bad "sigkill: leader did not name the lost node"; sed 's/^/  /' "$T/kill.0.err"; }
sleep 0.5
[ "$(leftovers)" = 0 ] || bad "sigkill: $(leftovers) workers left behind"

# ---- 4. a node that never joins: timeout names it ---------------------------
P=$(free_port)
for i in 0 1; do
  agent tmo $i 3 "$P" --rdzv-timeout 1.5 -- true
done
wait "${AG[0]}"; rc0=$?
wait "${AG[1]}"; rc1=$?
[ "$rc0" != 0 ] && [ "$rc1" != 0 ] || bad "timeout: exit codes $rc0 $rc1, want non-zero"
grep -q 'timed out after 1.5 s: 2/3 nodes joined; never arrived: node\[2\]' "$T/tmo.0.err" ||
  { bad "timeout: leader message"; sed 's/^/  /' "$T/tmo.0.err"; }
grep -q 'never arrived: node\[2\]' "$T/tmo.1.err" || { bad "timeout: node 1 not told why"; sed 's/^/  /' "$T/tmo.1.err"; }
# the rendezvous did not complete: exit 1 on every side (docs/multinode.md)
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || bad "timeout: exit codes $rc0 $rc1, want 1 1"
# node 2 arrives after the leader gave up: nobody listens any more
"$PAR3DRUN" --nnodes 3 --node-rank 2 --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
  --rdzv-timeout 1 --topology "${TOPOS[2]}" --run-dir "$T/tmo.late" -- true >/dev/null 2>"$T/tmo.late.err"
rc=$?
[ "$rc" = 1 ] || { bad "late agent: exit $rc, want 1 like the leader's timeout"; sed 's/^/  /' "$T/tmo.late.err"; }
grep -q 'cannot reach the leader (node rank 0)' "$T/tmo.late.err" ||
  { bad "late agent: message"; sed 's/^/  /' "$T/tmo.late.err"; }

# ---- 5. a wrong token is refused; the job still starts with the right one --
P=$(free_port)
head -c 24 /dev/urandom | base64 >"$T/wrong"
chmod 600 "$T/wrong"
agent tok 0 2 "$P" --rdzv-timeout 20 -- true
"$PAR3DRUN" --nnodes 2 --node-rank 1 --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/wrong" \
  --topology "${TOPOS[1]}" --run-dir "$T/tok.bad" -- true >"$T/tok.bad.out" 2>"$T/tok.bad.err"
rc=$?
[ "$rc" = 2 ] || bad "wrong token: exit $rc, want 2"
grep -q 'node\[1\]: the leader (node rank 0) at .*: wrong job token: the peer does not prove' "$T/tok.bad.err" || { bad "wrong token: agent message"; sed 's/^/  /' "$T/tok.bad.err"; }
agent tok 1 2 "$P" -- true
wait "${AG[0]}"; rc0=$?
wait "${AG[1]}"; rc1=$?
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || bad "after a refused token: exit codes $rc0 $rc1"
grep -q 'refused .*wrong job token' "$T/tok.0.err" || bad "wrong token: the leader did not log the refusal"

# ---- 6. usage errors are exit 2 with a message --------------------------------
"$PAR3DRUN" --nnodes 2 --node-rank 1 --rdzv "static:127.0.0.1:$P" --topology "${TOPOS[0]}" -- true \
  >/dev/null 2>"$T/u1.err"
[ $? = 2 ] && grep -q 'needs the job.s token' "$T/u1.err" || bad "static without token: $(cat "$T/u1.err")"
"$PAR3DRUN" --nnodes 2 --rdzv "static:nohostport" --rdzv-token-file "$T/token" -- true >/dev/null 2>"$T/u2.err"
[ $? = 2 ] && grep -q 'expected static:HOST:PORT' "$T/u2.err" || bad "bad endpoint: $(cat "$T/u2.err")"
"$PAR3DRUN" --rdzv pmixx -- true >/dev/null 2>"$T/u3.err"
[ $? = 2 ] && grep -q "needs plugin p3d_rdzv_pmixx.so: not found in" "$T/u3.err" || bad "missing plugin: $(cat "$T/u3.err")"

[ "$fail" = 0 ] && echo "PASS multinode_static"
exit "$fail"
