#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# gpu-check.sh - one prepared run that says everything about the GPU paths
# of par3drun on one NVIDIA node: builds par3drun, p3d-worker with its
# CUDA/NCCL module and the NVML topology plugin, then runs every check below
# and prints one summary line per check ("gpu-check: PASS|FAIL name detail")
# and a total; exit 1 if any check failed.  Each check is bounded at 120 s
# and the whole script (build included) at 8 minutes: a check that would
# start past the budget is a FAIL line ("not run"), never a silent skip.
#
#   nvml-topo      par3drun topo (NVML plugin) against nvidia-smi topo -m:
#                  the GPU x GPU matrices cell by cell (NV# or no NVLink)
#   check-grad     one layer's gradients on the GPU vs finite differences
#   cross-backend  1 GPU: --backend cuda and --backend cpu, same step-8 loss
#                  (within --verify's CUDA tolerance), every loss finite
#   mesh-TxPxD     every tp x pp x dp that uses all N GPUs (N = 1..8), CUDA
#                  backend, --verify against the one-process CPU reference
#                  (tolerance 2e-5, worker/cuda/cuda_rules.h), the
#                  reference loss must fall >= 10%
#   large-act-ppP  pp >= 2 with 4 MiB activations per micro-batch
#   broken-op      P3DW_BREAK=gelu on the GPU: --verify must FAIL
#   moe-tpTepE...  the MoE layer (--experts 8 --top-k 2) with expert
#                  parallelism; with 1 or 3 GPUs moe-tp1ep1
#   moe-broken-edp N >= 4: P3DW_BREAK=edp-allreduce: --verify must FAIL
#   moe-broken-router  P3DW_BREAK=router (router gradient dropped, a 5e-4
#                  loss change): --verify must FAIL at the CUDA tolerance
#   dead-rank      N >= 2: rank 1 frozen (SIGSTOP) 15 s in: every other
#                  rank must print "did not finish within 20 s" (its NCCL
#                  deadline aborts the communicator) and exit 1; a rank
#                  killed by a signal is a crash
#   production     the real "par3drun ... -- p3d-worker" line (no wrapper:
#                  NCCL_COMM_ID start-up), --verify must pass
#   bench-node     the preflight's GPU figures: p3d-worker --bench-node
#                  --backend cuda on every GPU: backend cuda, every GPU
#                  counted, each GPU's SGEMM checked against the CPU's
#                  double-precision sums (gemm_maxrel <= 1e-3), sane
#                  GFLOP/s and copy GB/s, peer links measured with 2+ GPUs
#                  that have peer access; and with the test knob
#                  P3D_WORKER_BENCH_SLOWDOWN=4 the GFLOP/s 2-8x lower (the
#                  figure follows the work)
#   preflight-gpu  the real "par3drun preflight" on this node: its JSON
#                  counts every GPU, the GFLOP/s of the GPUs, nothing
#                  excluded
# On one GPU every group has one member, so train.c would skip every
# collective: the worker checks run with P3DW_SOLO_COMM=1 (every NCCL
# all-reduce, self send/receive and all-to-all runs on communicators of
# one), and the script ends by saying which paths were not exercised.
#
# Usage: scripts/gpu-check.sh [--no-gpu] [--gpus N] [--budget S] [BUILD_DIR]
#        scripts/gpu-check.sh --plan        the checks and time budget for
#                                           a 1-GPU and an 8-GPU machine
#        scripts/gpu-check.sh --self-test   every comparator on recorded
#                                           inputs (tests/fixtures/gpu-check)
#   BUILD_DIR (or $P3D_BUILD_DIR): default build-gpu, configured with CUDA on
#   when it is new; an existing build dir is built incrementally.
#   --budget S: the whole run's limit in seconds (default 480 on one or
#   two GPUs, 900 on more: the 8-GPU plan has 27 checks).
#   --no-gpu: print the plan of checks for N GPUs (default 8) and build
#   everything, run nothing that needs a GPU (CI runs this).
set -euo pipefail
t_start=$SECONDS
src=$(cd "$(dirname "$0")/.." && pwd)
build=${P3D_BUILD_DIR:-$src/build-gpu}
budget_s="" check_cap_s=120
nogpu=0 ngpu="" mode=run
while (($#)); do
    case $1 in
    --no-gpu) nogpu=1 ;;
    --plan) mode=plan ;;
    --self-test) mode=self-test ;;
    --gpus) ngpu=${2:?--gpus needs a number}; shift ;;
    --budget) budget_s=${2:?--budget needs seconds}; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) build=$1 ;;
    esac
    shift
done

# ---- comparators ---------------------------------------------------------
# Each prints one line "PASS detail" or "FAIL detail".  --self-test runs
# them on recorded inputs with known verdicts.

# The GPU x GPU block of an nvidia-smi topo -m table, or of par3drun topo
# --format text (the same notation): one line "GPUi GPUj CELL" per cell,
# CELL = NV<n>, X or - (no NVLink: PCIe classes are not compared).  Only the
# first table whose header starts with GPU0 counts; legend lines ("NV# =
# ...") and the NIC table are never read as cells.
gpu_matrix() {
    awk '{ sub(/\r$/, "") }
        !hdr { if ($1 == "GPU0") { for (ncol = 0; ncol < NF && $(ncol + 1) ~ /^GPU[0-9]+$/; ) ncol++
                                   hdr = 1 }
               next }
        !done { if ($1 !~ /^GPU[0-9]+$/) { done = 1; next }
                for (j = 0; j < ncol; j++) {
                    c = $(j + 2); v = c ~ /^NV[0-9]+$/ ? c : c == "X" ? "X" : "-"
                    print $1, "GPU" j, v } }' "$1"
}

cmp_topo() { # SMI_TEXT PAR3DRUN_TEXT
    local a b n nv diff
    a=$(gpu_matrix "$1") b=$(gpu_matrix "$2")
    [[ -n $a ]] || { echo "FAIL no GPU matrix in nvidia-smi topo -m output"; return; }
    [[ -n $b ]] || { echo "FAIL no GPU matrix in par3drun topo output"; return; }
    if [[ $a == "$b" ]]; then
        n=$(awk '$1 == "GPU0"' <<<"$a" | wc -l)
        nv=$(awk '$3 ~ /^NV/ { print $3 }' <<<"$a" | sort | uniq -c | awk '{ printf "%s%s x%d", s, $2, $1; s = ", " }')
        echo "PASS $n GPU(s): every GPU x GPU cell agrees (NVLink cells: ${nv:-none})"
        return
    fi
    if [[ $(wc -l <<<"$a") != $(wc -l <<<"$b") ]]; then
        echo "FAIL nvidia-smi shows $(wc -l <<<"$a") GPU cells, par3drun $(wc -l <<<"$b")"
        return
    fi
    diff=$(paste -d' ' <(sort <<<"$a") <(sort <<<"$b") |
        awk '$3 != $6 { printf "%s%s-%s smi %s par3drun %s", s, $1, $2, $3, $6; s = "; "; if (++n == 4) exit }')
    echo "FAIL cells differ: $diff"
}

# Every step loss of a log ("step":N,"loss":X or "step N/M loss X"), one a
# line; and whether each is a finite number.
losses() { grep -o '"step":[0-9]*,"loss":[^,}]*\|step [0-9]*/[0-9]* loss [^ ]*' "$1" | sed 's/.*[": ]//' || true; }
finite() { [[ $1 =~ ^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]]; }
check_losses() { # LOG -> "" when every loss is finite and there is one, else why
    local l n=0
    while read -r l; do
        [[ -n $l ]] || continue
        n=$((n + 1))
        finite "$l" || { echo "step loss '$l' is not a finite number"; return; }
    done < <(losses "$1")
    ((n > 0)) || echo "no step loss in the log"
}
last_line() { grep -h 'p3d-worker: rank\|par3drun:' "$1" | tail -1 | cut -c1-120 || true; }
crash_of() { grep -m1 -E 'killed by signal|Segmentation fault|double free|core dumped|terminate called' "$1" || true; }

cmp_runs() { # LOG RC: exit 0, finite losses, a step time
    local why st
    (($2 == 0)) || { echo "FAIL exit $2: $(last_line "$1")"; return; }
    why=$(check_losses "$1")
    [[ -z $why ]] || { echo "FAIL $why"; return; }
    st=$(grep -h '"summary":true' "$1" | grep -o '"step_time_s":[0-9.e+-]*' | cut -d: -f2 | tail -1 || true)
    finite "${st:-x}" || { echo "FAIL no step time in the summary"; return; }
    echo "PASS step time ${st} s, $(losses "$1" | wc -l) finite losses"
}

cmp_pass() { # LOG RC VERIFY(0|1): exit 0; with --verify the verdict, both figures, a 10% fall
    local sum maxrel drop why
    (($2 == 0)) || { echo "FAIL exit $2: $(last_line "$1")"; return; }
    why=$(check_losses "$1")
    [[ -z $why || $3 == 0 ]] || { echo "FAIL $why"; return; }
    if (($3 == 0)); then
        grep -q 'check-grad: pass' "$1" || { echo "FAIL no 'check-grad: pass' line"; return; }
        echo "PASS $(grep -o 'check-grad: pass.*' "$1" | head -1 | cut -c1-80)"
        return
    fi
    sum=$(grep -h '"summary":true' "$1" | tail -1 || true)
    [[ -n $sum ]] || { echo "FAIL no summary line"; return; }
    [[ $sum == *'"verify":"pass"'* ]] || { echo "FAIL verify is not pass"; return; }
    maxrel=$(grep -o '"max_rel_diff":[^,}]*' <<<"$sum" | cut -d: -f2 || true)
    finite "${maxrel:-x}" || { echo "FAIL no max_rel_diff figure in the summary"; return; }
    drop=$(grep -o 'reference loss fell by [^%]*%' "$1" | tail -1 | sed 's/.* by //; s/%//' || true)
    finite "${drop:-x}" || { echo "FAIL no 'reference loss fell by' figure"; return; }
    awk -v d="$drop" 'BEGIN { exit !(d >= 10) }' ||
        { echo "FAIL the reference loss fell by only $drop% (< 10%: verify proves little)"; return; }
    echo "PASS max_rel_diff $maxrel, reference loss fell $drop%"
}

cmp_verify_fail() { # LOG RC: exit 1 with "--verify FAILED"
    local maxrel
    maxrel=$(grep -o 'by up to [^ ]*' "$1" | head -1 | cut -d' ' -f4 || true)
    if (($2 == 1)) && grep -q -- '--verify FAILED' "$1"; then
        echo "PASS the break is caught: --verify FAILED (differs by up to ${maxrel:-?})"
    else
        echo "FAIL a broken operation was not caught (exit $2, no '--verify FAILED')"
    fi
}

# dead-rank: RCDIR holds rank-R.rc (the wrapper's record of each rank's
# exit status, 128+N for signal N).  Every rank but the victim must exit 1
# after printing its NCCL deadline message; a survivor ended by a signal
# (par3drun's SIGTERM before its deadline, or a crash) fails.
cmp_dies() { # LOG RC RCDIR VICTIM WORLD TIMEOUT_S
    local log=$1 rc=$2 dir=$3 victim=$4 world=$5 t=$6 r code bad="" n=0
    ((rc != 0)) || { echo "FAIL the job ended with exit 0"; return; }
    for ((r = 0; r < world; r++)); do
        ((r == victim)) && continue
        code=$(cat "$dir/rank-$r.rc" 2>/dev/null || echo none)
        if [[ $code == none ]]; then
            bad+=" rank $r: no exit status (wrapper killed);"
        elif ((code >= 128)); then
            bad+=" rank $r: killed by signal $((code - 128)) (crash or stopped before its deadline);"
        elif ((code != 1)); then
            bad+=" rank $r: exit $code, expected 1;"
        elif ! grep -q "rank $r: .*did not finish within $t s" "$log"; then
            bad+=" rank $r: no 'did not finish within $t s';"
        else
            n=$((n + 1))
        fi
    done
    if [[ -n $bad ]]; then
        echo "FAIL${bad%;}"
    else
        echo "PASS all $n surviving rank(s) hit the ${t} s NCCL deadline, aborted and exited 1"
    fi
}

cmp_cross() { # CUDA_LOG CPU_LOG TOL: the last step's loss of both, finite and equal within TOL
    local a b why
    why=$(check_losses "$1")
    [[ -z $why ]] || { echo "FAIL cuda run: $why"; return; }
    why=$(check_losses "$2")
    [[ -z $why ]] || { echo "FAIL cpu run: $why"; return; }
    a=$(losses "$1" | tail -1) b=$(losses "$2" | tail -1)
    if awk -v a="$a" -v b="$b" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * (b < 0 ? -b : b)) }'; then
        echo "PASS last-step loss cuda $a cpu $b (tolerance $3)"
    else
        echo "FAIL last-step loss cuda $a cpu $b differ by more than $3 relative"
    fi
}

# The figures of a --bench-node line: "KEY VALUE" lines (the last
# "preflight ..." line of the output).
bench_figs() { grep '^preflight ' "$1" | tail -1 | tr ' ' '\n' | grep '=' | tr '=' ' ' || true; }
fig() { awk -v k="$2" '$1 == k { print $2 }' <<<"$1"; }

cmp_bench() { # LOG RC SLOW_LOG SLOW_RC NGPU: the GPU figures, proven, and the knob's 4x
    local f s g m p e n gs ratio
    (($2 == 0)) || { echo "FAIL exit $2: $(grep -m1 'p3d-worker' "$1" | cut -c1-120)"; return; }
    f=$(bench_figs "$1")
    [[ -n $f ]] || { echo "FAIL no 'preflight ...' figures line"; return; }
    [[ $(fig "$f" backend) == cuda ]] || { echo "FAIL backend $(fig "$f" backend), not cuda: the GPUs were not used"; return; }
    n=$(fig "$f" gpus) g=$(fig "$f" gflops) m=$(fig "$f" mem_gbps) p=$(fig "$f" p2p_gbps) e=$(fig "$f" gemm_maxrel)
    [[ $n == "$5" ]] || { echo "FAIL gpus=$n, nvidia-smi lists $5"; return; }
    finite "${e:-x}" && awk -v e="$e" 'BEGIN { exit !(e <= 1e-3) }' ||
        { echo "FAIL the SGEMM against the CPU reference: gemm_maxrel '${e:-none}' (want <= 1e-3)"; return; }
    finite "${g:-x}" && awk -v g="$g" 'BEGIN { exit !(g >= 100) }' || { echo "FAIL gflops '$g' (a GPU does >= 100)"; return; }
    finite "${m:-x}" && awk -v m="$m" 'BEGIN { exit !(m >= 50) }' || { echo "FAIL mem_gbps '$m' (HBM copies >= 50)"; return; }
    if [[ -n $p ]]; then
        finite "$p" && awk -v p="$p" 'BEGIN { exit !(p >= 1) }' || { echo "FAIL p2p_gbps '$p'"; return; }
    elif (($5 >= 2)) && [[ $(fig "$f" links) != none ]]; then
        echo "FAIL $5 GPUs and no p2p_gbps, yet links=$(fig "$f" links)"
        return
    fi
    (($4 == 0)) || { echo "FAIL the slowed run exited $4"; return; }
    s=$(bench_figs "$3")
    gs=$(fig "$s" gflops)
    finite "${gs:-x}" || { echo "FAIL the slowed run gave no gflops"; return; }
    ratio=$(awk -v a="$g" -v b="$gs" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 1e9) }')
    awk -v r="$ratio" 'BEGIN { exit !(r >= 2 && r <= 8) }' ||
        { echo "FAIL the 4x knob moved the GFLOP/s by ${ratio}x (want 2-8x)"; return; }
    echo "PASS $n GPU(s): SGEMM $g GFLOP/s (max rel error vs CPU $e), copy $m GB/s, peer ${p:-none} GB/s; 4x knob: ${ratio}x lower"
}

cmp_preflight_gpu() { # JSON RC NGPU: par3drun preflight's object for this node
    (($2 == 0)) || { echo "FAIL par3drun preflight exited $2"; return; }
    python3 - "$1" "$3" <<'PY' 2>&1 || true
import json, sys
try:
    o = json.load(open(sys.argv[1]))
    nd = o["nodes"][0]
    n = int(sys.argv[2])
    bad = []
    if nd["gpus"] != n: bad.append(f"gpus {nd['gpus']}, nvidia-smi lists {n}")
    if not (nd["gflops"] or 0) >= 100: bad.append(f"gflops {nd['gflops']}")
    if nd["excluded"]: bad.append(f"excluded: {nd['why']}")
    if n >= 2 and nd["p2p_gbps"] is None and not nd["links"].startswith("not measured"): bad.append(f"links {nd['links']}")
    print("FAIL " + "; ".join(bad) if bad else
          f"PASS {nd['gpus']} GPU(s), {nd['gflops']} GFLOP/s, peer {nd['p2p_gbps']} GB/s, links: {nd['links'][:40]}")
except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
    print(f"FAIL not the preflight object: {e}")
PY
}

# ---- --self-test -----------------------------------------------------------
if [[ $mode == self-test ]]; then
    fx=$src/tests/fixtures/gpu-check
    bad=0 n=0
    expect() { # WANT NAME COMPARATOR ARGS...
        local want=$1 name=$2 got
        shift 2
        got=$("$@")
        n=$((n + 1))
        if [[ ${got%% *} == "$want" ]]; then
            echo "gpu-check self-test: ok   $name: $got"
        else
            echo "gpu-check self-test: WRONG $name: expected $want, got: $got"
            bad=$((bad + 1))
        fi
    }
    expect PASS topo-1gpu-legend cmp_topo "$fx/smi-h200-1gpu.txt" "$fx/par-h200-1gpu.txt"
    expect PASS topo-nv18-equal cmp_topo "$fx/smi-nv18-2gpu.txt" "$fx/par-nv18-2gpu.txt"
    expect FAIL topo-nv18-vs-nv1 cmp_topo "$fx/smi-nv18-2gpu.txt" "$fx/par-nv1-2gpu.txt"
    expect FAIL topo-nv18-vs-none cmp_topo "$fx/smi-nv18-2gpu.txt" "$fx/par-pcie-2gpu.txt"
    expect FAIL topo-gpu-count cmp_topo "$fx/smi-nv18-2gpu.txt" "$fx/par-h200-1gpu.txt"
    expect PASS topo-dgx1-equal cmp_topo "$fx/smi-dgx1-v100.txt" "$fx/par-dgx1-v100.txt"
    expect FAIL topo-no-matrix cmp_topo "$fx/smi-nv18-2gpu.txt" "$fx/log-verify-pass.txt"
    expect PASS runs-ok cmp_runs "$fx/log-verify-pass.txt" 0
    expect FAIL runs-inf cmp_runs "$fx/log-loss-inf.txt" 0
    expect FAIL runs-exit1 cmp_runs "$fx/log-verify-pass.txt" 1
    expect PASS pass-ok cmp_pass "$fx/log-verify-pass.txt" 0 1
    expect FAIL pass-inf cmp_pass "$fx/log-loss-inf.txt" 0 1
    expect FAIL pass-no-figure cmp_pass "$fx/log-no-figure.txt" 0 1
    expect FAIL pass-no-drop cmp_pass "$fx/log-no-drop.txt" 0 1
    expect PASS verify-fail-caught cmp_verify_fail "$fx/log-verify-failed.txt" 1
    expect FAIL verify-fail-missed cmp_verify_fail "$fx/log-verify-pass.txt" 0
    expect PASS cross-equal cmp_cross "$fx/log-verify-pass.txt" "$fx/log-verify-pass.txt" 2e-5
    expect FAIL cross-inf cmp_cross "$fx/log-loss-inf.txt" "$fx/log-verify-pass.txt" 2e-5
    expect FAIL cross-differ cmp_cross "$fx/log-verify-pass.txt" "$fx/log-loss-off.txt" 2e-5
    expect PASS cross-within cmp_cross "$fx/log-verify-pass.txt" "$fx/log-loss-off.txt" 2e-4
    expect FAIL cross-nan cmp_cross "$fx/log-verify-failed.txt" "$fx/log-verify-pass.txt" 2e-5
    expect PASS dies-deadline cmp_dies "$fx/dead-deadline/log.txt" 1 "$fx/dead-deadline" 1 4 20
    expect FAIL dies-sigterm cmp_dies "$fx/dead-sigterm/log.txt" 1 "$fx/dead-sigterm" 1 4 20
    expect FAIL dies-crash cmp_dies "$fx/dead-crash/log.txt" 1 "$fx/dead-crash" 1 4 20
    expect PASS bench-ok cmp_bench "$fx/bench-8gpu.txt" 0 "$fx/bench-8gpu-slow4.txt" 0 8
    expect FAIL bench-gpu-count cmp_bench "$fx/bench-8gpu.txt" 0 "$fx/bench-8gpu-slow4.txt" 0 4
    expect FAIL bench-wrong-gemm cmp_bench "$fx/bench-8gpu-wrong.txt" 0 "$fx/bench-8gpu-slow4.txt" 0 8
    expect FAIL bench-cpu cmp_bench "$fx/bench-cpu.txt" 0 "$fx/bench-cpu.txt" 0 8
    expect FAIL bench-knob-ignored cmp_bench "$fx/bench-8gpu.txt" 0 "$fx/bench-8gpu.txt" 0 8
    expect FAIL bench-exit cmp_bench "$fx/bench-8gpu.txt" 1 "$fx/bench-8gpu-slow4.txt" 0 8
    expect PASS preflight-gpu-ok cmp_preflight_gpu "$fx/preflight-8gpu.json" 0 8
    expect FAIL preflight-gpu-cpu cmp_preflight_gpu "$fx/preflight-cpu.json" 0 8
    expect FAIL preflight-gpu-log cmp_preflight_gpu "$fx/log-verify-pass.txt" 0 8
    echo "gpu-check self-test: $n comparator cases, $bad wrong"
    ((bad == 0))
    exit
fi

# ---- the plan ----------------------------------------------------------
# One line per check: name|par3drun mesh|environment|worker arguments|expect|estimate_s
# expect: pass (exit 0 and, with --verify, "verify":"pass" with figures),
# verify-fail, runs (exit 0, finite losses), dies (see cmp_dies).
# hidden 210: 4h = 840 is divisible by every tp in 1..8; global batch
# 8·dp·m; lr 1 moves the loss by ~35% over 8 steps; the CPU reference of
# --verify costs a few seconds.  The estimates (seconds) are guesses for an
# H100/H200 node (NCCL init ~5 s, the CPU reference of --verify ~5 s), not
# measurements; every check is capped at 120 s regardless.
make_plan() { # N -> the array plan
    local n=$1 tp pp dp m ep solo="" gb
    ((n == 1)) && solo=P3DW_SOLO_COMM=1
    local base="--backend cuda --json --layers 8 --hidden 210 --steps 8 --lr 1 --timeout 60"
    plan=("check-grad|--tp 1 --pp 1 --dp 1||--backend cuda --check-grad --steps 1|pass|10"
          "cross-backend|--tp 1 --pp 1 --dp 1||$base --global-batch 64|runs|15")
    for ((tp = 1; tp <= n; tp++)); do
        for ((pp = 1; pp <= n; pp++)); do
            ((n % (tp * pp) == 0)) || continue
            dp=$((n / (tp * pp)))
            m=1
            ((pp > 1)) && m=4
            plan+=("mesh-${tp}x${pp}x${dp}|--tp $tp --pp $pp --dp $dp|$solo|$base --verify --micro-batches $m --global-batch $((8 * dp * m))|pass|15")
        done
    done
    for pp in 2 4 8; do
        ((pp <= n)) || continue
        plan+=("large-act-pp$pp|--tp 1 --pp $pp --dp 1||--backend cuda --json --layers $pp --hidden 4096 --global-batch 512 --micro-batches 2 --steps 2 --lr 0.01 --timeout 60|runs|20")
    done
    plan+=("broken-op|--tp 1 --pp 1 --dp $n|${solo:+$solo }P3DW_BREAK=gelu|$base --verify --global-batch $((8 * n))|verify-fail|15")
    for tp in 1 2; do
        for ep in 2 4 8; do
            ((tp * ep <= n && n % (tp * ep) == 0)) || continue
            dp=$((n / tp))
            plan+=("moe-tp${tp}ep${ep}|--tp $tp --pp 1 --dp $dp --ep $ep||$base --verify --experts 8 --top-k 2 --global-batch $((8 * dp))|pass|20")
        done
    done
    if [[ ${plan[*]} != *moe-* ]]; then # 1 or 3 GPUs: the experts on the GPU, no all-to-all between members
        plan+=("moe-tp1ep1|--tp 1 --pp 1 --dp $n --ep 1|$solo|$base --verify --experts 8 --top-k 2 --global-batch $((8 * n))|pass|20")
    fi
    if ((n >= 4 && n % 4 == 0)); then
        dp=$((n / 2))
        plan+=("moe-pp2ep2|--tp 1 --pp 2 --dp $dp --ep 2||$base --verify --experts 8 --top-k 2 --micro-batches 4 --global-batch $((32 * dp))|pass|25")
        plan+=("moe-broken-edp|--tp 1 --pp 1 --dp $n --ep 2|P3DW_BREAK=edp-allreduce|$base --verify --experts 8 --top-k 2 --global-batch $((8 * n))|verify-fail|20")
    fi
    # the router bug moves the loss by 5e-4 at global batch 64
    ep=1
    ((n % 2 == 0)) && ep=2
    gb=64
    ((64 % n == 0)) || gb=$((8 * n))
    plan+=("moe-broken-router|--tp 1 --pp 1 --dp $n --ep $ep|${solo:+$solo }P3DW_BREAK=router|$base --verify --experts 8 --top-k 2 --global-batch $gb|verify-fail|20")
    if ((n >= 2)); then
        plan+=("dead-rank|--tp $n --pp 1 --dp 1|P3DW_FREEZE_RANK=1|--backend cuda --hidden 210 --steps 100000 --timeout 20|dies|45")
    fi
    plan+=("production|--tp 1 --pp 1 --dp $n||$base --verify --global-batch $((8 * n))|pass|15")
}
build_estimate_s=150 # a cold Release build with the CUDA module, -j$(nproc)
budget_for() { [[ -n $budget_s ]] && echo "$budget_s" || { (($1 <= 2)) && echo 480 || echo 900; }; }

print_plan() { # N
    local c name mesh envs wargs expect est total=$build_estimate_s
    make_plan "$1"
    echo "gpu-check: plan for $1 GPU(s): nvml-topo + ${#plan[@]} worker checks, build dir $build"
    echo "gpu-check: PLAN nvml-topo: par3drun topo --format text (NVML plugin) vs nvidia-smi topo -m, cell by cell"
    echo "gpu-check: PLAN bench-node: p3d-worker --bench-node --backend cuda, and again with P3D_WORKER_BENCH_SLOWDOWN=4 (expect every GPU counted, SGEMM within 1e-3 of the CPU reference, the knob 2-8x)"
    echo "gpu-check: PLAN preflight-gpu: par3drun preflight --tp 1 --format json on this node (expect its GPUs benchmarked, nothing excluded)"
    total=$((total + 20))
    for c in "${plan[@]}"; do
        IFS='|' read -r name mesh envs wargs expect est <<<"$c"
        total=$((total + est))
        echo "gpu-check: PLAN $name: ${envs:+$envs }par3drun $mesh -- p3d-worker $wargs  (expect $expect)"
    done
    local b
    b=$(budget_for "$1")
    echo "gpu-check: BUDGET $1 GPU(s): build ~${build_estimate_s} s + checks ~$((total - build_estimate_s)) s = ~${total} s estimated; each check capped at ${check_cap_s} s, the whole run at ${b} s$( ((total > b)) && echo " (over: the last checks would be FAIL not run)")"
}

if [[ $mode == plan ]]; then
    for n in 1 8; do
        print_plan "$n"
        make_plan "$n"
        if ((n == 1)); then
            echo "gpu-check: on 1 GPU: NCCL all-reduce, self send/receive and all-to-all run on communicators of one (P3DW_SOLO_COMM=1); NOT exercised: NCCL between GPUs, pipeline send/receive between stages, the EP all-to-all between members, the dead-rank abort path, GPU-to-GPU NVLink"
        fi
    done
    exit 0
fi

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
[[ -z $budget_s || $budget_s =~ ^[0-9]+$ ]] || { echo "gpu-check: --budget '$budget_s': expected seconds" >&2; exit 2; }
budget_s=$(budget_for "$ngpu")
print_plan "$ngpu"

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
echo "gpu-check: build ok (par3drun, p3d-worker, p3d-worker-cuda.so, p3d_topo_nvml.so) in $((SECONDS - t_start)) s"
((nogpu)) && { echo "gpu-check: --no-gpu: plan printed and everything built; nothing run"; exit 0; }

# ---- run ---------------------------------------------------------------
export P3D_PLUGIN_DIR=$build/plugins P3D_DATA_DIR=$src
logs=$(mktemp -d)
total=0 failed=0
report() { # NAME "PASS|FAIL detail" SECONDS
    local v=${2%% *} d=${2#* }
    printf 'gpu-check: %s %-18s %s (%d s)\n' "$v" "$1" "$d" "${3:-0}"
    total=$((total + 1))
    [[ $v == PASS ]] || failed=$((failed + 1))
}
# The time a check may take: its cap, or what is left of the budget.
check_limit() {
    local left=$((budget_s - (SECONDS - t_start) - 5))
    ((left < check_cap_s)) && echo "$left" || echo "$check_cap_s"
}

t0=$SECONDS
if nvidia-smi topo -m >"$logs/smi-topo.txt" 2>&1 &&
    timeout "$(check_limit)" "$build/par3drun" topo --format text >"$logs/par-topo.txt" 2>"$logs/topo.err"; then
    report nvml-topo "$(cmp_topo "$logs/smi-topo.txt" "$logs/par-topo.txt")" $((SECONDS - t0))
else
    report nvml-topo "FAIL nvidia-smi topo -m or par3drun topo failed: $(tail -1 "$logs/topo.err" 2>/dev/null)" $((SECONDS - t0))
fi

# The worker wrapper: records the worker's exit status (128+N for signal
# N) in $P3DW_RC_DIR/rank-$RANK.rc; P3DW_FREEZE_RANK=R freezes rank R
# (SIGSTOP) 15 s in, so its peers wait in NCCL until their deadline (a
# killed rank would let par3drun stop them first).
wrap=$logs/wrap.sh
cat >"$wrap" <<'EOS'
#!/usr/bin/env bash
"$@" &
pid=$!
if [[ -n ${P3DW_FREEZE_RANK:-} && $RANK == "$P3DW_FREEZE_RANK" ]]; then
    (sleep 15; kill -STOP "$pid") &
fi
wait "$pid"
rc=$?
echo "$rc" >"${P3DW_RC_DIR:?}/rank-$RANK.rc"
exit "$rc"
EOS
chmod +x "$wrap"
cuda_tol=2e-5 # worker/cuda/cuda_rules.h P3DW_VERIFY_TOL_CUDA
for c in "${plan[@]}"; do
    IFS='|' read -r name mesh envs wargs expect _ <<<"$c"
    log=$logs/$name.log rcdir=$logs/$name.rc
    mkdir -p "$rcdir"
    limit=$(check_limit)
    if ((limit < 10)); then
        report "$name" "FAIL not run: the ${budget_s} s budget is spent"
        continue
    fi
    t0=$SECONDS rc=0
    # tp * pp * dp (--ep is carved out of dp: not a factor of the world)
    world=$(sed 's/--ep [0-9]*//' <<<"$mesh" | grep -o '[0-9]\+' | paste -sd'*' | bc)
    if [[ $name == production ]]; then
        # shellcheck disable=SC2086
        timeout -k 5 "$limit" "$build/par3drun" --nproc-per-node "$world" $mesh -- \
            "$build/p3d-worker" $wargs >"$log" 2>&1 || rc=$?
    else
        # shellcheck disable=SC2086
        env $envs P3DW_RC_DIR="$rcdir" timeout -k 5 "$limit" "$build/par3drun" --nproc-per-node "$world" \
            $mesh -- "$wrap" "$build/p3d-worker" $wargs >"$log" 2>&1 || rc=$?
    fi
    dt=$((SECONDS - t0))
    if ((rc == 124 || rc == 137)); then
        report "$name" "FAIL did not end within $limit s (killed): $(last_line "$log")" "$dt"
        continue
    fi
    case $expect in
    pass) v=$(cmp_pass "$log" "$rc" "$([[ $wargs == *--verify* ]] && echo 1 || echo 0)") ;;
    runs) v=$(cmp_runs "$log" "$rc") ;;
    verify-fail) v=$(cmp_verify_fail "$log" "$rc") ;;
    dies) v=$(cmp_dies "$log" "$rc" "$rcdir" 1 "$world" 20) ;;
    esac
    # a crash fails every check but dead-rank, whose frozen victim is killed
    crash=$(crash_of "$log")
    [[ $expect != dies && -n $crash && ${v%% *} == PASS ]] && v="FAIL crash: $crash"
    report "$name" "$v" "$dt"
    if [[ $name == cross-backend ]]; then
        t0=$SECONDS rc=0
        # shellcheck disable=SC2086
        timeout -k 5 "$(check_limit)" "$build/par3drun" --nproc-per-node 1 $mesh -- "$build/p3d-worker" \
            ${wargs/--backend cuda/--backend cpu} >"$logs/cross-cpu.log" 2>&1 || rc=$?
        if ((rc != 0)); then
            report cross-cpu "FAIL the CPU run exited $rc: $(last_line "$logs/cross-cpu.log")" $((SECONDS - t0))
        else
            report cross-cpu "$(cmp_cross "$log" "$logs/cross-cpu.log" "$cuda_tol")" $((SECONDS - t0))
        fi
    fi
done
# the preflight's GPU figures: the worker's, then par3drun's
t0=$SECONDS rc=0 rc2=0
timeout -k 5 "$(check_limit)" "$build/p3d-worker" --bench-node --backend cuda >"$logs/bench.log" 2>&1 || rc=$?
P3D_WORKER_BENCH_SLOWDOWN=4 timeout -k 5 "$(check_limit)" "$build/p3d-worker" --bench-node --backend cuda \
    >"$logs/bench-slow.log" 2>&1 || rc2=$?
report bench-node "$(cmp_bench "$logs/bench.log" "$rc" "$logs/bench-slow.log" "$rc2" "$ngpu")" $((SECONDS - t0))
t0=$SECONDS rc=0
PATH=$build:$PATH timeout -k 5 "$(check_limit)" "$build/par3drun" preflight --tp 1 --format json \
    >"$logs/preflight.json" 2>"$logs/preflight.err" || rc=$?
report preflight-gpu "$(cmp_preflight_gpu "$logs/preflight.json" "$rc" "$ngpu")" $((SECONDS - t0))

if ((ngpu == 1)); then
    echo "gpu-check: on 1 GPU: exercised: the CUDA kernels and cuBLAS, non-blocking NCCL init and splits, NCCL all-reduce, grouped self send/receive and all-to-all (self segment) on communicators of one (P3DW_SOLO_COMM=1), the production NCCL_COMM_ID start-up"
    echo "gpu-check: on 1 GPU: NOT exercised: NCCL between two GPUs (P2P/NVLink/SHM transports), pipeline send/receive between stages, the EP all-to-all between members, the dead-rank abort path, GPU-to-GPU NVLink in nvml-topo"
fi
echo "gpu-check: $total checks, $failed failed in $((SECONDS - t_start)) s (budget ${budget_s} s; logs in $logs)"
((failed == 0))
