#!/usr/bin/env bash
# Runs on the GPU machine after `cargo xtask gpu-prepare`: the GPU tests,
# then the pooled convnet and the ACAS Xu subset on CUDA (issue 45).
# Results go to $OUT (or out/).
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
C=carry
bash bench/gpu/run.sh tests
T="$C/bench/tiny_cnn"
for e in 0.2 0.05; do
    "$C/bin/polycert" verify --backend cuda "$T/cnn.onnx" "$T/cnn_p0_eps$e.vnnlib" --timeout 60 --json \
        > "$OUT/tiny_cnn_eps$e.json" 2> "$OUT/tiny_cnn_eps$e.log"
    echo "tiny_cnn eps $e: $(head -c 400 "$OUT/tiny_cnn_eps$e.json")"
done
"$C/bin/polycert" vnncomp --overwrite --backend cuda --instances "$C/bench/acasxu/instances.csv" \
    --results "$OUT/acas36.csv" > "$OUT/acas36.log" 2>&1
echo "acas: $(tail -n +2 "$OUT/acas36.csv" | cut -d, -f3 | sort | uniq -c | tr '\n' ' ')"
sort -t, -k4 -g "$OUT/acas36.csv" | tail -4 | cut -d, -f1-4
