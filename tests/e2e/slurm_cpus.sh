#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# slurm_cpus.sh — par3drun inside a real Slurm step that confines CPUs
# (issue 14): tests/services/slurm.sh with TaskPlugin=task/affinity, one
# task on an 8-GPU fake node with --gpus-per-node=4 --cpus-per-task=1.
# Every rank runs on the step's GPUs only (4 ranks, each CUDA_VISIBLE_DEVICES
# entry one of Slurm's SLURM_STEP_GPUS) and inside the step's CPU set (its
# Cpus_allowed_list is the srun task's: par3drun never widens it; binding
# itself is skipped with a fixture topology, and the cut to the allowed set
# is tested with taskset in launch_alloc.sh). Skips (77) without slurm-wlm.
. "$(dirname "$0")/lib/multinode_lib.sh"
P3D_SLURM_TASK_PLUGIN=task/affinity slurm_up
cd "$T" || exit 1
export TMPDIR=$T

# what the step itself is given, without par3drun
timeout 60 srun -N1 -n1 --gpus-per-node=4 --cpus-per-task=1 -J p3d-cpus-ref \
  sh -c 'grep Cpus_allowed_list /proc/self/status; echo "step=$SLURM_STEP_GPUS"' >"$T/ref.out" 2>"$T/ref.err" ||
  { bad "reference step failed"; sed 's/^/  /' "$T/ref.err"; }
step_cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$T/ref.out")
[ -n "$step_cpus" ] || bad "reference step: no CPU list"
[ "$step_cpus" != "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)" ] ||
  echo "note: the step's CPU set equals this shell's ($step_cpus): confinement not visible on this host"

timeout 60 srun -N1 -n1 --gpus-per-node=4 --cpus-per-task=1 -J p3d-cpus "$PAR3DRUN" \
  --topology "${TOPOS[0]}" --tp 4 -- \
  sh -c 'echo "rank=$RANK cvd=$CUDA_VISIBLE_DEVICES step=$SLURM_STEP_GPUS cpus=$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' \
  >"$T/run.out" 2>"$T/run.err"; rc=$?
[ "$rc" = 0 ] || { bad "par3drun in the step: exit $rc"; sed 's/^/  /' "$T/run.err"; }
[ "$(grep -c 'rank=' "$T/run.out")" = 4 ] || { bad "not 4 ranks on the step's 4 GPUs"; cat "$T/run.out"; }
while read -r line; do
  cvd=${line#*cvd=}; cvd=${cvd%% *}
  step=${line#*step=}; step=${step%% *}
  cpus=${line##*cpus=}
  [ -n "$step" ] && [ "$(echo "$step" | tr , '\n' | wc -l)" = 4 ] || bad "SLURM_STEP_GPUS=$step is not 4 GPUs"
  [ "$(echo "$cvd" | tr , '\n' | wc -l)" = 4 ] || bad "CUDA_VISIBLE_DEVICES=$cvd has not 4 entries"
  for d in ${cvd//,/ }; do
    case ",$step," in *",$d,"*) ;; *) bad "device $d of CUDA_VISIBLE_DEVICES=$cvd is not the step's ($step)" ;; esac
  done
  [ "$cpus" = "$step_cpus" ] || bad "a rank runs on CPUs $cpus, the step has $step_cpus"
done < <(grep 'rank=' "$T/run.out")
echo "step CPUs $step_cpus, GPUs $(sed -n 's/^step=//p' "$T/ref.out"): every rank inside both"
exit "$fail"
