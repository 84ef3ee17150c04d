#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every source file of par3drun carries one SPDX line naming its license.
#   scripts/spdx.sh          list the tracked source files that lack it; exit 1 if any
#   scripts/spdx.sh --add    add it (after a #! line, in the file's comment syntax)
# Test inputs (tests/bad, tests/fixtures, tests/golden, fuzz corpora) are data, not source.
set -euo pipefail
cd "$(dirname "$0")/.."
tag='SPDX-License-Identifier: BSD-3-Clause'
mode=${1:-check}

comment_for() {
  case "$1" in
    *.c|*.h|*.cu) printf '/* %s */' "$tag" ;;
    *.lua)        printf -- '-- %s' "$tag" ;;
    *)            printf '# %s' "$tag" ;;
  esac
}

missing=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  head -n 3 "$f" | grep -q 'SPDX-License-Identifier:' && continue
  if [ "$mode" = --add ]; then
    line=$(comment_for "$f")
    if head -n 1 "$f" | grep -q '^#!'; then
      { head -n 1 "$f"; printf '%s\n' "$line"; tail -n +2 "$f"; } > "$f.spdx"
    else
      { printf '%s\n' "$line"; cat "$f"; } > "$f.spdx"
    fi
    chmod --reference="$f" "$f.spdx"; mv "$f.spdx" "$f"
  else
    echo "no SPDX line: $f"; missing=1
  fi
done < <(git ls-files -- '*.c' '*.h' '*.cu' '*.sh' '*.lua' '*.py' '*.cmake' 'CMakeLists.txt' '*/CMakeLists.txt' \
           .ci/run scripts/* 2>/dev/null | sort -u |
         grep -vE '^tests/(bad|fixtures|golden|fuzz/corpus)/')
exit $missing
