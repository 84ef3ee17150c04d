#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the C unit tests and a few par3drun commands under valgrind memcheck:
#   scripts/valgrind.sh [BUILD_DIR]          (default build; not a sanitizer build)
# A test fails on any memcheck error (invalid read/write, uninitialised
# value, bad free) or a definite leak. Prints one line per program and a
# summary; exit 0 clean, 1 errors, 77 when valgrind is missing.
# Opt-in ctest test valgrind/unit with -DP3D_VALGRIND_TEST=ON. Tests may read
# P3D_UNDER_VALGRIND=1 to relax wall-clock asserts (valgrind is ~20x slower).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${P3D_BUILD:-$src/build}}
build=$(cd "$build" && pwd) || { echo "valgrind.sh: no build directory $1" >&2; exit 2; }
if ! command -v valgrind >/dev/null; then
    echo "valgrind.sh: valgrind not installed (apt-get install valgrind): skipped"
    exit 77
fi
if nm "$build/par3drun" 2>/dev/null | grep -q __asan_init; then
    echo "valgrind.sh: $build is a sanitizer build (ASan and valgrind do not mix): skipped"
    exit 77
fi
# the environment ctest gives the tests (tests/CMakeLists.txt)
export P3D_DATA_DIR=${P3D_DATA_DIR:-$src} NO_COLOR=1 P3D_SRC=$src P3D_BUILD=$build
export P3D_FIXTURES=${P3D_FIXTURES:-$src/tests/fixtures} PAR3DRUN=$build/par3drun
export P3D_UNDER_VALGRIND=1
export P3D_PLUGIN_DIR=${P3D_PLUGIN_DIR:-$build/plugins}
[ -x "$build/p3d-worker" ] && export P3D_WORKER=$build/p3d-worker
# launch tests spawn real children; valgrind follows none of them
vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=no --num-callers=30
    --suppressions="$src/scripts/valgrind.supp")
log=$(mktemp -d "${TMPDIR:-/tmp}/p3d-vg.XXXXXX")
trap 'rm -rf "$log"' EXIT
ok=0 bad=0 total_s=0
check() { # name, then the command
    local name=$1
    shift
    local t0=$SECONDS
    (cd "$src/tests" && timeout 600 "${vg[@]}" --log-file="$log/$name.vg" "$@" >"$log/$name.out" 2>&1)
    local rc=$?
    local dt=$((SECONDS - t0))
    total_s=$((total_s + dt))
    local errs
    errs=$(grep -c -E 'Invalid (read|write|free)|uninitialised|definitely lost|Mismatched free' \
        "$log/$name.vg" 2>/dev/null)
    errs=${errs:-0}
    if [ "$rc" -eq 99 ] || [ "$errs" -gt 0 ]; then
        echo "FAIL $name: memcheck errors (${dt}s)"
        head -n 40 "$log/$name.vg"
        bad=$((bad + 1))
    elif [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ] && [ "$rc" -ne 77 ]; then
        echo "FAIL $name: exit $rc under valgrind (${dt}s)"
        tail -n 15 "$log/$name.out"
        bad=$((bad + 1))
    else
        echo "ok $name (${dt}s)"
        ok=$((ok + 1))
    fi
}
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    check "$(basename "$t")" "$t"
done
P=$build/par3drun
C2=$src/examples/clusters/2x-dgx-h100.json
check dryrun-2x "$P" --dry-run --cluster "$C2" --tp 8 --pp 2
check dryrun-json "$P" --dry-run --cluster "$src/examples/clusters/64x-dgx-h100-4racks.json" --tp 8 --pp 4 --format json --model gpt3-175b
check topo-nvsmi "$P" topo --topology "$src/tests/fixtures/realdata/topo/dgx1-v100_4nic.txt"
check topo-xml "$P" topo --topology "$src/tests/fixtures/realdata/hwloc/psmgmt-topo.jwb0004.xml"
check plan "$P" plan --cluster "$C2" --model llama2-70b --global-batch 512
check bad-policy "$P" --dry-run --cluster "$C2" --tp 8 --policy "$src/tests/bad/files/metatable-trick.lua"
check bad-json "$P" --dry-run --cluster "$src/tests/bad/files/truncated.json" --tp 8
check bad-slurm "$P" --dry-run --cluster "$C2" --tp 8 --slurm-topology "$src/tests/bad/files/cyclic-topology.conf"
echo "valgrind: $ok clean, $bad with errors, ${total_s}s"
[ "$bad" -eq 0 ]
