#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# slurm_partial_gpus.sh — examples/slurm/partial-node-gpus.sbatch under a
# real Slurm (tests/services/slurm.sh: four fake 8-GPU nodes): sbatch with
# --gpus-per-node=4 on two nodes derives tp=4 dp=2 from the allocation and
# runs 8 ranks, each on its node's 4 allocated GPUs; with P3D_TP=8 the job
# is refused (exit 2) before any rank starts, by a message that names the
# allocation; a heterogeneous job of an 8-GPU and a 4-GPU component runs one
# 12-rank job (examples/slurm/README.md). Skips (77) without slurm-wlm.
. "$(dirname "$0")/lib/multinode_lib.sh"
EX=$P3D_SRC/examples/slurm
slurm_up
pmix_leaks_suppressed
export PAR3DRUN P3D_TOPOLOGY=${TOPOS[0]} TMPDIR=$T
cd "$T" || exit 1
cat >"$T/worker.sh" <<'W'
#!/bin/sh
echo "rank=$RANK node=$NODE_RANK world=$WORLD_SIZE cvd=$CUDA_VISIBLE_DEVICES step=$SLURM_STEP_GPUS"
W
chmod +x "$T/worker.sh"


# ---- 1. the mesh from the allocation: 2 nodes x 4 GPUs -> tp=4 dp=2 ----------
# (--cpus-per-gpu on the command line: the fake nodes have 8 CPUs)
id=$(P3D_PROGRAM=$T/worker.sh sbatch --parsable --cpus-per-gpu=2 -o "$T/ok.out" "$EX/partial-node-gpus.sbatch")
r=$(wait_job "$id" 60)
[ "$r" = "COMPLETED 0:0" ] || { bad "partial-node-gpus sbatch: $r"; sed 's/^/  /' "$T/ok.out"; }
grep -q "job $id on .*: 2 node(s) x 4 GPUs (--gpus-per-node=4) -> tp=4 pp=1 dp=2" "$T/ok.out" ||
  { bad "no mesh line derived from the allocation"; head -5 "$T/ok.out"; }
[ "$(grep -o 'rank=[0-9]*' "$T/ok.out" | sort -u | wc -l)" = 8 ] || { bad "not 8 distinct ranks"; cat "$T/ok.out"; }
while read -r line; do
  cvd=${line#*cvd=}; cvd=${cvd%% *}
  step=${line##*step=}
  [ "$(echo "$cvd" | tr , '\n' | wc -l)" = 4 ] || bad "CUDA_VISIBLE_DEVICES=$cvd has not 4 entries ($line)"
  [ "$(echo "$step" | tr , '\n' | wc -l)" = 4 ] || bad "SLURM_STEP_GPUS=$step is not the 4 allocated GPUs"
done < <(grep 'rank=' "$T/ok.out")

# ---- 2. a tp that cannot fit one node's share: refused, naming the allocation ---
id=$(P3D_PROGRAM=$T/worker.sh P3D_TP=8 sbatch --parsable --cpus-per-gpu=2 -o "$T/no.out" "$EX/partial-node-gpus.sbatch")
r=$(wait_job "$id" 60)
[ "$r" = "FAILED 2:0" ] || { bad "P3D_TP=8: job ended $r, want FAILED 2:0"; sed 's/^/  /' "$T/no.out"; }
grep -q "P3D_TP=8 does not fit the allocation, job $id on .*: 2 node(s) x 4 GPUs (--gpus-per-node=4)" "$T/no.out" ||
  { bad "P3D_TP=8: the refusal does not name the allocation"; cat "$T/no.out"; }
grep -q 'rank=' "$T/no.out" && bad "P3D_TP=8: ranks started"

# ---- 3. a heterogeneous job (examples/slurm/README.md): components of 8 and 4 ----
# GPUs, one step over both: world 12, every node on its own component's GPUs;
# once with par3drun's Slurm rendezvous (plain srun), once over PMIx.
#
# srun_pmix_stuck OUT: true when the job's step has ended and only srun
# is left, stuck in Slurm 22.05's mpi/pmix plugin: every rank ran, the
# leader said "ended: exit 0", no par3drun or step slurmstepd of the job is
# left, and srun's threads wait in pmixp_abort_agent_stop (its abort agent's
# thread is joined after it is gone; seen 1 run in 3 under load, never with
# plain srun). Needs gdb to name the frame; without it the hang is a FAIL.
srun_pmix_stuck() {
  local out=$1 p d
  grep -q 'par3drun: job .* ended: exit 0' "$out" || return 1
  [ "$(grep -o 'rank=[0-9]* node=[0-9]* world=12 ' "$out" | sort -u | wc -l)" = 12 ] || return 1
  pgrep -f 'slurmstepd: \[[0-9]+\.0\]' >/dev/null && return 1 # a component's step
  for d in /proc/[0-9]*; do # this test's par3drun (other tests may run theirs)
    grep -qs "P3D_TEST_MARK=$MARK" "$d/environ" || continue
    case $(cat "$d/comm" 2>/dev/null) in par3drun | p3d-agent) return 1 ;; esac
  done
  command -v gdb >/dev/null || { echo "  (gdb not installed: cannot tell where srun waits)"; return 1; }
  for p in $(pgrep -x srun); do
    gdb -p "$p" -batch -ex 'thread apply all bt' 2>/dev/null | grep -q pmixp_abort_agent_stop && return 0
  done
  return 1
}
het_case() {
  local name=$1 mpi=$2 id t0 r
  cat >"$T/$name.sbatch" <<J
#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=8 --exclusive
#SBATCH hetjob
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=4 --exclusive
srun --het-group=0,1 $mpi "$PAR3DRUN" --topology "$P3D_TOPOLOGY" --tp 4 -- "$T/worker.sh"
J
  id=$(sbatch --parsable -o "$T/$name.out" "$T/$name.sbatch")
  t0=$(date +%s)
  # Slurm 22.05 ends a het job about 30 s after its step (slurmctld's
  # periodic pass), however fast the step was
  r=$(wait_job "$id" 120 | sort -u) # one record per component
  echo "$name job: $r after $(($(date +%s) - t0)) s"
  if [ "$r" != "COMPLETED 0:0" ]; then
    if [ -n "$mpi" ] && srun_pmix_stuck "$T/$name.out"; then
      echo "  $name: the step ended (12 ranks, exit 0) but srun hangs in Slurm's mpi/pmix abort agent" \
           "(pmixp_abort_agent_stop; a Slurm 22.05 bug, examples/slurm/README.md): job cancelled"
      scancel "$id"
    else
      bad "$name job: $r"; sed 's/^/  /' "$T/$name.out"
      # what still runs: the job's records and every process of the job
      scontrol show job "$id" | sed 's/^/  scontrol: /'
      ps -eo pid,ppid,etimes,stat,args | grep -E '[p]ar3drun|[s]lurmstepd|[s]run|[w]orker.sh' | cut -c1-220 |
        sed 's/^/  ps: /'
    fi
  fi
  [ "$(grep -o 'rank=[0-9]* node=[0-9]* world=12 ' "$T/$name.out" | sort -u | wc -l)" = 12 ] ||
    { bad "$name job: not 12 distinct ranks of world 12"; cat "$T/$name.out"; }
  n8=$(grep -c 'cvd=0,1,2,3,4,5,6,7 ' "$T/$name.out"); n4=$(grep -c 'cvd=0,1,2,3 ' "$T/$name.out")
  [ "$n8" = 8 ] && [ "$n4" = 4 ] ||
    bad "$name job: $n8 ranks on the 8-GPU component, $n4 on the 4-GPU one (want 8 and 4)"
}
het_case het ""
het_case het-pmix --mpi=pmix

[ "$fail" = 0 ] && echo "PASS slurm_partial_gpus"
exit "$fail"
