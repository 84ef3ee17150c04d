#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Configures and builds, warnings as errors (P3D_WERROR=ON: this is the
# developers' and CI's build; a plain `cmake -S . -B build`, as users and
# packagers run it, leaves -Werror off).
#   scripts/build.sh              build/          gcc, RelWithDebInfo (the default)
#   scripts/build.sh --sanitize   build-sanitize/ gcc, Debug, ASan + UBSan
#   scripts/build.sh --release    build-release/  gcc, Release with Debian's flags
#   scripts/build.sh --clang      build-clang/    clang, Release with Debian's flags
# "Debian's flags" are dpkg-buildflags' CFLAGS/CPPFLAGS/LDFLAGS with every
# hardening feature on, as a Debian package build gets them (-O2,
# -D_FORTIFY_SOURCE=2, -fstack-protector-strong, -Werror=format-security,
# relro/now).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build; extra=(-DP3D_WERROR=ON); debflags=0
case "${1:-}" in
"") ;;
--sanitize) dir=build-sanitize; extra+=(-DP3D_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug) ;;
--release) dir=build-release; extra+=(-DCMAKE_BUILD_TYPE=Release); debflags=1 ;;
--clang) dir=build-clang; extra+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang); debflags=1 ;;
*) echo "usage: scripts/build.sh [--sanitize|--release|--clang]" >&2; exit 2 ;;
esac
if [ "$debflags" = 1 ]; then
  command -v dpkg-buildflags >/dev/null || { echo "build.sh: dpkg-buildflags missing (apt-get install dpkg-dev)" >&2; exit 2; }
  export DEB_BUILD_MAINT_OPTIONS=hardening=+all
  CFLAGS="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
  LDFLAGS="$(dpkg-buildflags --get LDFLAGS)"
  export CFLAGS LDFLAGS
fi
cmake -S . -B "$dir" "${extra[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)"
