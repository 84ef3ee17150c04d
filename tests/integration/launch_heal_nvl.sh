#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Self-healing on multi-node NVLink (GB200-style trays of 4 GPUs; docs/launch.md,
# "When a node dies"; docs/policies.md, "Choosing the spares"): one rack with two
# NVLink domains d1 = t[1-3] and d2 = u[1-3]; tp 8 spans two trays, so a TP
# group must stay inside one domain.
#  1. --spares 2 puts one spare in each domain (t3, u3), not both at the end of
#     the rack: every TP group starts on NVLink (no TP_CROSSES_NODES error);
#  2. the agent of t1 is SIGKILLed mid-run: its ranks go to t3 (same NVLink
#     domain; u3 is in the same rack too, so the rack alone does not decide),
#     GPU for GPU, no other rank moves, the TP group is still inside d1, the
#     replacement says "same NVLink domain d1";
#  3. two GB200 NVL72 racks of 18 trays, tp 8, --spares 2: both spares come
#     from one domain (17 + 17 usable trays would split a TP group over the
#     two domains), --spares 4: two from each.
. "$(dirname "$0")/lib/launch_common.sh"
TRAY=$P3D_SRC/examples/topologies/gb200-tray.xml
C=$T/nvl.json
printf '{"nodes": [{"name": "t[1-3]", "topology": "%s", "rack": "r1", "nvlink_domain": "d1"},
                   {"name": "u[1-3]", "topology": "%s", "rack": "r1", "nvlink_domain": "d2"}]}\n' \
  "$TRAY" "$TRAY" >"$C"

# ---- 1. one spare in each NVLink domain -------------------------------------
out=$("$PAR3DRUN" --dry-run --cluster "$C" --tp 8 --spares 2 --format json) || fail "dry run failed"
python3 - "$out" <<'PY' || fail "spares / TP groups of the dry run"
import json, sys
d = json.loads(sys.argv[1])
assert d["spares"] == ["t3", "u3"], d["spares"]
nodes = {r["rank"]: r["node"] for r in d["ranks"]}
dom = {"t1": "d1", "t2": "d1", "t3": "d1", "u1": "d2", "u2": "d2", "u3": "d2"}
for g in d["groups"]["tp"]:
    assert len({dom[nodes[r]] for r in g}) == 1, ("a TP group spans NVLink domains", g)
assert not [c for c in d["checks"] if c["severity"] == "error"], d["checks"]
PY
text=$("$PAR3DRUN" --dry-run --cluster "$C" --tp 8 --spares 2)
grep -q 'spares t3 (rack r1, NVLink domain d1), u3 (rack r1, NVLink domain d2)' <<<"$text" ||
  { echo "$text" | head -5; fail "the dry run does not name the spares' NVLink domains"; }

# ---- 2. a lost tray's ranks go to the spare of its own NVLink domain -------
cat >"$T/w.sh" <<'SH'
#!/bin/sh
echo "$RANK $P3D_NODE $P3D_GPU $P3D_RESTART_COUNT $PPID" >>"$T_DIR/starts"
[ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60
exit 0
SH
chmod +x "$T/w.sh"
T_DIR=$T/kill
mkdir -p "$T_DIR"
export T_DIR
( set +e; "$PAR3DRUN" --emulate --cluster "$C" --tp 8 --spares 2 --max-restarts 2 --grace 2 \
    --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1; echo $? >"$T_DIR/rc" ) &
for _ in $(seq 1 600); do
  [ "$(awk '$4 == 0' "$T_DIR/starts" 2>/dev/null | wc -l)" -ge 16 ] && break
  sleep 0.05
done
agent=$(awk '$2 == "t1" && $4 == 0 {print $5; exit}' "$T_DIR/starts")
[ -n "$agent" ] || { cat "$T_DIR/out"; fail "t1's ranks did not start"; }
kill -9 "$agent"
for _ in $(seq 1 1200); do [ -s "$T_DIR/rc" ] && break; sleep 0.05; done
rc=$(cat "$T_DIR/rc" 2>/dev/null || echo none)
[ "$rc" = 0 ] || { cat "$T_DIR/out"; fail "exit $rc after losing t1 with a spare in its NVLink domain, want 0"; }
grep -q 'ranks 0-3 of t1 moved to spare t3 (same NVLink domain d1)' "$T_DIR/out" ||
  { cat "$T_DIR/out"; fail "no replacement line naming the NVLink domain"; }
python3 - "$T_DIR/rd" <<'PY' || fail "the replacement placement is wrong"
import json, sys
d = sys.argv[1]
old = {r["rank"]: r for r in json.load(open(d + "/placement.1.json"))["ranks"]}
doc = json.load(open(d + "/placement.json"))
new = {r["rank"]: r for r in doc["ranks"]}
moved = sorted(r for r in new if (old[r]["node"], old[r]["gpu"]) != (new[r]["node"], new[r]["gpu"]))
assert moved == [0, 1, 2, 3], moved
assert all(new[r]["node"] == "t3" and new[r]["gpu"] == old[r]["gpu"] for r in moved), [new[r] for r in moved]
dom = {"t1": "d1", "t2": "d1", "t3": "d1", "u1": "d2", "u2": "d2", "u3": "d2"}
for g in doc["groups"]["tp"]:
    assert len({dom[new[r]["node"]] for r in g}) == 1, ("a TP group spans NVLink domains", g)
assert not [c for c in doc["checks"] if c["severity"] == "error"], doc["checks"]
assert doc["lost"] == ["t1"] and doc["spares"] == ["u3"], (doc.get("lost"), doc.get("spares"))
PY
[ -n "$(awk '$4 == 1 && $2 == "t3"' "$T_DIR/starts")" ] || fail "no rank ran on the spare t3 after the restart"

# ---- 3. two NVL72 racks: whole TP groups before the spread ------------------
NVL72=$P3D_SRC/examples/clusters/gb200-nvl72-2domains.json
for k in 2 4; do
  out=$("$PAR3DRUN" --dry-run --cluster "$NVL72" --tp 8 --spares $k --format json) || fail "NVL72 --spares $k failed"
  python3 - "$out" "$k" <<'PY' || fail "NVL72 --spares $k: spares or TP groups wrong"
import json, sys
d, k = json.loads(sys.argv[1]), int(sys.argv[2])
want = {2: ["gb200-a17", "gb200-a18"], 4: ["gb200-a17", "gb200-a18", "gb200-b17", "gb200-b18"]}[k]
assert sorted(d["spares"]) == want, d["spares"]
assert not [c for c in d["checks"] if c["severity"] == "error"], [c["code"] for c in d["checks"]]
PY
done
echo ok
