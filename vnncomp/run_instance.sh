#!/usr/bin/env bash
# VNN-COMP: run_instance.sh v1 CATEGORY ONNX VNNLIB RESULTS_FILE TIMEOUT
# Writes unsat / sat (with the counterexample) / unknown / timeout / error to RESULTS_FILE.
# The run's process id goes to a file of this user's (see prepare_instance.sh).
set -uo pipefail
[ "$1" = "v1" ] || { echo "expected version v1, got $1" >&2; exit 1; }
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PIDS="${POLYCERT_PIDFILE:-${XDG_RUNTIME_DIR:-/tmp}/polycert-vnncomp-$(id -u).pids}"
"${POLYCERT_BIN:-$ROOT/target/release/polycert}" verify --backend "${POLYCERT_BACKEND:-auto}" --model "$3" --vnnlib "$4" \
    --timeout "$6" --result-file "$5" &
pid=$!
echo "$pid" >> "$PIDS"
wait "$pid"
code=$?
sed -i "/^$pid\$/d" "$PIDS" 2>/dev/null
[ $code -eq 2 ] && { [ -s "$5" ] || echo error > "$5"; }
exit 0
