#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A policy from a URL (issue 13): without --policy-sha256 it runs with one
# warning that names the URL and the SHA-256 of the bytes it ran (so the
# line can be pasted); with that pin it runs silently; with another pin, or
# when what the URL serves changes under the pin, it is refused (exit 2)
# before anything runs. A local HTTP server on a free port, no network.
set -euo pipefail
: "${PAR3DRUN:?run through ctest}" "${P3D_SRC:?}"
if ! ls "${P3D_PLUGIN_DIR:-/nonexistent}"/p3d_policy_fetch.so >/dev/null 2>&1; then
  echo "skip: plugin p3d_policy_fetch.so not built (no libcurl)"
  exit 77
fi
T=$(mktemp -d /tmp/p3d-pin.XXXXXX)
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export P3D_DATA_DIR=$P3D_SRC
mkdir "$T/www"
cp "$P3D_SRC/lua/naive.lua" "$T/www/p.lua"
python3 - "$T/www" "$T/port" <<'PY' &
import functools, http.server, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
h.func.log_message = lambda *a: None
s = http.server.HTTPServer(("127.0.0.1", 0), h)
open(sys.argv[2] + ".tmp", "w").write(str(s.server_port))
import os; os.rename(sys.argv[2] + ".tmp", sys.argv[2])
s.serve_forever()
PY
srv=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || fail "the test HTTP server did not start"
url="http://127.0.0.1:$(cat "$T/port")/p.lua"
hex=$(sha256sum "$T/www/p.lua" | cut -d' ' -f1)
C2=$P3D_SRC/examples/clusters/2x-dgx-h100.json
run() { set +e; "$PAR3DRUN" --dry-run --cluster "$C2" --tp 8 --policy "$url" "$@" >"$T/out" 2>"$T/err"; rc=$?; set -e; }

run
[ "$rc" = 0 ] || { cat "$T/err"; fail "unpinned URL policy: exit $rc"; }
[ "$(grep -c 'warning: policy .* is not pinned' "$T/err")" = 1 ] || { cat "$T/err"; fail "unpinned: want one warning"; }
grep -qF "policy $url is not pinned" "$T/err" || { cat "$T/err"; fail "the warning does not name the URL"; }
grep -qF "pin this version with --policy-sha256 $hex" "$T/err" || { cat "$T/err"; fail "the warning lacks the digest $hex"; }

run --policy-sha256 "$hex"
[ "$rc" = 0 ] || { cat "$T/err"; fail "pinned: exit $rc"; }
! grep -q 'not pinned' "$T/err" || { cat "$T/err"; fail "pinned: still warned"; }

# what the URL serves changes; the pin refuses it
printf '\n-- changed upstream\n' >>"$T/www/p.lua"
run --policy-sha256 "$hex"
[ "$rc" = 2 ] || { cat "$T/err"; fail "changed content under the pin: exit $rc, want 2"; }
grep -qF "expected $hex; refusing to run it" "$T/err" || { cat "$T/err"; fail "changed content: message"; }
! grep -q 'Placement' "$T/out" || fail "changed content: a placement was printed"
echo "ok: unpinned URL policies warn with their digest; pins hold"
