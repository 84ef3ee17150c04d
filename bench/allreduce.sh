#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# CPU-backend ring all-reduce bandwidth on loopback, 2/4/8 ranks, buffers
# 1 KiB - 64 MiB, next to this machine's memcpy bandwidth (the ceiling: on
# loopback every byte a rank sends is copied by the kernel into the
# receiver's socket buffer and again out of it).  Prints figures only.
#
# Usage: bench/allreduce.sh [BUILD_DIR] [MAX_SIZE] [RANKS...]
#   defaults: build, 64M, 2 4 8.  Takes about a minute on an idle 2-core
#   machine (longer when it is shared: time_s is the best repetition, each
#   one as long as its slowest rank; cpu_ms is user+system time of all ranks
#   per all-reduce, which the neighbours hardly change).
# Columns: busbw = algbw * 2(n-1)/n (bytes each rank moves, NCCL's
# convention), of_memcpy = busbw / memcpy.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
max=${2:-64M}
shift $(($# > 2 ? 2 : $#))
ranks=${*:-2 4 8}
worker=$build/p3d-worker
[[ -x $worker ]] || { echo "no $worker: build first (scripts/build.sh)"; exit 2; }
source "$src/tests/integration/worker_harness.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
memcpy=$("$worker" --bench-memcpy --bench-max "$max" | field gbps)
printf '# memcpy ceiling: %s GB/s (bytes copied per second, %s buffer, best of 5)\n' "$memcpy" "$max"
printf '# %s, %s cores, load average %s\n' "$(uname -m)" "$(nproc)" "$(cut -d' ' -f1 /proc/loadavg)"
printf '%5s %9s %5s %11s %10s %10s %9s %10s %9s\n' ranks size iters time_s algbw_GB/s \
    busbw_GB/s cpu_ms memcpy_GB/s of_memcpy
start=$SECONDS
for n in $ranks; do
    p3dw_run "$out/n$n" 1 1 "$n" -- "$worker" --bench-allreduce --bench-min 1K --bench-max "$max" ||
        { cat "$out/n$n"/*.log; exit 1; }
    grep -h '"bench":"allreduce"' "$out/n$n/rank-0.log" | sed 's/[{}"]//g; s/,/ /g' |
        awk -v m="$memcpy" '{
            for (i = 1; i <= NF; i++) { split($i, kv, ":"); v[kv[1]] = kv[2] }
            b = v["bytes"]
            sz = b >= 1048576 ? sprintf("%dM", b / 1048576) : sprintf("%dK", b / 1024)
            printf "%5d %9s %5d %11.6f %10.3f %10.3f %9.2f %10.2f %8.1f%%\n", v["ranks"], sz,
                v["iters"], v["time_s"], v["algbw_gbps"], v["busbw_gbps"], v["cpu_s"] * 1000,
                m, 100 * v["busbw_gbps"] / m }'
done
printf '# %d s\n' $((SECONDS - start))
