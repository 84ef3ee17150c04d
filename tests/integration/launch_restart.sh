#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --max-restarts: a failing rank restarts every rank of the emulated job
# with the same ranks, nodes and GPUs; the restart count is in the
# environment; past the limit the failing code comes back.
. "$(dirname "$0")/lib/launch_common.sh"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
echo "$RANK $LOCAL_RANK $P3D_NODE $P3D_GPU $CUDA_VISIBLE_DEVICES" >>"$T_DIR/gen-$P3D_RESTART_COUNT"
[ "$TORCHELASTIC_RESTART_COUNT" = "$P3D_RESTART_COUNT" ] || exit 99
[ "$P3D_GENERATION" = "$P3D_RESTART_COUNT" ] || exit 98
while [ "$(wc -l <"$T_DIR/gen-$P3D_RESTART_COUNT")" -lt 16 ]; do sleep 0.05; done
if [ "$RANK" = 9 ] && [ "$P3D_RESTART_COUNT" -lt "$FAIL_UNTIL" ]; then exit 3; fi
[ "$RANK" = 9 ] || [ "$P3D_RESTART_COUNT" -ge "$FAIL_UNTIL" ] || exec sleep 100
SH
chmod +x "$T/w.sh"
T_DIR=$T FAIL_UNTIL=2 "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 2 --max-restarts 2 \
  -- "$T/w.sh" >"$T/out" 2>&1 || { cat "$T/out"; fail "par3drun exited $? with restarts left"; }
for g in 1 2; do
  diff <(sort -n "$T/gen-0") <(sort -n "$T/gen-$g") || fail "generation $g has other ranks than generation 0"
done
[ "$(grep -c 'restarting all ranks' "$T/out")" = 2 ] || fail "expected 2 restarts"
grep -q '^par3drun: rank 9 failed (exit code 3); restarting all ranks (restart 1 of 2)$' "$T/out" ||
  { cat "$T/out"; fail "no one-line message for the first restart"; }
! grep -q 'root cause' "$T/out" || { cat "$T/out"; fail "a root cause printed for a job that succeeded"; }
rm -f "$T"/gen-*
set +e
T_DIR=$T FAIL_UNTIL=5 "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 2 --max-restarts 1 \
  -- "$T/w.sh" >"$T/out" 2>&1
rc=$?
set -e
[ $rc = 3 ] || { cat "$T/out"; fail "exit code $rc past the restart limit, want 3"; }
[ "$(grep -c 'root cause' "$T/out")" = 1 ] || { cat "$T/out"; fail "want one root cause"; }
grep -q 'root cause: rank 9 .*exited with code 3, after 1 restart$' "$T/out" || { cat "$T/out"; fail "root cause"; }

# one node, no agent per node: the messages tell the sequence in order
cat >"$T/f.sh" <<'SH'
#!/bin/sh
[ "$RANK" = 1 ] && { echo "boom $P3D_RESTART_COUNT" >&2; exit 3; }
exec sleep 100
SH
chmod +x "$T/f.sh"
set +e
"$PAR3DRUN" --nproc-per-node 3 --max-restarts 2 --grace 2 -- "$T/f.sh" >"$T/out" 2>&1
rc=$?
set -e
[ $rc = 3 ] || { cat "$T/out"; fail "exit code $rc, want 3"; }
grep '^par3drun:' "$T/out" | grep -v "^par3drun: warning:\|^par3drun: job \\|^par3drun: OMP_NUM_THREADS " >"$T/msgs"
printf '%s\n' "par3drun: rank 1 failed (exit code 3); restarting all ranks (restart 1 of 2)" \
  "par3drun: rank 1 failed (exit code 3); restarting all ranks (restart 2 of 2)" >"$T/want"
head -2 "$T/msgs" | diff "$T/want" - || { cat "$T/out"; fail "restart messages"; }
sed -n 3p "$T/msgs" | grep -q '^par3drun: root cause: rank 1 (.*exited with code 3, after 2 restarts$' ||
  { cat "$T/out"; fail "the final root cause"; }
# the end summary's last line: the fault's verdict (one node: nothing to compare with)
sed -n 4p "$T/msgs" | grep -q '^par3drun: fault: unknown: rank 1 failed (exit code 3).*; stop: no restart left' ||
  { cat "$T/out"; fail "the fault's verdict"; }
[ "$(wc -l <"$T/msgs")" = 4 ] || { cat "$T/out"; fail "extra par3drun messages"; }
grep -q '^    .*boom 2$' "$T/out" || { cat "$T/out"; fail "the root cause lacks the last stderr line"; }
echo "ok"
