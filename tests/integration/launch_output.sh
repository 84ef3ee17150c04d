#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Output: lines are tagged and never torn (16 ranks writing 64 KiB lines in
# odd-sized pieces at once), --log-dir gets one file per rank,
# --output-ranks filters the terminal only.
. "$(dirname "$0")/lib/launch_common.sh"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
yes "$(printf '%065536d' 0 | tr 0 "$((RANK % 10))")" | head -n 30 | dd bs=1000 status=none
echo "short line from $RANK" >&2
SH
chmod +x "$T/w.sh"
"$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --log-dir "$T/logs" -- "$T/w.sh" >"$T/out" 2>"$T/err" \
  || fail "par3drun exited $?"
python3 - "$T/out" <<'PY'
import re, sys, collections
n = collections.Counter()
for i, line in enumerate(open(sys.argv[1])):
    m = re.match(r"\[r(\d+) tp\d pp\d dp\d\] (.*)\n$", line)
    assert m, f"line {i}: no tag: {line[:60]!r}"
    r, body = int(m.group(1)), m.group(2)
    assert len(body) == 65536 and body == str(r % 10) * 65536, f"line {i} of rank {r} torn (len {len(body)})"
    n[r] += 1
assert len(n) == 16 and set(n.values()) == {30}, n
print("480 lines of 64 KiB, all whole")
PY
grep -q '^\[r7 tp1 pp0 dp3\] short line from 7$' "$T/err" || fail "stderr not tagged"
[ "$(ls "$T/logs" | wc -l)" = 16 ] || fail "expected 16 log files"
[ "$(grep -c . "$T/logs/rank-5.log")" = 31 ] || fail "rank-5.log incomplete"
# --output-ranks: only ranks 0 and 8-9 on the terminal, all in the logs
"$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --output-ranks 0,8-9 --log-dir "$T/logs2" \
  -- sh -c 'echo "hello from $RANK"' >"$T/out3" 2>&1 || fail "par3drun exited $?"
[ "$(sort "$T/out3" | tr '\n' ' ')" = "[r0 tp0 pp0 dp0] hello from 0 [r8 tp0 pp0 dp4] hello from 8 [r9 tp1 pp0 dp4] hello from 9 " ] \
  || [ "$(grep -c hello "$T/out3")" = 3 ] || { cat "$T/out3"; fail "--output-ranks 0,8-9"; }
[ "$(cat "$T"/logs2/*.log | grep -c hello)" = 16 ] || fail "logs should hold all 16 ranks"
echo "ok"
