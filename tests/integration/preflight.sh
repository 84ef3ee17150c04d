#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The preflight (docs/launch.md, "Preflight"): 5 emulated DGX H100 nodes,
# tp2 pp2 dp8 on 4 of them + 1 spare; every node runs p3d-worker
# --bench-node, and P3D_WORKER_BENCH_SLOWDOWN=8:n3 (a test knob of the
# benchmark: n3 really does its work 8 times) makes n3 the slow one.
# The emulated nodes share this (2-core, shared) host: compute and memory
# are timed in CPU time and the TCP links stream one at a time, but the
# figures of healthy nodes still drift up to ~1.6x apart under load, so
# the tests use --slow-factor 3 against the 8x slowdown, and the
# no-slow-node case runs several times: a threshold that fires on noise
# fails it.
#  1. par3drun preflight: n3 excluded, the table says why, exit 1;
#  2. no slowed node, 3 runs: nobody excluded, exit 0;
#  3. --format json: the figures as numbers, n3 excluded with its reason;
#  4. a launch with --preflight: n3's ranks go to the spare n5 before the
#     start, n3 runs no rank, exit 0, events.jsonl has every node's
#     figures and the replacement, placement.json the "preflight" object;
#  5. --dry-run --preflight --format json: the report has it too, n3 lost;
#  6. a node that outlasts --preflight-timeout (20 s: healthy emulated nodes
#     took over 6 s on a loaded 2-core host) is excluded ("timed out"),
#     its ring neighbours are not;
#  7. a malformed knob: every node's benchmark fails with its message;
#  8. no spare: the launch refuses to start (exit 1, "cannot replace");
#  9. the worker's GPU path where there is no GPU: --backend cuda refuses
#     with the reason (exit 1), --backend auto gives the CPU's figures
#     (backend=cpu), --bench-tcp-only without a ring is refused, a
#     malformed P3D_WORKER_BENCH_TCP_SLOWDOWN is named. The GPU figures
#     themselves are scripts/gpu-check.sh's bench-node check.
. "$(dirname "$0")/lib/launch_common.sh"
C5=$T/five.json
printf '{"nodes": [{"name": "n[1-5]", "topology": "%s", "rack": "r1"}]}\n' \
  "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$C5"
JOB=(--emulate --cluster "$C5" --tp 2 --pp 2 --dp 8 --spares 1 --slow-factor 3)
run() { # out-dir args...: output in DIR/out (stdout) DIR/err, exit code in DIR/rc
  local d=$1
  shift
  rm -rf "$d"
  mkdir -p "$d"
  set +e
  timeout 120 "$PAR3DRUN" "$@" >"$d/out" 2>"$d/err"
  echo $? >"$d/rc"
  set -e
}
show() { echo "--- stdout"; cat "$1/out"; echo "--- stderr"; cat "$1/err"; }

echo "== 1. par3drun preflight with n3 slowed" >&2
P3D_WORKER_BENCH_SLOWDOWN=8:n3 run "$T/1" preflight "${JOB[@]}"
[ "$(cat "$T/1/rc")" = 1 ] || { show "$T/1"; fail "exit $(cat "$T/1/rc"), want 1"; }
grep -Eq '^n3 +EXCLUDED .*compute [0-9.]+ GFLOP/s is [0-9.]+x below the median' "$T/1/out" ||
  { show "$T/1"; fail "n3 not excluded for its compute"; }
[ "$(grep -c EXCLUDED "$T/1/out")" = 1 ] || { show "$T/1"; fail "want exactly one node excluded"; }
for n in n1 n2 n4 n5; do
  grep -Eq "^$n +ok " "$T/1/out" || { show "$T/1"; fail "$n not ok"; }
done
grep -q '^1 of 5 nodes excluded' "$T/1/out" || { show "$T/1"; fail "no summary line"; }

echo "== 2. no slowed node: no false positive (3 runs)" >&2
for i in 1 2 3; do
  run "$T/2.$i" preflight "${JOB[@]}"
  [ "$(cat "$T/2.$i/rc")" = 0 ] || { show "$T/2.$i"; fail "run $i: exit $(cat "$T/2.$i/rc"), want 0"; }
  ! grep -q EXCLUDED "$T/2.$i/out" || { show "$T/2.$i"; fail "run $i: a node excluded with none slowed"; }
done

echo "== 3. --format json" >&2
P3D_WORKER_BENCH_SLOWDOWN=8:n3 run "$T/3" preflight "${JOB[@]}" --format json
[ "$(cat "$T/3/rc")" = 1 ] || { show "$T/3"; fail "exit $(cat "$T/3/rc"), want 1"; }
python3 - "$T/3/out" <<'PY' || { show "$T/3"; fail "json check failed"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["excluded"] == 1 and d["slow_factor"] == 3 and d["timeout_s"] == 30 and d["tcp_judged"], d
nodes = {n["node"]: n for n in d["nodes"]}
assert sorted(nodes) == ["n1", "n2", "n3", "n4", "n5"], nodes
for name, n in nodes.items():
    for k in ("gflops", "mem_gbps", "tcp_out_mbps", "tcp_in_mbps"):
        assert isinstance(n[k], (int, float)) and n[k] > 0, (name, k, n)
    assert n["links"].startswith("skipped"), n
    assert n["excluded"] == (name == "n3"), n
assert "below the median" in nodes["n3"]["why"], nodes["n3"]
assert nodes["n3"]["gflops"] * 2 < d["median"]["gflops"], d
PY

echo "== 4. a launch with --preflight: the spare takes n3's ranks" >&2
cat >"$T/w.sh" <<'SH'
#!/bin/sh
echo "$RANK $P3D_NODE" >>"$T_DIR/starts"
SH
chmod +x "$T/w.sh"
export T_DIR=$T/4
P3D_WORKER_BENCH_SLOWDOWN=8:n3 run "$T/4" "${JOB[@]}" --preflight --run-dir "$T/4/rd" -- "$T/w.sh"
[ "$(cat "$T/4/rc")" = 0 ] || { show "$T/4"; fail "exit $(cat "$T/4/rc"), want 0"; }
grep -q '^par3drun: node n3 failed the --preflight (compute .* below the median .*): excluded$' "$T/4/err" ||
  { show "$T/4"; fail "no exclusion line"; }
grep -q '^par3drun: node n3 failed the --preflight; ranks 8-11,24-27 of n3 moved to spare n5 (same rack r1)$' "$T/4/err" ||
  { show "$T/4"; fail "no replacement line"; }
[ "$(wc -l <"$T/4/starts")" = 32 ] || { cat "$T/4/starts"; fail "want 32 rank starts"; }
! grep -q ' n3$' "$T/4/starts" || { cat "$T/4/starts"; fail "a rank ran on n3"; }
[ "$(grep -c ' n5$' "$T/4/starts")" = 8 ] || { cat "$T/4/starts"; fail "want 8 ranks on n5"; }
python3 - "$T/4/rd" <<'PY' || { show "$T/4"; fail "events/placement check failed"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1] + "/events.jsonl")]
pf = {e["node"]: e for e in ev if e["event"] == "preflight"}
assert sorted(pf) == ["n1", "n2", "n3", "n4", "n5"], pf
assert pf["n3"]["excluded"] and not any(pf[n]["excluded"] for n in ("n1", "n2", "n4", "n5")), pf
assert pf["n3"]["gflops"] * 2 < pf["n3"]["median_gflops"] and pf["n3"]["slow_factor"] == 3, pf["n3"]
rep = [e for e in ev if e["event"] == "replace"]
assert len(rep) == 1 and rep[0]["failed"] == "n3" and rep[0]["spare"] == "n5", rep
assert rep[0]["moved_ranks"] == [8, 9, 10, 11, 24, 25, 26, 27] and "--preflight" in rep[0]["reason"], rep
kinds = [e["event"] for e in ev]
assert kinds.index("replace") < kinds.index("start"), kinds
assert ev[-1]["event"] == "end" and ev[-1]["exit_code"] == 0, ev[-1]
pl = json.load(open(sys.argv[1] + "/placement.json"))
assert pl["lost"] == ["n3"] and pl["preflight"]["excluded"] == 1, pl.get("preflight")
assert [n["node"] for n in pl["preflight"]["nodes"] if n["excluded"]] == ["n3"]
assert not [r for r in pl["ranks"] if r["node"] == "n3"]
PY

echo "== 5. --dry-run --preflight --format json" >&2
P3D_WORKER_BENCH_SLOWDOWN=8:n3 run "$T/5" --dry-run "${JOB[@]}" --preflight --format json
[ "$(cat "$T/5/rc")" = 0 ] || { show "$T/5"; fail "exit $(cat "$T/5/rc"), want 0"; }
grep -q '^n3 .*EXCLUDED' "$T/5/err" || { show "$T/5"; fail "no table on stderr"; }
python3 - "$T/5/out" <<'PY' || { show "$T/5"; fail "report check failed"; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["lost"] == ["n3"] and d["preflight"]["excluded"] == 1, d.get("preflight")
assert not [r for r in d["ranks"] if r["node"] == "n3"]
PY

echo "== 6. a node past --preflight-timeout" >&2
# (100000 times the work: hours a repetition on any machine, where 1000
# times could end within the 20 s on a quiet, fast one)
P3D_WORKER_BENCH_SLOWDOWN=100000:n2 run "$T/6" preflight "${JOB[@]}" --preflight-timeout 20
[ "$(cat "$T/6/rc")" = 1 ] || { show "$T/6"; fail "exit $(cat "$T/6/rc"), want 1"; }
grep -Eq '^n2 +EXCLUDED .*its benchmark failed: timed out after 20 s' "$T/6/out" || { show "$T/6"; fail "n2 not timed out"; }
[ "$(grep -c EXCLUDED "$T/6/out")" = 1 ] || { show "$T/6"; fail "its neighbours were excluded too"; }

echo "== 7. a malformed knob" >&2
P3D_WORKER_BENCH_SLOWDOWN=fast run "$T/7" preflight "${JOB[@]}"
[ "$(cat "$T/7/rc")" = 1 ] || { show "$T/7"; fail "exit $(cat "$T/7/rc"), want 1"; }
[ "$(grep -c "EXCLUDED .*P3D_WORKER_BENCH_SLOWDOWN='fast': expected F or F:NODE" "$T/7/out")" = 5 ] ||
  { show "$T/7"; fail "want every node failed with the knob's message"; }

echo "== 8. no spare left: nothing starts" >&2
T_DIR=$T/8
P3D_WORKER_BENCH_SLOWDOWN=8:n3 run "$T/8" --emulate --cluster "$C5" --tp 2 --pp 2 --dp 10 --slow-factor 3 \
  --preflight -- "$T/w.sh"
[ "$(cat "$T/8/rc")" = 1 ] || { show "$T/8"; fail "exit $(cat "$T/8/rc"), want 1"; }
grep -q '^par3drun: node n3 failed the --preflight; cannot replace it: ' "$T/8/err" || { show "$T/8"; fail "no refusal"; }
[ ! -e "$T/8/starts" ] || fail "ranks started"
echo "== 9. the worker's GPU path without a GPU" >&2
rc=0; "$P3D_WORKER" --bench-node --backend cuda --bench-seconds 0.02 >"$T/9.out" 2>"$T/9.err" || rc=$?
[ "$rc" = 1 ] || fail "--bench-node --backend cuda without a GPU: exit $rc, want 1"
grep -q '^p3d-worker: --bench-node --backend cuda: no GPU: ' "$T/9.err" || { cat "$T/9.err" >&2; fail "no reason given"; }
[ ! -s "$T/9.out" ] || fail "figures printed without a GPU"
"$P3D_WORKER" --bench-node --backend auto --bench-seconds 0.02 >"$T/9a.out" 2>&1 || fail "--backend auto failed"
grep -Eq '^preflight backend=cpu gflops=[0-9.e+]+ mem_gbps=[0-9.e+]+ links=skipped$' "$T/9a.out" ||
  { cat "$T/9a.out" >&2; fail "--backend auto: not the CPU's figures line"; }
rc=0; "$P3D_WORKER" --bench-node --bench-tcp-only >"$T/9b.out" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q 'needs --bench-tcp-peer and --bench-tcp-fd' "$T/9b.out" || fail "--bench-tcp-only without a ring"
rc=0; P3D_WORKER_BENCH_TCP_SLOWDOWN=slow "$P3D_WORKER" --bench-node --bench-seconds 0.02 >"$T/9c.out" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "P3D_WORKER_BENCH_TCP_SLOWDOWN='slow': expected F or F:NODE" "$T/9c.out" ||
  { cat "$T/9c.out" >&2; fail "a malformed TCP knob is not named"; }
echo "preflight: ok" >&2
