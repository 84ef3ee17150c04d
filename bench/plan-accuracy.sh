#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# plan-accuracy.sh — the cost model's step time held against published
# measurements of Megatron-LM training runs (issue 45). For every row: the
# source (paper and table, or repository file), the layout, the measured
# and the predicted step time, the error; then the median and the worst
# |error|, split into the rows the GPU figures were calibrated on and the
# rows kept back to check them (docs/cost-model.md, "Compute time").
# Figures only, never pass/fail (bench/ convention).
#
#   bench/plan-accuracy.sh          (PAR3DRUN=path/to/par3drun, default build/par3drun)
#
# Measured step time = the source's FLOPs per iteration / (GPUs x the
# achieved TFLOP/s per GPU it reports), with the source's own FLOP count:
#   N21  Narayanan et al., "Efficient Large-Scale Language Model Training on
#        GPU Clusters Using Megatron-LM", SC21, Table 1 (also Megatron-LM's
#        README, images/cases_april2021.png): A100 80GB, s 2048, V 51200,
#        full recompute; FLOPs 96 B s L h^2 (1 + s/6h + V/16Lh).
#   K22  Korthikanti et al., "Reducing Activation Recomputation in Large
#        Transformer Models", 2022 (arXiv 2205.05198), Table 5: end-to-end
#        iteration times, full recompute and selective recompute + sequence
#        parallelism (22B 1.42/1.10 s, 175B 18.13/13.75 s, 530B 49.05/37.83 s,
#        1T 94.42/71.49 s), the layouts of its Table 3 (tp 8; pp 1, 8, 35,
#        64; 8, 64, 280, 512 GPUs; batch 4, 64, 280, 512): A100 80GB, s 2048,
#        V 51200. Checked against the transcription in Calculon's validation
#        (calculon-ai/calculon, calculon/llm/validation.py, seqsel_tab5),
#        which also runs 530B with 3 interleaved stages; here without.
#   M24  Megatron-LM README, images/model_table.png (Megatron-Core r0.8.0
#        weak scaling, commit f2e5db402c): H100 80GB, s 4096, V 131072, dp 48;
#        FLOPs as megatron/training/training.py num_floating_point_operations
#        counts them: 12 B s L h^2 (2 + s/h + 4 + V/2Lh) (a 4h MLP).
# Assumed where the sources do not say (the same for every row of a
# source): micro-batch 1, 1F1B without interleaving, the distributed
# optimizer (ZeRO-1), tied embeddings, 8 GPUs per node, NVLink inside a
# node, a non-blocking InfiniBand fabric between nodes (one "rack": the
# published clusters, Selene and Eos, are full fat trees; par3drun's default
# link figures).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${PAR3DRUN:-$src/build/par3drun}
[[ -x $bin ]] || { echo "no $bin: build first (scripts/build.sh)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# source role gpu L h heads tp pp gpus B recompute measured(TFLOP/s per GPU | s: seconds)
# role: fit = the GPU figures were calibrated on it, check = kept back
rows=(
  "N21 fit   A100 24  2304  24   1  1   32  512 full 137"
  "N21 check A100 30  3072  32   2  1   64  512 full 138"
  "N21 fit   A100 36  4096  32   4  1  128  512 full 142"
  "N21 check A100 40  6144  48   8  1  256 1024 full 135"
  "N21 fit   A100 48  8192  64   8  2  512 1536 full 138"
  "N21 check A100 60 10240  80   8  4 1024 1792 full 140"
  "N21 fit   A100 80 12288  96   8  8 1536 2304 full 148"
  "N21 check A100 96 16384 128   8 16 1920 2160 full 155"
  "N21 fit   A100 105 20480 128  8 35 2520 2520 full 163"
  "N21 check A100 128 25600 160  8 64 3072 3072 full 163"
  "K22 check A100 48  6144  64   8  1    8    4 selective 1.10s"
  "K22 check A100 96 12288  96   8  8   64   64 selective 13.75s"
  "K22 check A100 105 20480 128  8 35  280  280 selective 37.83s"
  "K22 check A100 128 25600 160  8 64  512  512 selective 71.49s"
  "K22 check A100 48  6144  64   8  1    8    4 full 1.42s"
  "K22 check A100 96 12288  96   8  8   64   64 full 18.13s"
  "K22 check A100 105 20480 128  8 35  280  280 full 49.05s"
  "K22 check A100 128 25600 160  8 64  512  512 full 94.42s"
  "M24 fit   H100 24  2048  16   1  1   48  192 selective 408.8"
  "M24 check H100 30  4096  32   2  1   96  192 selective 465.9"
  "M24 fit   H100 32  6144  48   4  1  192  192 selective 489.1"
  "M24 check H100 48  7168  56   8  1  384  192 selective 459.6"
  "M24 fit   H100 84  8192  64   8  2  768  384 selective 419.7"
  "M24 check H100 92 10240  80   8  4 1536  768 selective 420.5"
  "M24 fit   H100 96 12288  96   8  6 2304 1152 selective 432.8"
  "M24 check H100 96 16384 128   8  8 3072 1536 selective 474.4"
  "M24 fit   H100 112 18432 144  8 16 6144 3072 selective 459.9"
)

printf '%-4s %-5s %-4s %-34s %9s %9s %8s\n' src role gpu layout measured_s predicted_s error
errs_all=(); errs_fit=(); errs_check=()
for r in "${rows[@]}"; do
    read -r sname role gpu L h a tp pp n B rc meas <<<"$r"
    V=51200; s=2048; topo=dgx-a100.xml
    if [[ $sname == M24 ]]; then V=131072; s=4096; topo=dgx-h100.xml; fi
    [[ $gpu == H100 ]] && topo=dgx-h100.xml
    nodes=$(( (n + 7) / 8 ))
    cl=$tmp/c-$topo-$nodes.json
    [[ -f $cl ]] || python3 "$src/bench/gen-cluster.py" -n "$nodes" --rack-size 100000 --topology "$topo" -o "$cl"
    dp=$(( n / (tp * pp) ))
    out=$(cd "$src" && "$bin" --dry-run --cluster "$cl" --tp "$tp" --pp "$pp" --dp "$dp" --micro-batch 1 \
          --global-batch "$B" --num-layers "$L" --hidden-size "$h" --num-attention-heads "$a" \
          --seq-length "$s" --vocab-size "$V" --recompute "$rc" --zero 1 --format json 2>/dev/null || true)
    pred=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metrics"]["cost"]["step_seconds"])' 2>/dev/null || echo nan)
    measured=$(python3 - "$sname" "$B" "$s" "$L" "$h" "$V" "$n" "$meas" <<'PY'
import sys
src, B, s, L, h, V, n, meas = sys.argv[1:]
B, s, L, h, V, n = (float(x) for x in (B, s, L, h, V, n))
if meas.endswith("s"):
    print(meas[:-1]); sys.exit()
tf = float(meas)
if src == "N21":
    flops = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
else:
    flops = 12 * B * s * L * h * h * (2 + s / h + 4 + V / (2 * L * h))
print("%.4f" % (flops / (n * tf * 1e12)))
PY
)
    err=$(python3 -c "import math,sys; p=float('$pred'); m=float('$measured'); print('nan' if math.isnan(p) else '%.4f' % (p/m-1))")
    printf '%-4s %-5s %-4s %-34s %9.2f %9s %+7.1f%%\n' "$sname" "$role" "$gpu" \
        "L$L h$h a$a tp$tp pp$pp dp$dp B$B" "$measured" "$pred" "$(python3 -c "print(100*float('$err'))")"
    errs_all+=("$err")
    if [[ $role == fit ]]; then errs_fit+=("$err"); else errs_check+=("$err"); fi
done
summary() {
    python3 -c '
import sys, statistics
e = [abs(float(x)) for x in sys.argv[2:]]
print("%-26s rows %2d  median |error| %5.1f%%  worst %5.1f%%" % (sys.argv[1], len(e), 100 * statistics.median(e), 100 * max(e)))
' "$@"
}
summary "all" "${errs_all[@]}"
summary "calibrated on (fit)" "${errs_fit[@]}"
summary "kept back (check)" "${errs_check[@]}"
