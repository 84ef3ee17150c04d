#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_heal.sh — a lost node replaced by a spare over the static TCP
# rendezvous (separate par3drun agents on loopback, real sockets, real
# SIGKILL): 5 agents, --spares 1 (4 used + node rank 4 kept spare), tp8 on
# 4 x 8 GPUs. SIGKILL of node rank 2's agent mid-run -> every surviving
# node exits 0, the spare took exactly node 2's ranks (on the same GPU
# indices), no other rank moved, placement.json identical (sha256) on every
# surviving node with the previous one kept as placement.1.json, the
# leader's events.jsonl tells it. Then: losing the spare moves nothing, and
# a second loss with no spare left ends the job (exit 1) saying so.
# (No racks: the static rendezvous knows racks only from Slurm.)
. "$(dirname "$0")/lib/multinode_lib.sh"

# generation 0 runs until killed; after a restart every rank ends at once
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'

# waits until all five nodes wrote their placement and the 32 ranks ran
wait_up() {
  local name=$1
  for _ in $(seq 400); do
    [ "$(cat "$T"/"$name".*.out 2>/dev/null | grep -c 'gen=0')" -ge 32 ] && return 0
    sleep 0.05
  done
  bad "$name: the 32 ranks did not start"; return 1
}

# ---- 1. node rank 2's agent killed -> its ranks on the spare ----------------
P=$(free_port)
for i in 0 1 2 3 4; do
  agent heal $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 -- sh -c "$W"
done
wait_up heal
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])).get("spares"); sys.exit(0 if s == ["vm:4"] or (len(s) == 1 and s[0].endswith(":4")) else 1)' \
  "$T/heal.rd0/placement.json" || bad "the spare is not node rank 4: $(grep -o '"spares": [^]]*]' "$T/heal.rd0/placement.json")"
t0=$(now_ms)
kill -KILL "${AG[2]}"
codes=""
for i in 0 1 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
t1=$(now_ms)
wait "${AG[2]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "heal: exit codes$codes, want 0 0 0 0"; sed 's/^/  /' "$T/heal.0.err"; }
echo "heal: the job ended $((t1 - t0)) ms after the agent was killed"
sum=$(sha256sum <"$T/heal.rd0/placement.json")
for i in 1 3 4; do
  [ "$(sha256sum <"$T/heal.rd$i/placement.json")" = "$sum" ] || bad "placement.json of node $i differs from the leader's"
  cmp -s "$T/heal.rd0/placement.1.json" "$T/heal.rd$i/placement.1.json" ||
    bad "node $i: placement.1.json missing or not the leader's previous placement"
done
# exactly node 2's ranks moved, to the spare, GPU for GPU; nothing else moved
python3 - "$T/heal.rd0/placement.1.json" "$T/heal.rd0/placement.json" <<'PY' || bad "heal: the moved ranks are wrong"
import json, sys
old = {r["rank"]: r for r in json.load(open(sys.argv[1]))["ranks"]}
new = {r["rank"]: r for r in json.load(open(sys.argv[2]))["ranks"]}
assert old.keys() == new.keys(), "rank sets differ"
lost = next(r["node"] for r in old.values() if r["node"].endswith(":2"))
moved = sorted(r for r in old if old[r]["node"] != new[r]["node"] or old[r]["gpu"] != new[r]["gpu"])
want = sorted(r for r in old if old[r]["node"] == lost)
if moved != want or len(want) != 8:
    sys.exit(f"moved {moved}, want the ranks of {lost}: {want}")
spare = {new[r]["node"] for r in moved}
if len(spare) != 1 or not spare.pop().endswith(":4"):
    sys.exit(f"the moved ranks went to {sorted({new[r]['node'] for r in moved})}, want the spare (node rank 4)")
bad = [r for r in moved if new[r]["gpu"] != old[r]["gpu"]]
if bad:
    sys.exit(f"ranks {bad} changed GPU index on the spare")
PY
# every rank ran again: 32 gen=1 lines, ranks 16-23 on the spare
n1=$(cat "$T"/heal.[0134].out | grep -c 'gen=1')
[ "$n1" = 32 ] || bad "heal: $n1 ranks ran after the restart, want 32"
for r in 16 17 18 19 20 21 22 23; do
  grep -q "rank=$r gen=1" "$T/heal.4.out" || bad "heal: rank $r did not run on the spare"
done
[ "$(grep -c 'gen=0' "$T/heal.4.out")" = 0 ] || bad "heal: the spare ran ranks before the replacement"
ev=$T/heal.rd0/events.jsonl
grep -q '"event": "failure", "node": "[^"]*:2", "rank": -1, "cause": "node lost"' "$ev" || bad "events: no node-lost failure"
grep -q '"event": "replace", "failed": "[^"]*:2", "spare": "[^"]*:4", "moved_ranks": \[16, 17, 18, 19, 20, 21, 22, 23\], "restart": 1' "$ev" ||
  { bad "events: replace record"; sed 's/^/  /' "$ev"; }
grep -q '"event": "restart", "restart": 1, "kind": "replacement"' "$ev" || bad "events: no replacement restart"
grep -q '"event": "running", "restart": 1, "recovery_s": [0-9.]*' "$ev" || bad "events: no recovery time"
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || bad "events: end record"
grep -q 'ranks 16-23 of [^ ]*:2 moved to spare [^ ]*:4' "$T/heal.0.err" || { bad "heal: the leader did not tell the story"; sed 's/^/  /' "$T/heal.0.err"; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "heal: $(leftovers) workers left behind"

# ---- 2. the spare lost: nothing moves, no restart, exit 0 -------------------
P=$(free_port)
W2='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ -e "$T_DONE" ] && exit 0; sleep 0.1; exec sh -c "while [ ! -e \"\$T_DONE\" ]; do sleep 0.05; done"'
for i in 0 1 2 3 4; do
  agent spare $i 5 "$P" --tp 8 --spares 1 --max-restarts 2 --grace 1 --env "T_DONE=$T/spare.done" -- sh -c "$W2"
done
wait_up spare
kill -KILL "${AG[4]}"
sleep 0.5
touch "$T/spare.done"
codes=""
for i in 0 1 2 3; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[4]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "spare lost: exit codes$codes, want 0 0 0 0"; sed 's/^/  /' "$T/spare.0.err"; }
grep -q '"event": "replace", "failed": "[^"]*:4", "spare": null, "moved_ranks": \[\]' "$T/spare.rd0/events.jsonl" ||
  bad "spare lost: no replace record with nothing moved"
[ "$(cat "$T"/spare.*.out | grep -c 'gen=1')" = 0 ] || bad "spare lost: ranks were restarted"
[ -e "$T/spare.rd0/placement.1.json" ] && bad "spare lost: the placement was replaced"

# ---- 3. spares exhausted: the second loss ends the job, exit 1 ---------------
P=$(free_port)
for i in 0 1 2 3 4; do
  agent ex $i 5 "$P" --tp 8 --spares 1 --max-restarts 3 --grace 1 -- sh -c 'echo "rank=$RANK gen=$P3D_RESTART_COUNT"; exec sleep 60'
done
wait_up ex
kill -KILL "${AG[3]}"
for _ in $(seq 200); do [ -e "$T/ex.rd0/placement.1.json" ] && grep -q '"restart": 1, "recovery_s"' "$T/ex.rd0/events.jsonl" && break; sleep 0.05; done
kill -KILL "${AG[1]}"
codes=""
for i in 0 2 4; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[1]}" "${AG[3]}" 2>/dev/null
[ "$codes" = " 1 1 1" ] || { bad "exhausted: exit codes$codes, want 1 1 1"; sed 's/^/  /' "$T/ex.0.err"; }
grep -q 'no spare node left' "$T/ex.0.err" || { bad "exhausted: the leader did not say no spare is left"; sed 's/^/  /' "$T/ex.0.err"; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "exhausted: $(leftovers) workers left behind"

[ "$fail" = 0 ] && echo "PASS multinode_heal"
exit "$fail"
