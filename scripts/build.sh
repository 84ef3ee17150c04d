#!/usr/bin/env bash
# Configures and builds into build/ (or build-sanitize/ with --sanitize).
# Warnings are errors here (P3D_WERROR=ON): this is the developers' and CI's
# build. A plain `cmake -S . -B build` (users, packagers) leaves it off.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build; extra=(-DP3D_WERROR=ON)
if [ "${1:-}" = --sanitize ]; then dir=build-sanitize; extra+=(-DP3D_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug); fi
cmake -S . -B "$dir" "${extra[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
