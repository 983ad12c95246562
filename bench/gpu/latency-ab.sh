#!/usr/bin/env bash
# One-property latency of two settings of one build, alternated over ROUNDS (default 3) after a
# warm-up, on the GPU machine after `cargo xtask gpu-prepare`: `--batch 1 --jobs 1 --no-bab` plus
# EXTRA (default `--no-alpha --attack-steps 0`, GPUPoly's work), A with no more flags, B with
# `--set $B` (e.g. `B=passes.late_checks=off`). Prints per-network medians of each round.
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
C=carry
BIN="${BIN:-$C/bin/polycert}"
EXTRA="${EXTRA:---no-alpha --attack-steps 0}"
: "${B:?set B to the key=value of variant B}"
run() {
    local tag=$1
    shift
    for b in mnist_fc cifar10_resnet; do
        # shellcheck disable=SC2086
        "$BIN" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --no-bab $EXTRA "$@" \
            --instances "$C/bench/$b/instances.csv" --results "$OUT/${b}_$tag.csv" > "$OUT/${b}_$tag.log" 2>&1
    done
}
run warm
for r in $(seq 1 "${ROUNDS:-3}"); do
    run "A$r"
    run "B$r" --set "$B"
done
for v in A B; do
    echo "== variant $v ${v/B/--set $B}"
    python3 bench/summarize.py "$OUT"/*_"$v"[0-9]*.csv | tail -n +3 | awk -F'|' '{print $3, $8, $4, $5, $6}' | sort
done
