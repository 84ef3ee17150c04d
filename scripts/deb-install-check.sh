#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# deb-install-check.sh — installs the core .deb with apt into a fresh
# minimal Debian 12 root (debootstrap), where libpmix2 and libcurl4 are not
# installed, and runs a dry run and an emulated job from it. Needs root,
# debootstrap and Debian's mirror; about two minutes. Not part of ctest
# (tests/integration/package_deb.sh checks the same Depends offline, with
# apt's simulation): run it by hand before a release.
#   scripts/deb-install-check.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
[ "$(id -u)" = 0 ] || { echo "deb-install-check: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "deb-install-check: apt-get install debootstrap" >&2; exit 2; }
tmp=$(mktemp -d /tmp/p3d-debcheck.XXXXXX)
root=$tmp/root
cleanup() {
  mountpoint -q "$root/proc" 2>/dev/null && umount "$root/proc"
  rm -rf "$tmp"
}
trap cleanup EXIT
(cd "$tmp" && cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/pkg" >/dev/null)
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$tmp/debootstrap.log" 2>&1 ||
  { tail -5 "$tmp/debootstrap.log"; exit 1; }
cp "$tmp"/pkg/par3drun_*.deb "$root/tmp/"
mount -t proc proc "$root/proc"
chroot "$root" /bin/bash -euo pipefail -c '
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/par3drun_*.deb >/dev/null
  if dpkg -l | grep -qE "^ii +(libpmix2|libcurl4)"; then echo "FAIL: libpmix2 or libcurl4 came with the core"; exit 1; fi
  echo "ok: apt installed the core package; libpmix2 and libcurl4 are not installed"
  cd /tmp
  par3drun --version
  par3drun --dry-run --cluster /usr/share/par3drun/examples/clusters/2x-dgx-h100.json --tp 8 --pp 2 >/dev/null
  echo "ok: a dry run from the installed package"
  par3drun --quiet --emulate --cluster /usr/share/par3drun/examples/clusters/2x-dgx-h100.json \
    --tp 2 --pp 2 --dp 1 -- p3d-worker --steps 3 >/dev/null
  echo "ok: an emulated 4-rank p3d-worker job from the installed package"
  out=$(par3drun --dry-run --cluster /usr/share/par3drun/examples/clusters/2x-dgx-h100.json --tp 8 \
    --policy https://example.invalid/p.lua 2>&1 || true)
  case $out in *par3drun-curl*) echo "ok: a URL policy names the par3drun-curl package" ;;
  *) echo "FAIL: a URL policy without the curl package said: $out"; exit 1 ;; esac'
echo "PASS deb-install-check"
