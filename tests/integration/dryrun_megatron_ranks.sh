#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every coordinate and group of the dry-run JSON against an independent model
# of Megatron-LM's rank generation (tests/tools/megatron_ranks.py) for 130
# meshes: dense and expert grids, cp, etp != tp, both Megatron orders, order
# strings in any case, and the layouts Megatron refuses (which par3drun must
# refuse too, naming Megatron's reason). Then the EP placement rules.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
cd "$P3D_SRC" || exit 1
unset SLURM_JOB_NODELIST
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
fail=0
python3 tests/tools/megatron_ranks.py check "$PAR3DRUN" examples/clusters/64x-dgx-h100-4racks.json 130 1 || fail=1

# ep_check CLUSTER MAXSPAN ARGS...: every EP block (the ranks of each ep
# group and their tp groups) sits on GPUs of one NVLink domain.
ep_check() {
    local cluster="$1"; shift
    "$PAR3DRUN" --dry-run --format json --cluster "$cluster" "$@" >"$tmp" || { echo "FAIL: $* exited $?"; fail=1; return; }
    python3 - "$*" "$tmp" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[2]))
dom = {r["rank"]: r["nvlink_domain"] for r in d["ranks"]}
bad = [g for g in d["groups"]["ep"] if len({dom[x] for x in g}) != 1]
bad += [g for g in d["groups"]["tp"] if len({dom[x] for x in g}) != 1]
if bad:
    print("FAIL %s: EP/TP groups off one NVLink domain: %s" % (sys.argv[1], bad[:4]))
    sys.exit(1)
notes = " ".join(c["message"] for c in d["checks"] if c["code"] == "POLICY_NOTE")
if "EP rule:" not in notes:
    print("FAIL %s: no EP rule note: %s" % (sys.argv[1], notes))
    sys.exit(1)
print("ok %s: %d EP groups, each inside one NVLink domain" % (sys.argv[1], len(d["groups"]["ep"])))
PY
}
# DGX H100: etp*ep <= 8 keeps every EP group inside one node
ep_check examples/clusters/64x-dgx-h100-4racks.json --tp 2 --ep 4 --pp 4
ep_check examples/clusters/64x-dgx-h100-4racks.json --tp 2 --cp 2 --ep 4 --pp 2
ep_check examples/clusters/64x-dgx-h100-4racks.json --tp 1 --ep 8 --pp 16
ep_check examples/clusters/64x-dgx-h100-4racks.json --tp 8 --etp 1 --ep 8 --pp 4 --order tp-cp-ep-pp-dp
ep_check examples/clusters/2x-dgx-h100.json --tp 2 --pp 2 --ep 2
# GB200 NVL72: EP groups of up to 72 GPUs inside one NVLink domain
ep_check examples/clusters/gb200-nvl72-2domains.json --tp 1 --ep 72
ep_check examples/clusters/gb200-nvl72-2domains.json --tp 4 --ep 16 --dp 16
ep_check examples/clusters/gb200-nvl72-2domains.json --tp 8 --etp 1 --ep 64 --dp 16

# too big for any domain: the note says what happened instead
"$PAR3DRUN" --dry-run --format json --cluster examples/clusters/64x-dgx-h100-4racks.json --tp 8 --ep 4 --pp 4 >"$tmp"
python3 - "$tmp" <<'PY' || fail=1
import json, sys
notes = " ".join(c["message"] for c in json.load(open(sys.argv[1]))["checks"] if c["code"] == "POLICY_NOTE")
if "EP rule degraded: 16 of 16 EP blocks of 32 GPUs" not in notes or "do not fit one NVLink domain (the largest has 8 GPUs)" not in notes:
    print("FAIL: tp8 ep4 on DGX H100 does not say EP groups leave NVLink: " + notes)
    sys.exit(1)
PY
exit $fail
