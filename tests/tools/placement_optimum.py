#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""placement_optimum.py - the bundled placement policy against the exact optimum.

Generates random small clusters (seeded: 2-4 racks of 1-6 nodes; DGX H100 /
A100, DGX-1, NVLink-pair boards, PCIe-only boards, GB200 trays in multi-node
NVLink domains; one machine type or mixed; nodes listed rack by rack, round
robin or shuffled; worlds smaller than the cluster; several order strings; tp 2, 4 or 8,
at most 24 pipelines),
computes the optimum of the placement objective exactly, runs
`par3drun --dry-run --format json` with the policy and compares its
metrics.objective with the optimum.

The objective (lexicographic, smaller is better; docs/report-json.md):
  (1) TP groups off one NVLink domain, (2) of those, groups spanning nodes,
  (3) TP groups spanning racks, (4) pipelines (PP groups) spanning racks,
  (5) cross-rack hops between consecutive stages.

Exact solution, and why working with units and racks is enough. A placement
is a bijection ranks -> GPUs; objectives 1-3 depend only on the partition of
the used GPUs into TP groups, 4-5 only on the rack of each GPU.
* Blocks: each NVLink domain of a node outside multi-node domains, and each
  multi-node domain as a whole (its nodes' GPUs pooled). A TP group is on
  NVLink iff it lies in one block (a whole DGX-1 for tp=8: its NVLink
  ring, RING_NODES), so at most T1 = sum_b floor(|b|/tp)
  groups are, and T1 are reachable (blocks are disjoint): objective 1 is
  max(0, need - T1), need = world/tp. Any placement reaching it with
  need > T1 fills every block to floor(|b|/tp), which fixes what each node
  has left; groups inside one node but off NVLink then number at most
  T2 = sum_nodes floor(left/tp): objective 2 is max(0, need - T1 - T2).
  A rack r holds at most cap_r = floor(G_r/tp) whole groups: objective 3
  is max(0, need - sum cap_r). (Multi-node domains lie inside one rack
  here.)
* Per rack, every placement reaching objectives 1-3 uses u_r groups with
  lo_r <= u_r <= hi_r: need <= T1: [0, t1_r]; need <= T1+T2: [t1_r,
  t1_r+t2_r]; need <= CAP: [t1_r+t2_r, cap_r] (each bound forced by the
  argument above, rack by rack), and every such u is reachable.
* When objective 3 is 0 every TP group lies in one rack, so each pipeline
  (tp lanes of the same stage units) sees, in every lane, the racks of its
  pp units: a sequence of pp racks. It spans racks iff it has two racks,
  and its hops are at least (racks it touches - 1), reached by ordering
  its stages rack by rack. So objectives 4, 5 = tp * (mixed sequences, sum
  of (racks - 1)) minimised over u in the bounds and over the split of the
  u_r units into dp*cp*ep sequences of pp: an exhaustive search over the
  multisets of sequence compositions (memoised on the units used so far),
  below. Different from the policy's method (whole blocks per rack plus a
  fragment ordering) on purpose.
* When objective 3 is > 0 and pp > 1 the lanes of one TP group sit in
  different racks; such instances are counted as "not covered" and left
  out of the comparison.

Prints one JSON object; exit 1 when fewer than --min-share reach the
optimum (or a run fails), 0 otherwise.
"""
import argparse, concurrent.futures, functools, itertools, json, os, random, subprocess, sys, tempfile

# topology file -> (NVLink domain sizes of a node, multi-node capable)
TOPOS = {
    "dgx-h100.xml": [8],
    "dgx-a100.xml": [8],
    "dgx1-v100.xml": [4, 4],
    "pcie8-nvlink-pairs.xml": [2, 2, 2, 2],
    "pcie4.xml": [1, 1, 1, 1],
    "gb200-tray.xml": [4],
}
# DGX-1's NVLink links close a ring through all 8 GPUs (hybrid cube-mesh),
# so a TP group of the whole node runs its all-reduces on NVLink and
# check_links.c counts it as NV: for tp=8 the node is one block of 8.
RING_NODES = {"dgx1-v100.xml": 8}


def node_doms(topo, tp):
    return [tp] if RING_NODES.get(topo) == tp else TOPOS[topo]


ORDERS = ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-pp-dp", "tp-dp-pp"]


def gen(rng):
    nracks = rng.randint(2, 4)
    kind = rng.choice(["uniform", "uniform", "mixed", "gb200", "gb200-mixed"])
    plain = [t for t in TOPOS if t != "gb200-tray.xml"]
    one = rng.choice(plain)
    racks = []
    for r in range(nracks):
        n = rng.randint(1, 6)
        nodes = []
        if kind.startswith("gb200") and (kind == "gb200" or rng.random() < 0.5):
            # trays in one or two multi-node domains inside this rack
            cut = rng.randint(1, n)
            for i in range(n):
                nodes.append(("gb200-tray.xml", "nvl-r%d-%d" % (r, 0 if i < cut else 1)))
        else:
            for i in range(n):
                nodes.append((one if kind == "uniform" or kind == "gb200" else rng.choice(plain), None))
        racks.append(nodes)
    listing = rng.choice(["by-rack", "round-robin", "shuffled"])
    flat = []
    for r, nodes in enumerate(racks):
        for i, (t, d) in enumerate(nodes):
            flat.append({"name": "r%dn%d" % (r, i), "topology": t, "rack": "rack%d" % r, "dom": d, "r": r})
    if listing == "round-robin":
        flat = [x for i in range(6) for r in range(nracks) for x in flat if x["r"] == r and x["name"] == "r%dn%d" % (r, i)]
    elif listing == "shuffled":
        rng.shuffle(flat)
    gpus = sum(sum(TOPOS[x["topology"]]) for x in flat)
    while True:
        # tp=1 makes every GPU a unit: too many for the exhaustive search
        tp = rng.choice([2, 4, 8])
        pp = rng.choice([1, 2, 3, 4])
        if tp * pp <= gpus:
            break
    dpmax = min(gpus // (tp * pp), 24)
    dp = dpmax if rng.random() < 0.4 else rng.randint(1, dpmax)
    return {"nodes": flat, "nracks": nracks, "kind": kind, "listing": listing,
            "tp": tp, "pp": pp, "dp": dp, "order": rng.choice(ORDERS), "gpus": gpus}


def exact(inst):
    tp, pp, dp = inst["tp"], inst["pp"], inst["dp"]
    need = pp * dp
    nr = inst["nracks"]
    t1, t2, cap, G = [0] * nr, [0] * nr, [0] * nr, [0] * nr
    pools = {}
    for x in inst["nodes"]:
        doms, r = node_doms(x["topology"], tp), x["r"]
        G[r] += sum(doms)
        if x["dom"]:
            pools[(r, x["dom"])] = pools.get((r, x["dom"]), 0) + sum(doms)
        else:
            t1[r] += sum(d // tp for d in doms)
            t2[r] += (sum(doms) - tp * sum(d // tp for d in doms)) // tp
    for (r, _), g in pools.items():
        t1[r] += g // tp
    for r in range(nr):
        cap[r] = G[r] // tp
    T1, T2, CAP = sum(t1), sum(t2), sum(cap)
    o1 = max(0, need - T1)
    o2 = max(0, need - T1 - T2)
    o3 = max(0, need - CAP)
    if need <= T1:
        lo, hi = [0] * nr, t1
    elif need <= T1 + T2:
        lo, hi = t1, [t1[r] + t2[r] for r in range(nr)]
    elif need <= CAP:
        lo, hi = [t1[r] + t2[r] for r in range(nr)], cap
    else:
        lo, hi = cap, cap
    if o3 > 0:
        if pp > 1:
            return None, "tp-spans-racks"
        return (o1, o2, o3, 0, 0), ("fits" if need <= T1 else "tp-exceeds")
    comps = [c for c in itertools.product(range(pp + 1), repeat=nr) if sum(c) == pp]
    cost = {c: (1 if sum(1 for v in c if v) > 1 else 0, sum(1 for v in c if v) - 1) for c in comps}
    INF = (10 ** 9, 10 ** 9)

    @functools.lru_cache(maxsize=None)
    def f(k, used, start):
        # k more sequences, compositions from index start on (multisets)
        if k == 0:
            return (0, 0) if all(used[r] >= lo[r] for r in range(nr)) else INF
        best = INF
        for i in range(start, len(comps)):
            c = comps[i]
            nu = tuple(used[r] + c[r] for r in range(nr))
            if any(nu[r] > hi[r] for r in range(nr)):
                continue
            sub = f(k - 1, nu, i)
            if sub[0] >= INF[0]:
                continue
            v = (sub[0] + cost[c][0], sub[1] + cost[c][1])
            if v < best:
                best = v
        return best

    m, h = f(dp, tuple([0] * nr), 0)
    f.cache_clear()
    assert m < INF[0], "no placement within bounds"
    return (o1, o2, o3, tp * m, tp * h), ("fits" if need <= T1 else "tp-exceeds")


def run(binp, here, inst, tmp, policy):
    path = os.path.join(tmp, "cluster.json")
    with open(path, "w") as f:
        json.dump({"nodes": [{"name": x["name"], "topology": x["topology"], "rack": x["rack"],
                              **({"nvlink_domain": x["dom"]} if x["dom"] else {})} for x in inst["nodes"]]}, f)
    out = os.path.join(tmp, "report.json")
    argv = [binp, "--dry-run", "--cluster", path, "--tp", str(inst["tp"]), "--pp", str(inst["pp"]),
            "--dp", str(inst["dp"]), "--order", inst["order"], "--policy", policy, "--format", "json",
            "--output", out]
    p = subprocess.run(argv, capture_output=True, text=True,
                       env=dict(os.environ, P3D_DATA_DIR=here, SLURM_JOB_NODELIST=""))
    if p.returncode not in (0, 2) or not os.path.exists(out):
        return None, "exit %d: %s" % (p.returncode, p.stderr.strip()[-300:])
    rep = json.load(open(out))
    os.unlink(out)
    return tuple(rep["metrics"]["objective"]), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--par3drun", required=True)
    ap.add_argument("--src", required=True, help="source tree (P3D_DATA_DIR)")
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("-n", type=int, default=120, help="instances")
    ap.add_argument("--policy", default="megatron")
    ap.add_argument("--min-share", type=float, default=0.98)
    ap.add_argument("-j", "--jobs", type=int, default=4, help="dry runs at once")
    ap.add_argument("--show", type=int, default=10, help="misses to describe")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    classes, misses, failures = {}, [], []
    insts = [gen(rng) for _ in range(a.n)]
    with tempfile.TemporaryDirectory() as tmp:
        def one(i):
            d = os.path.join(tmp, str(i))
            os.mkdir(d)
            return run(a.par3drun, a.src, insts[i], d, a.policy)
        solved = [exact(inst) for inst in insts]
        todo = [i for i in range(a.n) if solved[i][0] is not None]
        skipped = a.n - len(todo)
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
            results = dict(zip(todo, ex.map(one, todo)))
        for i in todo:
            inst, (opt, fitcls) = insts[i], solved[i]
            got, err = results[i]
            cls = "%s/%s/%s" % (inst["kind"], fitcls, "partial" if inst["tp"] * inst["pp"] * inst["dp"] < inst["gpus"] else "full")
            c = classes.setdefault(cls, {"instances": 0, "optimal": 0})
            c["instances"] += 1
            desc = {"instance": i, "class": cls, "listing": inst["listing"], "order": inst["order"],
                    "mesh": "tp%d pp%d dp%d" % (inst["tp"], inst["pp"], inst["dp"]), "gpus": inst["gpus"],
                    "racks": [[x["topology"].split(".")[0] + ("@" + x["dom"] if x["dom"] else "")
                               for x in inst["nodes"] if x["r"] == r] for r in range(inst["nracks"])]}
            if err:
                failures.append(dict(desc, error=err))
                continue
            if got == opt:
                c["optimal"] += 1
            else:
                gap = [g - o for g, o in zip(got, opt)]
                misses.append(dict(desc, optimum=list(opt), policy=list(got), gap=gap,
                                   worse=got > opt))
    compared = sum(c["instances"] for c in classes.values())
    optimal = sum(c["optimal"] for c in classes.values())
    better = [m for m in misses if not m["worse"]]
    out = {"seed": a.seed, "instances": a.n, "compared": compared, "optimal": optimal,
           "share": round(optimal / compared, 4) if compared else None,
           "not_covered_tp_spans_racks_pp_gt_1": skipped, "failures": failures[:a.show],
           "nfailures": len(failures), "better_than_optimum": len(better),
           "classes": dict(sorted(classes.items())), "misses": misses[:a.show], "nmisses": len(misses)}
    print(json.dumps(out, indent=1))
    # better than the "optimum" would mean the exact solver is wrong: fail
    if failures or better or not compared or optimal < a.min_share * compared:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
