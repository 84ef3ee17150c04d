#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# `par3drun runs [--prune]` (issue 46; docs/launch.md, "Run directories"):
#  1. lists the run directories jobs kept in $TMPDIR — a failed job's, a
#     --keep-run-dir job's, one without an end event, a running job's —
#     with their job, verdict and size, newest first; never a symbolic link,
#     another user's or an open (0755) directory, one without par3drun's
#     files, or one not named par3drun-*;
#  2. --prune --dry-run removes nothing; --prune --older-than removes only
#     the old one; --prune --keep N keeps the N newest; --prune never removes
#     a running job's directory and never follows a link inside one;
#  3. bad input: a bad duration, --keep without --prune: exit 2.
. "$(dirname "$0")/lib/launch_common.sh"
export TMPDIR=$T/tmp
mkdir -p "$TMPDIR"
runs() { "$PAR3DRUN" runs "$@" 2>&1; }

# a failed job and a clean one kept with --keep-run-dir: real run directories
set +e
"$PAR3DRUN" --quiet --nproc-per-node 1 --job-id failedjob -- /bin/false >/dev/null 2>&1
set -e
"$PAR3DRUN" --quiet --nproc-per-node 1 --job-id okjob --keep-run-dir -- /bin/true >/dev/null 2>&1 || fail "okjob"
[ -d "$TMPDIR/par3drun-failedjob" ] && [ -d "$TMPDIR/par3drun-okjob" ] || { ls -la "$TMPDIR"; fail "no kept run dirs"; }
# one whose launcher was killed (no end event), two hours old, with a link
# to a file outside that a removal must not follow
mkdir -m 700 "$TMPDIR/par3drun-killedjob"
echo '{"ts": 1, "t": 0, "event": "start", "ranks": 1, "nodes": 1, "restart": 0}' >"$TMPDIR/par3drun-killedjob/events.jsonl"
echo precious >"$T/outside"
mkdir -p "$T/outdir"; echo precious >"$T/outdir/f"
ln -s "$T/outside" "$TMPDIR/par3drun-killedjob/link"
ln -s "$T/outdir" "$TMPDIR/par3drun-killedjob/dirlink"
touch -d '2 hours ago' "$TMPDIR/par3drun-killedjob/events.jsonl" "$TMPDIR/par3drun-killedjob"
# none of these is ours to list or remove
mkdir -m 700 "$T/elsewhere"; echo '{}' >"$T/elsewhere/events.jsonl"
ln -s "$T/elsewhere" "$TMPDIR/par3drun-symlinked"
mkdir -m 755 "$TMPDIR/par3drun-open"; echo '{}' >"$TMPDIR/par3drun-open/events.jsonl"
mkdir -m 700 "$TMPDIR/par3drun-empty"
mkdir -m 700 "$TMPDIR/notours"; echo '{}' >"$TMPDIR/notours/events.jsonl"
# a running job (its rank waits for a stop file)
( set +e; "$PAR3DRUN" --quiet --nproc-per-node 1 --job-id livejob -- sh -c \
    'touch "$TMPDIR/up"; until [ -e "$TMPDIR/stop" ]; do sleep 0.1; done' >/dev/null 2>&1; echo $? >"$T/live.rc" ) &
for i in $(seq 1 1200); do [ -e "$TMPDIR/up" ] && break; sleep 0.05; done
[ -e "$TMPDIR/up" ] || fail "the running job did not start"

echo "== 1. the list" >&2
out=$(runs) || fail "runs: exit $?: $out"
echo "$out"
row() { grep -E "^$1 " <<<"$out" || fail "no row for $1: $out"; }
row failedjob | grep -q 'failed (exit 1)' || fail "failedjob's verdict: $out"
row okjob | grep -Eq ' ok +[0-9.]+ (B|KiB)' || fail "okjob's verdict or size: $out"
row killedjob | grep -q 'no end (killed?)' || fail "killedjob's verdict: $out"
row killedjob | grep -q '(2h ago' || fail "killedjob's age: $out"
row livejob | grep -q ' running ' || fail "livejob's verdict: $out"
for n in symlinked open empty notours; do grep -q "$n" <<<"$out" && fail "listed $n: $out"; done
[ "$(tail -1 <<<"$out" | grep -o '^par3drun runs: [0-9]* run directories')" = "par3drun runs: 4 run directories" ] ||
  fail "the count: $out"
[ "$(grep -E '^(failedjob|okjob|killedjob|livejob) ' <<<"$out" | tail -1 | cut -d' ' -f1)" = killedjob ] ||
  fail "not newest first: $out"
echo "ok: runs lists the kept run directories with their verdicts"

echo "== 2. --prune" >&2
out=$(runs --prune --dry-run) || fail "prune --dry-run: exit $?: $out"
grep -q 'would remove 3 of 4' <<<"$out" || fail "prune --dry-run: $out"
[ -d "$TMPDIR/par3drun-failedjob" ] && [ -d "$TMPDIR/par3drun-killedjob" ] || fail "--dry-run removed something"
out=$(runs --prune --older-than 1h) || fail "prune --older-than: exit $?: $out"
grep -q 'removed 1 of 4' <<<"$out" || fail "prune --older-than 1h: $out"
[ ! -e "$TMPDIR/par3drun-killedjob" ] || fail "the 2-hour-old run dir is still there"
[ "$(cat "$T/outside")" = precious ] && [ "$(cat "$T/outdir/f")" = precious ] || fail "the removal followed a link"
[ -d "$TMPDIR/par3drun-failedjob" ] && [ -d "$TMPDIR/par3drun-okjob" ] || fail "--older-than 1h removed a new one"
out=$(runs --prune --keep 1) || fail "prune --keep 1: exit $?: $out"
grep -q 'removed 1 of 3' <<<"$out" || fail "prune --keep 1: $out"
[ -d "$TMPDIR/par3drun-okjob" ] && [ ! -e "$TMPDIR/par3drun-failedjob" ] || fail "--keep 1 kept the wrong one: $out"
grep -q 'livejob.*kept: running' <<<"$out" || fail "the running job's line: $out"
[ -d "$TMPDIR/par3drun-livejob" ] || fail "the running job's run dir was removed"
for n in par3drun-symlinked par3drun-open par3drun-empty notours; do [ -e "$TMPDIR/$n" ] || fail "$n removed"; done
[ -f "$T/elsewhere/events.jsonl" ] || fail "a symlinked run dir's target was touched"
touch "$TMPDIR/stop"
for i in $(seq 1 1200); do [ -s "$T/live.rc" ] && break; sleep 0.05; done
[ "$(cat "$T/live.rc")" = 0 ] || fail "the running job: exit $(cat "$T/live.rc")"
echo "ok: --prune removes the old and ended ones only, never through a link, never a running job's"

echo "== 3. bad input" >&2
set +e
out=$(runs --prune --older-than 3x); rc=$?
[ $rc = 2 ] && grep -q "older-than: expected a duration such as 90s, 30m, 12h, 7d or 2w, got '3x'" <<<"$out" ||
  fail "bad duration: exit $rc: $out"
out=$(runs --keep 2); rc=$?
[ $rc = 2 ] && grep -q 'add --prune' <<<"$out" || fail "--keep without --prune: exit $rc: $out"
out=$(runs "$T/nonexistent"); rc=$?
[ $rc = 2 ] && grep -q "runs: $T/nonexistent: No such file or directory" <<<"$out" || fail "a missing DIR: exit $rc: $out"
set -e
echo "ok: bad input exits 2 with a message"
