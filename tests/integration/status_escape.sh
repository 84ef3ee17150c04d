#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Issue 44: `par3drun status RUN_DIR` shows RUN_DIR/status.txt, a file in a
# directory any rank of the job can write to. What it prints goes through
# the escaper every other output path uses (termsafe): a status.txt with an
# OSC title sequence, a CSI clear-screen, a C1 CSI (U+009B), a bidi
# override (U+202E) and invalid UTF-8 must reach the terminal as visible
# escapes, its lines and the rest of its text unchanged.
set -u
: "${PAR3DRUN:?run through ctest}"
T=$(mktemp -d "${TMPDIR:-/tmp}/p3d-status-esc.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
mkdir -m 0700 "$T/rd"
printf 'generation 0, 2 nodes\n\033]0;owned\007title\n\033[2Jcleared\n\xc2\x9b31mred\nnode \xe2\x80\xaegnp.exe\nbad \xff\xfe bytes\n' \
    >"$T/rd/status.txt"
"$PAR3DRUN" status "$T/rd" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; cat "$T/err"; fail=1; }
python3 - "$T/out" <<'PY' || fail=1
import re, sys
out = open(sys.argv[1], "rb").read()
bad = []
if re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", out):
    bad.append("a raw C0 control or DEL")
try:
    s = out.decode("utf-8")
except UnicodeDecodeError as e:
    bad.append("invalid UTF-8 at byte %d" % e.start)
    s = out.decode("utf-8", "replace")
if re.search("[\u0080-\u009f\u202a-\u202e\u2066-\u2069]", s):
    bad.append("a raw C1 control or bidi override")
for want in ("generation 0, 2 nodes\n", "\\x1b]0;owned\\x07title\n", "\\x1b[2Jcleared\n", "\\u009B31mred\n",
             "node \\u202Egnp.exe\n", "bad \\xff\\xfe bytes\n"):
    if want not in s:
        bad.append("the line %r is not shown escaped" % want)
if bad:
    print("FAIL: par3drun status printed %s:\n%r" % ("; ".join(bad), out))
    sys.exit(1)
PY
[ $fail -eq 0 ] && echo "ok: par3drun status escapes status.txt"
exit $fail
