# SPDX-License-Identifier: BSD-3-Clause
# The naive baseline computed (policy_naive.c) against naive.lua run in the
# sandbox, on every fixture cluster: P3D_NAIVE_COMPUTED_MIN=0 computes it at
# any size, a huge value never. The reports (text and JSON, the baseline
# comparison of the default policy and --policy naive itself, one and two
# dimensions, spares) and the exit codes must be byte-identical both ways.
. "$(dirname "$0")/lib/dryrun_lib.sh"
n=0
both() { # NAME ARGS...
    local name="$1"; shift
    P3D_NAIVE_COMPUTED_MIN=0 dry "$name.c" any "$@" 2>/dev/null

    P3D_NAIVE_COMPUTED_MIN=1000000000000 dry "$name.lua" any "$@" 2>/dev/null
    if ! cmp -s "$TMPD/$name.c" "$TMPD/$name.lua" || ! cmp -s "$TMPD/$name.c.err" "$TMPD/$name.lua.err" ||
       [ "$(cat "$TMPD/$name.c.rc")" != "$(cat "$TMPD/$name.lua.rc")" ]; then
        echo "FAIL $name ($*): computed and placed naive differ"
        diff -u "$TMPD/$name.lua" "$TMPD/$name.c" | head -20
        diff -u "$TMPD/$name.lua.err" "$TMPD/$name.c.err" | head -10
        fail=1
    else
        n=$((n + 1))
    fi
}
# dry() insists on one exit code: here the code itself is compared
dry() {
    local out="$1" rc; shift 2
    (cd "$P3D_SRC" && "$PAR3DRUN" --dry-run "$@") >"$TMPD/$out.raw" 2>"$TMPD/$out.err"; rc=$?
    echo "$rc" >"$TMPD/$out.rc"
    normalize <"$TMPD/$out.raw" >"$TMPD/$out"
}
for cl in "$P3D_SRC"/examples/clusters/*.json "$P3D_SRC"/tests/fixtures/clusters/*.json; do
    b=$(basename "$cl" .json)
    for fmt in text json; do
        both "$b-tp1-$fmt" --cluster "$cl" --format "$fmt"
        both "$b-tp2pp2-$fmt" --cluster "$cl" --tp 2 --pp 2 --format "$fmt"
        both "$b-naive-$fmt" --cluster "$cl" --tp 2 --policy naive --format "$fmt"
    done
    both "$b-tp8-order" --cluster "$cl" --tp 8 --pp 2 --order tp-cp-ep-pp-dp --format json
    both "$b-spares" --cluster "$cl" --tp 2 --spares 1 --format json
done
# the switch is real: under a budget naive.lua cannot load in, only the
# computed baseline places (so the cases above did compare both ways)
E="$P3D_SRC/examples/clusters/2x-dgx-h100.json"
for m in 0 1000000000000; do
    (cd "$P3D_SRC" && P3D_NAIVE_COMPUTED_MIN=$m P3D_POLICY_MAX_INSTRUCTIONS=1000 "$PAR3DRUN" --dry-run \
        --cluster "$E" --policy naive >/dev/null 2>"$TMPD/budget.err"); echo $? >"$TMPD/budget.$m"
done
if [ "$(cat "$TMPD/budget.0")" != 0 ] || [ "$(cat "$TMPD/budget.1000000000000")" != 2 ]; then
    echo "FAIL a 1000-instruction budget: exit $(cat "$TMPD/budget.0") computed (want 0)," \
        "$(cat "$TMPD/budget.1000000000000") in the sandbox (want 2)"; fail=1
fi
# a bad threshold is bad input: exit 2 naming the variable
(cd "$P3D_SRC" && P3D_NAIVE_COMPUTED_MIN=x "$PAR3DRUN" --dry-run --cluster "$E" --policy naive \
    >/dev/null 2>"$TMPD/bad.err"); rc=$?
if [ "$rc" != 2 ] || ! grep -q "P3D_NAIVE_COMPUTED_MIN: expected a number of ranks" "$TMPD/bad.err"; then
    echo "FAIL P3D_NAIVE_COMPUTED_MIN=x: exit $rc, want 2 with a message naming it"; cat "$TMPD/bad.err"; fail=1
fi
echo "$n cases identical both ways"
[ "$n" -gt 0 ] || fail=1
exit $fail
