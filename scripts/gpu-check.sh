#!/usr/bin/env bash
# gpu-check.sh - one prepared run that says everything about the GPU paths
# of par3drun on one NVIDIA node: builds par3drun, p3d-worker with its
# CUDA/NCCL module and the NVML topology plugin, then runs every check below
# and prints one summary line per check ("gpu-check: PASS|FAIL name detail")
# and a total; exit 1 if any check failed.
#
#   nvml-topo      par3drun topo with the NVML plugin: NVLink and fabric facts
#   check-grad     one layer's gradients on the GPU vs finite differences
#   cross-backend  1 GPU: --backend cuda and --backend cpu, same losses
#   mesh-TxPxD     every tp x pp x dp that uses all N GPUs (N = 1..8), CUDA
#                  backend, --verify against the one-process CPU reference
#                  (tolerance 1e-3), the reference loss must fall >= 10%
#   large-act-ppP  pp >= 2 with 4 MiB activations per micro-batch (beyond
#                  NCCL's default 4 MiB buffers when grouped wrongly)
#   broken-op      P3DW_BREAK=gelu on the GPU: --verify must FAIL
#   moe-tpTepE...  the MoE layer (--experts 8 --top-k 2) with expert
#                  parallelism (par3drun --ep E, carved out of dp): NCCL
#                  grouped ncclSend/ncclRecv all-to-all over EP, expert
#                  gradients over EDP, --verify against the one-process CPU
#                  reference (tolerance 1e-3); tp 1 and 2, pp 2 when N >= 4;
#                  with 1 or 3 GPUs moe-tp1ep1 (ep 1: the experts on the GPU,
#                  no all-to-all)
#   moe-broken-edp N >= 4: P3DW_BREAK=edp-allreduce (the experts' EDP
#                  gradient all-reduce skipped) on the GPU: --verify must FAIL
#   dead-rank      N >= 2: a rank killed mid-run: the job must end non-zero
#                  with a message, no crash (NCCL abort path)
#
# Usage: scripts/gpu-check.sh [--no-gpu] [--gpus N] [BUILD_DIR]
#   BUILD_DIR (or $P3D_BUILD_DIR): default build-gpu, configured with CUDA on
#   when it is new; an existing build dir is built incrementally.
#   --no-gpu: print the plan of checks for N GPUs (default 8) and build
#   everything, run nothing that needs a GPU (CI runs this).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${P3D_BUILD_DIR:-$src/build-gpu}
nogpu=0 ngpu=""
while (($#)); do
    case $1 in
    --no-gpu) nogpu=1 ;;
    --gpus) ngpu=${2:?--gpus needs a number}; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) build=$1 ;;
    esac
    shift
done
if [[ -z $ngpu ]]; then
    if ((nogpu)); then
        ngpu=8
    else
        ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    fi
fi
if ! [[ $ngpu =~ ^[0-9]+$ ]] || ((ngpu > 8)) || ((nogpu && ngpu == 0)); then
    echo "gpu-check: --gpus '$ngpu': expected 1-8" >&2
    exit 2
fi
if ((!nogpu && ngpu == 0)); then
    echo "gpu-check: no GPU found (nvidia-smi -L lists none); use --no-gpu for the plan" >&2
    exit 1
fi

# ---- the plan ----------------------------------------------------------
# One line per check: name|par3drun mesh|environment|worker arguments|expect
# expect: pass (exit 0 and, with --verify, "verify":"pass"), verify-fail,
# runs (exit 0), dies (non-zero, no crash).
# hidden 210: 4h = 840 is divisible by every tp in 1..8; global batch
# 8·dp·m; lr 1 moves the loss by ~35% over 8 steps; the CPU reference of
# --verify costs a few seconds.
base="--backend cuda --json --layers 8 --hidden 210 --steps 8 --lr 1 --timeout 120"
plan=("check-grad|--tp 1 --pp 1 --dp 1||--backend cuda --check-grad --steps 1|pass"
      "cross-backend|--tp 1 --pp 1 --dp 1||$base --global-batch 64 --json|runs")
for ((tp = 1; tp <= ngpu; tp++)); do
    for ((pp = 1; pp <= ngpu; pp++)); do
        ((ngpu % (tp * pp) == 0)) || continue
        dp=$((ngpu / (tp * pp)))
        m=1
        ((pp > 1)) && m=4
        plan+=("mesh-${tp}x${pp}x${dp}|--tp $tp --pp $pp --dp $dp||$base --verify --micro-batches $m --global-batch $((8 * dp * m))|pass")
    done
done
for pp in 2 4 8; do
    ((pp <= ngpu)) || continue
    plan+=("large-act-pp$pp|--tp 1 --pp $pp --dp 1||--backend cuda --layers $pp --hidden 4096 --global-batch 512 --micro-batches 2 --steps 2 --lr 0.01 --timeout 120|runs")
done
plan+=("broken-op|--tp 1 --pp 1 --dp $ngpu|P3DW_BREAK=gelu|$base --verify --global-batch $((8 * ngpu))|verify-fail")
# MoE: experts 8 (divisible by every ep planned), ep carved out of dp.
for tp in 1 2; do
    for ep in 2 4 8; do
        ((tp * ep <= ngpu && ngpu % (tp * ep) == 0)) || continue
        dp=$((ngpu / tp))
        plan+=("moe-tp${tp}ep${ep}|--tp $tp --pp 1 --dp $dp --ep $ep||$base --verify --experts 8 --top-k 2 --global-batch $((8 * dp))|pass")
    done
done
if [[ ${plan[*]} != *moe-* ]]; then # 1 or 3 GPUs: the experts' math on the GPU, no all-to-all
    plan+=("moe-tp1ep1|--tp 1 --pp 1 --dp $ngpu --ep 1||$base --verify --experts 8 --top-k 2 --global-batch $((8 * ngpu))|pass")
fi
if ((ngpu >= 4 && ngpu % 4 == 0)); then
    dp=$((ngpu / 2))
    plan+=("moe-pp2ep2|--tp 1 --pp 2 --dp $dp --ep 2||$base --verify --experts 8 --top-k 2 --micro-batches 4 --global-batch $((32 * dp))|pass")
    plan+=("moe-broken-edp|--tp 1 --pp 1 --dp $ngpu --ep 2|P3DW_BREAK=edp-allreduce|$base --verify --experts 8 --top-k 2 --global-batch $((8 * ngpu))|verify-fail")
fi
if ((ngpu >= 2)); then
    plan+=("dead-rank|--tp $ngpu --pp 1 --dp 1|P3DW_KILL_RANK=1|--backend cuda --hidden 210 --steps 100000 --timeout 20|dies")
fi

echo "gpu-check: plan for $ngpu GPU(s): nvml-topo + ${#plan[@]} worker checks, build dir $build"
echo "gpu-check: PLAN nvml-topo: par3drun topo --format json with $build/plugins/p3d_topo_nvml.so"
for c in "${plan[@]}"; do
    IFS='|' read -r name mesh envs wargs expect <<<"$c"
    echo "gpu-check: PLAN $name: ${envs:+$envs }par3drun $mesh -- p3d-worker $wargs  (expect $expect)"
done

# ---- build -------------------------------------------------------------
if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DP3D_WITH_CUDA=ON >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target par3drun p3d-worker p3d_topo_nvml p3d_fake_nvml >/dev/null
for f in par3drun p3d-worker plugins/p3d_topo_nvml.so; do
    [[ -e $build/$f ]] || { echo "gpu-check: FAIL build: $build/$f was not built"; exit 1; }
done
if [[ ! -f $build/p3d-worker-cuda.so ]]; then
    echo "gpu-check: FAIL build: p3d-worker-cuda.so was not built (CMake found no CUDA/cuBLAS/NCCL)"
    exit 1
fi
echo "gpu-check: build ok (par3drun, p3d-worker, p3d-worker-cuda.so, p3d_topo_nvml.so)"
((nogpu)) && { echo "gpu-check: --no-gpu: plan printed and everything built; nothing run"; exit 0; }

# ---- run ---------------------------------------------------------------
export P3D_PLUGIN_DIR=$build/plugins P3D_DATA_DIR=$src
logs=$(mktemp -d)
total=0 failed=0
report() { # PASS|FAIL name detail
    printf 'gpu-check: %s %-16s %s\n' "$1" "$2" "$3"
    total=$((total + 1))
    [[ $1 == PASS ]] || failed=$((failed + 1))
}

# NVLink as NVML sees it (through the plugin) must agree with nvidia-smi:
# the "nvlink" matrix always exists, so the check compares NV link classes.
if "$build/par3drun" topo --format json >"$logs/topo.json" 2>"$logs/topo.err"; then
    par_nv=$(grep -o '"NV[0-9]*"' "$logs/topo.json" | sort -u | tr -d '"' | tr '\n' ' ' || true)
    smi_nv=$(nvidia-smi topo -m 2>/dev/null | grep -o '\bNV[0-9]*\b' | sort -u | tr '\n' ' ' || true)
    fabric=$(grep -o '"fabric":[^}]*}\?' "$logs/topo.json" | head -1 || true)
    if [[ -n $par_nv || -z $smi_nv ]]; then
        report PASS nvml-topo "par3drun NVLink classes: ${par_nv:-none}; nvidia-smi: ${smi_nv:-none}; ${fabric:-no fabric}"
    else
        report FAIL nvml-topo "nvidia-smi shows ${smi_nv}but par3drun topo none: NVML plugin not loaded?"
    fi
else
    report FAIL nvml-topo "par3drun topo failed: $(tail -1 "$logs/topo.err")"
fi

# The worker wrapper: P3DW_KILL_RANK=R kills rank R that rank 15 s in.
wrap=$logs/wrap.sh
cat >"$wrap" <<'EOS'
#!/usr/bin/env bash
if [[ -n ${P3DW_KILL_RANK:-} && $RANK == "$P3DW_KILL_RANK" ]]; then
    (sleep 15; kill -9 $$) &
fi
exec "$@"
EOS
chmod +x "$wrap"
cross_cuda=""
for c in "${plan[@]}"; do
    IFS='|' read -r name mesh envs wargs expect <<<"$c"
    log=$logs/$name.log
    rc=0
    # tp * pp * dp (--ep is carved out of dp: not a factor of the world)
    world=$(sed 's/--ep [0-9]*//' <<<"$mesh" | grep -o '[0-9]\+' | paste -sd'*' | bc)
    # shellcheck disable=SC2086
    env $envs timeout 500 "$build/par3drun" --nproc-per-node "$world" $mesh -- "$wrap" \
        "$build/p3d-worker" $wargs >"$log" 2>&1 || rc=$?
    sum=$(grep -h '"summary":true' "$log" | tail -1 || true)
    maxrel=$(grep -o '"max_rel_diff":[0-9.e+-]*' <<<"$sum" | cut -d: -f2 || true)
    drop=$(grep -o 'reference loss fell by [-0-9.na]*%' "$log" | grep -o '[-0-9.na]*%' || true)
    crash=$(grep -m1 -E 'Segmentation fault|double free|core dumped|Aborted|terminate called' "$log" || true)
    last=$(grep -h 'p3d-worker: rank\|par3drun:' "$log" | tail -1 | cut -c1-120 || true)
    case $expect in
    pass)
        if ((rc == 0)) && { [[ $wargs != *--verify* ]] || [[ $sum == *'"verify":"pass"'* ]]; } &&
            { [[ $wargs != *--verify* ]] || awk -v d="${drop%\%}" 'BEGIN { exit !(d >= 10) }'; }; then
            report PASS "$name" "${maxrel:+max_rel_diff $maxrel, }${drop:+loss fell $drop, }$(grep -o 'check-grad: pass.*worst rel diff [0-9.e-]*' "$log" || true)"
        else
            report FAIL "$name" "exit $rc, verify ${maxrel:-?}, loss fell ${drop:-?}: $last"
        fi ;;
    runs)
        if ((rc == 0)) && grep -q 'step [0-9]*/[0-9]* loss [0-9]\|"step":' "$log" &&
            ! grep -q 'loss -\?nan\|"loss":-\?nan' "$log"; then
            report PASS "$name" "$(grep -o '"step_time_s":[0-9.e+-]*' <<<"$sum" || true)"
            [[ $name == cross-backend ]] && cross_cuda=$(grep -o '"step":8,"loss":[0-9.e+-]*' "$log" | cut -d: -f3)
        else
            report FAIL "$name" "exit $rc: $last"
        fi ;;
    verify-fail)
        if ((rc == 1)) && grep -q -- '--verify FAILED' "$log"; then
            report PASS "$name" "${envs} on the GPU fails --verify (max_rel_diff ${maxrel:-?})"
        else
            report FAIL "$name" "a broken op was not caught (exit $rc)"
        fi ;;
    dies)
        if ((rc != 0)) && [[ -z $crash ]]; then
            report PASS "$name" "exit $rc, no crash: $last"
        else
            report FAIL "$name" "exit $rc ${crash:+crash: $crash}"
        fi ;;
    esac
    if [[ $name == cross-backend && -n $cross_cuda ]]; then
        rc=0
        # shellcheck disable=SC2086
        "$build/par3drun" --nproc-per-node 1 $mesh -- "$build/p3d-worker" ${wargs/--backend cuda/--backend cpu} \
            >"$logs/cross-cpu.log" 2>&1 || rc=$?
        cpu=$(grep -o '"step":8,"loss":[0-9.e+-]*' "$logs/cross-cpu.log" | cut -d: -f3 || true)
        if ((rc == 0)) && [[ -n $cpu ]] &&
            awk -v a="$cross_cuda" -v b="$cpu" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * b) }'; then
            report PASS cross-cpu "step-8 loss cuda $cross_cuda cpu $cpu"
        else
            report FAIL cross-cpu "step-8 loss cuda $cross_cuda cpu ${cpu:-none} (exit $rc)"
        fi
    fi
done
echo "gpu-check: $total checks, $failed failed (logs in $logs)"
((failed == 0))
