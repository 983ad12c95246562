#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after `cargo xtask gpu-prepare`:
# `bash bench/gpu/full.sh [GPUS] [LISTS]` runs every shared instance at its own VNN-COMP timeout
# with one build and default CUDA options, one instance at a time per GPU (`vnncomp --jobs 1`: the
# search gets its default workers), one process per GPU (CUDA_VISIBLE_DEVICES), each pinned to its
# share of the host cores (taskset, RAYON_NUM_THREADS). GPU k runs LISTS/gK.csv (instances.csv rows
# with paths relative to LISTS; `bench/gpu/full_lists.py` balances them by expected time), else every
# GPUS-th instance of each set, from the k-th. Rows go to $OUT/full-gK.csv with `--resume`, so a run
# cut short goes on where it stopped. The last line is the tally: results, and the median seconds
# of the solved. Calls of the device tool are at most 10 minutes: start it under `setsid` (it then
# outlives the call) and poll $OUT from later calls. BIN overrides carry/bin/polycert.
set -uo pipefail
OUT="${OUT:-out}"; BIN="${BIN:-carry/bin/polycert}"
gpus="${1:-1}"; lists="${2:-}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device-full.txt" 2>/dev/null || true
per=$(( $(nproc) / gpus )); per=$(( per > 0 ? per : 1 ))
for ((k = 0; k < gpus; k++)); do
  (
    list="$lists/g$k.csv"
    if [ -z "$lists" ]; then
      list=carry/bench/full-g$k.csv; : > "$list"
      for set_ in mnist_fc cifar10_resnet; do
        awk -F, -v g="$gpus" -v k="$k" -v s="$set_" '(NR - 1) % g == k {print s "/" $1 "," s "/" $2 "," $3}' \
          "carry/bench/$set_/instances.csv" >> "$list"
      done
    fi
    cpus="$((per * k))-$((per * k + per - 1))"
    pin() { if command -v taskset > /dev/null; then taskset -c "$cpus" "$@"; else "$@"; fi; }
    CUDA_VISIBLE_DEVICES=$k RAYON_NUM_THREADS=$per pin "$BIN" vnncomp --backend cuda --jobs 1 --resume \
      --instances "$list" --results "$OUT/full-g$k.csv" > "$OUT/full-g$k.log" 2>&1
  ) &
done
wait
rows=$(tail -q -n +2 "$OUT"/full-g*.csv)
counts=$(cut -d, -f3 <<< "$rows" | sort | uniq -c | awk '{printf "%s %d  ", $2, $1}')
median=$(awk -F, '$3 == "unsat" || $3 == "sat" {print $4}' <<< "$rows" | sort -g |
  awk '{t[NR] = $1} END {if (NR) printf "%.4f", NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2}')
echo "full: ${counts}| median of the solved ${median:-none} s" | tee "$OUT/full.done"
