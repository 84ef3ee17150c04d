#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_shrink.sh — an elastic job over the static TCP rendezvous
# (separate par3drun agents on loopback, real sockets, real SIGKILL): 5
# agents, --spares 1, tp2 on 2 rank slots a node (dp 4: one replica a
# node, node rank 4 the spare), --min-dp 2, the bundled worker with
# checkpoints, --verify and --global-batch 24 --micro-batch 2. SIGKILL of
# node rank 2's par3drun heals on the spare; then SIGKILL of node rank 1's
# shrinks the job by its replica (dp 4 -> 3, 4 micro-batches a replica
# instead of 3): every surviving node ends 0, --verify passes over every
# step, the leader's events.jsonl has the replace and the shrink, and every
# node holds the same narrower placement.
. "$(dirname "$0")/lib/multinode_lib.sh"
[[ -x ${P3D_WORKER:-} ]] || { echo "skip: p3d-worker not built (P3D_WORKER unset)"; exit 77; }
H100=$P3D_SRC/examples/topologies/dgx-h100.xml
TOPOS=("$H100" "$H100" "$H100" "$H100")
CK=$T/ck
WARGS=(--backend cpu --verify --layers 4 --hidden 16 --lr 1 --timeout 60 --steps 4000 --checkpoint-every 25
       --checkpoint-keep 2 --checkpoint-dir "$CK")
# waits (bounded) until $1 holds, polling
until_true() {
  for _ in $(seq 1200); do eval "$1" && return 0; sleep 0.05; done
  return 1
}
P=$(free_port)
for i in 0 1 2 3 4; do
  agent sh $i 5 "$P" --tp 2 --nproc-per-node 2 --spares 1 --min-dp 2 --global-batch 24 --micro-batch 2 \
    --max-restarts 3 --grace 2 -- "$P3D_WORKER" "${WARGS[@]}"
done
until_true 'compgen -G "$CK/step-*" >/dev/null' || { bad "no checkpoint came"; sed 's/^/  /' "$T/sh.0.err"; exit 1; }
kill -KILL "${AG[2]}"
# the spare took node 2's replica and every rank runs again
until_true 'grep -q "\"restart\": 1, \"recovery_s\"" "$T/sh.rd0/events.jsonl" 2>/dev/null' ||
  { bad "no recovery from the first loss"; sed 's/^/  /' "$T/sh.0.err"; }
kill -KILL "${AG[1]}"
codes=""
for i in 0 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[1]}" "${AG[2]}" 2>/dev/null
[ "$codes" = " 0 0 0" ] || { bad "exit codes$codes, want 0 0 0"; tail -20 "$T/sh.0.err" | sed 's/^/  /'; }
grep -q 'verify: pass' "$T"/sh.*.out "$T"/sh.*.err || bad "--verify did not pass across the heal and the shrink"
# the job ended at dp 3: its newest complete checkpoint has the 6 shards
# of world 6 (the checkpoint's own record, not the ranks' output lines,
# which par3drun may drop under load)
last=$(ls -d "$CK"/step-* | sort | tail -1)
grep -qx 'world_size 6' "$last/complete" || { bad "the last checkpoint is not one of world 6"; cat "$last/complete"; }
[ "$(ls "$last" | grep -c '^rank-.*\.bin$')" = 6 ] || bad "the last checkpoint does not hold 6 shards"
# rank 0's line where it resumed across widths: said when it is there
grep -q 'resuming at dp 3' "$T"/sh.*.err ||
  echo "note: rank 0's 'resuming at dp 3' line is not in the output (dropped or not flushed under load)"
ev=$T/sh.rd0/events.jsonl
python3 - "$ev" <<'PY' || { bad "events"; sed 's/^/  /' "$ev"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
rep = [e for e in ev if e["event"] == "replace" and e.get("spare")]
assert len(rep) == 1 and rep[0]["failed"].endswith(":2") and rep[0]["spare"].endswith(":4"), rep
s = [e for e in ev if e["event"] == "shrink"]
assert len(s) == 1, [e["event"] for e in ev]
s = s[0]
assert (s["old_dp"], s["new_dp"], s["old_world"], s["new_world"]) == (4, 3, 8, 6), s
assert (s["global_batch"], s["micro_batches"], s["exact"]) == (24, 4, True), s
assert ev[-1]["event"] == "end" and ev[-1]["exit_code"] == 0, ev[-1]
PY
sum=$(sha256sum <"$T/sh.rd0/placement.json")
for i in 3 4; do
  [ "$(sha256sum <"$T/sh.rd$i/placement.json")" = "$sum" ] || bad "placement.json of node $i differs from the leader's"
done
python3 - "$T/sh.rd0/placement.json" <<'PY' || bad "the placement after the shrink"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["world_size"] == 6 and p["mesh"]["dp"] == 3, (p["world_size"], p["mesh"])
nodes = {r["node"] for r in p["ranks"]}
assert not any(n.endswith(":1") or n.endswith(":2") for n in nodes), nodes
PY
grep -q '^par3drun: width: dp 4 -> 3' "$T/sh.0.err" || { bad "no width history"; tail -12 "$T/sh.0.err" | sed 's/^/  /'; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) workers left behind"
[ "$fail" = 0 ] && echo "PASS multinode_shrink"
exit "$fail"
