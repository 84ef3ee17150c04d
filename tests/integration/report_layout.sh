# SPDX-License-Identifier: BSD-3-Clause
# The SVG and HTML pictures of the 4-rack example (64 nodes, 16 a rack) fit
# a 1400-px window and draw every node: each view names all 64 nodes, and
# no element (rects, lines, text with an estimated width, the <svg> boxes
# themselves, in page coordinates: the views' translate() and the HTML
# body's 16-px margin added) ends right of x = 1400. A cluster of more
# racks than a row holds wraps into rows; one of more than MAX_RACKS (64)
# racks names the racks it does not draw.
set -u
: "${PAR3DRUN:?}" "${P3D_SRC:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset SLURM_JOB_NODELIST
cd "$P3D_SRC" || exit 1
fail=0
cl=examples/clusters/64x-dgx-h100-4racks.json
for f in svg html; do
    if ! "$PAR3DRUN" --dry-run --cluster "$cl" --tp 8 --pp 4 --format $f --output "$tmp/4r.$f" 2>"$tmp/$f.err"; then
        echo "FAIL dry run --format $f"; cat "$tmp/$f.err"; fail=1
    fi
done
python3 bench/gen-cluster.py -n 2200 --rack-size 16 -o "$tmp/many.json" >/dev/null
cp examples/topologies/dgx-h100.xml "$tmp/"
"$PAR3DRUN" --dry-run --cluster "$tmp/many.json" --tp 8 --pp 4 --format svg --output "$tmp/many.svg" 2>"$tmp/many.err" \
    || { echo "FAIL dry run of 2200 nodes"; cat "$tmp/many.err"; fail=1; }

python3 - "$tmp" <<'PY' || fail=1
import re, sys, xml.etree.ElementTree as ET
tmp = sys.argv[1]
NS = "{http://www.w3.org/2000/svg}"
LIMIT = 1400
bad = []

def walk(el, dx, dy, where, right):
    """Every element's right edge in page coordinates, translate() applied."""
    t = el.get("transform", "")
    m = re.match(r"translate\((-?[\d.]+),(-?[\d.]+)\)", t)
    if m:
        dx, dy = dx + float(m.group(1)), dy + float(m.group(2))
    tag = el.tag.replace(NS, "")
    r = None
    if tag in ("rect", "svg") and el.get("width") and not el.get("width").endswith("%"):
        r = dx + float(el.get("x", 0)) + float(el.get("width"))
    elif tag == "line":
        r = dx + max(float(el.get("x1")), float(el.get("x2")))
    elif tag == "text" and el.get("x") is not None:
        size = float(el.get("font-size", 12))
        text = "".join(el.itertext())
        w = 0.6 * size * len(text)  # sans-serif averages ~0.55 em a character
        anchor = el.get("text-anchor", "start")
        x = dx + float(el.get("x"))
        r = x + (w / 2 if anchor == "middle" else 0 if anchor == "end" else w)
    if r is not None and r > right[0]:
        right[0] = r
    if r is not None and r > LIMIT:
        bad.append("%s: <%s> ends at x=%.0f > %d: %s" % (where, tag, r, LIMIT, ET.tostring(el)[:120]))
    for ch in el:
        walk(ch, dx, dy, where, right)

def node_labels(root):
    """Node names drawn as a node's label, per view."""
    out = []
    for g in root.iter(NS + "g"):
        if g.get("class") == "view":
            names = [t.text for t in g.iter(NS + "text") if t.text and re.fullmatch(r"node\d{3}", t.text)]
            out.append(names)
    return out

want = ["node%03d" % i for i in range(1, 65)]
svg = ET.parse(tmp + "/4r.svg").getroot()
right = [0]
walk(svg, 0, 0, "svg", right)
views = node_labels(svg)
assert len(views) == 4, len(views)
for v in views:
    if sorted(v) != want:
        bad.append("svg: a view draws %d of 64 nodes: missing %s" % (len(set(v)), sorted(set(want) - set(v))[:5]))
print("svg: right edge %.0f px, %s nodes a view" % (right[0], [len(v) for v in views]))

html = open(tmp + "/4r.html").read()
secs = re.findall(r"<svg .*?</svg>", html, re.S)
assert len(secs) == 4, len(secs)
for k, s in enumerate(secs):
    root = ET.fromstring(s)
    right = [0]
    walk(root, 16, 0, "html view %d" % (k + 1), right)  # body{margin:16px}
    v = node_labels(root)[0]
    if sorted(v) != want:
        bad.append("html view %d draws %d of 64 nodes" % (k + 1, len(set(v))))
    print("html view %d: right edge %.0f px, %d nodes" % (k + 1, right[0], len(v)))

# 2200 nodes in 138 racks of 16: rows of 4 racks, 64 racks drawn, the rest named
many = ET.parse(tmp + "/many.svg").getroot()
right = [0]
walk(many, 0, 0, "many", right)
view = [g for g in many.iter(NS + "g") if g.get("class") == "view"][0]
frames = [r for r in view if r.tag == NS + "rect" and r.get("fill") == "#f4f4f4"]
rows = sorted({float(r.get("y")) for r in frames})
xs = sorted({float(r.get("x")) for r in frames})
label = "".join("".join(t.itertext()) for t in view.iter(NS + "text") if "more racks not drawn" in "".join(t.itertext()))
print("many: %d rack frames in %d rows x %d columns; %s" % (len(frames), len(rows), len(xs), label))
if len(frames) != 64 or len(rows) != 16 or len(xs) != 4:
    bad.append("many: want 64 racks drawn in 16 rows of 4, got %d in %d x %d" % (len(frames), len(rows), len(xs)))
if not re.search(r"\+ 74 more racks not drawn: r0064 \.\. r0137, ranks \d+\.\.\d+", label):
    bad.append("many: no line naming the 74 racks not drawn: %r" % label)
for b in bad[:20]:
    print("FAIL " + b)
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "ok report_layout" || echo "FAIL report_layout"
exit $fail
