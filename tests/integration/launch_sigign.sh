#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# par3drun started with SIGINT/SIGQUIT ignored (as `cmd &` in a
# non-interactive shell does): the workers still start with every signal at
# its default and an empty mask, so a forwarded SIGINT reaches a worker's
# handler at once instead of waiting the grace for SIGKILL.
. "$(dirname "$0")/lib/launch_common.sh"
# 1. what a worker inherits: grep itself is the worker (nothing in between)
( trap '' INT QUIT PIPE USR1; exec "$PAR3DRUN" --nproc-per-node 2 --no-tag-output \
    -- grep -E '^Sig(Ign|Blk):' /proc/self/status ) >"$T/status" 2>&1 || { cat "$T/status"; fail "par3drun failed"; }
[ "$(grep -c '^SigIgn:[[:space:]]*0000000000000000$' "$T/status")" = 2 ] ||
  { cat "$T/status"; fail "workers inherited ignored signals"; }
[ "$(grep -c '^SigBlk:[[:space:]]*0000000000000000$' "$T/status")" = 2 ] ||
  { cat "$T/status"; fail "workers inherited blocked signals"; }
# 2. a forwarded SIGINT reaches a bash trap (bash cannot trap a signal
#    ignored at its start) long before the grace
cat >"$T/w.sh" <<'SH'
#!/bin/bash
trap 'echo "$RANK" >>"$T_DIR/int"; exit 0' INT
touch "$T_DIR/up-$RANK"
while :; do sleep 0.05; done
SH
chmod +x "$T/w.sh"
( trap '' INT QUIT; T_DIR=$T exec "$PAR3DRUN" --nproc-per-node 2 --grace 30 -- "$T/w.sh" ) >"$T/out" 2>&1 &
pid=$!
for _ in $(seq 200); do [ "$(ls "$T" | grep -c '^up-')" -ge 2 ] && break; sleep 0.05; done
[ "$(ls "$T" | grep -c '^up-')" -ge 2 ] || fail "ranks did not start"
t0=$(date +%s%N)
kill -INT $pid
set +e; wait $pid; rc=$?; set -e
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 130 ] || { cat "$T/out"; fail "exit code $rc after SIGINT, want 130"; }
[ "$(sort -u "$T/int" 2>/dev/null | wc -l)" = 2 ] || { cat "$T/out"; fail "SIGINT reached $(wc -l <"$T/int" 2>/dev/null) of 2 handlers"; }
[ "$ms" -lt 10000 ] || fail "SIGINT took $ms ms: the workers waited for the grace"
[ -z "$(marked_pids)" ] || fail "processes left: $(marked_pids)"
echo "ok: SIGINT handled in $ms ms"
