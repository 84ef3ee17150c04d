#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# scripts/gpu-check.sh --no-gpu in CI: the plan of GPU checks is printed
# (every mesh of 8 and of 3 GPUs, each with shapes the worker accepts) and
# par3drun, p3d-worker, its CUDA module and the NVML plugin are built in the
# test's own build dir (incrementally: nothing is rebuilt from scratch).
set -u
src=${P3D_SRC:?} build=${P3D_BUILD:?}
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
    echo "no CUDA toolkit (nvcc) on this machine: the CUDA module cannot be built"
    exit 77
fi
fail=0
out=$(P3D_BUILD_DIR=$build bash "$src/scripts/gpu-check.sh" --no-gpu 2>&1)
rc=$?
((rc == 0)) || { echo "$out" | tail -5; echo "FAIL: gpu-check.sh --no-gpu exited $rc"; fail=1; }
n=$(grep -c '^gpu-check: PLAN mesh-' <<<"$out")
# tp x pp x dp = 8: 10 ordered factorisations.
((n == 10)) || { echo "FAIL: $n mesh checks planned for 8 GPUs, expected 10"; fail=1; }
grep -q '^gpu-check: build ok' <<<"$out" || { echo "FAIL: no 'build ok'"; fail=1; }
for c in nvml-topo check-grad cross-backend large-act-pp8 broken-op dead-rank moe-tp2ep4 moe-pp2ep2 \
    moe-broken-edp; do
    grep -q "^gpu-check: PLAN $c" <<<"$out" || { echo "FAIL: check $c missing from the plan"; fail=1; }
done
# Every planned worker shape must be one the worker accepts for its mesh:
# the CPU backend runs each mesh of a 3-GPU plan for one step.
out3=$(P3D_BUILD_DIR=$build bash "$src/scripts/gpu-check.sh" --no-gpu --gpus 3 2>&1) ||
    { echo "FAIL: --gpus 3 plan"; fail=1; }
source "$(dirname "$0")/worker_harness.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
while read -r name mesh; do
    read -r tp pp dp <<<"$(grep -o '[0-9]\+' <<<"$mesh" | tr '\n' ' ')"
    wargs=$(sed -n "s/^gpu-check: PLAN $name: .*-- p3d-worker \(.*\)  (expect.*/\1/p" <<<"$out3")
    # shellcheck disable=SC2086
    p3dw_run "$dir/$name" "$tp" "$pp" "$dp" -- "$build/p3d-worker" ${wargs/--backend cuda/--backend cpu} \
        --steps 1 --timeout 30 || { echo "FAIL: $name: the planned shape fails on the CPU backend"; \
        tail -3 "$dir/$name"/rank-0.log; fail=1; }
done < <(sed -n 's/^gpu-check: PLAN \(mesh-[^:]*\): par3drun \(--tp [0-9]* --pp [0-9]* --dp [0-9]*\).*/\1 \2/p' <<<"$out3")
# The MoE checks of the 8-GPU plan (they need par3drun's --ep): all 7 must
# be planned; three of them (tp 2, pp 2, the broken one; the others differ
# only in numbers, and each costs ~15 s here) run 2 steps on the CPU backend
# under par3drun --emulate with their planned mesh, arguments and
# environment, and must give the planned verdict there too.
cluster=$src/examples/clusters/2x-dgx-h100.json
nmoe=0
while IFS='|' read -r name envs mesh wargs expect; do
    nmoe=$((nmoe + 1))
    [[ $name == moe-tp2ep4 || $name == moe-pp2ep2 || $name == moe-broken-edp ]] || continue
    # shellcheck disable=SC2086
    env $envs timeout 300 "$PAR3DRUN" --emulate --cluster "$cluster" $mesh -- "$build/p3d-worker" \
        ${wargs/--backend cuda/--backend cpu} --steps 2 >"$dir/$name.log" 2>&1
    rc=$?
    case $expect in
    pass) ((rc == 0)) && grep -q '"summary":true.*"verify":"pass"' "$dir/$name.log" ;;
    verify-fail) ((rc == 1)) && grep -q -- '--verify FAILED' "$dir/$name.log" ;;
    esac || { echo "FAIL: $name: expected $expect on the CPU backend (exit $rc)"; tail -3 "$dir/$name.log"; fail=1; }
done < <(sed -n 's/^gpu-check: PLAN \(moe-[^:]*\): \([A-Z0-9_]*=[^ ]* \)\{0,1\}par3drun \(--tp [^-]*--pp [^-]*--dp [^-]*--ep [0-9]*\) -- p3d-worker \(.*\)  (expect \(.*\))$/\1|\2|\3|\4|\5/p' <<<"$out")
((nmoe == 8)) || { echo "FAIL: $nmoe MoE checks planned for 8 GPUs, expected 8 (with moe-broken-router)"; fail=1; }
((fail)) || echo "ok: gpu-check --no-gpu plans 10 meshes and $nmoe MoE checks for 8 GPUs, builds everything; 3-GPU shapes and 3 MoE checks run on the CPU backend"
exit $fail
