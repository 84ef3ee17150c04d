#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# format_script: scripts/format.sh on a scratch git checkout holding the
# tree's .clang-format: --check names a file that differs and exits 1,
# leaves a formatted one alone and exits 0; --apply formats in place (and
# then --check passes); a "clang-format off" block stays as written; a
# file outside launcher/ placement/ plugins/ worker/ tests/unit/ is not
# looked at; a bad argument, a missing file or a missing clang-format
# exit 2 with a message naming it.
set -euo pipefail
src=${P3D_SRC:?}
command -v clang-format >/dev/null || { echo "skip: clang-format missing (apt-get install clang-format)"; exit 77; }
command -v git >/dev/null || { echo "skip: git missing"; exit 77; }
T=$(mktemp -d /tmp/p3d-format.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$T/t/scripts" "$T/t/placement/util" "$T/t/worker" "$T/t/docs"
cp "$src/scripts/format.sh" "$T/t/scripts/"
cp "$src/.clang-format" "$T/t/"
# a file as the style wants it, one that is not, one with a kept table,
# one outside the formatted folders
printf 'int good(int a)\n{\n    return a + 1;\n}\n' >"$T/t/placement/util/good.c"
printf 'int bad(int a){\n  if(a)return 1;\n  return 0;}\n' >"$T/t/worker/bad.h"
printf '/* clang-format off */\nstatic const int tab[] = {1,    2,\n                          3,    4};\n/* clang-format on */\n' \
  >"$T/t/placement/util/kept.c"
printf 'int outside(int a){return a;}\n' >"$T/t/docs/outside.c"
cp "$T/t/placement/util/kept.c" "$T/kept.orig"
cp "$T/t/docs/outside.c" "$T/outside.orig"
(cd "$T/t" && git init -q && git add -A)

rc=0; out=$(bash "$T/t/scripts/format.sh" --check 2>&1) || rc=$?
[ "$rc" = 1 ] || { echo "$out"; fail "--check with a badly formatted file exits $rc, not 1"; }
grep -qx 'worker/bad.h' <<<"$out" || { echo "$out"; fail "--check does not name worker/bad.h"; }
grep -q 'good.c\|kept.c\|outside.c' <<<"$out" && { echo "$out"; fail "--check names a file that is formatted or not its own"; }
grep -q '1 of 3 files differ' <<<"$out" || { echo "$out"; fail "--check does not count 1 of the 3 files"; }

bash "$T/t/scripts/format.sh" --apply >/dev/null || fail "--apply failed"
grep -q '^    if (a)$' "$T/t/worker/bad.h" || { cat "$T/t/worker/bad.h"; fail "--apply did not format worker/bad.h"; }
cmp -s "$T/t/placement/util/kept.c" "$T/kept.orig" || { cat "$T/t/placement/util/kept.c"; fail "--apply changed a clang-format off block"; }
cmp -s "$T/t/docs/outside.c" "$T/outside.orig" || fail "--apply changed a file outside the formatted folders"
out=$(bash "$T/t/scripts/format.sh" --check 2>&1) || { echo "$out"; fail "--check after --apply failed"; }
grep -q 'all 3 files formatted' <<<"$out" || { echo "$out"; fail "--check after --apply: no verdict"; }

# named files only
printf 'int bad2(int a){return a;}\n' >"$T/t/placement/util/bad2.c"
rc=0; out=$(cd "$T/t" && bash scripts/format.sh --check placement/util/good.c 2>&1) || rc=$?
[ "$rc" = 0 ] || { echo "$out"; fail "--check on a formatted file exits $rc"; }
rc=0; out=$(cd "$T/t" && bash scripts/format.sh --check placement/util/bad2.c 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -qx 'placement/util/bad2.c' <<<"$out" || { echo "$out"; fail "--check FILE: exit $rc"; }

# bad input: exit 2 and a message naming what is wrong
for args in "" "--frobnicate" "--check nowhere.c"; do
  rc=0; out=$(bash "$T/t/scripts/format.sh" $args 2>&1) || rc=$?
  [ "$rc" = 2 ] || { echo "$out"; fail "format.sh $args exits $rc, not 2"; }
done
grep -q 'nowhere.c: no such file' <<<"$out" || { echo "$out"; fail "the missing file is not named"; }
rc=0; out=$(CLANG_FORMAT=/nonexistent/clang-format bash "$T/t/scripts/format.sh" --check 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q 'apt-get install clang-format' <<<"$out" ||
  { echo "$out"; fail "a missing clang-format: exit $rc"; }
echo ok
