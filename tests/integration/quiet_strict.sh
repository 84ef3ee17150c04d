#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --quiet and --strict (issue 46):
#  1. --quiet: a clean launch (one node, emulated nodes, two rendezvous
#     nodes), a dry run and a launch with a warning-level check print
#     nothing on stderr; the ranks' own output still comes through, and
#     without --quiet the same runs say their start/end lines;
#  2. --quiet keeps the errors: a failing job's end line (where its run
#     directory is kept) and a refused placement's message;
#  3. --strict: a warning-level check (BATCH_NOT_DIVISIBLE) makes the dry
#     run and the launch exit 2, nothing started; without it they pass;
#  4. the "world larger than" messages and the checks' texts name CPU
#     slots on nodes without GPUs, and the GPUs that --spares holds back.
. "$(dirname "$0")/lib/launch_common.sh"
export TMPDIR=$T
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml
noerr() { # name file: the file must be empty
  [ ! -s "$2" ] || { echo "--- stderr:"; cat "$2"; fail "$1: --quiet printed on stderr"; }
}

echo "== 1. --quiet: nothing on stderr" >&2
"$PAR3DRUN" --quiet --nproc-per-node 2 -- sh -c 'echo "out of rank $RANK"' >"$T/o1" 2>"$T/e1" || fail "exit $?"
noerr "one node" "$T/e1"
[ "$(grep -c '^.*out of rank [01]$' "$T/o1")" = 2 ] || { cat "$T/o1"; fail "the ranks' output is missing"; }
"$PAR3DRUN" --nproc-per-node 2 -- /bin/true >/dev/null 2>"$T/e1n" || fail "exit $?"
grep -q '^par3drun: job [0-9a-f]*: 2 ranks' "$T/e1n" || { cat "$T/e1n"; fail "without --quiet: no start line"; }
grep -q 'OMP_NUM_THREADS is not set' "$T/e1n" || { cat "$T/e1n"; fail "without --quiet: no OMP_NUM_THREADS note"; }
grep -q '^par3drun: job [0-9a-f]* ended: exit 0' "$T/e1n" || { cat "$T/e1n"; fail "without --quiet: no end line"; }
"$PAR3DRUN" --quiet --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --model llama3-8b --global-batch 7 -- /bin/true \
  >/dev/null 2>"$T/e2" || fail "exit $?"
noerr "emulated, with a warning-level check" "$T/e2"
"$PAR3DRUN" --quiet --dry-run --cluster "$CLUSTER" --tp 2 --pp 2 --model llama3-8b --global-batch 7 \
  >/dev/null 2>"$T/e3" || fail "exit $?"
noerr "dry run" "$T/e3"
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/token"; chmod 600 "$T/token"
for i in 0 1; do
  ( set +e; timeout 120 "$PAR3DRUN" --quiet --nnodes 2 --node-rank $i --rdzv "static:127.0.0.1:$P" \
      --rdzv-token-file "$T/token" --nproc-per-node 1 --topology "synthetic:pack:2 pu:2" -- /bin/true \
      >/dev/null 2>"$T/m$i.err"; echo $? >"$T/m$i.rc" ) &
done
wait
for i in 0 1; do
  [ "$(cat "$T/m$i.rc")" = 0 ] || { cat "$T/m$i.err"; fail "rendezvous node $i: exit $(cat "$T/m$i.rc")"; }
  noerr "rendezvous node $i" "$T/m$i.err"
done
echo "ok: --quiet prints nothing but the ranks' output on clean runs"

echo "== 2. --quiet keeps the errors" >&2
set +e
"$PAR3DRUN" --quiet --nproc-per-node 1 -- /bin/false >/dev/null 2>"$T/e4"; rc=$?
set -e
[ "$rc" = 1 ] || fail "a failing rank: exit $rc, want 1"
grep -q '^par3drun: job [0-9a-f]* ended: exit 1 .*kept' "$T/e4" || { cat "$T/e4"; fail "--quiet hid the failed job's end line"; }
set +e
"$PAR3DRUN" --quiet --emulate --cluster "$CLUSTER" --tp 32 -- /bin/true >/dev/null 2>"$T/e5"; rc=$?
set -e
[ "$rc" = 2 ] && [ -s "$T/e5" ] || { cat "$T/e5"; fail "a refused placement under --quiet: exit $rc, or no message"; }
echo "ok: errors are printed under --quiet"

echo "== 3. --strict" >&2
for mode in dry launch; do
  if [ $mode = dry ]; then args=(--dry-run); else args=(); fi
  prog=(); [ $mode = launch ] && prog=(-- sh -c 'touch "$TMPDIR/started"')
  set +e
  "$PAR3DRUN" --strict "${args[@]}" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --model llama3-8b --global-batch 7 \
    "${prog[@]}" >"$T/s.out" 2>"$T/s.err"; rc=$?
  set -e
  [ "$rc" = 2 ] || { cat "$T/s.out" "$T/s.err"; fail "--strict $mode with a warning: exit $rc, want 2"; }
  grep -q 'BATCH_NOT_DIVISIBLE' "$T/s.out" "$T/s.err" || { cat "$T/s.out" "$T/s.err"; fail "--strict $mode: the check is not named"; }
  [ ! -e "$T/started" ] || fail "--strict launch started a rank"
  "$PAR3DRUN" "${args[@]}" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --model llama3-8b --global-batch 7 \
    "${prog[@]}" >/dev/null 2>&1 || fail "without --strict the $mode fails"
  "$PAR3DRUN" --strict "${args[@]}" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --model llama3-8b --global-batch 8 \
    "${prog[@]}" >/dev/null 2>&1 || fail "--strict $mode without any warning fails"
  rm -f "$T/started"
done
grep -q '^  error    BATCH_NOT_DIVISIBLE' <("$PAR3DRUN" --strict --dry-run --cluster "$CLUSTER" --tp 2 --pp 2 \
  --model llama3-8b --global-batch 7 2>/dev/null) || fail "--strict: the report does not list the check as an error"
echo "ok: --strict makes warning-level checks errors (exit 2, nothing started)"

echo "== 4. world larger than the slots: CPU slots and spares" >&2
set +e
out=$("$PAR3DRUN" --dry-run --topology "synthetic:pack:2 pu:2" --nproc-per-node 4 --tp 2 --dp 4 2>&1)
set -e
grep -q 'is larger than the 4 CPU slots available' <<<"$out" || fail "CPU slots: $out"
grep -q 'GPU' <<<"$out" && fail "CPU slots called GPUs: $out"
out=$("$PAR3DRUN" --dry-run --topology "synthetic:pack:2 pu:2" --nproc-per-node 4 --tp 3 --dp 1 2>&1)
grep -q 'tp=3 does not divide the 4 CPU slots of node synthetic: either CPU slots stay idle' <<<"$out" ||
  fail "TP_NOT_DIVIDING_GPUS_PER_NODE on CPU slots: $out"
grep -q 'the job uses 3 of 4 CPU slots: 1 CPU slot stays idle' <<<"$out" || fail "NODES_IDLE on CPU slots: $out"
C3=$T/three.json
printf '{"nodes": [{"name": "n[1-3]", "topology": "%s", "rack": "r1"}]}\n' "$TOPO" >"$C3"
set +e
out=$("$PAR3DRUN" --dry-run --cluster "$C3" --tp 8 --dp 3 --spares 1 2>&1)
set -e
grep -q 'larger than the 16 GPUs available (not counting the 8 GPUs of the 1 --spares node' <<<"$out" ||
  fail "spares: $out"
echo "ok: the messages name CPU slots and the spares' GPUs"
