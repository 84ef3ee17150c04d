#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_slurm_preempt.sh — preemption under a real Slurm
# (tests/services/slurm.sh: slurmctld + four slurmd fake nodes on this
# host): sbatch of examples/slurm/preemptible.sbatch on two nodes (plain
# srun: the slurm rendezvous), the bundled worker with --checkpoint-dir, 2
# ranks a node. Mid-run `scancel --signal=USR1 -b` warns the batch shell:
#   - every node's par3drun exits 75 (srun says so for both tasks), the
#     worker wrote the checkpoint of
#     the step it was at, the leader's result.json says preempted with
#     that step, under the job's Slurm id;
#   - the script requeues the job (same id); the second run resumes from
#     that checkpoint (its first loss line is the next step) and the job
#     ends COMPLETED 0:0.
# Skips (77) without slurm-wlm or p3d-worker.
. "$(dirname "$0")/lib/multinode_lib.sh"
[ -x "${P3D_WORKER:-}" ] || { echo "skip: p3d-worker not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
slurm_up
pmix_leaks_suppressed
export PAR3DRUN P3D_TOPOLOGY=${TOPOS[0]} TMPDIR=$T/tmp
mkdir -p "$TMPDIR"
cd "$T" || exit 1
# The training program: the bundled worker on the CPU, checkpoints in
# $T/ck. The first run trains "forever" (20 ms a step); a requeued run
# (SLURM_RESTART_COUNT > 0) trains 3 steps past the newest checkpoint.
cat >"$T/train.sh" <<SH
#!/bin/sh
steps=100000
if [ "\${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
  last=\$(ls -d "$T"/ck/step-*/complete 2>/dev/null | sed 's|.*/step-0*\([0-9]*\)/complete|\1|' | sort -n | tail -1)
  steps=\$((last + 3))
  unset P3DW_STALL
fi
exec "$P3D_WORKER" --backend cpu --layers 4 --hidden 16 --global-batch 16 --micro-batches 2 --lr 1 --timeout 60 \\
  --checkpoint-every 1000000 --checkpoint-dir "$T/ck" --steps "\$steps"
SH
chmod +x "$T/train.sh"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

id=$(P3D_PROGRAM=$T/train.sh P3DW_STALL=20 \
  P3D_ARGS="--nproc-per-node 2 --pp 2 --dp 2 --grace 20 --progress-interval 0.2" \
  sbatch --parsable -N2 -o "$T/job.out" "$P3D_SRC/examples/slurm/preemptible.sbatch")
[ -n "$id" ] || { echo "FAIL: sbatch"; exit 1; }
rd=$TMPDIR/par3drun-$id.0
for _ in $(seq 1200); do grep -qs 'step=[1-9][0-9]' "$rd/heartbeat/rank-0" && break; sleep 0.05; done
grep -qs 'step=[1-9][0-9]' "$rd/heartbeat/rank-0" || { bad "the job did not reach step 10"; sed 's/^/  /' "$T/job.out"; }
cp "$rd/heartbeat/rank-0" "$T/before" 2>/dev/null
t0=$(now_ms)
scancel --signal=USR1 -b "$id" || bad "scancel --signal=USR1 -b failed"
# the first run's verdict (the script prints it before it requeues)
for _ in $(seq 1200); do grep -qs 'p3d-preempt: preempted' "$T/job.out" && break; sleep 0.05; done
t1=$(now_ms)
n=$(sed -n 's/^p3d-preempt: preempted; the checkpoint every node holds: step \([0-9]*\)$/\1/p' "$T/job.out" | head -1)
[ -n "$n" ] || { bad "the first run did not end preempted"; sed 's/^/  /' "$T/job.out"; }
echo "preempted at $(cat "$T/before" 2>/dev/null): checkpoint of step ${n:-?}; the script had the verdict $((t1 - t0)) ms after scancel"
# srun's own account of the first run: both tasks (each node's par3drun)
# exited 75, none was killed
run1=$(sed -n '1,/p3d-preempt: preempted/p' "$T/job.out")
grep -Eq 'srun: error: .*tasks? [0-9-]+: Exited with exit code 75' <<<"$run1" &&
  ! grep -Eq 'Killed|Exited with exit code ([^7]|7[^5])' <<<"$run1" || { bad "srun's account of the first run"; grep srun <<<"$run1"; }
[ -n "$n" ] && [ -f "$T/ck/$(printf step-%08d "$n")/complete" ] || bad "no complete checkpoint of step ${n:-?}: $(ls "$T/ck" 2>&1)"
grep -q "root cause: preempted (SIGUSR1 to .*): every node reported its checkpoint; checkpoint at step $n; exit 75" \
  "$T/job.out" || { bad "no preempted root cause"; grep 'par3drun:' "$T/job.out" | head; }
grep -q "p3d-worker: preempted (SIGUSR1): checkpoint of step $n written" "$T/job.out" || bad "the worker did not checkpoint"
# the requeued run: same id, resumes, ends COMPLETED
r=$(wait_job "$id" 240)
t2=$(now_ms)
echo "the requeued job ran and ended $((t2 - t1)) ms after the first run's verdict (Slurm holds a requeued job first)"
[ "$r" = "COMPLETED 0:0" ] || { bad "the requeued job: $r"; sed 's/^/  /' "$T/job.out" | tail -30; }
grep -q "^p3d-preempt: job $id, run 2$" "$T/job.out" || bad "no second run of job $id"
grep -q "resuming from checkpoint step $n in" "$T/job.out" || { bad "the second run did not resume at step $n"; grep p3d-worker "$T/job.out"; }
first=$(sed -n '/run 2$/,$p' "$T/job.out" | grep -o 'step [0-9]*/[0-9]* loss' | head -1)
[ "$first" = "step $((n + 1))/$((n + 3)) loss" ] || bad "the second run's first step: '$first', want step $((n + 1))"
[ "$(field "$rd/result.json" job_id)" = "$id" ] && [ "$(field "$rd/result.json" exit_code)" = 0 ] ||
  bad "the second run's result.json: $(cat "$rd/result.json" 2>&1)"
[ "$fail" = 0 ] && echo "ok: scancel --signal=USR1 -b -> checkpoint of step $n, exit 75, requeued as job $id, resumed at step $((n + 1)), COMPLETED"
exit $fail
