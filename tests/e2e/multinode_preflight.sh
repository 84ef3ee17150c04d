#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_preflight.sh — --preflight in a multi-node job over the static
# TCP rendezvous (separate par3drun agents on loopback, real sockets): 5
# agents, --spares 1, tp8 on 4 x 8 GPUs. Every node benchmarks its compute
# and memory (p3d-worker --bench-node) before it joins; once all joined,
# the leader names each node's next one on a TCP ring and every node
# streams to it at once (--bench-tcp-only); the figures travel in the
# gathered records and the leader judges them against the medians.
#  1. node rank 2's benchmark runs 8x slower (P3D_WORKER_BENCH_SLOWDOWN in
#     that agent's environment only) -> the leader excludes it before the
#     policy runs, the spare (node rank 4) runs ranks from the start, node 2
#     runs nothing, every node exits 0; the leader prints the table (node 2
#     EXCLUDED, the reason names the figure and the median), its
#     events.jsonl has a preflight record per node with the figures, and
#     placement.json — the same bytes on every node — has them as its
#     "preflight" object.
#  2. no node slow -> nobody excluded (no false positive), the spare runs
#     nothing, every node exits 0.
#  3. two nodes slow with one spare -> exit 1 before anything runs, the
#     message names both nodes and the --preflight.
#  4. the leader's own node slow -> exit 1, the message names that limit.
#  5. a node whose benchmark fails (the worker refuses a malformed
#     P3D_WORKER_BENCH_SLOWDOWN and exits 2): it is excluded with the
#     reason, the spare runs, exit 0.
#  6. a node with healthy cores and a slow network (its TCP loop alone
#     idles 49x as long as it works: P3D_WORKER_BENCH_TCP_SLOWDOWN=50 in its
#     environment) -> excluded for its TCP figure (both of its ring links
#     slow; its neighbours keep one good link each), its compute passing,
#     the spare runs its ranks, exit 0. 50x, not 8x: the agents' streams
#     run at once on this host's two vCPUs, and under CI's load every link
#     falls to a tenth and an 8x knob showed as only 2x. With --rdzv-fanout 2
#     (0 -> 1,2 -> 3,4): interior agents run their part of the ring before
#     their children attach.
#  7. the leader SIGKILLed after the start (--node-timeout 3): node rank 1
#     takes over and moves the leader's ranks to the spare; the placement
#     it writes keeps the "preflight" object of the start (the figures
#     that placed the job), every survivor exits 0.
. "$(dirname "$0")/lib/multinode_lib.sh"

W='echo "rank=$RANK node=$P3D_NODE"; exit 0'
# --slow-factor 3 against an 8x slowdown: the benchmark counts this thread's
# CPU time (worker/bench_node.c), but five separate agents benchmark at once
# on this host's two vCPUs (often one core's two threads), beside another
# test: a healthy agent came out 2.3x below the others (emulated nodes
# compute one at a time; separate agents cannot, they meet only after)
PF=(--tp 8 --spares 1 --grace 1 --preflight --preflight-timeout 60)
SF=3 # --slow-factor; case 5 widens it (see there)

# run NAME KNOB RANKS...: 5 agents; KNOB (VAR=VALUE, a test knob of the
# worker's benchmark) in the environment of the listed node ranks only;
# EXTRA: more options for every agent
EXTRA=()
run() {
  local name=$1 knob=$2 i; shift 2
  P=$(free_port)
  for i in 0 1 2 3 4; do
    [[ " $* " == *" $i "* ]] && export "${knob?}"
    agent "$name" $i 5 "$P" "${PF[@]}" --slow-factor "$SF" "${EXTRA[@]}" -- sh -c "$W"
    unset "${knob%%=*}"
  done
  codes=""
  for i in 0 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
}
SLOW=P3D_WORKER_BENCH_SLOWDOWN=8

# ---- 1. one slow node: excluded, the spare runs -------------------------------
run slow $SLOW 2
[ "$codes" = " 0 0 0 0 0" ] || { bad "slow: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/slow.0.err"; }
[ "$(grep -c 'rank=' "$T/slow.2.out")" = 0 ] || bad "slow: the slow node ran ranks"
[ "$(grep -c 'rank=' "$T/slow.4.out")" = 8 ] || bad "slow: the spare did not run 8 ranks from the start"
[ "$(cat "$T"/slow.*.out | grep -c 'rank=')" = 32 ] || bad "slow: not all 32 ranks ran"
grep -Eq '^[^ ]*:2 +EXCLUDED .*compute [0-9.e+]+ GFLOP/s is [0-9.]+x below the median' "$T/slow.0.err" ||
  { bad "slow: the leader's table does not exclude node 2 for its compute"; sed 's/^/  /' "$T/slow.0.err"; }
grep -q 'TCP: MB/s on a ring of pairs (node i streams to node i+1)\. ' "$T/slow.0.err" ||
  { bad "slow: the table does not say the TCP ring ran and was judged"; sed 's/^/  /' "$T/slow.0.err"; }
grep -q 'node [^ ]*:2 failed the --preflight before the start (compute .*): excluded, it runs no rank' "$T/slow.0.err" ||
  { bad "slow: no exclusion line for node 2"; sed 's/^/  /' "$T/slow.0.err"; }
python3 - "$T/slow.rd0/events.jsonl" "$T/slow.rd0/placement.json" <<'PY' || bad "slow: events.jsonl or placement.json"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pf = {e["node"].rsplit(":", 1)[1]: e for e in ev if e["event"] == "preflight"}
assert sorted(pf) == ["0", "1", "2", "3", "4"], sorted(pf)
assert [k for k in sorted(pf) if pf[k]["excluded"]] == ["2"], {k: pf[k]["excluded"] for k in pf}
for k, e in pf.items():
    assert e["gflops"] > 0 and e["mem_gbps"] > 0, e
    # the TCP ring ran across the agents: both links of every node measured
    assert e["tcp_out_mbps"] > 0 and e["tcp_in_mbps"] > 0 and e["median_tcp_mbps"] > 0, e
ratio = pf["2"]["median_gflops"] / pf["2"]["gflops"]
assert 3 < ratio < 20, f"node 2 is {ratio:.2f}x below the median, want about 8x"
assert "below the median" in pf["2"]["why"], pf["2"]["why"]
p = json.load(open(sys.argv[2]))
assert [n.rsplit(":", 1)[1] for n in p.get("excluded") or []] == ["2"], p.get("excluded")
# the figures in placement.json too: the same node verdicts as the events
q = p["preflight"]
assert q["excluded"] == 1 and q["slow_factor"] == 3, q
assert [n["node"].rsplit(":", 1)[1] for n in q["nodes"]] == ["0", "1", "2", "3", "4"], q["nodes"]
assert [n["node"].rsplit(":", 1)[1] for n in q["nodes"] if n["excluded"]] == ["2"], q["nodes"]
g = q["nodes"][2]["gflops"]
assert abs(g - pf["2"]["gflops"]) <= 0.01 * g and "below the median" in q["nodes"][2]["why"], (q["nodes"][2], pf["2"])
print(f"slow: node 2 excluded, {ratio:.2f}x below the median GFLOP/s")
PY
# ... and byte for byte the same placement.json on every node
for i in 1 2 3 4; do
  cmp -s "$T/slow.rd0/placement.json" "$T/slow.rd$i/placement.json" || bad "slow: placement.json of node $i differs from the leader's"
done

# ---- 2. nobody slow: nobody excluded ------------------------------------------
run even $SLOW
[ "$codes" = " 0 0 0 0 0" ] || { bad "even: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/even.0.err"; }
grep -q 'EXCLUDED' "$T/even.0.err" && { bad "even: a node was excluded with none slow"; sed 's/^/  /' "$T/even.0.err"; }
grep -q '^0 of 5 nodes excluded' "$T/even.0.err" || { bad "even: no table"; sed 's/^/  /' "$T/even.0.err"; }
[ "$(grep -c 'rank=' "$T/even.4.out")" = 0 ] || bad "even: the spare ran ranks"

# ---- 3. two slow nodes, one spare: nothing starts ------------------------------
run two $SLOW 1 3
[ "$codes" = " 1 1 1 1 1" ] || bad "two: exit codes$codes, want 1 1 1 1 1"
grep -q '2 nodes failed the --preflight before the start and no spare can take their place (--spares 1): [^ ]*:1 (--preflight: compute .*); [^ ]*:3 (--preflight: compute .*); nothing started' "$T/two.0.err" ||
  { bad "two: the refusal does not name both nodes"; sed 's/^/  /' "$T/two.0.err"; }
[ "$(cat "$T"/two.*.out | grep -c 'rank=')" = 0 ] || bad "two: ranks ran"

# ---- 4. the leader slow ---------------------------------------------------------
run lead $SLOW 0
[ "$codes" = " 1 1 1 1 1" ] || bad "lead: exit codes$codes, want 1 1 1 1 1"
grep -q "the leader's node [^ ]* failed the --preflight before the start (compute .*); the leader runs the job controller and cannot be replaced" "$T/lead.0.err" ||
  { bad "lead: the refusal does not name the leader's limit"; sed 's/^/  /' "$T/lead.0.err"; }
[ "$(cat "$T"/lead.*.out | grep -c 'rank=')" = 0 ] || bad "lead: ranks ran"

# ---- 5. a node whose benchmark fails ---------------------------------------------
# Its two neighbours keep one measured ring link each (the link to the failed
# node reads 0), so each is judged on that one link alone. Under CI's load one
# loopback stream came out 3.08x below the median and excluded node 4, the
# spare, with it (the job could not start). This case is about the failed
# benchmark, so it judges figures with --slow-factor 50.
SF=50
run miss P3D_WORKER_BENCH_SLOWDOWN=soon 3
SF=3
[ "$codes" = " 0 0 0 0 0" ] || { bad "missing: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/miss.0.err"; }
grep -Eq '^[^ ]*:3 +EXCLUDED +- +- .*its benchmark failed: ' "$T/miss.0.err" ||
  { bad "missing: node 3 is not excluded for its failed benchmark"; sed 's/^/  /' "$T/miss.0.err"; }
[ "$(grep -c 'rank=' "$T/miss.4.out")" = 8 ] || bad "missing: the spare did not run 8 ranks"

# ---- 6. slow network, healthy cores: excluded for TCP --------------------------
EXTRA=(--rdzv-fanout 2)
run net P3D_WORKER_BENCH_TCP_SLOWDOWN=50 3
[ "$codes" = " 0 0 0 0 0" ] || { bad "net: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  0: /' "$T/net.0.err"; }
grep -Eq '^[^ ]*:3 +EXCLUDED .*TCP bandwidth \(the better of its two ring links\) [0-9.e+]+ MB/s is [0-9.]+x below the median' "$T/net.0.err" ||
  { bad "net: the leader's table does not exclude node 3 for its TCP"; sed 's/^/  /' "$T/net.0.err"; }
[ "$(grep -c 'rank=' "$T/net.3.out")" = 0 ] || bad "net: the node with the slow network ran ranks"
[ "$(grep -c 'rank=' "$T/net.4.out")" = 8 ] || bad "net: the spare did not run 8 ranks from the start"
python3 - "$T/net.rd0/events.jsonl" <<'PY' || bad "net: events.jsonl"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pf = {e["node"].rsplit(":", 1)[1]: e for e in ev if e["event"] == "preflight"}
assert [k for k in sorted(pf) if pf[k]["excluded"]] == ["3"], {k: pf[k]["why"] for k in pf}
n3 = pf["3"]
assert "TCP bandwidth" in n3["why"] and "compute" not in n3["why"], n3["why"]
# its compute passed (not slowed; under load it may still drift up to the factor)
assert n3["gflops"] * n3["slow_factor"] >= n3["median_gflops"], n3
best = max(n3["tcp_out_mbps"], n3["tcp_in_mbps"])
ratio = n3["median_tcp_mbps"] / best
assert ratio > 2, f"node 3's better link is only {ratio:.2f}x below the median"
# its neighbours saw the slow links too, each on one side only
assert pf["2"]["tcp_out_mbps"] < n3["median_tcp_mbps"] / 2 and pf["4"]["tcp_in_mbps"] < n3["median_tcp_mbps"] / 2, (pf["2"], pf["4"])
print(f"net: node 3 excluded, its better ring link {ratio:.2f}x below the median TCP MB/s")
PY

# ---- 7. the leader lost: the successor's placements keep the figures ------------
trap 'thaw_kill; cleanup' EXIT
W7='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
P=$(free_port)
for i in 0 1 2 3 4; do
  agent lost $i 5 "$P" "${PF[@]}" --slow-factor "$SF" --verbose --max-restarts 2 --node-timeout 3 -- sh -c "$W7"
done
for _ in $(seq 400); do
  [ "$(cat "$T"/lost.*.out 2>/dev/null | grep -c 'gen=0')" -ge 32 ] && break
  sleep 0.05
done
wait_list lost 0 1 "lost" 1 2 3 4
kill -KILL "${AG[0]}"
codes=""
for i in 1 2 3 4; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[0]}" 2>/dev/null
[ "$codes" = " 0 0 0 0" ] || { bad "lost: exit codes$codes, want 0 0 0 0"; sed 's/^/  1: /' "$T/lost.1.err"; }
python3 - "$T/lost.rd1/placement.1.json" "$T/lost.rd1/placement.json" <<'PY' || bad "lost: the successor's placement.json"
import json, sys
old, new = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert [n.rsplit(":", 1)[1] for n in new.get("lost") or []] == ["0"], new.get("lost")
assert "preflight" in old, "the start's placement has no preflight object"
assert new.get("preflight") == old["preflight"], "the successor's placement lost the start's preflight figures"
print(f"lost: the successor's placement keeps the preflight object ({len(new['preflight']['nodes'])} nodes)")
PY

sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) processes left behind"
[ "$fail" = 0 ] && echo "PASS multinode_preflight"
exit "$fail"
