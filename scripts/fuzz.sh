#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzzes every parser of outside input for a given time per target:
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 600, all)
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer + ASan + UBSan,
# libraries instrumented) in build-fuzz/, runs each one on a scratch copy of
# its checked-in corpus (tests/fuzz/corpus/<target>/), at most $P3D_FUZZ_JOBS
# (default 2) at once under `nice -n 19`, and prints per target the
# executions and the coverage (cov:/ft: of libFuzzer's last status line).
# New inputs stay in build-fuzz/fuzz-work/<target>/corpus (minimize them
# into the checked-in corpus with -merge=1 when they matter); crashes,
# timeouts and OOMs land in build-fuzz/fuzz-work/<target>/ and make the
# script exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
secs=${1:-600}
shift || true
build=${P3D_FUZZ_BUILD:-build-fuzz}
jobs=${P3D_FUZZ_JOBS:-2}
if ! command -v clang >/dev/null; then
    echo "fuzz.sh: clang not found (apt-get install clang)" >&2
    exit 77
fi
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DP3D_SANITIZE=ON -DP3D_FUZZ=ON -DP3D_WITH_CUDA=OFF >"$build/fuzz-cmake.log" 2>&1 ||
    { cat "$build/fuzz-cmake.log"; exit 1; }
cmake --build "$build" -j"$jobs" --target fuzz_all >"$build/fuzz-build.log" 2>&1 ||
    { tail -40 "$build/fuzz-build.log"; exit 1; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for f in tests/fuzz/fuzz_*.c; do
        t=$(basename "$f" .c)
        targets+=("${t#fuzz_}")
    done
fi

work="$build/fuzz-work"
mkdir -p "$work"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {
    local t=$1 d="$work/$1"
    mkdir -p "$d/corpus"
    cp -n tests/fuzz/corpus/"$t"/* "$d/corpus/" 2>/dev/null || true
    local dict=()
    [ -f tests/fuzz/dict/"$t".dict ] && dict=(-dict="$root/tests/fuzz/dict/$t.dict")
    # -timeout: one input over $P3D_FUZZ_TIMEOUT s (default 120: under
    # nice 19 on a shared, loaded machine a 0.3 s input can wait 10 s for
    # the CPU) is a hang; -rss_limit_mb: an input that needs over 2 GiB is
    # a resource-bound bug. Replay a reported timeout with the replay-*
    # program to tell a hang from a starved CPU.
    (cd "$d" && nice -n 19 "$root/$build/fuzz/fuzz-$t" -max_total_time="$secs" \
        -timeout="${P3D_FUZZ_TIMEOUT:-120}" \
        -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 "${dict[@]}" \
        corpus >"log.txt" 2>&1) || echo "$t: libFuzzer exited $? (see $d/log.txt)" >>"$work/failures"
}

rm -f "$work/failures"
running=0
for t in "${targets[@]}"; do
    [ -x "$build/fuzz/fuzz-$t" ] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true

printf '%-14s %12s %8s %8s %8s\n' target execs "exec/s" cov ft
for t in "${targets[@]}"; do
    log="$work/$t/log.txt"
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    last=$(grep -E '#[0-9]+.*cov: ' "$log" | tail -1)
    cov=$(echo "$last" | grep -o 'cov: [0-9]*' | grep -o '[0-9]*' || echo '?')
    ft=$(echo "$last" | grep -o 'ft: [0-9]*' | grep -o '[0-9]*' || echo '?')
    printf '%-14s %12s %8s %8s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}"
done
if [ -s "$work/failures" ]; then
    cat "$work/failures"
    ls "$work"/*/crash-* "$work"/*/timeout-* "$work"/*/oom-* "$work"/*/leak-* 2>/dev/null || true
    exit 1
fi
