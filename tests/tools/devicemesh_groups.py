#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""devicemesh_groups.py REPORT.json - checks that the init_device_mesh calls
the devicemesh policy names in its note form exactly the groups of the
dry-run JSON (every dimension each call names, dims of size 1 left out).

PyTorch's init_device_mesh(shape, mesh_dim_names) lays ranks out row-major
(the last dimension varies fastest); a dimension's groups are the ranks that
share every other coordinate. Exit 1 with the first difference, else 0."""
import itertools, json, re, sys

rep = json.load(open(sys.argv[1]))
note = next(c["message"] for c in rep["checks"]
            if c["code"] == "POLICY_NOTE" and "init_device_mesh" in c["message"])
calls = re.findall(r'init_device_mesh\("cuda", \(([0-9, ]+?),?\), mesh_dim_names=\(([^)]*?),?\)\)', note)
if not calls:
    sys.exit("no init_device_mesh call in: " + note)
seen = 0
for shape_s, names_s in calls:
    shape = [int(x) for x in shape_s.split(",") if x.strip()]
    names = [x.strip().strip('"') for x in names_s.split(",") if x.strip()]
    assert len(shape) == len(names), (shape, names)
    world = 1
    for s in shape:
        world *= s
    for k, name in enumerate(names):
        if name not in rep["groups"]:
            continue
        groups = {}
        for idx in itertools.product(*[range(s) for s in shape]):
            r = 0
            for i, s in zip(idx, shape):
                r = r * s + i
            key = idx[:k] + idx[k + 1:]
            groups.setdefault(key, []).append(r)
        mine = sorted(sorted(g) for g in groups.values())
        theirs = sorted(sorted(g) for g in rep["groups"][name])
        if mine != theirs:
            sys.exit("%s: the note's mesh gives %s..., the report %s..." % (name, mine[:3], theirs[:3]))
        seen += 1
if not seen:
    sys.exit("no dimension compared")
print("ok %d dimension(s) of %d call(s)" % (seen, len(calls)))
