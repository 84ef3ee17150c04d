#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every tracked source file names its license (scripts/spdx.sh; LICENSE).
set -euo pipefail
: "${P3D_SRC:?}"
cd "$P3D_SRC"
command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 || { echo "skip: not a git checkout"; exit 77; }
grep -q 'BSD 3-Clause\|Redistribution and use in source and binary forms' LICENSE || { echo "FAIL: LICENSE is not BSD-3-Clause"; exit 1; }
bash scripts/spdx.sh
echo "ok: every source file has an SPDX line"
