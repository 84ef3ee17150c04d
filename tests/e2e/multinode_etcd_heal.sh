#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_etcd_heal.sh — a lost node replaced by a spare when the agents
# meet through a real etcd (tests/services/etcd.sh on 127.0.0.1): five
# agents, --spares 1, tp 8 on 4 x 8 GPUs. Node ranks come from etcd in
# arrival order, so the test reads who is who from what the ranks print:
# the leader is the agent whose ranks say NODE_RANK 0, the spare the one
# that ran nothing. A running non-leader agent is SIGKILLed mid-run ->
# every survivor exits 0, exactly the lost node's ranks moved, all to the
# spare, GPU for GPU, placement.json identical on the survivors, the
# leader's events.jsonl tells it, nothing is left running and etcd holds
# no key of the job afterwards.
. "$(dirname "$0")/lib/multinode_lib.sh"
etcd_up

# generation 0 runs until killed; after the restart every rank ends at once
W='echo "rank=$RANK node=$NODE_RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
for i in 0 1 2 3 4; do
  "$PAR3DRUN" --nnodes 5 --rdzv "etcd:$URL" --job-id "heal-$$" --topology "${TOPOS[$((i % 4))]}" \
    --run-dir "$T/heal.rd$i" --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 5 -- sh -c "$W" \
    >"$T/heal.$i.out" 2>"$T/heal.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
done
for _ in $(seq 600); do
  [ "$(cat "$T"/heal.*.out 2>/dev/null | grep -c 'gen=0')" -ge 32 ] && break
  sleep 0.05
done
[ "$(cat "$T"/heal.*.out | grep -c 'gen=0')" -ge 32 ] || { bad "the 32 ranks did not start"; sed 's/^/  /' "$T"/heal.0.err; exit 1; }
leader=-1 spare=-1 victim=-1
for i in 0 1 2 3 4; do
  if grep -q 'node=0 gen=0' "$T/heal.$i.out"; then leader=$i
  elif ! grep -q 'gen=0' "$T/heal.$i.out"; then spare=$i
  elif [ "$victim" -lt 0 ]; then victim=$i
  fi
done
[ "$leader" -ge 0 ] && [ "$spare" -ge 0 ] && [ "$victim" -ge 0 ] ||
  { bad "cannot tell the leader ($leader), the spare ($spare) and a victim ($victim) apart"; exit 1; }
lost_node=$(grep -o 'node=[0-9]*' "$T/heal.$victim.out" | head -1 | cut -d= -f2)
kill -KILL "${AG[$victim]}"
codes="" want=""
for i in 0 1 2 3 4; do
  [ "$i" = "$victim" ] && continue
  wait "${AG[$i]}"; codes="$codes $?"; want="$want 0"
done
wait "${AG[$victim]}" 2>/dev/null
[ "$codes" = "$want" ] || { bad "exit codes$codes, want$want"; sed 's/^/  /' "$T/heal.$leader.err"; }
one_node_moved heal 5 "$leader" "$victim"
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])).get("spares"); assert not s, s' \
  "$T/heal.rd$leader/placement.json" || bad "a spare is left after the replacement"
# every rank ran again, the spare's from the start of generation 1
[ "$(cat "$T"/heal.*.out | grep -c 'gen=1')" = 32 ] || bad "$(cat "$T"/heal.*.out | grep -c 'gen=1') ranks ran after the restart, want 32"
[ "$(grep -c 'gen=1' "$T/heal.$spare.out")" = 8 ] || bad "the spare ran $(grep -c 'gen=1' "$T/heal.$spare.out") ranks, want 8"
ev=$T/heal.rd$leader/events.jsonl
grep -q '"event": "failure", "node": "[^"]*", "rank": -1, "cause": "node lost"' "$ev" || bad "events: no node-lost failure"
grep -q '"event": "replace", "failed": "[^"]*", "spare": "[^"]*", "moved_ranks": \[' "$ev" || bad "events: no replace record"
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || { bad "events: end record"; sed 's/^/  /' "$ev"; }
sleep 0.3
if [ "$(leftovers)" != 0 ]; then
  bad "$(leftovers) processes left behind:"
  for d in /proc/[0-9]*; do
    grep -qs "P3D_TEST_MARK=$MARK" "$d/environ" && echo "  ${d#/proc/}: $(tr '\0' ' ' <"$d/cmdline")"
  done
fi
# the survivors revoke their leases at the end; the killed agent's key goes
# with its lease's TTL (--node-timeout: 5 s)
k=$(nkeys)
[ "$k" -le 1 ] || bad "after the job $k keys remain under /par3drun/, want at most the killed agent's"
for _ in $(seq 40); do [ "$(nkeys)" = 0 ] && break; sleep 0.5; done
[ "$(nkeys)" = 0 ] || bad "the killed agent's key outlived its lease (5 s)"
echo "lost node rank $lost_node (agent $victim); leader agent $leader, spare agent $spare"
[ "$fail" = 0 ] && echo "PASS multinode_etcd_heal"
exit "$fail"
