#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_heal_racks.sh — a lost node replaced by the spare of its own
# rack over the static TCP rendezvous (separate par3drun agents on
# loopback, real sockets, real SIGKILL). Six DGX H100 agents in two racks
# (SLURM_TOPOLOGY_ADDR per agent, as Slurm's topology/tree gives it, see
# multinode_racks.sh): node ranks 0-2 under leafA, 3-5 under leafB.
# --spares 2 takes the last node of each rack (2 and 5); tp 8 pp 2 on the
# other four makes two pipelines of two nodes, each inside one rack, so a
# spare from the wrong rack would make a pipeline cross racks.
#   1. node rank 4 (leafB) SIGKILLed -> its ranks go to 5 (leafB's spare).
#   2. node rank 1 (leafA) SIGKILLed -> its ranks go to 2 (leafA's spare).
# (Two cases, so that a policy picking one fixed spare fails one of them.)
# Each: every surviving node exits 0, exactly the lost node's ranks moved,
# GPU for GPU, no other rank moved, every pipeline still in one rack,
# placement.json identical on the survivors with placement.1.json kept,
# the leader's events.jsonl and story tell it.
. "$(dirname "$0")/lib/multinode_lib.sh"
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml
leaf=(leafA leafA leafA leafB leafB leafB)
unset SLURM_TOPOLOGY_ADDR SLURM_TOPOLOGY_ADDR_PATTERN

# generation 0 runs until killed; after a restart every rank ends at once
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'

# heal NAME KILL WANT_SPARE RACK
heal() {
  local name=$1 kill=$2 want=$3 rack=$4 P i n0 codes t0 t1 sum
  P=$(free_port)
  for i in 0 1 2 3 4 5; do
    SLURM_TOPOLOGY_ADDR="spine1.${leaf[$i]}.node$i" SLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node \
      "$PAR3DRUN" --nnodes 6 --node-rank $i --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
      --topology "$TOPO" --run-dir "$T/$name.rd$i" --tp 8 --pp 2 --spares 2 --max-restarts 2 --grace 1 \
      -- sh -c "$W" >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
    AG[$i]=$!
    PIDS+=($!)
  done
  for _ in $(seq 400); do
    n0=$(cat "$T"/"$name".*.out 2>/dev/null | grep -c 'gen=0')
    [ "$n0" -ge 32 ] && break
    sleep 0.05
  done
  [ "$n0" -ge 32 ] || { bad "$name: only $n0 of 32 ranks started"; tail -n 3 "$T/$name".*.err | sed 's/^/  /'; return; }
  # before the failure: the spares are 2 and 5, every pipeline in one rack
  python3 - "$T/$name.rd0/placement.json" <<'PY' || bad "$name: the first placement is not the one this test needs"
import json, sys
d = json.load(open(sys.argv[1]))
sp = sorted(int(s.rsplit(":", 1)[1]) for s in d.get("spares", []))
if sp != [2, 5]:
    sys.exit(f"spares {d.get('spares')}, want node ranks 2 and 5")
pipes = {}
for r in d["ranks"]:
    pipes.setdefault((r["tp"], r["dp"]), set()).add(r["rack"])
if len(pipes) != 16 or any(len(v) != 1 for v in pipes.values()):
    sys.exit(f"pipelines not rack-local: {pipes}")
nodes = {}
for r in d["ranks"]:
    nodes.setdefault((r["tp"], r["dp"]), set()).add(r["node"])
if any(len(v) != 2 for v in nodes.values()):
    sys.exit("a pipeline does not span two nodes: the test would not tell racks apart")
PY
  t0=$(now_ms)
  kill -KILL "${AG[$kill]}"
  codes=""
  for i in 0 1 2 3 4 5; do
    [ "$i" = "$kill" ] && continue
    wait "${AG[$i]}"
    codes="$codes $?"
  done
  t1=$(now_ms)
  wait "${AG[$kill]}" 2>/dev/null
  echo "$name: the job ended $((t1 - t0)) ms after node rank $kill's agent was killed"
  [ "$codes" = " 0 0 0 0 0" ] || { bad "$name: exit codes$codes, want 0 0 0 0 0"; sed 's/^/  /' "$T/$name.0.err"; }
  sum=$(sha256sum <"$T/$name.rd0/placement.json")
  for i in 1 2 3 4 5; do
    [ "$i" = "$kill" ] && continue
    [ "$(sha256sum <"$T/$name.rd$i/placement.json")" = "$sum" ] || bad "$name: placement.json of node $i differs from the leader's"
    cmp -s "$T/$name.rd0/placement.1.json" "$T/$name.rd$i/placement.1.json" ||
      bad "$name: node $i: placement.1.json missing or not the leader's previous placement"
  done
  python3 - "$T/$name.rd0/placement.1.json" "$T/$name.rd0/placement.json" "$kill" "$want" "$rack" <<'PY' ||
import json, sys
d0, d1 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
kill, want, rack = sys.argv[3], sys.argv[4], sys.argv[5]
old = {r["rank"]: r for r in d0["ranks"]}
new = {r["rank"]: r for r in d1["ranks"]}
assert old.keys() == new.keys(), "rank sets differ"
nr = lambda n: n.rsplit(":", 1)[1]
moved = sorted(r for r in old if old[r]["node"] != new[r]["node"] or old[r]["gpu"] != new[r]["gpu"])
lost = sorted(r for r in old if nr(old[r]["node"]) == kill)
if moved != lost or len(lost) != 8:
    sys.exit(f"moved {moved}, want the 8 ranks of node rank {kill}: {lost}")
to = {nr(new[r]["node"]) for r in moved}
if to != {want}:
    sys.exit(f"the ranks went to node rank(s) {sorted(to)}, want {want} (the spare of rack {rack})")
if any(new[r]["rack"] != rack or old[r]["rack"] != rack for r in moved):
    sys.exit(f"the moved ranks are not in rack {rack} before and after")
if any(new[r]["gpu"] != old[r]["gpu"] for r in moved):
    sys.exit("ranks changed GPU index on the spare")
pipes = {}
for r in d1["ranks"]:
    pipes.setdefault((r["tp"], r["dp"]), set()).add(r["rack"])
cross = [k for k, v in pipes.items() if len(v) > 1]
if cross:
    sys.exit(f"pipelines (tp, dp) {cross} cross racks after the replacement")
print(f"ranks {moved[0]}-{moved[-1]} of node rank {kill} -> spare {want} ({rack}), same GPUs; "
      f"nothing else moved; {len(pipes)} pipelines, each in one rack")
PY
    bad "$name: the replacement is wrong"
  # every rank ran again, the moved ones on the spare only after the loss
  [ "$(cat "$T/$name".[0-5].out | grep -c 'gen=1')" = 32 ] || bad "$name: not 32 ranks ran after the restart"
  [ "$(grep -c 'gen=1' "$T/$name.$want.out")" = 8 ] || bad "$name: the spare did not run 8 ranks"
  [ "$(grep -c 'gen=0' "$T/$name.$want.out")" = 0 ] || bad "$name: the spare ran ranks before the replacement"
  local ev=$T/$name.rd0/events.jsonl
  grep -q "\"event\": \"failure\", \"node\": \"[^\"]*:$kill\", \"rank\": -1, \"cause\": \"node lost\"" "$ev" ||
    bad "$name: events: no node-lost failure"
  grep -q "\"event\": \"replace\", \"failed\": \"[^\"]*:$kill\", \"spare\": \"[^\"]*:$want\", \"moved_ranks\": \[[0-9, ]*\], \"restart\": 1" "$ev" ||
    bad "$name: events: no replace record $kill -> $want"
  grep -q '"event": "restart", "restart": 1, "kind": "replacement"' "$ev" || bad "$name: events: no replacement restart"
  grep -q '"event": "running", "restart": 1, "recovery_s": [0-9.]*' "$ev" || bad "$name: events: no recovery time"
  grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || bad "$name: events: no end record"
  grep -q "of [^ ]*:$kill moved to spare [^ ]*:$want (same rack $rack)" "$T/$name.0.err" ||
    { bad "$name: the leader's story does not say same rack $rack"; sed 's/^/  /' "$T/$name.0.err"; }
  [ "$fail" = 0 ] || sed 's/^/  events: /' "$ev"
  sleep 0.3
  [ "$(leftovers)" = 0 ] || bad "$name: $(leftovers) workers left behind"
}

heal rackB 4 5 leafB
heal rackA 1 2 leafA

[ "$fail" = 0 ] && echo "PASS multinode_heal_racks"
exit "$fail"
