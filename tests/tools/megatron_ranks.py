#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""megatron_ranks.py — an independent model of Megatron-LM's rank generation
(megatron/core/parallel_state.py: RankGenerator and initialize_model_parallel),
written from reading it, to judge par3drun's dry-run JSON.

Two grids share one order string: the dense grid tp*cp*dp*pp and the expert
grid etp*ep*edp*pp (etp in tp's place, edp in dp's, cp of size 1, ep of size
1 in the dense grid). A rank's coordinates are its digits in the mixed radix
the order gives (first name varies fastest). A group of a dimension is every
set of ranks whose other digits agree.

Used as a module (model()) or run as a checker:
  megatron_ranks.py check PAR3DRUN CLUSTER COUNT SEED
runs COUNT meshes through `PAR3DRUN --dry-run --format json` and compares every
coordinate and group; prints one line per disagreement, exits 1 on any.
"""
import itertools
import json
import random
import subprocess
import sys

NAMES = ["tp", "pp", "dp", "ep", "cp"]  # Megatron appends missing names in this order


class Refused(Exception):
    pass


def grid_ranks(order, sizes):
    """{rank: {name: coordinate}} for a grid: order is a list of names
    (fastest first), sizes maps every name to its size."""
    out = {}
    dims = [sizes[n] for n in order]
    for digits in itertools.product(*[range(s) for s in reversed(dims)]):
        digits = list(reversed(digits))  # digits[0] varies fastest
        rank, mul = 0, 1
        for d, s in zip(digits, dims):
            rank += d * mul
            mul *= s
        out[rank] = dict(zip(order, digits))
    return out


def groups(coords, names):
    """Groups varying `names` (a set): ranks keyed by their other coordinates."""
    by = {}
    for r, c in coords.items():
        key = tuple(sorted((k, v) for k, v in c.items() if k not in names))
        by.setdefault(key, []).append(r)
    return sorted(sorted(g) for g in by.values())


def model(tp, cp, ep, etp, dp, pp, order):
    """Megatron's groups and coordinates for a mesh, or raises Refused."""
    order_l = order.lower()
    world = tp * cp * dp * pp
    etp = etp or tp
    if world % (etp * ep * pp):
        raise Refused("expert grid does not divide the world")
    edp = world // (etp * ep * pp)
    toks = order_l.split("-")
    for t in toks:
        if t not in NAMES or toks.count(t) > 1:
            raise Refused("bad order token %s" % t)
    dense_sz = {"tp": tp, "cp": cp, "dp": dp, "pp": pp, "ep": 1}
    exp_sz = {"tp": etp, "cp": 1, "dp": edp, "pp": pp, "ep": ep}
    full = list(toks)
    for n in NAMES:
        if n not in toks:
            if dense_sz[n] != 1 or exp_sz[n] != 1:
                raise Refused("order leaves out %s" % n)
            full.append(n)
    if not order_l.endswith("pp") and pp > 1 and edp != dp:
        raise Refused("not pp-last and edp != dp")
    dense = grid_ranks(full, dense_sz)
    expert = grid_ranks(full, exp_sz)
    if groups(dense, {"pp"}) != groups(expert, {"pp"}):
        raise Refused("pipeline groups differ")
    coords = {}
    for r in range(world):
        d, e = dense[r], expert[r]
        coords[r] = {"tp": d["tp"], "cp": d["cp"], "dp": d["dp"], "pp": d["pp"],
                     "ep": e["ep"], "etp": e["tp"], "edp": e["dp"]}
    g = {"tp": groups(dense, {"tp"}), "cp": groups(dense, {"cp"}), "dp": groups(dense, {"dp"}),
         "pp": groups(dense, {"pp"}), "ep": groups(expert, {"ep"}), "etp": groups(expert, {"tp"}),
         "edp": groups(expert, {"dp"})}
    return {"world": world, "etp": etp, "edp": edp, "coords": coords, "groups": g}


def meshes(count, seed, max_world):
    """count meshes (dense and expert grids, cp, etp != tp, both Megatron
    orders, other orders and refusals), fixed by seed."""
    rnd = random.Random(seed)
    orders = ["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "TP-CP-EP-DP-PP", "Tp-Cp-Ep-Pp-Dp", "tp-ep-dp-pp",
              "tp-dp-pp", "tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "ep-tp-cp-dp-pp", "tp-pp-cp-ep-dp"]
    seen, out = set(), []
    while len(out) < count:
        tp = rnd.choice([1, 2, 4, 8])
        cp = rnd.choice([1, 1, 2])
        pp = rnd.choice([1, 2, 4])
        dp = rnd.choice([1, 2, 4, 8])
        ep = rnd.choice([1, 2, 4, 8])
        etp = rnd.choice([0, 0, 1, 2, 4])
        order = rnd.choice(orders)
        if tp * cp * dp * pp > max_world:
            continue
        m = (tp, cp, ep, etp, dp, pp, order)
        if m not in seen:
            seen.add(m)
            out.append(m)
    return out


def check(par3drun, cluster, count, seed):
    bad = refused = 0
    for tp, cp, ep, etp, dp, pp, order in meshes(count, seed, 512):
        args = [par3drun, "--dry-run", "--format", "json", "--cluster", cluster, "--tp", str(tp), "--cp", str(cp),
                "--pp", str(pp), "--dp", str(dp), "--ep", str(ep), "--order", order]
        if etp:
            args += ["--etp", str(etp)]
        name = " ".join(args[5:])
        p = subprocess.run(args, capture_output=True, text=True)
        try:
            want = model(tp, cp, ep, etp, dp, pp, order)
        except Refused as why:
            refused += 1
            if p.returncode != 2 or "Megatron" not in p.stderr:
                print("DIFF %s: Megatron refuses (%s); par3drun exit %d: %s" % (name, why, p.returncode,
                                                                                p.stderr.strip()[:200]))
                bad += 1
            continue
        if p.returncode != 0:
            print("DIFF %s: Megatron accepts; par3drun exit %d: %s" % (name, p.returncode, p.stderr.strip()[:200]))
            bad += 1
            continue
        d = json.loads(p.stdout)
        errs = []
        if d["world_size"] != want["world"]:
            errs.append("world %s != %s" % (d["world_size"], want["world"]))
        mesh = d["mesh"]
        for k, v in (("tp", tp), ("cp", cp), ("dp", dp), ("pp", pp), ("ep", ep), ("etp", want["etp"]),
                     ("edp", want["edp"])):
            if mesh.get(k) != v:
                errs.append("mesh.%s %s != %s" % (k, mesh.get(k), v))
        for r in d["ranks"]:
            c = want["coords"][r["rank"]]
            for k, v in c.items():
                if r.get(k) != v:
                    errs.append("rank %d %s=%s, Megatron %s" % (r["rank"], k, r.get(k), v))
                    break
        expert = ep > 1 or want["etp"] != tp
        for k, g in want["groups"].items():
            have = d["groups"].get(k)
            if have is None:
                # the report leaves out what is trivial: cp of size 1, the
                # expert grid when it equals the dense one (ep = 1, etp = tp)
                if (k == "cp" and cp == 1) or (k in ("ep", "etp", "edp") and not expert):
                    continue
                errs.append("groups.%s missing" % k)
                continue
            if sorted(sorted(x) for x in have) != g:
                errs.append("groups.%s differ: %s... vs Megatron %s..." % (k, have[:3], g[:3]))
        for e in errs[:3]:
            print("DIFF %s: %s" % (name, e))
        bad += bool(errs)
    print("%d meshes (%d refused by Megatron), %d differ" % (count, refused, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
    print(__doc__)
    sys.exit(2)
