#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# torchrun's command lines with torchrun replaced by par3drun
# (docs/torchrun.md), one PyTorch gloo program on CPU: every variable
# torch's elastic agent defines is compared with what this machine's
# torchrun gives the same program (where its torchrun works; Debian's 1.13
# on Python 3.11 needs --redirects 1 --tee 1, added to torchrun's line
# only), else with the values docs/torchrun.md documents; the exit codes
# of a success, a crash and SIGINT; the positional script, -m, --no-python
# and --run-path forms; -r/-t/--local-ranks-filter; and the error file's
# root cause (a rank raising under torch's @record). Skipped (77) when no
# python3 here imports torch (Debian: apt-get install python3-torch).
. "$(dirname "$0")/lib/launch_common.sh"
. "$(dirname "$0")/lib/torch_py.sh"
export TMPDIR=$T # the run directories kept after the crash and SIGINT go with $T
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# the program: env (the agent's variables, after a real gloo all-reduce),
# crash (rank 1 raises under @record), wait (ready files, then sleep)
cat >"$T/prog.py" <<'PY'
import json, os, sys, time
import torch, torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
        "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", "TORCHELASTIC_ERROR_FILE",
        "OMP_NUM_THREADS"]

def fail_here(rank):
    raise ValueError(f"rank {rank} fails on purpose")

@record
def main():
    mode = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(1) * (rank + 1)
    dist.all_reduce(t)
    if mode == "env":
        print("ENV " + json.dumps({k: os.environ.get(k) for k in KEYS}, sort_keys=True), flush=True)
        print("SUM %d ARGS %s" % (int(t.item()), json.dumps(sys.argv[2:])), flush=True)
    elif mode == "crash" and rank == 1:
        fail_here(rank)
    elif mode == "wait":
        open(os.path.join(sys.argv[2], "ready-%d" % rank), "w").close()
        time.sleep(120)
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
PY

# ---- does this machine's torchrun work? --------------------------------
TR=("$PY" -m torch.distributed.run)
TRFIX=()
if ! (cd "$T" && timeout 120 "${TR[@]}" --nproc_per_node 1 --monitor_interval 0.1 prog.py env >"$T/tr0.out" 2>&1); then
  TRFIX=(--redirects 1 --tee 1) # Debian's torch 1.13 on Python 3.11 (Std.from_str)
  (cd "$T" && timeout 120 "${TR[@]}" --nproc_per_node 1 --monitor_interval 0.1 "${TRFIX[@]}" prog.py env \
    >"$T/tr0.out" 2>&1) || TR=()
fi
[ ${#TR[@]} -gt 0 ] && echo "comparing with torchrun (${TRFIX[*]:-no workaround})" ||
  echo "this machine's torchrun does not run: comparing with docs/torchrun.md's values"

# ---- one torchrun line, both launchers ---------------------------------
P=$(free_port)
LINE=(--nnodes 1:1 --node_rank 0 --nproc_per_node 2 --rdzv_id t46 --role trainer --max_restarts 1
  --monitor_interval 0.1 --start_method spawn --master_addr 127.0.0.1 --master_port "$P")
(cd "$T" && env -u OMP_NUM_THREADS "$PAR3DRUN" "${LINE[@]}" --rdzv_conf join_timeout=30 --numa_binding node \
  --signals_to_handle SIGTERM,SIGINT,SIGHUP,SIGQUIT --event_log_handler null prog.py env x --y=1) \
  >"$T/p.out" 2>"$T/p.err" || { cat "$T/p.err"; fail "the torchrun line under par3drun failed"; }
sed -n 's/.*ENV //p' "$T/p.out" >"$T/p.env"
[ "$(grep -c 'SUM 3 ARGS \["x", "--y=1"\]' "$T/p.out")" = 2 ] || { cat "$T/p.out"; fail "no all-reduce or arguments lost"; }
grep -q "^par3drun: running prog.py with $PY" "$T/p.err" && fail "said which python although PAR3D_PYTHON chose it"
if [ ${#TR[@]} -gt 0 ]; then
  P2=$(free_port)
  LINE[${#LINE[@]}-1]=$P2
  (cd "$T" && env -u OMP_NUM_THREADS timeout 120 "${TR[@]}" "${LINE[@]}" "${TRFIX[@]}" prog.py env x --y=1) \
    >"$T/t.out" 2>&1 || { cat "$T/t.out"; fail "torchrun failed"; }
  sed -n 's/.*ENV //p' "$T/t.out" | sed "s/\"$P2\"/\"$P\"/" >"$T/t.env"
  [ "$(grep -c 'SUM 3 ARGS \["x", "--y=1"\]' "$T/t.out")" = 2 ] || { cat "$T/t.out"; fail "torchrun: no all-reduce"; }
else
  # docs/torchrun.md's values for the same line
  for r in 0 1; do
    printf '{"GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "LOCAL_RANK": "%d", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "%s", "OMP_NUM_THREADS": "1", "RANK": "%d", "ROLE_NAME": "trainer", "ROLE_RANK": "%d", "ROLE_WORLD_SIZE": "2", "TORCHELASTIC_MAX_RESTARTS": "1", "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_RUN_ID": "t46", "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "WORLD_SIZE": "2"}\n' \
      "$r" "$P" "$r" "$r"
  done >"$T/t.env"
fi
# every variable equal, but the documented differences (docs/torchrun.md,
# "The ranks' environment")
"$PY" - "$T/p.env" "$T/t.env" "$T" <<'PY' || fail "the environments differ (above)"
import json, os, sys
def load(p):
    return {e["RANK"]: e for e in map(json.loads, open(p).read().split("\n")[:-1])}
par, tr, ok = load(sys.argv[1]), load(sys.argv[2]), True
assert sorted(par) == sorted(tr) == ["0", "1"], (sorted(par), sorted(tr))
files = set()
for r in par:
    p, t = par[r], tr[r]
    for k in sorted(set(p) | set(t)):
        if k == "TORCHELASTIC_ERROR_FILE":      # per rank, in par3drun's run directory
            good = p[k].endswith("/error-rank-%s.json" % r) and os.path.isabs(p[k])
            files.add(p[k])
        elif k == "OMP_NUM_THREADS":              # torchrun 1; par3drun the rank's CPUs
            good = int(p[k]) >= 1 and t[k] == "1"
        elif k in ("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"):
            good = p["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1" and p["NCCL_ASYNC_ERROR_HANDLING"] is None
        else:
            good = p.get(k) == t.get(k)
        if not good:
            ok = False
            print("rank %s %s: par3drun %r, torchrun %r" % (r, k, p.get(k), t.get(k)))
assert len(files) == 2, files
sys.exit(0 if ok else 1)
PY

# ---- exit codes: success (above), a crash, SIGINT ----------------------
set +e
(cd "$T" && "$PAR3DRUN" --nproc_per_node 2 --max_restarts 0 prog.py crash >"$T/c.out" 2>"$T/c.err")
prc=$?
trc=1 # docs/torchrun.md: torchrun exits 1 for a failed rank
if [ ${#TR[@]} -gt 0 ]; then
  (cd "$T" && timeout 120 "${TR[@]}" --nproc_per_node 2 --max_restarts 0 --monitor_interval 0.1 "${TRFIX[@]}" \
    --master_port "$(free_port)" prog.py crash >"$T/tc.out" 2>&1)
  trc=$?
fi
set -e
[ "$prc" = 1 ] && [ "$trc" = 1 ] || { cat "$T/c.err"; fail "a crash: par3drun exited $prc, torchrun $trc; want 1 and 1"; }
# the root cause: the rank, torch's exception from its error file, the
# frame that raised (prog.py's fail_here), the time
grep -q '^par3drun: root cause: rank 1 ' "$T/c.err" || { cat "$T/c.err"; fail "the root cause is not rank 1"; }
grep -q "^  exception (its TORCHELASTIC_ERROR_FILE, 20[0-9-]*T[0-9:]*Z): ValueError: rank 1 fails on purpose$" \
  "$T/c.err" || { cat "$T/c.err"; fail "the root cause lacks @record's exception"; }
line=$(grep -n 'raise ValueError' "$T/prog.py" | cut -d: -f1)
grep -q "^    $T/prog.py:$line in fail_here$" "$T/c.err" || { cat "$T/c.err"; fail "the root cause lacks the frame prog.py:$line"; }

# in torchrun's layout (-r/-t) the error file is attempt_N/LOCAL_RANK/error.json
# beside the logs, as torchrun's, and the root cause reads it from there
set +e
(cd "$T" && "$PAR3DRUN" --nproc_per_node 2 --max_restarts 0 --rdzv_id ef -r 3 --log_dir "$T/eflogs" prog.py crash \
  >"$T/ce.out" 2>"$T/ce.err")
set -e
ls "$T"/eflogs/ef_*/attempt_0/1/error.json >/dev/null 2>&1 || { find "$T/eflogs"; fail "no attempt_0/1/error.json"; }
grep -q 'rank 1 fails on purpose' "$T"/eflogs/ef_*/attempt_0/1/error.json || fail "error.json lacks the exception"
grep -q "^  exception (its TORCHELASTIC_ERROR_FILE, 20[0-9-]*T[0-9:]*Z): ValueError: rank 1 fails on purpose$" \
  "$T/ce.err" || { cat "$T/ce.err"; fail "the root cause lacks the exception from attempt_0/1/error.json"; }

# SIGINT while every rank waits: par3drun 130 (docs/torchrun.md: torchrun's
# agent also ends on SIGINT, exit 130 from the SignalException on 2.x)
sigint() { # $1 name, rest: the command
  local name=$1 pid rc
  shift
  mkdir -p "$T/$name"
  (cd "$T" && exec "$@" prog.py wait "$T/$name" >"$T/$name.out" 2>&1) &
  pid=$!
  for _ in $(seq 600); do [ -e "$T/$name/ready-0" ] && [ -e "$T/$name/ready-1" ] && break; sleep 0.1; done
  [ -e "$T/$name/ready-1" ] || { cat "$T/$name.out"; fail "$name: the ranks never got ready"; }
  kill -INT "$pid"
  set +e
  wait "$pid"
  rc=$?
  set -e
  echo "$rc"
}
prc=$(sigint psig "$PAR3DRUN" --nproc_per_node 2)
[ "$prc" = 130 ] || { cat "$T/psig.out"; fail "SIGINT: par3drun exited $prc, want 130"; }
if [ ${#TR[@]} -gt 0 ]; then
  trc=$(sigint tsig "${TR[@]}" --nproc_per_node 2 --monitor_interval 0.1 "${TRFIX[@]}" --master_port "$(free_port)")
  echo "SIGINT: par3drun $prc, torchrun $trc"
  case $trc in 1 | 130) ;; *) cat "$T/tsig.out"; fail "SIGINT: torchrun exited $trc (docs/torchrun.md says 1 or 130)" ;; esac
fi

# ---- the program forms --------------------------------------------------
mkdir -p "$T/pkg"
printf 'import os\nprint("mod rank", os.environ["RANK"])\n' >"$T/pkg/hello.py"
touch "$T/pkg/__init__.py"
(cd "$T" && "$PAR3DRUN" --nproc_per_node 2 --no-tag-output -m pkg.hello) >"$T/m.out" 2>&1 || { cat "$T/m.out"; fail "-m failed"; }
[ "$(grep -c '^mod rank [01]$' "$T/m.out")" = 2 ] || { cat "$T/m.out"; fail "-m pkg.hello did not run on 2 ranks"; }
printf '#!/bin/sh\necho "sh rank $RANK $1"\n' >"$T/tool.py"
chmod +x "$T/tool.py"
(cd "$T" && "$PAR3DRUN" --nproc_per_node 1 --no_python ./tool.py a) >"$T/n.out" 2>&1 || { cat "$T/n.out"; fail "--no-python failed"; }
grep -q '^sh rank 0 a$' "$T/n.out" || { cat "$T/n.out"; fail "--no-python did not run the script itself"; }
printf 'import sys\nprint("py", sys.argv[1:])\n' >"$T/plain.py"
(cd "$T" && "$PAR3DRUN" --nproc_per_node 1 --run_path -- "$T/plain.py" q) >"$T/r.out" 2>&1 || { cat "$T/r.out"; fail "--run-path failed"; }
grep -q "^py \['q'\]$" "$T/r.out" || { cat "$T/r.out"; fail "--run-path did not run under python"; }
# python3 from PATH is said once
mkdir -p "$T/bin"
ln -sf "$PY" "$T/bin/python3"
(cd "$T" && env -u PAR3D_PYTHON PATH="$T/bin:$PATH" "$PAR3DRUN" --nproc_per_node 2 plain.py z) >"$T/s.out" 2>&1 ||
  { cat "$T/s.out"; fail "the positional script failed"; }
[ "$(grep -c "^par3drun: running plain.py with $T/bin/python3 (python3 on PATH" "$T/s.out")" = 1 ] ||
  { cat "$T/s.out"; fail "the interpreter was not said once"; }

# ---- output: --local-ranks-filter, -r 3, -t 3 ---------------------------
(cd "$T" && "$PAR3DRUN" --nproc_per_node 2 --local_ranks_filter 1 plain.py f) >"$T/f.out" 2>&1 || fail "filter run failed"
[ "$(grep -c "py \['f'\]" "$T/f.out")" = 1 ] || { cat "$T/f.out"; fail "--local-ranks-filter 1 did not show one rank"; }
(cd "$T" && "$PAR3DRUN" --nproc_per_node 2 -r 3 --log_dir "$T/logs" plain.py g) >"$T/g.out" 2>&1 || fail "-r 3 failed"
grep -q "py \['g'\]" "$T/g.out" && { cat "$T/g.out"; fail "-r 3 still showed the output"; }
[ "$(cat "$T"/logs/*/attempt_0/[01]/stdout.log | grep -c "py \['g'\]")" = 2 ] || fail "-r 3: torchrun's layout lacks the output"
(cd "$T" && "$PAR3DRUN" --nproc_per_node 2 -t3 --log_dir "$T/logs2" plain.py h) >"$T/h.out" 2>&1 || fail "-t3 failed"
[ "$(grep -c "py \['h'\]" "$T/h.out")" = 2 ] && [ "$(cat "$T"/logs2/*/attempt_0/[01]/stdout.log | grep -c "py \['h'\]")" = 2 ] ||
  fail "-t3: not both shown and logged"

# ---- torchrun's --log-dir layout: the same tree, the same files ---------
# (the map form runs under Debian's torch 1.13 too; every value of -r/-t:
# cli_torchrun_logs.sh)
TREE=(--nproc_per_node 2 --rdzv_id lay --redirects 0:1,1:2 --tee 1:1 --no_python sh -c
  'echo "out L$LOCAL_RANK"; echo "err L$LOCAL_RANK" >&2')
# relative paths under the one run directory, each with its content
tree_of() {
  local d
  d=$(find "$1" -mindepth 1 -maxdepth 1)
  [ "$(echo "$d" | wc -l)" = 1 ] && [[ "$(basename "$d")" =~ ^lay_[a-z0-9_]{8}$ ]] ||
    fail "$1: not one run directory named lay_XXXXXXXX: $d"
  (cd "$d" && find . | sort | while read -r f; do
    [ -f "$f" ] && echo "$f: $(cat "$f")" || echo "$f"
  done)
}
(cd "$T" && "$PAR3DRUN" --log_dir "$T/play" "${TREE[@]}") >"$T/pl.out" 2>"$T/pl.err" || fail "the layout run failed"
tree_of "$T/play" >"$T/pl.tree"
if [ ${#TR[@]} -gt 0 ]; then
  (cd "$T" && timeout 120 "${TR[@]}" --monitor_interval 0.1 --log_dir "$T/tlay" "${TREE[@]}") >"$T/tl.out" 2>&1 ||
    { cat "$T/tl.out"; fail "torchrun's layout run failed"; }
  tree_of "$T/tlay" >"$T/tl.tree"
  # the terminal: the same lines but for the prefixes (torchrun's
  # [default1]: on teed lines, par3drun's tag on every line)
  grep -o '[oe][ur][tr] L[01]$' "$T/tl.out" | sort >"$T/tl.lines"
else
  printf '%s\n' . ./attempt_0 ./attempt_0/0 "./attempt_0/0/stdout.log: out L0" ./attempt_0/1 \
    "./attempt_0/1/stderr.log: err L1" "./attempt_0/1/stdout.log: out L1" >"$T/tl.tree"
  printf '%s\n' "err L0" "out L1" >"$T/tl.lines"
fi
diff "$T/tl.tree" "$T/pl.tree" || fail "torchrun's --log-dir tree and par3drun's differ (above)"
cat "$T/pl.out" "$T/pl.err" | grep -o '[oe][ur][tr] L[01]$' | sort >"$T/pl.lines"
diff "$T/tl.lines" "$T/pl.lines" || fail "the terminal shows other streams than torchrun's (above)"
echo "ok"
