#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after `cargo xtask gpu-prepare`
# filled carry/: the GPU test binaries, then the shared benchmarks on CUDA
# (f64 and f32). Results go to $OUT (or out/ when unset).
set -uo pipefail
OUT="${OUT:-out}"
mkdir -p "$OUT"
C=carry
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
pass=0; fail=0
for t in "$C"/tests/*; do
    [ -x "$t" ] || continue
    echo "== $(basename "$t")"
    POLYCERT_BENCH="$C/bench" POLYCERT_REQUIRE_GPU=1 "$t" --test-threads 1 2>&1 | tee "$OUT/test-$(basename "$t").log" | grep -E "^test |test result"
    p=$(grep -oE "[0-9]+ passed" "$OUT/test-$(basename "$t").log" | awk '{s+=$1} END {print s+0}')
    f=$(grep -oE "[0-9]+ failed" "$OUT/test-$(basename "$t").log" | awk '{s+=$1} END {print s+0}')
    pass=$((pass + p)); fail=$((fail + f))
done
echo "GPU tests: $pass passed, $fail failed"
[ "${1:-}" = "tests" ] && exit 0
for prec in f64 f32; do
    for b in mnist_fc cifar10_resnet; do
        [ -f "$C/bench/$b/instances.csv" ] || continue
        "$C/bin/polycert" vnncomp --overwrite --backend cuda --precision "$prec" --instances "$C/bench/$b/instances.csv" \
            --results "$OUT/${b}_cuda_${prec}.csv" > "$OUT/${b}_cuda_${prec}.log" 2>&1
        echo "$b $prec: $(tail -n +2 "$OUT/${b}_cuda_${prec}.csv" | cut -d, -f3 | sort | uniq -c | tr '\n' ' ')"
    done
done
