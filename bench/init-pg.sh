#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/init-pg.sh — how long torch.distributed.init_process_group("gloo")
# takes in each rank of an NP-rank CPU job under par3drun and under
# torchrun, measured in the same run, rounds interleaved so that load on
# the machine hits both alike (docs/torchrun.md, "init_process_group").
# Prints, per launcher, the median over rounds of the ranks' median and
# slowest init time, and "ready": from the launch to the last rank's init
# done (what a user waits for: torchrun's agent imports torch before it
# starts a rank, par3drun starts them at once); never fails on time.
# par3drun runs twice a round: as it launches by default (it serves the
# store itself, the agent store) and with --no-agent-store (the ranks'
# rank 0 serves it, as before the agent store).
#
# Two more lines explain the difference (neither launches anything of
# ours): "rank-0 store" starts the NP ranks from a Python loop with the
# variables par3drun gives (the ranks' rank 0 serves the store at
# MASTER_ADDR:MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=False); "agent
# store" does what torchrun's agent does (the store served by the parent
# before any rank starts, TORCHELASTIC_USE_AGENT_STORE=True). "connect
# retry" times one TCPStore client started 50 ms before its server: the
# delay torch's client waits after a refused connection.
#
#   bench/init-pg.sh [BUILD_DIR]        (default: build)
#   RUNS=5 NP=4 PY=/usr/bin/python3 bench/init-pg.sh   (about a minute a round on 2 CPUs)
#
# torchrun is torch's own (python -m torch.distributed.run); Debian's 1.13
# on Python 3.11 needs --redirects 1 --tee 1, which is added when a plain
# line fails.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-5}
np=${NP:-4}
par3drun=$PWD/$build/par3drun
[ -x "$par3drun" ] || { echo "bench: $par3drun not built (bash scripts/build.sh)"; exit 1; }
PY=${PY:-}
for p in $PY python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import torch.distributed' 2>/dev/null; then PY=$(command -v "$p"); break; fi
done
"$PY" -c 'import torch.distributed' 2>/dev/null || { echo "bench: no python3 here imports torch"; exit 1; }
T=$(mktemp -d /tmp/p3d-initpg.XXXXXX)
trap 'rm -rf "$T"' EXIT

cat >"$T/init.py" <<'PY'
import os, time
import torch.distributed as dist
t = time.perf_counter()
dist.init_process_group("gloo")
print("INIT %.4f DONE %.4f" % (time.perf_counter() - t, time.time()), flush=True)
dist.destroy_process_group()
PY
# NP ranks from a Python loop: "rank0" (par3drun's variables) or "agent"
# (torchrun's: this process serves the store first)
cat >"$T/spawn.py" <<'PY'
import os, socket, subprocess, sys
mode, np, script = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
store = None
if mode == "agent":
    from torch.distributed import TCPStore
    store = TCPStore("127.0.0.1", port, np, True, wait_for_workers=False)
env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(np),
           LOCAL_WORLD_SIZE=str(np), TORCHELASTIC_RESTART_COUNT="0",
           TORCHELASTIC_USE_AGENT_STORE="True" if store else "False")
ps = [subprocess.Popen([sys.executable, script], env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(np)]
sys.exit(max(p.wait() for p in ps))
PY
cat >"$T/retry.py" <<'PY'
import socket, subprocess, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
client = subprocess.Popen([sys.executable, "-c", f"""
import time, datetime
from torch.distributed import TCPStore
import sys; print("up", flush=True)
t = time.perf_counter()
TCPStore("127.0.0.1", {port}, 2, False, timeout=datetime.timedelta(seconds=30))
print("%.3f" % (time.perf_counter() - t), flush=True)
"""], stdout=subprocess.PIPE, text=True)
client.stdout.readline()
time.sleep(0.05)
from torch.distributed import TCPStore
server = TCPStore("127.0.0.1", port, 2, True)
print("connect-retry %s" % client.stdout.readline().strip())
client.wait()
PY

median() { sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]; else print "n/a"}'; }
# one round's figures from a launch's output: "median slowest" of its ranks
# and "ready": from $2 (the launch's start, epoch seconds) to the last
# rank's init done
figures() {
  local m s r
  m=$(sed -n 's/.*INIT \([0-9.]*\) .*/\1/p' "$1" | median)
  s=$(sed -n 's/.*INIT \([0-9.]*\) .*/\1/p' "$1" | sort -n | tail -1)
  r=$(sed -n 's/.*DONE //p' "$1" | sort -n | tail -1 | awk -v t0="$2" '{printf "%.3f", $1 - t0}')
  echo "$m ${s:-n/a} ${r:-n/a}"
}
now() { date +%s.%N; }

TR=("$PY" -m torch.distributed.run)
TRFIX=()
if ! (cd "$T" && timeout 120 "${TR[@]}" --nproc_per_node 1 --monitor_interval 0.1 init.py >"$T/probe" 2>&1); then
  TRFIX=(--redirects 1 --tee 1)
  (cd "$T" && timeout 120 "${TR[@]}" --nproc_per_node 1 --monitor_interval 0.1 "${TRFIX[@]}" init.py \
    >"$T/probe" 2>&1) || TR=()
fi

: >"$T/par.m"; : >"$T/par.s"; : >"$T/par.r"; : >"$T/pna.m"; : >"$T/pna.s"; : >"$T/pna.r"; : >"$T/tr.m"; : >"$T/tr.s"; : >"$T/tr.r"; : >"$T/r0.m"; : >"$T/ag.m"
for _ in $(seq "$runs"); do
  t0=$(now)
  (cd "$T" && PAR3D_PYTHON=$PY "$par3drun" --nproc-per-node "$np" --no-tag-output init.py >"$T/o" 2>/dev/null) || true
  read -r m s r < <(figures "$T/o" "$t0"); echo "$m" >>"$T/par.m"; echo "$s" >>"$T/par.s"; echo "$r" >>"$T/par.r"
  t0=$(now)
  (cd "$T" && PAR3D_PYTHON=$PY "$par3drun" --nproc-per-node "$np" --no-tag-output --no-agent-store init.py \
    >"$T/o" 2>/dev/null) || true
  read -r m s r < <(figures "$T/o" "$t0"); echo "$m" >>"$T/pna.m"; echo "$s" >>"$T/pna.s"; echo "$r" >>"$T/pna.r"
  if [ ${#TR[@]} -gt 0 ]; then
    port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
    t0=$(now)
    (cd "$T" && timeout 120 "${TR[@]}" --nproc_per_node "$np" --monitor_interval 0.1 "${TRFIX[@]}" \
      --master_port "$port" init.py >"$T/o" 2>&1) || true
    read -r m s r < <(figures "$T/o" "$t0"); echo "$m" >>"$T/tr.m"; echo "$s" >>"$T/tr.s"; echo "$r" >>"$T/tr.r"
  fi
  (cd "$T" && "$PY" spawn.py rank0 "$np" init.py >"$T/o" 2>/dev/null) || true
  figures "$T/o" 0 | awk '{print $1}' >>"$T/r0.m"
  (cd "$T" && "$PY" spawn.py agent "$np" init.py >"$T/o" 2>/dev/null) || true
  figures "$T/o" 0 | awk '{print $1}' >>"$T/ag.m"
done

echo "init_process_group(gloo), $np ranks on $(nproc) CPUs, median of $runs rounds (seconds; $("$PY" -c 'import torch; print("torch", torch.__version__)'))"
printf '  %-36s median %s  slowest rank %s  ready %s\n' "par3drun (agent store)" "$(median <"$T/par.m")" \
  "$(median <"$T/par.s")" "$(median <"$T/par.r")"
printf '  %-36s median %s  slowest rank %s  ready %s\n' "par3drun --no-agent-store" "$(median <"$T/pna.m")" \
  "$(median <"$T/pna.s")" "$(median <"$T/pna.r")"
if [ ${#TR[@]} -gt 0 ]; then
  printf '  %-36s median %s  slowest rank %s  ready %s\n' "torchrun ${TRFIX[*]}" "$(median <"$T/tr.m")" \
    "$(median <"$T/tr.s")" "$(median <"$T/tr.r")"
else
  echo "  torchrun: does not run here"
fi
printf '  %-36s median %s\n' "rank-0 store (par3drun's variables)" "$(median <"$T/r0.m")"
printf '  %-36s median %s\n' "agent store (torchrun's)" "$(median <"$T/ag.m")"
(cd "$T" && "$PY" retry.py) | sed 's/^connect-retry /  a TCPStore client started 50 ms before its server connects after /; s/$/ s/'
