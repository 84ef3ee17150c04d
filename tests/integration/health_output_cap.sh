#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# --health-check output is capped like policy output (launcher/run/ranks/health.c):
# a check printing 20 MB puts at most its first and last 8 KiB on stderr,
# with a line counting what was dropped, no temp file, and its control
# bytes escaped; the failure reason still names its last line.
. "$(dirname "$0")/lib/launch_common.sh"
printf '{"nodes": [{"name": "a[1-3]", "topology": "%s", "rack": "r1"}]}\n' "$P3D_SRC/examples/topologies/dgx-h100.xml" >"$T/c.json"
CHECK='if [ "$P3D_NODE" = a1 ]; then head -c 20000000 /dev/zero | tr "\0" "x" | fold -w 100; printf "\033[31mgpu 3 gone (fixture)\n"; exit 1; fi'
TMPDIR=$T/tmp
mkdir -p "$TMPDIR"
export TMPDIR
"$PAR3DRUN" --emulate --cluster "$T/c.json" --tp 8 --spares 1 --health-check "$CHECK" -- /bin/true >"$T/out" 2>"$T/err" ||
  { tail -5 "$T/err"; fail "the job did not replace the node that failed its check"; }
size=$(wc -c <"$T/err")
[ "$size" -lt 40000 ] || fail "20 MB of check output put $size bytes on stderr"
grep -q '^\.\.\. (--health-check output: [0-9]* bytes dropped; the first [0-9]* and the last [0-9]* shown) \.\.\.$' "$T/err" ||
  fail "no line counting the dropped bytes"
grep -q 'failed its --health-check (its process ended with exit code 1: .*gpu 3 gone (fixture))' "$T/err" ||
  { grep health "$T/err" | cut -c1-200; fail "the reason does not name the check's last line"; }
LC_ALL=C grep -q $'\033' "$T/err" && fail "a raw ESC from the check reached stderr"
[ -z "$(ls -A "$TMPDIR")" ] || fail "files left in TMPDIR: $(ls -A "$TMPDIR")"
echo "ok: 20 MB of check output -> $size bytes on stderr"
