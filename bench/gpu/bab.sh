#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after `cargo xtask gpu-prepare`:
# `bash bench/gpu/bab.sh SET FILTER TIMEOUT [EXTRA...]` runs the instances of
# carry/bench/SET/instances.csv whose line matches FILTER (grep -E) with every
# timeout replaced by TIMEOUT seconds (default CUDA options, branch and bound on),
# into $OUT/bab-SET-TAG.csv (TAG: $TAG, default "run"). PROFILE=1: phase times in the log
# (off by default: the profile's shared lock slows search workers).
set -uo pipefail
OUT="${OUT:-out}"; TAG="${TAG:-run}"
mkdir -p "$OUT"
set_="$1"; filter="$2"; timeout="$3"; shift 3
dir=carry/bench/$set_
csv="$dir/bab-$TAG.csv"
grep -E "$filter" "$dir/instances.csv" | awk -F, -v t="$timeout" '{print $1","$2","t}' > "$csv"
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device-$TAG.txt"
POLYCERT_PROFILE=${PROFILE:-0} carry/bin/polycert vnncomp --overwrite --backend cuda --instances "$csv" \
    --results "$OUT/bab-$set_-$TAG.csv" "$@" > "$OUT/bab-$set_-$TAG.log" 2>&1
echo "$set_ $TAG: $(tail -n +2 "$OUT/bab-$set_-$TAG.csv" | cut -d, -f3 | sort | uniq -c | tr '\n' ' ')"
