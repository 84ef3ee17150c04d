#!/usr/bin/env bash
# --max-restarts: a failing rank restarts every rank of the emulated job
# with the same ranks, nodes and GPUs; the restart count is in the
# environment; past the limit the failing code comes back.
. "$(dirname "$0")/lib/launch_common.sh"
cat >"$T/w.sh" <<'SH'
#!/bin/sh
echo "$RANK $LOCAL_RANK $P3D_NODE $P3D_GPU $CUDA_VISIBLE_DEVICES" >>"$T_DIR/gen-$P3D_RESTART_COUNT"
[ "$TORCHELASTIC_RESTART_COUNT" = "$P3D_RESTART_COUNT" ] || exit 99
while [ "$(wc -l <"$T_DIR/gen-$P3D_RESTART_COUNT")" -lt 16 ]; do sleep 0.05; done
if [ "$RANK" = 9 ] && [ "$P3D_RESTART_COUNT" -lt "$FAIL_UNTIL" ]; then exit 3; fi
[ "$RANK" = 9 ] || [ "$P3D_RESTART_COUNT" -ge "$FAIL_UNTIL" ] || exec sleep 100
SH
chmod +x "$T/w.sh"
T_DIR=$T FAIL_UNTIL=2 "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 2 --max-restarts 2 \
  -- "$T/w.sh" >"$T/out" 2>&1 || { cat "$T/out"; fail "par3drun exited $? with restarts left"; }
for g in 1 2; do
  diff <(sort -n "$T/gen-0") <(sort -n "$T/gen-$g") || fail "generation $g has other ranks than generation 0"
done
[ "$(grep -c 'restarting all ranks' "$T/out")" = 2 ] || fail "expected 2 restarts"
rm -f "$T"/gen-*
set +e
T_DIR=$T FAIL_UNTIL=5 "$PAR3DRUN" --emulate --cluster "$CLUSTER" --tp 2 --pp 2 --dp 4 --grace 2 --max-restarts 1 \
  -- "$T/w.sh" >"$T/out" 2>&1
rc=$?
set -e
[ $rc = 3 ] || { cat "$T/out"; fail "exit code $rc past the restart limit, want 3"; }
echo "ok"
