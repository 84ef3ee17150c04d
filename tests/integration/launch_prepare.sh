#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# launch_prepare: the single-node path and a node of a multi-node job (a
# one-node static rendezvous on loopback) share one launch preparation
# (launcher/run/launch_prepare.c): the same refusal, word for word, with
# exit 2, for a program that is not there, an --env without '=', an
# unreadable --env-file, --output-ranks outside the world and a --log-dir
# that cannot be made; and neither leaves a run directory behind when it
# refused before the start. The path-specific refusals stay their own.
. "$(dirname "$0")/lib/launch_common.sh"
export TMPDIR=$T/tmp
mkdir -p "$TMPDIR"
printf 'tok-%s\n' "$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T/token"
chmod 600 "$T/token"
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml
touch "$T/afile"
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run KIND ARGS...: KIND one (this host) or multi (a one-node rendezvous);
# stderr's par3drun lines in $T/err.KIND, the exit code in $rc
run() {
  local kind=$1
  shift
  local extra=()
  [ "$kind" = multi ] && extra=(--nnodes 1 --node-rank 0 --rdzv "static:127.0.0.1:$(port)" --rdzv-token-file "$T/token")
  set +e
  timeout 60 "$PAR3DRUN" "${extra[@]}" --job-id prep --topology "$TOPO" "$@" >"$T/out.$kind" 2>"$T/err.$kind"
  rc=$?
  set -e
}

same() { # WHAT WANT-TEXT ARGS...
  local what=$1 want=$2
  shift 2
  run one "$@"
  local rc1=$rc
  run multi "$@"
  [ "$rc1" = 2 ] || { cat "$T/err.one"; fail "$what: one host exit $rc1, expected 2"; }
  [ "$rc" = 2 ] || { cat "$T/err.multi"; fail "$what: multi-node exit $rc, expected 2"; }
  grep -q -- "$want" "$T/err.one" || { cat "$T/err.one"; fail "$what: one host does not say '$want'"; }
  [ "$(grep '^par3drun: ' "$T/err.one" | grep -v warning)" = "$(grep '^par3drun: ' "$T/err.multi" | grep -v warning)" ] ||
    { diff "$T/err.one" "$T/err.multi" || true; fail "$what: the two paths say it differently"; }
  [ -z "$(ls -A "$TMPDIR")" ] || { ls -la "$TMPDIR"; fail "$what: a refused launch left $(ls "$TMPDIR") behind"; }
  [ ! -s "$T/out.one" ] && [ ! -s "$T/out.multi" ] || fail "$what: something ran"
}

same "missing program" "cannot run no-such-program-p3d: not found in PATH" -- no-such-program-p3d
same "--env without =" "--env 'JUSTAKEY': expected KEY=VALUE" --env JUSTAKEY -- true
same "--env-file missing" "$T/none.env" --env-file "$T/none.env" -- true
same "--output-ranks outside" "--output-ranks '99': rank 99 is outside the job" --output-ranks 99 -- true
same "--log-dir a file" "--log-dir $T/afile" --log-dir "$T/afile" -- true

# what belongs to one path stays there
run multi --emulate --cluster "$CLUSTER" -- true
[ "$rc" = 2 ] && grep -q 'does not mix with a multi-node rendezvous (--rdzv static)' "$T/err.multi" ||
  { cat "$T/err.multi"; fail "--emulate with a rendezvous not refused"; }
run one --emulate -- true
[ "$rc" = 2 ] && grep -q 'give --cluster FILE' "$T/err.one" || { cat "$T/err.one"; fail "--emulate without --cluster"; }

# and both still start the program when nothing is wrong: one rank line
# each, the run directory gone after the clean end
run one --nproc-per-node 1 -- sh -c 'echo "rank=$RANK of $WORLD_SIZE"'
[ "$rc" = 0 ] && grep -q 'rank=0 of 1' "$T/out.one" || { cat "$T/err.one"; fail "one host: rc $rc"; }
run multi --nproc-per-node 1 -- sh -c 'echo "rank=$RANK of $WORLD_SIZE"'
[ "$rc" = 0 ] && grep -q 'rank=0 of 1' "$T/out.multi" || { cat "$T/err.multi"; fail "multi-node: rc $rc"; }
[ -z "$(ls -A "$TMPDIR")" ] || { ls -la "$TMPDIR"; fail "a clean end left $(ls "$TMPDIR") behind"; }
echo "launch_prepare: ok"
