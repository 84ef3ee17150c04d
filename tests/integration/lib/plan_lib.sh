# SPDX-License-Identifier: BSD-3-Clause
# plan_lib.sh — shared by the plan_*.sh golden tests (sourced, not a test
# itself: it has no effect when run alone). Compares `par3drun plan` output
# with tests/golden/NAME; P3D_UPDATE_GOLDEN=1 rewrites the golden instead
# (review the diff before committing it).
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
GOLDEN_DIR="$P3D_SRC/tests/golden"
fail=0

# The goldens use our own fixture copy of a cluster (stable paths); when
# examples/clusters/NAME exists, same_as_example checks that it plans the
# same layouts (the table and the reasons, not the header naming the file).
cluster_file() {
    echo "tests/fixtures/clusters/plan-$1"
}

same_as_example() {
    local name="$1" golden_name="$2"; shift 2
    local ex="examples/clusters/$name"
    [ -f "$P3D_SRC/$ex" ] || { echo "note: $ex absent, not compared"; return; }
    [ "${P3D_UPDATE_GOLDEN:-0}" = 1 ] && return
    # the "run the best" line names the cluster file: compare it without
    local drop='s|--cluster [^ ]*|--cluster FILE|'
    if ! diff -u <(sed -n '/^ #  tp/,$p' "$GOLDEN_DIR/$golden_name" | sed "$drop") \
                 <(cd "$P3D_SRC" && "$PAR3DRUN" plan --cluster "$ex" "$@" 2>/dev/null | sed -n '/^ #  tp/,$p' |
                   sed "$drop"); then
        echo "FAIL $ex plans differently from the fixture behind $golden_name"; fail=1
    else
        echo "ok $ex plans like $golden_name"
    fi
}

# golden NAME EXPECTED_RC ARGS... : runs plan from $P3D_SRC (so the paths in
# the output are relative and stable) and compares stdout with the golden.
golden() {
    local name="$1" want_rc="$2"; shift 2
    local out rc
    out=$(cd "$P3D_SRC" && "$PAR3DRUN" plan "$@" 2>/tmp/p3d-plan-err.$$); rc=$?
    if [ "$rc" != "$want_rc" ]; then
        echo "FAIL $name: exit $rc, want $want_rc"; cat /tmp/p3d-plan-err.$$; fail=1
    fi
    rm -f /tmp/p3d-plan-err.$$
    if [ "${P3D_UPDATE_GOLDEN:-0}" = 1 ]; then
        printf '%s\n' "$out" > "$GOLDEN_DIR/$name"; echo "updated $name"; return
    fi
    if ! diff -u "$GOLDEN_DIR/$name" <(printf '%s\n' "$out"); then
        echo "FAIL $name: differs from tests/golden/$name (P3D_UPDATE_GOLDEN=1 to regenerate)"; fail=1
    else
        echo "ok $name"
    fi
}

# expect NAME PATTERN: the last run's golden must contain PATTERN (grep -E).
expect() {
    if ! grep -Eq -- "$2" "$GOLDEN_DIR/$1"; then
        echo "FAIL $1: no line matches /$2/"; fail=1
    fi
}
