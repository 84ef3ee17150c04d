#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# multinode_slurm_failover.sh — leader failover under a real Slurm
# (tests/services/slurm.sh: slurmctld + four slurmd fake nodes n[1-4] on
# this host): `srun -N4 --ntasks-per-node=1 --kill-on-bad-exit=0 par3drun
# --tp 8 --spares 1 --node-timeout 3` (the slurm rendezvous; n2 is the spare
# by the default choice, leaf1 giving its last node). Mid-run the par3drun of
# node rank 0 (n1, the leader, the step's task 0) gets SIGKILL: node rank 1
# (n2, the lowest live node — the spare itself) takes over once a majority
# rejoined it, the leader's 8 ranks run on n2, GPU for GPU, no other rank
# moves, every surviving task exits 0 (srun: exit 137, exactly task 0
# Killed, no `Exited with exit code`), and n2's events.jsonl has the
# takeover. Skips (77) without slurm-wlm; run it under flock
# /tmp/p3d-services.lock.
. "$(dirname "$0")/lib/multinode_lib.sh"
command -v python3 >/dev/null || { echo "skip: python3 missing"; exit 77; }
slurm_up
pmix_leaks_suppressed
export PAR3DRUN P3D_TOPOLOGY=${TOPOS[0]}
cd "$T" || exit 1
cat >"$T/task.sh" <<'EOF'
#!/bin/sh
echo $$ >"$TD/pid.$SLURM_NODEID"
exec "$PAR3DRUN" --run-dir "$TD/rd.$SLURM_NODEID" "$@"
EOF
chmod +x "$T/task.sh"
W='echo "rank=$RANK gen=$P3D_RESTART_COUNT gpu=$CUDA_VISIBLE_DEVICES node=$SLURMD_NODENAME"; [ "$P3D_RESTART_COUNT" = 0 ] && exec sleep 60; exit 0'
workers_left() {
  local n=0 d
  for d in /proc/[0-9]*; do
    grep -qsz "^P3D_TEST_MARK=$MARK\$" "$d/environ" && grep -qsz '^RANK=' "$d/environ" && n=$((n + 1))
  done
  echo $n
}
TD=$T/fo
mkdir -p "$TD"
export TD
timeout 120 srun -N4 --ntasks-per-node=1 --kill-on-bad-exit=0 --wait=0 -J p3d-failover \
  -o "$TD/task.%t.out" -e "$TD/task.%t.err" "$T/task.sh" --topology "$P3D_TOPOLOGY" \
  --tp 8 --spares 1 --max-restarts 2 --grace 1 --node-timeout 3 --verbose -- sh -c "$W" >"$TD/srun.out" 2>"$TD/srun.err" &
sp=$!
PIDS+=($sp)
n0=0
for _ in $(seq 600); do
  n0=$(cat "$TD"/task.*.out 2>/dev/null | grep -c 'gen=0')
  [ "$n0" -ge 24 ] && break
  kill -0 "$sp" 2>/dev/null || break
  sleep 0.05
done
[ "$n0" -ge 24 ] || { bad "only $n0 of 24 ranks started"; tail -n 5 "$TD"/srun.err "$TD"/task.*.err | sed 's/^/  /'; exit 1; }
# every other node holds the successor list (each says so under --verbose):
# a node without one when the leader dies can only stop (a fixed sleep here
# lost that race under load)
for _ in $(seq 400); do
  [ "$(grep -l 'the successor list of restart 0' "$TD"/task.[123].err 2>/dev/null | wc -l)" = 3 ] && break
  sleep 0.05
done
[ "$(grep -l 'the successor list of restart 0' "$TD"/task.[123].err 2>/dev/null | wc -l)" = 3 ] ||
  bad "not every node got the successor list: $(grep -l 'the successor list' "$TD"/task.*.err 2>/dev/null | wc -l) of 3"
pid=$(cat "$TD/pid.0")
case $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) in
  "$PAR3DRUN "*) ;;
  *) bad "PID $pid of task 0 is not par3drun"; exit 1 ;;
esac
t0=$(now_ms)
kill -KILL "$pid"
wait "$sp"; rc=$?
t1=$(now_ms)
echo "srun ended $((t1 - t0)) ms after the leader's par3drun was killed, exit $rc"
[ "$rc" = 137 ] || { bad "srun exit $rc, want 137 (task 0 killed, the others 0)"; sed 's/^/  /' "$TD/srun.err"; }
[ "$(grep -c 'task [0-9]*: Killed' "$TD/srun.err")" = 1 ] && grep -q 'n1: task 0: Killed' "$TD/srun.err" ||
  { bad "srun did not report exactly task 0 killed"; sed 's/^/  /' "$TD/srun.err"; }
if grep -q 'Exited with exit code' "$TD/srun.err"; then
  bad "a surviving task exited non-zero"; sed 's/^/  /' "$TD/srun.err" "$TD/task.1.err"
fi
for i in 2 3; do
  cmp -s "$TD/rd.1/placement.json" "$TD/rd.$i/placement.json" || bad "placement.json of node $i differs from the new leader's"
done
python3 - "$TD/rd.1/placement.1.json" "$TD/rd.1/placement.json" <<'PY' || bad "the moved ranks are wrong"
import json, sys
old = {r["rank"]: r for r in json.load(open(sys.argv[1]))["ranks"]}
new = {r["rank"]: r for r in json.load(open(sys.argv[2]))["ranks"]}
moved = sorted(r for r in old if old[r]["node"] != new[r]["node"] or old[r]["gpu"] != new[r]["gpu"])
lost = sorted(r for r in old if old[r]["node"] == "n1")
if moved != lost or len(lost) != 8:
    sys.exit(f"moved {moved}, want the 8 ranks of the leader n1: {lost}")
if {new[r]["node"] for r in moved} != {"n2"}:
    sys.exit(f"the leader's ranks went to {sorted({new[r]['node'] for r in moved})}, want the spare n2")
if any(new[r]["gpu"] != old[r]["gpu"] for r in moved):
    sys.exit("ranks changed GPU index on the spare")
print(f"ranks {moved[0]}-{moved[-1]} of n1 (the old leader) -> n2, same GPUs; nothing else moved")
PY
[ "$(cat "$TD"/task.[123].out | grep -c 'gen=1')" = 24 ] || bad "not 24 ranks ran after the takeover"
[ "$(grep -c 'gen=1' "$TD/task.1.out")" = 8 ] || bad "the spare n2 did not run 8 ranks"
ev=$TD/rd.1/events.jsonl
grep -q '"event": "takeover", "old_leader": "n1", "new_leader": "n2"' "$ev" || { bad "events: no takeover record"; sed 's/^/  /' "$ev"; }
grep -q '"event": "end", "exit_code": 0, "restarts": 1, "replaced": 1' "$ev" || bad "events: no end with exit code 0"
grep -o '"heartbeat_to_running_s": [0-9.]*' "$ev"
sleep 0.3
[ "$(workers_left)" = 0 ] || bad "$(workers_left) ranks left behind"
exit $fail
