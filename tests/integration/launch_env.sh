#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every environment variable of every rank matches the placement JSON:
# 16 ranks (tp 2, pp 2, dp 4) on 2 emulated DGX H100 nodes; each rank checks
# itself (tests/tools/envcheck.py) and dumps its environment, which is then
# checked again here against the JSON kept in --run-dir.
. "$(dirname "$0")/lib/launch_common.sh"
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
mkdir -p "$T/dump"
"$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --run-dir "$T/run" --job-id envtest \
  --env EXTRA_ONE=1 -- python3 "$P3D_SRC/tests/tools/envcheck.py" --dump "$T/dump" >"$T/out" 2>&1 \
  || { cat "$T/out"; fail "par3drun exited $?"; }
[ "$(grep -c 'ok: node' "$T/out")" = 16 ] || { cat "$T/out"; fail "not 16 ranks ok"; }
python3 - "$T/run/placement.json" "$T/dump" <<'PY'
import json, sys, os
pl = json.load(open(sys.argv[1]))
d = sys.argv[2]
assert pl["world_size"] == 16, pl["world_size"]
nodes = sorted({r["node"] for r in pl["ranks"]})
assert len(nodes) == 2, nodes
ports = set()
for r in pl["ranks"]:
    env = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(d, f"rank-{r['rank']}.env")) if "=" in l)
    def eq(k, v):
        assert env.get(k) == str(v), f"rank {r['rank']}: {k}={env.get(k)!r}, want {v!r}"
    eq("RANK", r["rank"]); eq("WORLD_SIZE", 16); eq("LOCAL_RANK", r["local_rank"]); eq("LOCAL_WORLD_SIZE", 8)
    eq("P3D_NODE", r["node"]); eq("HOSTNAME", r["node"]); eq("P3D_GPU", r["gpu"])
    eq("P3D_TP_RANK", r["tp"]); eq("P3D_PP_RANK", r["pp"]); eq("P3D_DP_RANK", r["dp"])
    eq("TORCHELASTIC_RUN_ID", "envtest"); eq("P3D_JOB_ID", "envtest"); eq("P3D_RESTART_COUNT", 0); eq("P3D_GENERATION", 0)
    eq("MASTER_ADDR", "127.0.0.1"); eq("CUDA_DEVICE_ORDER", "PCI_BUS_ID"); eq("EXTRA_ONE", 1)
    eq("P3D_PLACEMENT", sys.argv[1])
    # torchrun's agent sets these too, with this meaning (issue 27)
    eq("GROUP_WORLD_SIZE", 2); eq("ROLE_NAME", "default"); eq("TORCHELASTIC_USE_AGENT_STORE", "True")
    eq("TORCH_NCCL_ASYNC_ERROR_HANDLING", 1)
    # no allocation here: the placement's index is the node's own
    eq("P3D_GPU_PHYS", r["gpu"])
    cvd = env["CUDA_VISIBLE_DEVICES"].split(",")
    assert cvd[r["local_rank"]] == str(r["gpu"]), (r, cvd)
    for dim in ("tp", "pp", "dp"):
        g = [x for x in pl["groups"][dim] if r["rank"] in x][0]
        eq(f"P3D_{dim.upper()}_GROUP", ",".join(map(str, sorted(g))))
    ports.add(env["MASTER_PORT"])
assert len(ports) == 1, ports
print("env of 16 ranks matches", sys.argv[1])
PY
# rank 0's node is the first node, NODE_RANK follows it
grep -q '^NODE_RANK=0$' "$T/dump/rank-0.env" || fail "rank 0 not on node rank 0"
echo "ok"
