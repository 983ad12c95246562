#!/usr/bin/env bash
# VNN-COMP: prepare_instance.sh v1 CATEGORY ONNX VNNLIB
# Builds polycert if needed and checks that the model and property load.
set -euo pipefail
[ "$1" = "v1" ] || { echo "expected version v1, got $1" >&2; exit 1; }
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/target/release/polycert"
[ -x "$BIN" ] || cargo build --release -p polycert-cli --manifest-path "$ROOT/Cargo.toml" >&2
pkill -f "polycert verify" 2>/dev/null || true
# A zero-step check: load both files (exit 2 on bad input).
"$BIN" verify --model "$3" --vnnlib "$4" --timeout 0.001 --attack-steps 0 > /dev/null 2>&1 || [ $? -ne 2 ]
