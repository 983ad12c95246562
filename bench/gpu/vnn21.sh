#!/usr/bin/env bash
# Runs public VNN-COMP 2021 benchmarks copied into carry/vnn21/<name>/ (an
# instances.csv plus its files; see bench/results for how they were fetched)
# with `polycert vnncomp`. Usage: vnn21.sh BACKEND [names...]; results in $OUT.
set -uo pipefail
OUT="${OUT:-out}"
BIN="${POLYCERT:-carry/bin/polycert}"
backend="$1"; shift
mkdir -p "$OUT"
for b in "$@"; do
    csv="carry/vnn21/$b/instances.csv"
    [ -f "$csv" ] || { echo "$b: no $csv"; continue; }
    s=$(date +%s%N)
    "$BIN" vnncomp --overwrite --backend "$backend" --instances "$csv" --results "$OUT/${b}_$backend.csv" \
        > "$OUT/${b}_$backend.log" 2>&1
    e=$(date +%s%N)
    echo "$b $backend: $(tail -n +2 "$OUT/${b}_$backend.csv" | cut -d, -f3 | sort | uniq -c | tr '\n' ' ') in $(( (e - s) / 1000000 )) ms"
done
