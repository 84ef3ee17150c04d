# SPDX-License-Identifier: BSD-3-Clause
# estimate_lib.sh — the setup shared by the cost-estimate tests that read
# par3drun's JSON with jq (plan_inference, plan_batch_uneven,
# dryrun_inference); sourced, not a test itself. Skips (exit 77) without
# jq; leaves the shell in the source tree with fail=0, bad() and C, the
# two-node DGX H100 example cluster.
set -u
: "${PAR3DRUN:?PAR3DRUN must point at the par3drun binary}"
: "${P3D_SRC:?P3D_SRC must point at the source tree}"
command -v jq >/dev/null || { echo "skip: jq not installed"; exit 77; }
cd "$P3D_SRC" || exit 1
fail=0
bad() { echo "FAIL $*"; fail=1; }
C=examples/clusters/2x-dgx-h100.json
