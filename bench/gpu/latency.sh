#!/usr/bin/env bash
# One-property latency on the GPU machine (issue 8), after `cargo xtask gpu-prepare`: the shared
# instances one at a time (`--batch 1 --jobs 1`), analysis and attack only, then (TRACE=1) the host
# trace (POLYCERT_CUDA_TRACE=1) of each network's instances. BIN overrides the binary (A/B runs).
# Results go to $OUT; the last lines are a summary table.
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
C=carry
BIN="${BIN:-$C/bin/polycert}"
TAG="${TAG:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
one() {
    local tag=$1
    shift
    for b in mnist_fc cifar10_resnet; do
        "$BIN" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 "$@" --instances "$C/bench/$b/instances.csv" \
            --results "$OUT/${b}_$tag$TAG.csv" > "$OUT/${b}_$tag$TAG.log" 2>&1
    done
}
# The default runs branch and bound to the VNN-COMP timeouts: one answer's latency is the analysis
# and the attack (--no-bab), with optimised slopes (nobab) and without (plain, GPUPoly's work).
one warm --no-bab --attack-steps 0
one nobab --no-bab
one plain --no-bab --no-alpha
one noattack --no-bab --no-alpha --attack-steps 0
if [ "${TRACE:-0}" = 1 ]; then
    for net in mnist-net_256x2 mnist-net_256x4 mnist-net_256x6 resnet_2b resnet_4b; do
        for b in mnist_fc cifar10_resnet; do
            grep "$net.onnx," "$C/bench/$b/instances.csv" > "$C/bench/$b/only_$net.csv" || continue
            POLYCERT_CUDA_TRACE=1 POLYCERT_PROFILE=1 "$BIN" vnncomp --overwrite --backend cuda --batch 1 --jobs 1 \
                --instances "$C/bench/$b/only_$net.csv" --results "$OUT/trace_$net$TAG.csv" > "$OUT/trace_$net$TAG.log" 2>&1
        done
    done
fi
python3 bench/summarize.py "$OUT"/*_nobab$TAG.csv "$OUT"/*_plain$TAG.csv "$OUT"/*_noattack$TAG.csv | tee "$OUT/summary$TAG.md"
