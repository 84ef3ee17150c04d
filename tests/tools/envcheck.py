#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""envcheck.py — a worker that checks its own par3drun environment.

Run under par3drun: reads the job's placement JSON ($P3D_PLACEMENT), finds
its own rank there and compares every variable of the contract in
docs/launch.md with it. Prints one line per rank; exits 1 naming each
mismatch. --dump DIR also writes the environment to DIR/rank-R.env (for the
tests), --fail-rank R --code C makes rank R exit with code C afterwards.
"""
import json
import os
import socket
import sys


def main():
    args = sys.argv[1:]
    dump = fail_rank = None
    code = 3
    while args:
        a = args.pop(0)
        if a == "--dump":
            dump = args.pop(0)
        elif a == "--fail-rank":
            fail_rank = int(args.pop(0))
        elif a == "--code":
            code = int(args.pop(0))
        else:
            print(f"envcheck: unknown argument {a}", file=sys.stderr)
            return 2
    env = os.environ
    bad = []

    def need(key):
        if key not in env:
            bad.append(f"{key} is not set")
            return None
        return env[key]

    path = need("P3D_PLACEMENT")
    rank = int(need("RANK") or -1)
    if dump is not None:
        with open(os.path.join(dump, f"rank-{rank}.env.tmp"), "w") as f:
            for k in sorted(env):
                f.write(f"{k}={env[k]}\n")
        os.rename(os.path.join(dump, f"rank-{rank}.env.tmp"), os.path.join(dump, f"rank-{rank}.env"))
    if path is None:
        print("\n".join(bad), file=sys.stderr)
        return 1
    with open(path) as f:
        pl = json.load(f)
    ranks = {r["rank"]: r for r in pl["ranks"]}
    me = ranks.get(rank)
    if me is None:
        print(f"envcheck: RANK={rank} is not in {path}", file=sys.stderr)
        return 1

    def expect(key, want):
        got = env.get(key)
        if got != str(want):
            bad.append(f"{key}={got!r}, placement says {want!r}")

    world = pl["world_size"]
    mine = sorted((r for r in pl["ranks"] if r["node"] == me["node"]), key=lambda r: r["local_rank"])
    nodes = []
    for r in sorted(pl["ranks"], key=lambda r: r["rank"]):
        if r["node"] not in nodes:
            nodes.append(r["node"])
    expect("WORLD_SIZE", world)
    expect("LOCAL_RANK", me["local_rank"])
    expect("LOCAL_WORLD_SIZE", len(mine))
    expect("GROUP_RANK", nodes.index(me["node"]))
    expect("NODE_RANK", nodes.index(me["node"]))
    expect("P3D_NODE", me["node"])
    expect("P3D_GPU", me["gpu"])
    if "numa" in me:
        expect("P3D_NUMA", me["numa"] if me["numa"] is not None else -1)
    if "nic" in me:
        expect("P3D_NIC", me["nic"] or "")
    expect("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    mesh = pl["mesh"]
    for dim in ("tp", "pp", "dp", "cp", "ep", "etp", "edp"):
        if dim not in mesh:
            continue
        up = dim.upper()
        expect(f"P3D_{up}_SIZE", mesh[dim])
        if dim in me:
            expect(f"P3D_{up}_RANK", me[dim])
        groups = pl.get("groups", {}).get(dim)
        if groups:
            g = [grp for grp in groups if rank in grp]
            if len(g) != 1:
                bad.append(f"rank {rank} is in {len(g)} {dim} groups of the placement")
            else:
                expect(f"P3D_{up}_GROUP", ",".join(str(x) for x in sorted(g[0])))
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd:
        devs = cvd.split(",")
        if len(devs) != len(mine) or devs[me["local_rank"]] != str(me["gpu"]):
            bad.append(f"CUDA_VISIBLE_DEVICES={cvd}: device LOCAL_RANK={me['local_rank']} is not GPU {me['gpu']}")
    for k in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "P3D_JOB_ID", "P3D_RESTART_COUNT",
              "TORCHELASTIC_RESTART_COUNT"):
        need(k)
    expect("GROUP_WORLD_SIZE", len(nodes))
    expect("ROLE_NAME", "default")
    # a Python program on one host: par3drun serves the store, and it is
    # open before any rank starts (docs/torchrun.md, "The agent store")
    expect("TORCHELASTIC_USE_AGENT_STORE", "True")
    try:
        socket.create_connection((env.get("MASTER_ADDR"), int(env.get("MASTER_PORT", "0"))), timeout=10).close()
    except (OSError, ValueError) as e:
        bad.append(f"the agent store at MASTER_ADDR:MASTER_PORT does not answer: {e}")
    # OMP_NUM_THREADS: the CPUs this rank is bound to, or (unbound) the
    # CPUs it may use shared out among its node's ranks
    aff = len(os.sched_getaffinity(0))
    if "P3D_TEST_OMP" in env:
        expect("OMP_NUM_THREADS", env["P3D_TEST_OMP"])
    elif env.get("OMP_NUM_THREADS") not in (str(aff), str(max(1, aff // len(mine)))):
        bad.append(f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS')!r}, bound to {aff} CPUs, {len(mine)} local ranks")
    if env.get("TORCHELASTIC_RUN_ID") != env.get("P3D_JOB_ID"):
        bad.append("TORCHELASTIC_RUN_ID differs from P3D_JOB_ID")
    if bad:
        for b in bad:
            print(f"envcheck: rank {rank}: {b}", file=sys.stderr)
        return 1
    print(f"envcheck: rank {rank} ok: node {me['node']} gpu {me['gpu']} local {me['local_rank']} "
          f"tp {me.get('tp')} pp {me.get('pp')} dp {me.get('dp')} "
          f"TP group {env.get('P3D_TP_GROUP')} restart {env.get('P3D_RESTART_COUNT')}")
    if fail_rank is not None and rank == fail_rank:
        print(f"envcheck: rank {rank} exits with code {code} as asked", file=sys.stderr)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
