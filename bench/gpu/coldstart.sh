#!/usr/bin/env bash
# The first process on a freshly started GPU machine against later ones (issue 44). Run first thing
# in a device call: the MNIST test set's default command (profiled), then one-property start-up with
# the kernels as cubin and as PTX (CUDA_CACHE_DISABLE=1 makes the driver translate PTX every time),
# without and with polycert's kernel cache. Needs carry/bin/polycert and testset.sh's files.
set -uo pipefail
OUT="${OUT:-out}"; mkdir -p "$OUT"
B="${BIN:-carry/bin/polycert}"
POLYCERT_PROFILE=1 RUNS=1 TAG=cold bash bench/gpu/testset.sh
grep -E "^ +(cuda\.|cli\.)[a-z_.]+: .*calls" "$OUT"/mnist-net_256x6_cold_1.log
one() {
    local name=$1; shift
    /usr/bin/time -f "%e" -o "$OUT/$name.time" env POLYCERT_PROFILE=1 "$@" "$B" verify --backend cuda --json \
        carry/bench/mnist_fc/mnist-net_256x2.onnx carry/bench/mnist_fc/prop_0_0.03.vnnlib > "$OUT/$name.log" 2>&1
    echo "$name $(tail -1 "$OUT/$name.time") s $(grep -o '"result":"[a-z]*"' "$OUT/$name.log")" \
        "$(grep -E 'cuda\.(context|kernels)' "$OUT/$name.log" | awk '{printf "%s %s ms  ", $1, $4}')"
}
for k in 1 2 3; do
    one "cubin_compile_$k" POLYCERT_PTX_CACHE=off
    one "cubin_cached_$k" POLYCERT_PTX_CACHE="$OUT/kc"
    one "ptx_translated_$k" POLYCERT_KERNEL_IMAGE=ptx CUDA_CACHE_DISABLE=1 POLYCERT_PTX_CACHE="$OUT/kc"
    one "ptx_driver_cache_$k" POLYCERT_KERNEL_IMAGE=ptx POLYCERT_PTX_CACHE="$OUT/kc"
done
ls -l "$OUT/kc"
