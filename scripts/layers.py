#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""layers.py - the launcher's stage graph, and the rules the build keeps.

Prints, for the stage folders under launcher/ (nested ones, such as
launcher/run/ranks/, are stages of their own) and placement/, which stage
includes whose headers and calls whose functions, with an example of each
edge, then every circle between the .c files of launcher/ and placement/.
Exits 1 when:
  - the stages form a circle (an import circle spans two stage folders);
  - two files call each other, directly or round a longer circle, inside
    a stage too (file A calls a function B defines and B one of A's), and
    the circle is not in scripts/layers-allow.txt, or a line of that list
    names a circle that is gone (the list only shrinks);
  - poll()/ppoll()/epoll_wait() is called outside launcher/loop/loop.c and
    the one documented exception (launcher/rdzv/rdzv_tree_leader.c);
  - usleep()/nanosleep()/sleep() is called anywhere under launcher/;
  - a plugin includes a header that is neither public (p3d/...) nor its own;
  - a file includes a header of another launcher stage that is not that
    stage's one public header (the table in launcher/CMakeLists.txt,
    set(P3D_PUBLIC_HEADER_<stage> <header>), which the build enforces too),
    or a launcher file a placement header outside placement/util.

Usage: scripts/layers.py [SOURCE_DIR]   (default: the checkout it is in)
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
LAUNCHER = os.path.join(ROOT, "launcher")
WAIT_OK = {"launcher/loop/loop.c", "launcher/rdzv/rdzv_tree_leader.c"}

DEF_RE = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(p3d_\w+|rz_\w+)\s*\([^;{]*\)\s*\{", re.M)
CALL_RE = re.compile(r"\b(p3d_\w+|rz_\w+)\s*\(")
INC_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
WAIT_RE = re.compile(r"\b(poll|ppoll|epoll_wait|epoll_pwait)\s*\(")
SLEEP_RE = re.compile(r"\b(usleep|nanosleep|sleep|clock_nanosleep)\s*\(")
# any function, for the file-level circles
ANYDEF_RE = re.compile(r"^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", re.M)
ANYCALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
NOT_FUNC = {"if", "while", "for", "switch", "return", "sizeof"}
ALLOW_REL = "scripts/layers-allow.txt"
PUBLIC_RE = re.compile(r"^\s*set\(\s*P3D_PUBLIC_HEADER_([\w/]+)\s+([\w.]+)\s*\)", re.M)


def public_headers():
    """{"launcher/run": "launch.h", ...} from launcher/CMakeLists.txt."""
    try:
        with open(os.path.join(LAUNCHER, "CMakeLists.txt"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return {}
    return {"launcher/" + m.group(1): m.group(2) for m in PUBLIC_RE.finditer(text)}


def strip(text):
    """Comments and string literals out, line structure kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_comments_only(text):
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def sources():
    for top in ("launcher", "placement", "plugins"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(d, f)


def stage_of(path):
    rel = os.path.relpath(path, ROOT).split(os.sep)
    if rel[0] == "launcher" and len(rel) > 2:
        return "/".join(rel[:-1])  # a nested stage is its own folder: launcher/run/ranks
    if rel[0] == "placement" and len(rel) > 2 and rel[1] != "include":
        return "placement/" + rel[1]
    if rel[0] == "placement":
        return "placement/include"
    if rel[0] == "plugins":
        return "plugins"
    return None


def circles(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, onstack, stack, found, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        onstack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in onstack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                onstack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def allowed_circles():
    """{frozenset of files: line number} from scripts/layers-allow.txt: one
    circle a line, its files joined by " <-> ", then "#" and why."""
    out = {}
    try:
        with open(os.path.join(ROOT, ALLOW_REL), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                files = line.split("#", 1)[0].strip()
                if files:
                    out[frozenset(x.strip() for x in files.split("<->"))] = n
    except OSError:
        pass
    return out


def file_circles(texts):
    """Circles between the .c files of launcher/ and placement/, a stage's
    own files included: file A calls a function B defines (not static, one
    definition) and B one of A's. Each is printed with the calls that close
    it; one the allow-list names passes, any other fails, and so does an
    entry of the list that no longer matches a circle (the list only
    shrinks). Returns (how many circles, 1 when one fails)."""
    files = {os.path.relpath(p, ROOT): t for p, t in texts.items()
             if p.endswith(".c") and os.path.relpath(p, ROOT).startswith(("launcher/", "placement/"))}
    defined = {}
    for rel, t in files.items():
        for m in ANYDEF_RE.finditer(t):
            name = m.group(1)
            if name not in NOT_FUNC and "static" not in m.group(0).split("(")[0]:
                defined.setdefault(name, set()).add(rel)
    calls = {}
    for rel, t in files.items():
        for m in ANYCALL_RE.finditer(t):
            d = defined.get(m.group(1))
            if d and len(d) == 1 and rel not in d:
                calls.setdefault((rel, next(iter(d))), set()).add(m.group(1))
    graph = {}
    for a, b in calls:
        graph.setdefault(a, []).append(b)
    allow = allowed_circles()
    found, bad = circles(graph), 0
    seen = set()
    for comp in sorted(found, key=sorted):
        key = frozenset(comp)
        seen.add(key)
        ok = key in allow
        bad |= not ok
        print(("file circle (allowed, " + ALLOW_REL + f":{allow[key]}): " if ok else "file circle: ")
              + " <-> ".join(sorted(comp)))
        for a, b in sorted(calls):
            if a in key and b in key:
                print(f"  {a} -> {b}: " + ", ".join(sorted(calls[(a, b)])))
    for key, line in sorted(allow.items(), key=lambda kv: kv[1]):
        if key not in seen:
            print(f"{ALLOW_REL}:{line}: " + " <-> ".join(sorted(key)) + " is no circle any more: take the line out")
            bad = 1
    return len(found), bad


def main():
    texts, raw, header_stage, defined = {}, {}, {}, {}
    for p in sources():
        with open(p, encoding="utf-8", errors="replace") as f:
            raw[p] = f.read()
        texts[p] = strip(raw[p])
        st = stage_of(p)
        if p.endswith(".h"):
            header_stage.setdefault(os.path.basename(p), st)
        else:
            for m in DEF_RE.finditer(texts[p]):
                if "static" not in m.group(0).split("(")[0]:
                    defined.setdefault(m.group(1), (st, os.path.relpath(p, ROOT)))
    edges = {}  # (a, b) -> every reason
    verbose = os.environ.get("VERBOSE") == "1"

    def edge(a, b, why):
        if a and b and a != b:
            edges.setdefault((a, b), []).append(why)

    bad = 0
    public = public_headers()
    launcher_stages = sorted({stage_of(p) for p in texts if os.path.relpath(p, ROOT).startswith("launcher/")})
    for y, h in sorted(public.items()):
        if not os.path.exists(os.path.join(ROOT, y, h)):
            print(f"launcher/CMakeLists.txt: the public header of {y}, {h}, is not in {y}/")
            bad = 1
    for p, t in texts.items():
        st = stage_of(p)
        rel = os.path.relpath(p, ROOT)
        for m in INC_RE.finditer(strip_comments_only(raw[p])):
            h = os.path.basename(m.group(1))
            if m.group(1).startswith("p3d/"):
                continue  # the public API, below every stage
            y = header_stage.get(h)
            edge(st, y, f'{rel} includes "{m.group(1)}"')
            if y in launcher_stages and y != st and public.get(y) != h:
                line = raw[p].count("\n", 0, raw[p].find(m.group(0))) + 1
                pub = f"only {public[y]}" if y in public else "none of them: it is the top"
                print(f'{rel}:{line}: includes "{m.group(1)}" of {y}, which shows the stages above it {pub}')
                bad = 1
            elif st in launcher_stages and y and y.startswith("placement/") and y not in ("placement/util", "placement/include"):
                line = raw[p].count("\n", 0, raw[p].find(m.group(0))) + 1
                print(f'{rel}:{line}: includes "{m.group(1)}" of {y}: the launcher sees of placement/ only p3d/ and placement/util')
                bad = 1
        if rel.startswith("plugins/"):
            own = os.path.dirname(p)
            for m in INC_RE.finditer(strip_comments_only(raw[p])):
                inc = m.group(1)
                if not inc.startswith("p3d/") and not os.path.exists(os.path.join(own, inc)):
                    line = raw[p].count("\n", 0, raw[p].find(m.group(0))) + 1
                    print(f'{rel}:{line}: includes "{inc}": a plugin sees only the public headers (p3d/...)')
                    bad = 1
        if p.endswith(".c"):
            for m in CALL_RE.finditer(t):
                d = defined.get(m.group(1))
                if d:
                    edge(st, d[0], f"{rel} calls {m.group(1)} ({d[1]})")
        if rel.startswith("launcher/"):
            for m in WAIT_RE.finditer(t):
                if rel not in WAIT_OK:
                    line = t.count("\n", 0, m.start()) + 1
                    print(f"{rel}:{line}: {m.group(1)}() outside the event loop (launcher/loop/loop.c)")
                    bad = 1
            for m in SLEEP_RE.finditer(t):
                line = t.count("\n", 0, m.start()) + 1
                print(f"{rel}:{line}: {m.group(1)}() under launcher/: wait on the loop (a timer) instead")
                bad = 1
    stages = sorted({s for e in edges for s in e})
    print("stage graph (a -> b: a uses b):")
    for a, b in sorted(edges):
        why = edges[(a, b)]
        print(f"  {a} -> {b}    ({len(why)}) e.g. {why[0]}")
        for w in why[1:] if verbose else []:
            print(f"        {w}")
    for comp in circles({s: [b for (a, b) in edges if a == s] for s in stages}):
        bad = 1
        members = set(comp)
        print("circle: " + " <-> ".join(sorted(comp)))
        for a, b in sorted(edges):
            if a in members and b in members:
                print(f"  {a} -> {b}")
                for w in sorted(set(edges[(a, b)])):
                    print(f"        {w}")
    nfile, bad_files = file_circles(texts)
    bad |= bad_files
    if not bad:
        print("no circle between stages; " + (f"{nfile} file circle(s), each in {ALLOW_REL}; " if nfile else
                                               "no circle between files; ")
              + "poll/epoll only in " + ", ".join(sorted(WAIT_OK)) + "; no sleep under launcher/; "
              "plugins use only public headers; each launcher stage is seen only through its public header ("
              + ", ".join(f"{y}: {h}" for y, h in sorted(public.items())) + ")")
    return bad


if __name__ == "__main__":
    sys.exit(main())
