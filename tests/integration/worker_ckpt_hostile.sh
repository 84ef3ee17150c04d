#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# p3d-worker --checkpoint-dir as hostile input (issue 28) and fenced by
# generation (issue 24 part 4, the worker's side): ranks started without
# par3drun (worker_harness.sh), 2 ranks (dp 2) unless said, on checkpoint
# layouts another user or a stale copy of a rank could leave: symlinked step
# directories, a planted .tmp symlink, FIFOs in place of a shard and of a
# marker, world-writable and foreign directories, truncated shards, shards
# and markers of another generation or mesh, a checkpoint at --steps.
# Every run is bounded (timeout in the harness): a rank that blocks fails it.
set -u
[[ -x ${P3D_WORKER:-} ]] || { echo "p3d-worker not built (P3D_WORKER unset)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=worker_harness.sh
source "$here/worker_harness.sh"
T=$(mktemp -d)
trap 'chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
wargs=(--backend cpu --layers 2 --hidden 8 --global-batch 4 --timeout 10 --connect-timeout 10
       --checkpoint-every 1 --checkpoint-keep 0)
# w NAME CKDIR WORLD STEPS [more worker args] -> worst exit code; all output in $T/NAME.out
w() {
    local name=$1 ck=$2 world=$3 steps=$4 rc
    shift 4
    p3dw_run "$T/$name" 1 1 "$world" -- "$P3D_WORKER" "${wargs[@]}" --steps "$steps" --verify \
        --checkpoint-dir "$ck" "$@"
    rc=$?
    cat "$T/$name"/rank-*.log >"$T/$name.out"
    ((rc == 124)) && bad "$name: a rank was still running at the harness timeout (blocked)"
    return $rc
}
has() { grep -q -- "$2" "$T/$1.out" || { bad "$1: no '$2' in its output:"; grep p3d-worker "$T/$1.out" | head -8; }; }
expect() { # NAME WANT GOT
    [[ $2 == "$3" ]] || { bad "$1: exit $3, want $2"; grep p3d-worker "$T/$1.out" | tail -6; }
}
s4=step-00000004 s3=step-00000003
sh0=rank-00000.gen-0.bin sh1=rank-00001.gen-0.bin

# A good 4-step checkpoint (generation 0) every case below copies.
w ref "$T/ref" 2 4
expect ref 0 $?
[[ -f $T/ref/$s4/$sh0 && -f $T/ref/$s4/$sh1 ]] || bad "ref: no generation-0 shards: $(ls "$T/ref/$s4")"
grep -qx 'generation 0' "$T/ref/$s4/complete" || bad "ref: the marker does not name generation 0"
grep -qx 'world_size 2' "$T/ref/$s4/complete" || bad "ref: the marker does not name the world size"
fresh() { rm -rf "$T/$1"; cp -a "$T/ref" "$T/$1"; }

# 1. The checkpoint directory: refused when others may write into it or it
#    is not ours (exit 2 on every rank, no rank waits for another).
for mode in 777 770 702; do
    mkdir -m "$mode" "$T/open$mode"
    chmod "$mode" "$T/open$mode"
    w open$mode "$T/open$mode" 2 2
    expect open$mode 2 $?
    has open$mode "has mode 0$mode: another user could write into it"
done
if (($(id -u) == 0)) && id nobody >/dev/null 2>&1; then
    mkdir -m 700 "$T/foreign" && chown nobody "$T/foreign"
    w foreign "$T/foreign" 2 2
    expect foreign 2 $?
    has foreign "belongs to uid $(id -u nobody), not to you"
else
    echo "skip: foreign owner (not root, or no user nobody)"
fi
: >"$T/plainfile"
w notdir "$T/plainfile" 2 2
expect notdir 2 $?
has notdir "cannot be opened (Not a directory)"

# 2. A planted .tmp symlink in a step directory is not written through.
mkdir -m 700 -p "$T/tmplink/step-00000001"
echo precious >"$T/victim"
ln -s "$T/victim" "$T/tmplink/step-00000001/$sh0.tmp"
ln -s "$T/victim" "$T/tmplink/step-00000001/complete.tmp"
w tmplink "$T/tmplink" 2 2
expect tmplink 0 $?
[[ $(cat "$T/victim") == precious ]] || bad "tmplink: the file behind the planted link was overwritten"
[[ -f $T/tmplink/step-00000001/$sh0 && ! -L $T/tmplink/step-00000001/$sh0 ]] ||
    bad "tmplink: the shard is not a regular file"

# 3. Symlinked step directories: never read, written or pruned through.
fresh symstep
mkdir -m 700 "$T/elsewhere"
cp "$T/ref/$s4/"* "$T/elsewhere/"
ln -s "$T/elsewhere" "$T/symstep/step-00000009"   # newer than any: must not be resumed from
rm -rf "$T/symstep/step-00000001"
ln -s "$T/elsewhere" "$T/symstep/step-00000001"   # older: pruning must not empty the target
before=$(ls "$T/elsewhere" | sort | tr '\n' ' ')
w symstep "$T/symstep" 2 6 --checkpoint-keep 1
expect symstep 0 $?
has symstep "step-00000009 is a symbolic link: refused"
has symstep "resuming from checkpoint step 4"
has symstep "verify: pass"
[[ $(ls "$T/elsewhere" | sort | tr '\n' ' ') == "$before" ]] ||
    bad "symstep: pruning deleted files through the step link: $(ls "$T/elsewhere")"
[[ -L $T/symstep/step-00000001 && ! -e $T/symstep/$s4 && -f $T/symstep/step-00000006/complete ]] ||
    bad "symstep: after pruning: $(ls "$T/symstep")"
# A step directory to write into that is a link: the save fails (exit 1), the target untouched.
rm -rf "$T/symsave" && mkdir -m 700 "$T/symsave" && ln -s "$T/elsewhere" "$T/symsave/step-00000001"
w symsave "$T/symsave" 2 2
expect symsave 1 $?
has symsave "step-00000001 is a symbolic link: refused"
[[ $(ls "$T/elsewhere" | sort | tr '\n' ' ') == "$before" ]] || bad "symsave: wrote through the link"

# 4. FIFOs in place of a shard and of a marker: refused at once, never opened
#    for a blocking read; the job falls back to the newest good step.
fresh fifo
rm "$T/fifo/$s4/$sh1" && mkfifo "$T/fifo/$s4/$sh1"
rm "$T/fifo/$s3/complete" && mkfifo "$T/fifo/$s3/complete"
w fifo "$T/fifo" 2 6
expect fifo 0 $?
has fifo "$sh1 is not a regular file"
has fifo "$s3/complete: is not a regular file"
has fifo "resuming from checkpoint step 2"
has fifo "verify: pass"

# 5. Truncated shards: a header cut short, and weights cut short.
fresh trunc
truncate -s 100 "$T/trunc/$s4/$sh0"
truncate -s 250 "$T/trunc/$s3/$sh1"
w trunc "$T/trunc" 2 6
expect trunc 0 $?
has trunc "$sh0 is not a p3d-worker checkpoint shard (version 2) or is truncated"
has trunc "$sh1: wrong size (truncated?)"
has trunc "resuming from checkpoint step 2"

# 6. A step directory others may write: ignored on load, and not written
#    into when its step comes round again (exit 1).
fresh stepmode
chmod 777 "$T/stepmode/$s4"
w stepmode "$T/stepmode" 2 6
expect stepmode 1 $?
has stepmode "$s4 has mode 0777: another user could write into it (chmod go-w it); ignoring checkpoint step 4"
has stepmode "resuming from checkpoint step 3"
has stepmode "could not write its checkpoint shard of step 4; stopping"

# 7. Markers: of another geometry (tp) is refused naming the field; of
#    another dp (world size) is resumed at that width, every rank reading the
#    shard of its tp, pp and ep (docs/worker.md "Resuming at another width"),
#    its losses still those of the one-process reference; an unparsable one
#    is ignored.
fresh mesh1
w mesh1 "$T/mesh1" 1 6
expect mesh1 0 $?
has mesh1 "checkpoint step 4 was written at dp 2; resuming at dp 1"
has mesh1 "verify: pass"
fresh mesh4
w mesh4 "$T/mesh4" 4 6
expect mesh4 0 $?
has mesh4 "checkpoint step 4 was written at dp 2; resuming at dp 4"
has mesh4 "verify: pass"
fresh meshtp
p3dw_run "$T/meshtp.run" 2 1 1 -- "$P3D_WORKER" "${wargs[@]}" --steps 6 --checkpoint-dir "$T/meshtp"
expect meshtp 2 $?
cat "$T/meshtp.run"/rank-*.log >"$T/meshtp.out"
has meshtp "was written with tp 1, this run has 2"
fresh garbled
printf 'p3d-worker checkpoint 2\nstep 4\ngeneration +0\n' >"$T/garbled/$s4/complete"
w garbled "$T/garbled" 2 6
expect garbled 0 $?
has garbled "$s4/complete: a number is not plain decimal digits"
has garbled "resuming from checkpoint step 3"

# 8. Generations: a job of generation 1 writes gen-1 shards and a marker
#    naming 1; a stale generation-0 shard renamed into its step is ignored on
#    load; a gen-1 name holding a generation-0 shard is refused.
mkdir -m 700 "$T/gen"
(export P3D_GENERATION=1; w gen1 "$T/gen" 2 4)
expect gen1 0 $?
[[ -f $T/gen/$s4/rank-00000.gen-1.bin ]] || bad "gen1: no gen-1 shard: $(ls "$T/gen/$s4")"
grep -qx 'generation 1' "$T/gen/$s4/complete" || bad "gen1: the marker does not name generation 1"
head -c 4096 /dev/urandom >"$T/gen/$s4/$sh0"    # a stale writer's shard: garbage, generation 0
(export P3D_GENERATION=1; w gen1b "$T/gen" 2 6)
expect gen1b 0 $?
has gen1b "resuming from checkpoint step 4"
grep -q "$sh0" "$T/gen1b.out" && bad "gen1b: the generation-0 shard was read"
cp "$T/ref/$s4/$sh0" "$T/gen/$s4/rank-00000.gen-1.bin" 2>/dev/null
rm -rf "$T/gen/step-00000005" "$T/gen/step-00000006"
(export P3D_GENERATION=1; w genmix "$T/gen" 2 6)
expect genmix 0 $?
has genmix "rank-00000.gen-1.bin holds step 4, rank 0, generation 0, not what its name says"
has genmix "resuming from checkpoint step 3"

# 9. Fencing: a stale copy of generation 1 of job J never writes into a step
#    that generation 3 of J committed (exit 1, the step byte-identical); a
#    different job in the same place supersedes the old marker.
mkdir -m 700 "$T/fence"
(export P3D_GENERATION=3 P3DW_JOB_ID=J; w fence3 "$T/fence" 2 4)
expect fence3 0 $?
head -c 300 /dev/urandom >>"$T/fence/$s4/rank-00001.gen-3.bin"   # step 4 unusable: resume at 3
sum() { (cd "$T/fence/$s4" && ls -A | sort && cat -- *) | sha256sum; }
b=$(sum)
(export P3D_GENERATION=1 P3DW_JOB_ID=J; w stale "$T/fence" 2 4)
expect stale 1 $?
has stale "resuming from checkpoint step 3"
has stale "$s4 was committed by generation 3 of this job, newer than this rank's P3D_GENERATION 1"
[[ $(sum) == "$b" ]] || bad "stale: the committed step 4 changed: $(ls "$T/fence/$s4")"
(export P3D_GENERATION=0 P3DW_JOB_ID=K; w otherjob "$T/fence" 2 4)
expect otherjob 0 $?
grep -qx 'job K' "$T/fence/$s4/complete" && grep -qx 'generation 0' "$T/fence/$s4/complete" ||
    bad "otherjob: step 4 was not recommitted by job K generation 0"

# 10. A checkpoint at or past --steps: nothing trained, nothing verified, exit 3.
for steps in 4 2; do
    fresh past$steps
    w past$steps "$T/past$steps" 2 $steps
    expect past$steps 3 $?
    has past$steps "checkpoint step 4 in $T/past$steps is at or past --steps $steps: nothing left to train (exit 3)"
    grep -q 'verify' "$T/past$steps.out" && bad "past$steps: reported a verification"
done

# 11. The environment: P3D_GENERATION and the rank variables take plain digits only.
for v in ' 1' '+1' 1x -1 '' 0x10 9999999999; do
    out=$(P3D_GENERATION=$v RANK=0 WORLD_SIZE=1 MASTER_PORT=1 timeout 10 "$P3D_WORKER" --backend cpu 2>&1)
    rc=$?
    [[ $rc == 2 && $out == *"P3D_GENERATION: expected the job's generation, plain decimal digits"* ]] ||
        bad "P3D_GENERATION='$v': exit $rc: $out"
done
for v in ' 1' '+1'; do
    out=$(RANK=$v WORLD_SIZE=2 MASTER_PORT=1 timeout 10 "$P3D_WORKER" --backend cpu 2>&1)
    rc=$?
    [[ $rc == 2 && $out == *"RANK: expected a non-negative integer in plain decimal digits"* ]] ||
        bad "RANK='$v': exit $rc: $out"
done

((fail)) || echo "ok: every hostile checkpoint layout refused or ignored with a message, none blocked; generations fence a stale writer"
exit $fail
