#!/usr/bin/env bash
# CPU-backend ring all-reduce bus bandwidth on loopback, 2/4/8 ranks, buffers
# 1 KiB - 64 MiB, next to this machine's memcpy bandwidth (the ceiling: every
# byte of a loopback all-reduce is copied several times by the kernel).
# Prints figures only.  Usage: bench/allreduce.sh [BUILD_DIR] [MAX_SIZE]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
max=${2:-64M}
worker=$build/p3d-worker
[[ -x $worker ]] || { echo "no $worker: build first (scripts/build.sh)"; exit 2; }
source "$src/tests/integration/worker_harness.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
memcpy=$("$worker" --bench-memcpy --bench-max "$max" | grep -o '"gbps":[0-9.e+-]*' | cut -d: -f2)
printf '# memcpy: %s GB/s (bytes copied per second, %s buffer)\n' "$memcpy" "$max"
printf '%6s %12s %12s %12s %12s %10s\n' ranks bytes time_s algbw_GB/s busbw_GB/s of_memcpy
for n in 2 4 8; do
    p3dw_run "$out/n$n" 1 1 "$n" -- "$worker" --bench-allreduce --bench-min 1K --bench-max "$max" ||
        { cat "$out/n$n"/*.log; exit 1; }
    grep -h '"bench":"allreduce"' "$out/n$n/rank-0.log" | sed 's/[{}"]//g; s/[a-z_]*://g' |
        awk -F, -v m="$memcpy" '{ printf "%6s %12s %12s %12s %12s %9.1f%%\n", $2, $3, $4, $5, $6, 100 * $6 / m }'
done
