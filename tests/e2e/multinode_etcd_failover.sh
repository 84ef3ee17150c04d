#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_etcd_failover.sh — the leader lost when the agents met through a
# real etcd (tests/services/etcd.sh on 127.0.0.1): five agents, --spares 1,
# tp 8 on 4 x 8 GPUs, --node-timeout 3. etcd hands out node ranks in
# arrival order, so the test reads who is who from what the ranks print.
# The leader's par3drun (node rank 0) is SIGKILLed mid-run -> node rank 1
# takes over once a majority rejoined it (the succession of every backend,
# docs/multinode.md "When the leader dies"): every survivor exits 0, exactly
# the old leader's ranks moved, all to the spare, GPU for GPU,
# placement.json identical on the survivors, the new leader's events.jsonl
# has the takeover, nothing is left running and etcd holds no key of the
# job once the killed agent's lease has lapsed.
. "$(dirname "$0")/lib/multinode_lib.sh"
etcd_up

# generation 0 runs until ended; after the takeover every rank ends at once
W='echo "rank=$RANK node=$NODE_RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES master=$MASTER_ADDR:$MASTER_PORT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
for i in 0 1 2 3 4; do
  "$PAR3DRUN" --nnodes 5 --rdzv "etcd:$URL" --job-id "fo-$$" --topology "${TOPOS[$((i % 4))]}" \
    --run-dir "$T/fo.rd$i" --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 3 --verbose -- sh -c "$W" \
    >"$T/fo.$i.out" 2>"$T/fo.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
done
for _ in $(seq 600); do
  [ "$(cat "$T"/fo.*.out 2>/dev/null | grep -c 'gen=0')" -ge 32 ] && break
  sleep 0.05
done
[ "$(cat "$T"/fo.*.out | grep -c 'gen=0')" -ge 32 ] || { bad "the 32 ranks did not start"; sed 's/^/  /' "$T"/fo.*.err; exit 1; }
# who is who: the agent whose ranks say NODE_RANK 0 leads, the one that ran
# nothing is the spare; node rank 1 (the successor) says so on stderr
leader=-1 spare=-1
for i in 0 1 2 3 4; do
  if grep -q 'node=0 gen=0' "$T/fo.$i.out"; then leader=$i
  elif ! grep -q 'gen=0' "$T/fo.$i.out"; then spare=$i
  fi
done
[ "$leader" -ge 0 ] && [ "$spare" -ge 0 ] || { bad "cannot tell the leader ($leader) and the spare ($spare) apart"; exit 1; }
# every other node holds the successor list (it says so under --verbose): a
# node without one when the leader dies can only stop
for _ in $(seq 400); do
  k=0
  for i in 0 1 2 3 4; do
    [ "$i" != "$leader" ] && grep -q 'the successor list of restart 0' "$T/fo.$i.err" && k=$((k + 1))
  done
  [ "$k" = 4 ] && break
  sleep 0.05
done
[ "$k" = 4 ] || bad "only $k of 4 nodes hold the successor list"
t0=$(now_ms)
kill -KILL "${AG[$leader]}"
codes="" want=""
for i in 0 1 2 3 4; do
  [ "$i" = "$leader" ] && continue
  wait "${AG[$i]}"; codes="$codes $?"; want="$want 0"
done
t1=$(now_ms)
wait "${AG[$leader]}" 2>/dev/null
[ "$codes" = "$want" ] || { bad "exit codes$codes, want$want"; for i in 0 1 2 3 4; do sed "s/^/  $i: /" "$T/fo.$i.err"; done; }
echo "the job ended $((t1 - t0)) ms after the leader (agent $leader) was killed"
succ=-1
for i in 0 1 2 3 4; do
  [ "$i" = "$leader" ] && continue
  grep -q 'this node is its successor: taking over' "$T/fo.$i.err" && succ=$i
done
[ "$succ" -ge 0 ] || { bad "no node said it takes over"; exit 1; }
sum=$(sha256sum <"$T/fo.rd$succ/placement.json")
for i in 0 1 2 3 4; do
  [ "$i" = "$leader" ] && continue
  [ "$(sha256sum <"$T/fo.rd$i/placement.json")" = "$sum" ] || bad "placement.json of agent $i differs from the new leader's"
done
python3 - "$T/fo.rd$succ/placement.1.json" "$T/fo.rd$succ/placement.json" <<'PY' || bad "the moved ranks are wrong"
import json, sys
old = {r["rank"]: r for r in json.load(open(sys.argv[1]))["ranks"]}
doc = json.load(open(sys.argv[2]))
new = {r["rank"]: r for r in doc["ranks"]}
assert old.keys() == new.keys(), "rank sets differ"
lost = old[0]["node"]
assert doc["lost"] == [lost], (doc["lost"], lost)
moved = sorted(r for r in old if (old[r]["node"], old[r]["gpu"]) != (new[r]["node"], new[r]["gpu"]))
want = sorted(r for r in old if old[r]["node"] == lost)
assert moved == want and len(want) == 8, (moved, want)
assert len({new[r]["node"] for r in moved}) == 1, "the old leader's ranks went to several nodes"
assert all(new[r]["gpu"] == old[r]["gpu"] for r in moved), "a moved rank changed GPU index"
PY
n1=$(cat "$T"/fo.*.out | grep -c 'gen=1')
[ "$n1" = 32 ] || bad "$n1 ranks ran after the takeover, want 32"
[ "$(grep -c 'gen=1' "$T/fo.$spare.out")" = 8 ] || bad "the spare ran $(grep -c 'gen=1' "$T/fo.$spare.out") ranks, want 8"
grep -q 'rank=0 node=[0-9]* gen=1 ' "$T/fo.$spare.out" || bad "rank 0 did not move to the spare"
# MASTER_ADDR follows rank 0: one address and port for every rank
[ "$(grep -h 'gen=1' "$T"/fo.*.out | sed 's/.*master=//' | sort -u | wc -l)" = 1 ] ||
  bad "the ranks of generation 1 disagree on MASTER_ADDR:MASTER_PORT"
ev=$T/fo.rd$succ/events.jsonl
grep -q '"event": "leader_lost", "leader": "[^"]*:0", "successor": "[^"]*:1"' "$ev" ||
  { bad "events: no leader_lost record"; sed 's/^/  /' "$ev" 2>/dev/null; }
grep -q '"event": "takeover", "old_leader": "[^"]*:0", "new_leader": "[^"]*:1", "reason": "[^"]*", "restart": 1, "heartbeat_to_running_s": [0-9.]*' "$ev" ||
  { bad "events: no takeover record"; sed 's/^/  /' "$ev" 2>/dev/null; }
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || { bad "events: end record"; sed 's/^/  /' "$ev"; }
grep -o '"heartbeat_to_running_s": [0-9.]*' "$ev"
sleep 0.3
if [ "$(leftovers)" != 0 ]; then
  bad "$(leftovers) processes left behind:"
  for d in /proc/[0-9]*; do
    grep -qs "P3D_TEST_MARK=$MARK" "$d/environ" && echo "  ${d#/proc/}: $(tr '\0' ' ' <"$d/cmdline")"
  done
fi
# the survivors revoke their leases at the end; the killed leader's keys go
# with its lease's TTL (10 s)
for _ in $(seq 40); do [ "$(nkeys)" = 0 ] && break; sleep 0.5; done
[ "$(nkeys)" = 0 ] || bad "$(nkeys) keys of the job outlived the killed leader's lease (10 s)"
echo "leader agent $leader, successor agent $succ, spare agent $spare"
[ "$fail" = 0 ] && echo "PASS multinode_etcd_failover"
exit "$fail"
