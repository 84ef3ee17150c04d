# SPDX-License-Identifier: BSD-3-Clause
# The bundled megatron policy against the exact optimum of the placement
# objective (metrics.objective) on 120 random small clusters, fixed seed:
# at least 98% must reach it, none may fail, and none may beat it (that
# would mean the exact solver is wrong). tests/tools/placement_optimum.py
# explains the exact method; bench/placement-optimum.sh runs more.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
unset SLURM_JOB_NODELIST
fail=0
# GB200 trays in two NVLink domains (3 + 2 trays) in rack r1 and one DGX H100
# in r2, tp=8 dp=3: one TP group per domain (two across trays) and one on the
# DGX keep every TP group on NVLink; exit 0, objective all zero.
fx="$P3D_SRC/tests/fixtures/clusters/gb200-2domains-dgx-h100.json"
rep=$(mktemp)
trap 'rm -f "$rep"' EXIT
if ! (cd "$P3D_SRC" && "$PAR3DRUN" --dry-run --cluster "$fx" --tp 8 --pp 1 --dp 3 --format json --output "$rep"); then
    echo "FAIL gb200+dgx: exit $? (want 0)"; fail=1
elif ! python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); o=d["metrics"]["objective"]; assert o==[0,0,0,0,0], o' "$rep"; then
    echo "FAIL gb200+dgx: objective not zero"; fail=1
else
    echo "ok gb200+dgx: every TP group on NVLink"
fi
out=$(python3 "$P3D_SRC/tests/tools/placement_optimum.py" --par3drun "$PAR3DRUN" --src "$P3D_SRC" \
    --seed 19 -n 120 --min-share 0.98 -j 4)
rc=$?
echo "$out"
[ $rc = 0 ] || fail=1
exit $fail
