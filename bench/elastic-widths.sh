#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# elastic-widths.sh — what --dry-run --min-dp costs: every width from the
# full one down to D is placed (the job's placement less its highest
# replicas, p3d_shrink_plan) and costed (p3d_analyze) when its batch is
# valid. On the 2,048-node fixture (16,384 GPUs, tp 8 pp 8: dp 256,
# gpt3-175b, B 1536, b 1) it prints CPU seconds and peak memory of the dry
# run without --min-dp, with --min-dp 192 (2 valid widths of 65), and with
# --min-dp 128 --batch-tolerance 100 (all 129 widths costed). Figures,
# never pass/fail (bench/ convention).
#
#   bench/elastic-widths.sh          (PAR3DRUN=path/to/par3drun, default build/par3drun)
# Measured (2 shared cores, default build): 0.15 / 0.17 / 0.89 s wall
# (0.04 / 0.05 / 0.43 CPU s), 11 MiB each; before the lost GPUs became a
# bitmap (a list searched per rank) the last case took 5.0 s wall.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${PAR3DRUN:-$here/build/par3drun}
cluster=$here/tests/fixtures/clusters/plan-2048x-dgx-h100-128racks.json
base=(--dry-run --cluster "$cluster" --tp 8 --pp 8 --model gpt3-175b --global-batch 1536 --micro-batch 1)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '{"gpus": 16384, "cases": ['
sep=
for extra in "" "--min-dp 192" "--min-dp 128 --batch-tolerance 100"; do
  # shellcheck disable=SC2086
  /usr/bin/time -o "$tmp" -f '%e %U %S %M' "$bin" "${base[@]}" $extra >/dev/null 2>&1
  read -r wall user sys kb <"$tmp"
  printf '%s\n  {"options": "%s", "seconds": %s, "cpu_seconds": %s, "peak_rss_mib": %d}' "$sep" "$extra" \
    "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')" $((kb / 1024))
  sep=,
done
printf '\n]}\n'
