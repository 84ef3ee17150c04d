#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/demo.sh builds into a directory of its own (issue 46): it must not
# run scripts/build.sh (which configures build/ with -Werror), nor name the
# user's build/, nor turn -Werror on; every par3drun and p3d-worker it runs
# comes from its own directory. (Running it whole takes a full build: the
# lead's check runs it, this test reads it.)
set -euo pipefail
: "${P3D_SRC:?}"
f=$P3D_SRC/scripts/demo.sh
bad=0
fail() { echo "FAIL: scripts/demo.sh: $*"; bad=1; }
code=$(sed 's/#.*//' "$f") # what runs, not the comments
grep -q 'scripts/build\.sh' <<<"$code" && fail "runs scripts/build.sh (it reconfigures build/ with -Werror)"
grep -Eq '(^|[^-[:alnum:]_])build/' <<<"$code" && fail "names build/: $(grep -E '(^|[^-[:alnum:]_])build/' <<<"$code" | head -1)"
grep -q 'WERROR=ON\|-Werror' <<<"$code" && fail "turns -Werror on"
grep -q 'cmake -S \. -B "\$dir"' <<<"$code" || fail "does not configure its own directory"
n=$(grep -cE '(^|[[:space:]])"?\$dir/(par3drun|p3d-worker)' <<<"$code" || true)
[ "$n" -ge 4 ] || fail "runs par3drun/p3d-worker from elsewhere than its own directory ($n uses of \$dir/)"
grep -q 'dir=\${P3D_DEMO_BUILD:-build-demo}' <<<"$code" || fail "its directory is not build-demo (or \$P3D_DEMO_BUILD)"
[ "$bad" = 0 ] && echo "ok: scripts/demo.sh builds into build-demo/ without -Werror and leaves build/ alone"
exit "$bad"
