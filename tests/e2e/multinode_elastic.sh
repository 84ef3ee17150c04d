#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_elastic.sh — issue #42's must-show, end to end in one running
# job: five agents on loopback (real sockets, real SIGKILL), --spares 1, tp2
# on 2 rank slots a node (dp 4: one replica a node, one node the spare),
# --min-dp 2, the bundled worker with checkpoints, --verify and a global
# batch kept across widths.
#
#   1. SIGKILL of one node's par3drun -> the spare takes its replica (replace)
#   2. SIGKILL of a second one -> no spare left: the job shrinks, dp 4 -> 3,
#      and runs on (`par3drun status` says dp 3 of 4 while it does)
#   3. `par3drun --join` on a new agent -> a spare (join) -> at the ranks'
#      next checkpoint the job grows back to dp 4 (grow, "at a checkpoint")
#
# Then every surviving agent and the joined one exit 0, --verify passes (the
# loss of every step equals the one-process reference's), the leader's
# events.jsonl has replace, shrink, join, grow in that order, status and the
# end summary say the widths. RDZV=etcd (multinode_etcd_elastic.sh): the
# same through the real etcd of tests/services/etcd.sh, node ranks from
# etcd in arrival order (read from what each rank prints).
#
# The worker runs --steps 30000 until the grow (restart 3) and then 300
# steps past its newest checkpoint, so that the job cannot end before the
# grow however slow the machine, and ends soon after it.
. "$(dirname "$0")/lib/multinode_lib.sh"
[[ -x ${P3D_WORKER:-} ]] || { echo "skip: p3d-worker not built (P3D_WORKER unset)"; exit 77; }
RDZV=${RDZV:-static}
NAME=el
if [ "$RDZV" = etcd ]; then
  etcd_up
  NAME=etcdel
fi
H100=$P3D_SRC/examples/topologies/dgx-h100.xml
CK=$T/ck
WARGS=(--backend cpu --verify --layers 4 --hidden 16 --lr 1 --timeout 60 --checkpoint-every 25
       --checkpoint-keep 3 --checkpoint-dir "$CK")
# the program of every rank: says who it is, then runs the worker (long
# before the grow, 300 steps past the newest complete checkpoint after it)
cat >"$T/w.sh" <<EOF
#!/usr/bin/env bash
steps=30000
if [ "\${P3D_RESTART_COUNT:-0}" -ge 3 ]; then
  last=\$(ls -d "$CK"/step-* 2>/dev/null | while read -r d; do [ -e "\$d/complete" ] && echo "\${d##*-}"; done | sort | tail -1)
  steps=\$((10#\${last:-0} + 300))
fi
echo "p3dw rank=\$RANK node=\$NODE_RANK gen=\$P3D_RESTART_COUNT world=\$WORLD_SIZE steps=\$steps"
exec "$P3D_WORKER" ${WARGS[*]} --steps "\$steps"
EOF
chmod +x "$T/w.sh"
# waits (bounded: 120 s) until $1 holds, polling
until_true() {
  for _ in $(seq 2400); do eval "$1" && return 0; sleep 0.05; done
  return 1
}
P=$(free_port)
JOB=elastic-$$-$RANDOM
rdzv_args() { # node rank I: the rendezvous options of the mode
  if [ "$RDZV" = etcd ]; then echo --rdzv "etcd:$URL" --job-id "$JOB" --node-timeout 5
  else echo --rdzv "static:127.0.0.1:$P" --node-rank "$1" --rdzv-token-file "$T/token"; fi
}
for i in 0 1 2 3 4; do
  # shellcheck disable=SC2046
  "$PAR3DRUN" --nnodes 5 $(rdzv_args $i) --topology "$H100" --run-dir "$T/$NAME.rd$i" \
    --tp 2 --nproc-per-node 2 --spares 1 --min-dp 2 --global-batch 24 --micro-batch 2 \
    --max-restarts 4 --grace 2 -- "$T/w.sh" >"$T/$NAME.$i.out" 2>"$T/$NAME.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
done
until_true 'compgen -G "$CK/step-*/complete" >/dev/null' ||
  { bad "no checkpoint came"; sed 's/^/  /' "$T/$NAME".*.err; exit 1; }
# who is who: the node rank each agent's ranks print; the spare ran none
declare -A NR
leader=-1 spare=-1
for i in 0 1 2 3 4; do
  n=$(grep -o 'p3dw rank=[0-9]* node=[0-9]*' "$T/$NAME.$i.out" | head -1 | sed 's/.*node=//')
  NR[$i]=${n:--1}
  [ "${NR[$i]}" = 0 ] && leader=$i
  [ "${NR[$i]}" = -1 ] && spare=$i
done
[ "$leader" -ge 0 ] && [ "$spare" -ge 0 ] || { bad "cannot tell the leader ($leader) and the spare ($spare)"; exit 1; }
victims=()
for i in 0 1 2 3 4; do [ "$i" != "$leader" ] && [ "$i" != "$spare" ] && victims+=("$i"); done
v1=${victims[1]} v2=${victims[0]}
ev=$T/$NAME.rd$leader/events.jsonl
status() { "$PAR3DRUN" status "$T/$NAME.rd$leader" 2>&1; }

# ---- 1. a loss healed on the spare ---------------------------------------------
kill -KILL "${AG[$v1]}"
until_true 'grep -q "\"restart\": 1, \"recovery_s\"" "$ev" 2>/dev/null' ||
  { bad "no recovery from the first loss"; sed 's/^/  /' "$T/$NAME.$leader.err"; exit 1; }

# ---- 2. a second loss: no spare left -> dp 4 -> 3 --------------------------------
kill -KILL "${AG[$v2]}"
until_true 'grep -q "\"restart\": 2, \"recovery_s\"" "$ev" 2>/dev/null' ||
  { bad "no recovery from the second loss (the shrink)"; sed 's/^/  /' "$T/$NAME.$leader.err"; exit 1; }
until_true 'status | grep -q "width: dp 3 of 4 (--min-dp 2)"' ||
  { bad "par3drun status did not show dp 3 of 4 while shrunk"; status | sed 's/^/  /'; }
ws=$(grep -o 'world=[0-9]*' "$T"/"$NAME".*.out | grep -c 'world=6$' || true)
kill -0 "${AG[$leader]}" 2>/dev/null || { bad "the job ended before the join"; sed 's/^/  /' "$T/$NAME.$leader.err"; exit 1; }

# ---- 3. a new agent joins -> a spare -> the job grows back at a checkpoint --------
# shellcheck disable=SC2046
if [ "$RDZV" = etcd ]; then jargs=(--rdzv "etcd:$URL" --job-id "$JOB")
else jargs=(--rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token"); fi
"$PAR3DRUN" --join "${jargs[@]}" --topology "$H100" --nproc-per-node 2 --run-dir "$T/$NAME.rd5" \
  -- "$T/w.sh" >"$T/$NAME.5.out" 2>"$T/$NAME.5.err" &
AG[5]=$!
PIDS+=($!)
until_true 'grep -q "\"event\": \"grow\"" "$ev" 2>/dev/null' ||
  { bad "the job did not grow"; sed 's/^/  /' "$T/$NAME.$leader.err"; sed 's/^/  joiner: /' "$T/$NAME.5.err"; }

codes="" want=""
for i in 0 1 2 3 4 5; do
  [ "$i" = "$v1" ] || [ "$i" = "$v2" ] && continue
  wait "${AG[$i]}"; codes="$codes $?"; want="$want 0"
done
wait "${AG[$v1]}" "${AG[$v2]}" 2>/dev/null
[ "$codes" = "$want" ] || { bad "exit codes$codes, want$want"; tail -30 "$T/$NAME.$leader.err" | sed 's/^/  /'; tail -20 "$T/$NAME.5.err" | sed 's/^/  joiner: /'; }
grep -q 'verify: pass' "$T"/"$NAME".*.out "$T"/"$NAME".*.err || bad "--verify did not pass across the heal, the shrink and the grow"
grep -q 'verify: FAIL\|verify: fail' "$T"/"$NAME".*.out "$T"/"$NAME".*.err && bad "--verify failed"
# the ranks ran at world 6 while shrunk and at world 8 after the grow, the
# joined node among them
[ "$ws" -ge 1 ] || bad "no rank ran at world 6 while shrunk"
grep -q 'gen=3 world=8' "$T/$NAME.5.out" || { bad "the joined node ran no rank after the grow"; sed 's/^/  /' "$T/$NAME.5.out"; }
last=$(ls -d "$CK"/step-* | sort | tail -1)
grep -qx 'world_size 8' "$last/complete" || { bad "the last checkpoint is not one of world 8"; cat "$last/complete"; }

python3 - "$ev" <<'PY' || { bad "events"; sed 's/^/  /' "$ev"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = [e["event"] for e in ev if e["event"] in ("replace", "shrink", "join", "grow")]
assert kinds == ["replace", "shrink", "join", "grow"], kinds
rep = next(e for e in ev if e["event"] == "replace")
assert rep["spare"], rep
s = next(e for e in ev if e["event"] == "shrink")
assert (s["old_dp"], s["new_dp"], s["old_world"], s["new_world"]) == (4, 3, 8, 6), s
assert (s["global_batch"], s["micro_batches"], s["exact"]) == (24, 4, True), s
g = next(e for e in ev if e["event"] == "grow")
assert (g["old_dp"], g["new_dp"], g["old_world"], g["new_world"]) == (3, 4, 6, 8), g
assert (g["global_batch"], g["micro_batches"], g["exact"], g["replicas_added"]) == (24, 3, True, 1), g
assert "at the ranks' checkpoint step" in g["reason"], g["reason"]  # not --grow-wait
r = [e for e in ev if e["event"] == "restart"]
assert [e.get("kind") for e in r][-2:] == ["shrink", "grow"], r
assert ev[-1]["event"] == "end" and ev[-1]["exit_code"] == 0, ev[-1]
PY
python3 - "$T/$NAME.rd$leader/placement.json" <<'PY' || bad "the placement after the grow"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["world_size"] == 8 and p["mesh"]["dp"] == 4, (p["world_size"], p["mesh"])
PY
sum=$(sha256sum <"$T/$NAME.rd$leader/placement.json")
for i in 0 1 2 3 4 5; do
  [ "$i" = "$v1" ] || [ "$i" = "$v2" ] && continue
  [ "$(sha256sum <"$T/$NAME.rd$i/placement.json")" = "$sum" ] || bad "placement.json of agent $i differs from the leader's"
done
status | grep -q 'width: dp 4 of 4' || { bad "par3drun status at the end does not say dp 4 of 4"; status | sed 's/^/  /'; }
grep -q '^par3drun: width: dp 4 -> 3 (.*) -> 4 (grown at step [0-9]*)' "$T/$NAME.$leader.err" ||
  { bad "no width history in the end summary"; tail -12 "$T/$NAME.$leader.err" | sed 's/^/  /'; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) workers left behind"
[ "$fail" = 0 ] && echo "PASS multinode_elastic ($RDZV)"
exit "$fail"
