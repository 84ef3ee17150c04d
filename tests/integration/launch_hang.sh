#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --hang-timeout: a rank that touched $P3D_HEARTBEAT and then stops (SIGSTOP)
# is found hung, gets --hang-signal (SIGABRT by default) and counts as a
# failure: the job restarts in place. A rank that never touched the file is
# not watched; output counts as a sign of life. A bad --hang-signal exits 2
# before anything starts.
. "$(dirname "$0")/lib/launch_common.sh"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
[ -n "$P3D_HEARTBEAT" ] || { echo "no P3D_HEARTBEAT" >&2; exit 9; }
case "$P3D_RESTART_COUNT.$RANK" in
0.1) touch "$P3D_HEARTBEAT"; kill -STOP $$; exit 0 ;;     # hangs for good
0.*) exec sleep 100 ;;
1.0) sleep 1.5; exit 0 ;;                                   # never touched: not watched
1.1) touch "$P3D_HEARTBEAT"; for i in 1 2 3 4 5 6; do echo "alive $i"; sleep 0.25; done; exit 0 ;;  # prints: alive
esac
SH
chmod +x "$T/w.sh"
set +e
"$PAR3DRUN" --nproc-per-node 2 --hang-timeout 0.7 --max-restarts 1 --grace 1 -- "$T/w.sh" >"$T/out" 2>&1
rc=$?
set -e
[ $rc = 0 ] || { cat "$T/out"; fail "exit code $rc, want 0 (the hung rank restarted)"; }
grep -q '^par3drun: rank 1 on node .* is hung (no heartbeat or output for 0.7 s): sending SIGABRT$' "$T/out" ||
  { cat "$T/out"; fail "no hang line"; }
grep -q '^par3drun: rank 1 failed (killed by signal 6 (ABRT)); restarting all ranks (restart 1 of 1)$' "$T/out" ||
  { cat "$T/out"; fail "no restart after the hang"; }
[ "$(grep -c 'is hung' "$T/out")" = 1 ] || { cat "$T/out"; fail "a rank that printed or never touched was called hung"; }
# out of restarts: the root cause says hung
set +e
"$PAR3DRUN" --nproc-per-node 2 --hang-timeout 0.5 --hang-signal SIGTERM --grace 1 -- "$T/w.sh" >"$T/out2" 2>&1
rc=$?
set -e
[ $rc = 143 ] || { cat "$T/out2"; fail "exit code $rc, want 143"; }
grep -q 'root cause: rank 1 .* was hung (no heartbeat or output for 0.5 s): ended by signal 15 (TERM)' "$T/out2" ||
  { cat "$T/out2"; fail "root cause does not say hung"; }
set +e
"$PAR3DRUN" --nproc-per-node 2 --hang-timeout 1 --hang-signal BOGUS -- true >"$T/out3" 2>&1
rc=$?
set -e
[ $rc = 2 ] || { cat "$T/out3"; fail "bad --hang-signal: exit $rc, want 2"; }
grep -q "hang-signal 'BOGUS': expected a signal name" "$T/out3" || { cat "$T/out3"; fail "bad --hang-signal message"; }
echo ok
