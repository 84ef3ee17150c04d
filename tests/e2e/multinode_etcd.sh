#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_etcd.sh — par3drun agents meet through a real etcd on 127.0.0.1
# (tests/services/etcd.sh): node ranks from etcd transactions, one
# placement JSON byte for byte on every node, keys gone after the job
# (leases revoked), a rank crash ends all agents with one code, a node that
# never registers is named, an unreachable etcd and an etcd stopped
# mid-rendezvous give a clear error naming the URL.
. "$(dirname "$0")/lib/multinode_lib.sh"
etcd_up

# eagent NAME I N JOB [extra...] -- PROG: the I-th agent started (its node
# rank comes from etcd); out/err in $T/NAME.I.{out,err}, run dir
# $T/NAME.rdI, PID in AG[I]
eagent() {
  local name=$1 i=$2 n=$3 job=$4; shift 4
  "$PAR3DRUN" --nnodes "$n" --rdzv "etcd:$URL" --job-id "$job" --topology "${TOPOS[$((i % 4))]}" \
    --run-dir "$T/$name.rd$i" "$@" >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
}

# ---- 1. four agents: same bytes everywhere, every rank once, keys cleaned --
for i in 0 1 2 3; do
  eagent ok $i 4 ok-$$ --tp 8 -- sh -c 'echo "rank=$RANK node=$NODE_RANK world=$WORLD_SIZE"'
done
for i in 0 1 2 3; do
  wait "${AG[$i]}"; rc=$?
  [ "$rc" = 0 ] || { bad "happy path: agent $i exit $rc"; sed 's/^/  /' "$T/ok.$i.err"; }
done
sum0=$(md5sum <"$T/ok.rd0/placement.json")
for i in 1 2 3; do
  [ "$(md5sum <"$T/ok.rd$i/placement.json")" = "$sum0" ] || bad "placement.json of agent $i differs from agent 0's"
done
grep -q '"ranks"' "$T/ok.rd0/placement.json" || bad "placement.json has no ranks"
[ "$(cat "$T"/ok.*.out | grep -o 'rank=[0-9]*' | sort -u | wc -l)" = 32 ] || bad "expected 32 distinct ranks"
# every node rank 0..3 was handed out exactly once
[ "$(cat "$T"/ok.*.out | grep -o 'node=[0-9]*' | sort -u | tr '\n' ' ')" = "node=0 node=1 node=2 node=3 " ] ||
  bad "node ranks: $(cat "$T"/ok.*.out | grep -o 'node=[0-9]*' | sort -u | tr '\n' ' ')"
k=$(nkeys)
[ "$k" = 0 ] || bad "after the job $k keys remain under /par3drun/ (leases not revoked)"

# ---- 2. a rank crash ends all three agents with one code -------------------
for i in 0 1 2; do
  eagent crash $i 3 crash-$$ --tp 8 --grace 1 -- \
    sh -c 'if [ "$RANK" = 17 ]; then sleep 0.3; exit 3; fi; exec sleep 60'
done
codes=""
for i in 0 1 2; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 3 3 3" ] || bad "crash: exit codes$codes, want 3 3 3"
n=$(cat "$T"/crash.*.err | grep -c 'root cause:')
[ "$n" = 1 ] || bad "crash: root cause printed $n times, want once"

# ---- 3. a node that never registers: both agents name it --------------------
for i in 0 1; do eagent tmo $i 3 tmo-$$ --rdzv-timeout 1.5 -- true; done
wait "${AG[0]}"; rc0=$?; wait "${AG[1]}"; rc1=$?
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || bad "timeout: exit codes $rc0 $rc1, want 1 1"
cat "$T"/tmo.*.err | grep -q "etcd at $URL: timed out after 1.5 s: 2/3 nodes registered under /par3drun/tmo-$$/rank/; never arrived: node\[2\]" ||
  { bad "timeout: message"; cat "$T"/tmo.*.err | sed 's/^/  /'; }
[ "$(cat "$T"/tmo.*.err | grep -c 'never arrived: node\[2\]')" = 2 ] || bad "timeout: not both agents named node[2]"

# ---- 4. bad input: no --job-id, unreachable etcd -> exit 2 naming the URL ----
"$PAR3DRUN" --nnodes 2 --rdzv "etcd:$URL" -- true 2>"$T/nojob.err"; rc=$?
[ "$rc" = 2 ] && grep -q -- '--rdzv etcd needs --job-id' "$T/nojob.err" || bad "no job id: exit $rc: $(cat "$T/nojob.err")"
DEAD="http://127.0.0.1:$(free_port)"
"$PAR3DRUN" --nnodes 2 --rdzv "etcd:$DEAD" --job-id x -- true 2>"$T/dead.err"; rc=$?
[ "$rc" = 2 ] && grep -q "etcd at $DEAD: /v3/lease/grant: .*refused\|etcd at $DEAD: /v3/lease/grant: Couldn't connect" "$T/dead.err" ||
  { bad "unreachable etcd: exit $rc"; sed 's/^/  /' "$T/dead.err"; }

# ---- 5. etcd stopped mid-rendezvous: the waiting agent says so ---------------
eagent lost 0 3 lost-$$ --rdzv-timeout 20 -- true
for _ in $(seq 100); do [ "$(nkeys)" = 1 ] && break; sleep 0.05; done
[ "$(nkeys)" = 1 ] || bad "lost: agent 0 never registered"
t0=$(now_ms)
"$SVC" stop "$E"
wait "${AG[0]}"; rc=$?
t1=$(now_ms)
[ "$rc" = 1 ] || bad "lost: exit $rc, want 1"
[ $((t1 - t0)) -lt 8000 ] || bad "lost: took $((t1 - t0)) ms to notice"
grep -q "lost etcd during the rendezvous .*etcd at $URL" "$T/lost.0.err" || { bad "lost: message"; sed 's/^/  /' "$T/lost.0.err"; }
echo "etcd lost after registering: agent ended in $((t1 - t0)) ms: $(tail -1 "$T/lost.0.err")"

[ "$fail" = 0 ] && echo "PASS multinode_etcd"
exit "$fail"
