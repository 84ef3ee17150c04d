#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One job id under every Slurm launch mode (--help: "default: SLURM_JOB_ID
# or a random one"): two par3drun nodes on loopback meeting through the
# static rendezvous inside a Slurm job (SLURM_JOB_ID set) name the job as
# Slurm does on both nodes, in the placement, result.json and the run
# directory; a SLURM_JOB_ID that is no Slurm id (it would name a
# directory: ../x) is not taken, there or on one node.
. "$P3D_SRC/tests/e2e/lib/multinode_lib.sh"

# NAME ID: both nodes with SLURM_JOB_ID=ID, their run directories where
# par3drun puts them (TMPDIR=$T/NAME), each rank printing $P3D_JOB_ID
two() {
  local i P
  P=$(free_port)
  mkdir -p "$T/$1"
  for i in 0 1; do
    SLURM_JOB_ID=$2 TMPDIR=$T/$1 "$PAR3DRUN" --nnodes 2 --node-rank "$i" --rdzv "static:127.0.0.1:$P" \
      --rdzv-token-file "$T/token" --topology "${TOPOS[$i]}" --nproc-per-node 1 --keep-run-dir --no-tag-output \
      -- sh -c 'echo "id=$P3D_JOB_ID"' >"$T/$1.$i.out" 2>"$T/$1.$i.err" &
    AG[$i]=$!
    PIDS+=($!)
  done
  for i in 0 1; do wait "${AG[$i]}" || bad "$1: node $i exit $?"; done
}
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null; }

two ok 4242
for i in 0 1; do
  [ -d "$T/ok/par3drun-4242.$i" ] || bad "node $i: no run directory par3drun-4242.$i: $(ls "$T/ok")"
  grep -q '^id=4242$' "$T/ok.$i.out" || bad "node $i: its rank saw P3D_JOB_ID '$(cat "$T/ok.$i.out")'"
done
[ "$(field "$T/ok/par3drun-4242.0/result.json" job_id)" = 4242 ] || bad "result.json's job_id is not 4242"

two dots ../x
id=$(sed -n 's/^id=//p' "$T/dots.0.out")
[[ $id =~ ^[0-9a-f]{12}$ ]] || bad "SLURM_JOB_ID=../x: the job id is '$id', want a random one"
grep -q "^id=$id\$" "$T/dots.1.out" || bad "SLURM_JOB_ID=../x: node 1 runs another job: $(cat "$T/dots.1.out")"
[ -d "$T/dots/par3drun-$id.1" ] || bad "SLURM_JOB_ID=../x: node 1's run directory: $(ls "$T/dots")"
out=$(SLURM_JOB_ID=../x TMPDIR=$T "$PAR3DRUN" --nproc-per-node 1 --topology "${TOPOS[0]}" -- true 2>&1)
grep -q "run dir $T/par3drun-[0-9a-f]\{12\} removed" <<<"$out" || bad "one node, SLURM_JOB_ID=../x: $out"
[ "$fail" = 0 ] && echo "ok: SLURM_JOB_ID names the job of a static rendezvous on every node; ../x is no job id"
exit $fail
