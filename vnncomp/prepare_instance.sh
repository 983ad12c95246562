#!/usr/bin/env bash
# VNN-COMP: prepare_instance.sh v1 CATEGORY ONNX VNNLIB
# Builds polycert if needed, stops runs that run_instance.sh left behind
# (only those it recorded, never another user's or another tool's), and
# checks that the model and property load.
set -euo pipefail
[ "$1" = "v1" ] || { echo "expected version v1, got $1" >&2; exit 1; }
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${POLYCERT_BIN:-$ROOT/target/release/polycert}"
PIDS="${POLYCERT_PIDFILE:-${XDG_RUNTIME_DIR:-/tmp}/polycert-vnncomp-$(id -u).pids}"
[ -x "$BIN" ] || cargo build --release -p polycert-cli --manifest-path "$ROOT/Cargo.toml" >&2
if [ -f "$PIDS" ]; then
    while read -r pid; do
        # Still a polycert of ours (a pid may have been reused since).
        if [ -n "$pid" ] && [ "$(stat -c %u "/proc/$pid" 2>/dev/null)" = "$(id -u)" ] \
            && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "polycert verify"; then
            kill "$pid" 2>/dev/null || true
        fi
    done < "$PIDS"
    rm -f "$PIDS"
fi
# A zero-step check: load both files (exit 2 on bad input).
"$BIN" verify --model "$3" --vnnlib "$4" --timeout 0.001 --attack-steps 0 > /dev/null 2>&1 || [ $? -ne 2 ]
