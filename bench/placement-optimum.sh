#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# placement-optimum.sh — the bundled policy against the exact optimum of the
# placement objective on N random small clusters (default 1,000), printing
# how many reach it per instance class (machine types / whether every TP
# group fits an NVLink domain / whether the world fills the cluster) and the
# misses with their gap. Figures, never pass/fail (bench/ convention).
#
#   bench/placement-optimum.sh [N [SEED [POLICY]]]   (PAR3DRUN=path/to/par3drun, default build/par3drun;
#                                                     JOBS=dry runs at once, default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PAR3DRUN:-$here/build/par3drun}
[ -x "$bin" ] || { echo "placement-optimum: no par3drun at $bin (set PAR3DRUN)" >&2; exit 2; }
unset SLURM_JOB_NODELIST
python3 "$here/tests/tools/placement_optimum.py" --par3drun "$bin" --src "$here" -n "${1:-1000}" \
    --seed "${2:-2026}" --policy "${3:-megatron}" --min-share 0 --show 20 -j "${JOBS:-2}" || true
