#!/usr/bin/env bash
# VNN-COMP: run_instance.sh v1 CATEGORY ONNX VNNLIB RESULTS_FILE TIMEOUT
# Writes unsat / sat (with the counterexample) / unknown / timeout / error to RESULTS_FILE.
set -uo pipefail
[ "$1" = "v1" ] || { echo "expected version v1, got $1" >&2; exit 1; }
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"${POLYCERT_BIN:-$ROOT/target/release/polycert}" verify --backend "${POLYCERT_BACKEND:-auto}" --model "$3" --vnnlib "$4" \
    --timeout "$6" --result-file "$5"
code=$?
[ $code -eq 2 ] && { [ -s "$5" ] || echo error > "$5"; }
exit 0
