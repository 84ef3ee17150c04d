#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Bad input to a launch is caught in the launcher before anything starts:
# exit 2 and one line naming the problem (--output-ranks outside the world,
# a --log-dir that is a file, a program that is a directory or not
# executable), never 127 and never a failure per rank.
. "$(dirname "$0")/lib/launch_common.sh"
cat >"$T/w.sh" <<SH
#!/bin/sh
touch "$T/ran-\$RANK"
SH
chmod +x "$T/w.sh"
printf '#!/bin/sh\nexit 0\n' >"$T/noexec"
chmod 644 "$T/noexec"
touch "$T/afile"
expect2() { # WANT-TEXT ARGS...  (exit 2, one stderr line with WANT-TEXT, nothing ran)
  local want=$1 rc
  shift
  set +e
  "$PAR3DRUN" "$@" >"$T/out" 2>"$T/err"
  rc=$?
  set -e
  [ $rc = 2 ] || { cat "$T/err"; fail "$*: exit $rc, want 2"; }
  grep -qF -- "$want" "$T/err" || { cat "$T/err"; fail "$*: no '$want' in the message"; }
  [ "$(wc -l <"$T/err")" = 1 ] || { cat "$T/err"; fail "$*: want one line"; }
  ! ls "$T"/ran-* >/dev/null 2>&1 || fail "$*: a rank ran"
}
expect2 "rank 5 is outside the job (world size 4" --nproc-per-node 4 --output-ranks 5-9 -- "$T/w.sh"
expect2 "rank 9 is outside the job (world size 4" --nproc-per-node 4 --output-ranks 0,1-9 -- "$T/w.sh"
expect2 "--output-ranks '1,x'" --nproc-per-node 4 --output-ranks 1,x -- "$T/w.sh"
expect2 "--log-dir $T/afile: exists and is not a directory" --nproc-per-node 2 --log-dir "$T/afile" -- "$T/w.sh"
expect2 "--log-dir $T/afile/sub: cannot create it" --nproc-per-node 2 --log-dir "$T/afile/sub" -- "$T/w.sh"
expect2 "/tmp is a directory, not a program" --nproc-per-node 2 -- /tmp
expect2 "is not executable (chmod +x?)" --nproc-per-node 2 -- "$T/noexec"
expect2 "not found in PATH" --nproc-per-node 2 -- no-such-program-p3d
# the same under --emulate (agents per node)
expect2 "rank 16 is outside the job (world size 16" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 \
  --output-ranks 16 -- "$T/w.sh"
# a --log-dir that does not exist yet is created, and gets every rank
"$PAR3DRUN" --nproc-per-node 2 --log-dir "$T/logs/new" --output-ranks 1 -- "$T/w.sh" >"$T/out" 2>&1 ||
  { cat "$T/out"; fail "a new --log-dir failed"; }
[ -f "$T/logs/new/rank-0.log" ] && [ -f "$T/logs/new/rank-1.log" ] || fail "no rank logs in the new --log-dir"
[ -z "$(ls -A "$T/logs/new" | grep -v '^rank-')" ] || fail "the --log-dir probe left a file: $(ls -A "$T/logs/new")"
echo "ok"
