#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_k8s.sh — the k8s rendezvous as a Kubernetes Indexed Job uses it
# (docs/kubernetes.md): three agents on loopback, each with only
# JOB_COMPLETION_INDEX for its node rank (no --node-rank), meet at the
# leader given as k8s:HOST:PORT and run one job with one placement; the
# inputs a pod can get wrong exit 2 with a message naming them; and the
# leader's pod lost (5 pods, --spares 1, its par3drun SIGKILLed): pod 1
# takes over, the leader's 8 ranks run on the spare pod, every surviving
# pod exits 0 (an Indexed Job with backoffLimitPerIndex keeps the other
# pods running: docs/kubernetes.md).
. "$(dirname "$0")/lib/multinode_lib.sh"

k8s_agent() { # NAME INDEX PORT [args...]  (NNODES pods, default 3)
  local name=$1 i=$2 port=$3; shift 3
  JOB_COMPLETION_INDEX=$i "$PAR3DRUN" --nnodes "${NNODES:-3}" --rdzv "k8s:127.0.0.1:$port" \
    --rdzv-token-file "$T/token" --topology "${TOPOS[$((i % 4))]}" --run-dir "$T/$name.rd$i" "$@" \
    >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
}

# ---- 1. three pods meet; ranks come from JOB_COMPLETION_INDEX ------------
P=$(free_port)
for i in 0 1 2; do
  k8s_agent ok $i "$P" --tp 2 -- sh -c 'echo "rank=$RANK node=$NODE_RANK world=$WORLD_SIZE"'
done
for i in 0 1 2; do
  wait "${AG[$i]}"; rc=$?
  [ "$rc" = 0 ] || { bad "node $i exit $rc"; sed 's/^/  /' "$T/ok.$i.err"; }
done
sum0=$(md5sum <"$T/ok.rd0/placement.json")
for i in 1 2; do
  [ "$(md5sum <"$T/ok.rd$i/placement.json")" = "$sum0" ] || bad "placement.json of node $i differs from node 0's"
  grep -q "node=$i " "$T/ok.$i.out" || bad "node $i's ranks do not say NODE_RANK=$i: $(head -1 "$T/ok.$i.out")"
done
n=$(cat "$T"/ok.*.out | grep -c 'rank=')
w=$(grep -o 'world=[0-9]*' "$T/ok.0.out" | head -1)
[ "$n" -gt 0 ] && [ "$w" = "world=$n" ] || bad "expected every rank once: $n rank lines, $w"

# ---- 2. what a pod can get wrong: exit 2 and the reason --------------------
expect2() { # WHAT PATTERN -- env/args...
  local what=$1 pat=$2; shift 3
  env "$@" >"$T/e.out" 2>"$T/e.err"; rc=$?
  [ "$rc" = 2 ] && grep -q -- "$pat" "$T/e.err" || { bad "$what: exit $rc, want 2 and '$pat'"; sed 's/^/  /' "$T/e.err"; }
}
base=(--rdzv-token-file "$T/token" --topology "${TOPOS[0]}" --rdzv-timeout 3 -- /bin/true)
expect2 "no index" "JOB_COMPLETION_INDEX is not set" -- -u JOB_COMPLETION_INDEX \
  "$PAR3DRUN" --nnodes 3 --rdzv "k8s:127.0.0.1:$P" "${base[@]}"
expect2 "no --nnodes" "needs --nnodes" -- JOB_COMPLETION_INDEX=1 "$PAR3DRUN" --rdzv "k8s:127.0.0.1:$P" "${base[@]}"
expect2 "index out of range" "node index 5: expected 0..2" -- JOB_COMPLETION_INDEX=5 \
  "$PAR3DRUN" --nnodes 3 --rdzv "k8s:127.0.0.1:$P" "${base[@]}"
expect2 "garbled index" "JOB_COMPLETION_INDEX='1x'" -- JOB_COMPLETION_INDEX=1x \
  "$PAR3DRUN" --nnodes 3 --rdzv "k8s:127.0.0.1:$P" "${base[@]}"
expect2 "rank disagrees" "disagrees with JOB_COMPLETION_INDEX=1" -- JOB_COMPLETION_INDEX=1 \
  "$PAR3DRUN" --nnodes 3 --node-rank 2 --rdzv "k8s:127.0.0.1:$P" "${base[@]}"
expect2 "no domain to find the leader" "does not end in -1" -- JOB_COMPLETION_INDEX=1 HOSTNAME=not-a-pod \
  "$PAR3DRUN" --nnodes 3 --rdzv k8s "${base[@]}"
expect2 "no token" "needs the job's token" -- -u P3D_RDZV_TOKEN JOB_COMPLETION_INDEX=1 \
  "$PAR3DRUN" --nnodes 3 --rdzv "k8s:127.0.0.1:$P" --topology "${TOPOS[0]}" -- /bin/true

# ---- 3. the leader's pod lost: pod 1 takes over ------------------------------
P=$(free_port)
W='echo "rank=$RANK node=$NODE_RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
for i in 0 1 2 3 4; do
  NNODES=5 k8s_agent fo $i "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 3 --verbose -- sh -c "$W"
done
for _ in $(seq 600); do
  [ "$(cat "$T"/fo.*.out 2>/dev/null | grep -c 'gen=0')" -ge 32 ] && break
  sleep 0.05
done
wait_list fo 0 1 "k8s leader lost" 1 2 3 4
kill -KILL "${AG[0]}"
codes=""
for i in 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "k8s leader lost: exit codes$codes, want 0 0 0 0"; for i in 1 2 3 4; do sed "s/^/  $i: /" "$T/fo.$i.err"; done; }
grep -q '"event": "takeover", "old_leader": "[^"]*:0", "new_leader": "[^"]*:1", .*"decided_by": "majority"' "$T/fo.rd1/events.jsonl" ||
  { bad "k8s leader lost: pod 1 did not take over"; sed 's/^/  /' "$T/fo.rd1/events.jsonl" 2>/dev/null; }
[ "$(grep -c 'gen=1' "$T/fo.4.out")" = 8 ] || bad "k8s leader lost: the spare pod ran $(grep -c 'gen=1' "$T/fo.4.out") ranks, want 8"
[ "$(cat "$T"/fo.*.out | grep -c 'gen=1')" = 32 ] || bad "k8s leader lost: not 32 ranks after the takeover"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) processes left over"
[ "$fail" = 0 ] && echo "ok: k8s rendezvous (3 pods by JOB_COMPLETION_INDEX, 7 refusals, the leader's pod lost)"
exit $fail
