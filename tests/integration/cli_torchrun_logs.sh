#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# torchrun's -r/--redirects, -t/--tee and --log-dir layout
# (docs/torchrun.md, "Rank output files"): for every value 0-3 of -r and
# of -t, the files are where torchrun puts them
# (DIR/RUNID_XXXXXXXX/attempt_N/LOCAL_RANK/stdout.log|stderr.log), each
# holds its own stream only, and the terminal shows exactly the streams
# that are not redirected (teed ones too), each on its own stream; a
# per-local-rank map; a restart writes attempt_1; without --log-dir a new
# $TMPDIR/torchelastic_XXXXXX; par3drun's own --log-dir (DIR/rank-N.log) is
# unchanged without -r/-t.
. "$(dirname "$0")/lib/launch_common.sh"
TOPO="synthetic:pack:2 pu:2"
PROG='echo "out L$LOCAL_RANK g$TORCHELASTIC_RESTART_COUNT"; echo "err L$LOCAL_RANK g$TORCHELASTIC_RESTART_COUNT" >&2'

# the one run directory under $1: RUNID_ and 8 characters, as mkdtemp
run_dir_of() {
  local d n
  n=$(find "$1" -mindepth 1 -maxdepth 1 | wc -l)
  [ "$n" = 1 ] || fail "$1 holds $n entries, want one run directory: $(ls -A "$1")"
  d=$(find "$1" -mindepth 1 -maxdepth 1)
  [[ "$(basename "$d")" =~ ^logjob_[a-z0-9_]{8}$ ]] || fail "run directory $(basename "$d") is not RUNID_XXXXXXXX"
  echo "$d"
}

# file $1 holds exactly the line $2, or is absent when $2 is empty
expect_file() {
  if [ -z "$2" ]; then
    [ ! -e "$1" ] || fail "$3: $1 exists, torchrun makes no file for that stream"
  else
    [ -f "$1" ] || fail "$3: $1 missing"
    [ "$(cat "$1")" = "$2" ] || { cat "$1"; fail "$3: $1 does not hold exactly '$2'"; }
  fi
}

for r in 0 1 2 3; do
  for t in 0 1 2 3; do
    c="-r $r -t $t"
    rm -rf "$T/ld"
    "$PAR3DRUN" --nproc-per-node 2 --topology "$TOPO" --rdzv-id logjob -r $r -t $t --log-dir "$T/ld" -- sh -c "$PROG" \
      >"$T/c.out" 2>"$T/c.err" || { cat "$T/c.err"; fail "$c failed"; }
    d=$(run_dir_of "$T/ld")
    for lr in 0 1; do
      [ -d "$d/attempt_0/$lr" ] || fail "$c: $d/attempt_0/$lr missing"
      expect_file "$d/attempt_0/$lr/stdout.log" "$( (( (r | t) & 1 )) && echo "out L$lr g0")" "$c"
      expect_file "$d/attempt_0/$lr/stderr.log" "$( (( (r | t) & 2 )) && echo "err L$lr g0")" "$c"
      # the terminal: a stream redirected and not teed is not shown; the
      # others are, each on its own stream
      want_out=$(( (r & ~t & 1) ? 0 : 1 ))
      want_err=$(( (r & ~t & 2) ? 0 : 1 ))
      [ "$(grep -c "out L$lr g0\$" "$T/c.out" || true)" = "$want_out" ] ||
        { cat "$T/c.out"; fail "$c: rank L$lr's stdout shown $(grep -c "out L$lr" "$T/c.out" || true) times, want $want_out"; }
      [ "$(grep -c "err L$lr g0\$" "$T/c.err" || true)" = "$want_err" ] ||
        { cat "$T/c.err"; fail "$c: rank L$lr's stderr shown wrongly, want $want_err"; }
      grep -q "err L$lr" "$T/c.out" && fail "$c: stderr reached the terminal's stdout"
      grep -q "out L$lr" "$T/c.err" && fail "$c: stdout reached the terminal's stderr"
    done
    [ ! -e "$T/ld/rank-0.log" ] || fail "$c: par3drun's rank-0.log written in torchrun's layout"
  done
done

# TORCHELASTIC_ERROR_FILE: torchrun's place, attempt_N/LOCAL_RANK/error.json
rm -rf "$T/ld"
"$PAR3DRUN" --nproc-per-node 2 --topology "$TOPO" --rdzv-id logjob -r 1 --log-dir "$T/ld" \
  -- sh -c 'echo "ef $TORCHELASTIC_ERROR_FILE" >&2' >/dev/null 2>"$T/ef.err" || fail "the error-file run failed"
d=$(run_dir_of "$T/ld")
for lr in 0 1; do
  grep -q "ef $d/attempt_0/$lr/error.json\$" "$T/ef.err" || { cat "$T/ef.err"; fail "TORCHELASTIC_ERROR_FILE of local rank $lr"; }
done

# per local rank, torchrun's map form: local rank 0 stdout redirected;
# local rank 1 stderr redirected and stdout teed
rm -rf "$T/ld"
"$PAR3DRUN" --nproc_per_node 2 --topology "$TOPO" --rdzv_id logjob --redirects 0:1,1:2 --tee 1:1 --log_dir "$T/ld" \
  -- sh -c "$PROG" >"$T/m.out" 2>"$T/m.err" || { cat "$T/m.err"; fail "the map form failed"; }
d=$(run_dir_of "$T/ld")
expect_file "$d/attempt_0/0/stdout.log" "out L0 g0" "map"
expect_file "$d/attempt_0/0/stderr.log" "" "map"
expect_file "$d/attempt_0/1/stdout.log" "out L1 g0" "map"
expect_file "$d/attempt_0/1/stderr.log" "err L1 g0" "map"
grep -q 'out L0' "$T/m.out" && fail "map: local rank 0's redirected stdout was shown"
grep -q 'err L0' "$T/m.err" || fail "map: local rank 0's stderr was not shown"
grep -q 'out L1' "$T/m.out" || fail "map: local rank 1's teed stdout was not shown"
grep -q 'err L1' "$T/m.err" && fail "map: local rank 1's redirected stderr was shown"

# a restart: attempt_1 beside attempt_0, each with its generation's lines
# (both ranks have written before the first fails: a barrier of files)
rm -rf "$T/ld"
export B=$T/barrier
"$PAR3DRUN" --nproc-per-node 2 --topology "$TOPO" --rdzv-id logjob --max-restarts 1 -r 3 --log-dir "$T/ld" \
  -- sh -c "$PROG"'; G=$TORCHELASTIC_RESTART_COUNT; touch "$B.$LOCAL_RANK.$G"
    for i in $(seq 300); do [ -e "$B.0.$G" ] && [ -e "$B.1.$G" ] && break; sleep 0.1; done
    [ "$G" = 1 ] || exit 3' >"$T/x.out" 2>"$T/x.err" ||
  { cat "$T/x.err"; fail "the restarted job failed"; }
d=$(run_dir_of "$T/ld")
for g in 0 1; do
  for lr in 0 1; do
    expect_file "$d/attempt_$g/$lr/stdout.log" "out L$lr g$g" "restart"
    expect_file "$d/attempt_$g/$lr/stderr.log" "err L$lr g$g" "restart"
  done
done
[ "$(find "$d" -mindepth 1 -maxdepth 1 | wc -l)" = 2 ] || fail "restart: not exactly attempt_0 and attempt_1: $(ls "$d")"

# a second run with the same id gets its own run directory
"$PAR3DRUN" --nproc-per-node 1 --topology "$TOPO" --rdzv-id logjob -r 3 --log-dir "$T/ld" -- sh -c "$PROG" \
  >/dev/null 2>&1 || fail "second run failed"
[ "$(find "$T/ld" -mindepth 1 -maxdepth 1 | wc -l)" = 2 ] || fail "a second run did not get its own directory"

# without -r/-t, --log-dir keeps par3drun's layout: DIR/rank-N.log, both streams
rm -rf "$T/pl"
"$PAR3DRUN" --nproc-per-node 2 --topology "$TOPO" --log-dir "$T/pl" -- sh -c "$PROG" >"$T/p.out" 2>"$T/p.err" ||
  fail "par3drun's --log-dir failed"
for lr in 0 1; do
  grep -q "out L$lr g0" "$T/pl/rank-$lr.log" && grep -q "err L$lr g0" "$T/pl/rank-$lr.log" ||
    fail "par3drun's rank-$lr.log lacks a stream"
done
grep -q 'out L0' "$T/p.out" && grep -q 'err L0' "$T/p.err" || fail "par3drun's --log-dir hid output"

# two nodes (--emulate): each node's agent makes its own run directory, as
# torchrun's agents do, with its local ranks' files
rm -rf "$T/ld"
"$PAR3DRUN" --emulate --cluster "$CLUSTER" --nnodes 2 --nproc-per-node 2 --rdzv-id logjob -r 3 --log-dir "$T/ld" \
  -- sh -c 'echo "o $RANK"; echo "e $RANK" >&2' >"$T/e.out" 2>"$T/e.err" || { cat "$T/e.err"; fail "--emulate -r 3 failed"; }
[ "$(find "$T/ld" -mindepth 1 -maxdepth 1 -name 'logjob_*' | wc -l)" = 2 ] || fail "--emulate: not one run directory per node"
[ "$(cat "$T"/ld/logjob_*/attempt_0/[01]/stdout.log | sort | tr '\n' ' ')" = "o 0 o 1 o 2 o 3 " ] ||
  fail "--emulate: the stdout files do not hold the 4 ranks once each"
[ "$(cat "$T"/ld/logjob_*/attempt_0/[01]/stderr.log | sort | tr '\n' ' ')" = "e 0 e 1 e 2 e 3 " ] ||
  fail "--emulate: the stderr files do not hold the 4 ranks once each"

# -r/-t without --log-dir: a new $TMPDIR/torchelastic_XXXXXX, as torchrun,
# said once (not under --quiet); nothing made when no stream is written
mkdir -p "$T/tmp" "$T/tmpq"
TMPDIR=$T/tmp "$PAR3DRUN" --nproc-per-node 2 --topology "$TOPO" --rdzv-id logjob -r 1 -- sh -c "$PROG" \
  >"$T/n.out" 2>"$T/n.err" || { cat "$T/n.err"; fail "-r 1 without --log-dir failed"; }
base=$(find "$T/tmp" -mindepth 1 -maxdepth 1 -name 'torchelastic_*')
[ -n "$base" ] && [ "$(echo "$base" | wc -l)" = 1 ] || fail "-r 1 without --log-dir: not one torchelastic_* in \$TMPDIR: $(ls -A "$T/tmp")"
[ "$(grep -c "^par3drun: -r/-t without --log-dir: the ranks' files go under $base\$" "$T/n.err")" = 1 ] ||
  { cat "$T/n.err"; fail "the temporary directory was not said once"; }
d=$(run_dir_of "$base")
expect_file "$d/attempt_0/0/stdout.log" "out L0 g0" "no --log-dir"
expect_file "$d/attempt_0/1/stderr.log" "" "no --log-dir"
grep -q 'out L' "$T/n.out" && fail "-r 1 without --log-dir still showed stdout"
TMPDIR=$T/tmpq "$PAR3DRUN" --quiet --nproc-per-node 1 --topology "$TOPO" -t 3 -- true >"$T/q.out" 2>"$T/q.err" ||
  fail "--quiet -t 3 failed"
[ -s "$T/q.err" ] && { cat "$T/q.err"; fail "--quiet still said something"; }
[ "$(find "$T/tmpq" -mindepth 1 -maxdepth 1 -name 'torchelastic_*' | wc -l)" = 1 ] || fail "--quiet -t 3: no directory"
TMPDIR=$T/tmpq "$PAR3DRUN" --nproc-per-node 1 --topology "$TOPO" -r 0 -t 0 -- true >/dev/null 2>&1 || fail "-r 0 -t 0 failed"
[ "$(find "$T/tmpq" -mindepth 1 -maxdepth 1 | wc -l)" = 1 ] || fail "-r 0 -t 0 without --log-dir made a directory"
echo "ok"
