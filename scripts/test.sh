#!/usr/bin/env bash
# Installs what the tests need (m4 for rug's GMP build; numpy, onnx and
# onnxruntime for the boundary hunt) and runs them all:
# the self-contained workspace tests, then the benchmark tests that read
# ../shared (ignored, and reported so, where it was absent at build time).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v m4 >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq m4; else sudo apt-get install -y m4; fi
fi
# Default members: everything but xtask (its codegen tools need not build for tests).
cargo test
# The boundary hunt's short run: generated ONNX files and VNNLIB properties
# through the binary the tests built, judged by onnxruntime (float32, CPU).
python3 -m pip install -q --disable-pip-version-check numpy onnx onnxruntime
python3 scripts/boundary_hunt/hunt.py --polycert target/debug/polycert --short \
    --keep target/boundary-hunt/violations --summary target/boundary-hunt/summary.json
