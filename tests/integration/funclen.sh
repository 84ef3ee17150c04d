#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# funclen: no C function over 120 lines (issue #41: functions that do one
# thing) anywhere in the default set, launcher/ placement/ plugins/
# worker/, nothing skipped (scripts/funclen.py names a long one). Also
# checks that scripts/funclen.py itself fails on a long function, names
# it, and counts a multi-line signature from the opening brace.
set -euo pipefail
src=${P3D_SRC:?}
T=$(mktemp -d /tmp/p3d-funclen.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$src/scripts/funclen.py" --root "$src" --max 120) ||
  { echo "$out"; fail "a function over 120 lines in launcher/ placement/ plugins/ worker/"; }
echo "$out"
# the verdict counts every function of the default set: not a handful
grep -q '^none of [0-9]* functions over 120 lines' <<<"$out" || fail "no verdict line"
n=$(sed -n 's/^none of \([0-9]*\) functions over 120 lines.*/\1/p' <<<"$out")
[ "$n" -gt 1000 ] || fail "only $n functions counted: the default set was not read"
for d in launcher/ placement/ plugins/ worker/; do
  grep -q " $d" <<<"$(python3 "$src/scripts/funclen.py" --root "$src" --only "$d" --top 1)" ||
    fail "no function listed under $d"
done

# a tree with one function of 122 lines (brace to brace), a multi-line
# signature, braces in strings and comments, a struct initializer
mkdir -p "$T/placement"
{
  printf 'static const struct s tab[] = {\n  {1, "}"},\n};\n'
  printf 'int\nlong_one(int a,\n         int b)\n{\n'
  for i in $(seq 120); do printf '  a += b; /* } */ if (a) { b = "{"[0]; }\n'; done
  printf '}\n'
  printf 'static int short_one(void) { return 0; }\n'
} >"$T/placement/x.c"
out=$(python3 "$src/scripts/funclen.py" --root "$T" --only placement/) && { echo "$out"; fail "a 122-line function passed"; }
grep -q '^over 120: placement/x.c:7 long_one has 122 lines' <<<"$out" || { echo "$out"; fail "the long function is not named with its length"; }
grep -q '^    1 placement/x.c:129 short_one' <<<"$out" || { echo "$out"; fail "the one-line function is not counted as 1"; }
python3 "$src/scripts/funclen.py" --root "$T" --only placement/ --skip placement/x.c >/dev/null || fail "--skip did not leave the file out"
out=$(python3 "$src/scripts/funclen.py" --root "$T" --only placement/ --max 122) || { echo "$out"; fail "122 lines failed a limit of 122"; }
python3 "$src/scripts/funclen.py" --root "$T" --only nowhere/ >/dev/null 2>&1 && fail "a missing path passed"
rc=0; python3 "$src/scripts/funclen.py" --root "$T" --only nowhere/ >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "a missing path exits $rc, not 2"
echo ok
