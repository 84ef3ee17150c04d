#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# elastic_torch_grow.sh — examples/elastic/ddp_accum.py (PyTorch DDP, gloo,
# CPU) shrinking and growing under par3drun itself: three static agents on
# loopback, one rank a node (--nproc-per-node 1, dp 3: one replica a
# node), no spare, --min-dp 1, --global-batch 12 --micro-batch 2 (2
# micro-batches a replica at dp 3, 3 at dp 2). Node rank 2's par3drun
# SIGKILLed -> the job shrinks to dp 2 and goes on from the checkpoint;
# `par3drun --join` on a new agent -> the job grows back to dp 3 at the
# checkpoint the program reports on its progress line (ckpt=). Every agent
# left and the joined one exit 0; the loss of every step equals, to 1e-9,
# the one of a run at dp 3 that never stopped (float64: only the order of
# the sum differs), and the log shows widths 3, 2, 3 in that order.
#
# The program trains long until the grow's restart (2), then 20 steps past
# its newest logged step, so the job cannot end before the grow.
. "$(dirname "$0")/lib/multinode_lib.sh"
. "$P3D_SRC/tests/integration/lib/torch_py.sh"
PROG=$P3D_SRC/examples/elastic/ddp_accum.py
H100=$P3D_SRC/examples/topologies/dgx-h100.xml
export OMP_NUM_THREADS=1
cat >"$T/w.sh" <<EOF
#!/usr/bin/env bash
steps=100000
if [ "\${P3D_RESTART_COUNT:-0}" -ge 2 ]; then
  last=\$(tail -1 "$T/el.txt" | awk '{print \$2}')
  steps=\$((\${last:-0} + 20))
fi
exec "$PY" "$PROG" --steps "\$steps" --ckpt "$T/el.pt" --log "$T/el.txt"
EOF
chmod +x "$T/w.sh"
# waits (bounded: 180 s) until $1 holds, polling
until_true() {
  for _ in $(seq 1800); do eval "$1" && return 0; sleep 0.1; done
  return 1
}
P=$(free_port)
for i in 0 1 2; do
  "$PAR3DRUN" --nnodes 3 --node-rank "$i" --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" \
    --topology "$H100" --nproc-per-node 1 --min-dp 1 --global-batch 12 --micro-batch 2 --max-restarts 3 \
    --grace 2 --no-tag-output --run-dir "$T/t.rd$i" -- "$T/w.sh" >"$T/t.$i.out" 2>"$T/t.$i.err" &
  AG[$i]=$!
  PIDS+=($!)
done
ev=$T/t.rd0/events.jsonl
until_true '[ "$(cat "$T/el.txt" 2>/dev/null | grep -c "width 3")" -ge 3 ]' ||
  { bad "no steps at dp 3"; sed 's/^/  /' "$T/t.0.err"; exit 1; }
kill -KILL "${AG[2]}"
until_true 'grep -q "\"restart\": 1, \"recovery_s\"" "$ev" 2>/dev/null && [ "$(grep -c "width 2" "$T/el.txt")" -ge 3 ]' ||
  { bad "the job did not go on at dp 2"; sed 's/^/  /' "$T/t.0.err"; exit 1; }
"$PAR3DRUN" --join --rdzv "static:127.0.0.1:$P" --rdzv-token-file "$T/token" --topology "$H100" \
  --nproc-per-node 1 --no-tag-output --run-dir "$T/t.rd3" -- "$T/w.sh" >"$T/t.3.out" 2>"$T/t.3.err" &
AG[3]=$!
PIDS+=($!)
until_true 'grep -q "\"event\": \"grow\"" "$ev" 2>/dev/null' ||
  { bad "the job did not grow"; sed 's/^/  /' "$T/t.0.err"; sed 's/^/  joiner: /' "$T/t.3.err"; }
codes=""
for i in 0 1 3; do wait "${AG[$i]}"; codes="$codes $?"; done
wait "${AG[2]}" 2>/dev/null
[ "$codes" = " 0 0 0" ] || { bad "exit codes$codes, want 0 0 0"; tail -20 "$T/t.0.err" | sed 's/^/  /'; tail -20 "$T/t.3.err" | sed 's/^/  joiner: /'; }
grep -q '"event": "grow", .*"reason": "the spares hold 1 more replica, at the ranks. checkpoint step' "$ev" ||
  bad "the grow did not come at the program's checkpoint"
# the widths in order: 3 ..., 2 ..., 3 ...
w=$(awk '{print $4}' "$T/el.txt" | uniq | tr '\n' ' ')
[ "$w" = "3 2 3 " ] || bad "the widths went '$w', want '3 2 3 '"
# the reference: dp 3 on one node, never stopped, as many steps
n=$(tail -1 "$T/el.txt" | awk '{print $2}')
(cd "$T" && "$PAR3DRUN" --nproc-per-node 3 --global-batch 12 --micro-batch 2 --no-tag-output \
  "$PROG" --steps "$n" --ckpt "$T/ref.pt" --log "$T/ref.txt") >"$T/ref.out" 2>&1 ||
  { bad "the reference run failed"; tail -20 "$T/ref.out"; }
"$PY" - "$T/ref.txt" "$T/el.txt" <<'PY' || bad "the losses differ from the uninterrupted run's"
import sys
ref = {int(l.split()[1]): float(l.split()[5]) for l in open(sys.argv[1])}
el = [l.split() for l in open(sys.argv[2])]
seen = set()
for a in el:
    s, y = int(a[1]), float(a[5])
    assert s in ref, f"step {s} is not in the reference"
    assert abs(ref[s] - y) <= 1e-9 * abs(ref[s]), f"step {s}: {ref[s]} uninterrupted, {y} across widths"
    seen.add(s)
# a step whose log line a SIGKILL cut short may be missing, no more than one per restart
assert len(ref) - len(seen) <= 2, f"{len(ref) - len(seen)} steps missing from the log"
print(f"{len(seen)} steps, dp 3 -> 2 -> 3 under par3drun: the loss of the uninterrupted run")
PY
sleep 0.3
[ "$(leftovers)" = 0 ] || bad "$(leftovers) processes left behind"
[ "$fail" = 0 ] && echo "PASS elastic_torch_grow"
exit "$fail"
