#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_slurm.sh — par3drun under a real Slurm (tests/services/slurm.sh:
# slurmctld + four slurmd fake nodes n[1-4] on this host, fake GPU GRES):
# sbatch of the example job scripts in examples/slurm/, `srun --mpi=pmix`
# (pmix plugin) and plain `srun` (slurm-environment backend) with one
# placement JSON byte for byte on every node, and a rank crash on node 2
# ending all four agents with one exit code. Skips (77) without slurm-wlm.
. "$(dirname "$0")/lib/multinode_lib.sh"
EX=$P3D_SRC/examples/slurm
slurm_up
pmix_leaks_suppressed
# the fake nodes share this host's hardware: one fixture topology for all;
# TMPDIR (newtmp) keeps each node's run dir (par3drun-<job>.<node rank>)
# in $T; P3D_KEEP_RUN_DIR=1 (through sbatch and srun) keeps them after a
# clean end for the checks below
export PAR3DRUN P3D_TOPOLOGY=${TOPOS[0]} P3D_KEEP_RUN_DIR=1
cd "$T" || exit 1
cat >"$T/worker.sh" <<'W'
#!/bin/sh
echo "rank=$RANK node=$NODE_RANK world=$WORLD_SIZE"
W
chmod +x "$T/worker.sh"

# same_placement DIR N WHAT: DIR (the step's TMPDIR) holds one run dir
# par3drun-<job>.<node rank> per node, and their placement.json are the
# same bytes
same_placement() {
  local d=$1 n=$2 s0 i f
  f=$(ls "$d"/par3drun-*.0/placement.json 2>/dev/null | head -1)
  [ -n "$f" ] || { bad "$3: no placement.json for node 0 in $d"; return; }
  s0=$(md5sum <"$f")
  for i in $(seq 1 $((n - 1))); do
    [ "$(cat "$d"/par3drun-*."$i"/placement.json 2>/dev/null | md5sum)" = "$s0" ] ||
      bad "$3: placement.json of node $i differs from node 0's (or is missing)"
  done
}
# fresh TMPDIR for each step: only its run dirs in it
newtmp() { export TMPDIR=$T/tmp.$1; mkdir -p "$TMPDIR"; }

# ---- 1. sbatch examples/slurm/dry-run-in-allocation.sbatch ------------------
printf '{"nodes":[{"name":"n[1-4]","topology":"%s","rack":"r1"}]}\n' "${TOPOS[0]}" >"$T/cluster.json"
printf 'SwitchName=s1 Nodes=n[1-2]\nSwitchName=s2 Nodes=n[3-4]\nSwitchName=top Switches=s[1-2]\n' >"$T/topology.conf"
id=$(CLUSTER=$T/cluster.json TOPO_CONF=$T/topology.conf sbatch --parsable -o "$T/dry.out" "$EX/dry-run-in-allocation.sbatch")
r=$(wait_job "$id" 30)
[ "$r" = "COMPLETED 0:0" ] || { bad "dry-run sbatch: $r"; sed 's/^/  /' "$T/dry.out"; }
grep -q 'world 32 on 32 GPUs of 4 nodes, 2 racks' "$T/dry.out" || { bad "dry-run: no 4-node/2-rack mesh line"; head -5 "$T/dry.out"; }

# ---- 1b. the same with no site file: this node's topology for every node, racks
# from `scontrol show topology` (the test Slurm runs topology/tree)
id=$(CLUSTER=/nonexistent TOPO_CONF=/nonexistent P3D_TOPOLOGY=${TOPOS[0]} \
  sbatch --parsable -o "$T/dry0.out" "$EX/dry-run-in-allocation.sbatch")
r=$(wait_job "$id" 30)
[ "$r" = "COMPLETED 0:0" ] || { bad "dry-run sbatch without a site file: $r"; sed 's/^/  /' "$T/dry0.out"; }
grep -q 'world 32 on 32 GPUs of 4 nodes, 2 racks' "$T/dry0.out" ||
  { bad "dry-run without a site file: no 4-node/2-rack mesh line"; head -5 "$T/dry0.out"; }

# ---- 2. sbatch examples/slurm/four-nodes-pmix.sbatch -----------------------------
newtmp pmix4
id=$(TOPO_CONF=$T/topology.conf P3D_PROGRAM=$T/worker.sh P3D_ARGS="--tp 8 --pp 4 --grace 1" \
  sbatch --parsable -o "$T/pmix4.out" "$EX/four-nodes-pmix.sbatch")
r=$(wait_job "$id" 60)
[ "$r" = "COMPLETED 0:0" ] || { bad "four-nodes-pmix sbatch: $r"; sed 's/^/  /' "$T/pmix4.out"; }
[ "$(grep -o 'rank=[0-9]*' "$T/pmix4.out" | sort -u | wc -l)" = 32 ] || bad "four-nodes-pmix: not 32 distinct ranks"
same_placement "$TMPDIR" 4 "four-nodes-pmix sbatch"

# ---- 2b. sbatch examples/slurm/single-node.sbatch: no rendezvous, 8 ranks ---------
newtmp one
id=$(P3D_PROGRAM=$T/worker.sh sbatch --parsable -o "$T/one.out" "$EX/single-node.sbatch")
r=$(wait_job "$id" 60)
[ "$r" = "COMPLETED 0:0" ] || { bad "single-node sbatch: $r"; sed 's/^/  /' "$T/one.out"; }
[ "$(grep -o 'rank=[0-9]* node=0 world=8' "$T/one.out" | sort -u | wc -l)" = 8 ] ||
  { bad "single-node: not 8 ranks on node 0 of world 8"; head -5 "$T/one.out"; }

# ---- 3. srun --mpi=pmix and plain srun: same placement on every node ---------------
for mode in pmix plain; do
  mpi=(); [ $mode = pmix ] && mpi=(--mpi=pmix)
  newtmp "$mode"
  timeout 60 srun -N4 --ntasks-per-node=1 "${mpi[@]}" -J "p3d-$mode" "$PAR3DRUN" --topology "$P3D_TOPOLOGY" \
    --tp 8 --verbose -- "$T/worker.sh" >"$T/$mode.out" 2>"$T/$mode.err"; rc=$?
  [ "$rc" = 0 ] || { bad "srun $mode: exit $rc"; tail -5 "$T/$mode.err" | sed 's/^/  /'; }
  [ "$(grep -o 'rank=[0-9]*' "$T/$mode.out" | sort -u | wc -l)" = 32 ] || bad "srun $mode: not 32 distinct ranks"
  grep -q "rendezvous ($([ $mode = pmix ] && echo pmix || echo slurm))" "$T/$mode.err" ||
    bad "srun $mode: not the $mode backend: $(grep rendezvous "$T/$mode.err" | head -1)"
  same_placement "$TMPDIR" 4 "srun $mode"
  # one job id whatever the launch mode: SLURM_JOB_ID (not PMIx's
  # slurm.pmix.JOB.STEP), in the run dirs' names and the leader's verdict
  d0=$(ls -d "$TMPDIR"/par3drun-*.0 2>/dev/null | head -1)
  jid=${d0##*/par3drun-}; jid=${jid%.0}
  [[ "$jid" =~ ^[0-9]+$ ]] || bad "srun $mode: the job id is '$jid', want SLURM_JOB_ID (a number)"
  grep -q "\"job_id\": \"$jid\", \"exit_code\": 0" "$d0/result.json" 2>/dev/null ||
    bad "srun $mode: $d0/result.json: $(cat "$d0/result.json" 2>&1)"
done

# ---- 4. a rank crash on node 2 ends all four, one exit code ---------------------------
newtmp crash
t0=$(now_ms)
timeout 60 srun -N4 --ntasks-per-node=1 -J p3d-crash "$PAR3DRUN" --topology "$P3D_TOPOLOGY" --tp 8 --grace 1 -- \
  sh -c 'if [ "$RANK" = 17 ]; then sleep 0.5; echo "rank 17 fails on purpose" >&2; exit 3; fi; exec sleep 60' \
  >"$T/crash.out" 2>"$T/crash.err"; rc=$?
t1=$(now_ms)
[ "$rc" = 3 ] || { bad "crash: srun exit $rc, want 3"; tail -5 "$T/crash.err" | sed 's/^/  /'; }
[ $((t1 - t0)) -lt 9000 ] || bad "crash: took $((t1 - t0)) ms (grace 1 s + 5 s + srun start)"
n=$(grep -c 'root cause: rank 17' "$T/crash.err")
[ "$n" = 1 ] || { bad "crash: root cause printed $n times"; sed 's/^/  /' "$T/crash.err"; }
# every task (agent) exited with 3: srun names any that did not
if grep -E 'task [0-3]: Exited with exit code [^3]' "$T/crash.err"; then bad "crash: an agent exited differently"; fi
echo "srun crash on node 2: all four ended in $((t1 - t0)) ms with exit $rc"

# ---- 5. --gpus-per-node=4 on 8-GPU nodes, few CPUs: the ranks get the step's ------
# GPUs only (CUDA_VISIBLE_DEVICES from Slurm's own list), and racks arrive
# from topology/tree's SLURM_TOPOLOGY_ADDR with no --slurm-topology
newtmp gpus
timeout 60 srun -N4 --ntasks-per-node=1 --gpus-per-node=4 --cpus-per-task=2 -J p3d-gpus "$PAR3DRUN" \
  --topology "$P3D_TOPOLOGY" --tp 4 --pp 2 -- \
  sh -c 'echo "rank=$RANK node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES step=$SLURM_STEP_GPUS"' \
  >"$T/gpus.out" 2>"$T/gpus.err"; rc=$?
[ "$rc" = 0 ] || { bad "gpus-per-node=4: exit $rc"; tail -5 "$T/gpus.err" | sed 's/^/  /'; }
[ "$(grep -o 'rank=[0-9]*' "$T/gpus.out" | sort -u | wc -l)" = 16 ] || bad "gpus-per-node=4: not 16 ranks (4 per node)"
# every rank's device list has the step's 4 GPUs, named as Slurm named them
while read -r line; do
  cvd=${line#*cvd=}; cvd=${cvd%% *}
  [ "$(echo "$cvd" | tr , '\n' | wc -l)" = 4 ] || bad "gpus-per-node=4: CUDA_VISIBLE_DEVICES=$cvd has not 4 entries"
done < <(grep 'rank=' "$T/gpus.out")
pj=$(ls "$TMPDIR"/par3drun-*.0/placement.json 2>/dev/null | head -1)
if [ -n "$pj" ]; then
  python3 - "$pj" <<'PY' || bad "gpus-per-node=4: placement is not on 4 GPUs per node in racks leaf1/leaf2"
import json, sys
d = json.load(open(sys.argv[1]))
per = {}
for r in d["ranks"]:
    per.setdefault(r["node"], set()).add(r["gpu"])
racks = sorted({r["rack"] for r in d["ranks"]})
pipes = {}
for r in d["ranks"]:
    pipes.setdefault((r["tp"], r["dp"]), set()).add(r["rack"])
ok = all(len(g) == 4 and max(g) < 4 for g in per.values()) and racks == ["leaf1", "leaf2"]
ok = ok and all(len(v) == 1 for v in pipes.values())
print("gpus per node %s, racks %s" % (sorted(len(g) for g in per.values()), racks))
sys.exit(0 if ok else 1)
PY
else
  bad "gpus-per-node=4: no placement.json"
fi
grep -q 'allocation: GPUs' "$pj" 2>/dev/null || grep -q 'SLURM_STEP_GPUS' "$pj" 2>/dev/null ||
  bad "gpus-per-node=4: the placement JSON does not say which GPUs the allocation excluded"

[ "$fail" = 0 ] && echo "PASS multinode_slurm"
exit "$fail"
