#!/usr/bin/env bash
# FPNA instruments on the GPU machine (after `cargo xtask gpu-prepare`; MNIST
# test images in carry/data/). Results in $OUT.
set -uo pipefail
OUT="${OUT:-out}"
P=carry/bin/polycert
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
for load in 0 4096; do
    for prec in f32 f64; do
        tag="${prec}_load$load"
        $P fpna order --samples 200 --n 1048576 --block 256 --precision $prec --load $load \
            --out "$OUT/order_$tag.csv" 2> "$OUT/order_$tag.log"
        echo "order $tag: $(cat "$OUT/order_$tag.log")"
        $P fpna kendall "$OUT/order_$tag.csv" --histogram 20 --png "$OUT/kendall_$tag.png" > "$OUT/kendall_$tag.txt"
        $P fpna kendall "$OUT/order_$tag.csv" --json > "$OUT/kendall_$tag.json"
        $P fpna reduce --samples 200 --n 1048576 --block 256 --precision $prec --load $load --json \
            > "$OUT/reduce_$tag.json"
        echo "reduce $tag: $(cat "$OUT/reduce_$tag.json")"
    done
done
for b in cuda cpu; do
    $P fpna variability --backend $b --runs 20 --json > "$OUT/variability_embedded_$b.json"; rc=$?
    echo "variability embedded $b: $(cat "$OUT/variability_embedded_$b.json") (rc $rc)"
    for net in 256x2 256x4 256x6; do
        $P fpna variability --backend $b --runs 10 --count 1000 --model carry/bench/mnist_fc/mnist-net_$net.onnx \
            --images carry/data/t10k-images-idx3-ubyte.gz --json > "$OUT/variability_${net}_$b.json"; rc=$?
        echo "variability $net $b: $(cat "$OUT/variability_${net}_$b.json") (rc $rc)"
    done
done
