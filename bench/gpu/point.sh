#!/usr/bin/env bash
# Point-arithmetic benchmarks on the GPU machine, after `cargo xtask gpu-prepare --bench`
# (binaries, shared benchmarks) with the MNIST test set in carry/data: the shared benchmarks in
# five configurations, MNIST test images on mnist-net_256x6 at eps 0.03, and GEMM throughput.
# Results go to $OUT; the last lines are a summary table.
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
C=carry
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
run() {
    local tag=$1
    shift
    for b in mnist_fc cifar10_resnet; do
        "$C/bin/polycert" vnncomp --overwrite --backend cuda "$@" --instances "$C/bench/$b/instances.csv" \
            --results "$OUT/${b}_$tag.csv" > "$OUT/${b}_$tag.log" 2>&1
    done
}
run point_f64 --precision f64
run point_f64_noattack --precision f64 --attack-steps 0
run point_f32 --precision f32
run interval_f64 --precision f64 --arith interval
run interval_f64_noattack --precision f64 --arith interval --attack-steps 0
if [ -f "$C/data/t10k-images-idx3-ubyte.gz" ]; then
    n="${COUNT:-1000}"
    t0=$(date +%s.%N)
    "$C/bin/polycert" verify --backend cuda --model "$C/bench/mnist_fc/mnist-net_256x6.onnx" \
        --images "$C/data/t10k-images-idx3-ubyte.gz" --eps 0.03 --count "$n" --json > "$OUT/mnist_${n}.jsonl" 2> "$OUT/mnist_${n}.log"
    t1=$(date +%s.%N)
    echo "mnist-net_256x6 eps 0.03, $n test images: $(python3 -c "print(round($t1-$t0,2))") s wall" | tee "$OUT/mnist_${n}.txt"
    grep -o '"result":"[a-z]*"' "$OUT/mnist_${n}.jsonl" | sort | uniq -c | tee -a "$OUT/mnist_${n}.txt"
fi
[ -x "$C/bin/gemm_bench" ] && "$C/bin/gemm_bench" cuda > "$OUT/gemm.txt" 2>&1 && cat "$OUT/gemm.txt"
python3 bench/summarize.py "$OUT"/*_point_f64.csv "$OUT"/*_point_f64_noattack.csv "$OUT"/*_point_f32.csv \
    "$OUT"/*_interval_f64.csv "$OUT"/*_interval_f64_noattack.csv | tee "$OUT/summary.md"
