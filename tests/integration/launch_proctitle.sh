#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# launch_proctitle: each forked agent shows in ps as `par3drun [agent NODE]`
# (thread name p3d-agent), so the agents of an --emulate job can be told
# apart; the ranks still get their own argv untouched (the launcher parsed
# a copy of its command line).
set -euo pipefail
: "${PAR3DRUN:?run through ctest}" "${P3D_SRC:?}"
T=$(mktemp -d /tmp/p3d-proctitle.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat >"$T/w.sh" <<'SH'
#!/bin/sh
# the agent is our parent: what ps shows of it, and our own argv
printf '%s|%s|%s|%s\n' "$P3D_NODE" "$(tr '\0' ' ' </proc/$PPID/cmdline | sed 's/ *$//')" "$(cat /proc/$PPID/comm)" "$*"
SH
chmod +x "$T/w.sh"
"$PAR3DRUN" --emulate --cluster "$P3D_SRC/examples/clusters/2x-dgx-h100.json" --tp 8 --quiet --no-tag-output \
  -- "$T/w.sh" a 'b c' >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "the job failed"; }
[ "$(wc -l <"$T/out")" = 16 ] || { cat "$T/out"; fail "want 16 lines"; }
while IFS='|' read -r node cmd comm args; do
  [ "$cmd" = "par3drun [agent $node]" ] || fail "the agent of $node shows as '$cmd'"
  [ "$comm" = p3d-agent ] || fail "thread name '$comm'"
  [ "$args" = "a b c" ] || fail "a rank's argv changed: '$args'"
done <"$T/out"
[ "$(cut -d'|' -f2 "$T/out" | sort -u | wc -l)" = 2 ] || fail "the two agents do not differ"
echo ok
