#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Quick start (2): install what is needed, build, run every test.
#   scripts/test.sh              normal build
#   scripts/test.sh --sanitize   ASan + UBSan build (CI runs both)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
dir=build; [ "${1:-}" = --sanitize ] && dir=build-sanitize
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$dir" && ctest --output-on-failure -j2 --timeout 600
