#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_slurm_heal.sh — a lost node replaced by a spare under a real
# Slurm (tests/services/slurm.sh: slurmctld + four slurmd fake nodes n[1-4]
# on this host, topology/tree with leaf1 = n[1-2], leaf2 = n[3-4]): plain
# `srun -N4 --ntasks-per-node=1 par3drun --tp 8 --spares K` (the slurm
# rendezvous; racks from SLURM_TOPOLOGY_ADDR; node names from
# SLURMD_NODENAME). Generation 0 runs until killed, generation 1 exits 0.
# Mid-run the par3drun of node rank 2 (n3, the step's task 2) gets SIGKILL.
#   1. --spares 1: the default choice makes n2 the spare (racks take turns
#      from the first, leaf1 gives its last node); n3's ranks move to n2,
#      in another rack since leaf2 has no spare.
#   2. --spares 2: n2 and n4 are spares (one per rack); n3's ranks must go to
#      n4, the spare of its own rack leaf2, not to n2.
#   3. as 2 under `srun --mpi=pmix` with `--rdzv pmix`: the PMIx rendezvous
#      (no fallback to the slurm one), then the same heal.
#   4. sbatch of examples/slurm/four-nodes-pmix.sbatch, n3's par3drun
#      killed: the script exits with the leader's result.json, the job
#      ends COMPLETED 0:0 although srun exits 137.
# All: every survivor's task exits 0, the spare took exactly n3's ranks on
# the same GPU indices, no other rank moved, placement.json identical on
# every survivor with the previous one kept as placement.1.json, the
# leader's events.jsonl has failure / replace / restart / end.
#
# How srun reports it: srun is run with --kill-on-bad-exit=0 and --wait=0
# (the defaults of slurm.conf's KillOnBadExit / WaitTime, given explicitly
# so that a site setting cannot turn one task's death into the step's
# end): the step survives task 2's death and srun waits for the others.
# The task is the par3drun process itself (a wrapper records its PID, then
# execs it), so srun says `task 2: Killed` and exits 128 + 9 = 137, the
# highest status of any task. A surviving task that exited non-zero would
# be named by srun (`task N: Exited with exit code C`), so "the job ended
# 0" is: srun exit 137, exactly one `Killed` line (task 2), no `Exited
# with exit code` line, and the leader's events say exit_code 0.
# Skips (77) without slurm-wlm. Run it under flock /tmp/p3d-services.lock
# when other Slurm users share this host (as the other Slurm tests).
. "$(dirname "$0")/lib/multinode_lib.sh"
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
slurm_up
pmix_leaks_suppressed
export PAR3DRUN P3D_TOPOLOGY=${TOPOS[0]}
cd "$T" || exit 1

# the task: records its PID (per node) and becomes par3drun, with a run dir
# we keep (one per node: the fake nodes share this host)
cat >"$T/task.sh" <<'EOF'
#!/bin/sh
echo $$ >"$TD/pid.$SLURM_NODEID"
exec "$PAR3DRUN" --run-dir "$TD/rd.$SLURM_NODEID" ${RDZV:+--rdzv "$RDZV"} "$@"
EOF
chmod +x "$T/task.sh"
# generation 0 runs until killed; after a restart every rank ends at once
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES node=$SLURMD_NODENAME"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'

# ranks left behind (the Slurm daemons carry the marker too: only
# processes with a RANK count)
workers_left() {
  local n=0 d
  for d in /proc/[0-9]*; do
    grep -qsz "^P3D_TEST_MARK=$MARK\$" "$d/environ" && grep -qsz '^RANK=' "$d/environ" && n=$((n + 1))
  done
  echo $n
}
# heal NAME SPARES WANT_SPARE WANT_WHERE [SRUN OPTIONS]: one srun, task 2
# killed mid-run
heal() {
  local name=$1 k=$2 want=$3 where=$4 TD=$T/$1 pid t0 t1 n0 ev
  shift 4
  mkdir -p "$TD"
  export TD
  local nranks=$(((4 - k) * 8))
  timeout 90 srun -N4 --ntasks-per-node=1 --kill-on-bad-exit=0 --wait=0 "$@" -J "p3d-heal-$name" \
    -o "$TD/task.%t.out" -e "$TD/task.%t.err" "$T/task.sh" --topology "$P3D_TOPOLOGY" \
    --tp 8 --spares "$k" --max-restarts 2 --grace 1 -- sh -c "$W" >"$TD/srun.out" 2>"$TD/srun.err" &
  local sp=$!
  PIDS+=($sp)
  for _ in $(seq 600); do
    n0=$(cat "$TD"/task.*.out 2>/dev/null | grep -c 'gen=0')
    [ "$n0" -ge "$nranks" ] && break
    kill -0 "$sp" 2>/dev/null || break
    sleep 0.05
  done
  if [ "$n0" -lt "$nranks" ]; then
    bad "$name: only $n0 of $nranks ranks started"
    tail -n 5 "$TD"/srun.err "$TD"/task.*.err | sed 's/^/  /'
    return
  fi
  pid=$(cat "$TD/pid.2")
  [ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" = "" ] && { bad "$name: no process $pid for task 2"; return; }
  case $(tr '\0' ' ' <"/proc/$pid/cmdline") in
    "$PAR3DRUN "*) ;;
    *) bad "$name: PID $pid of task 2 is not par3drun: $(tr '\0' ' ' <"/proc/$pid/cmdline")"; return ;;
  esac
  t0=$(now_ms)
  kill -KILL "$pid"
  wait "$sp"; rc=$?
  t1=$(now_ms)
  echo "$name: srun ended $((t1 - t0)) ms after n3's par3drun was killed, exit $rc"
  sed "s/^/  $name: /" "$TD/srun.err"
  [ "$rc" = 137 ] || { bad "$name: srun exit $rc, want 137 (task 2 killed, the others 0)"; sed 's/^/  /' "$TD/srun.err"; }
  [ "$(grep -c 'task [0-9]*: Killed' "$TD/srun.err")" = 1 ] && grep -q 'n3: task 2: Killed' "$TD/srun.err" ||
    { bad "$name: srun did not report exactly task 2 killed"; sed 's/^/  /' "$TD/srun.err"; }
  if grep -q 'Exited with exit code' "$TD/srun.err"; then
    bad "$name: a surviving task exited non-zero"; sed 's/^/  /' "$TD/srun.err" "$TD/task.0.err"
  fi
  sum=$(sha256sum <"$TD/rd.0/placement.json")
  for i in 1 3; do
    [ "$(sha256sum <"$TD/rd.$i/placement.json")" = "$sum" ] || bad "$name: placement.json of node $i differs from the leader's"
    cmp -s "$TD/rd.0/placement.1.json" "$TD/rd.$i/placement.1.json" ||
      bad "$name: node $i: placement.1.json missing or not the leader's previous placement"
  done
  # exactly n3's ranks moved, to the wanted spare, GPU for GPU; nothing else
  python3 - "$TD/rd.0/placement.1.json" "$TD/rd.0/placement.json" "$want" "$where" <<'PY' || bad "$name: the moved ranks are wrong"
import json, sys
d0, d1 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want, where = sys.argv[3], sys.argv[4]
old = {r["rank"]: r for r in d0["ranks"]}
new = {r["rank"]: r for r in d1["ranks"]}
assert old.keys() == new.keys(), "rank sets differ"
racks = {r["node"]: r["rack"] for r in d1["ranks"]}
racks.update({r["node"]: r["rack"] for r in d0["ranks"]})
if racks.get("n1") != "leaf1" or racks.get("n3") != "leaf2":
    sys.exit(f"racks are not Slurm's leaf switches: {racks}")
moved = sorted(r for r in old if old[r]["node"] != new[r]["node"] or old[r]["gpu"] != new[r]["gpu"])
lost = sorted(r for r in old if old[r]["node"] == "n3")
if moved != lost or len(lost) != 8:
    sys.exit(f"moved {moved}, want the 8 ranks of n3: {lost}")
to = {new[r]["node"] for r in moved}
if to != {want}:
    sys.exit(f"the ranks of n3 went to {sorted(to)}, want the spare {want}")
if new[moved[0]]["rack"] != where:
    sys.exit(f"the spare {want} is in rack {new[moved[0]]['rack']}, want {where}")
if any(new[r]["gpu"] != old[r]["gpu"] for r in moved):
    sys.exit("ranks changed GPU index on the spare")
print(f"ranks {moved[0]}-{moved[-1]} of n3 -> {want} (rack {where}), same GPUs; nothing else moved")
PY
  # every rank ran again after the restart, the moved ones on the spare
  local spare_task=$((${want#n} - 1))
  [ "$(cat "$TD"/task.[013].out | grep -c 'gen=1')" = "$nranks" ] || bad "$name: not $nranks ranks ran after the restart"
  [ "$(grep -c 'gen=1' "$TD/task.$spare_task.out")" = 8 ] || bad "$name: the spare $want did not run 8 ranks"
  [ "$(grep -c 'gen=0' "$TD/task.$spare_task.out")" = 0 ] || bad "$name: the spare ran ranks before the replacement"
  ev=$TD/rd.0/events.jsonl
  grep -q '"event": "failure", "node": "n3", "rank": -1, "cause": "node lost"' "$ev" || bad "$name: events: no node-lost failure of n3"
  grep -q "\"event\": \"replace\", \"failed\": \"n3\", \"spare\": \"$want\", \"moved_ranks\": \[[0-9, ]*\], \"restart\": 1" "$ev" ||
    bad "$name: events: no replace record n3 -> $want"
  grep -q '"event": "restart", "restart": 1, "kind": "replacement"' "$ev" || bad "$name: events: no replacement restart"
  grep -q '"event": "running", "restart": 1, "recovery_s": [0-9.]*' "$ev" || bad "$name: events: no recovery time"
  grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || bad "$name: events: no end with exit code 0"
  [ "$fail" = 0 ] || sed 's/^/  events: /' "$ev"
  grep -q "of n3 moved to spare $want" "$TD/task.0.err" || { bad "$name: the leader did not tell the story"; sed 's/^/  /' "$TD/task.0.err"; }
  sleep 0.3
  [ "$(workers_left)" = 0 ] || bad "$name: $(workers_left) ranks left behind"
}

# 1. --spares 1: the only spare is n2 (leaf1); n3 (leaf2) has none in its rack
heal one 1 n2 leaf1
grep -q 'moved to spare n2 (other rack leaf1)' "$T/one/task.0.err" || bad "one: the story does not say another rack"
# 2. --spares 2: n2 and n4; n3's ranks go to n4, its own rack's spare
heal two 2 n4 leaf2
grep -q 'moved to spare n4 (same rack leaf2)' "$T/two/task.0.err" || bad "two: the story does not say same rack leaf2"
# 3. the same under srun --mpi=pmix with --rdzv pmix (no fallback to the
#    slurm rendezvous): the PMIx rendezvous, then the same heal
export RDZV=pmix
heal pmix 2 n4 leaf2 --mpi=pmix
unset RDZV

# 4. sbatch examples/slurm/four-nodes-pmix.sbatch, n3's par3drun killed: srun
#    exits 137, the script exits with the leader's result.json (0), so the
#    healed job ends COMPLETED 0:0 (issue #43)
printf '#!/bin/sh\n%s\n' "$W" >"$T/w.sh"
chmod +x "$T/w.sh"
export TMPDIR=$T/sb
mkdir -p "$TMPDIR"
id=$(P3D_PROGRAM=$T/w.sh P3D_ARGS="--tp 8 --spares 1 --max-restarts 2 --grace 1" \
  sbatch --parsable -o "$T/sb.out" "$P3D_SRC/examples/slurm/four-nodes-pmix.sbatch")
for _ in $(seq 600); do
  [ "$(grep -c 'gen=0' "$T/sb.out" 2>/dev/null)" -ge 24 ] && break
  sleep 0.05
done
# the task of node rank 2: par3drun, child of slurmstepd, in this job
pid=
for d in /proc/[0-9]*; do
  grep -qsz "^SLURM_JOB_ID=$id\$" "$d/environ" && grep -qsz '^SLURM_NODEID=2$' "$d/environ" || continue
  [ "$(tr '\0' '\n' <"$d/cmdline" 2>/dev/null | head -1)" = "$PAR3DRUN" ] || continue
  pp=$(awk '{print $4}' "$d/stat" 2>/dev/null)
  [ "$(cat "/proc/$pp/comm" 2>/dev/null)" = slurmstepd ] && pid=${d#/proc/}
done
if [ -z "$pid" ]; then
  bad "sbatch: no par3drun task of node rank 2 in job $id"; sed 's/^/  /' "$T/sb.out" | tail -5
else
  kill -KILL "$pid"
  r=$(wait_job "$id" 90)
  [ "$r" = "COMPLETED 0:0" ] || { bad "sbatch: a healed job ended $r, want COMPLETED 0:0"; sed 's/^/  /' "$T/sb.out" | tail -15; }
  grep -q "srun exited 137; par3drun's verdict: exit 0" "$T/sb.out" || bad "sbatch: the script did not say srun's 137 and the verdict"
  grep -q '"exit_code": 0, "ok": true, .*"replaced": 1' "$TMPDIR/par3drun-$id.0/result.json" ||
    bad "sbatch: result.json: $(cat "$TMPDIR/par3drun-$id.0/result.json" 2>&1)"
  echo "sbatch: healed job $id ended $r"
fi
unset TMPDIR

[ "$fail" = 0 ] && echo "PASS multinode_slurm_heal"
exit "$fail"
