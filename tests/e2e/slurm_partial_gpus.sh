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

# wait_job ID SECONDS: "STATE EXITCODE" once the job has left the queue
wait_job() {
  local id=$1 end=$(($(date +%s) + $2)) st
  while [ "$(date +%s)" -lt "$end" ]; do
    st=$(squeue -h -j "$id" -o %T 2>/dev/null)
    [ -z "$st" ] && break
    case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
    sleep 0.2
  done
  scontrol show job -o "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\) .*ExitCode=\([0-9:]*\).*/\1 \2/p'
}

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
# GPUs, one step over both: world 12, every node on its own component's GPUs
cat >"$T/het.sbatch" <<J
#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=8 --exclusive
#SBATCH hetjob
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=4 --exclusive
srun --het-group=0,1 --mpi=pmix "$PAR3DRUN" --topology "$P3D_TOPOLOGY" --tp 4 -- "$T/worker.sh"
J
id=$(sbatch --parsable -o "$T/het.out" "$T/het.sbatch")
r=$(wait_job "$id" 60 | sort -u) # one record per component
[ "$r" = "COMPLETED 0:0" ] || { bad "het job: $r"; sed 's/^/  /' "$T/het.out"; }
[ "$(grep -o 'rank=[0-9]* node=[0-9]* world=12 ' "$T/het.out" | sort -u | wc -l)" = 12 ] ||
  { bad "het job: not 12 distinct ranks of world 12"; cat "$T/het.out"; }
n8=$(grep -c 'cvd=0,1,2,3,4,5,6,7 ' "$T/het.out"); n4=$(grep -c 'cvd=0,1,2,3 ' "$T/het.out")
[ "$n8" = 8 ] && [ "$n4" = 4 ] || bad "het job: $n8 ranks on the 8-GPU component, $n4 on the 4-GPU one (want 8 and 4)"

[ "$fail" = 0 ] && echo "PASS slurm_partial_gpus"
exit "$fail"
