#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# RUN_DIR/result.json, the job's verdict (docs/events.md, "The job's
# verdict"):
#  1. a job healed on a spare (an emulated node SIGKILLed) ends 0 and its
#     result.json says so: exit_code 0, restarts 1, replaced 1, the job id,
#     the newest checkpoint its ranks reported (ckpt=), no temporary file
#     left; the examples' way of reading the code back gives 0;
#  2. a rank failing with no restart left: exit 3 and a cause that names
#     the rank, ckpt null when no progress line came;
#  3. a run directory par3drun made itself is still removed after a clean
#     end (result.json does not keep it alive).
. "$(dirname "$0")/lib/launch_common.sh"
TOPO=$P3D_SRC/examples/topologies/dgx-h100.xml
C3=$T/three.json
printf '{"nodes": [{"name": "n[1-3]", "topology": "%s"}]}\n' "$TOPO" >"$C3"

# w.sh: STEPS steps of 0.2 s; each writes a progress line with a
# checkpoint every 2 steps (resuming from its own checkpoint file), and
# waits a second at the end; FAIL_RANK exits 3 at once.
cat >"$T/w.sh" <<'SH'
#!/bin/sh
ck="$T_DIR/ck-$RANK"
step=$(cat "$ck" 2>/dev/null || echo 0)
[ -n "$FAIL_RANK" ] && [ "$RANK" = "$FAIL_RANK" ] && exit 3
echo "$PPID" >"$T_DIR/agent-$P3D_NODE-$P3D_RESTART_COUNT"
while [ "$step" -lt "$STEPS" ]; do
  sleep 0.2
  step=$((step + 1))
  c=$((step / 2 * 2))
  echo "$c" >"$ck.tmp" && mv "$ck.tmp" "$ck"
  printf 'step=%d busy=0.1 ckpt=%d\n' "$step" "$c" >"$P3D_HEARTBEAT.tmp" && mv "$P3D_HEARTBEAT.tmp" "$P3D_HEARTBEAT"
done
# time for a progress summary (--progress-interval 0.2) to carry the last line
if [ "$STEPS" -gt 1 ]; then sleep 1; fi
SH
chmod +x "$T/w.sh"
fresh() { T_DIR=$T/$1; mkdir -p "$T_DIR"; export T_DIR; }
field() { sed -n "s/.*\"$1\": \\([^,}]*\\).*/\\1/p" "$2"; }

# ---- 1. healed ----------------------------------------------------------
echo "== 1. a job healed on a spare" >&2
fresh heal
( set +e; STEPS=20 "$PAR3DRUN" --emulate --cluster "$C3" --tp 8 --dp 2 --spares 1 --grace 3 --max-restarts 2 \
    --progress-interval 0.2 --job-id heal-42 --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1
  echo $? >"$T_DIR/rc" ) &
for i in $(seq 1 600); do [ -s "$T_DIR/agent-n2-0" ] && break; sleep 0.05; done
[ -s "$T_DIR/agent-n2-0" ] || fail "node n2's ranks never started"
sleep 1
kill -9 "$(cat "$T_DIR/agent-n2-0")"
for i in $(seq 1 3600); do [ -s "$T_DIR/rc" ] && break; sleep 0.05; done
[ "$(cat "$T_DIR/rc")" = 0 ] || { cat "$T_DIR/out"; fail "exit $(cat "$T_DIR/rc") after a healed node loss"; }
R=$T_DIR/rd/result.json
[ -f "$R" ] || { cat "$T_DIR/out"; fail "no result.json"; }
[ "$(wc -l <"$R")" = 1 ] || fail "result.json is not one line: $(cat "$R")"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$R" || fail "result.json is not JSON: $(cat "$R")"
[ "$(field exit_code "$R")" = 0 ] || fail "exit_code: $(cat "$R")"
[ "$(field ok "$R")" = true ] || fail "ok: $(cat "$R")"
[ "$(field restarts "$R")" = 1 ] || fail "restarts: $(cat "$R")"
[ "$(field replaced "$R")" = 1 ] || fail "replaced: $(cat "$R")"
[ "$(field job_id "$R")" = '"heal-42"' ] || fail "job_id: $(cat "$R")"
[ "$(field fault "$R")" = '"node"' ] || fail "fault: $(cat "$R")"
[ "$(field ckpt "$R")" = 20 ] || fail "ckpt (want 20, the last checkpoint): $(cat "$R")"
[ "$(field step "$R")" = 20 ] || fail "step: $(cat "$R")"
# the temporary file was renamed over result.json, not left beside it
[ -z "$(ls -A "$T_DIR/rd" | grep -e '^\.' -e 'result.json.')" ] || fail "left in the run dir: $(ls -A "$T_DIR/rd")"
# what examples/slurm/*.sbatch do with it
code=$(sed -n 's/.*"exit_code": \([0-9]*\).*/\1/p' "$R")
[ "$code" = 0 ] || fail "the examples' sed read '$code'"
grep -q "sed -n 's/.\*\"exit_code\": \\\\(\[0-9\]\*\\\\).\*/\\\\1/p'" "$P3D_SRC/examples/slurm/four-nodes-pmix.sbatch" ||
  fail "examples/slurm/four-nodes-pmix.sbatch does not read result.json as this test does"

# ---- 2. failed, no restart left -----------------------------------------
echo "== 2. a rank fails, no restart left" >&2
fresh fail
set +e
FAIL_RANK=5 STEPS=5 "$PAR3DRUN" --emulate --cluster "$C3" --tp 8 --dp 2 --grace 1 --max-restarts 0 \
  --run-dir "$T_DIR/rd" -- "$T/w.sh" >"$T_DIR/out" 2>&1
rc=$?
set -e
[ "$rc" = 3 ] || { cat "$T_DIR/out"; fail "exit $rc, want the rank's 3"; }
R=$T_DIR/rd/result.json
[ "$(field exit_code "$R")" = 3 ] || fail "exit_code: $(cat "$R")"
[ "$(field ok "$R")" = false ] || fail "ok: $(cat "$R")"
grep -q '"cause": "rank 5 (tp 5, [^"]*) on node n1, [^"]*exited with code 3"' "$R" || fail "cause: $(cat "$R")"
[ "$(field ckpt "$R")" = null ] || fail "ckpt: $(cat "$R")"

# ---- 3. par3drun's own run dir ------------------------------------------
echo "== 3. an own run dir is removed after a clean end" >&2
fresh own
export TMPDIR=$T_DIR
STEPS=1 "$PAR3DRUN" --emulate --cluster "$C3" --tp 8 --dp 1 -- "$T/w.sh" >"$T_DIR/out" 2>&1 ||
  { cat "$T_DIR/out"; fail "a one-step job failed"; }
left=$(find "$T_DIR" -mindepth 1 -maxdepth 1 -type d)
[ -z "$left" ] || fail "left behind: $left $(ls "$left")"
echo "launch_result: ok" >&2
