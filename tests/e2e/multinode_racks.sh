#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_racks.sh — racks without a topology file: four agents of a
# static rendezvous (loopback, no daemons) each carry the address Slurm's
# topology/tree plugin would give them (SLURM_TOPOLOGY_ADDR, e.g.
# spine1.leafA.n1 with pattern switch.switch.node); the leader puts each
# node in its leaf switch's rack and places every pipeline inside one rack.
# Without the variables the same job sees one rack.
. "$(dirname "$0")/lib/multinode_lib.sh"
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml
# node ranks 0 and 2 under leafA, 1 and 3 under leafB: interleaved on
# purpose, so list order alone would put pipelines across racks
leaf=(leafA leafB leafA leafB)
run() { # NAME WITH_ADDR
  local name=$1 with=$2 P i
  P=$(free_port)
  for i in 0 1 2 3; do
    if [ "$with" = 1 ]; then
      SLURM_TOPOLOGY_ADDR="spine1.${leaf[$i]}.node$i" SLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node \
        "$PAR3DRUN" --nnodes 4 --node-rank $i --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
        --topology "$TOPO" --run-dir "$T/$name.rd$i" --tp 8 --pp 2 -- true >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
    else
      "$PAR3DRUN" --nnodes 4 --node-rank $i --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
        --topology "$TOPO" --run-dir "$T/$name.rd$i" --tp 8 --pp 2 -- true >"$T/$name.$i.out" 2>"$T/$name.$i.err" &
    fi
    AG[$i]=$!
    PIDS+=($!)
  done
  for i in 0 1 2 3; do
    wait "${AG[$i]}" || { bad "$name: node $i exit $?"; sed 's/^/  /' "$T/$name.$i.err"; }
  done
}
# pipelines: the racks of each (tp, dp) group's stages
pipes() {
  python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
racks = {}
for r in d["ranks"]:
    racks.setdefault((r["tp"], r["dp"]), set()).add(r["rack"])
allr = sorted({r["rack"] for r in d["ranks"]})
cross = sum(1 for v in racks.values() if len(v) > 1)
print("racks=%s crossing=%d of %d" % (",".join(allr), cross, len(racks)))
PY
}
unset SLURM_TOPOLOGY_ADDR SLURM_TOPOLOGY_ADDR_PATTERN
run addr 1
got=$(pipes "$T/addr.rd0/placement.json")
[ "$got" = "racks=leafA,leafB crossing=0 of 16" ] || bad "with SLURM_TOPOLOGY_ADDR: $got"
echo "with SLURM_TOPOLOGY_ADDR: $got"
# the rack of each node is the one its own agent reported. The agents share
# this host, so their node names are HOST:RANK; a name that does not map to
# one of the four agents fails the test (it used to pass such a name over,
# which left the check asserting nothing).
python3 - "$T/addr.rd0/placement.json" <<'PY' || bad "a node is not in its agent's leaf switch"
import json, sys
d = json.load(open(sys.argv[1]))
want = {0: "leafA", 1: "leafB", 2: "leafA", 3: "leafB"}
names = {}
for r in d["ranks"]:
    names.setdefault(r["node"], r["rack"])
seen = set()
for n, rack in names.items():
    head, sep, tail = n.rpartition(":")
    if not sep or not tail.isdigit() or int(tail) not in want:
        sys.exit("node name %r does not name one of the four agents" % n)
    k = int(tail)
    seen.add(k)
    if want[k] != rack:
        sys.exit("node %s is in rack %s, its agent said %s" % (n, rack, want[k]))
if seen != set(want):
    sys.exit("nodes placed: %s, expected the four agents" % sorted(seen))
PY
run none 0
got=$(pipes "$T/none.rd0/placement.json")
case $got in "racks=default crossing=0 of 16") ;; *) bad "without SLURM_TOPOLOGY_ADDR: $got" ;; esac
[ "$fail" = 0 ] && echo "PASS multinode_racks"
exit "$fail"
