#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Hot spares chosen by the policy, and --exclude on every command
# (docs/policies.md "Choosing the spares", docs/plan.md, issue 11):
#  1. the default rule (par3d.default_spares) over 1, 2 and 3 racks,
#     uneven racks, and after --exclude;
#  2. megatron's rule: a rack whose last node cannot hold a whole pipeline
#     block gives the spare, and no pipeline crosses racks;
#  3. a test policy's spares() hook, by name and by index: the dry run
#     (text and JSON) shows its spares;
#  4. a launch --emulate with that policy runs no rank on its spares, and
#     a lost rack-2 node's ranks move to the hook's rack-2 spare;
#  5. --exclude and --spares on plan (the nodes left; the run line repeats
#     them and runs), --exclude on cluster and on a launch.
# Bad hook results are in tests/bad/cases.tsv (spares-hook-*).
. "$(dirname "$0")/lib/launch_common.sh"
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml

# cluster FILE RACK:COUNT... : nodes RACK1..RACKn in rack RACK
cluster() {
  local f=$1 sep="" rc
  shift
  {
    printf '{"nodes": ['
    for rc in "$@"; do
      printf '%s{"name": "%s[1-%d]", "topology": "%s", "rack": "%s"}' "$sep" "${rc%%:*}" "${rc##*:}" "$TOPO" "${rc%%:*}"
      sep=", "
    done
    printf ']}\n'
  } >"$f"
}
# spares ARGS... : the dry run's "spares", sorted, space-separated
spares() {
  "$PAR3DRUN" --dry-run --format json "$@" >"$T/sp.json" 2>"$T/sp.err" ||
    { cat "$T/sp.err" >&2; fail "dry run $* exited $?"; }
  python3 -c 'import json, sys; print(" ".join(sorted(json.load(open(sys.argv[1])).get("spares", []))))' "$T/sp.json"
}
want() { # want WHAT GOT EXPECTED
  [ "$2" = "$3" ] || fail "$1: spares '$2', want '$3'"
}

# ---- 1. the default rule --------------------------------------------------
echo "== 1. par3d.default_spares" >&2
cluster "$T/one.json" n:3
cluster "$T/two.json" a:3 b:3
cluster "$T/three.json" a:1 b:3 c:2
D=(--policy naive --tp 2 --dp 4)
want "1 rack, K=1" "$(spares --cluster "$T/one.json" "${D[@]}" --spares 1)" "n3"
want "1 rack, K=2" "$(spares --cluster "$T/one.json" "${D[@]}" --spares 2)" "n2 n3"
want "2 racks, K=1" "$(spares --cluster "$T/two.json" "${D[@]}" --spares 1)" "a3"
want "2 racks, K=2" "$(spares --cluster "$T/two.json" "${D[@]}" --spares 2)" "a3 b3"
want "2 racks, K=3" "$(spares --cluster "$T/two.json" "${D[@]}" --spares 3)" "a2 a3 b3"
# every rack down to one node: then racks give their last one too
want "2 racks, K=5" "$(spares --cluster "$T/two.json" "${D[@]}" --spares 5)" "a1 a2 a3 b2 b3"
# uneven: rack a (1 node) keeps it while b and c have room
want "racks 1/3/2, K=2" "$(spares --cluster "$T/three.json" "${D[@]}" --spares 2)" "b3 c2"
want "racks 1/3/2, K=3" "$(spares --cluster "$T/three.json" "${D[@]}" --spares 3)" "b2 b3 c2"
want "racks 1/3/2, K=4" "$(spares --cluster "$T/three.json" "${D[@]}" --spares 4)" "a1 b2 b3 c2"
# --exclude first: b3 is gone, b2 is rack b's last node
want "--exclude b3, K=2" "$(spares --cluster "$T/two.json" "${D[@]}" --spares 2 --exclude b3)" "a3 b2"
# the other bundled policies use the same rule when a node holds a block
want "megatron, K=2" "$(spares --cluster "$T/two.json" --tp 2 --spares 2)" "a3 b3"
want "devicemesh, K=2" "$(spares --cluster "$T/two.json" --tp 2 --spares 2 --policy devicemesh)" "a3 b3"

# ---- 2. megatron's rule -----------------------------------------------------
echo "== 2. megatron: a spare that costs no pipeline block" >&2
cluster "$T/r454.json" a:4 b:5 c:4
M=(--cluster "$T/r454.json" --tp 8 --pp 2 --dp 6 --spares 1)
want "naive on racks 4/5/4" "$(spares "${M[@]}" --policy naive)" "a4"
want "megatron on racks 4/5/4" "$(spares "${M[@]}")" "b5"
"$PAR3DRUN" --dry-run "${M[@]}" >"$T/m.txt" 2>&1 || { cat "$T/m.txt"; fail "megatron dry run failed"; }
grep -q ' 0 pipelines across racks' "$T/m.txt" || { cat "$T/m.txt"; fail "megatron's spare left a pipeline across racks"; }
# the same placement with the default spare (a4): rack a keeps 3 nodes, one block spans racks
printf 'spares = par3d.default_spares\nfunction place(c, j) return par3d.place_nested(c, j) end\n' >"$T/plain.lua"
"$PAR3DRUN" --dry-run "${M[@]}" --policy "$T/plain.lua" >"$T/p.txt" 2>&1 || true
grep -q ' 8 pipelines across racks' "$T/p.txt" || { cat "$T/p.txt"; fail "the default spare did not cost a block"; }

# ---- 3. a policy's own spares() -------------------------------------------
echo "== 3. spares() hook in the dry run" >&2
cluster "$T/six.json" a:3 b:3
cat >"$T/pick.lua" <<'LUA'
-- keeps the FIRST node of each rack as its spare (by name)
function spares(cluster, job)
  assert(job.spares == 2 and #cluster.nodes == 6)
  return {"a1", "b1"}
end
function place(cluster, job)
  if job.previous then return par3d.replace(cluster, job) end
  return par3d.place_nested(cluster, job)
end
LUA
want "hook by name" "$(spares --cluster "$T/six.json" --tp 2 --pp 2 --spares 2 --policy "$T/pick.lua")" "a1 b1"
"$PAR3DRUN" --dry-run --cluster "$T/six.json" --tp 2 --pp 2 --spares 2 --policy "$T/pick.lua" >"$T/d.txt" 2>&1 ||
  { cat "$T/d.txt"; fail "dry run with the hook failed"; }
grep -q '^spares a1 (rack a), b1 (rack b): run no rank' "$T/d.txt" || { cat "$T/d.txt"; fail "text report lacks the hook's spares"; }
# indices are 1-based into cluster.nodes, which has no --exclude'd node
sed 's/return {"a1", "b1"}/return {1, #cluster.nodes}/; s/#cluster.nodes == 6/#cluster.nodes == 5/' "$T/pick.lua" >"$T/idx.lua"
want "hook by index" "$(spares --cluster "$T/six.json" --tp 2 --pp 2 --spares 2 --exclude a1 --policy "$T/idx.lua")" "a2 b3"

# ---- 4. a launch uses them --------------------------------------------------
echo "== 4. launch --emulate: the hook's spares wait, one takes a lost node's ranks" >&2
cat >"$T/w.sh" <<'SH'
#!/bin/sh
echo "$RANK $P3D_NODE $P3D_GPU $P3D_RESTART_COUNT $PPID" >>"$T_DIR/starts"
i=0
while [ "$i" -lt "$STEPS" ]; do sleep 0.2; i=$((i + 1)); done
SH
chmod +x "$T/w.sh"
export T_DIR=$T/launch
mkdir -p "$T_DIR"
( set +e; STEPS=12 "$PAR3DRUN" --emulate --cluster "$T/six.json" --tp 2 --pp 2 --dp 8 --spares 2 --grace 3 \
    --max-restarts 2 --policy "$T/pick.lua" --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1
  echo $? >"$T_DIR/rc" ) &
for i in $(seq 1 600); do
  [ "$(awk '$4 == 0' "$T_DIR/starts" 2>/dev/null | wc -l)" -ge 32 ] && break
  [ -s "$T_DIR/rc" ] && { cat "$T_DIR/out"; fail "the job ended before its ranks started"; }
  sleep 0.05
done
[ -n "$(awk '$2 == "a1" || $2 == "b1"' "$T_DIR/starts")" ] && fail "a rank ran on a spare the hook chose"
sleep 0.3
kill -9 "$(awk '$2 == "b2" && $4 == 0 {print $5; exit}' "$T_DIR/starts")"
for i in $(seq 1 1200); do [ -s "$T_DIR/rc" ] && break; sleep 0.05; done
[ "$(cat "$T_DIR/rc" 2>/dev/null)" = 0 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc" 2>/dev/null) after a node loss"; }
grep -q 'of b2 moved to spare b1 (same rack b)' "$T_DIR/out" || { cat "$T_DIR/out"; fail "b2's ranks did not move to b1"; }
[ "$(awk '$4 == 1 && $2 == "b1"' "$T_DIR/starts" | wc -l)" = 8 ] || fail "b1 did not run b2's 8 ranks"
python3 - "$T_DIR/rd" <<'PY' || fail "placement.json after the replacement"
import json, sys
d = json.load(open(sys.argv[1] + "/placement.json"))
assert d["lost"] == ["b2"] and d["spares"] == ["a1"], (d.get("lost"), d.get("spares"))
PY

# ---- 5. --exclude and --spares on the other commands -----------------------
echo "== 5. plan, cluster and launch honour --exclude" >&2
P=(plan --cluster "$T/r454.json" --model gpt3-1.3b --global-batch 256)
"$PAR3DRUN" "${P[@]}" --format json >"$T/all.json" 2>/dev/null || fail "plan failed"
"$PAR3DRUN" "${P[@]}" --format json --exclude 'a[1-2]' --spares 2 >"$T/ex.json" 2>"$T/ex.err" ||
  { cat "$T/ex.err"; fail "plan with --exclude --spares failed"; }
python3 - "$T/all.json" "$T/ex.json" <<'PY' || fail "plan did not plan on the nodes left"
import json, sys
a, e = (json.load(open(p))["cluster"] for p in sys.argv[1:3])
assert (a["nodes"], e["nodes"]) == (13, 9) and e["gpus"] == 72, (a, e)
PY
grep -q '^par3drun: plan: 2 nodes excluded (--exclude), not planned on: a\[1-2\]$' "$T/ex.err" || { cat "$T/ex.err"; fail "plan does not say what it excluded"; }
grep -q '^par3drun: plan: 2 nodes kept as spares (--spares), not planned on: a4,b5$' "$T/ex.err" || { cat "$T/ex.err"; fail "plan does not name the spares"; }
"$PAR3DRUN" "${P[@]}" --exclude 'a[1-2]' --spares 2 >"$T/ex.txt" 2>/dev/null || fail "plan (text) failed"
line=$(sed -n 's/^run the best:  par3drun //p' "$T/ex.txt")
case "$line" in *"--exclude 'a[1-2]' --spares 2"*) ;; *) fail "run line lacks --exclude/--spares: $line" ;; esac
eval "set -- $line"
(cd "$T" && "$PAR3DRUN" "$@" >"$T/run.txt" 2>&1) || { cat "$T/run.txt"; fail "the plan's run line does not run"; }
grep -q '^spares a4 (rack a), b5 (rack b)' "$T/run.txt" || { cat "$T/run.txt"; fail "the run line keeps other spares"; }
grep -q '^excluded a1 (rack a), a2 (rack a): never used' "$T/run.txt" || { cat "$T/run.txt"; fail "the run line lost --exclude"; }

"$PAR3DRUN" cluster --cluster "$T/r454.json" --exclude 'a[1-2],c4' >"$T/c.txt" || fail "cluster --exclude failed"
grep -q '^cluster: 10 nodes, 80 GPUs' "$T/c.txt" && grep -q '^excluded (--exclude): a\[1-2\],c4$' "$T/c.txt" &&
  grep -q '^a\[3-4\] ' "$T/c.txt" && grep -q '^c\[1-3\] ' "$T/c.txt" || { cat "$T/c.txt"; fail "cluster text with --exclude"; }
"$PAR3DRUN" cluster --cluster "$T/r454.json" --exclude 'a[1-2],c4' --format json >"$T/c.json" || fail "cluster json"
python3 - "$T/c.json" <<'PY' || fail "cluster --format json kept an excluded node"
import json, sys
names = [n["name"] for n in json.load(open(sys.argv[1]))["nodes"]]
assert len(names) == 10 and not {"a1", "a2", "c4"} & set(names), names
PY

export T_DIR=$T/excl
mkdir -p "$T_DIR"
STEPS=1 "$PAR3DRUN" --emulate --cluster "$T/six.json" --tp 2 --pp 2 --dp 4 --exclude a1 -- "$T/w.sh" >"$T_DIR/out" 2>&1 ||
  { cat "$T_DIR/out"; fail "launch with --exclude failed"; }
[ "$(wc -l <"$T_DIR/starts")" = 16 ] || fail "want 16 rank starts"
[ -z "$(awk '$2 == "a1"' "$T_DIR/starts")" ] || fail "a rank ran on the excluded node a1"
echo "policy_spares: ok" >&2
