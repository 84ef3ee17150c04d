# SPDX-License-Identifier: BSD-3-Clause
# The HTML report in a real browser: headless Chromium loads a dry run's
# page, the page's script must run without errors (it sets
# <body data-ready="1"> last; console errors are caught from Chromium's log),
# and the page renders to a PNG. A copy with a broken script must be caught,
# so the check itself is known to work. Skips (77) without chromium.
set -u
: "${PAR3DRUN:?}" "${P3D_SRC:?}"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then echo "skip: no chromium on PATH"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

chrome() { # chrome USERDIR ARGS... : one headless run, bounded in time
    local dir="$1"; shift
    timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$dir" "$@"
}

# check NAME FILE WANT_OK: dump the DOM, look for data-ready and console errors
check() {
    local name="$1" file="$2" want="$3" ok=1
    chrome "$tmp/ud-$name" --enable-logging=stderr --v=0 --dump-dom "file://$file" \
        >"$tmp/$name.dom" 2>"$tmp/$name.log"
    grep -q 'data-ready="1"' "$tmp/$name.dom" || ok=0
    if grep -Eq 'Uncaught|CONSOLE\(.*\)\] "?(Error|TypeError|ReferenceError)' "$tmp/$name.log"; then ok=0; fi
    if [ "$ok" != "$want" ]; then
        echo "FAIL $name: page ok=$ok, want $want"; grep -E 'CONSOLE|Uncaught' "$tmp/$name.log" | head -5; fail=1
    else
        echo "ok $name (page ok=$ok)"
    fi
}

cd "$P3D_SRC" || exit 1
cl=tests/fixtures/clusters/plan-2x-dgx-h100.json
[ -f examples/clusters/2x-dgx-h100.json ] && cl=examples/clusters/2x-dgx-h100.json
# --recompute full: with selective recompute 70B at tp8 pp2 does not fit for training
# (Megatron's arithmetic, docs/cost-model.md), and the dry run exits 2
if ! "$PAR3DRUN" --dry-run --cluster "$cl" --tp 8 --pp 2 --model llama2-70b --global-batch 64 --recompute full \
        --format html --output "$tmp/two.html"; then
    echo "FAIL: dry run --format html"; exit 1
fi
check two "$tmp/two.html" 1

# a broken script: the check must notice
sed 's|show(.stage.);|undefined_function_p3d();|' "$tmp/two.html" > "$tmp/broken.html"
check broken "$tmp/broken.html" 0

# render to PNG (what docs/img/ keeps)
chrome "$tmp/ud-png" --screenshot="$tmp/two.png" --window-size=1280,900 "file://$tmp/two.html" \
    >/dev/null 2>&1
if [ "$(head -c 8 "$tmp/two.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ] ||
   [ "$(stat -c %s "$tmp/two.png")" -lt 10000 ]; then
    echo "FAIL: no PNG rendered"; fail=1
else
    echo "ok PNG $(stat -c %s "$tmp/two.png") bytes"
fi
exit $fail
