#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The documentation stands alone (issue 46): in README.md, docs/ and every
# examples/**/*.md, every relative Markdown link resolves (from the page's
# own folder), and every repository file a page names in its text does too:
#   - a path under one of the project's top folders (docs/report-json.md,
#     examples/clusters/2x-dgx-h100.json, scripts/build.sh, tests/...; one
#     with a * must match something);
#   - a bare page name (DOMAIN.md, launch.md): in the page's folder, at the
#     top, or in docs/.
# Names that are files a job or a user makes (RUN_DIR/status.txt,
# rank-N.log, train.py) are not under a top folder and not *.md: not checked.
# The lua/ policies are checked for the example files they name too. Nothing
# may point outside the project (../ out of the tree, an absolute path to
# another checkout).
set -euo pipefail
: "${P3D_SRC:?}"
cd "$P3D_SRC"
python3 - <<'PY'
import glob, os, re, sys

pages = ["README.md"] + sorted(glob.glob("docs/*.md")) + sorted(glob.glob("examples/**/*.md", recursive=True))
top = sorted(d for d in os.listdir(".") if os.path.isdir(d) and not d.startswith(".") and not d.startswith("build"))
root = os.path.realpath(".")
bad, nlinks, nnames = [], 0, 0

def inside(p):
    r = os.path.realpath(p)
    return r == root or r.startswith(root + os.sep)

link_re = re.compile(r"\]\(([^)\s]+)\)")
# a path under a top folder, in text or code: docs/x.md, scripts/a.sh, examples/*/y.json
path_re = re.compile(r"(?<![\w./$-])((?:%s)/[\w.*/-]*[\w*])" % "|".join(map(re.escape, top)))
page_re = re.compile(r"(?<![\w./$-])([\w-]+\.md)\b")

for page in pages:
    here = os.path.dirname(page)
    text = open(page, encoding="utf-8").read()
    for n, line in enumerate(text.splitlines(), 1):
        where = "%s:%d" % (page, n)
        for m in link_re.finditer(line):
            t = m.group(1).split("#")[0]
            if not t or re.match(r"^[a-z][a-z0-9+.-]*:", t):
                continue  # an anchor in the page, or a URL
            nlinks += 1
            p = os.path.normpath(os.path.join(here, t))
            if not inside(p):
                bad.append("%s: link %s leaves the project" % (where, t))
            elif not os.path.exists(p):
                bad.append("%s: link %s: no %s" % (where, t, p))
        for m in path_re.finditer(line):
            p = m.group(1).rstrip(".")
            if p.endswith("*") and os.path.exists(p.rstrip("*.")):
                p = p.rstrip("*.")  # Markdown's *emphasis* around a file name
            if re.search(r"[A-Z]{2,}|\bN\b|<|>", p.split("/")[-1]) and not p.endswith(".md"):
                continue  # a placeholder (docs/img/NAME.png), not a file name
            nnames += 1
            if "*" in p:
                if not glob.glob(p):
                    bad.append("%s: names %s: nothing matches" % (where, p))
            elif not os.path.exists(p) and not os.path.exists(os.path.join(here, p)):
                bad.append("%s: names %s: no such file in the project" % (where, p))
        for m in page_re.finditer(line):
            name = m.group(1)
            nnames += 1
            if not any(os.path.exists(os.path.join(d, name)) for d in (here, ".", "docs")):
                bad.append("%s: names %s: no such page in the project (the docs must stand alone)" % (where, name))
        if re.search(r"\.\./shared|/work/", line):
            bad.append("%s: points outside the project: %s" % (where, line.strip()[:100]))

# the policies and examples name example files a user copies
for f in glob.glob("lua/**/*.lua", recursive=True) + glob.glob("examples/**/*", recursive=True):
    if not os.path.isfile(f):
        continue
    for p in set(re.findall(r"examples/(?:clusters|policies|topologies|slurm)/[\w.-]+\.(?:json|lua|xml|txt|sbatch)",
                            open(f, encoding="utf-8", errors="replace").read())):
        nnames += 1
        if not os.path.exists(p):
            bad.append("%s: names %s: missing" % (f, p))

for b in bad:
    print("FAIL: " + b)
print("%s: %d pages, %d relative links, %d file names checked" % ("FAIL" if bad else "ok", len(pages), nlinks, nnames))
sys.exit(1 if bad else 0)
PY
