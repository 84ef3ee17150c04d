#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""gen-cluster.py — writes a big synthetic cluster description for benchmarks.

  bench/gen-cluster.py -n 16384 -o /tmp/c16k.json
  bench/gen-cluster.py -n 16384 --per-node --slurm-topology /tmp/t.conf -o /tmp/c.json

N nodes named node00001.., 8 GPUs each (the bundled dgx-h100.xml unless
--topology says otherwise), racks of --rack-size nodes (32). By default one
entry per rack ("node[00001-00032]"); --per-node writes one entry per node
(the worst case for the reader). --slurm-topology also writes a matching
topology.conf: one leaf switch per rack, a spine per 32 leaves, one core.
--nvl-domain K puts every K consecutive nodes in one multi-node NVLink domain.
Output is deterministic: same arguments, same bytes.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--nodes", type=int, default=16384)
    ap.add_argument("--rack-size", type=int, default=32)
    ap.add_argument("--topology", default="dgx-h100.xml")
    ap.add_argument("--per-node", action="store_true")
    ap.add_argument("--nvl-domain", type=int, default=0)
    ap.add_argument("--slurm-topology", metavar="FILE")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    if a.nodes < 1 or a.rack_size < 1 or a.nvl_domain < 0:
        ap.error("--nodes and --rack-size must be >= 1, --nvl-domain >= 0")
    width = max(5, len(str(a.nodes)))
    name = lambda i: "node%0*d" % (width, i + 1)

    def entry(lo, hi):  # nodes lo..hi-1, same rack and domain
        hl = name(lo) if hi - lo == 1 else "node[%0*d-%0*d]" % (width, lo + 1, width, hi)
        e = {"name": hl, "topology": a.topology, "rack": "r%04d" % (lo // a.rack_size)}
        if a.nvl_domain:
            e["nvlink_domain"] = "nvl%04d" % (lo // a.nvl_domain)
        return e

    # cut points: rack and domain boundaries (or every node)
    cuts = set(range(0, a.nodes, a.rack_size))
    if a.nvl_domain:
        cuts |= set(range(0, a.nodes, a.nvl_domain))
    if a.per_node:
        cuts = set(range(a.nodes))
    cuts = sorted(cuts) + [a.nodes]
    entries = [entry(cuts[k], cuts[k + 1]) for k in range(len(cuts) - 1)]
    desc = "synthetic: %d nodes x 8 GPUs, %d per rack" % (a.nodes, a.rack_size)
    lines = ['{', '  "description": %s,' % json.dumps(desc), '  "nodes": [']
    lines += ["    " + json.dumps(e) + ("," if k + 1 < len(entries) else "")
              for k, e in enumerate(entries)]
    lines += ["  ]", "}"]
    out = sys.stdout if a.output == "-" else open(a.output, "w")
    out.write("\n".join(lines) + "\n")
    if out is not sys.stdout:
        out.close()

    if a.slurm_topology:
        nracks = (a.nodes + a.rack_size - 1) // a.rack_size
        with open(a.slurm_topology, "w") as t:
            for r in range(nracks):
                lo, hi = r * a.rack_size, min(a.nodes, (r + 1) * a.rack_size)
                t.write("SwitchName=leaf%04d Nodes=node[%0*d-%0*d]\n"
                        % (r, width, lo + 1, width, hi))
            nspines = (nracks + 31) // 32
            for s in range(nspines):
                t.write("SwitchName=spine%03d Switches=leaf[%04d-%04d]\n"
                        % (s, s * 32, min(nracks, (s + 1) * 32) - 1))
            t.write("SwitchName=core Switches=spine[000-%03d]\n" % (nspines - 1))


if __name__ == "__main__":
    main()
