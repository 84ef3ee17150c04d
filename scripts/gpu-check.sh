#!/usr/bin/env bash
# gpu-check.sh - on a machine with NVIDIA GPUs: build par3drun with the CUDA
# worker, then run p3d-worker --backend cuda --verify under par3drun on every
# GPU present and print the bandwidth figures (summary lines).
#   1 GPU: world 1.  8 GPUs: tp=2 pp=2 dp=2, then tp=8.  Other counts: tp=N.
# Usage: scripts/gpu-check.sh [BUILD_DIR]      (exit 0 only if every run verified)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-gpu}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
((ngpu > 0)) || { echo "gpu-check: no GPU found (nvidia-smi -L lists none)"; exit 77; }
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DP3D_WITH_CUDA=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target par3drun p3d-worker
[[ -f $build/p3d-worker-cuda.so ]] || { echo "gpu-check: CUDA backend was not built (CUDA/NCCL not found)"; exit 1; }
meshes=("--tp $ngpu")
((ngpu == 1)) && meshes=("--tp 1 --pp 1 --dp 1")
((ngpu == 8)) && meshes=("--tp 2 --pp 2 --dp 2" "--tp 8")
fail=0
for mesh in "${meshes[@]}"; do
    echo "== $ngpu GPU(s): $mesh"
    # shellcheck disable=SC2086
    if ! "$build/par3drun" --nproc-per-node "$ngpu" $mesh -- "$build/p3d-worker" --backend cuda \
        --verify --layers 8 --hidden 1024 --global-batch 64 --micro-batches 4 --steps 10 \
        | tee "$build/gpu-check.log" | grep -E '"summary"|verify step|step [0-9]+/'; then
        fail=1
    fi
    grep -q '"summary":true.*"verify":"pass"' "$build/gpu-check.log" || { echo "FAIL: $mesh"; fail=1; }
done
exit $fail
