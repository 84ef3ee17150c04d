#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# P3D_GPU and P3D_GPU_PHYS (docs/launch.md, "The ranks' environment"):
# inside an allocation that hides GPUs 0-3 of a DGX H100, P3D_GPU counts the
# allocated GPUs (0-3) and P3D_GPU_PHYS is the node's own index (4-7, the
# `par3drun topo` index outside the allocation), the one P3D_GPU_PCI is the
# address of. Checked on one node, --emulate 2 nodes, and 3 separate agents
# over the static TCP rendezvous (2 + a spare) before and after a node is
# replaced (the node record that travels then carries the physical index and
# the CUDA_VISIBLE_DEVICES entry); without an allocation both are equal; a
# CPU slot has P3D_GPU_PHYS=-1.
. "$(dirname "$0")/lib/launch_common.sh"
unset SLURM_JOB_ID SLURM_JOB_NODELIST SLURM_STEP_GPUS SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES
H100=$P3D_SRC/examples/topologies/dgx-h100.xml
# the whole node's PCI addresses by `par3drun topo` index
"$PAR3DRUN" topo --topology "$H100" --format json |
  python3 -c 'import json,sys; [print(g["pci"]) for g in json.load(sys.stdin)["gpus"]]' >"$T/pci"
[ "$(wc -l <"$T/pci")" = 8 ] || fail "topo: not 8 GPUs"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
echo "gen=$P3D_RESTART_COUNT rank=$RANK node=$P3D_NODE gpu=$P3D_GPU phys=$P3D_GPU_PHYS pci=$P3D_GPU_PCI cvd=$CUDA_VISIBLE_DEVICES" >>"$T_DIR/ranks"
[ -n "$HOLD" ] && [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 100
exit 0
SH
chmod +x "$T/w.sh"

# checks $T_DIR/ranks: $1 lines of generation $2, P3D_GPU_PHYS = P3D_GPU + $3,
# P3D_GPU_PCI that of the physical index, CUDA_VISIBLE_DEVICES a
# permutation of $4
check() { # nlines gen offset cvd-set what
  python3 - "$T_DIR/ranks" "$T/pci" "$@" <<'PY' || fail "$5: $(cat "$T_DIR/ranks")"
import sys
ranks, pcif, n, gen, off, cvd, what = sys.argv[1:]
pci = open(pcif).read().split()
rows = [dict(f.split("=", 1) for f in l.split()) for l in open(ranks)]
rows = [r for r in rows if r["gen"] == gen]
assert len(rows) == int(n), "%s: %d ranks in generation %s, want %s" % (what, len(rows), gen, n)
for r in rows:
    g, p = int(r["gpu"]), int(r["phys"])
    assert p == g + int(off), "%s: rank %s: P3D_GPU=%d P3D_GPU_PHYS=%d, want %d" % (what, r["rank"], g, p, g + int(off))
    assert r["pci"] == pci[p], "%s: rank %s: P3D_GPU_PCI %s is not physical GPU %d's (%s)" % (what, r["rank"], r["pci"], p, pci[p])
    got = sorted(r.get("cvd", "").split(","))
    assert got == sorted(cvd.split(",")), "%s: rank %s: CUDA_VISIBLE_DEVICES=%s" % (what, r["rank"], r.get("cvd"))
PY
}
fresh() { T_DIR=$T/$1; rm -rf "$T_DIR"; mkdir -p "$T_DIR"; export T_DIR; }

# ---- 1. one node: a step given GPUs 4-7, renumbered 0-3 ----------------------
fresh one
SLURM_STEP_GPUS=4,5,6,7 CUDA_VISIBLE_DEVICES=0,1,2,3 "$PAR3DRUN" --topology "$H100" --tp 2 --pp 2 -- "$T/w.sh" \
  >"$T_DIR/out" 2>&1 || { cat "$T_DIR/out"; fail "one node: exit $?"; }
check 4 0 4 0,1,2,3 "one node"
# no allocation: the two are the same
fresh none
"$PAR3DRUN" --topology "$H100" --tp 4 -- "$T/w.sh" >"$T_DIR/out" 2>&1 || { cat "$T_DIR/out"; fail "none: exit $?"; }
check 8 0 0 0,1,2,3,4,5,6,7 "no allocation"

# ---- 2. --emulate, 2 nodes ----------------------------------------------------
fresh emu
SLURM_STEP_GPUS=4,5,6,7 CUDA_VISIBLE_DEVICES=0,1,2,3 "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 2 \
  -- "$T/w.sh" >"$T_DIR/out" 2>&1 || { cat "$T_DIR/out"; fail "emulate: exit $?"; }
check 8 0 4 0,1,2,3 "emulated 2 nodes"
[ "$(grep -c 'node=dgx-h100-02' "$T_DIR/ranks")" = 4 ] || fail "emulate: not 4 ranks on the second node"

# ---- 3. separate agents, physical entries, a node replaced -------------------
fresh tcp
head -c 24 /dev/urandom | base64 >"$T/token"
chmod 600 "$T/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 0 1 2; do
  SLURM_STEP_GPUS=4,5,6,7 CUDA_VISIBLE_DEVICES=4,5,6,7 HOLD=1 "$PAR3DRUN" --nnodes 3 --node-rank $i \
    --rdzv "static:127.0.0.1:$port" --rdzv-token-file "$T/token" --topology "$H100" --nproc-per-node 4 --tp 2 --pp 2 \
    --spares 1 --max-restarts 1 --grace 2 --run-dir "$T_DIR/rd$i" -- "$T/w.sh" >"$T_DIR/out$i" 2>&1 &
  eval "N$i=\$!"
done
for _ in $(seq 600); do [ "$(grep -c '^gen=0' "$T_DIR/ranks" 2>/dev/null)" -ge 8 ] && break; sleep 0.05; done
check 8 0 4 4,5,6,7 "separate agents"
# node rank 1 runs ranks, node rank 2 is the spare: node rank 1 is lost
kill -9 "$N1"
wait "$N0" || { cat "$T_DIR/out0"; fail "tcp: the leader failed after a node loss with a spare"; }
wait "$N2" || { cat "$T_DIR/out2"; fail "tcp: the spare failed"; }
wait "$N1" 2>/dev/null || true
grep -q 'moved to spare' "$T_DIR/out0" || { cat "$T_DIR/out0"; fail "tcp: no replacement"; }
check 8 1 4 4,5,6,7 "separate agents, after the replacement"

# ---- 4. a CPU slot has no physical GPU ----------------------------------------
fresh cpu
"$PAR3DRUN" --topology "$P3D_SRC/examples/topologies/cpu-only.xml" --nproc-per-node 2 -- "$T/w.sh" >"$T_DIR/out" 2>&1 ||
  { cat "$T_DIR/out"; fail "cpu: exit $?"; }
[ "$(grep -c 'phys=-1 ' "$T_DIR/ranks")" = 2 ] || fail "cpu: P3D_GPU_PHYS of a CPU slot: $(cat "$T_DIR/ranks")"
echo "ok"
