#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Names and notes from input cannot write to the terminal or forge report
# lines (issue 13): a policy file whose name holds a newline and whose note
# holds ESC, BEL, CR, a newline, a bidi override and markup, and a cluster
# file whose rack names hold JSON-escaped controls. The text report keeps
# them on their line as visible escapes, JSON stays valid and carries the
# exact strings, SVG/HTML hold no raw control byte and no live markup.
set -euo pipefail
: "${PAR3DRUN:?run through ctest}" "${P3D_SRC:?}"
T=$(mktemp -d /tmp/p3d-escape.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
nl=$'\n'
pol="$T/ev${nl}il.lua"
cat >"$pol" <<'LUA'
function place(cluster, job)
  local result, notes = par3d.place_nested(cluster, job)
  notes[#notes + 1] = "x\27[2J\7\rpar3drun: all checks passed\nforged \226\128\174 <script>alert(1)</script>"
  return result, notes
end
LUA
printf '{"nodes": [{"name": "n1", "topology": "dgx-h100.xml", "rack": "r\\n1\\u001b[2J\\u009b"},
 {"name": "n2", "topology": "dgx-h100.xml", "rack": "r2"}]}\n' >"$T/c.json"
export P3D_DATA_DIR=$P3D_SRC
for f in text json svg html; do
  "$PAR3DRUN" --dry-run --cluster "$T/c.json" --tp 8 --policy "$pol" --format "$f" >"$T/out.$f" 2>"$T/err.$f" ||
    { cat "$T/err.$f"; fail "--format $f: exit $?"; }
done
python3 - "$T" <<'PY' || exit 1
import json, sys
t = sys.argv[1]
def raw_controls(b, keep):
    return sorted({c for c in b if (c < 0x20 and c not in keep) or c == 0x7f})
text = open(t + "/out.text", "rb").read()
bad = raw_controls(text, {10})
assert not bad, "text report: raw control bytes %s" % bad
lines = text.decode().split("\n")
assert not any(l.startswith("par3drun: all checks passed") or l.startswith("forged") for l in lines), \
    "text report: a note forged a line"
assert any("par3drun dry run: policy ev\\nil (" in l for l in lines), "text report: policy name not escaped on its line"
assert any("r\\n1\\x1b[2J\\u009B" in l for l in lines), "text report: rack name not escaped"
assert "\u202e" not in text.decode() and "\\u202E" in text.decode(), "text report: bidi override not escaped"
doc = json.load(open(t + "/out.json"))
racks = {r["rack"] for r in doc["ranks"]}
assert "r\n1\x1b[2J\x9b" in racks, "JSON: rack not carried exactly: %r" % racks
notes = [c["message"] for c in doc["checks"] if c["code"] == "POLICY_NOTE"]
assert any("<script>" in n for n in notes), "JSON: note missing"
for f in ("svg", "html"):
    b = open(t + "/out." + f, "rb").read()
    bad = raw_controls(b, {9, 10, 13})
    assert not bad, "%s: raw control bytes %s (not even valid XML)" % (f, bad)
    assert b"<script>alert(1)" not in b, "%s: the note's markup is live" % f
print("ok: names and notes are escaped in text, exact in JSON, inert in SVG/HTML")
PY
