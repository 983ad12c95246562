#!/usr/bin/env bash
# On the GPU machine, from the repository root, with carry/ from
# `cargo xtask gpu-prepare`: the CUDA tests that bear on issue 42 (the cuBLAS
# subnormal probe, CPU against GPU, the conformance suite), the boundary
# hunt's short run with CUDA configurations beside the CPU ones, then the long
# run's shards until DEADLINE seconds after the start. Results under $OUT.
#   bash scripts/boundary_hunt/gpu_run.sh FIRST_SEED DEADLINE [tests]
set -u
first=${1:-1000}; deadline=${2:-540}; tests=${3:-}
t0=$(date +%s)
out=${OUT:-/tmp/out}; mkdir -p "$out"
gpus=$(nvidia-smi -L | wc -l)
{ nvidia-smi -L; nproc; python3 -c "import onnx, onnxruntime, numpy; print('onnx', onnx.__version__, 'onnxruntime', onnxruntime.__version__, 'numpy', numpy.__version__)"; } > "$out/machine.txt" 2>&1
cuda=cuda:f32:point,cuda:f64:point,cuda:f32:interval,cuda:f64:interval
cpu=cpu:f64:point,cpu:f32:point,cpu:f64:interval,cpu:f32:interval
if [ -n "$tests" ]; then
    export POLYCERT_REQUIRE_GPU=1
    { carry/tests/differential --test-threads 1 --nocapture 2>&1; carry/tests/conformance --test-threads 1 2>&1 | tail -5; } > "$out/gpu-tests.txt"
    grep -E "test result|keeps subnormals|FAILED" "$out/gpu-tests.txt"
    python3 scripts/boundary_hunt/hunt.py --polycert carry/bin/polycert --short --configs "$cuda,$cpu" \
        --summary "$out/short.json" --keep /tmp/bh-keep-short > "$out/short.txt" 2>&1 &
fi
reserve=2; [ -n "$tests" ] && reserve=6
jobs=$(( $(nproc) - reserve ))
left=$(( deadline - ($(date +%s) - t0) - 40 ))
python3 scripts/boundary_hunt/shards.py --polycert carry/bin/polycert --jobs "$jobs" --gpus "$gpus" \
    --deadline "$left" --first-seed "$first" --networks 20 --props 10 --timeout 0.5 --configs "$cpu,$cuda" \
    --polycert-arg=--memory-mb=2000 --out "$out/long-$first.json" > "$out/long-$first.txt" 2>&1
wait
tail -3 "$out/long-$first.txt"; tail -2 "$out/short.txt" 2>/dev/null
tar czf "$out/keep.tgz" /tmp/bh-shards/s*/keep /tmp/bh-keep-short 2>/dev/null
echo "done in $(( $(date +%s) - t0 )) s"
