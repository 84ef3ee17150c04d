#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""funclen.py - the C functions of the tree by length, longest first.

A function's length counts its lines from the one holding the opening brace
of its body to the one holding the closing brace, both included; the
signature above it (one line or several) does not count.

Usage: scripts/funclen.py [--root DIR] [--max N] [--top N] [--only PATH...]
                          [--skip PATH...]
  --root DIR   the checkout (default: the one this script is in)
  --max N      the limit: exit 1 when a function is longer (default 120)
  --top N      how many of the longest to print (default 10)
  --only P...  look only under these paths, relative to the root (default:
               launcher/ placement/ plugins/ worker/); widen the test that
               runs this (tests/integration/funclen.sh) by adding to its list
  --skip P...  leave out what lies under these paths (relative to the root)

Prints one line per function, "LINES path:line name", then one line per
function over the limit ("over N: ..."), and a verdict line.
Exits 0 when none is over, 1 when one is, 2 on a bad argument.
"""
import argparse
import os
import re
import sys

DEFAULT_DIRS = ["launcher", "placement", "plugins", "worker"]
# words that look like calls in a declaration head but are not the name
NOT_A_NAME = {"__attribute__", "if", "for", "while", "switch", "return", "sizeof",
              "__typeof__", "typeof", "_Alignas", "alignas", "defined"}
IDENT_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def blank_comments_strings(text):
    """The text with comments, string and char literals and preprocessor
    lines turned to spaces, newlines kept, so that line numbers hold and a
    brace inside a string or a #define does not count."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":
            # a directive, with its backslash continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        at_line_start = False
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, length) of each function defined in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank_comments_strings(f.read())
    found = []
    depth = 0
    head_start = 0      # where the declaration before a top-level brace begins
    open_at = None      # (name, line) of the function whose body is open
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == "{":
            if depth == 0:
                head = text[head_start:i].strip()
                open_at = None
                if head.endswith(")") and "=" not in head.split("(")[0]:
                    names = [m for m in IDENT_CALL.findall(head) if m not in NOT_A_NAME]
                    if names and not re.match(r"(struct|union|enum)\b", head):
                        open_at = (names[0], line)
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if open_at:
                    found.append((open_at[0], open_at[1], line - open_at[1] + 1))
                open_at = None
                head_start = i + 1
            depth = max(depth, 0)
        elif c == ";" and depth == 0:
            head_start = i + 1
    return found


def main(argv):
    ap = argparse.ArgumentParser(description="C functions by length")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--only", nargs="+", default=DEFAULT_DIRS)
    ap.add_argument("--skip", nargs="+", default=[])
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    rows = []
    for sub in args.only:
        start = os.path.join(root, sub)
        if not os.path.exists(start):
            print(f"funclen.py: {sub}: no such path under {root}", file=sys.stderr)
            return 2
        files = [start] if os.path.isfile(start) else [
            os.path.join(d, f) for d, _, fs in os.walk(start) for f in fs if f.endswith(".c")]
        for path in sorted(files):
            rel = os.path.relpath(path, root)
            if any(rel == os.path.normpath(k) or rel.startswith(os.path.normpath(k) + os.sep)
                   for k in args.skip):
                continue
            rows += [(length, rel, first, name) for name, first, length in functions(path)]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    for length, rel, first, name in rows[:args.top]:
        print(f"{length:5d} {rel}:{first} {name}")
    over = [r for r in rows if r[0] > args.max]
    for length, rel, first, name in over:
        print(f"over {args.max}: {rel}:{first} {name} has {length} lines")
    if over:
        print(f"{len(over)} of {len(rows)} functions over {args.max} lines")
        return 1
    print(f"none of {len(rows)} functions over {args.max} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
