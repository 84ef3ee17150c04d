#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# worker_harness.sh - start p3d-worker ranks without par3drun: sets the rank
# environment the launcher would set (Megatron order tp-cp-ep-dp-pp:
# rank = tp + TP*dp + TP*DP*pp) and runs every rank in the background.
#
# Sourced by other tests (and bench/allreduce.sh) for:
#   p3dw_run OUTDIR TP PP DP -- WORKER ARGS...   -> exit code of the worst rank;
#                                                   rank N's output in OUTDIR/rank-N.log
# P3DW_BAD_GROUP="RANK:DIM:LIST" replaces one rank's P3D_<DIM>_GROUP;
# P3DW_JOB_ID sets P3D_JOB_ID (default harness-PORT, a new job each run).
# Run directly, it is a test of itself: a 2-rank run must verify.

p3dw_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $((20000 + RANDOM % 30000))
}

p3dw_list() { # first step count -> "a,b,c"
    local out="" i
    for ((i = 0; i < $3; i++)); do out+="${out:+,}$(($1 + i * $2))"; done
    echo "$out"
}

p3dw_run() {
    local outdir=$1 tp=$2 pp=$3 dp=$4
    shift 4
    [[ $1 == -- ]] && shift
    local world=$((tp * pp * dp)) port r t p d pids=() rc=0 code
    port=$(p3dw_free_port)
    mkdir -p "$outdir"
    for ((r = 0; r < world; r++)); do
        t=$((r % tp)) d=$((r / tp % dp)) p=$((r / (tp * dp)))
        local tpg ppg dpg
        tpg=$(p3dw_list $((p * tp * dp + d * tp)) 1 "$tp")
        dpg=$(p3dw_list $((p * tp * dp + t)) "$tp" "$dp")
        ppg=$(p3dw_list $((d * tp + t)) $((tp * dp)) "$pp")
        if [[ -n ${P3DW_BAD_GROUP:-} && ${P3DW_BAD_GROUP%%:*} == "$r" ]]; then
            local rest=${P3DW_BAD_GROUP#*:}
            case ${rest%%:*} in
            tp) tpg=${rest#*:} ;; pp) ppg=${rest#*:} ;; dp) dpg=${rest#*:} ;;
            esac
        fi
        env RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r LOCAL_WORLD_SIZE=$world NODE_RANK=0 \
            MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" P3D_JOB_ID="${P3DW_JOB_ID:-harness-$port}" \
            P3D_TP_RANK=$t P3D_TP_SIZE=$tp P3D_TP_GROUP="$tpg" \
            P3D_PP_RANK=$p P3D_PP_SIZE=$pp P3D_PP_GROUP="$ppg" \
            P3D_DP_RANK=$d P3D_DP_SIZE=$dp P3D_DP_GROUP="$dpg" \
            timeout 120 "$@" >"$outdir/rank-$r.log" 2>&1 &
        pids+=($!)
    done
    for r in "${!pids[@]}"; do
        wait "${pids[$r]}"
        code=$?
        ((code > rc)) && rc=$code
    done
    return $rc
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -u
    if [[ -z ${P3D_WORKER:-} || ! -x ${P3D_WORKER:-} ]]; then
        echo "P3D_WORKER is not set or not executable: p3d-worker not built"
        exit 77
    fi
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    if ! p3dw_run "$dir" 2 1 1 -- "$P3D_WORKER" --backend cpu --verify --json --steps 2 --hidden 16; then
        cat "$dir"/rank-*.log
        echo "FAIL: 2-rank harness run failed"
        exit 1
    fi
    grep -q '"verify":"pass"' "$dir/rank-0.log" || { cat "$dir"/rank-*.log; echo "FAIL: no pass"; exit 1; }
    echo "ok: harness 2-rank run verified"
fi
