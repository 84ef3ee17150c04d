#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/services/slurm.sh start|stop DIR — a real Slurm 22.05 on this host
# for the tests (SERVICES.md): slurmctld + four slurmd "fake nodes" n[1-4]
# (NodeAddr=127.0.0.1, distinct ports, each TmpFS=DIR/tmp/%n; CPUs=8 each,
# more than the host has, thanks to SlurmdParameters=config_overrides, so
# 8 tasks fit on a node), 8 fake GPUs
# per node (character devices made with mknod), topology/tree with leaf1 =
# n[1-2] and leaf2 = n[3-4] under one spine (DIR/topology.conf), AuthType=auth/none +
# CredType=cred/none (no munge daemon), accounting off. TaskPlugin is
# task/none unless P3D_SLURM_TASK_PLUGIN=task/affinity (then srun binds each
# task to its allocated CPUs: tests/e2e/slurm_cpus.sh).
#   start: writes DIR/slurm.conf, DIR/gres.conf, DIR/env (". DIR/env" sets
#          SLURM_CONF for the clients), starts the daemons, records their
#          PIDs (from their pid files) in DIR/pids, waits (<= 30 s) for the
#          four nodes to be idle. Exit 77 when slurm-wlm is absent or this
#          host cannot run it (not root, no mknod), 1 when it does not come up.
#   stop:  kills the recorded PIDs (TERM, then KILL), then any slurmstepd or
#          job task whose cwd or environment points into DIR, by PID.
set -u
cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
dir=$(mkdir -p "$dir" && cd "$dir" && pwd) || exit 2
NODES="n1 n2 n3 n4"

# Four consecutive free ports (slurm.conf takes Port=[a-b]) and one more.
free_ports() {
  python3 - <<'PY'
import socket, random
for _ in range(200):
    b = random.randint(20000, 30000)
    ok = True
    for p in range(b, b + 5):
        s = socket.socket()
        try: s.bind(("127.0.0.1", p))
        except OSError: ok = False
        finally: s.close()
        if not ok: break
    if ok:
        print(b); break
PY
}

stop_pid() {
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null
}

case $cmd in
start)
  for b in slurmctld slurmd srun sbatch squeue scontrol sinfo; do
    command -v "$b" >/dev/null || { echo "slurm-wlm not installed ($b missing)"; exit 77; }
  done
  [ "$(id -u)" = 0 ] || { echo "the fake-node Slurm needs root (SlurmUser=root)"; exit 77; }
  host=$(hostname -s)
  base=$(free_ports)
  [ -n "$base" ] || { echo "no 5 consecutive free ports" >&2; exit 1; }
  mkdir -p "$dir/state" "$dir/log" "$dir/fakedev"
  for n in $NODES; do mkdir -p "$dir/spool/$n" "$dir/tmp/$n"; done
  for g in 0 1 2 3 4 5 6 7; do
    [ -c "$dir/fakedev/nvidia$g" ] || mknod "$dir/fakedev/nvidia$g" c 195 "$g" 2>/dev/null ||
      { echo "cannot mknod fake GPU devices here"; exit 77; }
  done
  cat >"$dir/slurm.conf" <<CONF
ClusterName=p3dtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$base
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=${P3D_SLURM_TASK_PLUGIN:-task/none}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=sched_interval=1
GresTypes=gpu
TopologyPlugin=topology/tree
SlurmdParameters=config_overrides
TmpFS=$dir/tmp/%n
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=2
MessageTimeout=10
NodeName=n[1-4] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$((base + 1))-$((base + 4))] CPUs=8 RealMemory=1000 Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  echo "NodeName=n[1-4] Name=gpu File=$dir/fakedev/nvidia[0-7]" >"$dir/gres.conf"
  # topology/tree: two leaf switches under one spine, so every task gets
  # SLURM_TOPOLOGY_ADDR (spine.leafN.nK) and racks arrive without a file
  printf 'SwitchName=leaf1 Nodes=n[1-2]\nSwitchName=leaf2 Nodes=n[3-4]\nSwitchName=spine Switches=leaf[1-2]\n' \
    >"$dir/topology.conf"
  echo "export SLURM_CONF=$dir/slurm.conf" >"$dir/env"
  export SLURM_CONF=$dir/slurm.conf
  : >"$dir/pids"
  slurmctld -f "$SLURM_CONF" -i >"$dir/log/slurmctld.out" 2>&1 ||
    { echo "slurmctld failed to start:" >&2; tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmctld.out" >&2; exit 1; }
  for _ in $(seq 100); do [ -s "$dir/slurmctld.pid" ] && break; sleep 0.05; done
  cat "$dir/slurmctld.pid" >>"$dir/pids" 2>/dev/null
  for n in $NODES; do
    slurmd -f "$SLURM_CONF" -N "$n" >"$dir/log/slurmd.$n.out" 2>&1 ||
      { echo "slurmd -N $n failed:" >&2; tail -5 "$dir/log/slurmd.$n.log" >&2; "$0" stop "$dir"; exit 1; }
  done
  for n in $NODES; do
    for _ in $(seq 100); do [ -s "$dir/slurmd.$n.pid" ] && break; sleep 0.05; done
    cat "$dir/slurmd.$n.pid" >>"$dir/pids" 2>/dev/null
  done
  for _ in $(seq 300); do
    st=$(sinfo -h -N -o '%T' 2>/dev/null | sort -u | tr '\n' ' ')
    [ "$st" = "idle " ] && { echo "$SLURM_CONF"; exit 0; }
    sleep 0.1
  done
  echo "the fake nodes did not become idle (states: $st)" >&2
  tail -3 "$dir/log/slurmctld.log" >&2
  "$0" stop "$dir"
  exit 1
  ;;
stop)
  if [ -f "$dir/pids" ]; then
    for pid in $(cat "$dir/pids"); do stop_pid "$pid"; done
  fi
  # pid files written after start recorded them (a restarted daemon)
  for f in "$dir"/slurmctld.pid "$dir"/slurmd.*.pid; do
    [ -s "$f" ] && stop_pid "$(cat "$f")"
  done
  # strays: slurmstepd and job tasks that belong to this Slurm (their cwd
  # or environment points into DIR); never ourselves or our parents
  keep=" $$ $PPID "
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    case $keep in *" $pid "*) continue ;; esac
    comm=$(cat "$d/comm" 2>/dev/null) || continue
    cwd=$(readlink "$d/cwd" 2>/dev/null)
    mine=0
    case $cwd in "$dir"|"$dir"/*) mine=1 ;; esac
    if [ "$comm" = slurmstepd ] || tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -q '^SLURM_JOB_ID='; then
      tr '\0' '\n' 2>/dev/null <"$d/environ" | grep -q "^SLURM_CONF=$dir/slurm.conf\$" && mine=1
    else
      mine=0  # only slurmstepd and job tasks, never a shell that merely cd'd here
    fi
    [ "$mine" = 1 ] && kill -KILL "$pid" 2>/dev/null
  done
  rm -f "$dir/pids"
  exit 0
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
