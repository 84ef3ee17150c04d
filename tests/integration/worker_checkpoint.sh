#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p3d-worker --checkpoint-dir under par3drun --emulate (issue 11, "the
# bundled worker resumes"): a rank killed with SIGKILL mid-training after a
# checkpoint, the job started again on the same directory, resumes at the
# checkpointed step, and its losses and final weights are bit-identical to
# an uninterrupted run; the same through par3drun --max-restarts 1 in one
# job.  Incomplete and corrupt checkpoints are skipped with a warning; a
# checkpoint of another mesh is refused with exit 2.
# P3DW_DIE=RANK:STEP is the worker's test-only switch: that rank SIGKILLs
# itself before STEP, in the job's first attempt only.
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
cluster=${P3D_SRC:?}/examples/clusters/2x-dgx-h100.json
[[ -f $cluster ]] || { echo "FAIL: $cluster is missing"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
mesh=(--tp 2 --pp 2 --dp 2)
wargs=(--backend cpu --verify --layers 4 --hidden 16 --global-batch 16 --micro-batches 2
       --steps 8 --lr 1 --timeout 30 --checkpoint-every 3 --checkpoint-keep 0)
run() { # NAME CKPTDIR [par3drun options...] -> exit code; output in $dir/NAME.out
    local name=$1 ck=$2
    shift 2
    timeout 300 "$PAR3DRUN" --emulate --cluster "$cluster" "${mesh[@]}" --grace 2 "$@" -- \
        "$P3D_WORKER" "${wargs[@]}" --checkpoint-dir "$ck" >"$dir/$name.out" 2>&1
}
# The weights of a shard: the file the step's marker names (its generation),
# without the 200-byte header (which holds the generation).
weights() { # CKDIR STEP RANK
    local g
    g=$(sed -n 's/^generation //p' "$1/$(printf step-%08d "$2")/complete")
    tail -c +201 "$1/$(printf step-%08d "$2")/$(printf rank-%05d.gen-%s.bin "$3" "$g")"
}
losses() { grep -o 'step [0-9]*/8 loss [0-9.e+-]*' "$dir/$1.out" | sort -u; }

# The reference: one uninterrupted run (it writes checkpoints too: the last
# one holds the final weights).
run ref "$dir/ck-ref" || { echo "FAIL: uninterrupted run (exit $?)"; tail -20 "$dir/ref.out"; exit 1; }
grep -q 'verify: pass' "$dir/ref.out" || { echo "FAIL: reference run does not verify"; fail=1; }
[[ $(stat -c %a "$dir/ck-ref") == 700 ]] || { echo "FAIL: checkpoint dir mode $(stat -c %a "$dir/ck-ref")"; fail=1; }
for s in 3 6 8; do
    [[ -f $dir/ck-ref/step-0000000$s/complete ]] || { echo "FAIL: no complete checkpoint of step $s"; fail=1; }
done
[[ $(losses ref | wc -l) == 8 ]] || { echo "FAIL: reference: $(losses ref | wc -l) loss lines"; fail=1; }

# 1. Rank 5 dies before step 5 (after the checkpoint of step 3): the job
#    fails; the same command again resumes at step 3.
P3DW_DIE=5:5 run die "$dir/ck"
rc=$?
((rc != 0)) || { echo "FAIL: the job with a killed rank exited 0"; fail=1; }
grep -q 'P3DW_DIE: rank killing itself before step 5' "$dir/die.out" ||
    { echo "FAIL: rank 5 did not kill itself"; tail -5 "$dir/die.out"; fail=1; }
[[ -f $dir/ck/step-00000003/complete && ! -e $dir/ck/step-00000006 ]] ||
    { echo "FAIL: after the crash: $(ls "$dir/ck")"; fail=1; }
# An incomplete newer checkpoint (no marker: not every rank wrote it) is ignored.
mkdir -p "$dir/ck/step-00000004" && cp "$dir/ck/step-00000003/rank-00000.gen-0.bin" "$dir/ck/step-00000004/"
run resume "$dir/ck" || { echo "FAIL: resumed run exited $?"; tail -20 "$dir/resume.out"; fail=1; }
grep -q 'resuming from checkpoint step 3 in' "$dir/resume.out" ||
    { echo "FAIL: did not resume at step 3"; grep p3d-worker "$dir/resume.out" | head; fail=1; }
grep -q 'step-00000004 has no completion marker.*ignored' "$dir/resume.out" ||
    { echo "FAIL: no warning about the incomplete checkpoint"; fail=1; }
grep -q 'step [1-3]/8 loss' "$dir/resume.out" && { echo "FAIL: the resumed run recomputed steps 1-3"; fail=1; }
[[ $(losses resume | wc -l) == 5 ]] || { echo "FAIL: resumed run: $(losses resume | wc -l) loss lines, want 5 (steps 4-8)"; fail=1; }
diff <(losses ref | grep -v 'step [1-3]/') <(losses resume) >/dev/null ||
    { echo "FAIL: resumed losses differ:"; diff <(losses ref) <(losses resume); fail=1; }
grep -q 'verify: pass' "$dir/resume.out" || { echo "FAIL: the resumed run does not verify (all 8 steps)"; fail=1; }
for r in 0 1 2 3 4 5 6 7; do
    cmp -s <(weights "$dir/ck-ref" 8 $r) <(weights "$dir/ck" 8 $r) ||
        { echo "FAIL: final weights of rank $r differ from the uninterrupted run"; fail=1; }
done
((fail)) || echo "ok: killed at step 5, resumed at step 3: losses 5-8 and final weights bit-identical; incomplete step 4 ignored"

# 2. The same inside one job: --max-restarts 1 restarts every rank, which
#    resume from the newest checkpoint (step 6 here).
P3DW_DIE=2:8 run restart "$dir/ck-restart" --max-restarts 1 ||
    { echo "FAIL: job with --max-restarts 1 exited $?"; tail -20 "$dir/restart.out"; fail=1; }
grep -q 'restarting all ranks' "$dir/restart.out" || { echo "FAIL: no restart"; fail=1; }
grep -q 'resuming from checkpoint step 6' "$dir/restart.out" || { echo "FAIL: restart did not resume at 6"; fail=1; }
[[ $(losses restart | wc -l) == 8 ]] || { echo "FAIL: restarted job: $(losses restart | wc -l) loss lines"; fail=1; }
diff <(losses ref) <(losses restart) >/dev/null ||
    { echo "FAIL: losses with a restart differ:"; diff <(losses ref) <(losses restart); fail=1; }
cmp -s <(weights "$dir/ck-ref" 8 3) <(weights "$dir/ck-restart" 8 3) ||
    { echo "FAIL: final weights differ after the restart"; fail=1; }
grep -q 'verify: pass' "$dir/restart.out" || { echo "FAIL: restarted job does not verify"; fail=1; }
echo "ok: --max-restarts 1 with a rank killed before step 8: resumed at 6, losses identical"

# 3. A corrupt shard of the newest complete checkpoint: warning, older one used.
cp -r "$dir/ck-ref" "$dir/ck-bad"
rm -rf "$dir/ck-bad/step-00000008"
printf 'garbage' | dd of="$dir/ck-bad/step-00000006/rank-00006.gen-0.bin" bs=1 seek=300 conv=notrunc 2>/dev/null
run corrupt "$dir/ck-bad" || { echo "FAIL: run over a corrupt checkpoint exited $?"; tail "$dir/corrupt.out"; fail=1; }
grep -q 'rank 6: .*rank-00006.gen-0.bin: checksum mismatch (corrupt); ignoring checkpoint step 6' "$dir/corrupt.out" ||
    { echo "FAIL: no warning for the corrupt shard"; grep warning "$dir/corrupt.out"; fail=1; }
grep -q 'resuming from checkpoint step 3' "$dir/corrupt.out" || { echo "FAIL: did not fall back to step 3"; fail=1; }
diff <(losses ref | grep -v 'step [1-3]/') <(losses corrupt) >/dev/null || { echo "FAIL: losses after fallback differ"; fail=1; }
echo "ok: a corrupt shard of step 6 makes every rank resume at step 3"

# 4. The whole job SIGKILLed from outside (par3drun itself, whatever step it
#    is at) once the checkpoint of step 5 is complete: the same command again
#    resumes from the newest complete checkpoint and ends like the reference.
long=(--backend cpu --layers 4 --hidden 16 --global-batch 16 --micro-batches 2 --steps 200
      --timeout 30 --checkpoint-every 5 --checkpoint-keep 0)
"$PAR3DRUN" --emulate --cluster "$cluster" "${mesh[@]}" -- "$P3D_WORKER" "${long[@]}" \
    --checkpoint-dir "$dir/ck-long-ref" >"$dir/long-ref.out" 2>&1 || { echo "FAIL: 200-step run"; fail=1; }
"$PAR3DRUN" --emulate --cluster "$cluster" "${mesh[@]}" -- "$P3D_WORKER" "${long[@]}" \
    --checkpoint-dir "$dir/ck-long" >"$dir/long-kill.out" 2>&1 &
pid=$!
for ((i = 0; i < 600; i++)); do
    [[ -f $dir/ck-long/step-00000005/complete ]] && break
    sleep 0.05
done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
sleep 0.5 # the agents and ranks see par3drun gone and end
done_steps=$(grep -c 'step [0-9]*/200 loss' "$dir/long-kill.out")
"$PAR3DRUN" --emulate --cluster "$cluster" "${mesh[@]}" -- "$P3D_WORKER" "${long[@]}" \
    --checkpoint-dir "$dir/ck-long" >"$dir/long-res.out" 2>&1 || { echo "FAIL: resume after SIGKILL exited $?"; fail=1; }
at=$(grep -o 'resuming from checkpoint step [0-9]*' "$dir/long-res.out" | grep -o '[0-9]*$')
if [[ -z $at ]] || ((at < 5 || at >= 200)); then
    echo "FAIL: after the job was killed at step ~$done_steps it resumed from '${at:-nothing}'"; fail=1
else
    lines() { grep -o 'step [0-9]*/200 loss [0-9.e+-]*' "$dir/$1.out" | awk -v a="$at" '{split($2, s, "/"); if (s[1] > a) print}'; }
    [[ $(lines long-res | wc -l) == $((200 - at)) ]] && diff <(lines long-ref) <(lines long-res) >/dev/null ||
        { echo "FAIL: losses after the resume from step $at differ"; fail=1; }
    cmp -s <(weights "$dir/ck-long-ref" 200 7) <(weights "$dir/ck-long" 200 7) ||
        { echo "FAIL: final weights after the SIGKILL/resume differ"; fail=1; }
    echo "ok: par3drun SIGKILLed after $done_steps steps; resumed from step $at, losses and weights identical"
fi

# 5. Another mesh: exit 2 with a message naming the field.
mesh=(--tp 1 --pp 2 --dp 4)
run other "$dir/ck-ref"
rc=$?
((rc == 2)) || { echo "FAIL: a checkpoint of another mesh: exit $rc, want 2"; tail -5 "$dir/other.out"; fail=1; }
grep -q 'was written with tp 2, this run has 1' "$dir/other.out" ||
    { echo "FAIL: no message naming the mesh"; grep p3d-worker "$dir/other.out" | head -5; fail=1; }
echo "ok: a checkpoint of another mesh is refused (exit $rc)"
exit $fail
