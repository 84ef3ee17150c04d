#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs the Debian 12 packages par3drun builds and tests with. Idempotent:
# packages already present are not asked for again, and apt-get update runs
# only when something is missing. Needs root (or sudo) when it installs.
set -euo pipefail

PKGS=(build-essential cmake pkg-config git dpkg-dev bash-completion man-db
      libhwloc-dev libxml2-dev hwloc liblua5.4-dev lua5.4 libcjson-dev libyaml-dev libcmocka-dev
      libssl-dev libcurl4-openssl-dev libpmix-dev
      openmpi-bin libopenmpi-dev slurm-wlm munge etcd-server etcd-client
      clang clang-format libclang-rt-14-dev valgrind iproute2 procps psmisc curl python3 bc hyperfine gdb)
# clang-format: scripts/format.sh (the checked-in .clang-format).
# gdb: tests/e2e/slurm_partial_gpus.sh names the frame a stuck srun waits in.
# Chromium renders the HTML report in the tests (P3D_SETUP_NO_BROWSER=1 skips it).
if [ "${P3D_SETUP_NO_BROWSER:-0}" != 1 ]; then PKGS+=(chromium); fi
# PyTorch 1.13 (CPU) runs docs/launch.md's progress snippet in
# tests/integration/torch_progress.sh (which skips without it): 145 MB to
# download with its dependencies, 2 min 13 s to install here
# (P3D_SETUP_NO_TORCH=1 skips it).
if [ "${P3D_SETUP_NO_TORCH:-0}" != 1 ]; then PKGS+=(python3-torch); fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
