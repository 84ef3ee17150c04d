#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_slow.sh — a slow node found and replaced across separate
# par3drun agents (static TCP rendezvous on loopback, real sockets): 5
# agents, --spares 1 (4 used + node rank 4 spare), tp8 on 4 x 8 GPUs, every
# node one DP replica (so each has 3 peers). Node rank 2's ranks are 3x
# slower. Its relay forwards the agent's progress summaries to the leader,
# which names it within --slow-windows intervals; with --slow-node replace
# its ranks move to the spare after their next checkpoint, no other rank
# moves, every node that keeps ranks exits 0, the leader's events.jsonl
# tells it, and `par3drun status` on the leader's run directory shows the
# new generation. A second job with no slow node reports none.
. "$(dirname "$0")/lib/multinode_lib.sh"

# a synchronous step every 0.2 s, busy 60 ms +-20% (3x on node rank 2),
# a checkpoint every 5 steps in $T/ck (shared: one host)
mkdir -p "$T/ck"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
ck="$T_CK/rank-$RANK"
step=$(cat "$ck" 2>/dev/null || echo 0)
echo "rank=$RANK gen=$P3D_RESTART_COUNT node=$P3D_NODE_INDEX step=$step"
base=60
[ "$P3D_NODE_INDEX" = "${SLOW_INDEX:--1}" ] && base=180
ckpt=$step
while [ "$step" -lt 25 ]; do
  sleep 0.2
  step=$((step + 1))
  if [ $((step % 5)) = 0 ]; then echo "$step" >"$ck.tmp" && mv "$ck.tmp" "$ck"; ckpt=$step; fi
  ms=$(( base * (100 + (step * 7919 + RANK * 104729) % 41 - 20) / 100 ))
  printf 'step=%d busy=%d.%03d ckpt=%d\n' "$step" $((ms / 1000)) $((ms % 1000)) "$ckpt" >"$P3D_HEARTBEAT.tmp"
  mv "$P3D_HEARTBEAT.tmp" "$P3D_HEARTBEAT"
done
SH
chmod +x "$T/w.sh"

# ---- 1. node rank 2 slow, --slow-node replace ------------------------------------
P=$(free_port)
for i in 0 1 2 3 4; do
  agent slow $i 5 "$P" --tp 8 --spares 1 --grace 1 --progress-interval 0.2 --slow-node replace \
    --env "T_CK=$T/ck" --env SLOW_INDEX=2 -- "$T/w.sh"
done
codes=""
for i in 0 1 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[2]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "slow: exit codes$codes, want 0 0 0 0"; sed 's/^/  /' "$T/slow.0.err"; }
grep -Eq '^par3drun: node [^ ]*:2 is [2-4]\.[0-9]{2}x slower than its 3 peers \(busy 0\.[0-9]{2} s vs 0\.0[5-7] s per step, pp stage 0\) for 0\.6 s$' \
  "$T/slow.0.err" || { bad "slow: the leader did not name node rank 2"; sed 's/^/  /' "$T/slow.0.err"; }
grep -q "replaced after its ranks' checkpoint of step [0-9]*; ranks 16-23 of [^ ]*:2 moved to spare [^ ]*:4" "$T/slow.0.err" ||
  { bad "slow: no replacement at a checkpoint"; sed 's/^/  /' "$T/slow.0.err"; }
python3 - "$T/slow.rd0" <<'PY' || bad "slow: placement / events check failed"
import json, sys
d = sys.argv[1]
old = {r["rank"]: r for r in json.load(open(d + "/placement.1.json"))["ranks"]}
new = {r["rank"]: r for r in json.load(open(d + "/placement.json"))["ranks"]}
moved = sorted(r for r in old if (old[r]["node"], old[r]["gpu"]) != (new[r]["node"], new[r]["gpu"]))
want = sorted(r for r in old if old[r]["node"].endswith(":2"))
assert moved == want == list(range(16, 24)), (moved, want)
assert all(new[r]["node"].endswith(":4") and new[r]["gpu"] == old[r]["gpu"] for r in moved)
ev = [json.loads(l) for l in open(d + "/events.jsonl")]
kinds = [e["event"] for e in ev]
s = [e for e in ev if e["event"] == "slow"]
assert len(s) == 1 and s[0]["node"].endswith(":2") and s[0]["peers"] == 3 and s[0]["windows"] == 3, s
assert s[0]["seconds"] == 0.6 and s[0]["step"] <= 8, s  # within --slow-windows intervals (+ start-up)
r = [e for e in ev if e["event"] == "replace"]
assert len(r) == 1 and r[0]["failed"].endswith(":2") and r[0]["spare"].endswith(":4") and r[0]["moved_ranks"] == want, r
assert kinds.index("slow") < kinds.index("replace")
assert ev[-1]["event"] == "end" and ev[-1]["exit_code"] == 0 and ev[-1]["replaced"] == 1, ev[-1]
PY
# the moved ranks resumed from the checkpoint on the spare
for r in 16 17 18 19 20 21 22 23; do
  grep -Eq "rank=$r gen=1 node=4 step=([5-9]|[12][0-9])$" "$T/slow.4.out" || bad "slow: rank $r did not resume on the spare"
done
for r in $(seq 0 31); do [ "$(cat "$T/ck/rank-$r" 2>/dev/null)" = 25 ] || bad "slow: rank $r did not finish"; done
# the leader's status view: a new generation, the slow node lost, no spare left
"$PAR3DRUN" status "$T/slow.rd0" >"$T/slow.status" 2>&1 || bad "slow: par3drun status failed"
grep -q '^job [0-9a-zA-Z_-]*: generation 1 (1 restart), state done' "$T/slow.status" &&
  grep -Eq '^nodes: 5, 4 reporting progress, 0 spares left, 1 lost \([^ ]*:2\)$' "$T/slow.status" ||
  { bad "slow: the status view"; sed 's/^/  /' "$T/slow.status"; }
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "slow: $(leftovers) workers left behind"

# ---- 2. no slow node: none reported -------------------------------------------------
rm -rf "$T/ck" && mkdir -p "$T/ck"
P=$(free_port)
for i in 0 1 2 3 4; do
  agent none $i 5 "$P" --tp 8 --spares 1 --grace 1 --progress-interval 0.2 --slow-node replace \
    --env "T_CK=$T/ck" -- "$T/w.sh"
done
codes=""
for i in 0 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
[ "$codes" = " 0 0 0 0 0" ] || { bad "none: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  /' "$T/none.0.err"; }
grep -q 'slower than' "$T"/none.*.err && bad "none: a slow node reported without one"
grep -q '"event": "slow"' "$T/none.rd0/events.jsonl" && bad "none: a slow event"

[ "$fail" = 0 ] && echo "PASS multinode_slow"
exit "$fail"
