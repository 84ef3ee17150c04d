#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every example cluster file, policy and topology that the docs, the
# examples and the README name exists (a command a user copies must run).
set -euo pipefail
: "${P3D_SRC:?}"
cd "$P3D_SRC"
bad=0
for f in $(grep -rhoE 'examples/(clusters|policies|topologies|slurm)/[A-Za-z0-9._-]+\.(json|lua|xml|txt|sbatch)' \
             README.md docs examples lua 2>/dev/null | sort -u); do
  [ -e "$f" ] || { echo "FAIL: named but missing: $f ($(grep -rl "$f" README.md docs examples lua | head -3 | tr '\n' ' '))"; bad=1; }
done
[ "$bad" = 0 ] && echo "ok: every example path named in the docs exists"
exit "$bad"
