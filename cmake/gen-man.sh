#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# gen-man.sh OUT PROGRAM VERSION DESCRIPTION [SUBCOMMAND...]
#
# Writes the man page OUT (section 1) from PROGRAM's own --help (and each
# SUBCOMMAND's --help): the help text comes from the option table the parser
# uses, so the man page cannot drift from the program. Run at build time by
# cmake (CMakeLists.txt, "Man pages").
#
# --help layout it reads: "usage:" lines, free text, group headers ("Inputs:"),
# option rows "  --name [METAVAR]  help", indented continuation lines, and
# trailing free text ("Exit codes: ...", "Environment: ..."). A line it does
# not recognise is kept as text, so a new kind of line shows up, never vanishes.
set -eu
out=$1 prog=$2 version=$3 desc=$4
shift 4
name=$(basename "$prog")
tmp="$out.tmp"
{
    echo "@@MAIN"
    "$prog" --help
    for sub in "$@"; do
        echo "@@SUB $sub"
        "$prog" "$sub" --help
    done
} | awk -v name="$name" -v version="$version" -v desc="$desc" '
function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}
# a text line: escaped, and never read by roff as a request
function text(s) {
    s = esc(s)
    if (s ~ /^[.\047]/) s = "\\&" s
    return s
}
function optrow(s,    left, help, i, n, w, c) {
    sub(/^  /, "", s)
    i = index(s, "  ")
    if (i > 0) {
        left = substr(s, 1, i - 1); help = substr(s, i)
    } else {
        # the name and metavar filled the column: "--name META help"
        n = split(s, w, " ")
        left = w[1]; help = ""
        i = 2
        if (n >= 2 && w[2] ~ /^[A-Z0-9|_:=.\/-]+$/) { left = left " " w[2]; i = 3 }
        for (; i <= n; i++) help = help " " w[i]
    }
    sub(/^ +/, "", help)
    # names (and aliases: "--a, --b") in bold, metavars in italics
    n = split(left, w, " ")
    left = ""
    for (i = 1; i <= n; i++) {
        c = ""
        if (w[i] ~ /,$/) { c = ","; w[i] = substr(w[i], 1, length(w[i]) - 1) }
        left = left (i > 1 ? " " : "") (w[i] ~ /^-/ ? "\\fB" : "\\fI") esc(w[i]) "\\fR" c
    }
    return ".TP\n" left "\n" text(help)
}
BEGIN { sect = ""; ntrail = 0 }
/^@@MAIN$/ { part = "main"; state = "head"; next }
/^@@SUB / { part = $2; state = "subhead"; subs[++nsub] = part; next }
# main: usage lines -> SYNOPSIS, text -> DESCRIPTION, groups -> OPTIONS
part == "main" {
    if ($0 ~ /^usage: / || (state == "usage" && $0 ~ /^       [^ ]/)) {
        line = $0; sub(/^usage: /, "", line); sub(/^ +/, "", line)
        syn[++nsyn] = line; state = "usage"; next
    }
    if ($0 ~ /^[A-Z][A-Za-z ()/-]*:$/) {
        opts[++nopt] = ".SS " text(substr($0, 1, length($0) - 1)); state = "opts"; next
    }
    if ($0 ~ /^  --/) { opts[++nopt] = optrow($0); state = "opts"; next }
    if (state == "opts" && $0 ~ /^     +[^ ]/) {
        line = $0; sub(/^ +/, "", line); opts[++nopt] = text(line); next
    }
    if (state == "opts" || state == "trail") {
        if ($0 != "") { trail[++ntrail] = text($0); state = "trail" }
        next
    }
    # the first line "NAME VERSION — what it is" is the NAME section
    if (state == "head" && index($0, name " ") == 1 && index($0, " \342\200\224 ") > 0) {
        desc = substr($0, index($0, " \342\200\224 ") + 5); state = "desc"; next
    }
    state = "desc"
    descr[++ndesc] = $0
    if ($0 != "") desctext = 1
    next
}
# a subcommand: its usage, its text, and the options it takes
{
    if ($0 ~ /^usage: /) { line = $0; sub(/^usage: /, "", line); subsyn[part] = line; next }
    if ($0 ~ /^  --/) { split($0, w, " "); subopt[part] = subopt[part] (subopt[part] == "" ? "" : ", ") "\\fB" esc(w[1]) "\\fR"; next }
    if ($0 ~ /^[A-Z][A-Za-z ()/-]*:$/ || $0 ~ /^(Exit codes|Environment):/) { subdone[part] = 1; next }
    if (!subdone[part] && $0 != "") subtext[part] = subtext[part] text($0) "\n"
    if (!subdone[part] && $0 == "" && subtext[part] != "") subtext[part] = subtext[part] ".PP\n"
}
END {
    printf ".TH %s 1 \"\" \"%s %s\" \"User Commands\"\n", toupper(esc(name)), esc(name), esc(version)
    print ".SH NAME"
    printf "%s \\- %s\n", esc(name), text(desc)
    print ".SH SYNOPSIS"
    print ".nf"
    for (i = 1; i <= nsyn; i++) print text(syn[i])
    print ".fi"
    if (desctext) {
        print ".SH DESCRIPTION"
        pre = 0
        for (i = 1; i <= ndesc; i++) {
            l = descr[i]
            if (l == "") { if (pre) { print ".fi"; pre = 0 } print ".PP"; continue }
            if (l ~ /^  / && !pre) { print ".nf"; pre = 1 }
            if (l ~ /^  /) sub(/^  /, "", l)
            print text(l)
        }
        if (pre) print ".fi"
    }
    if (nsub > 0) {
        print ".SH COMMANDS"
        for (i = 1; i <= nsub; i++) {
            s = subs[i]
            printf ".SS %s %s\n", esc(name), esc(s)
            if (subsyn[s] != "") print ".B " text(subsyn[s]) "\n.PP"
            printf "%s", subtext[s]
            if (subopt[s] != "") print ".PP\nOptions: " subopt[s] "."
        }
    }
    print ".SH OPTIONS"
    for (i = 1; i <= nopt; i++) print opts[i]
    if (ntrail > 0) {
        print ".SH NOTES"
        for (i = 1; i <= ntrail; i++) { if (i > 1 && trail[i] ~ /^[A-Z][a-z ]+:/) print ".PP"; print trail[i] }
    }
    print ".SH SEE ALSO"
    if (name == "par3drun") print "\\fBp3d-worker\\fR(1), \\fBsrun\\fR(1), \\fBlstopo\\fR(1)"
    else print "\\fBpar3drun\\fR(1)"
    print ".PP\nThe full documentation is the docs/ folder of the source tree and README.md."
}' | awk '
# no paragraph break at the start of a section or right after another one
/^\.PP$/ && (last == ".PP" || last ~ /^\.S[HS] /) { next }
{ print; last = $0 }' >"$tmp"
# a help text that did not parse would give a page without options: refuse it
grep -q '^\.TP$' "$tmp" || { echo "gen-man.sh: no options found in $prog --help" >&2; rm -f "$tmp"; exit 1; }
mv "$tmp" "$out"
