#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Formats the C sources with clang-format and the checked-in .clang-format.
#   scripts/format.sh --check   lists the files clang-format would change;
#                               exit 1 when there is one, 0 when none
#   scripts/format.sh --apply   formats them in place
#   scripts/format.sh --check FILE...   (or --apply) only those files
# The files: every .c, .h and .cu git tracks under launcher/ placement/
# plugins/ worker/ tests/unit/ (no generated file is checked in there; the
# build's generated sources live under build*/, which is not looked at).
# A table whose alignment carries meaning is kept as written between
# "/* clang-format off */" and "/* clang-format on */".
# Exit 2: a bad argument, clang-format missing (apt-get install
# clang-format), or not a git checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/format.sh --check|--apply [FILE...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
mode=$1; shift
case $mode in --check | --apply) ;; *) usage ;; esac
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null ||
  { echo "format.sh: $CF not found (apt-get install clang-format, or set CLANG_FORMAT)" >&2; exit 2; }
[ -f .clang-format ] || { echo "format.sh: no .clang-format in $(pwd)" >&2; exit 2; }

files=()
if [ $# -gt 0 ]; then
  for f in "$@"; do
    [ -f "$f" ] || { echo "format.sh: $f: no such file" >&2; exit 2; }
    files+=("$f")
  done
else
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "format.sh: not a git checkout: name the files" >&2; exit 2; }
  while IFS= read -r -d '' f; do
    files+=("$f")
  done < <(git ls-files -z -- 'launcher/*.[ch]' 'placement/*.[ch]' 'plugins/*.[ch]' 'worker/*.[ch]' \
    'worker/*.cu' 'tests/unit/*.[ch]')
  [ ${#files[@]} -gt 0 ] || { echo "format.sh: no C file found under launcher/ placement/ plugins/ worker/ tests/unit/" >&2; exit 2; }
fi

if [ "$mode" = --apply ]; then
  "$CF" -i --style=file -- "${files[@]}"
  echo "format.sh: ${#files[@]} files formatted"
  exit 0
fi
differ=0
for f in "${files[@]}"; do
  # a file clang-format cannot read is a difference too: it is reported
  if ! "$CF" --style=file -- "$f" | cmp -s - "$f"; then
    echo "$f"
    differ=$((differ + 1))
  fi
done
if [ "$differ" -gt 0 ]; then
  echo "format.sh: $differ of ${#files[@]} files differ from .clang-format (scripts/format.sh --apply fixes them)" >&2
  exit 1
fi
echo "format.sh: all ${#files[@]} files formatted"
