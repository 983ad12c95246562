#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after `cargo xtask gpu-prepare`:
# `bash bench/gpu/full.sh [GPUS]` runs every shared instance (carry/bench/{mnist_fc,cifar10_resnet})
# at its own VNN-COMP timeout with one build, default CUDA options, one `vnncomp` process per GPU
# (CUDA_VISIBLE_DEVICES; GPU k takes every GPUS-th instance of each set, from the k-th). Rows go to
# $OUT/full-SET-gK.csv; the last line is the tally: results, and the median seconds of the solved.
# BIN overrides carry/bin/polycert.
set -uo pipefail
OUT="${OUT:-out}"; BIN="${BIN:-carry/bin/polycert}"
gpus="${1:-1}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device-full.txt" 2>/dev/null || true
for ((k = 0; k < gpus; k++)); do
  (
    for set_ in mnist_fc cifar10_resnet; do
      dir=carry/bench/$set_
      awk -v g="$gpus" -v k="$k" '(NR - 1) % g == k' "$dir/instances.csv" > "$dir/full-g$k.csv"
      CUDA_VISIBLE_DEVICES=$k "$BIN" vnncomp --overwrite --backend cuda --instances "$dir/full-g$k.csv" \
        --results "$OUT/full-$set_-g$k.csv" > "$OUT/full-$set_-g$k.log" 2>&1
    done
  ) &
done
wait
rows=$(tail -q -n +2 "$OUT"/full-*-g*.csv)
counts=$(cut -d, -f3 <<< "$rows" | sort | uniq -c | awk '{printf "%s %d  ", $2, $1}')
median=$(awk -F, '$3 == "unsat" || $3 == "sat" {print $4}' <<< "$rows" | sort -g |
  awk '{t[NR] = $1} END {if (NR) printf "%.4f", NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2}')
echo "full: ${counts}| median of the solved ${median:-none} s"
