#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_join.sh — a node joins a RUNNING job as a spare (par3drun
# --join) over the static TCP rendezvous, on loopback with real sockets
# and a real SIGKILL: two agents run tp8 on 2 x 8 GPUs with no spare; a
# third par3drun joins -> the leader's events.jsonl has a "join" record,
# `par3drun status` counts one spare, no rank restarted. Refused with
# exit 2 and a message that names why: a wrong job token, a mesh option
# given with --join, a node of another kind. Then node rank 1's agent is
# SIGKILLed: its ranks move to the joined node, GPU for GPU, and the job
# ends 0 on every node left. A join after the job ended fails with a
# message naming the leader's address.
. "$(dirname "$0")/lib/multinode_lib.sh"

A100=${TOPOS[0]}
RTX=${TOPOS[3]}
# generation 0 runs until killed; after the restart every rank ends at once
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'

# node rank I of 2, every node a DGX A100
start() {
  local i=$1; shift
  "$PAR3DRUN" --nnodes 2 --node-rank "$i" --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
    --topology "$A100" --run-dir "$T/j.rd$i" "$@" >"$T/j.$i.out" 2>"$T/j.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
}
# a joiner NAME with the given options (no program: "-- sh -c $W" added)
joiner() {
  local name=$1; shift
  "$PAR3DRUN" --join --rdzv "static:127.0.0.1:$P" --run-dir "$T/$name.rd" "$@" -- sh -c "$W" \
    >"$T/$name.out" 2>"$T/$name.err"
}

P=$(free_port)
for i in 0 1; do start $i --tp 8 --max-restarts 1 --grace 1 -- sh -c "$W"; done
for _ in $(seq 400); do
  [ "$(cat "$T"/j.[01].out 2>/dev/null | grep -c 'gen=0')" -ge 16 ] && break
  sleep 0.05
done
[ "$(cat "$T"/j.[01].out | grep -c 'gen=0')" = 16 ] || { bad "the 16 ranks did not start"; cat "$T/j.0.err"; exit 1; }
ev=$T/j.rd0/events.jsonl

# ---- 1. refusals: each exits 2 and says why; the job runs on ----------------
head -c 24 /dev/urandom | base64 >"$T/other.token"
chmod 600 "$T/other.token"
rc=0; joiner wrongkey --rdzv-token-file "$T/other.token" --topology "$A100" --rdzv-timeout 10 || rc=$?
[ "$rc" = 2 ] || { bad "wrong token: exit $rc, want 2"; sed 's/^/  /' "$T/wrongkey.err"; }
grep -qi 'key\|token' "$T/wrongkey.err" || { bad "wrong token: no word of the key"; sed 's/^/  /' "$T/wrongkey.err"; }
rc=0; joiner mesh --rdzv-token-file "$T/token" --topology "$A100" --tp 8 || rc=$?
[ "$rc" = 2 ] || bad "--tp with --join: exit $rc, want 2"
grep -q -- '--tp cannot be given with --join' "$T/mesh.err" || { bad "--tp with --join: message"; cat "$T/mesh.err"; }
rc=0; joiner rtx --rdzv-token-file "$T/token" --topology "$RTX" || rc=$?
[ "$rc" = 2 ] || { bad "another kind: exit $rc, want 2"; sed 's/^/  /' "$T/rtx.err"; }
grep -q 'does not fit the job: its NVLink domains hold 1+1+1+1+1+1+1+1 GPUs, the job.s nodes. hold 8' "$T/rtx.err" ||
  { bad "another kind: the refusal does not say what differs"; sed 's/^/  /' "$T/rtx.err"; }
grep -q '"event": "join_refused", "node": "[^"]*", "state": "running", "reason": "its kind does not fit' "$ev" ||
  bad "events: no join_refused record for the node of another kind"
kill -0 "${AG[0]}" "${AG[1]}" 2>/dev/null || bad "the job did not survive the refusals"

# ---- 2. a node joins: a spare, no rank restarted ----------------------------
"$PAR3DRUN" --join --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" --topology "$A100" \
  --run-dir "$T/j.rd2" --verbose -- sh -c "$W" >"$T/j.2.out" 2>"$T/j.2.err" &
AG[2]=$!
PIDS+=($!)
for _ in $(seq 400); do grep -q '"event": "join"' "$ev" 2>/dev/null && break; sleep 0.05; done
grep -q '"event": "join", "node": "[^"]*:2", "addr": "127.0.0.1", "gpus": 8, "agent": 2, "state": "running", "generation": 0' "$ev" ||
  { bad "events: no join record"; sed 's/^/  /' "$ev"; sed 's/^/  2: /' "$T/j.2.err"; }
for _ in $(seq 200); do "$PAR3DRUN" status "$T/j.rd0" 2>/dev/null | grep -q '1 spare left' && break; sleep 0.05; done
"$PAR3DRUN" status "$T/j.rd0" | grep -q 'nodes: 3, .* 1 spare left' ||
  { bad "status does not count the joined spare"; "$PAR3DRUN" status "$T/j.rd0" | sed 's/^/  /'; }
# every node holds the grown placement (3 nodes, the joined one a spare)
for _ in $(seq 200); do grep -q '"spares": \["[^"]*:2"\]' "$T/j.rd1/placement.json" 2>/dev/null && break; sleep 0.05; done
grep -q '"spares": \["[^"]*:2"\]' "$T/j.rd1/placement.json" || bad "node rank 1 does not hold the grown placement"

grep -q '"event": "restart"' "$ev" && bad "a join restarted ranks"
[ "$(cat "$T"/j.[01].out | grep -c 'gen=0')" = 16 ] || bad "a rank started twice after the join"
[ -s "$T/j.2.out" ] && bad "the joined spare ran ranks: $(head -3 "$T/j.2.out")"
python3 - "$T/j.rd0/placement.json" <<'PY' || bad "the leader's placement does not hold the joined spare"
import json, sys
d = json.load(open(sys.argv[1]))
sp = d.get("spares") or []
assert len(sp) == 1 and sp[0].endswith(":2"), sp
PY

# ---- 3. node rank 1 lost: its ranks move to the joined node -----------------
kill -KILL "${AG[1]}"
codes=""
for i in 0 2; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[1]}" 2>/dev/null
[ "$codes" = " 0 0" ] || { bad "exit codes$codes, want 0 0"; sed 's/^/  0: /' "$T/j.0.err"; sed 's/^/  2: /' "$T/j.2.err"; }
for r in 8 9 10 11 12 13 14 15; do
  grep -q "rank=$r gen=1" "$T/j.2.out" || bad "rank $r did not run on the joined node"
done
[ "$(grep -c 'gen=0' "$T/j.2.out")" = 0 ] || bad "the joined node ran ranks before the replacement"
grep -q '"event": "replace", "failed": "[^"]*:1", "spare": "[^"]*:2", "moved_ranks": \[8, 9, 10, 11, 12, 13, 14, 15\], "restart": 1' "$ev" ||
  { bad "events: replace record"; sed 's/^/  /' "$ev"; }
grep -q '"event": "end", "exit_code": 0, .*"joined": 1' "$ev" || bad "events: the end record does not count the join"
grep -q 'joined as a spare' "$T/j.0.err" || bad "the end summary does not mention the join"
cmp -s "$T/j.rd0/placement.json" "$T/j.rd2/placement.json" || bad "the joined node's placement.json is not the leader's"
grep -h 'cannot take the placement\|cannot restart on the new placement' "$T"/j.*.err && bad "a node could not adopt a placement"
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) workers left behind"

# ---- 4. after the end: nothing to join ----------------------------------------
rc=0; joiner late --rdzv-token-file "$T/token" --topology "$A100" --rdzv-timeout 2 || rc=$?
[ "$rc" != 0 ] || bad "a join after the end exited 0"
grep -q "127.0.0.1:$P" "$T/late.err" || { bad "a join after the end: no message naming the leader"; cat "$T/late.err"; }
exit $fail
