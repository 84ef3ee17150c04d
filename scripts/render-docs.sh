#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# render-docs.sh — regenerates the pictures and sample outputs the README
# and docs/ show: dry-run reports as HTML/SVG rendered to PNG with headless
# Chromium, and `par3drun plan` output. Usage: scripts/render-docs.sh [BUILD_DIR]
# (default build/). Deterministic inputs; review the diff before committing.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
bin="$build/par3drun"
[ -x "$bin" ] || { echo "render-docs: $bin not found (build first)"; exit 2; }
chromium=$(command -v chromium || command -v chromium-browser) || { echo "render-docs: needs chromium"; exit 2; }
out="$src/docs/img"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export P3D_DATA_DIR="$src" NO_COLOR=1
cd "$src"

pick() { # the example cluster when present, else the test fixture
    if [ -f "examples/clusters/$1" ]; then echo "examples/clusters/$1"; else echo "tests/fixtures/clusters/plan-$1"; fi
}
shot() { # shot HTML_OR_SVG PNG WIDTH HEIGHT
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$tmp/ud" --hide-scrollbars --screenshot="$2" --window-size="$3,$4" "file://$1" \
        >/dev/null 2>&1
    echo "wrote ${2#"$src"/}"
}

two=$(pick 2x-dgx-h100.json)
big=$(pick 64x-dgx-h100-4racks.json)
"$bin" --dry-run --cluster "$two" --tp 8 --pp 2 --model llama2-70b --global-batch 64 --recompute full --format html \
    --output "$tmp/dryrun-2x-dgx-h100.html"
shot "$tmp/dryrun-2x-dgx-h100.html" "$out/dryrun-2x-dgx-h100.png" 1280 1000
"$bin" --dry-run --cluster "$big" --tp 8 --pp 16 --dp 4 --model gpt3-175b --global-batch 1536 --format svg \
    --output "$tmp/dryrun-64x-dgx-h100.svg"
shot "$tmp/dryrun-64x-dgx-h100.svg" "$out/dryrun-64x-dgx-h100.png" 2300 1400
"$bin" plan --cluster "$big" --model gpt3-175b --global-batch 1536 > "$out/plan-175b-64x-dgx-h100.txt"
echo "wrote docs/img/plan-175b-64x-dgx-h100.txt"
