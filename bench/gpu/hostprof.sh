#!/usr/bin/env bash
# Host-time profile of one-property latency on the GPU machine: a binary built with
# `--features pprof` (BIN, unstripped) runs an instances file (INST, e.g. one network's
# instances repeated) with `--batch 1 --jobs 1 --no-bab` plus EXTRA (default GPUPoly's work),
# sampled by pprof (POLYCERT_PPROF), then once more with POLYCERT_PROFILE and
# POLYCERT_CUDA_TRACE. Prints the heaviest functions and the phase accounts.
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
BIN="${BIN:-carry/bin/polycert-pprof}"
INST="${INST:?set INST to an instances file}"
EXTRA="${EXTRA:---no-alpha --attack-steps 0}"
tag=$(basename "$INST" .csv)
run() {
    # shellcheck disable=SC2086
    "$BIN" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --no-bab $EXTRA \
        --instances "$INST" --results "$OUT/$tag.csv" "$@"
}
run > /dev/null 2>&1   # warm-up (PTX cache, clocks)
t0=$(date +%s.%N)
POLYCERT_PPROF="$OUT/$tag.prof" run > /dev/null 2>&1
echo "pprof run: $(echo "$(date +%s.%N) - $t0" | bc) s wall"
sed -n '1,/## inclusive/p' "$OUT/$tag.prof" | head -70
sed -n '/## inclusive/,$p' "$OUT/$tag.prof" | head -110
POLYCERT_PROFILE=1 POLYCERT_CUDA_TRACE=1 run 2>&1 | grep -v "^\[" | tail -60
