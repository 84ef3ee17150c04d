#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Files par3drun creates cannot be redirected by another local user
# (issue 13, docs/limits.md "Run directory" / "Log directory"): a symlink,
# hard link or FIFO planted under a log file's name, a world-writable log
# directory without the sticky bit, another user's log or run directory,
# and a run directory with group/other bits are refused with exit 2 before
# anything starts, and the planted target is left untouched. A sticky
# world-writable directory (/tmp-like), a group-writable one and a rerun
# into the same log directory still work.
. "$(dirname "$0")/lib/launch_common.sh"
umask 022
echo "secret" >"$T/victim"
run() { # DIR-ARGS... -- expects nothing ran when it fails
  set +e
  "$PAR3DRUN" --nproc-per-node 2 "$@" -- sh -c 'echo "out of $RANK"' >"$T/out" 2>"$T/err"
  rc=$?
  set -e
}
expect2() { # WANT ARGS...
  local want=$1
  shift
  run "$@"
  [ "$rc" = 2 ] || { cat "$T/err"; fail "$*: exit $rc, want 2"; }
  grep -qF -- "$want" "$T/err" || { cat "$T/err"; fail "$*: no '$want' in the message"; }
  ! grep -q "out of" "$T/out" || fail "$*: a rank ran"
  [ "$(cat "$T/victim")" = secret ] || fail "$*: the planted target was written"
}

# ---- --log-dir: names planted inside -------------------------------------
for kind in symlink hardlink fifo; do
  d=$T/log-$kind
  mkdir "$d"
  case $kind in
    symlink) ln -s "$T/victim" "$d/rank-1.log"; want="rank-1.log is a symbolic link" ;;
    hardlink) ln "$T/victim" "$d/rank-1.log"; want="rank-1.log has other hard links" ;;
    fifo) mkfifo "$d/rank-1.log"; want="rank-1.log is not a regular file" ;;
  esac
  expect2 "--log-dir $d: $want" --log-dir "$d"
done
# the bundled worker's report names too
mkdir "$T/log-worker"
ln -s "$T/victim" "$T/log-worker/worker-rank-0.json"
expect2 "worker-rank-0.json is a symbolic link" --log-dir "$T/log-worker"

# ---- --log-dir: the directory itself ---------------------------------------
mkdir "$T/log-open"
chmod 0777 "$T/log-open"
expect2 "has mode 0777: anyone may write it and it has no sticky bit" --log-dir "$T/log-open"
chmod 1777 "$T/log-open"
run --log-dir "$T/log-open"
[ "$rc" = 0 ] || { cat "$T/err"; fail "sticky world-writable --log-dir: exit $rc"; }
grep -qx "out of 1" "$T/log-open/rank-1.log" || fail "sticky --log-dir: rank-1.log lacks the output"
mkdir "$T/log-group"
chmod 0775 "$T/log-group"
run --log-dir "$T/log-group"
[ "$rc" = 0 ] || { cat "$T/err"; fail "group-writable --log-dir: exit $rc"; }
# a rerun replaces our own files (not appended to, not refused)
run --log-dir "$T/log-group"
[ "$rc" = 0 ] && [ "$(cat "$T/log-group/rank-0.log")" = "out of 0" ] ||
  { cat "$T/err" "$T/log-group/rank-0.log"; fail "rerun into the same --log-dir: exit $rc"; }
# a symlink to a directory given as --log-dir is followed (the rules apply to its target)
ln -s "$T/log-group" "$T/log-alias"
run --log-dir "$T/log-alias"
[ "$rc" = 0 ] || { cat "$T/err"; fail "--log-dir through a symlink the user gave: exit $rc"; }

# ---- --run-dir -------------------------------------------------------------
mkdir "$T/run-open"
chmod 0755 "$T/run-open"
expect2 "--run-dir $T/run-open: has mode 0755, expected 0700" --run-dir "$T/run-open"
ln -s "$T/victim" "$T/run-link"
expect2 "--run-dir $T/run-link: is a symbolic link; refusing it" --run-dir "$T/run-link"
mkdir -m 0700 "$T/run-ok"
run --run-dir "$T/run-ok"
[ "$rc" = 0 ] || { cat "$T/err"; fail "private --run-dir: exit $rc"; }
# nothing but the placement, the event log and the verdict is left there; no
# temporary file survives
[ "$(ls -A "$T/run-ok" | tr '\n' ' ')" = "events.jsonl placement.json result.json " ] || { ls -la "$T/run-ok"; fail "run dir holds $(ls -A "$T/run-ok")"; }

# ---- another user's directories (needs root to make them) -----------------
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  mkdir -m 0700 "$T/run-theirs" "$T/log-theirs"
  chown nobody "$T/run-theirs" "$T/log-theirs"
  expect2 "--run-dir $T/run-theirs: belongs to uid $(id -u nobody), not to you" --run-dir "$T/run-theirs"
  expect2 "--log-dir $T/log-theirs: belongs to uid $(id -u nobody), not to you (uid 0) or root" \
    --log-dir "$T/log-theirs"
  # a file of theirs planted under our name in a sticky shared directory
  mkdir -m 1777 "$T/log-shared"
  touch "$T/log-shared/rank-0.log"
  chown nobody "$T/log-shared/rank-0.log"
  expect2 "rank-0.log belongs to another user" --log-dir "$T/log-shared"
else
  echo "not root: the other-user cases are skipped"
fi
echo "ok: run and log directories refuse planted names and unsafe modes"
