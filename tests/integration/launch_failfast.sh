#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A crashing rank tears the whole emulated job down within grace + 1 s and
# its exit code comes back, with a root-cause summary naming it.
. "$(dirname "$0")/lib/launch_common.sh"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
if [ "$RANK" = 13 ]; then
  # wait until every other rank runs, then fail
  while [ "$(ls "$T_DIR" | grep -c '^up-')" -lt 15 ]; do sleep 0.05; done
  echo "rank 13 going down" >&2; date +%s.%N >"$T_DIR/failed_at"; exit 42
fi
trap '' TERM          # ignore SIGTERM: only the SIGKILL after the grace ends us
touch "$T_DIR/up-$RANK"
while :; do sleep 0.1; done
SH
chmod +x "$T/w.sh"
set +e
T_DIR=$T "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 2 -- "$T/w.sh" >"$T/out" 2>&1
rc=$?
set -e
end=$(date +%s.%N)
[ $rc = 42 ] || { cat "$T/out"; fail "exit code $rc, want 42"; }
took=$(awk -v a="$(cat "$T/failed_at")" -v b="$end" 'BEGIN {print b - a}')
# The bound is the issue's grace + 1 s. An ASan/UBSan build pays for leak
# checking and shadow memory in every exiting process (launcher, agents),
# which is not teardown latency: there it checks the same order of
# magnitude with 3 s more and says so.
slack=1
if grep -q __asan_init "$PAR3DRUN" 2>/dev/null; then
  slack=4
  echo "note: sanitizer build, teardown bound relaxed to grace + $slack s"
fi
awk -v t="$took" -v s="$slack" 'BEGIN {exit !(t >= 2 - 0.1 && t < 2 + s)}' ||
  fail "teardown took $took s, want [grace, grace + $slack s)"
grep -q 'root cause: rank 13 (tp 1, pp 1, dp 2' "$T/out" || { cat "$T/out"; fail "no root cause for rank 13"; }
grep -q 'rank 13 going down' "$T/out" || fail "no stderr tail"
[ -z "$(marked_pids)" ] || fail "processes left: $(marked_pids)"
echo "ok: rank 13's code 42 back, torn down in $took s (grace 2)"
