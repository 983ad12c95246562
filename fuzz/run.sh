#!/usr/bin/env bash
# Fuzzes the ONNX loader, the VNNLIB parser and the image readers with
# cargo-fuzz (libFuzzer), RUNS executions each (default 10^6), with overflow
# checks on. The stable toolchain is enough with RUSTC_BOOTSTRAP=1 (cargo-fuzz
# passes -Z flags). Seeds come from the repository's fixtures.
# Usage: fuzz/run.sh [RUNS]   (needs `cargo install cargo-fuzz`)
set -euo pipefail
cd "$(dirname "$0")"
RUNS="${1:-1000000}"
mkdir -p corpus/onnx corpus/vnnlib corpus/images
cp ../crates/onnx-import/tests/fixtures/ops/*.onnx ../crates/cli/assets/digits_mlp.onnx corpus/onnx/
cp ../crates/cli/tests/fixtures/planted/planted_0[0-4].vnnlib corpus/vnnlib/
{ printf '\x00'; head -c 2000 ../crates/cli/assets/digits_test.csv; } > corpus/images/csv0
for t in onnx vnnlib images; do
    RUSTC_BOOTSTRAP=1 cargo fuzz run "$t" -s none -a "corpus/$t" -- -runs="$RUNS" -max_len=8192 > "fuzz-$t.log" 2>&1
    echo "$t: $(grep -E '^#[0-9]+.*DONE' "fuzz-$t.log" | tail -1)"
done
