# SPDX-License-Identifier: BSD-3-Clause
# dryrun_lib.sh — shared by the dryrun_*.sh tests (sourced; no effect when
# run alone). Runs `par3drun --dry-run` from $P3D_SRC so every path in a
# report is relative and stable, and compares with tests/golden/dryrun_*;
# P3D_UPDATE_GOLDEN=1 rewrites the goldens instead (review the diff with
# git before committing it — a golden is a reviewed expectation).
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
GOLDEN_DIR="$P3D_SRC/tests/golden"
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
unset SLURM_JOB_NODELIST # a dry run inside an allocation would place on it
fail=0

# The bundled policy's path is absolute (data dir): shown as <data>.
normalize() {
    sed -e "s|${P3D_DATA_DIR:-$P3D_SRC}/|<data>/|g" -e "s|$P3D_SRC/|<data>/|g"
}

# dry OUT EXPECTED_RC ARGS... : stdout to $TMPD/OUT (normalized), stderr to
# $TMPD/OUT.err; fails the test when the exit code differs.
dry() {
    local out="$1" want="$2" rc; shift 2
    (cd "$P3D_SRC" && "$PAR3DRUN" --dry-run "$@") >"$TMPD/$out.raw" 2>"$TMPD/$out.err"; rc=$?
    normalize <"$TMPD/$out.raw" >"$TMPD/$out"
    if [ "$rc" != "$want" ]; then
        echo "FAIL $out: exit $rc, want $want ($*)"; sed 's/^/  stderr: /' "$TMPD/$out.err"; fail=1
        return 1
    fi
    return 0
}

# golden NAME RC ARGS... : runs twice (byte-identical: determinism), then
# compares with tests/golden/NAME.
golden() {
    local name="$1" want="$2"; shift 2
    dry "$name" "$want" "$@" || return
    cp "$TMPD/$name.raw" "$TMPD/$name.first"
    dry "$name" "$want" "$@" || return
    if ! cmp -s "$TMPD/$name.first" "$TMPD/$name.raw"; then
        echo "FAIL $name: two runs on the same input differ"; fail=1
    fi
    if [ "${P3D_UPDATE_GOLDEN:-0}" = 1 ]; then
        cp "$TMPD/$name" "$GOLDEN_DIR/$name"; echo "updated tests/golden/$name"; return
    fi
    if [ ! -f "$GOLDEN_DIR/$name" ]; then
        echo "FAIL $name: no tests/golden/$name (P3D_UPDATE_GOLDEN=1 creates it)"; fail=1; return
    fi
    if ! diff -u "$GOLDEN_DIR/$name" "$TMPD/$name"; then
        echo "FAIL $name differs from tests/golden/$name (P3D_UPDATE_GOLDEN=1 to regenerate, then review)"
        fail=1
    else
        echo "ok $name"
    fi
}

# has OUT PATTERN : the last output OUT contains PATTERN (grep -E).
has() {
    if grep -Eq -- "$2" "$TMPD/$1"; then echo "ok $1 has /$2/"; else
        echo "FAIL $1: no line matches /$2/"; fail=1; fi
}

# err_has OUT SUBSTRING : stderr of OUT contains SUBSTRING (fixed string).
err_has() {
    if grep -Fq -- "$2" "$TMPD/$1.err"; then echo "ok $1 stderr has '$2'"; else
        echo "FAIL $1: stderr lacks '$2':"; sed 's/^/  /' "$TMPD/$1.err"; fail=1; fi
}

# pycheck OUT 'python statements using d (the parsed JSON)' : asserts.
pycheck() {
    local out="$1" code="$2"
    [ -s "$TMPD/$out" ] || { echo "FAIL $out: no report to check"; fail=1; return; }
    if python3 - "$TMPD/$out" "$code" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[2])
PY
    then echo "ok $out: ${3:-python checks}"; else echo "FAIL $out: ${3:-python checks}"; fail=1; fi
}
