#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 44: RUN_DIR/heartbeat is where every rank writes (P3D_HEARTBEAT),
# so a rank can replace the directory itself with a symbolic link. The
# agent opens the directory once, before any rank starts, and reads and
# removes every rank-N file through that descriptor (openat/unlinkat,
# O_NOFOLLOW): a rank that swaps in a link to another directory cannot make
# the agent read or delete the rank-N files there. Rank 0 swaps the link
# in and writes through it; the victim directory's rank-0 and rank-1
# files must survive the job's end, and the job ends normally (exit 0).
. "$(dirname "$0")/lib/launch_common.sh"
mkdir "$T/victim"
printf 'step=7 busy=1.5\n' >"$T/victim/rank-0"
printf 'keep me\n' >"$T/victim/rank-1"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
d=$(dirname "$P3D_HEARTBEAT")
if [ "$RANK" = 0 ]; then
  mv "$d" "$d.moved" && ln -s "$VICTIM" "$d" || exit 9
  printf 'step=1 busy=0.5\n' >"$P3D_HEARTBEAT"
fi
sleep 1.5
exit 0
SH
chmod +x "$T/w.sh"
set +e
VICTIM=$T/victim "$PAR3DRUN" --nproc-per-node 2 --hang-timeout 30 --progress-interval 0.2 --run-dir "$T/rd" \
  -- "$T/w.sh" >"$T/out" 2>&1
rc=$?
set -e
[ $rc = 0 ] || { cat "$T/out"; fail "exit code $rc, want 0"; }
[ -L "$T/rd/heartbeat" ] || { ls -la "$T/rd"; fail "the rank did not swap the directory for a link (test broken)"; }
[ -f "$T/victim/rank-1" ] || { cat "$T/out"; fail "the agent deleted rank-1 in the link's target"; }
[ -f "$T/victim/rank-0" ] || { cat "$T/out"; fail "the agent deleted rank-0 in the link's target"; }
grep -q 'keep me' "$T/victim/rank-1" || fail "rank-1 in the link's target changed"
echo "ok: the heartbeat directory is read and cleaned through its descriptor only"
