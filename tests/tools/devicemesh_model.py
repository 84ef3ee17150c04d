#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""devicemesh_model.py PAR3DRUN CLUSTER - the devicemesh policy against an
independent model of PyTorch's DeviceMesh layout, mesh by mesh.

The model (written from the rules torch.distributed.DeviceMesh documents,
not from par3drun's code):
  * init_device_mesh(shape, names) numbers ranks row-major: the mesh is
    arange(world).reshape(shape), so the last dimension varies fastest;
    a rank's coordinate along a dimension is its index there
    (get_coordinate());
  * the group of dimension d is the ranks that share every other
    coordinate, in index order (mesh.get_group(d));
  * mesh[names]._flatten(n) makes one dimension of several, taken in the
    mesh's order: its groups are the ranks that share every coordinate
    outside those dimensions, numbered row-major over them;
  * world._unflatten(0, sizes, names) is init_device_mesh over the same
    ranks (torchtitan builds its meshes that way).
torchtitan's names map onto par3drun's dimensions: dp = the flattening of
(dp_replicate, dp_shard); with EP and etp = 1 the sparse mesh
(pp, dp_replicate, efsdp, ep), efsdp = dp_shard*cp*tp/ep, gives ep and
edp = flatten(dp_replicate, efsdp); with etp = tp the layout
(pp, dp_replicate, dp_shard_mod_ep, dp_shard_in_ep, cp, tp) gives
ep = flatten(dp_shard_in_ep, cp), edp = flatten(dp_replicate,
dp_shard_mod_ep), etp = tp.

For each mesh: par3drun --dry-run --format json --policy devicemesh with
the order string the mesh implies must exit 0, its ranks' coordinates and
its groups must equal the model's, and the init_device_mesh calls its note
prints must, through the same model, form the report's groups. Exit 1 on
the first difference of each mesh (all meshes run), 0 when all agree."""
import itertools
import json
import re
import subprocess
import sys


class Mesh:
    def __init__(self, sizes, names):
        assert len(sizes) == len(names) and len(set(names)) == len(names), (sizes, names)
        assert all(isinstance(s, int) and s >= 1 for s in sizes), sizes
        self.sizes, self.names = list(sizes), list(names)
        self.world = 1
        for s in sizes:
            self.world *= s

    def index(self, rank):
        """The coordinate tuple of a rank (row-major, last fastest)."""
        idx = []
        for s in reversed(self.sizes):
            idx.append(rank % s)
            rank //= s
        return tuple(reversed(idx))

    def rank(self, idx):
        r = 0
        for i, s in zip(idx, self.sizes):
            r = r * s + i
        return r

    def coord(self, rank, name):
        return self.index(rank)[self.names.index(name)]

    def flat_groups(self, dims):
        """Groups of mesh[dims]._flatten(): dims in mesh order."""
        pos = [self.names.index(d) for d in dims]
        assert pos == sorted(pos), "flatten takes dimensions in mesh order: %s" % dims
        groups = {}
        for r in range(self.world):
            idx = self.index(r)
            key = tuple(v for k, v in enumerate(idx) if k not in pos)
            groups.setdefault(key, []).append(r)  # ascending r = row-major over dims
        return sorted(groups.values())

    def flat_coord(self, rank, dims):
        idx, c = self.index(rank), 0
        for d in dims:
            k = self.names.index(d)
            c = c * self.sizes[k] + idx[k]
        return c

    def groups(self, name):
        return self.flat_groups([name])


def expected(case):
    """The model's groups and coordinates for par3drun's dimension names."""
    dense = Mesh([s for _, s in case["mesh"]], [n for n, _ in case["mesh"]])
    names = dense.names
    dp_dims = [n for n in names if n in ("dp", "dp_replicate", "dp_shard")]
    want_groups, coord = {}, {}
    for par, dims in (("tp", ["tp"]), ("cp", ["cp"]), ("pp", ["pp"]), ("dp", dp_dims)):
        dims = [d for d in dims if d in names]
        if not dims:
            continue
        want_groups[par] = dense.flat_groups(dims)
        coord[par] = [dense.flat_coord(r, dims) for r in range(dense.world)]
    ep = case.get("ep", 1)
    if ep > 1:
        size = dict(case["mesh"])
        pp, rep = size.get("pp", 1), size.get("dp_replicate", 1)
        shard, cp, tp = size.get("dp_shard", size.get("dp", 1)), size.get("cp", 1), size.get("tp", 1)
        if case["etp"] == 1:
            efsdp = shard * cp * tp // ep
            sparse = Mesh([pp, rep, efsdp, ep], ["pp", "dp_replicate", "efsdp", "ep"])
            exp = {"ep": ["ep"], "edp": ["dp_replicate", "efsdp"]}
            want_groups["etp"] = [[r] for r in range(sparse.world)]
            coord["etp"] = [0] * sparse.world
        else:
            sparse = Mesh([pp, rep, shard * cp // ep, ep // cp, cp, tp],
                          ["pp", "dp_replicate", "dp_shard_mod_ep", "dp_shard_in_ep", "cp", "tp"])
            exp = {"ep": ["dp_shard_in_ep", "cp"], "edp": ["dp_replicate", "dp_shard_mod_ep"], "etp": ["tp"]}
        for par, dims in exp.items():
            want_groups[par] = sparse.flat_groups(dims)
            coord[par] = [sparse.flat_coord(r, dims) for r in range(sparse.world)]
    return dense.world, want_groups, coord


def par3drun_args(case):
    size = dict(case["mesh"])
    dp = size.get("dp", size.get("dp_replicate", 1) * size.get("dp_shard", 1))
    order, seen = [], set()
    for n, _ in reversed(case["mesh"]):
        d = "dp" if n.startswith("dp") else n
        if d not in seen:
            seen.add(d)
            order.append(d)
    if case.get("ep", 1) > 1:
        order.insert(order.index("dp"), "ep")
    args = ["--tp", str(size.get("tp", 1)), "--cp", str(size.get("cp", 1)), "--pp", str(size.get("pp", 1)),
            "--dp", str(dp), "--order", "-".join(order)]
    if case.get("ep", 1) > 1:
        args += ["--ep", str(case["ep"]), "--etp", str(case["etp"])]
    return args


def note_groups(rep):
    """Groups of every dimension the note's init_device_mesh calls name."""
    out = {}
    for c in rep["checks"]:
        if c["code"] != "POLICY_NOTE" or "init_device_mesh" not in c["message"]:
            continue
        for shape_s, names_s in re.findall(
                r'init_device_mesh\("cuda", \(([0-9, ]+?),?\), mesh_dim_names=\(([^)]*?),?\)\)', c["message"]):
            shape = [int(x) for x in shape_s.split(",") if x.strip()]
            names = [x.strip().strip('"') for x in names_s.split(",") if x.strip()]
            m = Mesh(shape, names)
            for n in names:
                out[n] = m.groups(n)
    return out


def check(par3drun, cluster, case):
    world, want, coord = expected(case)
    args = par3drun_args(case)
    p = subprocess.run([par3drun, "--dry-run", "--format", "json", "--policy", "devicemesh",
                        "--cluster", cluster] + args, capture_output=True, text=True)
    label = "%s%s" % (case["mesh"], " ep=%d etp=%d" % (case["ep"], case["etp"]) if case.get("ep", 1) > 1 else "")
    if p.returncode != 0:
        return "%s: par3drun %s exited %d: %s" % (label, " ".join(args), p.returncode, p.stderr.strip()[:300])
    rep = json.loads(p.stdout)
    if rep["world_size"] != world:
        return "%s: world %d, the model %d" % (label, rep["world_size"], world)
    ranks = sorted(rep["ranks"], key=lambda r: r["rank"])
    for dim, want_c in coord.items():
        got = [r.get(dim, 0) for r in ranks]
        if got != want_c:
            bad = next(i for i in range(world) if got[i] != want_c[i])
            return "%s: rank %d has %s=%d, the model %d" % (label, bad, dim, got[bad], want_c[bad])
    for dim, g in want.items():
        got = rep["groups"].get(dim)
        if got is None and all(len(x) == 1 for x in g):
            continue  # a dimension of size 1: par3drun may leave it out
        if sorted(got or []) != g:
            return "%s: %s groups %s..., the model %s..." % (label, dim, sorted(got or [])[:3], g[:3])
    printed = note_groups(rep)
    if not printed:
        return "%s: no init_device_mesh call in the policy's notes" % label
    for dim, g in printed.items():
        if dim in rep["groups"] and sorted(rep["groups"][dim]) != g:
            return "%s: the printed init_device_mesh gives %s groups %s..., the report %s..." % (
                label, dim, g[:3], sorted(rep["groups"][dim])[:3])
        if dim not in rep["groups"]:
            return "%s: the printed mesh names %s, which the report has no groups for" % (label, dim)
    return None


def m(*pairs):
    return {"mesh": list(pairs)}


def ep(case, ep_, etp):
    case = dict(case)
    case["ep"], case["etp"] = ep_, etp
    return case


CASES = [
    # 1 dimension
    m(("tp", 8)), m(("cp", 8)), m(("dp", 16)), m(("pp", 4)), m(("dp_shard", 32)),
    # 2 dimensions, any order init_device_mesh accepts
    m(("cp", 4), ("tp", 8)), m(("tp", 8), ("cp", 4)), m(("dp", 4), ("tp", 8)), m(("tp", 2), ("dp", 8)),
    m(("pp", 4), ("tp", 8)), m(("tp", 4), ("pp", 4)), m(("dp_replicate", 2), ("dp_shard", 8)),
    m(("pp", 2), ("cp", 8)),
    # 3 dimensions
    m(("pp", 2), ("cp", 4), ("tp", 8)), m(("pp", 2), ("dp", 4), ("tp", 8)), m(("dp", 4), ("pp", 2), ("tp", 8)),
    m(("tp", 2), ("pp", 4), ("dp", 4)), m(("cp", 2), ("tp", 4), ("dp", 2)), m(("dp", 3), ("cp", 2), ("tp", 4)),
    m(("pp", 3), ("dp", 2), ("tp", 2)), m(("dp_replicate", 2), ("dp_shard", 4), ("tp", 4)),
    m(("pp", 2), ("dp_replicate", 2), ("dp_shard", 4)),
    # 4 dimensions
    m(("dp", 4), ("pp", 2), ("cp", 2), ("tp", 8)), m(("pp", 2), ("dp", 2), ("cp", 2), ("tp", 4)),
    m(("cp", 2), ("pp", 2), ("tp", 2), ("dp", 4)), m(("tp", 2), ("cp", 2), ("dp", 2), ("pp", 4)),
    m(("pp", 2), ("dp_replicate", 2), ("dp_shard", 2), ("tp", 8)),
    m(("dp_replicate", 2), ("dp_shard", 2), ("cp", 2), ("tp", 4)),
    # 5 dimensions: torchtitan's dense mesh
    m(("pp", 2), ("dp_replicate", 2), ("dp_shard", 2), ("cp", 2), ("tp", 4)),
    m(("pp", 4), ("dp_replicate", 2), ("dp_shard", 2), ("cp", 2), ("tp", 2)),
    m(("pp", 1), ("dp_replicate", 1), ("dp_shard", 8), ("cp", 2), ("tp", 8)),
    # EP: the sparse mesh (pp, dp_replicate, efsdp, ep) of etp = 1 ...
    ep(m(("dp_shard", 8), ("tp", 2)), 4, 1),
    ep(m(("pp", 2), ("dp_shard", 4), ("tp", 2)), 8, 1),
    ep(m(("pp", 2), ("dp_replicate", 2), ("dp_shard", 4), ("tp", 2)), 4, 1),
    ep(m(("pp", 2), ("dp_replicate", 2), ("dp_shard", 2), ("cp", 2), ("tp", 2)), 8, 1),
    # ... and ep borrowed from dp_shard and cp with etp = tp
    ep(m(("dp_shard", 8), ("tp", 2)), 4, 2),
    ep(m(("pp", 2), ("dp_shard", 4), ("cp", 2), ("tp", 2)), 4, 2),
    ep(m(("pp", 2), ("dp_replicate", 2), ("dp_shard", 4), ("tp", 4)), 2, 4),
]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    par3drun, cluster = sys.argv[1], sys.argv[2]
    # the model itself, on DeviceMesh's documented 2-D example: mesh
    # (2, 4) ("dp", "tp") has tp groups [0..3], [4..7] and dp groups [0, 4]...
    t = Mesh([2, 4], ["dp", "tp"])
    assert t.groups("tp") == [[0, 1, 2, 3], [4, 5, 6, 7]] and t.groups("dp")[0] == [0, 4]
    assert Mesh([2, 2, 2], ["a", "b", "c"]).flat_groups(["a", "c"]) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    fails, dims = 0, set()
    for case in CASES:
        dims.add(len(case["mesh"]))
        err = check(par3drun, cluster, case)
        if err:
            print("FAIL " + err)
            fails += 1
    print("devicemesh: %d of %d meshes (%s dimensions) agree with the DeviceMesh model" % (
        len(CASES) - fails, len(CASES), "-".join(str(d) for d in sorted(dims))))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
