#!/usr/bin/env bash
# One-property latency of two settings of one build, alternated over ROUNDS (default 3) after a
# warm-up, on the GPU machine after `cargo xtask gpu-prepare`: `--batch 1 --jobs 1 --no-bab` plus
# EXTRA (default `--no-alpha --attack-steps 0`, GPUPoly's work), A with no more flags, B with
# `--set $B` (e.g. `B=passes.late_checks=off`), or B the binary BIN_B (two builds). Prints
# per-network medians of each round: end to end, and less the property's parse. PIN (a core list) runs every process under taskset.
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
C=carry
BIN="${BIN:-$C/bin/polycert}"
EXTRA="${EXTRA:---no-alpha --attack-steps 0}"
: "${B:=}"
BIN_B="${BIN_B:-$BIN}"
[ -n "$B" ] || [ "$BIN_B" != "$BIN" ] || { echo "set B (a key=value) or BIN_B (a binary)"; exit 2; }
run() {
    local tag=$1 bin=$BIN
    shift
    [ "${tag:0:1}" = B ] && bin=$BIN_B
    for b in mnist_fc cifar10_resnet; do
        # shellcheck disable=SC2086
        ${PIN:+taskset -c "$PIN"} "$bin" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --no-bab $EXTRA "$@" \
            --instances "$C/bench/$b/instances.csv" --results "$OUT/${b}_$tag.csv" > "$OUT/${b}_$tag.log" 2>&1
    done
}
run warm
for r in $(seq 1 "${ROUNDS:-3}"); do
    run "A$r"
    if [ -n "$B" ]; then run "B$r" --set "$B"; else run "B$r"; fi
done
for v in A B; do
    echo "== variant $v"
    for r in $(seq 1 "${ROUNDS:-3}"); do
        python3 bench/summarize.py "$OUT"/*_"$v$r".csv | tail -n +3 | awk -F'|' '{printf "%s %s (%s) |", $3, $8, $11}'
        echo
    done
done
